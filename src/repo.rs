//! Git checkout discovery by reading `.git` files directly: which tree we are in, its main
//! checkout, its linked worktrees, its branch, the commit its HEAD names. No `git` subprocess
//! and no libgit2, because `spex dispatch` needs this on every hook and two small file reads
//! are all it takes. (`diff` runs the `git` binary read-only, for readers only.)

pub mod diff;

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    #[error("`{0}` is not inside a git checkout")]
    NotARepo(PathBuf),
    /// `fs_err`'s error, which names the file.
    #[error("cannot read git metadata: {0}")]
    Io(#[source] std::io::Error),
    #[error("`{0}` does not look like a `.git` file (expected `gitdir: <path>`)")]
    BadGitFile(PathBuf),
    #[error(
        "cannot tell which checkout is the main one of the repository `{0}` (its git dir is not `<checkout>/.git` and sets no `core.worktree`)"
    )]
    NoMain(PathBuf),
}

impl crate::hint::Hint for RepoError {
    fn hint(&self) -> Option<String> {
        match self {
            RepoError::NotARepo(_) => {
                Some("run spex from a git repository (or `git init` first)".to_owned())
            }
            RepoError::NoMain(git_dir) => Some(format!(
                "run spex in the main checkout, or set it with `git --git-dir={} config core.worktree <main checkout>`",
                git_dir.display()
            )),
            RepoError::Io { .. } | RepoError::BadGitFile(_) => None,
        }
    }
}

/// One checkout (the main one or a linked worktree) of a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    /// Root of this checkout (canonical).
    pub root: PathBuf,
    /// Root of the main checkout (canonical); equal to `root` in the main checkout.
    pub main: PathBuf,
    /// This checkout's git dir (`.git` or `.git/worktrees/<name>`).
    pub git_dir: PathBuf,
    /// The shared git dir (`<main>/.git`).
    pub common_dir: PathBuf,
}

fn canon(path: &Path) -> Result<PathBuf, RepoError> {
    fs_err::canonicalize(path).map_err(RepoError::Io)
}

fn read_pointer(file: &Path, base: &Path) -> Result<PathBuf, RepoError> {
    let text = fs_err::read_to_string(file).map_err(RepoError::Io)?;
    let target = text.trim_end_matches(['\n', '\r']);
    let target = target.strip_prefix("gitdir: ").unwrap_or(target);
    if target.is_empty() {
        return Err(RepoError::BadGitFile(file.to_owned()));
    }
    Ok(base.join(target))
}

/// The main checkout of the repository whose shared git dir is `common_dir`, as git finds it:
/// `core.worktree` when the git dir sets it (a submodule's), else the folder holding `.git`.
fn main_of(common_dir: &Path) -> Result<PathBuf, RepoError> {
    let config = fs_err::read_to_string(common_dir.join("config")).unwrap_or_default();
    if let Some(dir) = core_worktree(&config) {
        return canon(&common_dir.join(dir));
    }
    match common_dir.parent() {
        Some(parent) if common_dir.file_name().is_some_and(|n| n == ".git") => {
            Ok(parent.to_owned())
        }
        _ => Err(RepoError::NoMain(common_dir.to_owned())),
    }
}

/// `core.worktree` of a git config text (the plain spellings git writes itself).
fn core_worktree(config: &str) -> Option<String> {
    let mut in_core = false;
    let mut found = None;
    for line in config.lines().map(str::trim) {
        if line.starts_with('[') {
            in_core = line.eq_ignore_ascii_case("[core]");
        } else if in_core
            && let Some((k, v)) = line.split_once('=')
            && k.trim().eq_ignore_ascii_case("worktree")
        {
            found = Some(v.trim().trim_matches('"').to_owned());
        }
    }
    found
}

