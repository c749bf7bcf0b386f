//! The project's event stream (`spex events`): every session's events in one order, each at a
//! position (`pos`, contiguous from 1) a reader resumes after. Readers build it, never the hook
//! path: under `stream.lock` a reader copies the events each session's record has committed
//! and the stream does not hold yet into `stream.jsonl`, then reads what follows its position.
//! The hook path writes exactly what it wrote before (its budget has no room for a second log).
//!
//! Why a journal and not a cursor made of every session's `seq`: such a cursor grows with the
//! sessions (every line of `--json` carries one), and ordering by the events' times is not a
//! total order (a hook takes its time before it waits for the record's lock). The stream is
//! bounded like a session's log (the file becomes `stream.jsonl.1` when the next append would
//! cross [`STREAM_BYTES`]); a position older than what is kept is refused as such.

use std::collections::BTreeMap;
use std::io::{Read as _, Seek as _};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ProjectStore;
use crate::fsutil;
use crate::hint::Hint;

/// Bound of a project's stream file (one previous segment is kept beside it).
pub const STREAM_BYTES: u64 = 16 * 1024 * 1024;

/// How far the stream has taken in each session, and where it ends.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct State {
    schema: u32,
    /// The last position given.
    last: u64,
    /// The stream file this state describes: its inode and length after the last append (a
    /// reader that died between its append and this state's write is found out by them).
    ino: u64,
    bytes: u64,
    /// Per session, the last `seq` of its log the stream holds.
    sessions: BTreeMap<String, u64>,
}

/// What a reader's position was refused for.
#[derive(Debug, thiserror::Error)]
pub enum CursorError {
    #[error(
        "cursor `{cursor}` is older than the events kept: the oldest kept is at {oldest}, so events {} to {} are gone",
        .after + 1, .oldest - 1
    )]
    TooOld {
        cursor: String,
        after: u64,
        oldest: u64,
    },
    #[error(
        "cursor `{cursor}` is past the end of this project's stream (its last event is at {last}): it is from another store, or the stream was removed"
    )]
    Ahead { cursor: String, last: u64 },
    #[error(
        "`{0}` is not a cursor: a cursor is what `spex events --json` prints in `cursor` (`<project>:<pos>`, comma-separated for several projects), or `0`"
    )]
    Malformed(String),
}

impl Hint for CursorError {
    fn hint(&self) -> Option<String> {
        Some("`spex events --since 0` starts from the oldest kept".to_owned())
    }
}

/// Why the stream could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error(transparent)]
    Cursor(#[from] CursorError),
    #[error(transparent)]
    Store(#[from] super::session::StoreError),
    /// `fs_err`'s error (or `fsutil`'s, worded the same way), which names the file.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl Hint for StreamError {
    fn hint(&self) -> Option<String> {
        match self {
            // Transparent: the inner error is not a link of the chain of its own.
            StreamError::Cursor(e) => e.hint(),
            StreamError::Store(e) => e.hint(),
            StreamError::Io(_) => None,
        }
    }
}

/// A resumable position in one or several projects' streams: `<project key>:<pos>`, comma
/// separated (`a1b2c3d4e5f6:42,0f0f0f0f0f0f:7`). A project it does not name starts from its
/// beginning; `0` alone is the beginning of every stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cursor(pub BTreeMap<String, u64>);

impl Cursor {
    pub fn parse(text: &str) -> Result<Cursor, CursorError> {
        let bad = || CursorError::Malformed(crate::text::visible(text));
        let text = text.trim();
        if text == "0" {
            return Ok(Cursor::default());
        }
        let mut map = BTreeMap::new();
        for part in text.split(',') {
            let (key, pos) = part.split_once(':').ok_or_else(bad)?;
            if key.is_empty() || !key.bytes().all(|b| b.is_ascii_hexdigit()) || key.len() > 64 {
                return Err(bad());
            }
            let pos: u64 = pos.parse().map_err(|_| bad())?;
            if map.insert(key.to_owned(), pos).is_some() {
                return Err(bad());
            }
        }
        Ok(Cursor(map))
    }

    /// Where project `key`'s stream resumes (after this position).
    pub fn after(&self, key: &str) -> u64 {
        self.0.get(key).copied().unwrap_or(0)
    }

    pub fn set(&mut self, key: &str, pos: u64) {
        self.0.insert(key.to_owned(), pos);
    }
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("0");
        }
        let parts: Vec<String> = self.0.iter().map(|(k, p)| format!("{k}:{p}")).collect();
        f.write_str(&parts.join(","))
    }
}

