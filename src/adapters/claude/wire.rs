//! Claude Code's hook wire: its payloads as spex's events, spex's answers as its hook output.

use std::path::Path;

use serde_json::{Value, json};

use super::{answer, failure, transcript, usage};
use crate::adapters::common::wire;
use crate::seam::event::{Answer, HookEvent, Kind, Reply};
use crate::seam::wire::HookWire;

pub struct ClaudeWire;

impl HookWire for ClaudeWire {
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
        true
    }
}

/// Tools whose input names the file they edit.
fn edited_file(tool: &str, input: &Value) -> Option<String> {
    match tool {
        "Write" | "Edit" | "MultiEdit" => wire::str_field(input, "file_path"),
        "NotebookEdit" => wire::str_field(input, "notebook_path"),
        _ => None,
    }
}

/// Events whose hook output may carry `additionalContext` (docs/harnesses/facts/claude.md §3).
const CONTEXT_EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Notification",
    "Stop",
    "SubagentStop",
];

/// Claude's spelling of the shared wire format.
const WIRE: wire::Wire = wire::Wire {
    turn_key: "prompt_id",
    // Claude takes prompts queued while it worked up as one turn, each with its own id.
    turn_key_names_turn: false,
    ask_tool: "AskUserQuestion",
};

fn decode_payload(event: &str, p: &Value) -> HookEvent {
    use wire::str_field as s;
    let input = p.get("tool_input").cloned().unwrap_or(Value::Null);
    let edits = s(p, "tool_name")
        .and_then(|t| edited_file(&t, &input))
        .into_iter()
        .collect();
    let mut ev = wire::decode_shared(event, p, &WIRE, edits);
    if event == "PostToolUse" && matches!(ev.tool.as_deref(), Some("Agent" | "Task")) {
        // The call that ran a sub-agent names it and reports what it used (seen live).
        let r = p.get("tool_response").unwrap_or(&Value::Null);
        ev.spawned = s(r, "agentId");
        ev.usage = r
            .get("usage")
            .filter(|u| u.is_object())
            .map(|u| usage::from_api(u, s(r, "resolvedModel")))
            .map(|u| crate::store::session::Usage { requests: 0, ..u });
    }
    if ev.kind.is_some() {
        return ev;
    }
    ev.kind = Some(match event {
        "PostToolUseFailure" => {
            ev.error = s(p, "error");
            // Esc during a tool interrupts the turn, and no Stop follows (docs/harnesses/facts/claude.md §7.4).
            if p.get("is_interrupt").and_then(Value::as_bool) == Some(true) {
                Kind::TurnInterrupted
            } else {
                Kind::ToolFailed
            }
        }
        "PermissionRequest" => {
            let tool = ev.tool.clone().unwrap_or_else(|| "tool".into());
            ev.attention = Some(wire::permission_attention(&ev, &WIRE, &input, |input| {
                let what = s(input, "command")
                    .or_else(|| s(input, "file_path"))
                    .unwrap_or_else(|| input.to_string());
                format!("{tool}: {what}")
            }));
            ev.ask = Some(answer::ask(&tool, &input, p));
            // The payload names no call: the transcript does (read on this hook only).
            if ev.call_id.is_none() {
                ev.call_id = ev
                    .transcript
                    .as_deref()
                    .and_then(|t| transcript::pending_call(Path::new(t), &tool, &input));
            }
            Kind::PermissionRequest
        }
        "Notification" => match s(p, "notification_type").as_deref() {
            Some("permission_prompt" | "elicitation_dialog") => {
                ev.attention = Some(("permission".into(), s(p, "message").unwrap_or_default()));
                Kind::AttentionNotice
            }
            Some("idle_prompt") => Kind::IdleNotice,
            _ => Kind::Other,
        },
        "StopFailure" => {
            let failure = failure::stop_failure(p);
            ev.error = Some(failure.error.clone());
            ev.failure = Some(failure);
            Kind::TurnFailed
        }
        _ => Kind::Other,
    });
    ev
}

fn encode_answer(event: &str, answer: &Answer) -> Reply {
    wire::encode_answer(event, answer, CONTEXT_EVENTS, |event, reason| match event {
        "PreToolUse" => Some(json!({ "hookSpecificOutput": {
            "hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": reason } })),
        "UserPromptSubmit" | "Stop" | "SubagentStop" | "PostToolUse" => {
            Some(json!({ "decision": "block", "reason": reason }))
        }
        _ => None,
    })
}
