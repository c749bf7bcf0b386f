//! Claude Code's transcript (`transcript_path`, JSON lines), read at its end on the rare hooks
//! that need it: the `tool_use_id` a `PermissionRequest` is about (its payload has none, but
//! the assistant's `tool_use` is already written when the hook starts:
//! docs/harnesses/facts/answering-claude.md §4.6), and the `tool_result` that shows what became of a call.

use std::path::Path;

use serde_json::Value;

/// The entries at the transcript's end, oldest first.
pub(super) fn tail(transcript: &Path) -> Option<Vec<Value>> {
    crate::adapters::common::log::jsonl_tail(transcript)
}

fn blocks(entry: &Value) -> impl Iterator<Item = &Value> {
    entry["message"]["content"].as_array().into_iter().flatten()
}

fn results(entries: &[Value]) -> impl Iterator<Item = &Value> {
    entries
        .iter()
        .filter(|e| e["type"] == "user")
        .flat_map(blocks)
        .filter(|b| b["type"] == "tool_result")
}

/// The id of the newest call of `tool` with exactly `input` that has no result yet: the call
/// a `PermissionRequest` asks about (parallel calls differ in their input).
pub(super) fn pending_call(transcript: &Path, tool: &str, input: &Value) -> Option<String> {
    let entries = tail(transcript)?;
    let done: Vec<&str> = results(&entries)
        .filter_map(|b| b["tool_use_id"].as_str())
        .collect();
    let pending: Vec<&Value> = entries
        .iter()
        .rev()
        .filter(|e| e["type"] == "assistant")
        .flat_map(blocks)
        .filter(|b| b["type"] == "tool_use" && b["name"] == tool)
        .filter(|b| b["id"].as_str().is_some_and(|id| !done.contains(&id)))
        .collect();
    // Claude fills some inputs in itself before asking (ExitPlanMode's `plan`, §3): then the
    // newest pending call of that tool.
    pending
        .iter()
        .find(|b| b["input"] == *input)
        .or(pending.first())
        .and_then(|b| b["id"].as_str())
        .map(str::to_owned)
}

/// The result of call `call_id`: whether it is an error, and its text.
pub(super) fn result_of(transcript: &Path, call_id: &str) -> Option<(bool, String)> {
    let entries = tail(transcript)?;
    let r = results(&entries).find(|b| b["tool_use_id"] == call_id)?;
    let text = match &r["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    };
    Some((r["is_error"] == Value::Bool(true), text))
}
