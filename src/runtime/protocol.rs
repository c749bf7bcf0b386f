//! The PTY host's socket protocol, version 1: one JSON request line, one JSON response line.
//! After a successful `attach` the connection carries raw terminal bytes both ways.

use serde::{Deserialize, Serialize};

use crate::pty::terminal::Snapshot;

pub const VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    Ping,
    /// Type `text` as one paste, then (with `submit`) Enter after the harness's pause. With
    /// `clear`, the harness's clear key goes first whatever the screen shows: keys are taken in
    /// order, so text that reached the harness but is not drawn yet goes too.
    Inject {
        text: String,
        submit: bool,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        clear: bool,
    },
    Snapshot,
    /// Type `keys` as they are (an answer to a dialog), only while the screen shows every text
    /// in `expect`; refused, typing nothing, when it does not.
    Keys {
        expect: Vec<String>,
        keys: Vec<u8>,
    },
    /// The screen with the last `lines` rows that scrolled off it (the host keeps a bounded
    /// number).
    Scrollback {
        lines: usize,
    },
    Resize {
        rows: u16,
        cols: u16,
    },
    /// Stream the terminal: the screen is redrawn, then raw output follows; raw input bytes
    /// sent back go to the program. With `read_only` the client only watches: the host drops
    /// every byte it sends and never resizes the session to it (`rows`, `cols` are only noted);
    /// the answer carries the session's screen (its size), and when the session is resized
    /// later the stream carries `CSI 8 ; rows ; cols t` before the redraw at the new size.
    /// Several may watch at once, beside terminals that type. A recording notes each watcher
    /// joining and leaving as a service event (`observer.joined`, `observer.left`), never as
    /// input.
    Attach {
        rows: u16,
        cols: u16,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        read_only: bool,
    },
    /// Start recording into `dir` (from now on), or with `None` stop and finish the recording.
    Record {
        dir: Option<std::path::PathBuf>,
    },
    /// The running recording misses part of the session (the launch failed at a screen spex
    /// cannot answer): its capture is `partial`, for `reason`. Nothing happens when the session
    /// is not recorded.
    Incomplete {
        reason: String,
    },
    /// Send the harness's interrupt keys (the turn ends `interrupted` once the screen is idle).
    Interrupt,
    /// Show a desktop notification in the attached terminals (OSC 9 and OSC 777), about another
    /// session: the notifier's terminal channel. Control characters are taken out by the host.
    Notice {
        title: String,
        body: String,
    },
    /// End the program: SIGTERM to its process group, SIGKILL after `grace_ms`.
    Stop {
        grace_ms: u64,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Envelope {
    pub v: u32,
    #[serde(flatten)]
    pub request: Request,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The host's pid and the program's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<Snapshot>,
    /// To an `inject` with text: whether the screen showed the text in the input box before
    /// its Enter (`None`: the screen cannot tell, its box not known empty before the paste).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landed: Option<bool>,
}

impl Response {
    pub fn fail(message: impl Into<String>) -> Response {
        Response {
            ok: false,
            error: Some(message.into()),
            ..Response::default()
        }
    }
}
