//! Codex's own evidence about a session: its process, and how its turn ended.
//!
//! The process: the Codex process that holds a thread open is the server it runs in (the
//! managed background app-server by default, the TUI itself with `--no-daemon`, or a
//! `codex app-server` spex or a script started); it keeps the thread's rollout log (the
//! `transcript_path` of every hook payload) open while the thread is loaded. For a session the
//! person started, found once by that open file, then checked by pid and start time. A
//! session spex launched carries the pid and start time of the server spex started (recorded
//! at launch) and is never looked up by who holds a file: any process can open a log (a
//! pager, a backup, a hook), and a pid found that way may be gone or reused while the server
//! runs on. When the process dies without a `SessionEnd` (`kill -9`, a crash) every thread it
//! held is over: `exited`, `server gone`.
//!
//! The turn: `PostModelRequest` fires once per reconnect attempt with
//! `status: failed` and the error; a retry fires `PreModelRequest` first; after the last failed
//! attempt Codex fires nothing more (no Stop; docs/harnesses/facts/codex.md §8). So a failed attempt that no
//! new attempt followed within [`RETRY_BOUND`] ended the turn: failed, with that error. The
//! same holds for a sub-agent (its payloads carry `agent_id`): it fires neither `SubagentStop`
//! nor anything else after its last failed attempt (seen live with 0.169.0), so it failed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::env::Env;
use crate::seam::evidence::{self, Evidence, Finding};
use crate::store::session::{ChildState, ErrorKind, Failure, LaunchedBy, ProcessId, Session};

pub struct CodexEvidence;

impl evidence::Observer for CodexEvidence {
    fn observe(&self, _env: &Env, sessions: &[&Session]) -> Vec<(usize, Evidence)> {
        observe(sessions)
    }

    fn evidence_dirs(&self, _env: &Env, _session: &Session) -> evidence::Watch {
        // What `observe` reads is the process table and spex's server, not a folder.
        Vec::new()
    }

    fn read_log(&self, _session: &Session) -> Option<evidence::LogReading> {
        // Codex's hooks carry its usage (`PostModelRequest`) and its server the failed turn.
        None
    }

    fn next_look(&self, s: &Session) -> Option<SystemTime> {
        // A failed attempt ends its turn (or sub-agent) once no new one followed within the
        // bound: nothing else happens then to wake a watcher.
        let at = |t: Option<&str>| Some(crate::store::parse_time(t?)? + RETRY_BOUND);
        let turn = s
            .turn
            .as_ref()
            .filter(|_| s.turn_running())
            .and_then(|t| at(t.attempt_failed_at.as_deref()));
        let children = s
            .children
            .iter()
            .filter(|c| c.state == ChildState::Running)
            .filter_map(|c| at(c.attempt_failed_at.as_deref()));
        turn.into_iter().chain(children).min()
    }
}

/// How a turn the app-server reported `failed` (`turn/completed`, `turn.status: failed`)
/// failed: `turn.error.message`, and its kind from `turn.error.codexErrorInfo` (a string, or an
/// object keyed by the variant; the `CodexErrorInfo` schema `codex app-server
/// generate-json-schema` of 0.169.0 prints).
pub(super) fn turn_failure(turn: &Value) -> Failure {
    let error = &turn["error"];
    let text = error["message"].as_str().unwrap_or("the turn failed");
    let info = match &error["codexErrorInfo"] {
        Value::String(s) => s.as_str(),
        Value::Object(m) => m.keys().next().map_or("", String::as_str),
        _ => "",
    };
    let kind = match info {
        "usageLimitExceeded" | "rateLimitExceeded" | "sessionBudgetExceeded" => {
            ErrorKind::RateLimit
        }
        "unauthorized" => ErrorKind::Authentication,
        "inferenceHookDenied" => ErrorKind::HookBlock,
        "sandboxError" => ErrorKind::ToolFailure,
        "" | "other" => ErrorKind::Unknown,
        _ => ErrorKind::ModelError,
    };
    Failure::new(text, kind)
}

/// Longer than Codex's backoff between reconnect attempts.
pub const RETRY_BOUND: Duration = Duration::from_secs(8);

