//! Gemini CLI's transcript (`transcript_path`: `~/.gemini/tmp/<project>/chats/session-*.jsonl`,
//! docs/harnesses/facts/gemini.md §11), read by the readers only, never on the hook path. Verified with
//! 0.61.0: after a first line naming the session, one JSON object per line: messages
//! (`{id, timestamp, type: "user" | "gemini" | "info", content, ...}`; a `gemini` message
//! carries its request's `tokens` and `model`, and is written again with its `toolCalls`,
//! each with a `status`) and `{"$set": ...}` updates. Esc at a permission dialog, which fires
//! no hook, writes the call `cancelled` and an `info` message `Request cancelled.`.

use std::path::Path;

use serde_json::Value;

use crate::seam::evidence::UsageEntry;
use crate::store::session::{Usage, UsageCursor};

/// What the transcript says about a turn cancelled without its ending hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Cancelled {
    /// When Gemini wrote that the request was cancelled.
    pub at: String,
    /// A tool call was cancelled with it: the person rejected its dialog.
    pub call: Option<String>,
}

/// The request cancelled at or after `since` (an RFC 3339 time), as the transcript's end says.
pub(super) fn cancelled_since(transcript: &Path, since: &str) -> Option<Cancelled> {
    let since = crate::store::parse_time(since)?;
    let after = |e: &Value| {
        e["timestamp"]
            .as_str()
            .and_then(crate::store::parse_time)
            .is_some_and(|t| t >= since)
    };
    let entries = crate::adapters::common::log::jsonl_tail(transcript)?;
    let mut call = None;
    for e in entries.iter().filter(|e| after(e)) {
        match e["type"].as_str() {
            Some("gemini") => {
                let cancelled = e["toolCalls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|c| c["status"] == "cancelled");
                if let Some(c) = cancelled {
                    call = c["name"].as_str().map(str::to_owned);
                }
            }
            Some("info") if is_cancel(e) => {
                return Some(Cancelled {
                    at: e["timestamp"].as_str().unwrap_or_default().to_owned(),
                    call,
                });
            }
            _ => {}
        }
    }
    None
}

/// How much of the transcript's end `AfterAgent` reads: its last records are small, and the
/// hook path affords no more (a `$set` of the whole history may fill it: then nothing is found).
const HOOK_TAIL_BYTES: u64 = 16 * 1024;

/// Whether the newest message in the transcript says the request was cancelled: Gemini writes
/// that before it fires `AfterAgent` for a turn cancelled while the model streamed (seen with
/// 0.61.0), and `AfterAgent` itself reads the same as a completed turn (the partial text).
pub(super) fn ends_cancelled(transcript: &Path) -> bool {
    let Some(bytes) = crate::adapters::common::log::last_bytes(transcript, HOOK_TAIL_BYTES) else {
        return false;
    };
    // From the end, parsing only what may be a message: `$set` updates (one may hold the whole
    // history) are passed over unread.
    bytes
        .split(|b| *b == b'\n')
        .rev()
        .filter(|l| !l.is_empty() && !l.starts_with(br#"{"$set""#))
        .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
        .find(|e| matches!(e["type"].as_str(), Some("user" | "gemini" | "info")))
        .is_some_and(|e| is_cancel(&e))
}

fn is_cancel(e: &Value) -> bool {
    e["type"] == "info"
        && e["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("Request cancelled"))
}

/// The usage the transcript adds since `cursor` (each `gemini` message's request counted once,
/// with its last numbers), and the next cursor.
pub(super) fn usage(
    transcript: &Path,
    cursor: &UsageCursor,
    exited: bool,
) -> Option<(Vec<UsageEntry>, UsageCursor)> {
    crate::adapters::common::log::read_usage(transcript, cursor, exited, |e| {
        let tokens = e.get("tokens").filter(|t| t.is_object())?;
        if e["type"] != "gemini" {
            return None;
        }
        let n = |k: &str| tokens.get(k).and_then(Value::as_u64).unwrap_or(0);
        // `input` (Gemini's `promptTokenCount`) counts the cached tokens too; `tool` is the
        // prompt of tool use, read besides it.
        let usage = Usage {
            cached_input_tokens: n("cached"),
            input_tokens: n("input") + n("tool"),
            model: e["model"].as_str().map(str::to_owned),
            output_tokens: n("output"),
            reasoning_tokens: n("thoughts"),
            requests: 1,
            ..Usage::default()
        };
        Some((
            e["id"].as_str()?.to_owned(),
            e["timestamp"].as_str()?.to_owned(),
            usage,
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines of a transcript Gemini CLI 0.61.0 wrote for Esc at a shell permission dialog
    /// (trimmed), after an earlier turn that completed.
    const CANCELLED: &[&str] = &[
        r#"{"sessionId":"s1","projectHash":"h","startTime":"2026-11-26T09:59:31.000Z","lastUpdated":"2026-11-26T09:59:31.000Z","kind":"main"}"#,
        r#"{"id":"u0","timestamp":"2026-11-26T09:58:00.000Z","type":"user","content":[{"text":"earlier"}]}"#,
        r#"{"id":"i0","timestamp":"2026-11-26T09:58:01.000Z","type":"info","content":"Request cancelled."}"#,
        r#"{"id":"u1","timestamp":"2026-11-26T09:59:32.363Z","type":"user","content":[{"text":"SCENARIO:shell go"}]}"#,
        r#"{"$set":{"lastUpdated":"2026-11-26T09:59:32.364Z"}}"#,
        r#"{"id":"g1","timestamp":"2026-11-26T09:59:32.678Z","type":"gemini","content":"","tokens":{"input":17,"output":9,"cached":4,"thoughts":2,"tool":0,"total":28},"model":"gemini-2.5-flash"}"#,
        r#"{"id":"g1","timestamp":"2026-11-26T09:59:32.678Z","type":"gemini","content":"","tokens":{"input":17,"output":9,"cached":4,"thoughts":2,"tool":0,"total":28},"model":"gemini-2.5-flash","toolCalls":[{"id":"c1","name":"run_shell_command","status":"cancelled","result":[{"functionResponse":{"response":{"error":"[Operation Cancelled] Reason: User denied execution."}}}]}]}"#,
        r#"{"id":"i1","timestamp":"2026-11-26T09:59:35.538Z","type":"info","content":"Request cancelled."}"#,
    ];

    fn write(lines: &[&str]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("session.jsonl");
        fs_err::write(&t, lines.join("\n") + "\n").unwrap();
        (dir, t)
    }

    #[test]
    fn a_rejected_dialog_is_a_cancelled_call_and_request_since_the_turn_began() {
        let (_d, t) = write(CANCELLED);
        assert_eq!(
            cancelled_since(&t, "2026-11-26T09:59:32.100Z"),
            Some(Cancelled {
                at: "2026-11-26T09:59:35.538Z".into(),
                call: Some("run_shell_command".into()),
            })
        );
        // A cancel before the turn began is an earlier turn's.
        let (_d, t) = write(&CANCELLED[..6]);
        assert_eq!(cancelled_since(&t, "2026-11-26T09:59:32.100Z"), None);
        assert_eq!(
            cancelled_since(
                Path::new("/nonexistent/t.jsonl"),
                "2026-11-26T09:59:32.100Z"
            ),
            None
        );
    }

    #[test]
    fn a_transcript_ends_cancelled_when_its_newest_message_says_so() {
        let (_d, t) = write(CANCELLED);
        assert!(ends_cancelled(&t));
        // The prompt after it is newer: not cancelled (yet).
        let mut more = CANCELLED.to_vec();
        more.push(r#"{"id":"u2","timestamp":"2026-11-26T10:00:00.000Z","type":"user","content":[{"text":"next"}]}"#);
        more.push(r#"{"$set":{"lastUpdated":"2026-11-26T10:00:00.000Z"}}"#);
        let (_d, t) = write(&more);
        assert!(!ends_cancelled(&t));
        let (_d, t) = write(&CANCELLED[..6]);
        assert!(!ends_cancelled(&t));
        assert!(!ends_cancelled(Path::new("/nonexistent/t.jsonl")));
    }

    #[test]
    fn each_request_counts_once_with_its_tokens() {
        let (_d, t) = write(CANCELLED);
        let (entries, cursor) = usage(&t, &UsageCursor::default(), false).unwrap();
        let total = crate::seam::evidence::usage_total(&entries);
        assert_eq!(
            (
                total.input_tokens,
                total.cached_input_tokens,
                total.output_tokens,
                total.reasoning_tokens,
                total.requests
            ),
            (17, 4, 9, 2, 1)
        );
        assert_eq!(total.model.as_deref(), Some("gemini-2.5-flash"));
        assert!(usage(&t, &cursor, false).is_none(), "nothing new");
    }
}
