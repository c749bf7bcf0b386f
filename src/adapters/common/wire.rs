//! The hook wire format Claude Code and Codex share (same event names, `session_id`,
//! `tool_name`, `tool_input`), and the helpers adapters decode and answer hooks with.

use serde_json::{Value, json};

use crate::seam::event::{Answer, HookEvent, Kind, Reply};
use crate::store::session::{Attention, AttentionKind, Choice, Question};

/// How a harness spells the parts of the hook wire format the harnesses share (Codex's hooks
/// follow Claude Code's format: same event names, `session_id`, `tool_name`, `tool_input`).
pub struct Wire {
    /// Payload key of the id that ties an event to its turn.
    pub turn_key: &'static str,
    /// That id names the turn (every prompt of one turn carries it), not one prompt.
    pub turn_key_names_turn: bool,
    /// The tool the agent calls to ask the human a question.
    pub ask_tool: &'static str,
}

/// Decodes the fields and events the wire formats share. Events the adapter decodes itself
/// come back with `kind: None`.
pub fn decode_shared(event: &str, p: &Value, wire: &Wire, edits: Vec<String>) -> HookEvent {
    let tool = str_field(p, "tool_name");
    let mut ev = HookEvent {
        session_id: str_field(p, "session_id"),
        cwd: str_field(p, "cwd"),
        transcript: str_field(p, "transcript_path"),
        turn_id: str_field(p, wire.turn_key),
        turn_id_names_turn: wire.turn_key_names_turn,
        subagent: p.get("agent_id").is_some_and(|a| !a.is_null()),
        agent_id: str_field(p, "agent_id"),
        agent_type: str_field(p, "agent_type"),
        call_id: str_field(p, "tool_use_id"),
        edits,
        tool,
        ..HookEvent::default()
    };
    let input = p.get("tool_input").unwrap_or(&Value::Null);
    ev.kind = match event {
        "SessionStart" => Some(Kind::SessionStart),
        "UserPromptSubmit" => {
            ev.prompt = str_field(p, "prompt");
            Some(Kind::PromptSubmitted)
        }
        "PreToolUse" => {
            if ev.tool.as_deref() == Some(wire.ask_tool) {
                ev.attention = Some(("question".into(), question_text(input)));
                ev.ask = Some(question_ask(input, ev.call_id.clone()));
            }
            Some(Kind::ToolStarted)
        }
        "PostToolUse" => Some(Kind::ToolCompleted),
        "Stop" => {
            ev.stop_hook_active = p
                .get("stop_hook_active")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            Some(Kind::TurnCompleted)
        }
        "SubagentStart" => {
            ev.subagent = true;
            Some(Kind::SubagentStarted)
        }
        "SubagentStop" => {
            ev.subagent = true;
            ev.summary = str_field(p, "last_assistant_message");
            Some(Kind::SubagentStopped)
        }
        "SessionEnd" => {
            ev.reason = str_field(p, "reason");
            Some(Kind::SessionEnded)
        }
        _ => None,
    };
    ev
}

/// A `PermissionRequest`'s attention: the question of an ask tool, else `describe(input)`.
pub fn permission_attention(
    ev: &HookEvent,
    wire: &Wire,
    input: &Value,
    describe: impl FnOnce(&Value) -> String,
) -> (String, String) {
    if ev.tool.as_deref() == Some(wire.ask_tool) {
        ("question".into(), question_text(input))
    } else {
        ("permission".into(), describe(input))
    }
}

/// A question tool's call as an attention to open: each question with its options (Claude's
/// `AskUserQuestion`: `questions[].{question, header, options[].label, multiSelect}`, free
/// text always offered as "Type something"; Codex's `request_user_input`:
/// `questions[].{id, header, question, options[].label, isOther}`).
pub fn question_ask(input: &Value, call_id: Option<String>) -> Attention {
    let questions = input
        .get("questions")
        .and_then(Value::as_array)
        .map(|qs| {
            qs.iter()
                .map(|q| Question {
                    free_text: q.get("isOther").and_then(Value::as_bool).unwrap_or(true),
                    header: str_field(q, "header"),
                    id: str_field(q, "id"),
                    multi_select: q.get("multiSelect").and_then(Value::as_bool) == Some(true),
                    options: q
                        .get("options")
                        .and_then(Value::as_array)
                        .map(|os| os.iter().filter_map(|o| str_field(o, "label")).collect())
                        .unwrap_or_default(),
                    question: str_field(q, "question").unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    Attention {
        kind: Some(AttentionKind::Question),
        questions,
        call_id,
        ..Attention::default()
    }
}

/// A choice of a dialog.
pub fn choice(id: &str, label: &str, message: bool) -> Choice {
    Choice {
        id: id.to_owned(),
        label: label.to_owned(),
        message,
    }
}

/// The text of a block: the reason, then any context spex also had to say.
pub fn block_text(answer: &Answer) -> Option<String> {
    let mut reason = answer.block.clone()?;
    for c in &answer.context {
        reason.push_str("\n\n");
        reason.push_str(c);
    }
    Some(reason)
}

/// A string field of a JSON object.
pub fn str_field(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// The text of a question tool's input: every `question` found, one per line.
pub fn question_text(input: &Value) -> String {
    let mut out = Vec::new();
    if let Some(qs) = input.get("questions").and_then(Value::as_array) {
        for q in qs {
            if let Some(t) = q.get("question").and_then(Value::as_str) {
                out.push(t.to_owned());
            }
        }
    }
    if let Some(t) = input.get("question").and_then(Value::as_str) {
        out.push(t.to_owned());
    }
    if out.is_empty() {
        input.to_string()
    } else {
        out.join("\n")
    }
}

/// spex's answer in a hook protocol like Claude Code's: a block as the JSON `block` makes of
/// the event and the reason (exit 2 with the reason on stderr where it makes none), context as
/// `hookSpecificOutput.additionalContext` on the events that read it (`context_events`), else
/// nothing.
pub fn encode_answer(
    event: &str,
    answer: &Answer,
    context_events: &[&str],
    block: impl FnOnce(&str, &str) -> Option<Value>,
) -> Reply {
    if let Some(reason) = block_text(answer) {
        return match block(event, &reason) {
            Some(out) => Reply {
                stdout: out.to_string(),
                ..Reply::default()
            },
            None => Reply {
                stderr: reason,
                exit_code: 2,
                ..Reply::default()
            },
        };
    }
    if answer.context.is_empty() || !context_events.contains(&event) {
        return Reply::default();
    }
    context_reply(event, &answer.context)
}

/// `{"hookSpecificOutput": {"hookEventName": E, "additionalContext": C}}` as a reply.
pub fn context_reply(event: &str, context: &[String]) -> Reply {
    let out = json!({ "hookSpecificOutput": { "hookEventName": event, "additionalContext": context.join("\n\n") } });
    Reply {
        stdout: out.to_string(),
        ..Reply::default()
    }
}
