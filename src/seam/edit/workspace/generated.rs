//! The files spex generates whole (skills, agents, commands): written, rewritten or deleted
//! only while they hold what spex's record says it wrote, and found again by their stamp.

use std::path::{Path, PathBuf};

use super::{STAMP, Workspace};
use crate::fsutil;
use crate::seam::edit::MaterializeError;
use crate::seam::edit::owned::digest;

impl Workspace {
    /// Writes (or with `None` removes) a file spex generates whole. spex rewrites or deletes
    /// only a file its record says it wrote, while it holds the bytes spex wrote; any other
    /// file in the way is refused, and a stamped file spex has no record of is left alone
    /// with a warning.
    pub fn generated(
        &mut self,
        path: &Path,
        content: Option<String>,
    ) -> Result<(), MaterializeError> {
        self.generated_bytes(path, content.map(String::into_bytes))
    }

    /// `generated` with bytes that need not be text.
    pub fn generated_bytes(
        &mut self,
        path: &Path,
        content: Option<Vec<u8>>,
    ) -> Result<(), MaterializeError> {
        let path = &fsutil::resolve_link(path);
        let current = self.read(path)?;
        let ours = current
            .as_deref()
            .is_some_and(|cur| self.owned.generated_is_ours(path, cur));
        let record = self.owned.generated.get_or_insert_default();
        match (current, content) {
            (None, None) => {
                record.remove(path);
            }
            (None, Some(c)) => {
                record.insert(path.to_owned(), digest(&c));
                self.set(path, Some(c))?;
            }
            (Some(_), Some(c)) if ours => {
                record.insert(path.to_owned(), digest(&c));
                self.set(path, Some(c))?;
            }
            // The user's, with exactly what spex would write: nothing to do, and it stays theirs.
            (Some(cur), Some(c)) if cur == c => {
                record.remove(path);
            }
            (Some(cur), Some(_)) => {
                record.remove(path);
                let changed = String::from_utf8_lossy(&cur).contains(STAMP);
                return Err(MaterializeError::Foreign {
                    path: path.to_owned(),
                    changed,
                });
            }
            (Some(_), None) if ours => {
                record.remove(path);
                self.set(path, None)?;
            }
            (Some(cur), None) => {
                let known = record.remove(path).is_some();
                // The user's now: spex forgets it (no longer its file to list or remove).
                self.owned.files.remove(path);
                if known || String::from_utf8_lossy(&cur).contains(STAMP) {
                    let why = if known {
                        "changed since spex wrote it"
                    } else {
                        "carries spex's stamp but spex has no record of writing it"
                    };
                    self.warnings.push(format!(
                        "`{}` {why}; spex leaves it to you (delete it if you do not want it)",
                        path.display()
                    ));
                }
            }
        }
        Ok(())
    }

    /// Files spex generated under `dir`, as its record says.
    pub fn generated_under(&self, dir: &Path) -> Vec<PathBuf> {
        self.owned
            .generated
            .iter()
            .flatten()
            .map(|(p, _)| p)
            .filter(|p| p.starts_with(dir))
            .cloned()
            .collect()
    }

    /// Files in `dir` (recursively) that carry the spex stamp, except those in `skip` and
    /// spex's own temp and moved-aside files (an interrupted write's leftovers, swept by the
    /// next run: counted as the user's, they kept their folders from being removed).
    pub fn stamped_files(dir: &Path, skip: &std::collections::HashSet<PathBuf>) -> Vec<PathBuf> {
        walkdir::WalkDir::new(dir)
            .into_iter()
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_file() && !skip.contains(e.path()))
            .filter(|e| {
                let name = e.file_name().to_string_lossy();
                !name.starts_with(fsutil::TEMP_PREFIX) && !name.starts_with(fsutil::ASIDE_PREFIX)
            })
            .filter(|e| {
                fs_err::read(e.path()).is_ok_and(|b| String::from_utf8_lossy(&b).contains(STAMP))
            })
            .map(walkdir::DirEntry::into_path)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::seam::edit::workspace::{STAMP, Workspace};

    /// A killed write's temp file (stamped: it holds a generated file's bytes) and a file moved
    /// aside to delete are spex's leftovers, not a user's stamped files to keep.
    #[test]
    fn leftovers_of_a_killed_write_are_not_user_files() {
        let dir = tempfile::tempdir().unwrap();
        let skill = dir.path().join("skills/s2");
        fs_err::create_dir_all(&skill).unwrap();
        let stamped = format!("{STAMP} -->\nbody\n");
        for name in [".spex-tmpdp0yF0", ".spex-del-12-34", "MINE.md"] {
            fs_err::write(skill.join(name), &stamped).unwrap();
        }
        let found = Workspace::stamped_files(dir.path(), &std::collections::HashSet::new());
        assert_eq!(found, vec![skill.join("MINE.md")]);
    }
}
