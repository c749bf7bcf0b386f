//! Ownership proofs: what spex created, so `clean` removes exactly that and nothing the user
//! owns. Files and folders spex created, JSON members it inserted, JSON values it replaced
//! (with the value they had), elements it added to JSON arrays, TOML entries it added to a file a harness rewrites. Stored per
//! project in the spex store.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::git_config::GitOwned;
use super::toml_entries::TomlOwned;

pub const SCHEMA: u32 = 1;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JsonOwned {
    /// Key paths of members spex inserted (containers and leaves).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<Vec<String>>,
    /// Key paths spex overwrote, with the value they held before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaced: Vec<(Vec<String>, serde_json::Value)>,
    /// Leaf values spex set, so clean takes a key back only while it still holds them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub written: Vec<(Vec<String>, serde_json::Value)>,
    /// Elements spex added to an array it does not own whole, by the array's key path: spex
    /// takes back exactly these values, never an element another writer put beside them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elements: Vec<(Vec<String>, Vec<serde_json::Value>)>,
    /// The file was empty text and spex wrote `{}` into it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub root_created: bool,
}

impl JsonOwned {
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
            && self.replaced.is_empty()
            && self.written.is_empty()
            && self.elements.is_empty()
            && !self.root_created
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Owned {
    pub schema: u32,
    #[serde(default)]
    pub files: BTreeSet<PathBuf>,
    #[serde(default)]
    pub dirs: BTreeSet<PathBuf>,
    #[serde(default)]
    pub json: BTreeMap<PathBuf, JsonOwned>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub toml: BTreeMap<PathBuf, TomlOwned>,
    /// Variables spex set in git config files (`extensions.worktreeConfig` in the shared
    /// config, `core.excludesFile` in a checkout's `config.worktree`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub git: BTreeMap<PathBuf, GitOwned>,
    /// Hook groups spex added to a hooks file, as `(event, group)`: spex's hooks are exactly
    /// these, never a user's hook that merely runs `spex dispatch`. `None`: a record from a
    /// spex that did not keep this (its groups are recognised by their exact shape once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<BTreeMap<PathBuf, Vec<(String, serde_json::Value)>>>,
    /// Files spex generated whole (skills, agents, commands), with the SHA-256 of the bytes it
    /// wrote: it rewrites or deletes such a file only while it still holds them. `None`: a
    /// record from a spex that did not keep this (its stamped `files` are taken as spex's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated: Option<BTreeMap<PathBuf, String>>,
}

impl Default for Owned {
    fn default() -> Self {
        Owned {
            schema: SCHEMA,
            files: BTreeSet::new(),
            dirs: BTreeSet::new(),
            json: BTreeMap::new(),
            toml: BTreeMap::new(),
            git: BTreeMap::new(),
            hooks: Some(BTreeMap::new()),
            generated: Some(BTreeMap::new()),
        }
    }
}

/// The digest a record keeps of bytes spex wrote.
pub fn digest(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(bytes))
}

impl Owned {
    /// Reads the record; a missing or unreadable record is empty (spex then owns nothing and
    /// removes less, never more).
    pub fn load(bytes: Option<&[u8]>) -> Owned {
        bytes
            .and_then(|b| serde_json::from_slice(b).ok())
            .unwrap_or_default()
    }

    /// Whether `group` under `event` in the hooks file `path` is one spex added.
    pub fn hook_group_is_ours(
        &self,
        path: &std::path::Path,
        event: &str,
        group: &serde_json::Value,
    ) -> bool {
        self.hooks.as_ref().is_some_and(|h| {
            h.get(path)
                .is_some_and(|gs| gs.iter().any(|(e, g)| e == event && g == group))
        })
    }

    /// Whether `bytes` at `path` are what spex generated there (by digest).
    pub fn generated_is_ours(&self, path: &std::path::Path, bytes: &[u8]) -> bool {
        self.generated
            .as_ref()
            .is_some_and(|g| g.get(path).is_some_and(|d| *d == digest(bytes)))
    }

    /// The record after a partial apply: `newer`'s account of the `written` files, this
    /// record's of the rest (whose bytes did not change), and every folder either knows.
    pub fn merged_for(&self, newer: &Owned, written: &[PathBuf]) -> Owned {
        let mut out = self.clone();
        // A record that predates these lists takes the newer account whole (made from what
        // the files hold, by the old rule).
        if out.hooks.is_none() {
            out.hooks.clone_from(&newer.hooks);
        }
        if out.generated.is_none() {
            out.generated.clone_from(&newer.generated);
        }
        for p in written {
            if newer.files.contains(p) {
                out.files.insert(p.clone());
            } else {
                out.files.remove(p);
            }
            match newer.json.get(p) {
                Some(j) => out.json.insert(p.clone(), j.clone()),
                None => out.json.remove(p),
            };
            match newer.toml.get(p) {
                Some(t) => out.toml.insert(p.clone(), t.clone()),
                None => out.toml.remove(p),
            };
            match newer.git.get(p) {
                Some(g) => out.git.insert(p.clone(), g.clone()),
                None => out.git.remove(p),
            };
            let hooks = out.hooks.get_or_insert_default();
            match newer.hooks.as_ref().and_then(|h| h.get(p)) {
                Some(h) => hooks.insert(p.clone(), h.clone()),
                None => hooks.remove(p),
            };
            let generated = out.generated.get_or_insert_default();
            match newer.generated.as_ref().and_then(|g| g.get(p)) {
                Some(d) => generated.insert(p.clone(), d.clone()),
                None => generated.remove(p),
            };
        }
        out.dirs.extend(newer.dirs.iter().cloned());
        out.dirs.retain(|d| d.is_dir());
        out
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        crate::store::json_bytes(self)
    }
}
