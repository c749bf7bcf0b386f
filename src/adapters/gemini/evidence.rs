//! What Gemini CLI says about a session without a hook (facts/gemini.md §5, §8, §15): its
//! process (recorded from the hooks' ancestry) is gone with no `SessionEnd` (a headless turn
//! whose model request failed fires nothing after `BeforeAgent` and exits 144; a kill fires
//! nothing), and its transcript says a request was cancelled (Esc or "No" at a permission
//! dialog fires no hook at all: no `AfterTool`, no `AfterAgent`).

use std::path::{Path, PathBuf};

use crate::env::Env;
use crate::seam::evidence::{self, Evidence, Finding, LogReading, Observer, Watch};
use crate::store::session::{Session, Status, TurnState};

use super::transcript;

pub struct GeminiEvidence;

impl Observer for GeminiEvidence {
    fn observe(&self, _env: &Env, sessions: &[&Session]) -> Vec<(usize, Evidence)> {
        sessions
            .iter()
            .enumerate()
            .filter_map(|(i, s)| judge(s).map(|ev| (i, ev)))
            .collect()
    }

    fn evidence_dirs(&self, env: &Env, session: &Session) -> Watch {
        // The transcript's folder (a cancel is written there); the process's end is the
        // liveness tick's.
        let chats = session
            .transcript
            .as_deref()
            .and_then(Path::parent)
            .map(Path::to_path_buf);
        vec![chats.unwrap_or_else(|| gemini_dir(env).join("tmp"))]
    }

    fn read_log(&self, s: &Session) -> Option<LogReading> {
        let cursor = s.usage_cursor.clone().unwrap_or_default();
        if cursor.done {
            return None;
        }
        let (usage, next) = transcript::usage(
            s.transcript.as_deref()?,
            &cursor,
            s.status == Status::Exited,
        )?;
        Some(LogReading {
            usage,
            cursor: Some(next),
            ..LogReading::default()
        })
    }
}

/// `$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`.
fn gemini_dir(env: &Env) -> PathBuf {
    env.path_var(super::home::HOME_VAR)
        .unwrap_or_else(|| env.home_or_root())
        .join(".gemini")
}

/// What the process and the transcript say about `s`, when it is news.
fn judge(s: &Session) -> Option<Evidence> {
    if let Some(p) = s.process_id().filter(|p| !evidence::alive(*p)) {
        return Some(Evidence {
            finding: Some(Finding::Gone("process gone")),
            source: "liveness check".into(),
            why: Some(format!(
                "Gemini CLI's process {} is gone and no SessionEnd came",
                p.pid
            )),
            ..Evidence::default()
        });
    }
    let turn = s.turn.as_ref().filter(|t| t.state == TurnState::Running)?;
    let path = s.transcript.as_deref()?;
    let c = transcript::cancelled_since(path, &turn.started_at)?;
    let file = path.file_name().map(|f| f.to_string_lossy().into_owned());
    let asked = s.status == Status::NeedsAttention;
    let (by, why) = match (&c.call, asked) {
        (Some(tool), _) => (
            "denial",
            format!(
                "Gemini's transcript says the {tool} call and its request were cancelled at {}: its dialog was answered no",
                c.at
            ),
        ),
        (None, true) => (
            "denial",
            format!(
                "Gemini's transcript says the request was cancelled at {} while it waited on the person",
                c.at
            ),
        ),
        (None, false) => (
            "terminal",
            format!(
                "Gemini's transcript says the request was cancelled at {} with no AfterAgent",
                c.at
            ),
        ),
    };
    Some(Evidence {
        finding: Some(Finding::TurnInterrupted(by)),
        source: format!("Gemini's transcript {}", file.unwrap_or_default()),
        why: Some(why),
        ..Evidence::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::session::{Attention, ProcessId, Turn};

    fn running(started: &str, transcript: Option<PathBuf>) -> Session {
        Session {
            status: Status::Working,
            transcript,
            turn: Some(Turn {
                state: TurnState::Running,
                started_at: started.into(),
                ..Default::default()
            }),
            ..Session::default()
        }
    }

    #[test]
    fn a_recorded_process_that_is_gone_ends_the_session_and_a_live_one_says_nothing() {
        let pid = std::process::id();
        let start = evidence::process_start(pid).unwrap();
        let mut s = running("2026-11-26T09:59:32.100Z", None);
        s.process = Some(ProcessId { pid, start }.into());
        assert_eq!(judge(&s), None);
        s.process = Some(
            ProcessId {
                pid,
                start: start + 1,
            }
            .into(),
        );
        let ev = judge(&s).unwrap();
        assert_eq!(ev.finding, Some(Finding::Gone("process gone")));
        assert!(ev.why.unwrap().contains("no SessionEnd"));
    }

    #[test]
    fn a_cancel_in_the_transcript_ends_the_running_turn() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("session-x.jsonl");
        let cancel = r#"{"id":"i1","timestamp":"2026-11-26T09:59:35.538Z","type":"info","content":"Request cancelled."}"#;
        std::fs::write(&t, format!("{cancel}\n")).unwrap();
        let mut s = running("2026-11-26T09:59:32.100Z", Some(t.clone()));
        let ev = judge(&s).unwrap();
        assert_eq!(ev.finding, Some(Finding::TurnInterrupted("terminal")));
        assert_eq!(ev.source, "Gemini's transcript session-x.jsonl");
        s.status = Status::NeedsAttention;
        s.attention = Some(Attention::new(
            "permission",
            "ls",
            "2026-11-26T09:59:33.000Z",
        ));
        assert_eq!(
            judge(&s).unwrap().finding,
            Some(Finding::TurnInterrupted("denial"))
        );
        // A turn that began after the cancel was not cancelled by it.
        assert_eq!(judge(&running("2026-11-26T09:59:36.000Z", Some(t))), None);
    }
}
