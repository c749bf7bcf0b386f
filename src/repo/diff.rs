//! A checkout's changes against a commit: committed and uncommitted together, untracked files as
//! added, through the `git` binary, read-only. Readers only (`spex diff`), never the hook path.
//!
//! Untracked files enter the diff as intent-to-add entries of a COPY of the checkout's index,
//! and whatever git writes meanwhile goes to a throwaway object folder (the repository's own
//! objects are read as an alternate): the checkout's index, objects and refs stay as they were.
//! `GIT_OPTIONAL_LOCKS=0` keeps git from refreshing what it reads; `--no-ext-diff`, no pager.
//! (One thing git does on any read, `git status` and `git diff` alike: with `core.splitIndex`
//! on, it refreshes the shared index file's mtime; its bytes stay.)

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::Tree;

#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    #[error("cannot run `git`: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("`git {args}` failed in `{}`: {stderr}", tree.display())]
    Git {
        args: String,
        tree: PathBuf,
        stderr: String,
    },
    /// `fs_err`'s error, which names the file.
    #[error("cannot prepare the diff: {0}")]
    Io(#[source] std::io::Error),
}

impl crate::hint::Hint for DiffError {
    fn hint(&self) -> Option<String> {
        match self {
            DiffError::Spawn(_) => Some("install git and put it on `PATH`".to_owned()),
            DiffError::Git { .. } | DiffError::Io(_) => None,
        }
    }
}

/// What `git diff` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// The stat, then the patch.
    Patch,
    Stat,
    NameOnly,
}

/// One changed file, as `--json` lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileChange {
    pub path: String,
    /// The path before a rename or copy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
    /// `added`, `modified`, `deleted`, `renamed`, `copied`, `type_changed`, `unmerged`.
    pub status: &'static str,
    /// Lines added and removed; `None` for a binary file.
    pub added: Option<u64>,
    pub removed: Option<u64>,
    pub binary: bool,
}

/// The changes of the checkout at `tree` against `base`, ready to run: a copy of the
/// checkout's index holding its untracked files as intent-to-add, in a throwaway folder.
pub struct Diff {
    root: PathBuf,
    base: String,
    paths: Vec<String>,
    scratch: tempfile::TempDir,
    objects: PathBuf,
}

impl Diff {
    /// Prepares the diff of `tree` against the commit `base`, limited to `paths` (pathspecs
    /// relative to the checkout's root) when any.
    pub fn new(tree: &Tree, base: &str, paths: &[String]) -> Result<Diff, DiffError> {
        let scratch = tempfile::Builder::new()
            .prefix("spex-diff")
            .tempdir()
            .map_err(DiffError::Io)?;
        let index = scratch.path().join("index");
        match fs_err::read(tree.git_dir.join("index")) {
            Ok(bytes) => fs_err::write(&index, bytes).map_err(DiffError::Io)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(DiffError::Io(e)),
        }
        let d = Diff {
            root: tree.root.clone(),
            base: base.to_owned(),
            paths: paths.to_vec(),
            objects: tree.common_dir.join("objects"),
            scratch,
        };
        let untracked = d.run(&["ls-files", "--others", "--exclude-standard", "-z"], None)?;
        if !untracked.is_empty() {
            // An untracked file git will not add (a nested repository) leaves the diff
            // without that one file, never without a diff.
            let _ = d.run(
                &[
                    "--literal-pathspecs",
                    "add",
                    "--intent-to-add",
                    "--ignore-errors",
                    "--pathspec-from-file=-",
                    "--pathspec-file-nul",
                ],
                Some(&untracked),
            );
        }
        Ok(d)
    }