impl ProjectStore {
    /// The key a cursor names this project by (the hash in its folder's name).
    pub fn stream_key(&self) -> String {
        let name = self
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let key = name.rsplit('-').next().unwrap_or_default();
        if !key.is_empty() && key.bytes().all(|b| b.is_ascii_hexdigit()) {
            key.to_owned()
        } else {
            super::path_key(&self.dir)
        }
    }

    pub fn stream_file(&self) -> PathBuf {
        self.dir.join("stream.jsonl")
    }

    fn stream_state_file(&self) -> PathBuf {
        self.dir.join("stream.state.json")
    }
}

/// Takes in what the sessions `ids` (every session when `None`) committed since the stream last
/// looked, reading nothing back: for a writer of the stream that reads it elsewhere (the
/// watcher), so every conclusion has its position before any follower asks.
pub fn take_in(store: &ProjectStore, ids: Option<&[String]>) -> Result<(), StreamError> {
    let lock = store.dir.join("stream.lock");
    super::lock::with(&lock, || sync(store, ids).map(drop))?
}

/// One reader of a project's stream: its position, and where in the stream file it has read
/// to (so a follower reads only what was appended).
#[derive(Debug)]
pub struct Reader {
    pub store: ProjectStore,
    /// The last position this reader has handed out.
    pub after: u64,
    /// Inode and offset of the stream file read so far; `None` before the first read.
    at: Option<(u64, u64)>,
    cursor_text: String,
}

impl Reader {
    /// A reader that resumes after position `after`; `None`: at the stream's end (only what
    /// comes from now on).
    pub fn new(store: ProjectStore, after: Option<u64>, cursor_text: &str) -> Reader {
        Reader {
            store,
            after: after.unwrap_or(u64::MAX),
            at: None,
            cursor_text: cursor_text.to_owned(),
        }
    }

    /// Takes in what the sessions `ids` (every session when `None`) committed since the stream
    /// last looked, then returns the stream's lines after this reader's position, in order.
    pub fn next_batch(&mut self, ids: Option<&[String]>) -> Result<Vec<Value>, StreamError> {
        let lock = self.store.dir.join("stream.lock");
        let store = self.store.clone();
        super::lock::with(&lock, || -> Result<Vec<Value>, StreamError> {
            let state = sync(&store, ids)?;
            self.read_new(&state)
        })?
    }

    fn read_new(&mut self, state: &State) -> Result<Vec<Value>, StreamError> {
        let path = self.store.stream_file();
        let prev = fsutil::previous_segment(&path);
        let ino = |p: &std::path::Path| fs_err::metadata(p).ok().map(|m| ino_of(&m));
        let mut text = String::new();
        let first_read = self.at.is_none();
        match self.at {
            Some((i, off)) if ino(&path) == Some(i) => text += &read_from(&path, off)?,
            // First read, or the file rotated since: what is kept, filtered by position below.
            at => {
                let off = at
                    .filter(|(i, _)| ino(&prev) == Some(*i))
                    .map_or(0, |a| a.1);
                text += &read_from(&prev, off)?;
                // A segment an older spex left cut short keeps its fragment out of the next
                // file's first line.
                text.truncate(text.rfind('\n').map_or(0, |i| i + 1));
                text += &read_from(&path, 0)?;
            }
        }
        let len = fs_err::metadata(&path).map_or(0, |m| m.len());
        // Only whole lines count: what follows the last newline is read next time.
        let whole = text.rfind('\n').map_or(0, |i| i + 1);
        let unread = (text.len() - whole) as u64;
        self.at = Some((
            ino(&path).unwrap_or(state.ino),
            len.saturating_sub(unread).min(len),
        ));
        let lines: Vec<Value> = text[..whole]
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["pos"].is_u64())
            .collect();
        if first_read {
            if self.after == u64::MAX {
                self.after = state.last;
                return Ok(Vec::new());
            }
            if self.after > state.last {
                return Err(CursorError::Ahead {
                    cursor: self.cursor_text.clone(),
                    last: state.last,
                }
                .into());
            }
        }
        // Positions are contiguous: a first line past the next one means some are gone.
        if let Some(oldest) = lines
            .iter()
            .filter_map(|v| v["pos"].as_u64())
            .find(|p| *p > self.after)
            && oldest > self.after + 1
            // `0` asks for everything kept, not for what was lost.
            && self.cursor_text != "0"
            && lines.first().and_then(|v| v["pos"].as_u64()) == Some(oldest)
        {
            return Err(CursorError::TooOld {
                cursor: self.cursor_text.clone(),
                after: self.after,
                oldest,
            }
            .into());
        }
        let out: Vec<Value> = lines
            .into_iter()
            .filter(|v| v["pos"].as_u64().is_some_and(|p| p > self.after))
            .collect();
        if let Some(p) = out.last().and_then(|v| v["pos"].as_u64()) {
            self.after = p;
        }
        Ok(out)
    }
}

