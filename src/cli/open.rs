//! `spex open`: a session's worktree, or a file in it, in the person's editor, run without a
//! shell. A file outside the worktree is refused.

use std::path::{Path, PathBuf};

use super::outcome::Outcome;
use crate::config::editor;
use crate::env::Env;
use crate::hint::Hinted;

/// Open a session's worktree, or a file in it, in your editor.
///
/// The editor is the `editor` command line of the configuration (`{path}` and `{line}` are
/// filled in; without `{path}` the path goes last), else `$VISUAL`, else `$EDITOR` (a line is
/// passed the way vim, nano, emacs, VS Code, Helix and a few others take it). It runs in the
/// worktree, without a shell, on this terminal, and spex waits for it. FILE is relative to the
/// worktree; after `..` and symlinks are resolved it must still be inside it.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(value_name = "ID", help = super::args::ID_HELP, add = super::complete::sessions())]
    pub id: String,
    /// A file in the session's worktree, optionally with a line: `src/main.rs:42`.
    #[arg(value_name = "FILE[:LINE]")]
    pub file: Option<String>,
}

/// `src/a.rs:12` -> (`src/a.rs`, 12), unless a file is named that whole (`a:12` may be a name).
fn file_and_line(root: &Path, arg: &str) -> (PathBuf, Option<u32>) {
    if let Some((file, line)) = arg.rsplit_once(':')
        && let Ok(n) = line.parse::<u32>()
        && !root.join(arg).exists()
    {
        return (PathBuf::from(file), Some(n));
    }
    (PathBuf::from(arg), None)
}

/// The editor command line: the configuration's `editor`, `$VISUAL`, `$EDITOR`.
fn editor_command(env: &Env, tree: &crate::repo::Tree) -> anyhow::Result<String> {
    let root = crate::config::source_root(&tree.root, &tree.main);
    let cfg = crate::config::load(&env.user_config_file(), &root, &crate::adapters::known())?;
    cfg.editor
        .or_else(|| env.visual.clone())
        .or_else(|| env.editor.clone())
        .ok_or_else(|| {
            Hinted::new(
                "no editor is set",
                "set `editor` in spex.jsonc or your user config (e.g. \"code --goto {path}:{line}\"), or `$VISUAL` / `$EDITOR`",
            )
            .into()
        })
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let (store, id) = super::args::project_and_id(env, &args.id)?;
    let s = store
        .load(&id)?
        .ok_or_else(|| crate::store::session::StoreError::NotFound(id.clone()))?;
    if s.tree_gone() {
        anyhow::bail!(Hinted::new(
            format!(
                "the worktree of session `{}` is gone (`{}`)",
                s.label(),
                s.tree.display()
            ),
            "`spex sessions --all` lists the sessions whose worktree still exists"
        ));
    }
    let tree = crate::repo::Tree::discover(&s.tree)?;
    let (path, line) = match &args.file {
        None => (tree.root.clone(), None),
        Some(arg) => {
            let (file, line) = file_and_line(&tree.root, arg);
            let full = crate::repo::resolved_inside(&tree.root, &tree.root.join(&file))
                .ok_or_else(|| {
                    Hinted::new(
                        format!(
                            "`{arg}` is outside the worktree of session `{}` (`{}`)",
                            s.label(),
                            tree.root.display()
                        ),
                        format!(
                            "name a file inside it, relative to it: `spex open {} src/main.rs:12`",
                            s.label()
                        ),
                    )
                })?;
            (full, line)
        }
    };
    let command = editor_command(env, &tree)?;
    let argv = editor::argv(&command, &path, line)?;
    let status = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(&tree.root)
        .status()
        .map_err(|e| {
            Hinted::new(
                format!("cannot start the editor `{}`", argv[0]),
                "check `editor` in the configuration, or `$VISUAL` / `$EDITOR`",
            )
            .caused_by(e)
        })?;
    if !status.success() {
        anyhow::bail!("the editor `{}` ended with {status}", argv[0]);
    }
    Ok(Outcome::Ok)
}
