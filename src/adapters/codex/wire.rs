//! Codex's hook wire: its payloads as spex's events, spex's answers as its hook output.

use serde_json::Value;

use super::answer;
use super::files::EVENTS_WITH_CONTEXT;
use crate::adapters::common::wire;
use crate::seam::event::{Answer, HookEvent, Kind, Reply};
use crate::seam::wire::HookWire;
use crate::store::session::Usage;

pub struct CodexWire;

impl HookWire for CodexWire {
    fn decode(&self, event: &str, payload: &Value) -> HookEvent {
        decode_payload(event, payload)
    }

    fn encode(&self, event: &str, answer: &Answer) -> Reply {
        encode_answer(event, answer)
    }

    fn takes_context(&self, event: &str) -> bool {
        EVENTS_WITH_CONTEXT.contains(&event)
    }

    fn hook_env_names_session(&self) -> bool {
        false
    }
}

/// Every file an `apply_patch` envelope touches (added, updated, deleted, or moved to).
pub fn patch_files(patch: &str) -> Vec<String> {
    const HEADS: [&str; 4] = [
        "*** Add File: ",
        "*** Update File: ",
        "*** Delete File: ",
        "*** Move to: ",
    ];
    let mut out: Vec<String> = Vec::new();
    for line in patch.lines() {
        let line = line.trim_end_matches('\r');
        if let Some(path) = HEADS.iter().find_map(|h| line.strip_prefix(h)) {
            let path = path.trim().to_owned();
            if !path.is_empty() && !out.contains(&path) {
                out.push(path);
            }
        }
    }
    out
}

/// The exit code in a tool response that starts with `Exit code: N`.
fn response_exit_code(resp: &Value) -> Option<i64> {
    let text = resp.as_str()?;
    text.lines()
        .next()?
        .strip_prefix("Exit code: ")?
        .trim()
        .parse()
        .ok()
}

/// Codex's spelling of the shared wire format.
const WIRE: wire::Wire = wire::Wire {
    turn_key: "turn_id",
    turn_key_names_turn: true,
    ask_tool: "request_user_input",
};

fn decode_payload(event: &str, p: &Value) -> HookEvent {
    use wire::str_field as s;
    let input = p.get("tool_input").cloned().unwrap_or(Value::Null);
    let edits = match s(p, "tool_name").as_deref() {
        Some("apply_patch") => {
            let patch = s(&input, "command")
                .or_else(|| s(&input, "input"))
                .or_else(|| input.as_str().map(str::to_owned));
            patch.map(|p| patch_files(&p)).unwrap_or_default()
        }
        Some("Write" | "Edit") => s(&input, "file_path").into_iter().collect(),
        _ => Vec::new(),
    };
    let mut ev = wire::decode_shared(event, p, &WIRE, edits);
    ev.kind = Some(match (event, ev.kind) {
        // Only an `Exit code: N` line tells a failure apart (apply_patch has it; Bash does not).
        ("PostToolUse", _) => match p.get("tool_response").and_then(response_exit_code) {
            Some(code) if code != 0 => {
                ev.error = Some(format!("exit code {code}"));
                Kind::ToolFailed
            }
            _ => Kind::ToolCompleted,
        },
        (_, Some(kind)) => kind,
        ("PermissionRequest", None) => {
            ev.attention = Some(wire::permission_attention(&ev, &WIRE, &input, |input| {
                let command = s(input, "command").unwrap_or_else(|| input.to_string());
                match s(input, "description") {
                    Some(d) if !d.is_empty() => format!("{command} ({d})"),
                    _ => command,
                }
            }));
            ev.ask = Some(answer::ask(ev.tool.as_deref(), &input));
            Kind::PermissionRequest
        }
        ("Interrupt", None) => Kind::TurnInterrupted,
        ("PreModelRequest", None) => Kind::ModelRequestStarted,
        // Fires once per reconnect attempt; a failed one may be followed by a retry
        // (docs/harnesses/facts/codex.md §8), so it is not the end of the turn.
        ("PostModelRequest", None) => {
            if s(p, "status").as_deref() == Some("failed") {
                ev.error = Some(s(p, "error").unwrap_or_else(|| "model request failed".into()));
                Kind::ModelRequestFailed
            } else {
                ev.usage = p.get("token_usage").filter(|u| u.is_object()).map(|u| {
                    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
                    // `input_tokens` counts the cached ones too (seen live: 13 in, 4 cached).
                    Usage {
                        cache_write_tokens: n("cache_write_input_tokens"),
                        cached_input_tokens: n("cached_input_tokens"),
                        input_tokens: n("input_tokens"),
                        model: s(p, "model"),
                        output_tokens: n("output_tokens"),
                        reasoning_tokens: n("reasoning_output_tokens"),
                        requests: 1,
                        other: serde_json::Map::new(),
                    }
                });
                Kind::ModelRequestCompleted
            }
        }
        _ => Kind::Other,
    });
    ev
}

fn encode_answer(event: &str, answer: &Answer) -> Reply {
    // Exit 2 + stderr blocks PreToolUse, UserPromptSubmit, PostToolUse and Stop alike.
    wire::encode_answer(event, answer, EVENTS_WITH_CONTEXT, |_, _| None)
}

#[cfg(test)]
mod patch_tests {
    use super::*;

    #[test]
    fn patch_names_every_file() {
        let patch = "*** Begin Patch\n*** Add File: a.txt\n+x\n*** Update File: src/b.rs\n*** Move to: src/c.rs\n@@\n-a\n+b\n*** Delete File: d.txt\n*** End Patch\n";
        assert_eq!(
            patch_files(patch),
            vec!["a.txt", "src/b.rs", "src/c.rs", "d.txt"]
        );
    }
}