fn ino_of(m: &std::fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::ino(m)
}

/// The file's text from byte `off` (empty when it does not exist).
fn read_from(path: &std::path::Path, off: u64) -> Result<String, StreamError> {
    Ok(String::from_utf8_lossy(&read_bytes(path, off)?).into_owned())
}

/// Under the stream lock: appends to the stream every event the sessions `ids` (all when
/// `None`) committed that it does not hold, and saves how far it got.
fn sync(store: &ProjectStore, ids: Option<&[String]>) -> Result<State, StreamError> {
    let path = store.stream_file();
    let state_file = store.stream_state_file();
    let mut state: State = fsutil::read_opt(&state_file)?
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    if recover(&path, &mut state)? {
        // Saved before anything is appended: the rotation an append may make deletes the
        // segment before the stream, and no saved state may rely on lines only it held (nor
        // name a file whose inode a new stream could reuse).
        save(&state_file, &mut state)?;
    }
    let all;
    let ids = if let Some(ids) = ids {
        ids
    } else {
        all = store.session_ids();
        &all
    };
    let mut out = String::new();
    for id in ids {
        let Ok(Some(record)) = store.load(id) else {
            continue;
        };
        let had = state.sessions.get(id).copied().unwrap_or(0);
        if record.seq <= had {
            continue;
        }
        let events = store.events(id, None)?;
        let mut next = had + 1;
        let now = super::now_rfc3339();
        let mut add = |mut line: serde_json::Map<String, Value>, state: &mut State| {
            state.last += 1;
            let mut head = serde_json::Map::new();
            head.insert("pos".into(), state.last.into());
            head.insert("session".into(), id.clone().into());
            if let Some(h) = &record.handle {
                head.insert("handle".into(), h.clone().into());
            }
            if let Some(n) = &record.name {
                head.insert("name".into(), n.clone().into());
            }
            head.insert("harness".into(), record.harness.clone().into());
            head.append(&mut line);
            out.push_str(&serde_json::to_string(&Value::Object(head)).expect("serializes"));
            out.push('\n');
        };
        for e in events.iter().filter(|e| e.seq > had && e.seq <= record.seq) {
            if e.seq > next {
                // Rotated out of the session's log before the stream took them in.
                let gap = serde_json::json!({
                    "seq": e.seq - 1, "time": now, "kind": "stream.gap",
                    "source": "spex events", "from_seq": next, "to_seq": e.seq - 1,
                });
                add(gap.as_object().cloned().unwrap_or_default(), &mut state);
            }
            let Ok(Value::Object(mut line)) = serde_json::to_value(e) else {
                continue;
            };
            if e.seq == record.seq {
                // The state the record reached with this event (the last it committed).
                line.insert(
                    "state".into(),
                    serde_json::json!({
                        "status": record.status.as_str(),
                        "turn": record.turn.as_ref().map(|t| t.state.as_str()),
                        "attention": record.attention.as_ref().map(|a| a.reason.as_str()),
                    }),
                );
            }
            add(line, &mut state);
            next = e.seq + 1;
        }
        state.sessions.insert(id.clone(), record.seq);
    }
    if out.is_empty() {
        return Ok(state);
    }
    append(&path, out.as_bytes())?;
    fault("appended");
    let meta = fs_err::metadata(&path)?;
    state.ino = ino_of(&meta);
    state.bytes = meta.len();
    save(&state_file, &mut state)?;
    Ok(state)
}

