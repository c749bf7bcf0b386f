//! The plan under construction: every touched file's before and after bytes, the folders spex
//! wants, and the ownership record as it will be after the change. Adapters describe what
//! they want through the typed operations here; nothing touches the disk until `apply`.
//!
//! This file is the buffer itself (what a file holds before and after the plan, read once);
//! each child adds the operations of one kind of file: `text` (managed blocks, TOML and git
//! config entries), `json` (JSON edited by key), `hooks` (hook groups matched by value),
//! `generated` (files spex writes whole). The children never import one another, and this
//! file imports none of them.

mod generated;
mod hooks;
mod json;
mod text;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::MaterializeError;
use super::owned::{JsonOwned, Owned};
use super::toml_entries;
use crate::fsutil;

/// First line of every file spex generates whole (skills, agents, commands); it is the proof
/// that spex may overwrite or delete the file.
pub const STAMP: &str = "<!-- spex:generated";

#[derive(Debug, Clone)]
pub struct Entry {
    pub before: Option<Vec<u8>>,
    pub after: Option<Vec<u8>>,
}

#[derive(Debug, Default)]
pub struct Workspace {
    pub files: BTreeMap<PathBuf, Entry>,
    pub wanted_dirs: BTreeSet<PathBuf>,
    pub owned: Owned,
    pub warnings: Vec<String>,
    /// Edits by key of files another program rewrites, redone at apply time if the file
    /// changed after the plan read it.
    pub toml_jobs: BTreeMap<PathBuf, toml_entries::Job>,
    /// The same for JSON files edited only by key (`json_value`, `json_elements`), e.g.
    /// `~/.claude.json`.
    pub json_jobs: BTreeMap<PathBuf, JsonJob>,
    /// Files whose edit cannot be redone by key (hook groups are matched by value).
    pub not_by_key: BTreeSet<PathBuf>,
    /// The record predates the list of hook groups spex added: a group of exactly the shape
    /// spex writes is taken as spex's, this once.
    legacy_hooks: bool,
}

/// The key edits of one JSON file, with the record they started from, so `apply` can redo
/// them on bytes that changed after the plan read the file.
#[derive(Debug, Clone)]
pub struct JsonJob {
    owned: Option<JsonOwned>,
    created_by_spex: bool,
    ops: Vec<JsonOp>,
}

/// One edit by key of a JSON file, as a plan asked for it.
#[derive(Debug, Clone)]
enum JsonOp {
    /// [`Workspace::json_value`].
    Value(Vec<String>, Option<Value>),
    /// [`Workspace::json_elements`].
    Elements(Vec<String>, Vec<Value>),
}

/// A key edit redone on new bytes: the file's new bytes, spex's record for it, what to say.
#[derive(Debug)]
pub struct Redone {
    pub after: Option<Vec<u8>>,
    pub owned: Option<JsonOwned>,
    pub warnings: Vec<String>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> MaterializeError + '_ {
    move |source| MaterializeError::Io {
        path: path.to_owned(),
        source,
    }
}

fn text_of(path: &Path, bytes: &[u8]) -> Result<String, MaterializeError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| MaterializeError::NotUtf8(path.to_owned()))
}

impl Workspace {
    pub fn new(mut owned: Owned) -> Workspace {
        let legacy_hooks = owned.hooks.is_none();
        owned.hooks.get_or_insert_default();
        if owned.generated.is_none() {
            // A record from before digests: the stamped files it says spex created are spex's,
            // as they are now.
            let known = owned
                .files
                .iter()
                .filter_map(|p| {
                    let bytes = fs_err::read(p).ok()?;
                    String::from_utf8_lossy(&bytes)
                        .contains(STAMP)
                        .then(|| (p.clone(), super::owned::digest(&bytes)))
                })
                .collect();
            owned.generated = Some(known);
        }
        Workspace {
            owned,
            legacy_hooks,
            ..Workspace::default()
        }
    }

    fn entry(&mut self, path: &Path) -> Result<&mut Entry, MaterializeError> {
        if !self.files.contains_key(path) {
            let before = fsutil::read_opt(path).map_err(io(path))?;
            self.files.insert(
                path.to_owned(),
                Entry {
                    after: before.clone(),
                    before,
                },
            );
        }
        Ok(self.files.get_mut(path).expect("inserted above"))
    }

    /// The bytes `path` will hold after the plan (`None`: absent).
    pub fn read(&mut self, path: &Path) -> Result<Option<Vec<u8>>, MaterializeError> {
        let path = &fsutil::resolve_link(path);
        Ok(self.entry(path)?.after.clone())
    }

    pub fn read_text(&mut self, path: &Path) -> Result<Option<String>, MaterializeError> {
        self.read(path)?.map(|b| text_of(path, &b)).transpose()
    }

    fn set(&mut self, path: &Path, after: Option<Vec<u8>>) -> Result<(), MaterializeError> {
        self.entry(path)?.after = after;
        Ok(())
    }

    /// The files spex will have created once the plan is applied: the record's, plus the
    /// plan's new files, minus the files it deletes.
    pub fn owned_files_after(&self) -> BTreeSet<PathBuf> {
        let mut files = self.owned.files.clone();
        for (path, e) in &self.files {
            match (&e.before, &e.after) {
                (None, Some(_)) => {
                    files.insert(path.clone());
                }
                (_, None) => {
                    files.remove(path);
                }
                _ => {}
            }
        }
        files
    }

    fn created_by_spex(&self, path: &Path) -> bool {
        self.owned.files.contains(path) || self.files.get(path).is_some_and(|e| e.before.is_none())
    }

    /// The bytes `path` held before the plan (`None`: absent).
    pub fn read_before(&mut self, path: &Path) -> Result<Option<Vec<u8>>, MaterializeError> {
        let path = &fsutil::resolve_link(path);
        Ok(self.entry(path)?.before.clone())
    }

    /// Marks a folder spex needs to exist (created and owned if missing).
    pub fn want_dir(&mut self, path: &Path) {
        self.wanted_dirs.insert(path.to_owned());
    }
}
