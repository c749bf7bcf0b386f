//! The text files a plan edits in place: spex's managed blocks (between sentinels), its
//! entries in TOML files another program rewrites, and its entries in git config files.

use std::path::Path;

use super::Workspace;
use crate::fsutil;
use crate::seam::edit::MaterializeError;
use crate::seam::edit::block::{self, Syntax};
use crate::seam::edit::git_config::{self, GitEntry};
use crate::seam::edit::toml_entries::{self, Legacy, Want};

impl Workspace {
    /// Puts block `id` with `body` into the text file `path` (or removes it with `None`).
    /// A file spex created is deleted once nothing else is left in it.
    pub fn block(
        &mut self,
        path: &Path,
        syn: Syntax,
        id: &str,
        body: Option<&[String]>,
    ) -> Result<(), MaterializeError> {
        let path = &fsutil::resolve_link(path);
        let current = self.read_text(path)?;
        if current.is_none() && body.is_none() {
            return Ok(());
        }
        let text = current.unwrap_or_default();
        let new =
            block::reconcile(&text, syn, id, body).map_err(|source| MaterializeError::Block {
                path: path.to_owned(),
                source,
            })?;
        if new.is_empty() && self.created_by_spex(path) {
            return self.set(path, None);
        }
        self.set(path, Some(new.into_bytes()))
    }

    /// Checks every spex sentinel in `path` without changing it.
    pub fn validate_blocks(&mut self, path: &Path, syn: Syntax) -> Result<(), MaterializeError> {
        let path = &fsutil::resolve_link(path);
        if let Some(text) = self.read_text(path)? {
            block::validate(&text, syn).map_err(|source| MaterializeError::Block {
                path: path.to_owned(),
                source,
            })?;
        }
        Ok(())
    }

    /// Makes spex's entries in the TOML file `path` exactly `wanted`, by key: entries spex
    /// added before and no longer wants go (while they still hold spex's value), new ones are
    /// added where the file's own writer would put them, nothing else changes. `legacy` names a
    /// comment fence an older spex wrote, upgraded on the way.
    pub fn toml_entries(
        &mut self,
        path: &Path,
        wanted: Vec<Want>,
        legacy: Option<Legacy>,
    ) -> Result<(), MaterializeError> {
        let path = &fsutil::resolve_link(path);
        let text = self.read_text(path)?;
        let job = toml_entries::Job {
            wanted,
            owned: self.owned.toml.remove(path).unwrap_or_default(),
            legacy,
            created_by_spex: self.created_by_spex(path),
        };
        let out = job.run(path, text.as_deref())?;
        self.warnings.extend(out.warnings);
        if !out.owned.is_empty() {
            self.owned.toml.insert(path.to_owned(), out.owned);
        }
        self.set(path, out.after.map(String::into_bytes))?;
        self.toml_jobs.insert(path.to_owned(), job);
        Ok(())
    }

    /// Makes `section.key` in the git config file `path` hold spex's `value`, or with `None`
    /// takes spex's entry back while it still holds the value spex wrote (a changed one is the
    /// user's: left, named in a warning). A file spex created goes once nothing else is in it.
    /// The caller checks that the key is not the user's before asking for a value.
    pub fn git_entry(
        &mut self,
        path: &Path,
        section: &str,
        key: &str,
        value: Option<&str>,
    ) -> Result<(), MaterializeError> {
        let path = &fsutil::resolve_link(path);
        let before = self.read_text(path)?;
        let mut text = before.clone().unwrap_or_default();
        let mut owned = self.owned.git.remove(path).unwrap_or_default();
        if let Some(i) = owned.position(section, key) {
            let mine = &owned.entries[i];
            let holds =
                git_config::last_value(&text, section, key).as_deref() == Some(mine.value.as_str());
            if holds && value == Some(mine.value.as_str()) {
                self.owned.git.insert(path.to_owned(), owned);
                return Ok(());
            }
            match git_config::unset(&text, mine) {
                Some(t) => text = t,
                None => self.warnings.push(format!(
                    "`{}`: `{section}.{key}` no longer holds the `{}` spex wrote; spex leaves it to you",
                    path.display(),
                    mine.value
                )),
            }
            owned.entries.remove(i);
        }
        if let Some(v) = value {
            let (t, entry) = git_config::set(&text, section, key, v);
            text = t;
            owned.entries.push(entry);
        }
        self.store_git_text(path, before.as_deref(), text)?;
        if !owned.is_empty() {
            self.owned.git.insert(path.to_owned(), owned);
        }
        Ok(())
    }

    /// Removes `section.key = value` from the git config file `path` where spex did not write
    /// it but another program copied spex's line (`git worktree add` copies the checkout's
    /// `config.worktree` into the new worktree's), with a header left holding nothing.
    pub fn git_copy_removed(
        &mut self,
        path: &Path,
        section: &str,
        key: &str,
        value: &str,
    ) -> Result<(), MaterializeError> {
        let path = &fsutil::resolve_link(path);
        let before = self.read_text(path)?;
        let copy = GitEntry {
            section: section.to_owned(),
            key: key.to_owned(),
            value: value.to_owned(),
            header: true,
            newline: false,
        };
        let mut text = before.clone().unwrap_or_default();
        while let Some(t) = git_config::unset(&text, &copy) {
            text = t;
        }
        // The copy of a file spex created holds nothing else: it goes with spex's line.
        if text.trim().is_empty() && before.as_deref().is_some_and(|b| b != text) {
            return self.set(path, None);
        }
        self.store_git_text(path, before.as_deref(), text)
    }

    fn store_git_text(
        &mut self,
        path: &Path,
        before: Option<&str>,
        text: String,
    ) -> Result<(), MaterializeError> {
        if before == Some(text.as_str()) || (before.is_none() && text.is_empty()) {
            return Ok(());
        }
        if text.is_empty() && self.created_by_spex(path) {
            return self.set(path, None);
        }
        self.set(path, Some(text.into_bytes()))
    }
}
