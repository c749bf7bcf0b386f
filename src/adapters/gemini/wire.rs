//! Gemini CLI's hook wire (docs/harnesses/facts/gemini.md §5–§8): its payloads as spex's events, spex's answers
//! as its hook output. Its payloads name no turn and no tool call: one `BeforeAgent` starts
//! each turn and one `AfterAgent` ends it, and a call's start and end pair by tool name.

use std::path::Path;

use serde_json::{Value, json};

use crate::adapters::common::wire::{self, choice, question_ask, str_field as s};
use crate::seam::event::{Answer, HookEvent, Kind, Reply};
use crate::seam::wire::HookWire;
use crate::store::session::{Attention, AttentionKind, ErrorKind, Failure};

pub struct GeminiWire;

impl HookWire for GeminiWire {
    fn decode(&self, event: &str, payload: &Value) -> HookEvent {
        decode_payload(event, payload)
    }

    fn encode(&self, event: &str, answer: &Answer) -> Reply {
        encode_answer(event, answer)
    }

    fn takes_context(&self, event: &str) -> bool {
        CONTEXT_EVENTS.contains(&event)
    }

    fn hook_env_names_session(&self) -> bool {
        // One Gemini process runs one session, and its hooks inherit its environment.
        true
    }
}

/// The tool the agent calls to ask the person questions (interactive mode only).
const ASK_TOOL: &str = "ask_user";

/// The tool that runs shell commands.
pub(super) const SHELL_TOOL: &str = "run_shell_command";

/// What `AfterAgent` reports as the response when the turn produced no text: the model
/// request failed (the TUI shows `✕ [API Error: ...]`; §5 "API error"). A model that
/// answered only with tool calls and no closing text reads the same; rare, and the turn
/// then shows failed rather than pretending a failure was an answer.
pub(super) const NO_RESPONSE: &str = "[no response text]";

/// Events whose hook output Gemini reads `hookSpecificOutput.additionalContext` from
/// (FROM-SOURCE: `BeforeAgent` appends it to the prompt, `AfterTool` to the tool's result,
/// `SessionStart` to the first request). `BeforeTool` ignores it.
const CONTEXT_EVENTS: &[&str] = &["SessionStart", "BeforeAgent", "AfterTool"];

/// Tools whose input names the file they write (as the model gave it: relative to `cwd`
/// or absolute).
fn edited_file(tool: &str, input: &Value) -> Option<String> {
    match tool {
        "write_file" | "replace" => s(input, "file_path"),
        _ => None,
    }
}

fn decode_payload(event: &str, p: &Value) -> HookEvent {
    let input = p.get("tool_input").unwrap_or(&Value::Null);
    let tool = s(p, "tool_name");
    let mut ev = HookEvent {
        session_id: s(p, "session_id"),
        cwd: s(p, "cwd"),
        transcript: s(p, "transcript_path"),
        // No turn id: each turn has its own `BeforeAgent`, so timing must not join prompts.
        turn_id_names_turn: true,
        edits: tool
            .as_deref()
            .and_then(|t| edited_file(t, input))
            .into_iter()
            .collect(),
        tool,
        ..HookEvent::default()
    };
    ev.kind = Some(match event {
        "SessionStart" => {
            // `startup`, `resume` or `clear` (a new session id after `/clear`).
            ev.reason = s(p, "source");
            ev.process = super::process::cli_process();
            Kind::SessionStart
        }
        "SessionEnd" => {
            // The TUI fires it three times on exit; the record exits once (a late word of a
            // session that is over moves nothing).
            ev.reason = s(p, "reason");
            Kind::SessionEnded
        }
        "BeforeAgent" => {
            ev.prompt = s(p, "prompt");
            ev.process = super::process::cli_process();
            Kind::PromptSubmitted
        }
        "AfterAgent" => {
            ev.stop_hook_active = p.get("stop_hook_active").and_then(Value::as_bool) == Some(true);
            if ev
                .transcript
                .as_deref()
                .is_some_and(|t| super::transcript::ends_cancelled(Path::new(t)))
            {
                // Esc while the model streamed: the payload carries the partial text as if
                // it were the answer; the transcript says the request was cancelled.
                Kind::TurnInterrupted
            } else if s(p, "prompt_response").as_deref() == Some(NO_RESPONSE) {
                let failure = Failure::new(
                    "the model request failed (Gemini CLI reported no response text)",
                    ErrorKind::ModelError,
                );
                ev.error = Some(failure.error.clone());
                ev.failure = Some(failure);
                Kind::TurnFailed
            } else {
                Kind::TurnCompleted
            }
        }
        "BeforeTool" => {
            if ev.tool.as_deref() == Some(ASK_TOOL) {
                ev.attention = Some(("question".into(), wire::question_text(input)));
                ev.ask = Some(question_ask(input, None));
            }
            Kind::ToolStarted
        }
        "AfterTool" => match tool_failure(ev.tool.as_deref(), p.get("tool_response")) {
            Some(error) => {
                ev.error = Some(error);
                Kind::ToolFailed
            }
            None => Kind::ToolCompleted,
        },
        "Notification" if s(p, "notification_type").as_deref() == Some("ToolPermission") => {
            permission(&mut ev, p)
        }
        _ => Kind::Other,
    });
    ev
}

