//! How a Claude turn failed, from `StopFailure`, and the text it wrote first, from the
//! session's transcript.
//!
//! Verified live with 2.1.197 against the fake Messages API (tests/it/outcomes.rs):
//! `StopFailure` fires instead of `Stop` when a model request fails for good; its `error` is
//! Claude's kind (`rate_limit`, `authentication_failed`, `oauth_org_not_allowed`,
//! `billing_error`, `invalid_request`, `model_not_found`, `server_error`, `overloaded`,
//! `max_output_tokens`, `unknown`; an HTTP 400 gives `unknown`) and its
//! `last_assistant_message` is the synthetic `API Error: ...` line, NOT the text the model
//! wrote before the failure. That text is only in the transcript (`transcript_path`), as the
//! assistant messages since the turn's prompt: the hook records the failure as the payload
//! says it, and the readers (never the hook path) read the transcript's tail for that text
//! (`partial_text`). A sub-agent's failure fires `StopFailure` too, with its `agent_id` and the
//! PARENT's `transcript_path` (seen live, tests/it/subagents.rs).

use std::path::Path;

use serde_json::Value;

use crate::store::session::{ErrorKind, Failure};

/// The failure a `StopFailure` payload reports (its partial text is the readers' to find).
pub(super) fn stop_failure(p: &Value) -> Failure {
    let kind_word = crate::adapters::common::wire::str_field(p, "error");
    let kind = match kind_word.as_deref() {
        Some("rate_limit") => ErrorKind::RateLimit,
        Some("authentication_failed" | "oauth_org_not_allowed" | "billing_error") => {
            ErrorKind::Authentication
        }
        // StopFailure fires only when a model request failed: whatever its word, the model
        // API is what failed.
        _ => ErrorKind::ModelError,
    };
    let error = crate::adapters::common::wire::str_field(p, "last_assistant_message")
        .or(kind_word)
        .unwrap_or_else(|| "the model request failed".into());
    Failure::new(error, kind)
}

/// What the transcript says a failed turn wrote.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Written {
    /// The assistant text since the last real prompt, with the `timestamp` of its first part.
    /// A request that fails at once can come before Claude writes the turn's prompt into the
    /// transcript (seen live with 2.1.197): the text found is then the previous turn's, which
    /// its time tells.
    pub text: Option<(String, Option<String>)>,
    /// When Claude's synthetic error message was written, if it is there yet: Claude may write
    /// the transcript a moment after the hook, so until it has the failure it may lack the
    /// text before it too.
    pub error_at: Option<String>,
}

/// The assistant text written since the last real prompt (a user entry that is not only tool
/// results), leaving out Claude's synthetic API error messages, whose time it notes.
pub(super) fn partial_text(transcript: &Path) -> Written {
    let Some(entries) = super::transcript::tail(transcript) else {
        return Written::default();
    };
    let mut texts: Vec<String> = Vec::new();
    let mut first_at: Option<String> = None;
    let mut error_at: Option<String> = None;
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
                    if error_at.is_none() {
                        error_at = entry["timestamp"].as_str().map(str::to_owned);
                    }
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
    let text = texts.join("\n");
    Written {
        text: (!text.trim().is_empty()).then_some((text, first_at)),
        error_at,
    }
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
            r#"{"type":"assistant","timestamp":"2026-11-26T06:36:12.200Z","message":{"content":[{"type":"text","text":"Working on it."},{"type":"tool_use","id":"x"}]}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"x"}]}}"#,
            r#"{"type":"assistant","timestamp":"2026-11-26T06:36:12.300Z","isApiErrorMessage":true,"message":{"model":"<synthetic>","content":[{"type":"text","text":"API Error: 400 x"}]}}"#,
        ];
        fs_err::write(&t, lines.join("\n")).unwrap();
        let p = serde_json::json!({"error": "unknown", "last_assistant_message": "API Error: 400 x",
            "transcript_path": t});
        let f = stop_failure(&p);
        assert_eq!(f.error, "API Error: 400 x");
        assert_eq!(f.kind, ErrorKind::ModelError);
        assert_eq!(f.partial, None, "the hook path reads no transcript");
        assert_eq!(
            partial_text(&t),
            Written {
                text: Some((
                    "Working on it.".into(),
                    Some("2026-11-26T06:36:12.200Z".into())
                )),
                error_at: Some("2026-11-26T06:36:12.300Z".into()),
            }
        );
        let limit = stop_failure(&serde_json::json!({"error": "rate_limit"}));
        assert_eq!((limit.kind, limit.partial), (ErrorKind::RateLimit, None));
    }
}