    /// `git diff <base>` in `form`, in colour or not, as git prints it.
    pub fn text(&self, form: Form, color: bool) -> Result<String, DiffError> {
        let mut args = vec!["diff", "--no-ext-diff"];
        args.push(if color {
            "--color=always"
        } else {
            "--color=never"
        });
        match form {
            Form::Patch => args.extend(["--stat", "--patch"]),
            Form::Stat => args.push("--stat"),
            Form::NameOnly => args.push("--name-only"),
        }
        let out = self.diff(&args)?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// The changed files in git's order, with their status and line counts.
    pub fn files(&self) -> Result<Vec<FileChange>, DiffError> {
        let status = self.diff(&["diff", "--no-ext-diff", "--name-status", "-z"])?;
        let numstat = self.diff(&["diff", "--no-ext-diff", "--numstat", "-z"])?;
        let mut files = parse_name_status(&status);
        for (path, counts) in parse_numstat(&numstat) {
            if let Some(f) = files.iter_mut().find(|f| f.path == path) {
                match counts {
                    Some((a, r)) => (f.added, f.removed) = (Some(a), Some(r)),
                    None => f.binary = true,
                }
            }
        }
        Ok(files)
    }

    fn diff(&self, args: &[&str]) -> Result<Vec<u8>, DiffError> {
        let mut all: Vec<&str> = args.to_vec();
        all.push(&self.base);
        all.push("--");
        all.extend(self.paths.iter().map(String::as_str));
        self.run(&all, None)
    }

    fn run(&self, args: &[&str], input: Option<&[u8]>) -> Result<Vec<u8>, DiffError> {
        let mut cmd = Command::new("git");
        cmd.arg("--no-pager")
            // No fsmonitor daemon; the index copy written whole (a split index would put a new
            // shared index file beside the repository's); no automatic housekeeping.
            .args(["-c", "core.fsmonitor=false", "-c", "core.splitIndex=false"])
            .args(["-c", "gc.auto=0", "-c", "maintenance.auto=false"])
            .args(["-c", "core.quotePath=false"])
            .args(args)
            .current_dir(&self.root)
            // Whatever the caller's environment says, this checkout, this index copy, and
            // new objects (the empty blob of an intent-to-add entry) into the scratch folder.
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_COMMON_DIR")
            .env("GIT_INDEX_FILE", self.scratch.path().join("index"))
            .env("GIT_OBJECT_DIRECTORY", self.scratch.path())
            .env("GIT_ALTERNATE_OBJECT_DIRECTORIES", &self.objects)
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_PAGER", "cat")
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(DiffError::Spawn)?;
        if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin.write_all(bytes).map_err(DiffError::Spawn)?;
        }
        let out = child.wait_with_output().map_err(DiffError::Spawn)?;
        if !out.status.success() {
            return Err(DiffError::Git {
                args: args.join(" "),
                tree: self.root.clone(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(out.stdout)
    }
}

fn status_word(letter: u8) -> &'static str {
    match letter {
        b'A' => "added",
        b'D' => "deleted",
        b'R' => "renamed",
        b'C' => "copied",
        b'T' => "type_changed",
        b'U' => "unmerged",
        _ => "modified",
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `--name-status -z`: `S\0path\0`, or `R100\0old\0new\0` for a rename or copy.
fn parse_name_status(out: &[u8]) -> Vec<FileChange> {
    let mut fields = out.split(|b| *b == 0).filter(|f| !f.is_empty());
    let mut files = Vec::new();
    while let Some(code) = fields.next() {
        let letter = code.first().copied().unwrap_or(b'M');
        let first = fields.next().map(text).unwrap_or_default();
        let (path, old_path) = if matches!(letter, b'R' | b'C') {
            (fields.next().map(text).unwrap_or_default(), Some(first))
        } else {
            (first, None)
        };
        files.push(FileChange {
            path,
            old_path,
            status: status_word(letter),
            added: None,
            removed: None,
            binary: false,
        });
    }
    files
}

/// `--numstat -z`: `A\tR\tpath\0`, or `A\tR\t\0old\0new\0` for a rename; `-\t-` for binary.
fn parse_numstat(out: &[u8]) -> Vec<(String, Option<(u64, u64)>)> {
    let mut fields = out.split(|b| *b == 0);
    let mut rows = Vec::new();
    while let Some(head) = fields.next() {
        if head.is_empty() {
            continue;
        }
        let head = text(head);
        let mut parts = head.splitn(3, '\t');
        let (a, r, path) = (parts.next(), parts.next(), parts.next().unwrap_or(""));
        let path = if path.is_empty() {
            fields.next();
            fields.next().map(text).unwrap_or_default()
        } else {
            path.to_owned()
        };
        let counts = a
            .and_then(|a| a.parse().ok())
            .zip(r.and_then(|r| r.parse().ok()));
        rows.push((path, counts));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_status_and_numstat_parse_renames_and_binaries() {
        let files = parse_name_status(b"M\0a.rs\0R087\0old.rs\0new.rs\0A\0bin.png\0");
        let got: Vec<_> = files
            .iter()
            .map(|f| (f.status, f.path.as_str(), f.old_path.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                ("modified", "a.rs", None),
                ("renamed", "new.rs", Some("old.rs")),
                ("added", "bin.png", None)
            ]
        );
        let rows = parse_numstat(b"2\t1\ta.rs\x001\t1\t\0old.rs\0new.rs\0-\t-\tbin.png\0");
        assert_eq!(
            rows,
            [
                ("a.rs".to_owned(), Some((2, 1))),
                ("new.rs".to_owned(), Some((1, 1))),
                ("bin.png".to_owned(), None)
            ]
        );
    }

    fn git(dir: &std::path::Path, args: &[&str]) {
        let out = Command::new("git")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    /// Every file under `.git` but the scratch-free ones git may touch on its own, with bytes.
    fn git_files(repo: &std::path::Path) -> Vec<(PathBuf, Vec<u8>)> {
        let mut files: Vec<_> = walkdir::WalkDir::new(repo.join(".git"))
            .into_iter()
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_file())
            .map(|e| (e.path().to_owned(), fs_err::read(e.path()).unwrap()))
            .collect();
        files.sort();
        files
    }

    #[test]
    fn committed_uncommitted_and_untracked_changes_and_nothing_written() {
        changes_and_nothing_written(false);
        // A split index: the copy is written whole, never as a new shared index in `.git`.
        changes_and_nothing_written(true);
    }

    fn changes_and_nothing_written(split: bool) {
        let dir = tempfile::tempdir().unwrap();
        let repo = fs_err::canonicalize(dir.path()).unwrap();
        fs_err::write(repo.join("a.txt"), "one\ntwo\n").unwrap();
        fs_err::write(repo.join("gone.txt"), "bye\n").unwrap();
        git(&repo, &["init", "-q"]);
        if split {
            git(&repo, &["config", "core.splitIndex", "true"]);
        }
        git(&repo, &["add", "."]);
        git(&repo, &["commit", "-q", "-m", "base"]);
        let tree = Tree::discover(&repo).unwrap();
        let base = tree.branch_and_commit().1.unwrap();
        fs_err::write(repo.join("c.txt"), "committed\n").unwrap();
        git(&repo, &["add", "c.txt"]);
        git(&repo, &["commit", "-q", "-m", "during"]);
        fs_err::write(repo.join("a.txt"), "one\n2\nthree\n").unwrap();
        fs_err::remove_file(repo.join("gone.txt")).unwrap();
        fs_err::write(repo.join("new file.txt"), "new\n").unwrap();
        let before = git_files(&repo);
        let d = Diff::new(&tree, &base, &[]).unwrap();
        let files = d.files().unwrap();
        let got: Vec<_> = files
            .iter()
            .map(|f| (f.path.as_str(), f.status, f.added, f.removed))
            .collect();
        assert_eq!(
            got,
            [
                ("a.txt", "modified", Some(2), Some(1)),
                ("c.txt", "added", Some(1), Some(0)),
                ("gone.txt", "deleted", Some(0), Some(1)),
                ("new file.txt", "added", Some(1), Some(0)),
            ]
        );
        let stat = d.text(Form::Stat, false).unwrap();
        assert!(stat.contains("4 files changed"), "{stat}");
        let names = d.text(Form::NameOnly, false).unwrap();
        assert_eq!(names, "a.txt\nc.txt\ngone.txt\nnew file.txt\n");
        let patch = d.text(Form::Patch, true).unwrap();
        assert!(
            patch.contains("\u{1b}[") && patch.contains("b/new file.txt"),
            "{patch}"
        );
        let only = Diff::new(&tree, &base, &["c.txt".to_owned()]).unwrap();
        assert_eq!(only.text(Form::NameOnly, false).unwrap(), "c.txt\n");
        drop((d, only));
        assert!(
            git_files(&repo) == before,
            "the repository changed (split: {split})"
        );
    }

    #[test]
    fn a_linked_worktree_is_diffed_with_its_own_index() {
        let dir = tempfile::tempdir().unwrap();
        let base_dir = fs_err::canonicalize(dir.path()).unwrap();
        let repo = base_dir.join("repo");
        fs_err::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q"]);
        git(&repo, &["commit", "-q", "--allow-empty", "-m", "base"]);
        let wt = base_dir.join("wt");
        git(
            &repo,
            &["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()],
        );
        fs_err::write(wt.join("staged.txt"), "s\n").unwrap();
        git(&wt, &["add", "staged.txt"]);
        fs_err::write(wt.join("loose.txt"), "l\n").unwrap();
        fs_err::write(repo.join("main-only.txt"), "m\n").unwrap();
        let tree = Tree::discover(&wt).unwrap();
        let base = tree.branch_and_commit().1.unwrap();
        let d = Diff::new(&tree, &base, &[]).unwrap();
        assert_eq!(
            d.text(Form::NameOnly, false).unwrap(),
            "loose.txt\nstaged.txt\n"
        );
    }
}