/// A `Notification(ToolPermission)`: the dialog is open. Its `details` name the command or the
/// file; an `ask_user` dialog's questions came with its `BeforeTool`, which opened them.
fn permission(ev: &mut HookEvent, p: &Value) -> Kind {
    let d = p.get("details").unwrap_or(&Value::Null);
    let title = s(d, "title")
        .or_else(|| s(p, "message"))
        .unwrap_or_default();
    match s(d, "type").as_deref() {
        Some("ask_user") => {
            // The question its `BeforeTool` opened; only if that is missing does this notice
            // raise one (with no text of its own to show).
            ev.tool = Some(ASK_TOOL.into());
            ev.attention = Some(("question".into(), title));
            return Kind::AttentionNotice;
        }
        Some("exec") => {
            ev.tool = Some(SHELL_TOOL.into());
            ev.attention = Some(("permission".into(), s(d, "command").unwrap_or(title)));
        }
        Some("edit") => {
            let file = s(d, "filePath").or_else(|| s(d, "fileName"));
            ev.attention = Some(("permission".into(), file.unwrap_or(title)));
        }
        Some("mcp") => {
            let name = match (s(d, "serverName"), s(d, "toolName")) {
                (Some(server), Some(tool)) => format!("{server}: {tool}"),
                _ => title,
            };
            ev.attention = Some(("permission".into(), name));
        }
        _ => ev.attention = Some(("permission".into(), title)),
    }
    ev.ask = Some(permission_ask(s(d, "type").as_deref()));
    Kind::PermissionRequest
}

/// The permission dialog's options (docs/harnesses/facts/gemini.md §12): a digit picks one; Esc or the last
/// option cancels the whole request.
fn permission_ask(kind: Option<&str>) -> Attention {
    let mut choices = vec![
        choice("allow", "Allow once", false),
        choice("allow-session", "Allow for this session", false),
    ];
    if kind == Some("edit") {
        choices.push(choice("edit", "Modify with external editor", false));
    }
    choices.push(choice("deny", "No, suggest changes", false));
    Attention {
        kind: Some(AttentionKind::Permission),
        choices,
        ..Attention::default()
    }
}

/// Why a finished tool call failed, if it did: the response's `error`, or a shell command's
/// non-zero `Exit Code` (Gemini reports that only in the text it gives the model, §6).
fn tool_failure(tool: Option<&str>, response: Option<&Value>) -> Option<String> {
    let r = response?;
    if let Some(e) = r.get("error").filter(|e| !e.is_null()) {
        return Some(
            s(e, "message")
                .or_else(|| e.as_str().map(str::to_owned))
                .unwrap_or_else(|| e.to_string()),
        );
    }
    if tool != Some(SHELL_TOOL) {
        return None;
    }
    let text = r.get("llmContent").and_then(Value::as_str)?;
    // The command's own output comes first and may print anything: Gemini's lines follow it.
    let last = |key: &str| {
        text.lines()
            .rev()
            .find_map(|l| l.trim_end_matches('\r').strip_prefix(key))
            .map(str::trim)
    };
    match last("Exit Code: ").and_then(|c| c.parse::<i64>().ok()) {
        Some(code) if code != 0 => Some(format!("exit code {code}")),
        _ => last("Signal: ")
            .filter(|sig| !sig.is_empty() && *sig != "(none)")
            .map(|sig| format!("killed by signal {sig}")),
    }
}

