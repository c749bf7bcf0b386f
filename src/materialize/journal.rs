//! The crash journal of an apply: written (and synced) before the first target is touched,
//! removed once the ownership record tells the truth again. A run that finds one (the last was
//! killed, or failed midway) recovers the record from it: for each file, the account of the
//! version the file holds (the one before or after the interrupted write; both accounts, by key,
//! when another program wrote it since), so the next `materialize` finishes and `clean` takes
//! back everything; and it removes the temp files the interrupted write left beside its targets.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fsutil;
use crate::seam::edit::owned::{self, JsonOwned, Owned};
use crate::seam::edit::toml_entries::TomlOwned;

#[derive(Debug, Serialize, Deserialize)]
pub struct Journal {
    pub schema: u32,
    /// The record before the run, and as the run meant to leave it.
    pub before: Owned,
    pub after: Owned,
    /// Every file the run meant to write: digests of its bytes before and after (`None`:
    /// absent).
    pub files: Vec<Planned>,
    /// The folders the run meant to create or remove: an interrupted run can leave them
    /// empty, and an empty one of these is spex's to take away.
    #[serde(default)]
    pub dirs: Vec<PathBuf>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Planned {
    pub path: PathBuf,
    pub before: Option<String>,
    pub after: Option<String>,
}

impl Planned {
    pub fn new(path: &Path, before: Option<&[u8]>, after: Option<&[u8]>) -> Planned {
        Planned {
            path: path.to_owned(),
            before: before.map(owned::digest),
            after: after.map(owned::digest),
        }
    }
}

/// Which version a journaled file holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holds {
    Before,
    After,
    Other,
}

fn holds(p: &Planned) -> Holds {
    let now = match fsutil::read_opt(&p.path) {
        Ok(b) => b.as_deref().map(owned::digest),
        Err(_) => return Holds::Other,
    };
    if now == p.after {
        Holds::After
    } else if now == p.before {
        Holds::Before
    } else {
        Holds::Other
    }
}

impl Journal {
    pub fn load(path: &Path) -> Option<Journal> {
        let bytes = fsutil::read_opt(path).ok()??;
        serde_json::from_slice(&bytes).ok()
    }

    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        fsutil::write_private(path, &crate::store::json_bytes(self)).map(drop)
    }

    /// The record as the files are now.
    pub fn recovered(&self) -> Owned {
        let mut written = Vec::new();
        let mut other = Vec::new();
        for p in &self.files {
            match holds(p) {
                Holds::After => written.push(p.path.clone()),
                Holds::Before => {}
                Holds::Other => other.push(p.path.clone()),
            }
        }
        let mut out = self.before.merged_for(&self.after, &written);
        for p in other {
            union_for(&mut out, &self.after, &p);
        }
        out
    }

    /// Removes spex's temp files from `dir` (the store's own writes).
    pub fn sweep_dir(dir: &Path) {
        let Ok(entries) = fs_err::read_dir(dir) else {
            return;
        };
        for e in entries.filter_map(Result::ok) {
            if e.file_name()
                .to_string_lossy()
                .starts_with(fsutil::TEMP_PREFIX)
            {
                let _ = fsutil::remove_file(&e.path());
            }
        }
    }

    /// Removes what an interrupted write leaves beside its targets: spex's temp files, a file
    /// it had moved aside to delete (once it holds the bytes the run meant to delete), and the
    /// folders it meant to make or remove that are empty, but for those that hold (or lead to)
    /// a path in `keep`: the run about to start writes there.
    pub fn sweep_keeping(&self, keep: &[&Path]) {
        self.sweep_files();
        // Deepest first, so a folder emptied by removing its child goes too.
        let mut folders: Vec<&PathBuf> = self.dirs.iter().collect();
        folders.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for dir in folders {
            if !keep.iter().any(|k| k.starts_with(dir)) {
                fsutil::remove_dir_if_empty(dir);
            }
        }
    }

    fn sweep_files(&self) {
        let dirs: BTreeSet<&Path> = self.files.iter().filter_map(|p| p.path.parent()).collect();
        for dir in dirs {
            let Ok(entries) = fs_err::read_dir(dir) else {
                continue;
            };
            for e in entries.filter_map(Result::ok) {
                let path = e.path();
                if self.sweeps(&path) {
                    let _ = fsutil::remove_file(&path);
                }
            }
        }
    }

    /// Whether the sweep takes `path` away: a temp file beside a file the run meant to write,
    /// or a file it had moved aside to delete (holding the bytes the run meant to delete). A
    /// plan counts these as gone when it asks whether a folder ends up empty.
    pub fn sweeps(&self, path: &Path) -> bool {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return false;
        };
        let mut planned = self.files.iter().filter(|p| p.path.parent() == Some(dir));
        let name = name.to_string_lossy();
        if name.starts_with(fsutil::TEMP_PREFIX) {
            planned.next().is_some()
        } else if name.starts_with(fsutil::ASIDE_PREFIX) {
            let digest = fs_err::read(path).ok().map(|b| owned::digest(&b));
            planned.any(|p| p.after.is_none() && p.before.is_some() && p.before == digest)
        } else {
            false
        }
    }
}

