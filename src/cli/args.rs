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
pub const ID_HELP: &str = "The session: its handle (the `ID` column of `spex sessions`), its name, its full id, or a unique prefix of a handle or id; this project's sessions first, then every project's (`PROJECT/HANDLE` names one of another project; `HOST:HANDLE` or `HOST:PROJECT/HANDLE` one on another machine, see `spex remote`)";

/// A session argument that names a session on another machine: `host:handle` or
/// `host:project/handle`, `host` one of `spex remote list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSession {
    pub remote: crate::remote::Remote,
    /// The session as the spex there names it: `handle` or `project/handle` (its own
    /// resolution applies there).
    pub id: String,
}

/// The `host` and the rest of a `host:rest` argument, when it has that shape (a machine's name,
/// a colon, something after it); no configuration is read.
pub fn split_host(arg: &str) -> Option<(&str, &str)> {
    let (host, rest) = arg.split_once(':')?;
    (crate::config::remotes::valid_name(host) && !rest.is_empty()).then_some((host, rest))
}

/// The machine and session a `host:handle` argument names, when `host` is a configured
/// remote; `None` for every other argument (a local session's handle, name, id or
/// `project/handle`), read without touching the configuration unless the argument has a colon.
pub fn remote_session(env: &Env, arg: &str) -> anyhow::Result<Option<RemoteSession>> {
    let Some((host, rest)) = split_host(arg) else {
        return Ok(None);
    };
    let remotes = crate::remote::remotes(env)?;
    Ok(remotes
        .into_iter()
        .find(|r| r.name == host)
        .map(|remote| RemoteSession {
            remote,
            id: rest.to_owned(),
        }))
}

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
    if let Some(r) = remote_session(env, arg)? {
        anyhow::bail!(Hinted::new(
            format!(
                "`{arg}` names a session on `{}`, and this command acts on this machine's sessions only",
                r.remote.name
            ),
            format!("run it there: `ssh {} spex ... {}`", r.remote.dest, r.id)
        ));
    }
    let here = project(env).ok();
    store::projects::locate(&env.spex_home(), here.as_ref(), arg).map_err(|e| {
        let e = anyhow::Error::new(e);
        match split_host(arg) {
            // `host:handle` with a host no remote is named: say so beside the local miss.
            Some((host, _)) => e.context(Hinted::new(
                format!("no session `{arg}` here, and no remote named `{host}`"),
                "`spex remote list` lists the remotes",
            )),
            None => e,
        }
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_machine_name_and_a_colon_make_a_remote_session_name() {
        assert_eq!(split_host("devbox:k3"), Some(("devbox", "k3")));
        assert_eq!(split_host("devbox:web/k3"), Some(("devbox", "web/k3")));
        for local in ["k3", "web/k3", "devbox:", ":k3", "9box:k3", "a/b:c"] {
            assert_eq!(split_host(local), None, "{local}");
        }
    }

    #[test]
    fn a_configured_host_resolves_and_an_unknown_one_stays_local() {
        let dir = tempfile::tempdir().unwrap();
        let env = Env {
            xdg_config_home: Some(dir.path().to_owned()),
            home: Some(dir.path().to_owned()),
            ..Env::default()
        };
        crate::fsutil::write_atomic(
            &env.user_config_file(),
            br#"{"remotes": {"devbox": {"dest": "me@devbox"}}}"#,
        )
        .unwrap();
        let r = remote_session(&env, "devbox:web/k3").unwrap().unwrap();
        assert_eq!(
            (r.remote.dest.as_str(), r.id.as_str()),
            ("me@devbox", "web/k3")
        );
        assert_eq!(remote_session(&env, "other:k3").unwrap(), None);
        assert_eq!(remote_session(&env, "k3").unwrap(), None);
    }
}