impl Tree {
    /// The checkout containing `start` (walking up).
    pub fn discover(start: &Path) -> Result<Tree, RepoError> {
        let start = canon(start)?;
        let mut dir = start.as_path();
        loop {
            let dot_git = dir.join(".git");
            if let Ok(meta) = fs_err::metadata(&dot_git) {
                return Tree::at(dir, &dot_git, meta.is_dir());
            }
            dir = dir
                .parent()
                .ok_or_else(|| RepoError::NotARepo(start.clone()))?;
        }
    }

    fn at(root: &Path, dot_git: &Path, is_dir: bool) -> Result<Tree, RepoError> {
        let git_dir = if is_dir {
            dot_git.to_owned()
        } else {
            let dir = read_pointer(dot_git, root).map_err(|e| match e {
                RepoError::Io(_) => e,
                _ => RepoError::BadGitFile(dot_git.to_owned()),
            })?;
            canon(&dir)?
        };
        let linked = git_dir.join("commondir");
        let common_dir = match fs_err::read_to_string(&linked) {
            Ok(_) => canon(&read_pointer(&linked, &git_dir)?)?,
            Err(_) => git_dir.clone(),
        };
        let main = if common_dir == git_dir {
            // This is the main checkout, wherever its git dir lives (`.git`, a submodule's
            // `.git/modules/<name>`, a `--separate-git-dir`).
            canon(root)?
        } else {
            main_of(&common_dir)?
        };
        Ok(Tree {
            root: canon(root)?,
            main,
            git_dir,
            common_dir,
        })
    }

    pub fn is_main(&self) -> bool {
        self.root == self.main
    }

    /// The main checkout as a `Tree`.
    pub fn main_tree(&self) -> Tree {
        Tree {
            root: self.main.clone(),
            main: self.main.clone(),
            git_dir: self.common_dir.clone(),
            common_dir: self.common_dir.clone(),
        }
    }

    /// Every checkout of this repository that still exists: the main one first, then the
    /// linked worktrees in name order.
    pub fn all_trees(&self) -> Vec<Tree> {
        let mut out = vec![self.main_tree()];
        let Ok(entries) = fs_err::read_dir(self.common_dir.join("worktrees")) else {
            return out;
        };
        let mut names: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
        names.sort();
        for wt_git in names {
            let Ok(dot_git) = read_pointer(&wt_git.join("gitdir"), &wt_git) else {
                continue;
            };
            let Some(root) = dot_git.parent() else {
                continue;
            };
            if let Ok(tree) = Tree::at(root, &dot_git, false)
                && tree.common_dir == self.common_dir
            {
                out.push(tree);
            }
        }
        out
    }

    /// How `logical`, a path as a user spells it (the shell's `$PWD`), spells the main
    /// checkout when that differs from its canonical path: the deepest ancestor of `logical`
    /// that resolves to it, e.g. `<dir>/link` for `$PWD` `<dir>/link/src` when `link`
    /// points at the checkout. `None` when `logical` is relative, has `..` in it, names the main
    /// checkout canonically, or is not inside it.
    pub fn main_spelling(&self, logical: &Path) -> Option<PathBuf> {
        // `..` after a symlink means something else to the shell than to the file system.
        let plain = logical.is_absolute()
            && !logical
                .components()
                .any(|c| c == std::path::Component::ParentDir);
        if !plain {
            return None;
        }
        // The deepest match is the folder the user's path enters the checkout through.
        let found = logical
            .ancestors()
            .find(|a| fs_err::canonicalize(a).is_ok_and(|c| c == self.main))?;
        (found != self.main).then(|| found.to_owned())
    }

    /// The `info/exclude` file git reads for every checkout of the repository.
    pub fn exclude_file(&self) -> PathBuf {
        self.common_dir.join("info/exclude")
    }

