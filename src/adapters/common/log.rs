//! Reading a harness's own JSON-lines logs (transcripts, rollouts).

use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;

use serde_json::Value;

use crate::seam::evidence::UsageEntry;
use crate::store::session::{Usage, UsageCursor};

/// How much one usage read takes at most (the rest waits for the next reader).
const USAGE_READ_BYTES: u64 = 8 * 1024 * 1024;

/// What a JSON-lines log adds since `cursor`: the usage of each model message `counted` finds
/// in an entry (its id, when it was written, its usage), a message counted before and written
/// again taken back out first (a harness that rewrites a message as it grows), and the new
/// cursor (`done` once a session that has `exited` is read to its end). `None` when nothing
/// changed. Read by the readers from where they last stopped, never on the hook path.
pub fn read_usage(
    log: &Path,
    cursor: &UsageCursor,
    exited: bool,
    counted: impl Fn(&Value) -> Option<(String, String, Usage)>,
) -> Option<(Vec<UsageEntry>, UsageCursor)> {
    // Nothing (more) to read: for a session that exited, nothing more will come.
    let finished = || {
        (exited && !cursor.done).then(|| {
            let done = UsageCursor {
                done: true,
                ..cursor.clone()
            };
            (Vec::new(), done)
        })
    };
    // No log (never written, or removed): nothing to record, and a store full of such old
    // records is not rewritten for it (an open that fails is cheaper than a record write).
    let mut f = crate::fsutil::open_quiet(log)?;
    let len = f.metadata().ok()?.len();
    if len <= cursor.offset {
        return finished();
    }
    f.seek(SeekFrom::Start(cursor.offset)).ok()?;
    let mut bytes = Vec::new();
    f.take(USAGE_READ_BYTES).read_to_end(&mut bytes).ok()?;
    // Only whole lines: a line still being written is read next time.
    let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    if whole == 0 {
        return finished();
    }
    let mut out: Vec<UsageEntry> = Vec::new();
    let mut last = cursor.last.clone();
    for line in bytes[..whole].split(|b| *b == b'\n') {
        let Some((id, time, usage)) = serde_json::from_slice::<Value>(line)
            .ok()
            .and_then(|entry| counted(&entry))
        else {
            continue;
        };
        // A later entry of the message last counted replaces its numbers.
        if let Some((_, before)) = last.as_ref().filter(|(l, _)| *l == id) {
            let mut minus = before.clone();
            minus.model = None;
            out.push((time.clone(), minus, true));
        }
        out.push((time, usage.clone(), false));
        last = Some((id, usage));
    }
    let offset = cursor.offset + whole as u64;
    let next = UsageCursor {
        done: exited && offset >= len,
        last,
        offset,
        other: cursor.other.clone(),
    };
    Some((out, next))
}

/// How much of a harness's JSON-lines log (a transcript, a rollout) is read at its end.
const JSONL_TAIL_BYTES: u64 = 256 * 1024;

/// The entries in the last [`JSONL_TAIL_BYTES`] of a JSON-lines log, oldest first (a cut first
/// line is not JSON and is skipped).
pub fn jsonl_tail(path: &Path) -> Option<Vec<Value>> {
    let bytes = last_bytes(path, JSONL_TAIL_BYTES)?;
    Some(
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect(),
    )
}

/// The last `limit` bytes of a log (all of it when shorter): a small read for the hook path,
/// which parses only the lines it needs.
pub fn last_bytes(path: &Path, limit: u64) -> Option<Vec<u8>> {
    let mut f = crate::fsutil::open_quiet(path)?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(limit))).ok()?;
    let mut bytes = Vec::new();
    f.take(limit).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}
