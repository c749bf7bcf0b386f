//! The protocol between two spex: one JSON request on the remote spex's stdin (`spex rpc`),
//! one JSON reply on its stdout, both carrying the protocol version. The version changes only
//! when a method's shape changes; a new method is a feature, listed by `hello`, so an older
//! remote refuses it by name (`unknown_method`) and a newer one answers in the version asked
//! for while it still speaks it.
//!
//! Request: `{"protocol": 1, "method": "hello", "params": {...}}`. Methods: `hello` (no
//! params; `{protocol, min_protocol, spex, features}`), `run` (`{"args": [...], "stdin"?,
//! "cwd"?}`: one command of the spex there, e.g. `["sessions", "--json"]`; `{exit, stdout,
//! stderr}`, its output as text, so a command's own `--json` is what travels).
//! Reply: `{"protocol": 1, "min_protocol": 1, "spex": "0.1.0", "result": ...}` or, in place of
//! `result`, `"error": {"kind": "unknown_method" | "protocol" | "bad_request" | "failed",
//! "message": "...", "hint": "..."?}`.

use std::process::Output;

use serde_json::{Value, json};

use super::config::Remote;
use super::error::RemoteError;
use crate::env::Env;

/// The protocol this spex speaks (the newest)...
pub const PROTOCOL: u32 = 1;
/// ...and the oldest it still answers in.
pub const MIN_PROTOCOL: u32 = 1;

/// The feature of a spex that runs commands for another (`show`, `deliver`, ... on
/// `host:handle`) with the same output, exit codes and `--json` as there, streamed over the
/// SSH session itself (`super::forward`).
pub const COMMANDS: &str = "commands";

/// The feature of a spex that runs one command in its own process after checking the caller's
/// protocol and features itself (`spex rpc --protocol N --require F --as HOST -- ARGS`): a
/// command on `host:handle` costs one remote spex, not a `hello` and then the command
/// (`super::forward`).
pub const EXEC: &str = "exec";

/// What this spex offers another, each a feature `hello` lists: the methods it answers,
/// [`COMMANDS`] and [`EXEC`].
/// `events.follow` is no method either: its `spex events --follow --json --all-projects --since
/// CURSOR`, which the federated stream's follower runs over ssh (`super::follow`).
pub const FEATURES: &[&str] = &["hello", "run", COMMANDS, "events.follow", EXEC];

/// What `hello` answers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Hello {
    /// The newest protocol the remote speaks.
    pub protocol: u32,
    /// The oldest it still answers in.
    #[serde(default)]
    pub min_protocol: Option<u32>,
    /// Its spex version.
    pub spex: String,
    /// The methods it answers.
    pub features: Vec<String>,
}

/// Whether this spex answers a caller speaking `protocol` that needs `features`: what `spex rpc
/// --protocol N --require F` checks before it runs the command.
pub fn serves(protocol: u32, features: &[String]) -> bool {
    (MIN_PROTOCOL..=PROTOCOL).contains(&protocol)
        && features.iter().all(|f| FEATURES.contains(&f.as_str()))
}

/// The protocols this spex speaks, in words: `1` or `1 to 3`.
pub fn range_words() -> String {
    if MIN_PROTOCOL == PROTOCOL {
        PROTOCOL.to_string()
    } else {
        format!("{MIN_PROTOCOL} to {PROTOCOL}")
    }
}

/// This spex's `hello`.
pub fn hello() -> Hello {
    Hello {
        protocol: PROTOCOL,
        min_protocol: Some(MIN_PROTOCOL),
        spex: env!("CARGO_PKG_VERSION").to_owned(),
        features: FEATURES.iter().map(|&f| f.to_owned()).collect(),
    }
}

fn error(kind: &str, message: impl Into<String>, hint: Option<String>) -> Value {
    let mut e = json!({"kind": kind, "message": message.into()});
    if let Some(h) = hint {
        e["hint"] = Value::from(h);
    }
    e
}

/// The server's side (`spex rpc`): the reply to the request in `input`.
pub fn serve(env: &Env, input: &[u8]) -> Value {
    let mut reply = json!({
        "protocol": PROTOCOL,
        "min_protocol": MIN_PROTOCOL,
        "spex": env!("CARGO_PKG_VERSION"),
    });
    match answer(env, input) {
        Ok((protocol, result)) => {
            reply["protocol"] = Value::from(protocol);
            reply["result"] = result;
        }
        Err(e) => reply["error"] = e,
    }
    reply
}