    /// The checked-out branch (`None` on a detached HEAD) and the commit HEAD names (`None` on
    /// an unborn branch), from the git files: HEAD, then the loose ref or `packed-refs`. A few
    /// small file reads, so a record made by a hook can carry them.
    pub fn branch_and_commit(&self) -> (Option<String>, Option<String>) {
        let Ok(head) = fs_err::read_to_string(self.git_dir.join("HEAD")) else {
            return (None, None);
        };
        let head = head.trim_end();
        let Some(name) = head.strip_prefix("ref: ") else {
            return (None, object_id(head));
        };
        let branch = name.strip_prefix("refs/heads/").map(str::to_owned);
        (branch, self.ref_commit(name))
    }

    /// The commit the ref `name` (`refs/heads/main`) names.
    fn ref_commit(&self, name: &str) -> Option<String> {
        // Per-worktree refs (`refs/bisect`, `refs/worktree`) live in the worktree's git dir,
        // every other ref in the shared one.
        for dir in [&self.git_dir, &self.common_dir] {
            if let Ok(text) = fs_err::read_to_string(dir.join(name)) {
                return object_id(text.trim_end());
            }
        }
        let packed = fs_err::read_to_string(self.common_dir.join("packed-refs")).ok()?;
        packed
            .lines()
            .filter_map(|l| l.split_once(' '))
            .find(|(_, r)| *r == name)
            .and_then(|(id, _)| object_id(id))
    }

    /// The checked-out branch, or `None` on a detached HEAD.
    pub fn branch(&self) -> Option<String> {
        let head = fs_err::read_to_string(self.git_dir.join("HEAD")).ok()?;
        head.trim_end()
            .strip_prefix("ref: refs/heads/")
            .map(str::to_owned)
    }
}

/// Whether `path` is `root` or inside it, both resolved (`..` and symlinks) as far as they
/// exist: a file that does not exist yet resolves through its nearest existing folder.
pub fn resolved_inside(root: &Path, path: &Path) -> Option<PathBuf> {
    use std::path::Component;
    let root = fs_err::canonicalize(root).ok()?;
    let parts: Vec<Component> = path.components().collect();
    // The longest leading part that exists, resolved as the kernel would (symlinks, then `..`).
    let (mut full, rest) = (1..=parts.len()).rev().find_map(|n| {
        let c = fs_err::canonicalize(parts[..n].iter().collect::<PathBuf>()).ok()?;
        Some((c, &parts[n..]))
    })?;
    // What does not exist has no symlinks to follow: its `..` and `.` are read as written.
    for part in rest {
        match part {
            Component::ParentDir => {
                full.pop();
            }
            Component::Normal(name) => full.push(name),
            _ => {}
        }
    }
    full.starts_with(&root).then_some(full)
}

