//! How a Claude turn failed, from `StopFailure` and the session's transcript.
//!
//! Verified live with 2.1.197 against the fake Messages API (tests/it/outcomes.rs):
//! `StopFailure` fires instead of `Stop` when a model request fails for good; its `error` is
//! Claude's kind (`rate_limit`, `authentication_failed`, `oauth_org_not_allowed`,
//! `billing_error`, `invalid_request`, `model_not_found`, `server_error`, `overloaded`,
//! `max_output_tokens`, `unknown`; an HTTP 400 gives `unknown`) and its
//! `last_assistant_message` is the synthetic `API Error: ...` line, NOT the text the model
//! wrote before the failure. That text is only in the transcript (`transcript_path`), as the
//! assistant messages since the turn's prompt; the tail is read once, on this rare hook only.

use std::path::Path;

use serde_json::Value;

use crate::store::session::{ErrorKind, Failure};

/// The failure a `StopFailure` payload reports.
pub(super) fn stop_failure(p: &Value) -> Failure {
    let kind_word = super::super::str_field(p, "error");
    let kind = match kind_word.as_deref() {
        Some("rate_limit") => ErrorKind::RateLimit,
        Some("authentication_failed" | "oauth_org_not_allowed" | "billing_error") => {
            ErrorKind::Authentication
        }
        // StopFailure fires only when a model request failed: whatever its word, the model
        // API is what failed.
        _ => ErrorKind::ModelError,
    };
    let error = super::super::str_field(p, "last_assistant_message")
        .or(kind_word)
        .unwrap_or_else(|| "the model request failed".into());
    let (partial, partial_at) = super::super::str_field(p, "transcript_path")
        .and_then(|t| turn_text(Path::new(&t)))
        .filter(|(t, _)| !t.trim().is_empty())
        .map_or((None, None), |(t, at)| (Some(t), at));
    Failure {
        error,
        kind,
        partial,
        partial_at,
    }
}

/// The assistant text written since the last real prompt (a user entry that is not only tool
/// results), leaving out Claude's synthetic API error messages, and the `timestamp` of the
/// first of it. A request that fails at once can come before Claude writes the turn's prompt
/// into the transcript (seen live with 2.1.197): the text found is then the previous turn's,
/// which its time tells.
fn turn_text(transcript: &Path) -> Option<(String, Option<String>)> {
    let entries = super::transcript::tail(transcript)?;
    let mut texts: Vec<String> = Vec::new();
    let mut first_at: Option<String> = None;
    for entry in entries.iter().rev() {
        let content = &entry["message"]["content"];
        match entry["type"].as_str() {
            Some("user") => {
                let tool_results_only = content
                    .as_array()
                    .is_some_and(|blocks| blocks.iter().all(|b| b["type"] == "tool_result"));
                if !tool_results_only {
                    break;
                }
            }
            Some("assistant") => {
                let synthetic = entry["isApiErrorMessage"] == Value::Bool(true)
                    || entry["message"]["model"] == "<synthetic>";
                if synthetic {
                    continue;
                }
                let blocks: Vec<&str> = content
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|b| b["type"] == "text")
                    .filter_map(|b| b["text"].as_str())
                    .collect();
                if !blocks.is_empty() {
                    texts.push(blocks.join("\n"));
                    first_at = entry["timestamp"].as_str().map(str::to_owned);
                }
            }
            _ => {}
        }
    }
    texts.reverse();
    Some((texts.join("\n"), first_at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_partial_text_comes_from_the_transcript_not_the_error_line() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("t.jsonl");
        let lines = [
            r#"{"type":"user","message":{"role":"user","content":"earlier prompt"}}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"old answer"}]}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"now"}]}}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Working on it."},{"type":"tool_use","id":"x"}]}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"x"}]}}"#,
            r#"{"type":"assistant","isApiErrorMessage":true,"message":{"model":"<synthetic>","content":[{"type":"text","text":"API Error: 400 x"}]}}"#,
        ];
        std::fs::write(&t, lines.join("\n")).unwrap();
        let p = serde_json::json!({"error": "unknown", "last_assistant_message": "API Error: 400 x",
            "transcript_path": t});
        let f = stop_failure(&p);
        assert_eq!(f.error, "API Error: 400 x");
        assert_eq!(f.kind, ErrorKind::ModelError);
        assert_eq!(f.partial.as_deref(), Some("Working on it."));
        let limit = stop_failure(&serde_json::json!({"error": "rate_limit"}));
        assert_eq!((limit.kind, limit.partial), (ErrorKind::RateLimit, None));
    }
}