fn judge(s: &Session, now: SystemTime) -> Option<Evidence> {
    let quiet_since = |at: Option<&str>| {
        let failed_at = crate::store::parse_time(at?)?;
        Some(now.duration_since(failed_at).ok()? >= RETRY_BOUND)
    };
    // A sub-agent's failed request is followed by nothing either (seen live: no SubagentStop).
    let child_failures: Vec<(String, Failure)> = s
        .children
        .iter()
        .filter(|c| c.state == ChildState::Running)
        .filter(|c| quiet_since(c.attempt_failed_at.as_deref()) == Some(true))
        .map(|c| {
            let error = c
                .error
                .clone()
                .unwrap_or_else(|| "model request failed".into());
            (c.id.clone(), Failure::new(error, ErrorKind::ModelError))
        })
        .collect();
    let turn_failed = s
        .turn
        .as_ref()
        .filter(|_| s.turn_running())
        .filter(|t| quiet_since(t.attempt_failed_at.as_deref()) == Some(true));
    if turn_failed.is_none() && child_failures.is_empty() {
        return None;
    }
    let why = format!(
        "the model request failed and Codex started no new attempt within {} s",
        RETRY_BOUND.as_secs()
    );
    Some(Evidence {
        observed: s.observed.clone(),
        finding: turn_failed.map(|t| {
            Finding::TurnFailed(Failure::new(
                t.note.clone().unwrap_or_default(),
                ErrorKind::ModelError,
            ))
        }),
        source: "hook PostModelRequest".into(),
        why: Some(why),
        child_failures,
        ..Evidence::default()
    })
}

/// Which process holds each of `wanted` open: one walk over `/proc/*/fd`.
fn holders(wanted: &[&Path]) -> HashMap<PathBuf, ProcessId> {
    let mut out = HashMap::new();
    let Ok(procs) = fs_err::read_dir("/proc") else {
        return out;
    };
    for p in procs.filter_map(Result::ok) {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = fs_err::read_dir(p.path().join("fd")) else {
            continue;
        };
        for fd in fds.filter_map(Result::ok) {
            let Ok(target) = fs_err::read_link(fd.path()) else {
                continue;
            };
            if wanted.contains(&target.as_path())
                && let Some(start) = evidence::process_start(pid)
            {
                out.entry(target).or_insert(ProcessId { pid, start });
            }
        }
        if out.len() == wanted.len() {
            break;
        }
    }
    out
}

/// Whether `pid` is Codex's managed app-server daemon (the TUI's default mode starts it as
/// `codex app-server --listen unix:// --managed-daemon`; it outlives the TUI).
pub(super) fn is_managed_daemon(pid: u32) -> bool {
    fs_err::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
        let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
        args.contains(&&b"app-server"[..]) && args.contains(&&b"--managed-daemon"[..])
    })
}

/// Whether this process runs under Codex's managed daemon (a hook of a thread the daemon
/// holds: its hooks are the daemon's children, docs/harnesses/facts/answering-codex.md §3). Runs on the hook
/// path: it reads up the parents only to the first Codex process (two reads when Codex ran the
/// hook itself; a shell may stand between).
pub(super) fn under_managed_daemon() -> bool {
    let mut pid = std::process::id();
    for _ in 0..3 {
        let Some(parent) = evidence::parent_of(pid) else {
            return false;
        };
        let Ok(cmdline) = fs_err::read(format!("/proc/{parent}/cmdline")) else {
            return false;
        };
        let mut args = cmdline.split(|b| *b == 0);
        let program = args.next().unwrap_or_default();
        if program.rsplit(|b| *b == b'/').next() == Some(b"codex") {
            let args: Vec<&[u8]> = args.collect();
            return args.contains(&&b"app-server"[..]) && args.contains(&&b"--managed-daemon"[..]);
        }
        pid = parent;
    }
    false
}

