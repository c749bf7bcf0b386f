//! Session records on disk: `sessions/<id>/session.json` (the current state, schema-versioned)
//! and `sessions/<id>/events.jsonl` (append-only), the alias index that maps a harness's own
//! session id to a spex id in O(1) (one file per alias), and the per-file ledger of sessions
//! that touched it. Every read-modify-write of a record holds the session's lock.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::error::{StoreError, check_id, io};
use super::ids::{is_valid_id, sanitize};
use super::record::{Event, Session};
use crate::fsutil;
use crate::store::ProjectStore;

impl ProjectStore {
    pub fn sessions_dir(&self) -> PathBuf {
        self.dir.join("sessions")
    }

    pub fn session_dir(&self, id: &str) -> PathBuf {
        self.sessions_dir().join(id)
    }

    /// The marker a session's host keeps while a `spex attach` terminal is attached (the pid of
    /// the host inside): the notifier sends nothing for a session a person is attached to.
    pub fn attached_file(&self, id: &str) -> PathBuf {
        self.session_dir(id).join("attached")
    }

    /// Whether a live host says a terminal is attached to session `id`.
    pub fn attached(&self, id: &str) -> bool {
        fs_err::read_to_string(self.attached_file(id))
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
            .and_then(rustix::process::Pid::from_raw)
            .is_some_and(|pid| rustix::process::test_kill_process(pid).is_ok())
    }

    fn alias_file(&self, harness: &str, harness_id: &str) -> PathBuf {
        self.dir
            .join("aliases")
            .join(format!("{harness}-{}", sanitize(harness_id)))
    }

    /// The spex id a harness session id maps to.
    pub fn alias(&self, harness: &str, harness_id: &str) -> Option<String> {
        self.alias_entry(harness, harness_id).ok().flatten()
    }

    /// The spex id a harness session id maps to; an alias file that holds no valid id (a
    /// garbled or forged file) is an error, never a path.
    pub fn alias_entry(
        &self,
        harness: &str,
        harness_id: &str,
    ) -> Result<Option<String>, StoreError> {
        let path = self.alias_file(harness, harness_id);
        let Ok(text) = fs_err::read_to_string(&path) else {
            return Ok(None);
        };
        let id = text.trim();
        if id.is_empty() {
            return Ok(None);
        }
        check_id(id, &format!("alias file `{}` holds", path.display()))?;
        Ok(Some(id.to_owned()))
    }

    pub fn set_alias(&self, harness: &str, harness_id: &str, id: &str) -> Result<(), StoreError> {
        let path = self.alias_file(harness, harness_id);
        fsutil::write_private(&path, id.as_bytes())
            .map_err(io(&path))
            .map(drop)
    }

