//! Removing what the store no longer needs: sessions that exited long ago, with their aliases
//! and their entries in the touched-file index (their usage kept as daily totals, `daily`).
//! Never a session that has not exited.

use std::path::Path;
use std::time::SystemTime;

use super::ProjectStore;
use super::session::{Session, Status, StoreError};
use crate::fsutil;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_owned(),
        source,
    }
}

/// When the record last changed, from its `updated_at`.
fn last_change(s: &Session) -> Option<SystemTime> {
    super::parse_time(&s.updated_at)
}

impl ProjectStore {
    /// Exited sessions whose record last changed before `cutoff`.
    pub fn prunable(&self, cutoff: SystemTime) -> Vec<Session> {
        self.sessions()
            .into_iter()
            .filter(|s| s.status == Status::Exited)
            .filter(|s| last_change(s).is_some_and(|t| t < cutoff))
            .collect()
    }

    /// Removes the sessions `prunable` names, each under its lock and only if it is still
    /// exited and old; then their aliases and touched-index entries. Returns what it removed.
    pub fn prune(&self, cutoff: SystemTime) -> Result<Vec<Session>, StoreError> {
        let mut removed = Vec::new();
        for candidate in self.prunable(cutoff) {
            let dir = self.session_dir(&candidate.id);
            let lock = dir.join("lock");
            let gone = super::lock::with(&lock, || -> Result<Option<Session>, StoreError> {
                // A hook may have brought it back since the listing.
                let Some(s) = self.load(&candidate.id)? else {
                    return Ok(None);
                };
                if s.status != Status::Exited || last_change(&s).is_none_or(|t| t >= cutoff) {
                    return Ok(None);
                }
                // Its usage stays, as its day's totals, before the record goes.
                self.fold_usage(&s)?;
                // Out of the way first, in one step: a hook that arrives meanwhile finds no
                // folder and starts afresh (its lock is then a new file), never a half-removed one.
                let aside = self
                    .sessions_dir()
                    .join(format!(".pruned-{}", candidate.id));
                fs_err::rename(&dir, &aside).map_err(io(&dir))?;
                fs_err::remove_dir_all(&aside).map_err(io(&aside))?;
                Ok(Some(s))
            })
            .map_err(io(&lock))??;
            removed.extend(gone);
        }
        let ids: Vec<&str> = removed.iter().map(|s| s.id.as_str()).collect();
        if !ids.is_empty() {
            self.drop_aliases(&ids)?;
            self.drop_touched(&ids)?;
        }
        Ok(removed)
    }

    fn drop_aliases(&self, ids: &[&str]) -> Result<(), StoreError> {
        let dir = self.dir.join("aliases");
        let Ok(entries) = fs_err::read_dir(&dir) else {
            return Ok(());
        };
        for e in entries.filter_map(Result::ok) {
            let path = e.path();
            let target = fs_err::read_to_string(&path).unwrap_or_default();
            if ids.contains(&target.trim()) {
                fsutil::remove_file(&path).map_err(io(&path))?;
            }
        }
        Ok(())
    }

    /// Rewrites each touched-index file without `ids`. The hook path appends to these files
    /// without a lock, so each rewrite lands only on the bytes it read (else it is redone).
    fn drop_touched(&self, ids: &[&str]) -> Result<(), StoreError> {
        let dir = self.dir.join("touched");
        let Ok(entries) = fs_err::read_dir(&dir) else {
            return Ok(());
        };
        for e in entries.filter_map(Result::ok) {
            let path = e.path();
            // `in_place` is what the file holds; `base` what the rewrite starts from (they differ
            // when an append landed just as ours went in).
            let mut in_place = fsutil::read_opt(&path).map_err(io(&path))?;
            let mut base = in_place.clone();
            while let Some(from) = base.take() {
                let mut kept = String::new();
                for line in String::from_utf8_lossy(&from)
                    .lines()
                    .filter(|l| !ids.contains(l))
                {
                    kept.push_str(line);
                    kept.push('\n');
                }
                let after = (!kept.is_empty()).then(|| kept.into_bytes());
                match fsutil::swap_if_unchanged(&path, in_place.as_deref(), after.as_deref())
                    .map_err(io(&path))?
                {
                    fsutil::Swap::Done => {}
                    fsutil::Swap::Changed => {
                        in_place = fsutil::read_opt(&path).map_err(io(&path))?;
                        base.clone_from(&in_place);
                    }
                    fsutil::Swap::Raced(theirs) => {
                        in_place = after;
                        base = Some(theirs);
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::session::{LaunchedBy, Session};
    use std::time::Duration;

    fn record(store: &ProjectStore, id: &str, status: Status, updated: SystemTime) {
        let tree = crate::repo::Tree {
            root: "/r".into(),
            main: "/r".into(),
            git_dir: "/r/.git".into(),
            common_dir: "/r/.git".into(),
        };
        let mut s = Session::new(
            id,
            "h",
            Some(format!("h-{id}")),
            &tree,
            LaunchedBy::Itself,
            "x",
        );
        s.status = status;
        s.updated_at = humantime::format_rfc3339_millis(updated).to_string();
        s.usage = Some(crate::store::session::Usage {
            input_tokens: 10,
            cached_input_tokens: 4,
            output_tokens: 3,
            requests: 2,
            model: Some("m".into()),
            ..Default::default()
        });
        store.update(id, |_| (Some(s), Vec::new(), ())).unwrap();
        store.set_alias("h", &format!("h-{id}"), id).unwrap();
        store.note_touched("src/a.rs", id);
    }

    #[test]
    fn removes_only_old_exited_sessions_with_their_index_entries() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProjectStore {
            dir: dir.path().to_owned(),
            event_log_bytes: crate::config::EVENT_LOG_BYTES,
        };
        let now = SystemTime::now();
        let old = now - Duration::from_hours(24 * 40);
        record(&store, "old-exited", Status::Exited, old);
        record(&store, "old-idle", Status::Idle, old);
        record(&store, "new-exited", Status::Exited, now);
        let cutoff = now - Duration::from_hours(24 * 30);
        let removed = store.prune(cutoff).unwrap();
        let ids: Vec<&str> = removed.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["old-exited"]);
        assert_eq!(store.session_ids(), ["new-exited", "old-idle"]);
        assert_eq!(store.alias("h", "h-old-exited"), None);
        assert_eq!(store.alias("h", "h-old-idle").as_deref(), Some("old-idle"));
        assert_eq!(store.touched_by("src/a.rs"), ["old-idle", "new-exited"]);
        // Its usage stays as its day's totals; a second fold of it adds nothing.
        let daily = store.daily_usage();
        assert_eq!(daily.folded, ["old-exited"]);
        let [day] = &daily.days[..] else {
            panic!("{daily:?}")
        };
        assert_eq!((day.sessions, day.usage.input_tokens), (1, 10));
        assert_eq!(day.day, crate::store::daily::day_of(&removed[0].updated_at));
        store.fold_usage(&removed[0]).unwrap();
        assert_eq!(store.daily_usage(), daily);
    }
}
