//! Evidence beyond hooks: what an adapter reads from the harness's own files and from the
//! process table about a session, in harness-neutral terms the readers fold into the record
//! (`reconcile`). Harnesses fire no hook on Esc, on a granted approval, on `kill -9` or on some
//! model failures; this is how spex still tells the truth there.

use std::path::PathBuf;

use serde_json::json;

use crate::store::session::{NewEvent, ProcessId, Session, Status, TurnState, new_event};

/// What the evidence says happened since the record was last written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// The running turn completed (the server said so; its Stop hook may not have).
    TurnCompleted,
    /// The running turn ended without its hook (Esc, a denied approval), and who ended it as
    /// the evidence tells (`terminal`, `denial`); an interrupt spex sent names itself.
    TurnInterrupted(&'static str),
    /// A person answered the session's request: it works again, attention cleared.
    Resumed,
    /// The running turn failed and the harness will not retry it.
    TurnFailed(crate::store::session::Failure),
    /// The harness process is gone (reason for the record: `process gone`, `server gone`).
    Gone(&'static str),
}

/// One observation of one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    /// The harness process, to record when none is yet.
    pub process: Option<ProcessId>,
    /// The harness's own state word now (stored on the record, compared next time).
    pub observed: Option<String>,
    pub finding: Option<Finding>,
    /// What was read: `Claude's registry sessions/123.json`, `liveness check`, ...
    pub source: String,
    /// Why the finding follows from it, in a person's words.
    pub why: Option<String>,
    /// Whether a client is attached to the process holding the session (`None`: not known).
    pub attended: Option<bool>,
}

/// The start time of process `pid` (clock ticks since boot, `/proc/<pid>/stat` field 22), or
/// `None` when there is no such process or it is a zombie (dead, not yet reaped).
pub fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // `rest` starts at field 3 (state); field 22 is the 20th after it.
    if matches!(fields.next(), Some("Z" | "X")) {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// The parent of process `pid` (`/proc/<pid>/stat` field 4), `None` when there is no such
/// process or its parent is init.
pub fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 4 (ppid) comes after the command name, which may hold `)`.
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
        .filter(|p| *p > 1)
}

/// The process ids from this process up towards init, at most `limit` of them.
pub fn ancestors(limit: usize) -> Vec<u32> {
    let mut out = vec![std::process::id()];
    while out.len() < limit {
        let Some(p) = out.last().and_then(|p| parent_of(*p)) else {
            break;
        };
        out.push(p);
    }
    out
}

/// Whether the recorded process still runs (same pid AND same start time).
pub fn alive(p: ProcessId) -> bool {
    process_start(p.pid) == Some(p.start)
}

/// Files whose changes may change what an adapter observes (for `wait` to watch).
pub type Watch = Vec<PathBuf>;

/// Applies one observation to a record; the events it adds.
pub fn apply(s: &mut Session, ev: &Evidence, now: &str) -> Vec<NewEvent> {
    let mut out = Vec::new();
    if s.process.is_none() {
        s.process = ev.process.map(Into::into);
    }
    s.observed.clone_from(&ev.observed);
    if ev.attended.is_some() {
        s.attended = ev.attended;
    }
    let before = s.state_key();
    let src = ev.source.as_str();
    let why = ev.why.clone();
    let why_field = || json!({ "why": why });
    match &ev.finding {
        Some(f @ (Finding::TurnCompleted | Finding::TurnInterrupted(_))) => {
            let (state, extra) = match f {
                Finding::TurnInterrupted(by) => {
                    (TurnState::Interrupted, json!({ "why": why, "by": by }))
                }
                _ => (TurnState::Completed, json!({})),
            };
            let ended = s.end_turn(state, now, src, extra);
            if !ended.is_empty() {
                out.extend(ended);
                out.extend(s.clear_attention(src));
                if s.status != Status::Exited {
                    s.status = Status::Idle;
                }
            } else if s.status == Status::Working && !s.turn_running() {
                // A turn that already ended (`timed_out` while the harness went on with it)
                // has now stopped in the harness too: the session is idle, with no second
                // ending.
                s.status = Status::Idle;
            }
        }
        Some(Finding::Resumed) if s.status == Status::NeedsAttention => {
            out.extend(s.clear_attention(src));
            s.status = if s.turn_running() {
                Status::Working
            } else {
                Status::Idle
            };
        }
        Some(Finding::TurnFailed(failure)) => out.extend(s.fail_turn(failure, now, src)),
        Some(Finding::Gone(reason)) if s.status != Status::Exited => {
            out.extend(s.exit(reason, now, src));
            if let Some(last) = out.last_mut() {
                last.2.extend(fields(why_field()));
            }
        }
        None | Some(Finding::Resumed | Finding::Gone(_)) => {}
    }
    s.stamp(before, now, src, why);
    if !out.is_empty() {
        now.clone_into(&mut s.updated_at);
    }
    out
}

fn fields(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    new_event("", "", v).2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_alive_and_a_different_start_time_is_not() {
        let pid = std::process::id();
        let start = process_start(pid).expect("this process has a start time");
        assert!(alive(ProcessId { pid, start }));
        assert!(!alive(ProcessId {
            pid,
            start: start + 1
        }));
    }
}
