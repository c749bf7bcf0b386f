//! Naming sessions: the short handle each one claims, the name a person gives it, and the
//! resolution of what a person typed (a full id, a handle, a name or a unique prefix) to a
//! session id. It changes a record only through `storage.rs`'s `update`, under the lock.

use fs_err::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use super::error::{StoreError, check_id, io};
use super::ids::{NAME_MAX, is_valid_id, is_valid_name, sanitize};
use super::record::{Session, Status};
use crate::fsutil;
use crate::store::ProjectStore;

/// What a person's word names in one project: see [`ProjectStore::find`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// The session whose full id, handle or name it is.
    Exact(String),
    /// The sessions whose id or handle it begins (none, one or several).
    Prefixed(Vec<String>),
}

impl ProjectStore {
    fn handle_file(&self, handle: &str) -> PathBuf {
        self.dir.join("handles").join(sanitize(handle))
    }

    /// The short handle of session `id`: the shortest tail (4 characters or more) of its id
    /// that no other session of the project holds, claimed once in `handles/<handle>` (created
    /// exclusively, so two readers never hand one handle to two sessions) and kept for the
    /// session's life. The tail, not the head: time-ordered ids (`UUIDv7`) share their first
    /// characters for about a minute, and both v4 and v7 end in random bits.
    pub fn claim_handle(&self, id: &str) -> Result<String, StoreError> {
        let chars: Vec<char> = id
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect();
        let dir = self.dir.join("handles");
        fsutil::create_private_dir_all(&dir).map_err(io(&dir))?;
        for n in 4..=chars.len() {
            let handle: String = chars[chars.len() - n..].iter().collect();
            if handle != id
                && (self.session_dir(&handle).join("session.json").is_file()
                    || self.name_file(&handle).is_file())
            {
                // Another session's full id, which `resolve` puts first: as this session's
                // handle it would name the other one.
                continue;
            }
            let path = self.handle_file(&handle);
            match fs_err::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(fsutil::PRIVATE_FILE)
                .open(&path)
            {
                Ok(mut f) => {
                    std::io::Write::write_all(&mut f, id.as_bytes()).map_err(io(&path))?;
                    return Ok(handle);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let owner = fs_err::read_to_string(&path).map_err(io(&path))?;
                    // An empty file is a claim being written right now by another reader.
                    if owner.trim() == id {
                        return Ok(handle);
                    }
                }
                Err(e) => return Err(io(&path)(e)),
            }
        }
        Ok(id.to_owned())
    }

    /// The session a handle or name file names, when that session's record exists.
    fn owner(&self, file: &Path) -> Option<String> {
        let owner = fs_err::read_to_string(file).ok()?;
        let owner = owner.trim();
        (is_valid_id(owner) && self.session_dir(owner).join("session.json").is_file())
            .then(|| owner.to_owned())
    }

