//! Ownership proofs: what spex created, so `clean` removes exactly that and nothing the user
//! owns. Files and folders spex created, JSON members it inserted, JSON values it replaced
//! (with the value they had), TOML entries it added to a file a harness rewrites. Stored per
//! project in the spex store.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

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
    /// The file was empty text and spex wrote `{}` into it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub root_created: bool,
}

impl JsonOwned {
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
            && self.replaced.is_empty()
            && self.written.is_empty()
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
}

impl Default for Owned {
    fn default() -> Self {
        Owned {
            schema: SCHEMA,
            files: BTreeSet::new(),
            dirs: BTreeSet::new(),
            json: BTreeMap::new(),
            toml: BTreeMap::new(),
        }
    }
}

impl Owned {
    /// Reads the record; a missing or unreadable record is empty (spex then owns nothing and
    /// removes less, never more).
    pub fn load(bytes: Option<&[u8]>) -> Owned {
        bytes
            .and_then(|b| serde_json::from_slice(b).ok())
            .unwrap_or_default()
    }

    /// The record after a partial apply: `newer`'s account of the `written` files, this
    /// record's of the rest (whose bytes did not change), and every folder either knows.
    pub fn merged_for(&self, newer: &Owned, written: &[PathBuf]) -> Owned {
        let mut out = self.clone();
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
        }
        out.dirs.extend(newer.dirs.iter().cloned());
        out.dirs.retain(|d| d.is_dir());
        out
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        crate::store::json_bytes(self)
    }
}