/// Keeps `after`'s claims on `path` beside the record's: a file another program wrote since
/// holds neither version, and claims by key (checked against spex's value when taken back)
/// are safe to keep from both.
fn union_for(out: &mut Owned, after: &Owned, path: &Path) {
    if after.files.contains(path) {
        out.files.insert(path.to_owned());
    }
    if let Some(j) = after.json.get(path) {
        let mine = out.json.entry(path.to_owned()).or_default();
        union_json(mine, j);
    }
    if let Some(t) = after.toml.get(path) {
        let mine = out.toml.entry(path.to_owned()).or_default();
        union_toml(mine, t);
    }
    if let Some(g) = after.git.get(path) {
        let mine = out.git.entry(path.to_owned()).or_default();
        for e in &g.entries {
            if !mine.entries.contains(e) {
                mine.entries.push(e.clone());
            }
        }
    }
    if let Some(h) = after.hooks.as_ref().and_then(|h| h.get(path)) {
        let mine = out
            .hooks
            .get_or_insert_default()
            .entry(path.to_owned())
            .or_default();
        for g in h {
            if !mine.contains(g) {
                mine.push(g.clone());
            }
        }
    }
    // A generated file holding neither version is not spex's bytes.
    if let Some(g) = out.generated.as_mut() {
        g.remove(path);
    }
}

fn union_json(mine: &mut JsonOwned, theirs: &JsonOwned) {
    for m in &theirs.members {
        if !mine.members.contains(m) {
            mine.members.push(m.clone());
        }
    }
    for (k, v) in &theirs.replaced {
        if !mine.replaced.iter().any(|(k2, _)| k2 == k) {
            mine.replaced.push((k.clone(), v.clone()));
        }
    }
    for (k, v) in &theirs.written {
        mine.written.retain(|(k2, _)| k2 != k);
        mine.written.push((k.clone(), v.clone()));
    }
    mine.root_created |= theirs.root_created;
}

fn union_toml(mine: &mut TomlOwned, theirs: &TomlOwned) {
    for e in &theirs.entries {
        mine.entries.retain(|m| m.key != e.key);
        mine.entries.push(e.clone());
    }
    for t in &theirs.tables {
        if !mine.tables.contains(t) {
            mine.tables.push(t.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run that meant to create `a` and `b` and to delete `c`, killed after some of it.
    #[test]
    fn the_record_follows_the_version_each_file_holds() {
        let dir = tempfile::tempdir().unwrap();
        let [a, b, c, d] = ["a", "b", "c", "d"].map(|n| dir.path().join(n));
        let mut before = Owned::default();
        before.files.insert(c.clone());
        before
            .generated
            .get_or_insert_default()
            .insert(c.clone(), owned::digest(b"old"));
        let mut after = Owned::default();
        for (p, bytes) in [(&a, &b"new a"[..]), (&b, b"new b"), (&d, b"new d")] {
            after.files.insert(p.clone());
            after
                .generated
                .get_or_insert_default()
                .insert(p.clone(), owned::digest(bytes));
        }
        let journal = Journal {
            schema: owned::SCHEMA,
            before,
            after,
            files: vec![
                Planned::new(&a, None, Some(b"new a")),
                Planned::new(&b, None, Some(b"new b")),
                Planned::new(&c, Some(b"old"), None),
                Planned::new(&d, None, Some(b"new d")),
            ],
            // Folders the run made: one left empty by the kill, one that got its file.
            dirs: vec![
                dir.path().join("skills"),
                dir.path().join("skills/s0"),
                dir.path().join("kept"),
            ],
        };
        fs_err::create_dir_all(dir.path().join("skills/s0")).unwrap();
        fs_err::create_dir_all(dir.path().join("kept")).unwrap();
        fs_err::write(dir.path().join("kept/SKILL.md"), "x").unwrap();
        // `a` was written; `b` not yet; `c` is still there; `d` another program wrote.
        fs_err::write(&a, "new a").unwrap();
        fs_err::write(&c, "old").unwrap();
        fs_err::write(&d, "theirs").unwrap();
        fs_err::write(dir.path().join(".spex-tmpXYZ"), "new b").unwrap();
        let rec = journal.recovered();
        let generated = rec.generated.as_ref().unwrap();
        assert!(
            rec.files.contains(&a) && generated.contains_key(&a),
            "{rec:?}"
        );
        assert!(
            !rec.files.contains(&b) && !generated.contains_key(&b),
            "{rec:?}"
        );
        assert!(
            rec.files.contains(&c) && generated.contains_key(&c),
            "{rec:?}"
        );
        // Neither version: its claims are kept, its bytes are not spex's.
        assert!(
            rec.files.contains(&d) && !generated.contains_key(&d),
            "{rec:?}"
        );
        journal.sweep_keeping(&[]);
        assert!(
            !dir.path().join("skills").exists(),
            "the empty folders the run made go"
        );
        assert!(dir.path().join("kept/SKILL.md").exists());
        let left: Vec<String> = fs_err::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".spex-"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}
