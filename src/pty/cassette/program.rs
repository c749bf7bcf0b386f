//! Recording a program that is not a harness (a terminal conformance case, `top`, `less`,
//! `vim`) as a cassette: the PTY session, the observation tee and the recorder a hosted session
//! uses, the terminal model answering the program's queries as the host's does, and a script of
//! steps (wait for a text, keys, a paste, a resize, a pause, a frame) standing in for a person.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::json;

use super::format::{CassetteError, Manifest, VERSION};
use super::record::Recorder;
use super::scrub::{Rule, Scrubber};
use crate::hint::Hint;
use crate::pty::session::{Session, Size, Spawn};
use crate::pty::tee::{Event, Tee};
use crate::pty::terminal::Terminal;

/// How long a `wait` step waits for its text, and the program for its exit after the last step.
const WAIT: Duration = Duration::from_secs(20);

/// One step of a recording script.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Until the screen shows this text.
    Wait(String),
    /// Writes these bytes to the program.
    Keys(String),
    /// Writes this text as one bracketed paste.
    Paste(String),
    /// Resizes the terminal to `[rows, cols]`.
    Resize((u16, u16)),
    /// Lets the program run this long.
    SleepMs(u64),
    /// Notes the screen as a frame with this reason (an anchor for specs).
    Frame(String),
}

