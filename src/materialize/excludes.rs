//! Keeps the files spex generated in a checkout out of `git status` in that checkout only. git
//! reads `info/exclude` from the repository's shared git dir (every worktree sees it), so
//! spex uses the one per-worktree setting git has: `core.excludesFile` in the checkout's own
//! `config.worktree` (read once `extensions.worktreeConfig` is set in the shared config) names
//! a file in the checkout's own git dir, which `git worktree remove` deletes with it. That
//! setting replaces the user's global excludes file in that checkout, so spex's file carries a
//! verbatim copy of it, refreshed on every run. Every run plans every checkout of the
//! repository, so one run also moves older runs' blocks out of the shared `info/exclude`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::env::Env;
use crate::repo::Tree;
use crate::seam::edit::workspace::Workspace;
use crate::seam::edit::{MaterializeError, block, git_config};

/// The file spex writes in each checkout's git dir and names in its `config.worktree`.
pub const EXCLUDE_NAME: &str = "spex-exclude";

/// What git reads in place of `config.worktree`'s `core.excludesFile` when none is set there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserExcludes {
    /// `core.excludesFile` of the shared, global or system config, else git's default.
    pub path: PathBuf,
    /// Its bytes (`None`: no such file).
    pub bytes: Option<Vec<u8>>,
}

/// The excludes file git reads in `tree` when its `config.worktree` sets none: the last
/// `core.excludesFile` of the repository's shared config, the user's global config or the
/// system config, else `$XDG_CONFIG_HOME/git/ignore` (`~/.config/git/ignore`). Asked of git
/// itself, which knows the config files, includes (conditional ones too) and `~`; the
/// per-worktree scope is skipped, since there it would find spex's own setting.
pub fn user_excludes(env: &Env, tree: &Tree) -> UserExcludes {
    let configured = std::process::Command::new("git")
        .args([
            "config",
            "--show-scope",
            "--includes",
            "--type=path",
            "-z",
            "--get-all",
            "core.excludesFile",
        ])
        .current_dir(&tree.root)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_COMMON_DIR")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .and_then(|out| {
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let fields: Vec<&str> = text.split('\0').collect();
            fields
                .chunks(2)
                .rfind(|pair| {
                    pair.len() == 2
                        && matches!(pair[0], "system" | "global" | "local")
                        && !pair[1].is_empty()
                })
                .map(|pair| pair[1].to_owned())
        });
    let path = match configured {
        // git reads a relative one from the top of the checkout it runs in.
        Some(v) => tree.root.join(v),
        None => env
            .xdg_config_home
            .clone()
            .or_else(|| env.home.as_ref().map(|h| h.join(".config")))
            .unwrap_or_default()
            .join("git/ignore"),
    };
    let bytes = fs_err::read(&path).ok();
    UserExcludes { path, bytes }
}

/// Where `tree`'s per-worktree config and spex's exclude file live.
pub fn files_of(tree: &Tree) -> (PathBuf, PathBuf) {
    (
        tree.git_dir.join("config.worktree"),
        tree.git_dir.join(EXCLUDE_NAME),
    )
}

/// Whether `value` names spex's exclude file in some git dir of this repository (the main
/// one's, or a linked worktree's, even one that is gone).
fn is_spex_file(value: &str, tree: &Tree) -> bool {
    let p = Path::new(value);
    p.file_name().is_some_and(|n| n == EXCLUDE_NAME)
        && p.parent().is_some_and(|d| {
            d == tree.common_dir || d.parent() == Some(&tree.common_dir.join("worktrees"))
        })
}

