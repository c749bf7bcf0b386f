//! Claude Code's own evidence about an interactive session (docs/harnesses/facts/claude.md, "Live-session
//! registry"): while the TUI runs it keeps `<config dir>/sessions/<pid>.json` with its pid,
//! `procStart` (the process start time, `/proc/<pid>/stat` field 22), `sessionId` and `status`
//! (`idle`, `busy` during a turn, `waiting` while a dialog is open) with `statusUpdatedAt`
//! (ms). The file is deleted on a clean exit and left behind on `kill -9`.
//!
//! Verified with 2.1.197 under a PTY: Stop hooks finish before the file goes `idle`; Esc at a
//! permission dialog moves it `waiting` -> `idle` and fires no hook; approving moves it
//! `waiting` -> `busy` about a tool's length before `PostToolUse`; `UserPromptSubmit` fires just
//! after it goes `busy`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde_json::Value;

use crate::env::Env;
use crate::seam::evidence::{self, Evidence, Finding};
use crate::store::session::{ProcessId, Session, Status};

/// How long after a hook Claude's transcript may still lack what the hook reported.
const TRANSCRIPT_LAG: std::time::Duration = std::time::Duration::from_secs(10);

pub struct ClaudeEvidence;

impl crate::seam::evidence::Observer for ClaudeEvidence {
    fn observe(
        &self,
        env: &Env,
        sessions: &[&crate::store::session::Session],
    ) -> Vec<(usize, crate::seam::evidence::Evidence)> {
        observe(env, sessions)
    }

    fn evidence_dirs(
        &self,
        env: &Env,
        session: &crate::store::session::Session,
    ) -> crate::seam::evidence::Watch {
        let mut dirs = vec![registry_dir(env, session)];
        // A turn that failed has its text read from the transcript once it is written there
        // (`read_log`): its folder changes then.
        let failed_unread = session
            .turn
            .as_ref()
            .is_some_and(|t| t.state == crate::store::session::TurnState::Failed && !t.log_read);
        if let Some(folder) = session
            .transcript
            .as_deref()
            .and_then(Path::parent)
            .filter(|_| failed_unread)
        {
            dirs.push(folder.to_path_buf());
        }
        dirs
    }

    fn read_log(
        &self,
        s: &crate::store::session::Session,
    ) -> Option<crate::seam::evidence::LogReading> {
        use crate::store::session::{Status as S, TurnState};
        let transcript = s.transcript.as_deref()?;
        let cursor = s.usage_cursor.clone().unwrap_or_default();
        // A turn StopFailure ended `failed`: the text it wrote first is only in the transcript.
        let failed_unread = s
            .turn
            .as_ref()
            .is_some_and(|t| t.state == TurnState::Failed && !t.log_read);
        if cursor.done && !failed_unread {
            return None;
        }
        let mut r = crate::seam::evidence::LogReading::default();
        if !cursor.done
            && let Some((usage, next)) =
                super::usage::read(transcript, &cursor, s.status == S::Exited)
        {
            r.usage = usage;
            r.cursor = Some(next);
        }
        if let Some(turn) = s.turn.as_ref().filter(|_| failed_unread) {
            let written = super::failure::partial_text(transcript);
            let at = crate::store::parse_time;
            let started = at(&turn.started_at);
            // Written since the turn began (not an earlier turn's answer).
            let since_start = |t: Option<&str>| match (t.and_then(at), started) {
                (Some(t), Some(start)) => t >= start,
                (None, _) | (_, None) => true,
            };
            let text = written
                .text
                .filter(|(_, first)| since_start(first.as_deref()))
                .map(|(text, _)| text);
            let caught_up = written
                .error_at
                .as_deref()
                .is_some_and(|t| since_start(Some(t)));
            // Until the transcript has the failure, it may lack the text before it too: read
            // again next time, for a while.
            let long_ago = turn
                .ended_at
                .as_deref()
                .and_then(at)
                .and_then(|t| std::time::SystemTime::now().duration_since(t).ok())
                .is_some_and(|d| d > TRANSCRIPT_LAG);
            if text.is_some() || caught_up || long_ago {
                r.partial_read = true;
                r.partial = text;
            }
        }
        (r != crate::seam::evidence::LogReading::default()).then_some(r)
    }

    fn next_look(&self, s: &crate::store::session::Session) -> Option<std::time::SystemTime> {
        use crate::store::session::TurnState;
        // A failed turn's text is read for a while after it ended, then given up on.
        let turn = s
            .turn
            .as_ref()
            .filter(|t| t.state == TurnState::Failed && !t.log_read)?;
        Some(crate::store::parse_time(turn.ended_at.as_deref()?)? + TRANSCRIPT_LAG)
    }
}