/// Replaces the saved state in one step (a rename: a reader killed meanwhile leaves the old).
fn save(file: &std::path::Path, state: &mut State) -> Result<(), StreamError> {
    state.schema = 1;
    Ok(fsutil::replace(file, &super::json_bytes(state))?)
}

/// Appends `bytes` to the stream, which first becomes `stream.jsonl.1` (replacing the segment
/// before it) when they would take it past its bound.
fn append(path: &std::path::Path, bytes: &[u8]) -> Result<(), StreamError> {
    let len = fs_err::metadata(path).map_or(0, |m| m.len());
    if len > 0 && len + bytes.len() as u64 > stream_bytes() {
        fs_err::rename(path, fsutil::previous_segment(path))?;
        fault("rotated");
    }
    if cfg!(debug_assertions) && fault_is("torn") {
        // Half the batch, as a write cut short by a kill.
        fsutil::append(path, &bytes[..bytes.len() / 2])?;
        fault("torn");
    }
    Ok(fsutil::append(path, bytes)?)
}

/// The stream's bound: [`STREAM_BYTES`]; test builds take `SPEX_STREAM_BYTES`, so a test can
/// make it rotate within a few events.
fn stream_bytes() -> u64 {
    #[cfg(debug_assertions)]
    if let Some(b) = std::env::var("SPEX_STREAM_BYTES")
        .ok()
        .and_then(|b| b.parse().ok())
    {
        return b;
    }
    STREAM_BYTES
}

/// Whether test builds were asked (`SPEX_STREAM_FAULT`) to die at `point`.
fn fault_is(point: &str) -> bool {
    cfg!(debug_assertions) && std::env::var_os("SPEX_STREAM_FAULT").is_some_and(|v| v == point)
}

/// Test builds only: the reader kills itself (SIGKILL, nothing runs after) at the moment of the
/// copy `SPEX_STREAM_FAULT` names, as a crash exactly there would, so a test reaches each crash
/// window on purpose rather than by luck.
fn fault(point: &str) {
    if fault_is(point) {
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
}

/// Makes `state` say what the stream on disk holds, whatever moment a reader was killed at;
/// returns whether it had to change. The state is saved only after a whole batch is written,
/// so it can lag the file: lines past `bytes` in the file it names (`ino`, found as the
/// stream or, once rotated, as its previous segment) and every line of a newer file are taken
/// in (the stream itself says which events it holds: `session` and `seq`, at `pos`). A last
/// line cut short (a reader killed mid-write) was never a line anyone read (readers take whole
/// lines only): it is cut off, and its event is copied again at the position it was to have.
fn recover(path: &std::path::Path, state: &mut State) -> Result<bool, StreamError> {
    let len_ino = |p: &std::path::Path| fs_err::metadata(p).ok().map(|m| (ino_of(&m), m.len()));
    let cur = len_ino(path);
    if cur == Some((state.ino, state.bytes)) {
        return Ok(false);
    }
    let prev_path = fsutil::previous_segment(path);
    let prev = len_ino(&prev_path);
    let names = |f: Option<(u64, u64)>| f.is_some_and(|(i, l)| i == state.ino && l >= state.bytes);
    let (older, from) = if names(cur) {
        (Vec::new(), state.bytes)
    } else if names(prev) {
        (read_bytes(&prev_path, state.bytes)?, 0)
    } else {
        // No state, or a file it does not name (removed by hand): read all that is kept.
        (read_bytes(&prev_path, 0)?, 0)
    };
    let mut current = read_bytes(path, from)?;
    let whole = current
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |i| i + 1);
    if whole < current.len() {
        let f = fs_err::OpenOptions::new().write(true).open(path)?;
        f.set_len(from + whole as u64)?;
        current.truncate(whole);
    }
    for text in [&older, &current] {
        // Whole lines only (a segment that ends cut short keeps its fragment out).
        let end = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        for v in String::from_utf8_lossy(&text[..end])
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        {
            let (Some(pos), Some(id), Some(seq)) =
                (v["pos"].as_u64(), v["session"].as_str(), v["seq"].as_u64())
            else {
                continue;
            };
            state.last = state.last.max(pos);
            let had = state.sessions.entry(id.to_owned()).or_insert(0);
            *had = (*had).max(seq);
        }
    }
    // The file the next append goes to, or the one it will follow.
    (state.ino, state.bytes) = match (len_ino(path), prev) {
        (Some(f), _) | (None, Some(f)) => f,
        (None, None) => (0, 0),
    };
    Ok(true)
}

