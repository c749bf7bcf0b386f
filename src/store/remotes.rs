//! Other machines' event streams as this machine keeps them: per host (`remotes/<name>/` in the
//! store) a journal of the remote events its follower took in, the host's reachability, and its
//! sessions' last known state. One follower per host writes them (under `follow.lock`); the
//! events command, the board and the notifier read them. It knows no SSH.
//!
//! The journal is the cursor: each line carries the remote cursor it resumes after
//! (`remote_cursor`), and the line is appended whole in one write, so the host's cursor and the
//! events taken in never disagree, whatever moment a follower dies at. Its lines have their own
//! contiguous positions (`pos`), and the host its own stream key, so one [`Cursor`] names this
//! machine's projects and every host alike.
//!
//! [`Cursor`]: super::stream::Cursor

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::fsutil;

/// Bound of a host's journal (one previous segment is kept beside it).
pub const JOURNAL_BYTES: u64 = 16 * 1024 * 1024;

/// What is kept of one host.
#[derive(Debug, Clone)]
pub struct HostStore {
    pub name: String,
    pub dir: PathBuf,
}

/// Whether the host answers, as its follower last found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reach", rename_all = "snake_case")]
pub enum Reach {
    /// Not followed yet.
    #[default]
    Unknown,
    Reachable {
        since: String,
    },
    /// Refused, hung or failing: since when, and what `ssh` (or the remote spex) said.
    Unreachable {
        since: String,
        error: String,
    },
}

impl Reach {
    pub fn is_reachable(&self) -> bool {
        matches!(self, Reach::Reachable { .. })
    }
}

/// A remote session as its last event left it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Known {
    /// The remote project's folder name (its store key at the end).
    pub project: Option<String>,
    pub session: String,
    pub handle: Option<String>,
    pub name: Option<String>,
    pub harness: Option<String>,
    pub status: Option<String>,
    pub turn: Option<String>,
    /// The open attention's reason, id and text (`None`: none open).
    pub attention: Option<String>,
    pub attention_id: Option<String>,
    pub attention_text: Option<String>,
    /// The open attention's `attention.opened` line as the remote wrote it (its choices and
    /// questions: what an answer link shows and checks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_line: Option<Value>,
    /// The time of its last event (the remote clock's).
    pub updated_at: Option<String>,
}

impl Known {
    /// The name a person gives it: `host:handle` (or its id's start).
    pub fn label(&self, host: &str) -> String {
        let handle = self
            .handle
            .clone()
            .or_else(|| self.name.clone())
            .unwrap_or_else(|| self.session.chars().take(8).collect());
        format!("{host}:{handle}")
    }

    /// The open attention as a local record holds it (its choices, questions and tool), read
    /// from its `attention.opened` line (`None`: none open, or a line this version cannot read).
    pub fn open_attention(&self) -> Option<crate::store::session::Attention> {
        let line = self.attention_line.as_ref()?;
        let mut fields = line.clone();
        // The event names the attention by `attention` and its kind `attention_kind`.
        fields["id"] = line["attention"].clone();
        fields["kind"] = line["attention_kind"].clone();
        fields["since"] = line["time"].clone();
        serde_json::from_value(fields).ok()
    }
}

/// The host's saved state: how far the journal goes, and what it says.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HostState {
    pub schema: u32,
    /// The last position of the journal.
    pub last: u64,
    /// The journal file this state describes: its inode and length after the last append (a
    /// state that names the journal as it is needs no catching up).
    #[serde(default)]
    pub ino: u64,
    #[serde(default)]
    pub bytes: u64,
    /// The remote cursor the next follow resumes after (`None`: from the remote's start).
    pub cursor: Option<String>,
    #[serde(flatten)]
    pub reach: Reach,
    /// Per remote session (`<project>/<session id>`), its last known state.
    pub sessions: BTreeMap<String, Known>,
}

/// Names a host folder may have: what `spex remote add` accepts, and nothing that walks out.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The store of host `name` (`None`: a name that cannot be a folder).
pub fn host(spex_home: &Path, name: &str) -> Option<HostStore> {
    valid_name(name).then(|| HostStore {
        name: name.to_owned(),
        dir: spex_home.join("remotes").join(name),
    })
}

