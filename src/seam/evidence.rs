//! Evidence beyond hooks: what an adapter reads from the harness's own files and from the
//! process table about a session, in harness-neutral terms the readers fold into the record
//! (`reconcile`). Harnesses fire no hook on Esc, on a granted approval, on `kill -9` or on some
//! model failures; this is how spex still tells the truth there.

use std::path::PathBuf;

use crate::store::session::ProcessId;

/// What the evidence says happened since the record was last written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// The running turn ended without its hook (Esc, a denied approval).
    TurnInterrupted,
    /// A person answered the session's request: it works again, attention cleared.
    Resumed,
    /// The running turn failed and the harness will not retry it; the error text.
    TurnFailed(String),
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

/// Whether the recorded process still runs (same pid AND same start time).
pub fn alive(p: ProcessId) -> bool {
    process_start(p.pid) == Some(p.start)
}

/// Files whose changes may change what an adapter observes (for `wait` to watch).
pub type Watch = Vec<PathBuf>;

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
