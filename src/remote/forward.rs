//! A spex command run on another machine as it runs there: the remote spex's arguments, quoted
//! for the remote's shell, over the remote's multiplexed SSH connection; its output and exit
//! code as it gave them. One remote spex process does it all: `spex rpc --protocol N --require
//! exec --as NAME -- ARGS` checks the protocol and feature itself and runs the command in its
//! own process. A remote that refuses (or is too old to know those flags) is refused here by
//! [`super::require`]'s reasons, asked only then. Knows no command; decides no exit code.

use std::ffi::OsString;
use std::process::{Command, Stdio};

use super::protocol::PROTOCOL;
use super::{Remote, RemoteError};
use crate::env::Env;
use crate::seam::edit::shell_quote;

/// The feature a remote's spex offers when it runs a command this way.
const FEATURE: &str = super::protocol::EXEC;

/// What the remote spex exits with when it does not serve the protocol or the feature (see
/// `spex rpc`): no spex command exits with it.
const NO_FEATURE: i32 = 97;
/// What the remote line exits with when the folder to run in is not there.
const NO_FOLDER: i32 = 96;
/// A spex too old for `rpc --protocol` exits with clap's usage code, which a command's own
/// error shares: only then is the remote asked which it was.
const USAGE: i32 = 2;

/// Where the remote command runs and what it is given.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options<'a> {
    /// The folder to run in (`~/...` is under the remote's home); the login folder if `None`.
    pub dir: Option<&'a str>,
    /// A terminal for it (`ssh -t`): this terminal becomes the remote program's.
    pub tty: bool,
    /// This process's standard input goes to it (a prompt read from `-`, a terminal's keys).
    pub stdin: bool,
}

/// A remote command that did not run to its own end.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error(transparent)]
    Remote(#[from] RemoteError),
    #[error("there is no folder `{dir}` on `{name}`")]
    NoFolder { name: String, dir: String },
}

impl crate::hint::Hint for ForwardError {
    fn hint(&self) -> Option<String> {
        match self {
            ForwardError::Remote(e) => e.hint(),
            ForwardError::NoFolder { .. } => {
                Some("pass `--repo PATH`: the checkout's path on that machine".to_owned())
            }
        }
    }
}

/// Runs `spex ARGS` on `remote` with this process's stdout and stderr: what it prints shows
/// here as it comes (a `wait`, an `events --follow`, an attached terminal). Its exit code.
pub fn run(
    env: &Env,
    remote: &Remote,
    args: &[OsString],
    opts: Options<'_>,
) -> Result<i32, ForwardError> {
    let mut cmd = command(env, remote, args, opts);
    if !opts.stdin {
        cmd.stdin(Stdio::null());
    }
    // ssh's own complaint (a refused connection) is kept to be said in the error.
    let status = cmd.status().map_err(RemoteError::NoSsh)?;
    ended(env, remote, status.code(), b"", opts)
}

/// Runs `spex ARGS` on `remote` and returns its exit code and what it printed on stdout; what
/// it printed on stderr is said here after it ended.
pub fn output(
    env: &Env,
    remote: &Remote,
    args: &[OsString],
) -> Result<(i32, Vec<u8>), ForwardError> {
    let out = command(env, remote, args, Options::default())
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(RemoteError::NoSsh)?;
    let code = ended(
        env,
        remote,
        out.status.code(),
        &out.stderr,
        Options::default(),
    )?;
    if !out.stderr.is_empty() {
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
    }
    Ok((code, out.stdout))
}

/// The remote command's exit code, or why it did not run.
fn ended(
    env: &Env,
    remote: &Remote,
    code: Option<i32>,
    stderr: &[u8],
    opts: Options<'_>,
) -> Result<i32, ForwardError> {
    match code {
        // ssh's own failures (no connection, authentication refused, connection lost).
        Some(255) | None => Err(RemoteError::Unreachable {
            name: remote.name.clone(),
            dest: remote.dest.clone(),
            message: tail(stderr),
        }
        .into()),
        // The remote spex refused, or none ran there: `require` says why (no spex, an older
        // one, another protocol).
        Some(NO_FEATURE | 126 | 127) => match super::require(env, remote, FEATURE) {
            Err(e) => Err(e.into()),
            Ok(hello) => Err(RemoteError::Failed {
                name: remote.name.clone(),
                message: format!(
                    "its spex (version {}) offers `{FEATURE}` but refused to run the command",
                    hello.spex
                ),
                hint: None,
            }
            .into()),
        },
        // A command's own error, or a spex too old to know `rpc --protocol` (its complaint went
        // to the silenced stderr): only a refusal that proves the second is one.
        Some(USAGE) => match super::require(env, remote, FEATURE) {
            Err(
                e @ (RemoteError::Unsupported { .. }
                | RemoteError::NoProtocol { .. }
                | RemoteError::Incompatible { .. }
                | RemoteError::NoSpex { .. }),
            ) => Err(e.into()),
            _ => Ok(USAGE),
        },
        Some(NO_FOLDER) => Err(ForwardError::NoFolder {
            name: remote.name.clone(),
            dir: opts.dir.unwrap_or_default().to_owned(),
        }),
        Some(code) => Ok(code),
    }
}