/// The folder every host's store is in.
pub fn root(spex_home: &Path) -> PathBuf {
    spex_home.join("remotes")
}

/// Every host kept in the store, by name.
pub fn all_hosts(spex_home: &Path) -> Vec<HostStore> {
    let Ok(entries) = fs_err::read_dir(root(spex_home)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names.iter().filter_map(|n| host(spex_home, n)).collect()
}

impl HostStore {
    /// The key a cursor names this host's journal by: hex like a project's, from its name.
    pub fn stream_key(&self) -> String {
        let digest = Sha256::digest(format!("remote:{}", self.name).as_bytes());
        hex::encode(&digest[..6])
    }

    pub fn journal(&self) -> PathBuf {
        self.dir.join("stream.jsonl")
    }

    fn state_file(&self) -> PathBuf {
        self.dir.join("state.json")
    }

    /// Held by the one follower of this host.
    pub fn follow_lock(&self) -> PathBuf {
        self.dir.join("follow.lock")
    }

    fn write_lock(&self) -> PathBuf {
        self.dir.join("journal.lock")
    }

    /// The saved state, brought up to what the journal holds (a follower killed between its
    /// append and the state's write left the state behind: the journal is the truth).
    pub fn state(&self) -> HostState {
        let mut state: HostState = fsutil::read_opt(&self.state_file())
            .ok()
            .flatten()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let meta = fs_err::metadata(self.journal()).ok();
        if meta.as_ref().map(|m| (ino_of(m), m.len())) == Some((state.ino, state.bytes)) {
            return state;
        }
        let behind: Vec<Value> = read_lines(&self.journal())
            .into_iter()
            .filter(|l| l["pos"].as_u64().is_some_and(|p| p > state.last))
            .collect();
        for line in &behind {
            fold(&mut state, line);
        }
        state
    }

    /// Appends `lines` (remote events, or this machine's `host.*` lines) to the journal in one
    /// write, each with its position and the host's name, and saves the state they lead to.
    /// Returns the lines as written.
    pub fn append(&self, lines: Vec<Value>) -> std::io::Result<Vec<Value>> {
        if lines.is_empty() {
            return Ok(Vec::new());
        }
        crate::store::lock::with(&self.write_lock(), || {
            let mut state = self.state();
            let mut text = String::new();
            let mut out = Vec::with_capacity(lines.len());
            for line in lines {
                state.last += 1;
                let mut head = serde_json::Map::new();
                head.insert("pos".into(), state.last.into());
                head.insert("host".into(), self.name.clone().into());
                if let Value::Object(mut m) = line {
                    head.append(&mut m);
                }
                let line = Value::Object(head);
                text.push_str(&serde_json::to_string(&line).expect("serializes"));
                text.push('\n');
                fold(&mut state, &line);
                out.push(line);
            }
            fsutil::append_bounded(&self.journal(), text.as_bytes(), journal_bytes())?;
            let meta = fs_err::metadata(self.journal())?;
            (state.ino, state.bytes) = (ino_of(&meta), meta.len());
            state.schema = 1;
            fsutil::write_private(&self.state_file(), &crate::store::json_bytes(&state))?;
            Ok(out)
        })?
    }

    /// Records that the host answers or not: a `host.reachable` / `host.unreachable` line when
    /// that changed (never one per retry). Returns the line written, if any.
    pub fn set_reach(&self, reachable: bool, error: &str) -> std::io::Result<Option<Value>> {
        let state = self.state();
        if state.reach.is_reachable() == reachable && state.reach != Reach::Unknown {
            return Ok(None);
        }
        let now = crate::store::now_rfc3339();
        let line = if reachable {
            serde_json::json!({"kind": "host.reachable", "time": now, "since": now})
        } else {
            serde_json::json!({"kind": "host.unreachable", "time": now, "since": now,
                "error": error, "stale": state.sessions.len()})
        };
        Ok(self.append(vec![line])?.pop())
    }

    /// The journal's lines after position `after`, in order (what is kept: a rotated-out part
    /// is missing, and the caller sees the gap in the positions).
    pub fn lines_after(&self, after: u64) -> Vec<Value> {
        let journal = self.journal();
        let mut lines = read_lines(&fsutil::previous_segment(&journal));
        lines.extend(read_lines(&journal));
        lines
            .into_iter()
            .filter(|l| l["pos"].as_u64().is_some_and(|p| p > after))
            .collect()
    }
}

/// One reader of a host's journal: its position, and how far into the journal file it has read
/// (so a follower reads only what was appended).
#[derive(Debug, Clone)]
pub struct JournalReader {
    /// The last position handed out.
    pub after: u64,
    /// Inode and offset of the journal read so far; `None` before the first read.
    at: Option<(u64, u64)>,
}

impl JournalReader {
    pub fn new(after: u64) -> JournalReader {
        JournalReader { after, at: None }
    }

    /// The journal's lines past this reader's position, in order.
    pub fn next(&mut self, host: &HostStore) -> Vec<Value> {
        let path = host.journal();
        let Ok(meta) = fs_err::metadata(&path) else {
            return Vec::new();
        };
        let ino = ino_of(&meta);
        // `(bytes, where the current file starts in them, where they start in it)`.
        let (mut bytes, lead, base) = match self.at {
            Some((i, off)) if i == ino && off <= meta.len() => (read_bytes(&path, off), 0, off),
            // First read, or rotated since: what is kept, filtered by position below.
            _ => {
                let mut prev = read_bytes(&fsutil::previous_segment(&path), 0);
                prev.truncate(prev.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1));
                let cur = read_bytes(&path, 0);
                let lead = prev.len() as u64;
                prev.extend(cur);
                (prev, lead, 0)
            }
        };
        let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        bytes.truncate(whole);
        // Only whole lines count: what follows the last newline is read next time.
        self.at = Some((ino, base + (whole as u64).saturating_sub(lead)));
        let out: Vec<Value> = String::from_utf8_lossy(&bytes)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| l["pos"].as_u64().is_some_and(|p| p > self.after))
            .collect();
        if let Some(p) = out.last().and_then(|l| l["pos"].as_u64()) {
            self.after = p;
        }
        out
    }
}

