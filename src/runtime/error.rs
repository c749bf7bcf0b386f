//! What can go wrong in the runtime (`RuntimeError`), with the words that explain a session's
//! end; the types every part of the runtime speaks, so they sit below all of them.

use std::path::{Path, PathBuf};

use crate::hint::Hint;
use crate::store::session::Session;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("spex does not host `{0}` sessions in a terminal")]
    NotHosted(String),
    #[error("`{path}`: {message}")]
    RuntimeDir {
        path: PathBuf,
        message: String,
        hint: String,
    },
    #[error(
        "session `{id}` has no running host (nothing answers on `{socket}`): the host was killed or crashed, which ends the session"
    )]
    HostGone { id: String, socket: PathBuf },
    #[error(
        "session `{id}` runs (its host, pid {pid}, is alive), but its socket `{socket}` is gone and the host could not listen there again"
    )]
    Unreachable {
        id: String,
        pid: u32,
        socket: PathBuf,
    },
    #[error(
        "session `{id}` has exited ({how}){}",
        .when.as_deref().map(|w| format!(" at {w}")).unwrap_or_default()
    )]
    Exited {
        id: String,
        /// How it ended: the reason and the program's exit status, in a few words.
        how: String,
        when: Option<String>,
    },
    /// The session lives on in its harness's server, but the terminal UI spex hosted on it was
    /// quit (the host ends with it): nothing shows its screen until `attach` opens one again.
    #[error(
        "session `{id}` runs on in the project's server, but no terminal is open on it (its terminal UI was quit), so spex cannot {what} it"
    )]
    NoTerminal { id: String, what: &'static str },
    /// The session runs in a terminal of its own that spex does not host (the person started
    /// the harness there): spex can read its hooks, never type into it or signal it.
    #[error(
        "session `{id}` runs in a terminal of its own that spex does not host (it was not started by `spex launch`), so spex cannot {what} it"
    )]
    NotHostedHere {
        id: String,
        what: &'static str,
        hint: &'static str,
    },
    #[error(
        "session `{id}` has a {reason} dialog open{}: {text}\nspex types nothing into a dialog: a delivery is a prompt, and a dialog takes keys as its answer",
        attention.as_ref().map(|a| format!(" (attention `{a}`)")).unwrap_or_default()
    )]
    NeedsAttention {
        id: String,
        reason: String,
        text: String,
        /// The open attention's id, when the record holds one.
        attention: Option<String>,
    },
    /// An answer that could not be tried: finding the way to the session failed (the inner
    /// error says why, with its hint); `--json` still calls it `not_answered`.
    #[error(transparent)]
    NoWayToAnswer(Box<RuntimeError>),
    /// An answer that was refused or not confirmed: why, and what to do.
    #[error("{message}")]
    NotAnswered {
        id: String,
        message: String,
        hint: String,
    },
    /// A capability `spex check` found broken for the session's harness version: why, and
    /// what to do instead.
    #[error("{message}")]
    SwitchedOff {
        id: String,
        message: String,
        hint: String,
    },
    #[error("the launch of session `{id}` was interrupted (Ctrl-C)")]
    Cancelled { id: String },
    #[error("the host of session `{id}` refused: {message}")]
    Refused { id: String, message: String },
    #[error("session `{id}` did not become ready for input within {secs} s; its screen:\n{screen}")]
    NotReady {
        id: String,
        secs: u64,
        screen: String,
    },
    #[error("session `{id}` cannot start: {what}; its screen:\n{screen}")]
    Blocked {
        id: String,
        what: String,
        hint: String,
        screen: String,
    },
    #[error(
        "session `{id}` stopped at a screen spex does not know (no prompt, unchanged for {secs} s); its screen:\n{screen}"
    )]
    Stuck {
        id: String,
        secs: u64,
        screen: String,
    },
    #[error(
        "session `{id}` is at its prompt, but its start hook has not reported in {secs} s, so spex would see none of its turns; its screen:\n{screen}"
    )]
    NoStart {
        id: String,
        secs: u64,
        screen: String,
    },
    #[error("the host of session `{id}` ended before it was ready; its log `{log}`:\n{text}")]
    HostFailed {
        id: String,
        log: PathBuf,
        text: String,
        hint: String,
    },
    #[error("session `{id}` did not report the prompt within {secs} s")]
    NotConfirmed { id: String, secs: u64 },
    #[error("session `{id}` was still running its turn {secs} s after the interrupt")]
    NotInterrupted { id: String, secs: u64 },
    #[error("session `{id}`: {message}")]
    Server {
        id: String,
        message: String,
        hint: String,
    },
    /// The project's server failed before any one session was involved.
    #[error("the {harness} server of this project: {message}")]
    ServerWide {
        harness: String,
        message: String,
        hint: String,
    },
    #[error("session `{id}` names harness `{harness}`, which this spex does not know")]
    UnknownHarness { id: String, harness: String },
    #[error(transparent)]
    Store(#[from] crate::store::session::StoreError),
    /// An IO error of something that is not a file operation (a spawn, a socket) at `path`.
    #[error("`{path}`: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// An error of `fs_err` (or of `fsutil`, worded the same way): it names its path itself.
    #[error(transparent)]
    Fs(std::io::Error),
}