/// One registry file, as far as spex reads it.
#[derive(Debug, Clone)]
struct Entry {
    file: String,
    pid: u32,
    proc_start: Option<u64>,
    status: Option<String>,
    /// `statusUpdatedAt`, ms since the epoch.
    status_at: Option<u64>,
}

/// Claude's config dir for a session: three levels above its transcript
/// (`<config>/projects/<cwd>/<sid>.jsonl`), else `$CLAUDE_CONFIG_DIR`, else `~/.claude`.
fn config_dir(env: &Env, s: &Session) -> PathBuf {
    s.transcript
        .as_deref()
        .and_then(|t| Some(t.parent()?.parent()?.parent()?.to_path_buf()))
        .unwrap_or_else(|| {
            env.path_var(super::home::CONFIG_DIR_VAR)
                .unwrap_or_else(|| env.home_or_root().join(".claude"))
        })
}

pub fn registry_dir(env: &Env, s: &Session) -> PathBuf {
    config_dir(env, s).join("sessions")
}

/// Every registry file in `dir`, by session id.
fn scan(dir: &Path) -> HashMap<String, Entry> {
    let mut out = HashMap::new();
    let Ok(entries) = fs_err::read_dir(dir) else {
        return out;
    };
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        if !std::path::Path::new(&name)
            .extension()
            .is_some_and(|x| x.eq_ignore_ascii_case("json"))
        {
            continue;
        }
        let Some(v) = fs_err::read(e.path())
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        else {
            continue;
        };
        let (Some(sid), Some(pid)) = (
            v["sessionId"].as_str(),
            v["pid"].as_u64().and_then(|p| u32::try_from(p).ok()),
        ) else {
            continue;
        };
        let proc_start = match &v["procStart"] {
            Value::String(s) => s.parse().ok(),
            other => other.as_u64(),
        };
        out.insert(
            sid.to_owned(),
            Entry {
                file: name,
                pid,
                proc_start,
                status: v["status"].as_str().map(str::to_owned),
                status_at: v["statusUpdatedAt"].as_u64(),
            },
        );
    }
    out
}

/// Milliseconds since the epoch of an RFC 3339 time in a record.
fn ms(rfc3339: &str) -> Option<u64> {
    let t = crate::store::parse_time(rfc3339)?;
    u64::try_from(t.duration_since(UNIX_EPOCH).ok()?.as_millis()).ok()
}

/// What the registry entry (or its absence) says about `s`.
fn judge(s: &Session, entry: Option<&Entry>) -> Option<Evidence> {
    let Some(e) = entry else {
        // No registry file: a clean exit deletes it (SessionEnd says so); a recorded process
        // that is gone without one died.
        let p = s.process_id()?;
        return (!evidence::alive(p)).then(|| Evidence {
            child_failures: Vec::new(),
            attended: None,
            process: None,
            observed: s.observed.clone(),
            finding: Some(Finding::Gone("process gone")),
            source: "liveness check".into(),
            why: Some(format!(
                "Claude's process {} is gone and no SessionEnd came",
                p.pid
            )),
        });
    };
    let source = format!("Claude's registry sessions/{}", e.file);
    let current = e.proc_start.and_then(|start| {
        let p = ProcessId { pid: e.pid, start };
        evidence::alive(p).then_some(p)
    });
    let Some(process) = current else {
        return Some(Evidence {
            child_failures: Vec::new(),
            attended: None,
            process: None,
            observed: s.observed.clone(),
            finding: Some(Finding::Gone("process gone")),
            source,
            why: Some(format!(
                "Claude's registry names process {}, which is no longer running (killed: no SessionEnd)",
                e.pid
            )),
        });
    };
    let prev = s.observed.clone().unwrap_or_else(|| "busy".into());
    let at = e.status_at.unwrap_or(0);
    let after = |t: Option<&str>| t.and_then(ms).is_some_and(|t| at >= t);
    let turn_started = s.turn.as_ref().map(|t| t.started_at.as_str());
    let (finding, why) = match e.status.as_deref() {
        // Stop hooks finish before the registry goes idle: idle after the turn began, with the
        // turn still running, means it ended with no Stop.
        Some("idle") if s.turn_running() && after(turn_started) => {
            if s.status == Status::NeedsAttention || prev == "waiting" {
                (
                    Some(Finding::TurnInterrupted("denial")),
                    Some(
                        "Claude's registry went waiting -> idle: the request was denied and the turn ended"
                            .to_owned(),
                    ),
                )
            } else {
                (
                    Some(Finding::TurnInterrupted("terminal")),
                    Some(format!(
                        "Claude's registry went {prev} -> idle with no Stop"
                    )),
                )
            }
        }
        Some("busy")
            if s.status == Status::NeedsAttention
                && after(s.attention.as_ref().map(|a| a.since.as_str())) =>
        {
            (
                Some(Finding::Resumed),
                Some("Claude's registry went waiting -> busy: the request was answered".to_owned()),
            )
        }
        _ => (None, None),
    };
    let observed = e.status.clone();
    let changed = finding.is_some() || s.process_id() != Some(process) || observed != s.observed;
    changed.then_some(Evidence {
        child_failures: Vec::new(),
        attended: None,
        process: Some(process),
        observed,
        finding,
        source,
        why,
    })
}