/// The protocol the request asked for and the method's result, or the error to reply.
fn answer(env: &Env, input: &[u8]) -> Result<(u32, Value), Value> {
    let request: Value = serde_json::from_slice(input)
        .map_err(|e| error("bad_request", format!("the request is not JSON: {e}"), None))?;
    let protocol = request
        .get("protocol")
        .and_then(Value::as_u64)
        .and_then(|p| u32::try_from(p).ok())
        .ok_or_else(|| error("bad_request", "the request names no `protocol`", None))?;
    if !(MIN_PROTOCOL..=PROTOCOL).contains(&protocol) {
        return Err(error(
            "protocol",
            format!(
                "this spex speaks protocol {}, not {protocol}",
                range_words()
            ),
            None,
        ));
    }
    let method = request
        .get("method")
        .and_then(Value::as_str)
        .ok_or_else(|| error("bad_request", "the request names no `method`", None))?;
    let params = request.get("params").cloned().unwrap_or(Value::Null);
    let result = handle(env, method, &params)?;
    Ok((protocol, result))
}

/// One method's answer. Every method here is listed in [`FEATURES`].
pub fn handle(_env: &Env, method: &str, params: &Value) -> Result<Value, Value> {
    match method {
        "hello" => Ok(serde_json::to_value(hello()).expect("hello serializes")),
        "run" => run(params),
        other => Err(error(
            "unknown_method",
            format!("this spex does not offer `{other}`"),
            None,
        )),
    }
}

/// `run`: one command of this spex, as its own process (its exit code and output are what
/// the caller gets; a command that prints as it goes, such as `--follow`, is not for `run`).
fn run(params: &Value) -> Result<Value, Value> {
    let hint = Some("e.g. {\"args\": [\"sessions\", \"--json\"]}".to_owned());
    let args: Vec<String> = params
        .get("args")
        .and_then(|a| serde_json::from_value(a.clone()).ok())
        .filter(|a: &Vec<String>| a.first().is_some_and(|c| c != "rpc" && c != "dispatch"))
        .ok_or_else(|| {
            error(
                "bad_request",
                "`run` needs `args`: a spex subcommand (not `rpc` or `dispatch`) and its arguments",
                hint,
            )
        })?;
    let failed = |what: &str, e: &std::io::Error| {
        error("failed", format!("cannot {what} this spex: {e}"), None)
    };
    let exe = std::env::current_exe().map_err(|e| failed("find", &e))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(&args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if let Some(cwd) = params.get("cwd").and_then(Value::as_str) {
        cmd.current_dir(cwd);
    }
    let mut child = cmd.spawn().map_err(|e| failed("run", &e))?;
    let stdin = params
        .get("stdin")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let mut pipe = child.stdin.take();
    // Written from its own thread: a command that prints much before it reads would otherwise
    // wait on a full stdout pipe while this waits on its stdin.
    let writer = std::thread::spawn(move || {
        if let Some(p) = pipe.as_mut() {
            let _ = std::io::Write::write_all(p, stdin.as_bytes());
        }
    });
    let out = child.wait_with_output().map_err(|e| failed("run", &e))?;
    let _ = writer.join();
    Ok(json!({
        "exit": out.status.code(),
        "stdout": String::from_utf8_lossy(&out.stdout),
        "stderr": String::from_utf8_lossy(&out.stderr),
    }))
}

/// The last few lines of what a program wrote to stderr, as one line.
fn stderr_tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" / ");
    if tail.is_empty() {
        "no message".to_owned()
    } else {
        tail
    }
}

/// The client's side: what one `ssh ... spex rpc` run of `method` on `remote` came back with.
pub fn read_reply(remote: &Remote, method: &str, out: &Output) -> Result<Value, RemoteError> {
    let name = remote.name.clone();
    let code = out.status.code();
    // ssh's own failures (cannot connect, authentication refused, connection lost) exit 255.
    if code == Some(255) || (code.is_none() && out.stdout.is_empty()) {
        return Err(RemoteError::Unreachable {
            name,
            dest: remote.dest.clone(),
            message: stderr_tail(&out.stderr),
        });
    }
    if code == Some(127) || code == Some(126) {
        return Err(RemoteError::NoSpex {
            name,
            program: remote.program().to_owned(),
        });
    }
    let reply: Value = match serde_json::from_slice(&out.stdout) {
        Ok(v) => v,
        Err(_) if !out.status.success() => {
            let message = stderr_tail(&out.stderr);
            // An older spex without `rpc`: clap refuses the subcommand.
            return Err(if message.contains("unrecognized subcommand") {
                RemoteError::NoProtocol { name, message }
            } else {
                RemoteError::Failed {
                    name,
                    message: format!("`{}` failed: {message}", remote.program()),
                    hint: None,
                }
            });
        }
        Err(e) => {
            return Err(RemoteError::Garbled {
                name,
                message: format!("`{method}`: {e}"),
            });
        }
    };
    envelope(remote, method, &reply)
}

