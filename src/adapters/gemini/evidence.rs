//! What Gemini CLI says about a session without a hook (docs/harnesses/facts/gemini.md §5, §8, §15): its
//! process (recorded from the hooks' ancestry) is gone with no `SessionEnd` (a headless turn
//! whose model request failed fires nothing after `BeforeAgent` and exits 144; a kill fires
//! nothing), and its transcript says a request was cancelled (Esc or "No" at a permission
//! dialog fires no hook at all: no `AfterTool`, no `AfterAgent`), and its process runs the
//! shell command whose dialog the person allowed in their terminal (no hook fires at that
//! either: the next is the command's `AfterTool`).

use std::path::{Path, PathBuf};

use crate::env::Env;
use crate::seam::evidence::{self, Evidence, Finding, LogReading, Observer, Watch};
use crate::store::session::{AttentionKind, Session, Status, TurnState};

use super::wire::SHELL_TOOL;
use super::{process, transcript};

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
    cancelled(s).or_else(|| allowed(s))
}

/// The running turn cancelled, as the transcript says.
fn cancelled(s: &Session) -> Option<Evidence> {
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

/// The shell command the session asked the person about runs: they allowed it in their
/// terminal, and it works again. Only while that dialog is what the record waits on, and only
/// once the CLI runs the command (while the dialog is open it has no such child).
fn allowed(s: &Session) -> Option<Evidence> {
    let a = s.attention.as_ref().filter(|a| {
        s.status == Status::NeedsAttention
            && a.reason == AttentionKind::Permission
            && a.tool.as_deref() == Some(SHELL_TOOL)
    })?;
    let cli = s.process_id()?;
    let child = process::running_command(cli.pid, &a.text)?;
    Some(Evidence {
        finding: Some(Finding::Resumed),
        source: "process table".into(),
        why: Some(format!(
            "Gemini CLI's process {} runs the command it asked about (process {child}): the person allowed it",
            cli.pid
        )),
        ..Evidence::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::session::{Attention, ProcessId, Turn};
    use std::os::unix::process::CommandExt as _;

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
        fs_err::write(&t, format!("{cancel}\n")).unwrap();
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

    #[test]
    fn an_allowed_shell_command_running_under_the_cli_resumes_its_session_and_an_open_dialog_does_not()
     {
        let command = "sleep 30; echo allowed";
        let pid = std::process::id();
        let mut s = running("2026-11-26T09:59:32.100Z", None);
        s.process = Some(
            ProcessId {
                pid,
                start: evidence::process_start(pid).unwrap(),
            }
            .into(),
        );
        s.status = Status::NeedsAttention;
        let mut a = Attention::new("permission", command, "2026-11-26T09:59:33.000Z");
        a.tool = Some(SHELL_TOOL.into());
        s.attention = Some(a);
        // The dialog is open: the CLI runs no such command.
        assert_eq!(judge(&s), None);
        let mut child = std::process::Command::new("bash")
            .args(["-c", &format!("(\n{command}\n)\nexit $?")])
            .process_group(0)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut ev = judge(&s);
        while ev.is_none() && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(20));
            ev = judge(&s);
        }
        let ev = ev.unwrap();
        assert_eq!(ev.finding, Some(Finding::Resumed));
        assert_eq!(ev.source, "process table");
        // Not another tool's dialog, and not once the record no longer waits on the person.
        let mut other = s.clone();
        other.attention.as_mut().unwrap().tool = Some("write_file".into());
        assert_eq!(judge(&other), None);
        let mut working = s.clone();
        working.status = Status::Working;
        assert_eq!(judge(&working), None);
        // The group: the subshell and its `sleep` too.
        std::process::Command::new("kill")
            .args(["-9", "--", &format!("-{}", child.id())])
            .status()
            .unwrap();
        child.wait().unwrap();
        assert_eq!(judge(&s), None);
    }
}