/// The text of `tree`'s exclude file: the user's excludes copied as they are, then the files
/// spex generated there.
pub fn exclude_bytes(tree: &Tree, user: &UserExcludes, generated: &[String]) -> Vec<u8> {
    let (config, _) = files_of(tree);
    let mut out = format!(
        "# spex: git reads this file in {} in place of your global excludes file (`core.excludesFile` in `{}`).\n\
         # spex: `spex materialize` rewrites it and `spex clean` removes it; edit your own file, not this one.\n",
        tree.root.display(),
        config.display()
    )
    .into_bytes();
    match &user.bytes {
        Some(b) => {
            out.extend_from_slice(
                format!(
                    "# spex: your excludes, copied from `{}`:\n",
                    user.path.display()
                )
                .as_bytes(),
            );
            out.extend_from_slice(b);
            if !b.is_empty() && !b.ends_with(b"\n") {
                out.push(b'\n');
            }
        }
        None => out.extend_from_slice(
            format!(
                "# spex: your excludes: none (`{}` does not exist)\n",
                user.path.display()
            )
            .as_bytes(),
        ),
    }
    out.extend_from_slice(b"# spex: files spex generated in this checkout:\n");
    for line in generated {
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
    }
    out
}

/// Whether `p` (under `root`) belongs to this checkout rather than to a checkout nested in it
/// (e.g. a worktree under `.claude/worktrees/`).
pub fn in_tree_scope(p: &Path, root: &Path, others: &[PathBuf]) -> bool {
    !others
        .iter()
        .any(|r| r.starts_with(root) && p.starts_with(r))
}

/// The exclude lines (`/path` from the checkout's top) of the files spex will have generated
/// in `tree`.
fn generated_lines(tree: &Tree, others: &[PathBuf], created: &BTreeSet<PathBuf>) -> Vec<String> {
    created
        .iter()
        .filter(|p| p.starts_with(&tree.root) && in_tree_scope(p, &tree.root, others))
        .filter(|p| !p.starts_with(&tree.common_dir) && !p.starts_with(&tree.git_dir))
        .filter_map(|p| p.strip_prefix(&tree.root).ok())
        .map(|rel| format!("/{}", rel.to_string_lossy()))
        .collect()
}

/// Plans every checkout's excludes (see the module comment) and the repository extension
/// they need, and takes spex's old blocks out of the shared `info/exclude`.
pub fn plan(env: &Env, tree: &Tree, ws: &mut Workspace) -> Result<(), MaterializeError> {
    let trees = tree.all_trees();
    let roots: Vec<PathBuf> = trees.iter().map(|t| t.root.clone()).collect();
    let created = ws.owned_files_after();
    migrate_shared(tree, ws)?;
    forget_removed(tree, ws)?;
    let common = tree.common_dir.join("config");
    let shared = ws.read_text(&common)?.unwrap_or_default();
    let ext_ours = ws
        .owned
        .git
        .get(&common)
        .is_some_and(|o| o.value_of("extensions", "worktreeConfig").is_some());
    let ext_value = git_config::last_value(&shared, "extensions", "worktreeConfig");
    // The user turned the extension off: per-worktree config is not read, spex cannot use it.
    let disabled = !ext_ours && ext_value.as_deref().is_some_and(git_config::is_false);
    let mut any = false;
    for t in &trees {
        let others: Vec<PathBuf> = roots.iter().filter(|r| **r != t.root).cloned().collect();
        let lines = generated_lines(t, &others, &created);
        any |= plan_tree(env, tree, t, &lines, disabled, ws)?;
    }
    if ext_value.is_none() || ext_ours {
        ws.git_entry(
            &common,
            "extensions",
            "worktreeConfig",
            any.then_some("true"),
        )?;
    }
    Ok(())
}