pub fn observe(env: &Env, sessions: &[&Session]) -> Vec<(usize, Evidence)> {
    let mut scans: HashMap<PathBuf, HashMap<String, Entry>> = HashMap::new();
    let mut out = Vec::new();
    for (i, s) in sessions.iter().enumerate() {
        let dir = registry_dir(env, s);
        let registry = scans.entry(dir.clone()).or_insert_with(|| scan(&dir));
        let entry = s
            .harness_session_id
            .as_deref()
            .and_then(|h| registry.get(h));
        if let Some(ev) = judge(s, entry) {
            out.push((i, ev));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::session::{Attention, Turn, TurnState};

    fn running(started: &str) -> Session {
        Session {
            status: Status::Working,
            turn: Some(Turn {
                id: None,
                state: TurnState::Running,
                prompt: None,
                started_at: started.into(),
                ..Default::default()
            }),
            ..Session::default()
        }
    }

    fn me(status: &str, at: u64) -> Entry {
        let pid = std::process::id();
        Entry {
            file: format!("{pid}.json"),
            pid,
            proc_start: evidence::process_start(pid),
            status: Some(status.into()),
            status_at: Some(at),
        }
    }

    const T0: &str = "2026-11-23T10:00:00.000Z";

    #[test]
    fn idle_after_the_turn_began_with_no_stop_is_an_interrupted_turn() {
        let mut s = running(T0);
        s.observed = Some("busy".into());
        let ev = judge(&s, Some(&me("idle", ms(T0).unwrap() + 500))).unwrap();
        assert_eq!(ev.finding, Some(Finding::TurnInterrupted("terminal")));
        assert_eq!(
            ev.why.as_deref(),
            Some("Claude's registry went busy -> idle with no Stop")
        );
        // An idle written before the turn began (the prompt hook came after it) says nothing.
        let ev = judge(&s, Some(&me("idle", ms(T0).unwrap() - 500))).unwrap();
        assert_eq!(ev.finding, None);
    }

    #[test]
    fn waiting_to_busy_after_the_request_is_an_answer_and_to_idle_a_denial() {
        let mut s = running(T0);
        s.status = Status::NeedsAttention;
        s.observed = Some("waiting".into());
        s.attention = Some(Attention::new(
            "permission",
            "Bash: ls",
            "2026-11-23T10:00:01.000Z",
        ));
        let busy = judge(&s, Some(&me("busy", ms(T0).unwrap() + 2000))).unwrap();
        assert_eq!(busy.finding, Some(Finding::Resumed));
        let stale = judge(&s, Some(&me("busy", ms(T0).unwrap() + 10))).unwrap();
        assert_eq!(stale.finding, None);
        let idle = judge(&s, Some(&me("idle", ms(T0).unwrap() + 2000))).unwrap();
        assert_eq!(idle.finding, Some(Finding::TurnInterrupted("denial")));
        assert!(idle.why.unwrap().contains("waiting -> idle"));
    }

    #[test]
    fn a_registry_naming_a_dead_or_reused_pid_means_the_process_is_gone() {
        let s = running(T0);
        let mut e = me("busy", ms(T0).unwrap());
        e.proc_start = e.proc_start.map(|p| p + 1);
        let ev = judge(&s, Some(&e)).unwrap();
        assert_eq!(ev.finding, Some(Finding::Gone("process gone")));
        let mut s = running(T0);
        s.process = Some(
            ProcessId {
                pid: std::process::id(),
                start: 1,
            }
            .into(),
        );
        let ev = judge(&s, None).unwrap();
        assert_eq!(ev.finding, Some(Finding::Gone("process gone")));
    }
}