fn encode_answer(event: &str, answer: &Answer) -> Reply {
    wire::encode_answer(event, answer, CONTEXT_EVENTS, |event, reason| match event {
        // The tool does not run; the reason goes to the model (§7).
        "BeforeTool" | "AfterTool" => Some(json!({ "decision": "deny", "reason": reason })),
        // BeforeAgent: the prompt is dropped. AfterAgent: the agent goes on with the reason
        // as its next prompt (`stop_hook_active` then says so).
        "BeforeAgent" | "AfterAgent" => Some(json!({ "decision": "block", "reason": reason })),
        // Plain text on exit 2 is a deny wherever Gemini reads one.
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn fixture(stem: &str) -> Value {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/payloads/gemini")
            .join(format!("{stem}.json"));
        serde_json::from_slice(&fs_err::read(&path).unwrap()).unwrap()
    }

    fn decode(stem: &str) -> HookEvent {
        let p = fixture(stem);
        let event = p["hook_event_name"].as_str().unwrap().to_owned();
        decode_payload(&event, &p)
    }

    #[test]
    fn every_captured_payload_decodes_with_its_session_and_transcript() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/payloads/gemini");
        for e in fs_err::read_dir(dir).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            let ev = decode(name.trim_end_matches(".json"));
            assert!(ev.session_id.is_some(), "{name}");
            assert!(ev.transcript.is_some(), "{name}");
            assert_eq!(ev.cwd.as_deref(), Some("/home/dev/proj"), "{name}");
        }
    }

    #[test]
    fn sessions_turns_and_their_endings() {
        let cases = [
            ("SessionStart.startup", Kind::SessionStart, Some("startup")),
            ("SessionStart.resume", Kind::SessionStart, Some("resume")),
            ("SessionStart.clear", Kind::SessionStart, Some("clear")),
            ("SessionEnd.exit", Kind::SessionEnded, Some("exit")),
            ("SessionEnd.clear", Kind::SessionEnded, Some("clear")),
            ("BeforeAgent", Kind::PromptSubmitted, None),
            ("AfterAgent", Kind::TurnCompleted, None),
            // Esc while the model streamed: the payload alone reads as a completion (its
            // transcript, not captured with it, says the request was cancelled).
            ("AfterAgent.cancelled", Kind::TurnCompleted, None),
            ("AfterAgent.api_error", Kind::TurnFailed, None),
            // Not bound: they fire per model request or streamed chunk.
            ("BeforeModel", Kind::Other, None),
            ("AfterModel", Kind::Other, None),
            ("PreCompress.auto", Kind::Other, None),
            ("BeforeToolSelection", Kind::Other, None),
        ];
        for (stem, kind, reason) in cases {
            let ev = decode(stem);
            assert_eq!(ev.kind, Some(kind), "{stem}");
            assert_eq!(ev.reason.as_deref(), reason, "{stem}");
            assert!(ev.turn_id.is_none() && ev.turn_id_names_turn, "{stem}");
        }
        let failed = decode("AfterAgent.api_error");
        let f = failed.failure.unwrap();
        assert_eq!(f.kind, ErrorKind::ModelError);
        assert!(f.error.contains("no response text"));
    }

    #[test]
    fn the_prompt_is_kept_exactly_multi_line_too() {
        let mut p = fixture("BeforeAgent");
        p["prompt"] = json!("first line\n\n  second line  \n");
        let ev = decode_payload("BeforeAgent", &p);
        assert_eq!(
            ev.prompt.as_deref(),
            Some("first line\n\n  second line  \n")
        );
    }

    #[test]
    fn tool_calls_name_their_tool_and_files_and_shell_failures_fail() {
        let w = decode("BeforeTool.write_file");
        assert_eq!(
            (w.kind, w.tool.as_deref(), w.edits.as_slice()),
            (
                Some(Kind::ToolStarted),
                Some("write_file"),
                &["hello.txt".to_owned()][..]
            )
        );
        assert_eq!(decode("BeforeTool.replace").edits, ["hello.txt"]);
        let shell = decode("BeforeTool.run_shell_command");
        assert!(shell.edits.is_empty() && shell.attention.is_none());
        assert_eq!(decode("AfterTool.replace").kind, Some(Kind::ToolCompleted));
        assert_eq!(decode("AfterTool.replace").edits, ["hello.txt"]);
        assert_eq!(
            decode("AfterTool.run_shell_command").kind,
            Some(Kind::ToolCompleted)
        );
        let failed = decode("AfterTool.run_shell_command.exit3");
        assert_eq!(failed.kind, Some(Kind::ToolFailed));
        assert_eq!(failed.error.as_deref(), Some("exit code 3"));
        // The command's output may print anything: Gemini's own line comes after it.
        let mut p = fixture("AfterTool.run_shell_command");
        p["tool_response"]["llmContent"] = json!("Output: Exit Code: 7\nProcess Group PGID: 1\n");
        assert_eq!(
            decode_payload("AfterTool", &p).kind,
            Some(Kind::ToolCompleted)
        );
        p["tool_response"]["llmContent"] = json!("Output: (empty)\nSignal: 9\n");
        assert_eq!(
            decode_payload("AfterTool", &p).error.as_deref(),
            Some("killed by signal 9")
        );
        // Any tool's `error` (a hook blocked it, bad parameters).
        let mut p = fixture("AfterTool.write_file");
        p["tool_response"]["error"] = json!({"type": "invalid_tool_params", "message": "bad path"});
        let ev = decode_payload("AfterTool", &p);
        assert_eq!(
            (ev.kind, ev.error.as_deref()),
            (Some(Kind::ToolFailed), Some("bad path"))
        );
    }

    #[test]
    fn ask_user_opens_its_questions_and_its_notice_adds_nothing() {
        let ev = decode("BeforeTool.ask_user");
        assert_eq!(ev.kind, Some(Kind::ToolStarted));
        assert_eq!(
            ev.attention,
            Some(("question".to_owned(), "Which colour?".to_owned()))
        );
        let ask = ev.ask.unwrap();
        assert_eq!(ask.kind, Some(AttentionKind::Question));
        assert_eq!(ask.questions.len(), 1);
        assert_eq!(ask.questions[0].header.as_deref(), Some("Colour"));
        assert_eq!(ask.questions[0].options, ["red", "blue"]);
        assert!(
            ask.questions[0].free_text,
            "`Enter a custom value` is offered"
        );
        // The notice repeats the open question: a notice, which the open question makes stale.
        let n = decode("Notification.ToolPermission.ask_user");
        assert_eq!(n.kind, Some(Kind::AttentionNotice));
        assert_eq!(n.attention.unwrap().0, "question");
        assert_eq!(decode("AfterTool.ask_user").kind, Some(Kind::ToolCompleted));
    }

    #[test]
    fn permission_dialogs_name_the_command_or_the_file() {
        let exec = decode("Notification.ToolPermission.exec");
        assert_eq!(exec.kind, Some(Kind::PermissionRequest));
        assert_eq!(
            exec.attention,
            Some((
                "permission".to_owned(),
                "echo shell-ran > shell_out.txt; cat shell_out.txt".to_owned()
            ))
        );
        assert_eq!(exec.tool.as_deref(), Some("run_shell_command"));
        let ids = |ev: &HookEvent| -> Vec<String> {
            ev.ask
                .as_ref()
                .unwrap()
                .choices
                .iter()
                .map(|c| c.id.clone())
                .collect()
        };
        assert_eq!(ids(&exec), ["allow", "allow-session", "deny"]);
        let edit = decode("Notification.ToolPermission.edit");
        assert_eq!(
            edit.attention,
            Some((
                "permission".to_owned(),
                "/home/dev/proj/hello.txt".to_owned()
            ))
        );
        assert_eq!(ids(&edit), ["allow", "allow-session", "edit", "deny"]);
        let mut p = fixture("Notification.ToolPermission.exec");
        p["details"] = json!({"type": "mcp", "title": "t", "serverName": "srv", "toolName": "do"});
        assert_eq!(
            decode_payload("Notification", &p).attention.unwrap().1,
            "srv: do"
        );
        p["notification_type"] = json!("Something");
        assert_eq!(decode_payload("Notification", &p).kind, Some(Kind::Other));
    }

    #[test]
    fn answers_are_written_in_geminis_hook_protocol() {
        let block = Answer {
            block: Some("no".into()),
            context: vec!["see spec".into()],
        };
        let out =
            |e: &str| -> Value { serde_json::from_str(&encode_answer(e, &block).stdout).unwrap() };
        assert_eq!(
            out("BeforeTool"),
            json!({"decision": "deny", "reason": "no\n\nsee spec"})
        );
        assert_eq!(out("AfterAgent")["decision"], "block");
        assert_eq!(out("BeforeAgent")["decision"], "block");
        let other = encode_answer("SessionStart", &block);
        assert_eq!((other.exit_code, other.stdout.as_str()), (2, ""));
        let ctx = Answer {
            context: vec!["a".into(), "b".into()],
            block: None,
        };
        for e in CONTEXT_EVENTS {
            let v: Value = serde_json::from_str(&encode_answer(e, &ctx).stdout).unwrap();
            assert_eq!(v["hookSpecificOutput"]["additionalContext"], "a\n\nb");
            assert_eq!(v["hookSpecificOutput"]["hookEventName"], *e);
        }
        assert_eq!(encode_answer("BeforeTool", &ctx), Reply::default());
    }
}