/// `text` when it is a full object id (SHA-1 or SHA-256 hex).
fn object_id(text: &str) -> Option<String> {
    let ok = matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit());
    ok.then(|| text.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
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
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    #[test]
    fn head_commit_reads_loose_packed_and_linked_worktree_refs() {
        let dir = tempfile::tempdir().unwrap();
        let repo = fs_err::canonicalize(dir.path()).unwrap().join("repo");
        fs_err::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q"]);
        assert_eq!(
            Tree::discover(&repo).unwrap().branch_and_commit().1,
            None,
            "unborn"
        );
        git(&repo, &["commit", "-q", "--allow-empty", "-m", "one"]);
        let one = git(&repo, &["rev-parse", "HEAD"]);
        assert_eq!(
            Tree::discover(&repo).unwrap().branch_and_commit().1,
            Some(one.clone())
        );
        git(&repo, &["pack-refs", "--all"]);
        assert_eq!(
            Tree::discover(&repo).unwrap().branch_and_commit().1,
            Some(one.clone())
        );
        let wt = repo.parent().unwrap().join("wt");
        git(
            &repo,
            &["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()],
        );
        git(&wt, &["commit", "-q", "--allow-empty", "-m", "two"]);
        let two = git(&wt, &["rev-parse", "HEAD"]);
        assert_ne!(one, two);
        assert_eq!(
            Tree::discover(&wt).unwrap().branch_and_commit().1,
            Some(two)
        );
        assert_eq!(
            Tree::discover(&repo).unwrap().branch_and_commit().1,
            Some(one.clone())
        );
        git(&repo, &["checkout", "-q", "--detach"]);
        assert_eq!(
            Tree::discover(&repo).unwrap().branch_and_commit().1,
            Some(one)
        );
    }

    #[test]
    fn a_path_resolves_inside_its_root_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let base = fs_err::canonicalize(dir.path()).unwrap();
        let root = base.join("tree");
        fs_err::create_dir_all(root.join("src")).unwrap();
        fs_err::write(base.join("secret"), "x").unwrap();
        fs_err::os::unix::fs::symlink(base.join("secret"), root.join("link")).unwrap();
        let inside = |p: &str| resolved_inside(&root, &root.join(p));
        assert_eq!(inside("src"), Some(root.join("src")));
        assert_eq!(inside("src/new.rs"), Some(root.join("src/new.rs")));
        assert_eq!(inside("src/../src/a"), Some(root.join("src/a")));
        assert_eq!(inside("../secret"), None);
        assert_eq!(inside("link"), None, "a symlink out of the tree");
        assert_eq!(inside("nope/../../secret"), None);
        assert_eq!(inside("nope/../src/b"), Some(root.join("src/b")));
        assert_eq!(resolved_inside(&root, Path::new("/etc/passwd")), None);
    }

    /// `<tmp>/real/repo` (a checkout with `sub/`), `<tmp>/link -> real/repo`,
    /// `<tmp>/alias -> real`, `<tmp>/real/repo/inner -> sub` and `<tmp>/elsewhere -> real/repo/sub`.
    fn layout() -> (tempfile::TempDir, PathBuf, Tree) {
        let dir = tempfile::tempdir().unwrap();
        let base = fs_err::canonicalize(dir.path()).unwrap();
        let repo = base.join("real/repo");
        fs_err::create_dir_all(repo.join(".git")).unwrap();
        fs_err::create_dir_all(repo.join("sub")).unwrap();
        let link = |target: &str, at: &str| fs_err::os::unix::fs::symlink(target, base.join(at));
        link("real/repo", "link").unwrap();
        link("real", "alias").unwrap();
        link("sub", "real/repo/inner").unwrap();
        link("real/repo/sub", "elsewhere").unwrap();
        let tree = Tree::discover(&repo).unwrap();
        (dir, base, tree)
    }

    #[test]
    fn main_spelling_is_the_symlinked_path_into_the_checkout() {
        let (_dir, base, tree) = layout();
        let cases: &[(&str, Option<&str>)] = &[
            ("link", Some("link")),
            ("link/sub", Some("link")),
            ("link/inner", Some("link")),
            ("alias/repo/sub", Some("alias/repo")),
            // Canonical already, or entering through a link inside the checkout.
            ("real/repo", None),
            ("real/repo/inner", None),
            // A link to a folder inside the checkout does not spell the checkout.
            ("elsewhere", None),
            ("real", None),
            ("link/../link", None),
            ("link/./sub", Some("link")),
        ];
        for (logical, want) in cases {
            let got = tree.main_spelling(&base.join(logical));
            assert_eq!(got, want.map(|w| base.join(w)), "$PWD {logical}");
        }
        assert_eq!(tree.main_spelling(Path::new("link")), None, "relative");
    }

    #[test]
    fn core_worktree_is_read_as_git_writes_it() {
        let cases: &[(&str, Option<&str>)] = &[
            ("[core]\n\tworktree = ../../../sub\n", Some("../../../sub")),
            (
                "[core]\n\tbare = false\n[remote \"o\"]\n\tworktree = x\n",
                None,
            ),
            ("[Core]\nworktree=\"/a b\"\n", Some("/a b")),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(core_worktree(text).as_deref(), *want, "{text:?}");
        }
    }
}
