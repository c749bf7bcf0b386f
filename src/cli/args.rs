//! What the subcommands resolve their arguments with: the checkout and project they run in,
//! the session an argument names, text read from stdin, a cassette, and this binary's path.
//! Shared by the subcommands; imports none of them.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::env::Env;
use crate::hint::Hinted;
use crate::repo::Tree;
use crate::runtime;
use crate::store::{self, ProjectStore};

/// The help of every argument that names a session.
pub const ID_HELP: &str = "The session: its handle (the `ID` column of `spex sessions`), its name, its full id, or a unique prefix of a handle or id; this project's sessions first, then every project's (`PROJECT/HANDLE` names one of another project)";

/// The running spex binary, as hook commands should call it.
pub fn spex_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    Ok(fs_err::canonicalize(&exe).unwrap_or(exe))
}

/// The checkout the current folder is in.
pub fn current_tree() -> anyhow::Result<Tree> {
    let cwd = std::env::current_dir().context("cannot read the current folder")?;
    Ok(Tree::discover(&cwd)?)
}

/// This project's store.
pub fn project(env: &Env) -> anyhow::Result<ProjectStore> {
    let tree = current_tree()?;
    Ok(ProjectStore::new(&env.spex_home(), &tree.main))
}

/// The session an id argument names (handle, name, id or unique prefix, or `project/handle`)
/// and its project's store, found from anywhere: this checkout's project first, when the
/// command runs in one, then every project of the store (see `store::locate`).
pub fn project_and_id(env: &Env, arg: &str) -> anyhow::Result<(ProjectStore, String)> {
    let here = project(env).ok();
    Ok(store::projects::locate(
        &env.spex_home(),
        here.as_ref(),
        arg,
    )?)
}

/// The prompt argument, with `-` read from stdin.
pub fn text_arg(arg: &str) -> anyhow::Result<String> {
    if arg != "-" {
        return Ok(arg.to_owned());
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .context("cannot read the prompt from stdin")?;
    Ok(text)
}

/// A cassette folder given directly, else the recording of the session the argument names.
pub fn cassette_dir(arg: &str, env: &Env) -> anyhow::Result<PathBuf> {
    let path = Path::new(arg);
    if path.join("manifest.json").is_file() {
        return Ok(path.to_owned());
    }
    let (store, id) = project_and_id(env, arg).map_err(|e| {
        let message = format!("`{arg}` is neither a cassette folder nor a session: {e}");
        e.context(message)
    })?;
    let dir = runtime::cassette_dir(&store, &id);
    if !dir.is_dir() {
        anyhow::bail!(Hinted::new(
            format!("session `{id}` was not recorded"),
            "`spex launch --record` records a session"
        ));
    }
    Ok(dir)
}