fn envelope(remote: &Remote, method: &str, reply: &Value) -> Result<Value, RemoteError> {
    let name = remote.name.clone();
    let version = reply
        .get("spex")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_owned();
    let protocol = reply
        .get("protocol")
        .and_then(Value::as_u64)
        .and_then(|p| u32::try_from(p).ok())
        .ok_or_else(|| RemoteError::Garbled {
            name: name.clone(),
            message: format!("`{method}`: the reply names no `protocol`"),
        })?;
    let incompatible = || RemoteError::Incompatible {
        name: name.clone(),
        version: version.clone(),
        protocol,
        ours: range_words(),
        older: protocol < PROTOCOL,
    };
    if let Some(e) = reply.get("error") {
        let message = e
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("no message")
            .to_owned();
        return Err(match e.get("kind").and_then(Value::as_str) {
            Some("protocol") => incompatible(),
            Some("unknown_method") => RemoteError::Unsupported {
                name,
                feature: method.to_owned(),
                version,
                protocol,
            },
            _ => RemoteError::Failed {
                name,
                message,
                hint: e.get("hint").and_then(Value::as_str).map(str::to_owned),
            },
        });
    }
    // A remote that answered in a protocol this spex does not speak (one too old to check
    // the request's version) is refused before its result is read.
    if !(MIN_PROTOCOL..=PROTOCOL).contains(&protocol) {
        return Err(incompatible());
    }
    reply
        .get("result")
        .cloned()
        .ok_or_else(|| RemoteError::Garbled {
            name,
            message: format!("`{method}`: the reply has neither `result` nor `error`"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(request: &Value) -> Value {
        serve(&Env::default(), request.to_string().as_bytes())
    }

    fn remote() -> Remote {
        Remote {
            name: "old".into(),
            dest: "x".into(),
            spex: None,
        }
    }

    #[test]
    fn hello_names_the_protocol_the_version_and_the_features() {
        let r = ask(&json!({"protocol": PROTOCOL, "method": "hello"}));
        let v = envelope(&remote(), "hello", &r).unwrap();
        let h: Hello = serde_json::from_value(v).unwrap();
        assert_eq!(h, hello());
        assert!(h.features.contains(&"hello".to_owned()));
    }

    #[test]
    fn an_unknown_method_is_refused_by_name_with_the_remote_version() {
        let r = ask(&json!({"protocol": PROTOCOL, "method": "teleport"}));
        let e = envelope(&remote(), "teleport", &r).unwrap_err();
        let RemoteError::Unsupported {
            feature, version, ..
        } = &e
        else {
            panic!("{e:?}")
        };
        assert_eq!(
            (feature.as_str(), version.as_str()),
            ("teleport", env!("CARGO_PKG_VERSION"))
        );
        assert!(e.to_string().contains("does not offer `teleport`"), "{e}");
    }

    #[test]
    fn a_protocol_this_spex_does_not_speak_is_refused_both_ways() {
        let r = ask(&json!({"protocol": PROTOCOL + 1, "method": "hello"}));
        assert_eq!(r["error"]["kind"], "protocol");
        // A remote answering in an older protocol than this spex speaks.
        let old = json!({"protocol": 0, "spex": "0.0.1", "result": {}});
        let e = envelope(&remote(), "hello", &old).unwrap_err();
        assert!(
            matches!(e, RemoteError::Incompatible { protocol: 0, .. }),
            "{e:?}"
        );
        assert!(e.to_string().contains("version 0.0.1"), "{e}");
    }

    #[test]
    fn a_request_that_is_not_json_gets_an_error_not_a_crash() {
        let r = serve(&Env::default(), b"{nope");
        assert_eq!(r["error"]["kind"], "bad_request");
        assert_eq!(r["protocol"], PROTOCOL);
    }
}