/// One checkout: its exclude file and its `core.excludesFile`, or neither when spex generated
/// nothing there (or the key is the user's). Whether spex's key is set there afterwards.
fn plan_tree(
    env: &Env,
    repo: &Tree,
    tree: &Tree,
    lines: &[String],
    disabled: bool,
    ws: &mut Workspace,
) -> Result<bool, MaterializeError> {
    let (config, file) = files_of(tree);
    let own = file.to_string_lossy().into_owned();
    let recorded = ws
        .owned
        .git
        .get(&config)
        .and_then(|o| o.value_of("core", "excludesFile"))
        .map(str::to_owned);
    let text = ws.read_text(&config)?.unwrap_or_default();
    for v in git_config::values(&text, "core", "excludesFile") {
        // Another checkout's setting, copied here by `git worktree add`.
        if v != own && Some(&v) != recorded.as_ref() && is_spex_file(&v, repo) {
            ws.git_copy_removed(&config, "core", "excludesFile", &v)?;
        }
    }
    let text = ws.read_text(&config)?.unwrap_or_default();
    let current = git_config::last_value(&text, "core", "excludesFile");
    let users = current.is_some() && current != recorded;
    if lines.is_empty() || users || disabled {
        if !lines.is_empty() {
            let why = if users {
                format!(
                    "`{}` sets `core.excludesFile` of your own",
                    config.display()
                )
            } else {
                format!(
                    "`extensions.worktreeConfig` is false in `{}`",
                    repo.common_dir.join("config").display()
                )
            };
            ws.warnings.push(format!(
                "{why}, so spex leaves git's excludes in {} alone and the {} file(s) it generated there show in `git status` (add them to your excludes file to hide them)",
                tree.root.display(),
                lines.len()
            ));
        }
        // spex's own line, if it is still there (a value the user put over it stays).
        ws.git_entry(&config, "core", "excludesFile", None)?;
        ws.generated_bytes(&file, None)?;
        return Ok(false);
    }
    let user = user_excludes(env, tree);
    ws.generated_bytes(&file, Some(exclude_bytes(tree, &user, lines)))?;
    ws.git_entry(&config, "core", "excludesFile", Some(&own))?;
    Ok(true)
}

/// Takes every checkout's block (from an older spex) out of the shared `info/exclude`; the
/// user's own lines there stay byte for byte.
fn migrate_shared(tree: &Tree, ws: &mut Workspace) -> Result<(), MaterializeError> {
    let path = tree.exclude_file();
    ws.validate_blocks(&path, block::HASH)?;
    let text = ws.read_text(&path)?.unwrap_or_default();
    let ids = block::ids(&text, block::HASH).map_err(|source| MaterializeError::Block {
        path: path.clone(),
        source,
    })?;
    for id in ids.into_iter().filter(|id| id.starts_with("tree-")) {
        ws.block(&path, block::HASH, &id, None)?;
    }
    Ok(())
}

/// Forgets spex's records in the git dirs of worktrees that are gone (`git worktree remove`
/// deleted spex's files with them).
fn forget_removed(tree: &Tree, ws: &mut Workspace) -> Result<(), MaterializeError> {
    let worktrees = tree.common_dir.join("worktrees");
    let gone = |p: &Path| p.starts_with(&worktrees) && p.parent().is_some_and(|d| !d.is_dir());
    ws.owned.git.retain(|p, _| !gone(p));
    let files: Vec<PathBuf> = ws.owned.files.iter().filter(|p| gone(p)).cloned().collect();
    for p in files {
        ws.generated_bytes(&p, None)?;
        ws.owned.files.remove(&p);
    }
    Ok(())
}

/// What `doctor` says about a checkout's excludes.
#[derive(Debug, PartialEq, Eq)]
pub enum Health {
    /// spex set nothing here (nothing generated, or not materialized).
    Unset,
    /// spex's file is named and carries the user's excludes as they are now.
    Current { file: PathBuf, user: PathBuf },
    /// The user's excludes changed since spex copied them.
    Stale { file: PathBuf, user: PathBuf },
    /// `config.worktree` names an excludes file of the user's own.
    Users { config: PathBuf, value: String },
}

pub fn health(env: &Env, tree: &Tree) -> Health {
    let (config, file) = files_of(tree);
    let text = fs_err::read_to_string(&config).unwrap_or_default();
    let Some(value) = git_config::last_value(&text, "core", "excludesFile") else {
        return Health::Unset;
    };
    if Path::new(&value) != file {
        return Health::Users { config, value };
    }
    let user = user_excludes(env, tree);
    // Everything before the generated lines is the header and the user's copy.
    let copy = exclude_bytes(tree, &user, &[]);
    let held = fs_err::read(&file).unwrap_or_default();
    if held.starts_with(&copy) {
        Health::Current {
            file,
            user: user.path,
        }
    } else {
        Health::Stale {
            file,
            user: user.path,
        }
    }
}