/// The file's bytes from `off` (none when it does not exist).
fn read_bytes(path: &std::path::Path, off: u64) -> Result<Vec<u8>, StreamError> {
    let mut f = match fs_err::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut bytes = Vec::new();
    f.seek(std::io::SeekFrom::Start(off))
        .and_then(|_| f.read_to_end(&mut bytes))?;
    Ok(bytes)
}

/// The error a cursor was refused for, when `e` is one.
#[cfg(test)]
fn cursor_error(e: &StreamError) -> Option<&CursorError> {
    match e {
        StreamError::Cursor(c) => Some(c),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::session::{Session, new_event};

    #[test]
    fn cursors_round_trip_and_refuse_what_is_not_one() {
        for text in ["0", "a1b2c3d4e5f6:42", "0f0f0f0f0f0f:7,a1b2c3d4e5f6:0"] {
            assert_eq!(Cursor::parse(text).unwrap().to_string(), text);
        }
        let c = Cursor::parse("a1b2c3d4e5f6:42,0f0f0f0f0f0f:7").unwrap();
        assert_eq!(c.after("a1b2c3d4e5f6"), 42);
        assert_eq!(c.after("ffffffffffff"), 0, "an unnamed project starts at 0");
        for bad in [
            "",
            "42",
            "abc:x",
            "zz:1",
            "a:1,a:2",
            "a:-1",
            "/etc/passwd:1",
            "a:1,",
        ] {
            assert!(
                matches!(Cursor::parse(bad), Err(CursorError::Malformed(_))),
                "{bad:?}"
            );
        }
    }

    fn store() -> (tempfile::TempDir, ProjectStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = ProjectStore {
            dir: dir.path().join("p-a1b2c3d4e5f6"),
            event_log_bytes: 4096,
        };
        (dir, store)
    }

    fn write(store: &ProjectStore, id: &str, n: usize) {
        for _ in 0..n {
            store
                .update(id, |cur| {
                    let mut s = cur.unwrap_or_else(|| Session {
                        id: id.into(),
                        ..Session::default()
                    });
                    s.updated_at = crate::store::now_rfc3339();
                    let pad = "x".repeat(200);
                    (
                        Some(s),
                        vec![new_event(
                            "tool.started",
                            "test",
                            serde_json::json!({"pad": pad}),
                        )],
                        (),
                    )
                })
                .unwrap();
        }
    }

    fn seqs(lines: &[Value]) -> Vec<(String, u64, u64)> {
        lines
            .iter()
            .map(|v| {
                (
                    v["session"].as_str().unwrap().to_owned(),
                    v["seq"].as_u64().unwrap(),
                    v["pos"].as_u64().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn readers_share_one_order_with_no_loss_and_no_duplicate() {
        let (_d, store) = store();
        assert_eq!(store.stream_key(), "a1b2c3d4e5f6");
        write(&store, "s1", 2);
        let mut first = Reader::new(store.clone(), Some(0), "0");
        let got = seqs(&first.next_batch(None).unwrap());
        assert_eq!(got, vec![("s1".into(), 1, 1), ("s1".into(), 2, 2)]);
        write(&store, "s2", 1);
        write(&store, "s1", 1);
        // A second reader from the start sees the same positions.
        let mut second = Reader::new(store.clone(), Some(0), "0");
        let all = seqs(&second.next_batch(None).unwrap());
        assert_eq!(all.len(), 4);
        assert_eq!(
            all.iter().map(|x| x.2).collect::<Vec<_>>(),
            vec![1, 2, 3, 4]
        );
        // The first reader then reads only what is new, in that order.
        let more = seqs(&first.next_batch(None).unwrap());
        assert_eq!(more, all[2..].to_vec());
        assert!(first.next_batch(None).unwrap().is_empty());
        // Resuming after position 3 (another process) gives exactly position 4.
        let mut third = Reader::new(store.clone(), Some(3), "a1b2c3d4e5f6:3");
        assert_eq!(seqs(&third.next_batch(None).unwrap()), all[3..].to_vec());
        // A reader with no position starts at the end.
        let mut fresh = Reader::new(store.clone(), None, "");
        assert!(fresh.next_batch(None).unwrap().is_empty());
        write(&store, "s2", 1);
        assert_eq!(
            seqs(&fresh.next_batch(None).unwrap()),
            vec![("s2".into(), 2, 5)]
        );
        // A cursor past the end is refused.
        let mut ahead = Reader::new(store.clone(), Some(99), "a1b2c3d4e5f6:99");
        let err = ahead.next_batch(None).unwrap_err();
        assert!(matches!(
            cursor_error(&err),
            Some(CursorError::Ahead { .. })
        ));
    }

    /// A session's log rotates (4 KiB here) between reads: the stream still holds every event;
    /// events rotated away before any reader took them in are a `stream.gap`, said once.
    #[test]
    fn rotation_of_a_session_log_loses_nothing_the_stream_took_in() {
        let (_d, store) = store();
        let mut r = Reader::new(store.clone(), Some(0), "0");
        let mut seen = Vec::new();
        for _ in 0..10 {
            write(&store, "s1", 5);
            seen.extend(seqs(&r.next_batch(None).unwrap()));
        }
        assert_eq!(
            seen.iter().map(|x| x.1).collect::<Vec<_>>(),
            (1..=50).collect::<Vec<_>>()
        );
        // 60 events of ~300 bytes while nobody reads: the log kept only its last two segments.
        write(&store, "s1", 60);
        let lines = r.next_batch(None).unwrap();
        assert_eq!(lines[0]["kind"], "stream.gap", "{:?}", lines[0]);
        assert_eq!(lines[0]["from_seq"], 51);
        let first_kept = lines[1]["seq"].as_u64().unwrap();
        assert_eq!(lines[0]["to_seq"].as_u64().unwrap(), first_kept - 1);
        assert_eq!(lines.last().unwrap()["seq"], 110);
    }

    /// The stream itself rotates: a reader that kept up goes on; a cursor older than what is
    /// kept is refused and says from where the stream can be read.
    #[test]
    fn a_cursor_older_than_the_stream_keeps_is_refused() {
        let (_d, store) = store();
        let mut r = Reader::new(store.clone(), Some(0), "a1b2c3d4e5f6:0");
        let mut all = Reader::new(store.clone(), Some(0), "0");
        // Pretend an old segment rotated away: write a stream whose first kept pos is 10.
        let path = store.stream_file();
        let mut lines = String::new();
        for pos in 10..=12 {
            lines.push_str(&format!(
                "{{\"pos\":{pos},\"session\":\"s9\",\"seq\":{pos},\"kind\":\"x\"}}\n"
            ));
        }
        fsutil::append(&path, lines.as_bytes()).unwrap();
        let err = r.next_batch(None).unwrap_err();
        match cursor_error(&err) {
            Some(CursorError::TooOld { oldest, .. }) => assert_eq!(*oldest, 10),
            other => panic!("{other:?}"),
        }
        // `--since 0`, as the refusal's hint says, reads from the oldest kept.
        let kept: Vec<u64> = all
            .next_batch(None)
            .unwrap()
            .iter()
            .filter_map(|v| v["pos"].as_u64())
            .collect();
        assert_eq!(kept, [10, 11, 12]);
        // Recovered into the state: the next position follows the last kept one.
        write(&store, "s1", 1);
        let mut from9 = Reader::new(store.clone(), Some(9), "a1b2c3d4e5f6:9");
        let got = seqs(&from9.next_batch(None).unwrap());
        assert_eq!(got.last().unwrap().2, 13);
    }
}
