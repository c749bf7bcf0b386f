//! Applying a plan: writes every planned file atomically (journal first, so a crash is
//! finished or taken back by the next run), redoes an edit by key when another writer got in
//! between, and records what spex now owns. Planning lives in the parent; this reads a finished
//! [`Plan`] and never decides what a file should hold.

use std::path::Path;

use super::journal::{Journal, Planned};
use super::{Action, Plan};
use crate::fsutil::{self, Swap};
use crate::seam::edit::owned;
use crate::seam::edit::workspace::Redone;
use crate::seam::edit::{MaterializeError, carry, toml_entries};
use crate::store;

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty() && !self.receipt_changed
    }

    /// Unified diffs of every file change, for `--dry-run`.
    pub fn diff(&self) -> String {
        let mut out = String::new();
        for c in &self.changes {
            let before = c
                .before
                .as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            let after = c
                .after
                .as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            match c.action {
                Action::Mkdir | Action::Rmdir => {
                    out.push_str(&format!("{:?} {}\n", c.action, c.path.display()).to_lowercase());
                }
                _ => {
                    let name = c.path.display().to_string();
                    let diff = similar::TextDiff::from_lines(before.as_ref(), after.as_ref());
                    out.push_str(&diff.unified_diff().header(&name, &name).to_string());
                }
            }
        }
        out
    }

    /// Writes the plan: files first (atomically), then folders, then the store records. A file
    /// another program changed since the plan read it is never overwritten: an edit by key is
    /// redone on the new bytes; any other file stops the apply with `Changed`, and the record
    /// then tells the truth about the files already written.
    pub fn apply(&mut self) -> Result<(), MaterializeError> {
        if let Some(stale) = self.stale.take() {
            let keep: Vec<&Path> = self
                .changes
                .iter()
                .filter(|c| c.action != Action::Rmdir)
                .map(|c| c.path.as_path())
                .collect();
            stale.sweep_keeping(&keep);
            Journal::sweep_dir(self.store.dir());
        }
        // The journal first: a crash from here on is finished or taken back by the next run.
        let journal_path = self.store.journal_file();
        let files: Vec<Planned> = self
            .changes
            .iter()
            .filter(|c| matches!(c.action, Action::Create | Action::Modify | Action::Delete))
            .map(|c| Planned::new(&c.path, c.before.as_deref(), c.after.as_deref()))
            .collect();
        if !self.changes.is_empty() {
            let journal = Journal {
                schema: owned::SCHEMA,
                before: self.owned_before.clone(),
                after: self.owned.clone(),
                files,
                dirs: self
                    .changes
                    .iter()
                    .filter(|c| matches!(c.action, Action::Mkdir | Action::Rmdir))
                    .map(|c| c.path.clone())
                    .collect(),
            };
            journal.write(&journal_path).map_err(MaterializeError::Fs)?;
        }
        for c in self.changes.iter().filter(|c| c.action == Action::Mkdir) {
            fs_err::create_dir_all(&c.path).map_err(MaterializeError::Fs)?;
        }
        let mut written = Vec::new();
        for i in 0..self.changes.len() {
            let c = &self.changes[i];
            if !matches!(c.action, Action::Create | Action::Modify | Action::Delete) {
                continue;
            }
            let path = c.path.clone();
            let done = if self.toml_jobs.contains_key(&path) || self.json_jobs.contains_key(&path) {
                self.apply_by_key(i)?
            } else {
                match fsutil::swap_if_unchanged(&path, c.before.as_deref(), c.after.as_deref())
                    .map_err(MaterializeError::Fs)?
                {
                    Swap::Done => true,
                    Swap::Changed => false,
                    // Nothing can redo this edit on their bytes: theirs go back in place.
                    Swap::Raced(theirs) => {
                        let ours = c.after.as_deref();
                        fsutil::swap_if_unchanged(&path, ours, Some(&theirs))
                            .map_err(MaterializeError::Fs)?;
                        false
                    }
                }
            };
            if !done {
                let partial = self.owned_before.merged_for(&self.owned, &written);
                let owned_path = self.store.owned_file();
                fsutil::write_private(&owned_path, &partial.to_bytes())
                    .map_err(MaterializeError::Fs)?;
                fsutil::remove_file(&journal_path).map_err(MaterializeError::Fs)?;
                return Err(MaterializeError::Changed(path));
            }
            written.push(path);
        }
        for c in self.changes.iter().filter(|c| c.action == Action::Rmdir) {
            fsutil::remove_dir_if_empty(&c.path);
        }
        let owned_path = self.store.owned_file();
        fsutil::write_private(&owned_path, &self.owned.to_bytes()).map_err(MaterializeError::Fs)?;
        fsutil::remove_file(&journal_path).map_err(MaterializeError::Fs)?;
        let spellings_path = self.store.spellings_file();
        match &self.spellings {
            Some(s) => {
                fsutil::write_private(&spellings_path, &store::json_bytes(s))
                    .map_err(MaterializeError::Fs)?;
            }
            None => fsutil::remove_file(&spellings_path).map_err(MaterializeError::Fs)?,
        }
        // The index before the receipt that points to it.
        let index_path = self.store.governance_file(&self.tree);
        match &self.dispatch.index {
            Some(bytes) => {
                fsutil::write_private(&index_path, bytes).map_err(MaterializeError::Fs)?;
            }
            None => fsutil::remove_file(&index_path).map_err(MaterializeError::Fs)?,
        }
        let receipt_path = self.store.receipt_file(&self.tree);
        match &self.dispatch.receipt {
            Some(r) => {
                fsutil::write_private(&receipt_path, &store::json_bytes(r))
                    .map_err(MaterializeError::Fs)?;
            }
            None => fsutil::remove_file(&receipt_path).map_err(MaterializeError::Fs)?,
        }
        Ok(())
    }

    /// Writes change `i`, an edit by key: when the file changed after the plan read it, the
    /// edit is redone on what is there now, until it lands on the bytes it was made from.
    fn apply_by_key(&mut self, i: usize) -> Result<bool, MaterializeError> {
        const ATTEMPTS: usize = 200;
        /// How long a writer that read a transient version has to write what it made of it.
        const LINGER: std::time::Duration = std::time::Duration::from_millis(100);
        let path = self.changes[i].path.clone();
        let mut expected = self.changes[i].before.clone();
        let mut after = self.changes[i].after.clone();
        // What `after` was made from.
        let mut after_base = expected.clone();
        // The last race lost: (what ours was made from, theirs we swapped out, ours), so a
        // version made from ours in between gets their change back (`carry`).
        let mut clobbered: Option<Clobbered> = None;
        let mut redone: Option<Rekeyed> = None;
        for _ in 0..ATTEMPTS {
            // `(what the file holds now, what to redo the edit on)`, or done.
            let (in_place, base, raced) =
                match fsutil::swap_if_unchanged(&path, expected.as_deref(), after.as_deref())
                    .map_err(MaterializeError::Fs)?
                {
                    Swap::Done => {
                        if expected.is_none() && after.is_some() {
                            // A harness's own state file (edited by key) that spex created: as
                            // private as the harness makes it (0600 for `~/.claude.json`).
                            fsutil::make_private(&path).map_err(MaterializeError::Fs)?;
                        }
                        if let Some(r) = redone.take() {
                            self.adopt(&path, r);
                        }
                        // A race lost on the way had a version without their change in place
                        // for a moment: a writer that read it may still write what it made
                        // from it. Watch a moment, and carry their change into that too.
                        let Some(Rewritten(now)) = clobbered
                            .as_ref()
                            .map(|_| changed_within(&path, after.as_deref(), LINGER))
                            .transpose()
                            .map_err(MaterializeError::Fs)?
                            .flatten()
                        else {
                            return Ok(true);
                        };
                        (now.clone(), now, false)
                    }
                    Swap::Changed => {
                        let now = fsutil::read_opt(&path).map_err(MaterializeError::Fs)?;
                        (now.clone(), now, false)
                    }
                    // Ours went in over theirs: redo the edit on theirs, expecting ours in place.
                    Swap::Raced(theirs) => (after.clone(), Some(theirs), true),
                };
            let base = match (&clobbered, base) {
                (Some(c), Some(x)) if x != c.theirs => {
                    let carried = self.carry(&path, c, x.clone());
                    if carried == x && !raced {
                        // Made from a version that had their change: nothing left to carry.
                        clobbered = None;
                    }
                    Some(carried)
                }
                (_, base) => base,
            };
            if raced {
                clobbered = base.clone().map(|theirs| Clobbered {
                    ours_base: after_base.clone(),
                    theirs,
                    ours: after.clone(),
                });
            }
            let r = if let Some(job) = self.toml_jobs.get(&path) {
                let text = base
                    .as_deref()
                    .map(|b| {
                        std::str::from_utf8(b).map_err(|_| MaterializeError::NotUtf8(path.clone()))
                    })
                    .transpose()?;
                Rekeyed::Toml(job.run(&path, text)?)
            } else {
                Rekeyed::Json(self.json_jobs[&path].redo(&path, base.clone())?)
            };
            after = r.after();
            after_base = base;
            expected = in_place;
            redone = Some(r);
        }
        Ok(false)
    }

    /// `now` (made from ours by another program) with the change of theirs that ours had
    /// swapped out carried over; `now` itself when a version does not parse.
    fn carry(&self, path: &Path, c: &Clobbered, now: Vec<u8>) -> Vec<u8> {
        let merge = if self.toml_jobs.contains_key(path) {
            carry::toml
        } else {
            carry::json
        };
        let carried = merge(c.ours_base.as_deref(), &c.theirs, c.ours.as_deref(), &now);
        carried.unwrap_or(now)
    }

    /// Takes the record of a redone edit as the plan's own.
    fn adopt(&mut self, path: &Path, redone: Rekeyed) {
        if redone.after().is_none() {
            self.owned.files.remove(path);
        }
        let warnings = match redone {
            Rekeyed::Toml(o) => {
                self.owned.toml.remove(path);
                if !o.owned.is_empty() {
                    self.owned.toml.insert(path.to_owned(), o.owned);
                }
                o.warnings
            }
            Rekeyed::Json(r) => {
                self.owned.json.remove(path);
                self.owned
                    .json
                    .extend(r.owned.map(|j| (path.to_owned(), j)));
                r.warnings
            }
        };
        for w in warnings {
            if !self.warnings.contains(&w) {
                self.warnings.push(w);
            }
        }
    }
}

/// The bytes of a file another program wrote (`None`: it removed the file).
struct Rewritten(Option<Vec<u8>>);

/// What `path` holds once it no longer holds `written` (`None`: absent), if that happens
/// within `within`.
fn changed_within(
    path: &Path,
    written: Option<&[u8]>,
    within: std::time::Duration,
) -> std::io::Result<Option<Rewritten>> {
    let deadline = std::time::Instant::now() + within;
    loop {
        let now = fsutil::read_opt(path)?;
        if now.as_deref() != written {
            return Ok(Some(Rewritten(now)));
        }
        if std::time::Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// A race lost by a write by key (see `carry`).
struct Clobbered {
    ours_base: Option<Vec<u8>>,
    theirs: Vec<u8>,
    ours: Option<Vec<u8>>,
}

/// An edit by key redone on bytes another program wrote.
enum Rekeyed {
    Toml(toml_entries::Outcome),
    Json(Redone),
}

impl Rekeyed {
    fn after(&self) -> Option<Vec<u8>> {
        match self {
            Rekeyed::Toml(o) => o.after.clone().map(String::into_bytes),
            Rekeyed::Json(r) => r.after.clone(),
        }
    }
}