    pub fn load(&self, id: &str) -> Result<Option<Session>, StoreError> {
        check_id(id, "session")?;
        let path = self.session_dir(id).join("session.json");
        match fsutil::read_opt(&path).map_err(io(&path))? {
            None => Ok(None),
            Some(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|e| StoreError::Corrupt {
                        path,
                        message: e.to_string(),
                    })
            }
        }
    }

    fn save(&self, s: &Session) -> Result<(), StoreError> {
        let path = self.session_dir(&s.id).join("session.json");
        fsutil::replace(&path, &crate::store::json_bytes(s)).map_err(io(&path))
    }

    /// Read-modify-write of one session under its lock: `f` gets the current record (or
    /// `None`) and returns the record to store plus events to append (numbered here).
    pub fn update<R>(
        &self,
        id: &str,
        f: impl FnOnce(
            Option<Session>,
        ) -> (
            Option<Session>,
            Vec<(String, String, serde_json::Map<String, Value>)>,
            R,
        ),
    ) -> Result<R, StoreError> {
        check_id(id, "session")?;
        let dir = self.session_dir(id);
        let lock = dir.join("lock");
        crate::store::lock::with(&lock, || -> Result<R, StoreError> {
            let current = self.load(id)?;
            let (next, events, out) = f(current);
            let Some(mut next) = next else { return Ok(out) };
            if !events.is_empty() {
                let path = dir.join("events.jsonl");
                let mut lines = String::new();
                for (kind, source, fields) in events {
                    next.seq += 1;
                    let ev = Event {
                        seq: next.seq,
                        time: next.updated_at.clone(),
                        kind,
                        source,
                        fields,
                    };
                    lines.push_str(&serde_json::to_string(&ev).expect("an event serializes"));
                    lines.push('\n');
                }
                // Events first: a crash between the two leaves the record one step behind
                // its log, never a record claiming events that were not written.
                let loose = fsutil::append_bounded(&path, lines.as_bytes(), self.event_log_bytes)
                    .map_err(io(&path))?;
                if loose {
                    // A store an older spex left readable by others: private from now on.
                    if let Some(home) = self.dir.parent().and_then(Path::parent) {
                        fsutil::tighten(home);
                    }
                }
            }
            self.save(&next)?;
            Ok(out)
        })
        .map_err(io(&lock))?
    }

    /// The last `n` events of a session (all when `n` is `None`).
    pub fn events(&self, id: &str, n: Option<usize>) -> Result<Vec<Event>, StoreError> {
        let path = self.session_dir(id).join("events.jsonl");
        let read = |path: &Path| match fs_err::read_to_string(path) {
            Ok(t) => Ok(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(e) => Err(io(path)(e)),
        };
        // The segment rotated out by the size bound comes first.
        let text = read(&fsutil::previous_segment(&path))? + &read(&path)?;
        let all: Vec<Event> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let skip = n.map_or(0, |n| all.len().saturating_sub(n));
        Ok(all.into_iter().skip(skip).collect())
    }

    /// The record of `id` and the events it has taken in. The log is written before the
    /// record, so a reader can see events the record does not hold yet; those wait.
    pub fn committed(&self, id: &str) -> Result<(Option<Session>, Vec<Event>), StoreError> {
        let mut events = self.events(id, None)?;
        let record = self.load(id)?;
        if let Some(r) = &record {
            events.retain(|e| e.seq <= r.seq);
        }
        Ok((record, events))
    }

    /// Every session id of the project.
    pub fn session_ids(&self) -> Vec<String> {
        let Ok(entries) = fs_err::read_dir(self.sessions_dir()) else {
            return Vec::new();
        };
        let mut ids: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|id| is_valid_id(id))
            .collect();
        // Ids are unique: an unstable sort gives the same order, cheaper.
        ids.sort_unstable();
        ids
    }

    /// Every readable session record (one that `load` cannot read or parse is left out).
    /// `sessions --all` reads thousands: each is opened relative to the sessions folder (opened
    /// once) and read into one buffer they share (two fewer syscalls per record than `load`).
    pub fn sessions(&self) -> Vec<Session> {
        use rustix::fs::{Mode, OFlags};
        let Ok(dir) = rustix::fs::open(
            self.sessions_dir(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            return Vec::new();
        };
        let mut buf = Vec::new();
        self.session_ids()
            .iter()
            .filter_map(|id| {
                let n = fsutil::read_at(&dir, &format!("{id}/session.json"), &mut buf).ok()?;
                // Checked as UTF-8 once, whole: `from_slice` checks every string on its own,
                // which costs more than the rest of the parse's string handling.
                serde_json::from_str(std::str::from_utf8(&buf[..n]).ok()?).ok()
            })
            .collect()
    }

    fn touched_file(&self, rel: &str) -> PathBuf {
        self.dir
            .join("touched")
            .join(crate::store::path_key(Path::new(rel)))
    }

    /// Sessions that recorded an edit of `rel` (repo-relative), in first-touch order.
    pub fn touched_by(&self, rel: &str) -> Vec<String> {
        let Ok(text) = fs_err::read_to_string(self.touched_file(rel)) else {
            return Vec::new();
        };
        let mut out: Vec<String> = Vec::new();
        for id in text.lines() {
            if !out.iter().any(|o| o == id) {
                out.push(id.to_owned());
            }
        }
        out
    }

    /// Notes that session `id` edited `rel` (one appended line; lines never interleave).
    pub fn note_touched(&self, rel: &str, id: &str) {
        if !self.touched_by(rel).iter().any(|o| o == id) {
            let _ = fsutil::append(&self.touched_file(rel), format!("{id}\n").as_bytes());
        }
    }
}
