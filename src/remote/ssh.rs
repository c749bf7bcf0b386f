//! The `ssh` runner: one multiplexed connection per machine (`ControlMaster=auto`, kept warm by
//! `ControlPersist`, its socket in a short private folder), `BatchMode=yes` so ssh never asks
//! a question spex cannot answer, and keepalives and a connect timeout so a machine that stops
//! answering without closing the connection is given up on within 10 s. What ssh reads (the user's config, keys,
//! agent, `known_hosts`) is the user's; spex adds options, never credentials. Facts:
//! `docs/harnesses/facts/remote-and-notify.md`.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::Digest as _;

use super::config::Remote;
use crate::env::Env;

/// How long an idle multiplexed connection stays up after its last use.
pub const CONTROL_PERSIST_SECS: u32 = 300;
/// A keepalive every this many seconds through the connection...
pub const ALIVE_INTERVAL_SECS: u32 = 1;
/// ...and this many unanswered in a row end it (about 4 s after a machine stops answering).
pub const ALIVE_COUNT_MAX: u32 = 3;
/// How long connecting (TCP and the SSH banner) may take. When a shared connection dies under
/// a command, ssh connects anew for it before giving up, so a hung machine costs the keepalive
/// and then this: about 8 s in all, within the 10 s a hung machine must be found in (a test
/// measures it).
pub const CONNECT_TIMEOUT_SECS: u32 = 4;

/// A Unix socket's path holds at most 107 bytes, and ssh binds the master's socket first at
/// the control path plus `.` and 16 random characters before renaming it into place (OpenSSH's
/// `mux.c`), so the control path itself must stay within 107 - 17 bytes.
const CONTROL_PATH_MAX: usize = 107 - 17;

/// `ssh` with spex's options and `remote`'s destination; append the remote command's words
/// (see [`spex_words`]).
pub fn command(env: &Env, remote: &Remote) -> Command {
    let mut cmd = Command::new("ssh");
    if let Some(file) = env.ssh_config() {
        cmd.arg("-F").arg(file);
    }
    for opt in options(env, remote) {
        cmd.arg("-o").arg(opt);
    }
    cmd.arg(&remote.dest);
    cmd
}

/// The `-o` options, in order.
pub fn options(env: &Env, remote: &Remote) -> Vec<String> {
    let mut opts = vec![
        "BatchMode=yes".to_owned(),
        format!("ConnectTimeout={CONNECT_TIMEOUT_SECS}"),
        format!("ServerAliveInterval={ALIVE_INTERVAL_SECS}"),
        format!("ServerAliveCountMax={ALIVE_COUNT_MAX}"),
    ];
    if let Some(path) = control_path(env, remote) {
        opts.push("ControlMaster=auto".to_owned());
        opts.push(format!("ControlPersist={CONTROL_PERSIST_SECS}"));
        opts.push(format!("ControlPath={}", path.display()));
    } else {
        // No private folder to put the socket in: every command opens its own connection,
        // slower but never through a socket another user could reach.
        opts.push("ControlMaster=no".to_owned());
        opts.push("ControlPath=none".to_owned());
    }
    opts
}

/// The command line the remote shell runs: `remote`'s spex and `args`, each quoted (a `~/` at
/// the start of the program's path is left for that shell to expand).
pub fn spex_words(remote: &Remote, args: &[&str]) -> String {
    let program = remote.program();
    let mut line = match program.strip_prefix("~/") {
        Some(rest) => format!("~/{}", crate::seam::edit::shell_quote(rest)),
        None => crate::seam::edit::shell_quote(program),
    };
    for a in args {
        line.push(' ');
        line.push_str(&crate::seam::edit::shell_quote(a));
    }
    line
}

