//! Reading a harness's own JSON-lines logs (transcripts, rollouts).

use std::path::Path;

use serde_json::Value;

/// How much of a harness's JSON-lines log (a transcript, a rollout) is read at its end.
const JSONL_TAIL_BYTES: u64 = 256 * 1024;

/// The entries in the last [`JSONL_TAIL_BYTES`] of a JSON-lines log, oldest first (a cut first
/// line is not JSON and is skipped).
pub fn jsonl_tail(path: &Path) -> Option<Vec<Value>> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let from = len.saturating_sub(JSONL_TAIL_BYTES);
    f.seek(SeekFrom::Start(from)).ok()?;
    let mut bytes = Vec::new();
    f.take(JSONL_TAIL_BYTES).read_to_end(&mut bytes).ok()?;
    Some(
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect(),
    )
}