/// The file's bytes from `off` (none when it does not exist).
fn read_bytes(path: &Path, off: u64) -> Vec<u8> {
    use std::io::{Read as _, Seek as _};
    let Ok(mut f) = fs_err::File::open(path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if f.seek(std::io::SeekFrom::Start(off)).is_ok() {
        let _ = f.read_to_end(&mut out);
    }
    out
}

/// The journal's bound: [`JOURNAL_BYTES`]; test builds take `SPEX_STREAM_BYTES` as the project
/// streams do.
fn journal_bytes() -> u64 {
    #[cfg(debug_assertions)]
    if let Some(b) = std::env::var("SPEX_STREAM_BYTES")
        .ok()
        .and_then(|b| b.parse().ok())
    {
        return b;
    }
    JOURNAL_BYTES
}

fn ino_of(m: &std::fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::ino(m)
}

/// The whole JSON lines of a file (a last line cut short by a kill is no line).
fn read_lines(path: &Path) -> Vec<Value> {
    let Ok(Some(bytes)) = fsutil::read_opt(path) else {
        return Vec::new();
    };
    let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    String::from_utf8_lossy(&bytes[..whole])
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

/// What one journal line changes in the host's state.
fn fold(state: &mut HostState, line: &Value) {
    if let Some(pos) = line["pos"].as_u64() {
        state.last = state.last.max(pos);
    }
    if let Some(c) = line["remote_cursor"].as_str() {
        state.cursor = Some(c.to_owned());
    }
    let text = |k: &str| line[k].as_str().map(str::to_owned);
    let kind = line["kind"].as_str().unwrap_or_default();
    match kind {
        "host.reachable" => {
            state.reach = Reach::Reachable {
                since: text("since").unwrap_or_default(),
            };
            return;
        }
        "host.unreachable" => {
            state.reach = Reach::Unreachable {
                since: text("since").unwrap_or_default(),
                error: text("error").unwrap_or_default(),
            };
            return;
        }
        // The remote's stream rotated past the cursor: its sessions as a snapshot showed them
        // replace what was kept (`remote::follow`).
        "stream.gap" if line.get("snapshot").is_some_and(Value::is_array) => {
            state.sessions = line["snapshot"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|k| serde_json::from_value::<Known>(k.clone()).ok())
                .map(|k| {
                    let key = format!("{}/{}", k.project.as_deref().unwrap_or_default(), k.session);
                    (key, k)
                })
                .collect();
            return;
        }
        _ => {}
    }
    let Some(session) = line["session"].as_str() else {
        return;
    };
    let project = text("project");
    let key = format!("{}/{session}", project.as_deref().unwrap_or_default());
    let known = state.sessions.entry(key).or_insert_with(|| Known {
        project: project.clone(),
        session: session.to_owned(),
        ..Known::default()
    });
    known.handle = text("handle").or(known.handle.take());
    known.name = text("name").or(known.name.take());
    known.harness = text("harness").or(known.harness.take());
    known.updated_at = text("time").or(known.updated_at.take());
    match kind {
        "attention.opened" => {
            known.attention = text("reason");
            known.attention_id = text("attention");
            known.attention_text = text("text");
            known.attention_line = Some(line.clone());
        }
        "attention.closed" => {
            known.attention = None;
            known.attention_id = None;
            known.attention_text = None;
            known.attention_line = None;
        }
        _ => {}
    }
    if let Some(s) = line.get("state").filter(|s| s.is_object()) {
        known.status = s["status"]
            .as_str()
            .map(str::to_owned)
            .or(known.status.take());
        known.turn = s["turn"].as_str().map(str::to_owned);
        if s["attention"].is_null() {
            known.attention = None;
            known.attention_id = None;
            known.attention_text = None;
            known.attention_line = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host_in(dir: &Path) -> HostStore {
        host(dir, "dev").unwrap()
    }

    #[test]
    fn host_names_that_walk_out_of_the_store_are_refused() {
        let dir = Path::new("/s");
        for bad in ["", "..", ".x", "a/b", "a b", &"x".repeat(65)] {
            assert!(host(dir, bad).is_none(), "{bad:?}");
        }
        assert!(host(dir, "dev-box.1").is_some());
    }

    #[test]
    fn the_journal_is_the_cursor_and_the_state_catches_up_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let h = host_in(dir.path());
        let written = h
            .append(vec![
                serde_json::json!({"kind": "turn.started", "session": "s1", "project": "p-ab",
                    "handle": "a1", "remote_cursor": "ab:1", "time": "t1",
                    "state": {"status": "working", "turn": "running", "attention": null}}),
                serde_json::json!({"kind": "attention.opened", "session": "s1", "project": "p-ab",
                    "reason": "permission", "attention": "a1", "text": "run ls?",
                    "remote_cursor": "ab:2", "time": "t2",
                    "state": {"status": "needs_attention", "turn": "running", "attention": "permission"}}),
            ])
            .unwrap();
        assert_eq!(written[1]["pos"], 2);
        assert_eq!(written[1]["host"], "dev");
        // A follower killed after its append, before the state's write.
        fs_err::remove_file(h.state_file()).unwrap();
        let state = h.state();
        assert_eq!(state.last, 2);
        assert_eq!(state.cursor.as_deref(), Some("ab:2"));
        let s = &state.sessions["p-ab/s1"];
        assert_eq!(s.status.as_deref(), Some("needs_attention"));
        assert_eq!(s.attention_text.as_deref(), Some("run ls?"));
        assert_eq!(s.label("dev"), "dev:a1");
        assert_eq!(h.lines_after(1).len(), 1);
        // A reader takes what was appended since it last read, once.
        let mut r = JournalReader::new(0);
        assert_eq!(r.next(&h).len(), 2);
        assert!(r.next(&h).is_empty());
        h.set_reach(false, "refused").unwrap();
        let more = r.next(&h);
        assert_eq!(more.len(), 1);
        assert_eq!(more[0]["kind"], "host.unreachable");
        assert_eq!(more[0]["stale"], 1);
    }

    #[test]
    fn reachability_is_written_once_per_change() {
        let dir = tempfile::tempdir().unwrap();
        let h = host_in(dir.path());
        assert!(h.set_reach(false, "connection refused").unwrap().is_some());
        assert!(h.set_reach(false, "connection refused").unwrap().is_none());
        assert!(
            matches!(h.state().reach, Reach::Unreachable { ref error, .. } if error == "connection refused")
        );
        assert!(h.set_reach(true, "").unwrap().is_some());
        assert!(h.set_reach(true, "").unwrap().is_none());
        assert!(h.state().reach.is_reachable());
    }
}