/// The control socket of `remote`'s connection: a hash of this spex's store, the ssh config
/// and the destination as its name (one connection per machine and user, the path short
/// whatever the names), in the first private folder short enough to hold it.
pub fn control_path(env: &Env, remote: &Remote) -> Option<PathBuf> {
    let mut h = sha2::Sha256::new();
    let ssh_config = env.ssh_config().unwrap_or_default();
    for part in [
        env.spex_home().as_os_str().as_encoded_bytes(),
        ssh_config.as_os_str().as_encoded_bytes(),
        remote.dest.as_bytes(),
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    let name = hex::encode(&h.finalize()[..8]);
    control_dirs(env).into_iter().find_map(|dir| {
        let path = dir.join(&name);
        (path.as_os_str().len() <= CONTROL_PATH_MAX && private_dir(&dir)).then_some(path)
    })
}

/// Where the control sockets may go, best first: the user's runtime folder, then a folder of
/// this user's in `/tmp` (the store's own path is often too long for a socket).
fn control_dirs(env: &Env) -> Vec<PathBuf> {
    let uid = rustix::process::getuid().as_raw();
    let mut dirs = Vec::new();
    if let Some(run) = &env.xdg_runtime_dir {
        dirs.push(run.join("spex-ssh"));
    }
    dirs.push(PathBuf::from(format!("/tmp/spex-ssh-{uid}")));
    dirs
}

/// Makes `dir` (born 0700) or checks the one there: a real folder of this user's that no one
/// else may enter. A folder someone else made in `/tmp` is never used.
fn private_dir(dir: &Path) -> bool {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    if crate::fsutil::create_private_dir(dir).is_err() {
        return false;
    }
    fs_err::symlink_metadata(dir).is_ok_and(|m| {
        // No permission bit for the group or others.
        let shared = m.permissions().mode() & 0o077;
        m.is_dir() && m.uid() == rustix::process::getuid().as_raw() && shared == 0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(dest: &str) -> Remote {
        Remote {
            name: "box".into(),
            dest: dest.into(),
            spex: None,
        }
    }

    #[test]
    fn the_control_path_fits_a_socket_whatever_the_store_and_destination() {
        let env = Env {
            spex_home: Some(PathBuf::from(format!(
                "/{}",
                "very-long-folder/".repeat(20)
            ))),
            xdg_runtime_dir: Some(PathBuf::from(format!("/{}", "r".repeat(120)))),
            ..Env::default()
        };
        let path = control_path(&env, &remote(&format!("me@{}.example", "h".repeat(200))))
            .expect("a private folder in /tmp");
        assert!(path.as_os_str().len() <= CONTROL_PATH_MAX, "{path:?}");
        // One socket per destination and per store.
        let other = control_path(&env, &remote("me@other")).unwrap();
        assert_ne!(path, other);
        let mut env2 = env.clone();
        env2.spex_home = Some("/elsewhere".into());
        assert_ne!(control_path(&env2, &remote("me@other")).unwrap(), other);
    }

    #[test]
    fn ssh_runs_in_batch_mode_with_keepalives_and_a_shared_connection() {
        let env = Env {
            spex_home: Some("/s".into()),
            ssh_config: Some("/t/ssh_config".into()),
            ..Env::default()
        };
        let cmd = command(&env, &remote("me@box"));
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(&args[..2], ["-F", "/t/ssh_config"]);
        for want in [
            "BatchMode=yes",
            "ControlMaster=auto",
            "ServerAliveInterval=1",
            "ServerAliveCountMax=3",
        ] {
            assert!(args.iter().any(|a| a == want), "{want} in {args:?}");
        }
        assert_eq!(args.last().unwrap(), "me@box");
    }

    #[test]
    fn the_remote_command_line_quotes_each_word_and_keeps_a_home_path() {
        let mut r = remote("x");
        assert_eq!(spex_words(&r, &["rpc"]), "spex rpc");
        r.spex = Some("~/my bin/spex".into());
        assert_eq!(
            spex_words(&r, &["deliver", "a:b", "it's"]),
            r"~/'my bin/spex' deliver a:b 'it'\''s'"
        );
    }
}
