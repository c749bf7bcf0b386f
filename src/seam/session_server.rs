//! The session-server facet: harnesses whose sessions live as threads in a long-lived server
//! process that spex starts once per project (one socket, many threads, several clients at
//! once). The adapter speaks the server's protocol; the runtime engine decides when to start and
//! stop the server, which record a thread belongs to and what its events mean for the record.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::env::Env;

/// The variable spex sets in its own server's environment (and so in every hook that server
/// runs): its threads are answered as a client of the server, never by a hook that waits.
pub const SERVER_MARK: &str = "SPEX_SERVER";

/// Where and how one project's server runs.
pub struct ServerCtx<'a> {
    pub env: &'a Env,
    /// The harness binary and the user's configured arguments for it.
    pub binary: &'a Path,
    pub args: &'a [String],
    /// The server's working directory: the project's main checkout.
    pub main: &'a Path,
    /// The socket the server listens on (0700 per-user folder, short enough for `sun_path`).
    pub socket: &'a Path,
    /// Where the server's output goes (appended).
    pub log: &'a Path,
}

/// How a delivered prompt entered its thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliverMode {
    /// Added to the turn that was running.
    Steer,
    /// Started a new turn.
    Start,
}

/// The server's confirmation of a delivered prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    pub mode: DeliverMode,
    pub turn_id: String,
}

/// How a turn ended, as the server reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnEnd {
    Completed,
    Interrupted,
    /// How it failed, as the adapter read it.
    Failed(crate::store::session::Failure),
}

/// What the server said that no hook reports, in harness-neutral terms.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerEvent {
    /// A thread appeared (a new one, or one loaded again).
    ThreadLoaded { thread: String },
    TurnEnded {
        thread: String,
        turn: String,
        end: TurnEnd,
    },
    /// A shell command of the thread exited non-zero.
    CommandFailed {
        thread: String,
        call_id: String,
        exit_code: i64,
    },
    /// The server no longer holds the thread (closed, archived, unloaded).
    ThreadClosed { thread: String },
    /// A turn of the thread started.
    TurnStarted { thread: String },
    /// The thread made progress (the model streams, an item starts or ends): evidence for
    /// the stall budget that no hook carries.
    Activity { thread: String },
    /// The server reported its account's rate limits, which thread `thread`'s model request
    /// brought.
    RateLimits {
        thread: String,
        reading: crate::store::limits::Reading,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerErrorKind {
    /// Nothing answers on the socket, or the connection dropped.
    Down,
    /// The server does not know the thread.
    UnknownThread,
    /// The server answered with an error.
    Refused,
    /// No answer in time.
    Timeout,
    /// The server could not be started.
    Start,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ServerError {
    pub kind: ServerErrorKind,
    pub message: String,
}

impl ServerError {
    pub fn new(kind: ServerErrorKind, message: impl Into<String>) -> ServerError {
        ServerError {
            kind,
            message: message.into(),
        }
    }
}

/// One harness's server protocol. Every call connects on `ctx.socket`; nothing is cached
/// between calls, so each spex command is one short client.
pub trait SessionServer: Sync {
    /// Starts the server (as a child of the calling process, in a process group of its own)
    /// and waits until it answers; returns its pid.
    fn start(&self, ctx: &ServerCtx, timeout: Duration) -> Result<u32, ServerError>;
    /// Whether a server answers on the socket within `timeout`.
    fn answers(&self, ctx: &ServerCtx, timeout: Duration) -> bool;
    /// A new thread working in `cwd`, ready for other clients to join (named `name`).
    fn start_thread(&self, ctx: &ServerCtx, cwd: &Path, name: &str) -> Result<String, ServerError>;
    /// Whether the server holds the thread now.
    fn loaded(&self, ctx: &ServerCtx, thread: &str) -> Result<bool, ServerError>;
    /// Loads a thread the server does not hold (from the harness's own log of it).
    fn resume_thread(&self, ctx: &ServerCtx, thread: &str) -> Result<(), ServerError>;
    /// Delivers `text` into the thread: into its running turn, else as a new turn.
    fn deliver(&self, ctx: &ServerCtx, thread: &str, text: &str) -> Result<Delivered, ServerError>;
    /// Interrupts the running turn; its id, or `None` when no turn runs.
    fn interrupt(&self, ctx: &ServerCtx, thread: &str) -> Result<Option<String>, ServerError>;
    /// Closes the thread (the server lets go of it).
    fn close_thread(&self, ctx: &ServerCtx, thread: &str) -> Result<(), ServerError>;
    /// The threads the server holds.
    fn threads(&self, ctx: &ServerCtx) -> Result<Vec<String>, ServerError>;
    /// Answers attention `a` of the thread with `response`, as a client of the server (the
    /// request it waits on is fetched again, matched to `a`, answered), and waits for the
    /// server's own confirmation. Default: a server that cannot be answered this way.
    fn answer(
        &self,
        ctx: &ServerCtx,
        thread: &str,
        a: &crate::store::session::Attention,
        response: &crate::seam::answer::Response,
    ) -> Result<crate::seam::answer::Confirmed, ServerError> {
        let _ = (ctx, thread, a, response);
        Err(ServerError::new(
            ServerErrorKind::Refused,
            "this harness's server takes no answers",
        ))
    }
    /// The socket of the harness's own server that holds session `s`, which the person started
    /// outside spex, when that server takes other clients (a per-user background server);
    /// answers to `s` go there. Default: none.
    fn own_server(&self, env: &Env, s: &crate::store::session::Session) -> Option<PathBuf> {
        let _ = (env, s);
        None
    }
    /// The argv of the harness's own terminal UI joined to the thread, which spex runs under
    /// its PTY host (a client of the server: its end does not end the thread).
    fn tui_argv(&self, ctx: &ServerCtx, thread: &str) -> Vec<String>;
    /// Follows the server until it goes away, joining every thread it holds (on start and as
    /// threads appear) and handing each event to `sink`. Returns when the connection ends;
    /// blocks on the socket, never polls.
    fn observe(
        &self,
        ctx: &ServerCtx,
        sink: &mut dyn FnMut(ServerEvent),
    ) -> Result<(), ServerError>;
}