#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    #[error(transparent)]
    Cassette(#[from] CassetteError),
    #[error(transparent)]
    Pty(#[from] crate::pty::session::PtyError),
    #[error("`{path}`: {message}")]
    Script { path: PathBuf, message: String },
    #[error("step {step}: the screen never showed `{text}` (it shows:\n{screen})")]
    Timeout {
        step: usize,
        text: String,
        screen: String,
    },
    #[error("writing to the program: {0}")]
    Write(#[from] std::io::Error),
}

impl Hint for ProgramError {
    fn hint(&self) -> Option<String> {
        match self {
            ProgramError::Cassette(e) => e.hint(),
            ProgramError::Script { .. } => {
                Some("a script is a JSON list of steps, see docs/reference/assertions.md".into())
            }
            _ => None,
        }
    }
}

/// Reads a script: a JSON list of steps.
pub fn script(path: &Path) -> Result<Vec<Step>, ProgramError> {
    let text = fs_err::read_to_string(path).map_err(|e| ProgramError::Script {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    serde_json::from_str(&text).map_err(|e| ProgramError::Script {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

/// What to record and where.
pub struct Recording<'a> {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    pub size: Size,
    pub env: Vec<(String, String)>,
    pub steps: &'a [Step],
    pub out: PathBuf,
    pub id: String,
    /// Paths to scrub (name, path, placeholder): the checkout, the home folder.
    pub scrub: Vec<(String, String, String)>,
    pub term: Option<String>,
}

/// The program's output read so far, played into the screen a person would see; the replies
/// to its queries go back to it.
struct Screen {
    term: Terminal,
    output: Receiver<Vec<u8>>,
    closed: bool,
}

impl Screen {
    /// Reads output for up to `wait`, until `done` says the screen is what was waited for.
    fn pump(
        &mut self,
        s: &mut Session,
        wait: Duration,
        done: impl Fn(&Terminal) -> bool,
    ) -> std::io::Result<bool> {
        let until = Instant::now() + wait;
        loop {
            if done(&self.term) {
                return Ok(true);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || self.closed {
                return Ok(done(&self.term));
            }
            match self
                .output
                .recv_timeout(left.min(Duration::from_millis(20)))
            {
                Ok(bytes) => {
                    let replies = self.term.feed(&bytes);
                    if !replies.is_empty() {
                        s.write(&replies)?;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => self.closed = true,
            }
        }
    }
}

fn frame(tee: &Tee, term: &Terminal, reason: &str) {
    tee.record(Event::Mark {
        stream: "frames".into(),
        data: json!({"reason": reason, "screen": term.snapshot()}),
    });
}

/// Runs the program under a PTY, drives it through `steps`, records it to `out`, and waits
/// for it to end (killing it if it has not `WAIT` after the last step).
pub fn record(r: &Recording) -> Result<(), ProgramError> {
    let rules = r
        .scrub
        .iter()
        .map(|(name, find, replace)| Rule {
            name: name.clone(),
            find: find.clone(),
            replace: replace.clone(),
        })
        .collect();
    let mut scrubber = Scrubber::new(rules);
    let argv: Vec<String> = r.argv.iter().map(|a| scrubber.scrub_str(a)).collect();
    // Built from JSON: the fields a manifest gains later are optional on read, so this stays
    // a whole manifest without naming them.
    let manifest: Manifest = serde_json::from_value(json!({
        "version": VERSION,
        "id": r.id,
        "content_digest": null,
        "harness": {"id": "program", "binary": argv.first()},
        "command": {"argv": argv, "cwd": "$TREE",
            "env_names": r.env.iter().map(|(k, _)| k).collect::<Vec<_>>()},
        "terminal": {"rows": r.size.rows, "cols": r.size.cols, "term": r.term,
            "locale": null, "model": "vt100", "model_version": "0.16"},
        "timing": {"resolution_ms": 100},
        "provenance": {"spex_version": env!("CARGO_PKG_VERSION"),
            "os": std::env::consts::OS, "arch": std::env::consts::ARCH},
        "capture": "full",
        "replay_default": "real-time",
    }))
    .map_err(|e| CassetteError::Bad {
        path: r.out.join("manifest.json"),
        line: 1,
        message: e.to_string(),
    })?;
    let tee = Tee::new();
    tee.add_sink(Box::new(Recorder::create(&r.out, manifest, scrubber)?));
    let spawn = Spawn {
        argv: r.argv.iter().map(Into::into).collect(),
        cwd: r.cwd.clone(),
        env_clear: false,
        env: r.env.iter().map(|(k, v)| (k.into(), v.into())).collect(),
        env_remove: Vec::new(),
        size: r.size,
    };
    let mut session = Session::spawn(&spawn, Some(tee.clone()))?;
    let mut screen = Screen {
        term: Terminal::new(r.size.rows, r.size.cols),
        output: session.take_output(),
        closed: false,
    };
    let driven = drive(r.steps, &mut session, &mut screen, &tee);
    // The program ends by itself after its last step, or is stopped (at once when a step
    // failed: the recording is not what the script meant).
    if driven.is_ok() {
        let _ = screen.pump(&mut session, WAIT, |_| false);
    }
    if session.wait_timeout(Duration::from_secs(2))?.is_none() {
        session.kill()?;
    }
    frame(&tee, &screen.term, "exit");
    tee.close_sinks();
    driven
}

fn drive(
    steps: &[Step],
    session: &mut Session,
    screen: &mut Screen,
    tee: &Tee,
) -> Result<(), ProgramError> {
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::Wait(text) => {
                if !screen.pump(session, WAIT, |t| t.text().contains(text.as_str()))? {
                    return Err(ProgramError::Timeout {
                        step: i,
                        text: text.clone(),
                        screen: crate::text::visible_lines(&screen.term.text()),
                    });
                }
            }
            Step::Keys(keys) => session.write(keys.as_bytes())?,
            Step::Paste(text) => session.write(format!("\x1b[200~{text}\x1b[201~").as_bytes())?,
            Step::Resize((rows, cols)) => {
                let size = Size {
                    rows: *rows,
                    cols: *cols,
                };
                session.resize(size)?;
                screen.term.resize(*rows, *cols);
            }
            Step::SleepMs(ms) => {
                screen.pump(session, Duration::from_millis(*ms), |_| false)?;
            }
            Step::Frame(reason) => frame(tee, &screen.term, reason),
        }
    }
    Ok(())
}
