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
use crate::store::ProjectStore;

/// The help of every argument that names a session.
pub const ID_HELP: &str = "The session: its handle (the `ID` column of `spex sessions`), its name, its full id, or a unique prefix of a handle or id";

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

/// This project's store and the session an id argument names (handle, id or unique prefix).
pub fn project_and_id(env: &Env, arg: &str) -> anyhow::Result<(ProjectStore, String)> {
    let store = project(env)?;
    let id = store.resolve(arg)?;
    Ok((store, id))
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
    let store = project(env)?;
    let id = store.resolve(arg).map_err(|e| {
        let message = format!("`{arg}` is neither a cassette folder nor a session: {e}");
        anyhow::Error::new(e).context(message)
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
