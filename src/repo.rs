//! Git checkout discovery by reading `.git` files directly: which tree we are in, its main
//! checkout, its linked worktrees, its branch. No `git` subprocess and no libgit2, because
//! `spex dispatch` needs this on every hook and two small file reads are all it takes.

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

    /// The checked-out branch, or `None` on a detached HEAD.
    pub fn branch(&self) -> Option<String> {
        let head = fs_err::read_to_string(self.git_dir.join("HEAD")).ok()?;
        head.trim_end()
            .strip_prefix("ref: refs/heads/")
            .map(str::to_owned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
