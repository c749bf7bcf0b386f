//! Evidence beyond hooks: what an adapter reads from the harness's own files and from the
//! process table about a session, in harness-neutral terms the readers fold into the record
//! (`reconcile`). Harnesses fire no hook on Esc, on a granted approval, on `kill -9` or on some
//! model failures; this is how spex still tells the truth there.

use std::path::PathBuf;

use serde_json::json;

use crate::env::Env;

use crate::store::session::{
    ChildState, Failure, NewEvent, ProcessId, Session, Status, TurnState, Usage, UsageCursor,
    new_event,
};

/// The evidence facet: what a harness's own files and processes say about its sessions.
pub trait Observer: Sync {
    /// Evidence beyond hooks for the given live sessions of this harness (its own state files,
    /// its processes): one entry per session it has something to say about, by index into
    /// `sessions`. Read once per reader call, so an adapter may scan a folder once for all of
    /// them.
    fn observe(&self, env: &Env, sessions: &[&Session]) -> Vec<(usize, Evidence)>;
    /// Folders whose changes may change what `observe` says about `session` (`wait` watches
    /// them besides the record).
    fn evidence_dirs(&self, env: &Env, session: &Session) -> Watch;
    /// What the harness's own log of `session` adds since the readers last read it (usage,
    /// the text a failed turn wrote), for a session live or exited; `None` when there is
    /// nothing to read. Called by the readers only, never on the hook path.
    fn read_log(&self, session: &Session) -> Option<LogReading>;
    /// When `observe` or `read_log` may next say something new about `session` with no file
    /// changing and no process ending (a settle time running out), or `None`: the watcher wakes
    /// then, and never on a tick.
    fn next_look(&self, _session: &Session) -> Option<std::time::SystemTime> {
        None
    }
}

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
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
    /// Sub-agents that failed and will not be retried (their id, how).
    pub child_failures: Vec<(String, Failure)>,
}

/// One usage entry of a harness's log: when it was written, its usage, and whether it takes
/// back what an earlier entry of the same message counted.
pub type UsageEntry = (String, Usage, bool);

/// What a reader took from the harness's own log of a session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogReading {
    /// Usage counted since the cursor, in the log's order: (when the entry was written, its
    /// usage, whether it takes back what an earlier entry of the same message counted).
    pub usage: Vec<UsageEntry>,
    /// Where the next read starts.
    pub cursor: Option<UsageCursor>,
    /// The log was read for the failed turn's text (`partial`: what it wrote first, if any).
    pub partial_read: bool,
    pub partial: Option<String>,
}

/// Counts one usage entry into `total`: added, or taken back (`minus`).
pub fn count(total: &mut Usage, usage: &Usage, minus: bool) {
    if minus {
        total.sub(usage);
    } else {
        total.add(usage);
    }
}

/// What `entries` add up to, each entry that takes back an earlier one subtracted.
#[cfg(test)]
pub fn usage_total(entries: &[UsageEntry]) -> Usage {
    let mut total = Usage::default();
    for (_, usage, minus) in entries {
        count(&mut total, usage, *minus);
    }
    total
}

/// Applies what a reader took from the harness's log: usage to the session and, for entries
/// written since the turn began, to its turn; a failed turn that had written text becomes
/// `partial_failed` (`turn.amended`: not a second ending, the failure's detail completed by
/// evidence the hook could not read; the outcome stays a failure, see `Turn::amend`).
pub fn apply_log(s: &mut Session, r: &LogReading, now: &str, source: &str) -> Vec<NewEvent> {
    let mut out = Vec::new();
    let turn_start = s
        .turn
        .as_ref()
        .and_then(|t| crate::store::parse_time(&t.started_at));
    for (time, usage, minus) in &r.usage {
        let in_turn = match (turn_start, crate::store::parse_time(time)) {
            (Some(start), Some(t)) => t >= start,
            _ => false,
        };
        let mut targets: Vec<&mut Usage> = vec![s.usage.get_or_insert_with(Usage::default)];
        if in_turn && let Some(t) = s.turn.as_mut() {
            targets.push(t.usage.get_or_insert_with(Usage::default));
        }
        for u in targets {
            count(u, usage, *minus);
        }
    }
    if let Some(c) = &r.cursor {
        s.usage_cursor = Some(c.clone());
    }
    if r.partial_read
        && let Some(t) = s.turn.as_mut().filter(|t| t.state == TurnState::Failed)
    {
        t.log_read = true;
        if let Some(text) = r
            .partial
            .as_deref()
            .map(str::trim)
            .filter(|p| !p.is_empty())
            && let Some(was) = t.amend(TurnState::PartialFailed)
        {
            t.partial = Some(text.to_owned());
            out.push(new_event(
                "turn.amended",
                source,
                json!({ "turn_id": t.id, "state": TurnState::PartialFailed, "was": was,
                    "partial": text }),
            ));
        }
    }
    if !out.is_empty() {
        now.clone_into(&mut s.updated_at);
    }
    out
}

/// The start time of process `pid` (clock ticks since boot, `/proc/<pid>/stat` field 22), or
/// `None` when there is no such process or it is a zombie (dead, not yet reaped).
pub fn process_start(pid: u32) -> Option<u64> {
    let stat = fs_err::read_to_string(format!("/proc/{pid}/stat")).ok()?;
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
    let stat = fs_err::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 4 (ppid) comes after the command name, which may hold `)`.
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
        .filter(|p| *p > 1)
}

/// The command name of process `pid` (`/proc/<pid>/stat` field 2, at most 15 bytes).
pub fn process_name(pid: u32) -> Option<String> {
    let stat = fs_err::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = stat.find('(')?;
    Some(stat.get(open + 1..stat.rfind(')')?)?.to_owned())
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
    for (id, failure) in &ev.child_failures {
        let ended = s.end_child(id, ChildState::Failed, now, src, None, Some(&failure.error));
        let waited = s.turn.as_ref().is_some_and(|t| t.stopped_at.is_some());
        if !ended.is_empty() && waited {
            out.extend(ended);
            out.extend(s.complete_turn(now, src).0);
        } else {
            out.extend(ended);
        }
    }
    let waiting = s.turn.as_ref().is_some_and(|t| t.stopped_at.is_some());
    match &ev.finding {
        Some(Finding::TurnCompleted) if s.turn_running() => {
            out.extend(s.complete_turn(now, src).0);
        }
        Some(Finding::TurnCompleted) => {
            if s.status == Status::Working {
                // A turn that already ended (`timed_out` while the harness went on with it)
                // has now stopped in the harness too: the session is idle, with no second
                // ending.
                s.status = Status::Idle;
            }
        }
        // A turn the harness said was over, waiting on its sub-agents, was not interrupted.
        Some(Finding::TurnInterrupted(by)) if !waiting => {
            let ended = s.end_turn(
                TurnState::Interrupted,
                now,
                src,
                json!({ "why": why, "by": by }),
            );
            if !ended.is_empty() {
                out.extend(ended);
                out.extend(s.clear_attention(src));
                if s.status != Status::Exited {
                    s.status = Status::Idle;
                }
            } else if s.status == Status::Working && !s.turn_running() {
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
        None | Some(Finding::Resumed | Finding::Gone(_) | Finding::TurnInterrupted(_)) => {}
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
    fn own_process_has_a_name() {
        let name = process_name(std::process::id()).expect("this process has a name");
        assert!(!name.is_empty() && name.len() <= 15, "{name}");
        assert_eq!(process_name(u32::MAX), None);
    }

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