    /// Resolves what a person typed for a session: its full id, its handle, its name, or a
    /// unique prefix of a handle or of an id, in that order. A full id comes first: a handle
    /// claimed before a session with that very id appeared must not hide it. Anything that
    /// cannot be an id (empty, a path) is refused before it comes near the file system.
    pub fn resolve(&self, arg: &str) -> Result<String, StoreError> {
        check_id(arg, "")?;
        let matches = match self.find(arg) {
            Found::Exact(id) => return Ok(id),
            Found::Prefixed(ids) => ids,
        };
        match matches.len() {
            0 => Err(StoreError::NotFound(crate::text::visible(arg))),
            1 => Ok(matches.into_iter().next().expect("one match")),
            _ => Err(StoreError::Ambiguous {
                prefix: arg.to_owned(),
                matches: matches
                    .iter()
                    .map(|id| self.label_of(id))
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// What `arg` names in this project (`arg` must have passed [`check_id`]): the session it
    /// names exactly (its full id, handle or name, in that order), else those whose id or
    /// handle starts with it. A session no reader has listed yet has no handle: on a miss
    /// every such session gets its handle (as `spex sessions` would give it) and the search
    /// runs again.
    pub fn find(&self, arg: &str) -> Found {
        if self.session_dir(arg).join("session.json").is_file() {
            return Found::Exact(arg.to_owned());
        }
        if let Some(owner) = self
            .owner(&self.handle_file(arg))
            .or_else(|| self.owner(&self.name_file(arg)))
        {
            return Found::Exact(owner);
        }
        let matches = self.prefixed(arg);
        if matches.is_empty() && self.claim_missing_handles() > 0 {
            return self.find(arg);
        }
        Found::Prefixed(matches)
    }

    /// The sessions whose id or handle starts with `arg`, sorted.
    fn prefixed(&self, arg: &str) -> Vec<String> {
        let mut matches: Vec<String> = self
            .session_ids()
            .into_iter()
            .filter(|id| id.starts_with(arg))
            .collect();
        if let Ok(entries) = fs_err::read_dir(self.dir.join("handles")) {
            for e in entries.filter_map(Result::ok) {
                if e.file_name().to_string_lossy().starts_with(arg)
                    && let Some(owner) = self.owner(&e.path())
                {
                    matches.push(owner);
                }
            }
        }
        matches.sort();
        matches.dedup();
        matches
    }

    /// Claims the handle of every record that has none; how many it claimed.
    fn claim_missing_handles(&self) -> usize {
        self.sessions()
            .iter()
            .filter(|s| s.handle.is_none())
            .filter(|s| self.label_of(&s.id) != s.id)
            .count()
    }

    /// What people read for session `id`: its handle, claimed now if it has none yet (and
    /// saved in its record), else the full id. Every message that names a session uses it.
    pub fn label_of(&self, id: &str) -> String {
        match self.load(id) {
            Ok(Some(s)) if s.handle.is_some() => s.label().to_owned(),
            Ok(Some(_)) => self.claim_handle(id).map_or_else(
                |_| id.to_owned(),
                |handle| {
                    let _ = self.update(id, |cur| {
                        let cur = cur.map(|mut c| {
                            c.handle.get_or_insert_with(|| handle.clone());
                            c
                        });
                        (cur, Vec::new(), ())
                    });
                    handle
                },
            ),
            _ => id.to_owned(),
        }
    }

    fn name_file(&self, name: &str) -> PathBuf {
        self.dir.join("names").join(sanitize(name))
    }

    /// Gives session `id` the name `name` (or none): checked for shape, refused when it is a
    /// session id or handle, or the name of another live session of the project. A name an
    /// exited session held passes to the new one.
    pub fn set_name(&self, id: &str, name: Option<&str>) -> Result<Session, StoreError> {
        if let Some(name) = name {
            self.name_free(name, Some(id))?;
        }
        let dir = self.dir.join("names");
        fsutil::create_private_dir_all(&dir).map_err(io(&dir))?;
        let lock = dir.join(".lock");
        crate::store::lock::with(&lock, || -> Result<Session, StoreError> {
            // Checked again under the lock: two renames at once cannot both take one name.
            if let Some(name) = name {
                self.name_free(name, Some(id))?;
                let path = self.name_file(name);
                fsutil::write_private(&path, id.as_bytes()).map_err(io(&path))?;
            }
            let saved = self.update(id, |cur| match cur {
                None => (None, Vec::new(), Err(StoreError::NotFound(id.to_owned()))),
                Some(mut s) => {
                    let old = std::mem::replace(&mut s.name, name.map(str::to_owned));
                    let mut fields = serde_json::Map::new();
                    fields.insert("name".into(), name.into());
                    if let Some(old) = &old {
                        fields.insert("was".into(), old.clone().into());
                    }
                    let event = ("renamed".to_owned(), "spex rename".to_owned(), fields);
                    (Some(s.clone()), vec![event], Ok((s, old)))
                }
            })?;
            let (s, old) = saved?;
            // The old name's index entry goes, unless another session has taken it since.
            if let Some(old) = old.filter(|o| Some(o.as_str()) != name) {
                let file = self.name_file(&old);
                if self.owner(&file).as_deref() == Some(id) {
                    let _ = fs_err::remove_file(&file);
                }
            }
            Ok(s)
        })
        .map_err(io(&lock))?
    }

    /// Whether `name` may name session `id` (`None`: a session about to start).
    pub fn name_free(&self, name: &str, id: Option<&str>) -> Result<(), StoreError> {
        if !is_valid_name(name) {
            return Err(StoreError::Name {
                message: format!(
                    "`{}` is not a usable session name: a name is 1 to {NAME_MAX} letters, digits, `-` or `_`, starting with a letter",
                    crate::text::visible(name)
                ),
                hint: "for example `--name fix-login`".to_owned(),
            });
        }
        let taken = |what: &str, other: &str| StoreError::Name {
            message: format!("`{name}` is {what} session {}", self.label_of(other)),
            hint: "pick another name (`spex sessions --all` shows the names in use)".to_owned(),
        };
        if self.session_dir(name).join("session.json").is_file() && Some(name) != id {
            return Err(taken("the id of", name));
        }
        if let Some(other) = self.owner(&self.handle_file(name))
            && Some(other.as_str()) != id
        {
            return Err(taken("the handle of", &other));
        }
        if let Some(other) = self.owner(&self.name_file(name))
            && Some(other.as_str()) != id
            && self
                .load(&other)
                .ok()
                .flatten()
                .is_some_and(|s| s.status != Status::Exited && s.name.as_deref() == Some(name))
        {
            return Err(taken("already the name of live", &other));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with(ids: &[&str]) -> (tempfile::TempDir, ProjectStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = ProjectStore {
            dir: dir.path().to_path_buf(),
            event_log_bytes: crate::config::EVENT_LOG_BYTES,
        };
        for id in ids {
            let path = store.session_dir(id).join("session.json");
            fsutil::write_atomic(&path, b"{}").unwrap();
        }
        (dir, store)
    }

    #[test]
    fn handles_are_tails_unique_stable_and_resolve() {
        // Two UUIDv7 thread ids started within the same millisecond share 13 characters.
        let a = "01a207f5-336d-7833-9809-0ddaefd8289b";
        let b = "01a207f5-336d-7833-9809-0ddaefd9289b";
        let (_dir, store) = store_with(&[a, b]);
        let ha = store.claim_handle(a).unwrap();
        let hb = store.claim_handle(b).unwrap();
        assert_eq!(ha, "289b");
        assert_eq!(hb, "9289b", "the tail grows until it is unique");
        assert_eq!(store.claim_handle(a).unwrap(), ha, "stable");
        assert_eq!(store.resolve(&ha).unwrap(), a);
        assert_eq!(store.resolve(&hb).unwrap(), b);
        assert_eq!(store.resolve(a).unwrap(), a, "the full id");
        assert!(matches!(
            store.resolve("01a207f5"),
            Err(StoreError::Ambiguous { .. })
        ));
        assert_eq!(
            store.resolve("01a207f5-336d-7833-9809-0ddaefd8").unwrap(),
            a
        );
    }

    /// Found by the dispatch fuzz test: hook payloads with the session ids `null` and
    /// `<uuid>null` (tests/fixtures/payloads/fuzz-regressions/claude/SessionStart.id_*.json).
    #[test]
    fn a_handle_never_hides_another_sessions_full_id() {
        let (short, long) = ("null", "378ebf22-04e3-431b-a36e-0da512805eecnull");
        let (_dir, store) = store_with(&[long]);
        assert_eq!(store.claim_handle(long).unwrap(), "null");
        // A session whose id is that handle appears later: its id still names it.
        let record = store.session_dir(short).join("session.json");
        fsutil::write_atomic(&record, b"{}").unwrap();
        assert_eq!(store.resolve(short).unwrap(), short);
        // Claimed after the short id exists, the long id's handle steps past it.
        let (_dir2, both) = store_with(&[long, short]);
        let h = both.claim_handle(long).unwrap();
        assert_eq!(h, "cnull");
        assert_eq!(both.claim_handle(short).unwrap(), "null");
        assert_eq!(both.resolve(&h).unwrap(), long);
        assert_eq!(both.resolve(short).unwrap(), short);
    }

    /// What a person types: full id, then handle, then name, then a unique prefix of a handle
    /// or id; never something shaped like a path.
    #[test]
    fn resolve_takes_ids_handles_names_and_prefixes_in_that_order() {
        let a = "11111111-2222-4333-8444-55555555306f";
        let b = "11111111-2222-4333-8444-66666666cafe";
        let (_dir, store) = store_with(&[]);
        for id in [a, b] {
            let s = Session {
                id: id.into(),
                ..Session::default()
            };
            fsutil::write_atomic(
                &store.session_dir(id).join("session.json"),
                &crate::store::json_bytes(&s),
            )
            .unwrap();
        }
        // Handles are claimed on the first miss.
        assert_eq!(store.resolve("306").unwrap(), a);
        assert_eq!(store.resolve("caf").unwrap(), b);
        assert!(matches!(
            store.resolve("1111"),
            Err(StoreError::Ambiguous { .. })
        ));
        store.set_name(a, Some("fix-login")).unwrap();
        assert_eq!(store.resolve("fix-login").unwrap(), a);
        assert_eq!(
            store.load(a).unwrap().unwrap().name.as_deref(),
            Some("fix-login")
        );
        // Taken by a live session; a handle is no name; a name is no id.
        assert!(matches!(
            store.set_name(b, Some("fix-login")),
            Err(StoreError::Name { .. })
        ));
        assert!(matches!(
            store.set_name(a, Some("cafe")),
            Err(StoreError::Name { .. })
        ));
        assert!(matches!(
            store.set_name(b, Some("9lives")),
            Err(StoreError::Name { .. })
        ));
        // A handle claimed later skips a name in use.
        store.set_name(b, Some("beef")).unwrap();
        let c = "11111111-2222-4333-8444-77777777beef";
        let s = Session {
            id: c.into(),
            ..Session::default()
        };
        fsutil::write_atomic(
            &store.session_dir(c).join("session.json"),
            &crate::store::json_bytes(&s),
        )
        .unwrap();
        assert_eq!(store.claim_handle(c).unwrap(), "7beef");
        assert_eq!(store.resolve("beef").unwrap(), b);
        for bad in ["", "/tmp/x", "..", "a/b", "x y", "é"] {
            assert!(
                matches!(store.resolve(bad), Err(StoreError::InvalidId { .. })),
                "{bad:?}"
            );
        }
    }
}