impl RuntimeError {
    /// The session has exited, as its record says: how and when.
    pub fn exited(s: &Session) -> RuntimeError {
        RuntimeError::Exited {
            id: s.id.clone(),
            how: how_it_ended(s),
            when: s.since.clone().or_else(|| Some(s.updated_at.clone())),
        }
    }

    /// Whether the error means the session is gone (its program or host ended).
    pub fn gone(&self) -> bool {
        matches!(
            self,
            RuntimeError::HostGone { .. } | RuntimeError::Exited { .. }
        )
    }

    /// A stable word for what went wrong, for `--json` answers.
    pub fn reason(&self) -> &'static str {
        match self {
            RuntimeError::HostGone { .. } => "host_gone",
            RuntimeError::Unreachable { .. } => "host_unreachable",
            RuntimeError::Exited { .. } => "exited",
            RuntimeError::NeedsAttention { .. } => "needs_attention",
            RuntimeError::NoWayToAnswer(_) | RuntimeError::NotAnswered { .. } => "not_answered",
            RuntimeError::NotConfirmed { .. } => "not_confirmed",
            RuntimeError::SwitchedOff { .. } => "switched_off",
            RuntimeError::Refused { .. } => "refused",
            RuntimeError::NotHostedHere { .. } => "not_hosted",
            RuntimeError::NoTerminal { .. } => "no_terminal",
            _ => "error",
        }
    }
}

impl Hint for RuntimeError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            RuntimeError::NotHosted(_) => {
                "start it yourself; spex records it through its hooks".to_owned()
            }
            RuntimeError::RuntimeDir { hint, .. }
            | RuntimeError::NotAnswered { hint, .. }
            | RuntimeError::SwitchedOff { hint, .. }
            | RuntimeError::HostFailed { hint, .. }
            | RuntimeError::Server { hint, .. }
            | RuntimeError::ServerWide { hint, .. } => hint.clone(),
            RuntimeError::HostGone { id, .. } | RuntimeError::Exited { id, .. } => {
                format!("`spex resume {id}` brings it back; `spex launch` starts a new one")
            }
            RuntimeError::Unreachable { id, pid, socket } => format!(
                "make `{}` a folder you own again (it went with `$XDG_RUNTIME_DIR`; logging in again brings that back), then `kill -USR1 {pid}` makes the host listen again; `spex stop {id}` is not needed",
                socket
                    .parent()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            ),
            RuntimeError::NoTerminal { id, .. } => {
                format!("`spex attach {id}` opens its terminal again")
            }
            RuntimeError::NotHostedHere { hint, .. } => (*hint).to_owned(),
            RuntimeError::NeedsAttention { id, attention, .. } => match attention {
                Some(a) => format!(
                    "answer it: `spex answer {id} <choice> --attention {a}` (`spex show {id}` lists its choices), or in its terminal (`spex attach {id}`); then deliver"
                ),
                None => format!(
                    "answer the dialog in the session's terminal (`spex attach {id}`), then deliver"
                ),
            },
            RuntimeError::NotReady { id, .. } => format!(
                "answer that screen with `spex attach {id}`, or prepare the harness so it starts straight into its prompt"
            ),
            RuntimeError::Blocked { id, hint, .. } => format!(
                "{hint}; while the session still shows that screen, `spex attach {id}` answers it and `spex stop {id}` ends it"
            ),
            RuntimeError::Stuck { id, .. } => format!(
                "answer it with `spex attach {id}` (`spex stop {id}` ends the session), or prepare the harness so it starts straight into its prompt"
            ),
            RuntimeError::NoStart { id, .. } => format!(
                "`spex doctor` checks this checkout's hooks (shims and trust); `spex stop {id}` ends the session"
            ),
            RuntimeError::NotConfirmed { id, .. } | RuntimeError::NotInterrupted { id, .. } => {
                format!("`spex snapshot {id}` shows its screen")
            }
            // Transparent: the inner error is not a link of the chain of its own.
            RuntimeError::NoWayToAnswer(e) => return e.hint(),
            RuntimeError::Store(e) => return e.hint(),
            RuntimeError::Cancelled { .. }
            | RuntimeError::Refused { .. }
            | RuntimeError::Io { .. }
            | RuntimeError::Fs(_)
            | RuntimeError::UnknownHarness { .. } => return None,
        })
    }
}

pub(super) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RuntimeError + '_ {
    move |source| RuntimeError::Io {
        path: path.to_owned(),
        source,
    }
}

/// How a session's program ended, in a few words: why (as recorded) and its exit status.
pub fn how_it_ended(s: &Session) -> String {
    let status = s.exited_with().map(|e| match (e.code, e.signal) {
        (_, Some(sig)) => format!("signal {sig}"),
        (Some(code), None) => format!("exit code {code}"),
        (None, None) => "unknown status".to_owned(),
    });
    match (s.exit_reason.as_deref(), status) {
        (Some(r), Some(st)) => format!("{r}, {st}"),
        (Some(r), None) => r.to_owned(),
        (None, Some(st)) => st,
        (None, None) => "unknown status".to_owned(),
    }
}
