//! Other machines over SSH: the remotes the user named (`remotes` in the user's config file),
//! the `ssh` runner (`ssh`), and the versioned JSON protocol the local spex speaks with the
//! spex there (`protocol`, served by `spex rpc` on the other machine). It owns no network code:
//! every byte to another machine travels through the user's own `ssh`, which authenticates
//! with the user's keys, agent and `known_hosts`; spex stores no key and no password.
//!
//! The interface the rest of spex uses:
//! - [`Remote`] and [`remotes`]`(env)`: the configured machines, sorted by name; [`find`]
//!   `(env, name)` one of them, or an error naming the known ones.
//! - [`ssh::command`]`(env, &remote)`: a `std::process::Command` for `ssh` with spex's options
//!   (`BatchMode`, the multiplexed connection, keepalives) and the destination; append the
//!   remote command's words (quoted for the remote shell: [`ssh::spex_words`] quotes a spex
//!   command line), or an option such as `-t` first (ssh reads options after the destination
//!   until the first word of the command).
//! - [`call`]`(env, &remote, request)`: one protocol call (`{"method": "...", "params": ...}`),
//!   its `result` back as JSON; a remote error, an older or newer remote that lacks the method,
//!   a missing spex or an unreachable host come back as a [`RemoteError`] with a hint.
//! - [`run`]`(env, &remote, args, stdin)`: one command of the spex there (`["show", "k3",
//!   "--json"]`) through the protocol's `run`; its exit code, stdout and stderr back ([`Ran`]),
//!   so a command's own `--json` is what travels, never its human output.
//! - [`require`]`(env, &remote, feature)`: the remote's `hello` when it offers `feature`, else
//!   the refusal naming the feature and the remote's version (for a caller that does not go
//!   through [`call`], e.g. a terminal over `ssh -t`).
//!
//! A new method: add its name to [`protocol::FEATURES`] and its handler to
//! [`protocol::handle`]; an older remote then refuses it by name, never by a crash.

pub mod config;
pub mod error;
pub mod follow;
pub mod forward;
pub mod protocol;
pub mod ssh;

use std::io::Write as _;
use std::process::Stdio;

use serde_json::Value;

use crate::env::Env;

pub use config::{Remote, find, remotes};
pub use error::RemoteError;
pub use protocol::{Hello, PROTOCOL};

/// One protocol call: `request` (`{"method": ..., "params": ...}`, the protocol version added
/// when absent) to the spex on `remote`, over one `ssh` run; its `result` back.
pub fn call(env: &Env, remote: &Remote, request: &Value) -> Result<Value, RemoteError> {
    let mut request = request.clone();
    if let Some(obj) = request.as_object_mut() {
        obj.entry("protocol").or_insert(Value::from(PROTOCOL));
    }
    let method = request
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let mut cmd = ssh::command(env, remote);
    cmd.arg(ssh::spex_words(remote, &["rpc"]))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(RemoteError::NoSsh)?;
    if let Some(mut stdin) = child.stdin.take() {
        // A remote that exits before reading (no spex there) closes the pipe: its exit status
        // says why, below.
        let _ = stdin.write_all(&serde_json::to_vec(&request).expect("JSON serializes"));
    }
    let out = child.wait_with_output().map_err(RemoteError::NoSsh)?;
    protocol::read_reply(remote, &method, &out)
}

/// The `hello` of `remote` when it offers `feature`; else the refusal naming the feature and
/// the remote's version.
#[allow(
    dead_code,
    reason = "the interface for the remote session commands, which check a feature before a terminal over `ssh -t`"
)]
pub fn require(env: &Env, remote: &Remote, feature: &str) -> Result<Hello, RemoteError> {
    let hello = hello(env, remote)?;
    if hello.features.iter().any(|f| f == feature) {
        Ok(hello)
    } else {
        Err(RemoteError::Unsupported {
            name: remote.name.clone(),
            feature: feature.to_owned(),
            version: hello.spex,
            protocol: hello.protocol,
        })
    }
}

/// The remote's `hello`: its protocol, spex version and features.
pub fn hello(env: &Env, remote: &Remote) -> Result<Hello, RemoteError> {
    let v = call(env, remote, &serde_json::json!({"method": "hello"}))?;
    serde_json::from_value(v).map_err(|e| RemoteError::Garbled {
        name: remote.name.clone(),
        message: format!("`hello`: {e}"),
    })
}

/// What a command of the remote spex did (`run`): its exit code (`None`: killed by a signal)
/// and its output.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct Ran {
    pub exit: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs one command of the spex on `remote` (`args`, e.g. `["sessions", "--json"]`, with
/// `stdin` as its input) through the protocol's `run`; its exit code and output back.
#[allow(
    dead_code,
    reason = "the interface for the remote session commands; `remote list` reads live sessions through it"
)]
pub fn run(
    env: &Env,
    remote: &Remote,
    args: &[&str],
    stdin: Option<&str>,
) -> Result<Ran, RemoteError> {
    let mut params = serde_json::json!({"args": args});
    if let Some(text) = stdin {
        params["stdin"] = Value::from(text);
    }
    let v = call(
        env,
        remote,
        &serde_json::json!({"method": "run", "params": params}),
    )?;
    serde_json::from_value(v).map_err(|e| RemoteError::Garbled {
        name: remote.name.clone(),
        message: format!("`run`: {e}"),
    })
}
