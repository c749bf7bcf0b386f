//! Model usage of a Claude session, from its transcript (`transcript_path`, JSON lines): each
//! assistant entry carries its API message's `id`, `model` and `usage` (`input_tokens`,
//! `cache_read_input_tokens`, `cache_creation_input_tokens`, `output_tokens`). Claude writes
//! one entry per content block of a message, each with the message's usage so far, so a
//! message counts once, with its last entry's numbers. Read by the readers from where they
//! last stopped (`UsageCursor`), never on the hook path. Sub-agents write their own
//! transcripts: the session's usage is its own requests'.

use std::path::Path;

use serde_json::Value;

use crate::seam::evidence::UsageEntry;
use crate::store::session::{Usage, UsageCursor};

/// Claude's usage object as spex counts it: `input_tokens` with the cache reads and writes
/// (Claude counts those apart), one request.
pub(super) fn from_api(u: &Value, model: Option<String>) -> Usage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let (read, write) = (
        n("cache_read_input_tokens"),
        n("cache_creation_input_tokens"),
    );
    Usage {
        cache_write_tokens: write,
        cached_input_tokens: read,
        input_tokens: n("input_tokens") + read + write,
        model,
        output_tokens: n("output_tokens"),
        reasoning_tokens: 0,
        requests: 1,
        other: serde_json::Map::new(),
    }
}

/// What the transcript adds since `cursor`: the usage of each message counted (by the time its
/// entry was written, so the caller can tell turns apart), a message counted earlier and
/// written again taken back out first, and the new cursor (`done` once a session that has
/// `exited` is read to its end). `None` when nothing changed.
pub(super) fn read(
    transcript: &Path,
    cursor: &UsageCursor,
    exited: bool,
) -> Option<(Vec<UsageEntry>, UsageCursor)> {
    crate::adapters::common::log::read_usage(transcript, cursor, exited, |entry| {
        let msg = &entry["message"];
        if entry["type"] != "assistant"
            || msg["model"] == "<synthetic>"
            || !msg["usage"].is_object()
        {
            return None;
        }
        let (id, time) = (msg["id"].as_str()?, entry["timestamp"].as_str()?);
        let usage = from_api(&msg["usage"], msg["model"].as_str().map(str::to_owned));
        Some((id.to_owned(), time.to_owned(), usage))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_written_in_parts_counts_once_with_its_last_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("t.jsonl");
        let entry = |id: &str, out: u64| {
            format!(
                r#"{{"type":"assistant","timestamp":"2026-11-26T06:36:12.200Z","message":{{"id":"{id}","model":"claude-x","usage":{{"input_tokens":11,"cache_read_input_tokens":5,"cache_creation_input_tokens":3,"output_tokens":{out}}}}}}}"#
            )
        };
        let synthetic = r#"{"type":"assistant","timestamp":"2026-11-26T06:36:12.300Z","message":{"id":"x","model":"<synthetic>","usage":{"input_tokens":0,"output_tokens":0}}}"#;
        fs_err::write(&t, format!("{}\n{}\n", entry("m1", 1), entry("m1", 7))).unwrap();
        let (first, cursor) = read(&t, &UsageCursor::default(), false).unwrap();
        let mut total = crate::seam::evidence::usage_total(&first);
        assert_eq!(
            (
                total.input_tokens,
                total.cached_input_tokens,
                total.output_tokens,
                total.requests
            ),
            (19, 5, 7, 1)
        );
        assert_eq!(total.model.as_deref(), Some("claude-x"));
        // Appended later: the same message once more (its numbers replace), a new one, a
        // synthetic error line (no request) and half a line (read next time).
        let more = format!(
            "{}\n{}\n{synthetic}\n{{\"type\":",
            entry("m1", 9),
            entry("m2", 2)
        );
        let mut f = fs_err::OpenOptions::new().append(true).open(&t).unwrap();
        std::io::Write::write_all(&mut f, more.as_bytes()).unwrap();
        let (second, cursor2) = read(&t, &cursor, false).unwrap();
        for (_, u, minus) in &second {
            crate::seam::evidence::count(&mut total, u, *minus);
        }
        assert_eq!((total.output_tokens, total.requests), (11, 2));
        assert!(cursor2.offset < fs_err::metadata(&t).unwrap().len());
        assert!(read(&t, &cursor2, false).is_none(), "half a line waits");
        // Once the session exited, nothing more comes: the log is read (half a line included).
        let (nothing, last) = read(&t, &cursor2, true).unwrap();
        assert!(nothing.is_empty() && last.done);
        assert!(read(&t, &last, true).is_none());
    }
}