/// The working directories of the Codex TUIs running (processes of a binary named `codex`
/// that run no subcommand of a server or of `exec`): one walk over `/proc`.
fn tui_dirs() -> Vec<PathBuf> {
    let Ok(procs) = fs_err::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .filter_map(Result::ok)
        .filter(|p| {
            p.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter(|p| {
            fs_err::read_link(p.path().join("exe"))
                .is_ok_and(|exe| exe.file_name().is_some_and(|n| n == "codex"))
        })
        .filter(|p| {
            fs_err::read(p.path().join("cmdline")).is_ok_and(|c| {
                let sub = c.split(|b| *b == 0).nth(1).unwrap_or_default();
                !matches!(sub, b"app-server" | b"exec" | b"e" | b"mcp-server")
            })
        })
        .filter_map(|p| fs_err::read_link(p.path().join("cwd")).ok())
        .collect()
}

/// The process evidence of `s`: its holder to record, its holder gone, or (for a thread the
/// managed daemon holds) whether a TUI is still attached. `tuis` is computed on first use.
fn liveness(
    s: &Session,
    found: &HashMap<PathBuf, ProcessId>,
    tuis: &mut Option<Vec<PathBuf>>,
) -> Option<Evidence> {
    let (holder, record) = match s.process_id() {
        Some(p) if !evidence::alive(p) => {
            let whose = if launched_by_spex(s) {
                "the project's server, which spex started for this thread,"
            } else {
                "the Codex process that held this thread"
            };
            return Some(Evidence {
                child_failures: Vec::new(),
                attended: None,
                process: None,
                observed: s.observed.clone(),
                finding: Some(Finding::Gone("server gone")),
                source: "liveness check".into(),
                why: Some(format!(
                    "{whose} (pid {}) is gone and no SessionEnd came",
                    p.pid
                )),
            });
        }
        Some(p) => (p, false),
        None if launched_by_spex(s) => return None,
        None => (*found.get(s.transcript.as_deref()?)?, true),
    };
    // A TUI in default mode talks to the daemon, which keeps the thread after the TUI is
    // gone (no SessionEnd; docs/harnesses/facts/codex.md §8): no TUI running in the session's tree means
    // nobody is attached. (A TUI there may be on another thread: then this says attended.)
    let attended = is_managed_daemon(holder.pid).then(|| {
        tuis.get_or_insert_with(tui_dirs)
            .iter()
            .any(|d| d.starts_with(&s.tree))
    });
    (record || attended != s.attended).then(|| Evidence {
        child_failures: Vec::new(),
        attended,
        process: Some(holder),
        observed: s.observed.clone(),
        finding: None,
        source: "liveness check".into(),
        why: None,
    })
}

/// A session spex launched: its process is the server spex started, recorded at launch.
fn launched_by_spex(s: &Session) -> bool {
    s.launched_by == LaunchedBy::Spex
}

pub fn observe(sessions: &[&Session]) -> Vec<(usize, Evidence)> {
    let now = SystemTime::now();
    let unknown: Vec<&Path> = sessions
        .iter()
        .filter(|s| s.process.is_none() && !launched_by_spex(s))
        .filter_map(|s| s.transcript.as_deref())
        .collect();
    let found = if unknown.is_empty() {
        HashMap::new()
    } else {
        holders(&unknown)
    };
    let mut tuis = None;
    sessions
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let gone = liveness(s, &found, &mut tuis);
            if gone.as_ref().is_some_and(|e| e.finding.is_some()) {
                return Some((i, gone?));
            }
            match (gone, judge(s, now)) {
                (Some(mut l), Some(j)) => {
                    l.finding = j.finding;
                    l.source = j.source;
                    l.why = j.why;
                    l.child_failures = j.child_failures;
                    Some((i, l))
                }
                (l, j) => Some((i, l.or(j)?)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::session::{Turn, TurnState};

    #[test]
    fn a_failed_turn_names_its_kind() {
        let turn = serde_json::json!({"status": "failed", "error": {"message": "stream died",
            "codexErrorInfo": {"responseTooManyFailedAttempts": {"httpStatusCode": 500}}}});
        assert_eq!(
            turn_failure(&turn),
            Failure::new("stream died", ErrorKind::ModelError)
        );
        let limit = serde_json::json!({"error": {"message": "slow down",
            "codexErrorInfo": "usageLimitExceeded"}});
        assert_eq!(turn_failure(&limit).kind, ErrorKind::RateLimit);
        assert_eq!(
            turn_failure(&serde_json::json!({})),
            Failure::new("the turn failed", ErrorKind::Unknown)
        );
    }

    #[test]
    fn a_failed_attempt_ends_the_turn_only_when_no_retry_follows() {
        let failed = "2026-11-23T10:00:00.000Z";
        let at = humantime::parse_rfc3339(failed).unwrap();
        let s = Session {
            turn: Some(Turn {
                id: None,
                state: TurnState::Running,
                prompt: None,
                started_at: failed.into(),
                ended_at: None,
                note: Some("http 500".into()),
                attempt_failed_at: Some(failed.into()),
                error_kind: None,
                next: None,
                partial: None,
                open_calls: Vec::new(),
                other: serde_json::Map::new(),
                ..Default::default()
            }),
            ..Session::default()
        };
        assert!(judge(&s, at + Duration::from_secs(1)).is_none());
        let ev = judge(&s, at + RETRY_BOUND).unwrap();
        assert_eq!(
            ev.finding,
            Some(Finding::TurnFailed(Failure::new(
                "http 500",
                ErrorKind::ModelError
            )))
        );
        let mut retried = s.clone();
        retried.turn.as_mut().unwrap().attempt_failed_at = None;
        assert!(judge(&retried, at + RETRY_BOUND * 2).is_none());
    }
}