fn tail(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let last = text.lines().map(str::trim).rfind(|l| !l.is_empty());
    last.unwrap_or("the connection failed (ssh's message is above)")
        .to_owned()
}

/// `ssh [-t] DEST LINE`: the remote shell gets one line, each word quoted, so it splits and
/// expands nothing of the arguments.
fn command(env: &Env, remote: &Remote, args: &[OsString], opts: Options<'_>) -> Command {
    let mut cmd = super::ssh::command(env, remote);
    if opts.tty {
        // Options after the destination are read until the command's first word. No escape
        // character (`~.` typed into the session is the session's), and no "connection
        // closed" line under the program's screen when it ends.
        cmd.args(["-t", "-e", "none", "-o", "LogLevel=ERROR"]);
    }
    cmd.arg(line(remote, args, opts.dir));
    cmd
}

/// The remote shell's line: the folder to run in, then the remote spex in place of the shell
/// (its exit code and signals are the command's), told the protocol, the feature and the name
/// this machine gives it. Its stderr is silenced until it takes it back from descriptor 3, so
/// a spex too old for these flags prints no usage error there.
fn line(remote: &Remote, args: &[OsString], dir: Option<&str>) -> String {
    let mut out = String::new();
    if let Some(dir) = dir {
        // `~/` stays unquoted for the remote shell to make it the remote's home.
        let dir = match dir.strip_prefix("~/") {
            Some(rest) => format!("~/{}", shell_quote(rest)),
            None => shell_quote(dir),
        };
        out.push_str(&format!("cd -- {dir} 2>/dev/null || exit {NO_FOLDER}; "));
    }
    let protocol = PROTOCOL.to_string();
    let head = [
        "rpc",
        "--protocol",
        &protocol,
        "--require",
        FEATURE,
        "--as",
        &remote.name,
        "--stderr-fd",
        "3",
        "--",
    ];
    out.push_str("exec ");
    out.push_str(&super::ssh::spex_words(remote, &head));
    for a in args {
        out.push(' ');
        out.push_str(&shell_quote(&a.to_string_lossy()));
    }
    out.push_str(" 3>&2 2>/dev/null");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    fn remote(spex: Option<&str>) -> Remote {
        Remote {
            name: "dev".into(),
            dest: "me@dev".into(),
            spex: spex.map(str::to_owned),
        }
    }

    /// What `sh` runs of `line`, with `spex` a function that checks it is run as `rpc ...
    /// --require F ... -- ARGS` with `F` among `features` (else exits as a refusing spex does),
    /// then prints ARGS separated by `|`, and says on the descriptor it is told to take back as
    /// stderr that it did.
    fn sh(line: &str, features: &str) -> (Option<i32>, String) {
        let stub = format!(
            "spex() {{ [ \"$1\" = rpc ] || exit 2; while [ \"$1\" != -- ]; do [ \"$1\" = --require ] && case '{features}' in *\"$2\"*) ;; *) exit 97 ;; esac; shift; done; shift; echo stderr >&3; printf '%s|' \"$@\"; }}; "
        );
        // `exec` of a function is not possible: the stub runs it as a command.
        let line = line.replacen("exec ", "", 1);
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("{stub}{line}"))
            .current_dir("/")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    #[test]
    fn every_argument_reaches_the_remote_spex_as_one_word() {
        let text = "it's $HOME; `rm` * \"q\"\nnext";
        let l = line(&remote(None), &args(&["deliver", "a3", text]), None);
        let (code, out) = sh(&l, "hello exec");
        assert_eq!(code, Some(0), "{l}");
        assert_eq!(out, format!("deliver|a3|{text}|"));
    }

    #[test]
    fn a_remote_whose_hello_lacks_the_feature_runs_nothing() {
        let l = line(&remote(None), &args(&["stop", "a3"]), None);
        let (code, out) = sh(&l, "hello");
        assert_eq!((code, out.as_str()), (Some(NO_FEATURE), ""));
    }

    #[test]
    fn a_folder_under_the_remote_home_keeps_its_tilde_unquoted() {
        let l = line(
            &remote(Some("/opt/spex")),
            &args(&["launch"]),
            Some("~/src/my app"),
        );
        assert!(
            l.starts_with("cd -- ~/'src/my app' 2>/dev/null || exit 96; exec /opt/spex rpc "),
            "{l}"
        );
        assert!(
            l.ends_with(" --as dev --stderr-fd 3 -- launch 3>&2 2>/dev/null"),
            "{l}"
        );
        let (code, _) = sh(
            &line(&remote(None), &args(&["launch"]), Some("/nowhere/x")),
            "exec",
        );
        assert_eq!(code, Some(NO_FOLDER));
    }
}
