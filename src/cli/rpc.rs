//! `spex rpc`: the other end of `crate::remote` — another spex runs it here over SSH with one
//! JSON request on stdin and reads the JSON reply from stdout; or, with `-- ARGS`, runs one
//! command of this spex in this process after checking the caller's protocol and features
//! (`docs/reference/remote-protocol.md`, "Commands").

use std::ffi::OsString;
use std::io::Read as _;

use anyhow::Context as _;

use super::outcome::Outcome;
use super::output;
use crate::env::Env;
use crate::remote::protocol;

/// What a command run with `-- ARGS` exits with when this spex does not serve the caller's
/// protocol or a feature it requires (no spex command exits with it): the caller asks `hello`
/// why.
pub const REFUSED: u8 = 97;

/// For other spex machines: answer one protocol request (JSON on stdin, the reply as JSON on
/// stdout), or run one command here (`-- ARGS`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The protocol the caller speaks (with `-- ARGS`).
    #[arg(long, requires = "args")]
    protocol: Option<u32>,
    /// A feature the caller needs this spex to offer (with `-- ARGS`).
    #[arg(long, requires = "args")]
    require: Vec<String>,
    /// The machine's name on the caller's side: sessions in errors and hints read
    /// `NAME:handle`, as the caller types them.
    #[arg(long = "as", value_name = "NAME", requires = "args")]
    addressed_as: Option<String>,
    /// The descriptor that is the caller's stderr: the caller's shell silences stderr until
    /// this spex takes it back, so a spex too old for these flags says nothing there.
    #[arg(long, requires = "args")]
    stderr_fd: Option<i32>,
    /// The command to run (`show k3 --json`).
    #[arg(id = "args", last = true)]
    command: Vec<OsString>,
}

/// What `spex rpc` did: answered, or left a command for the caller (`super::run`) to run as
/// `spex ARGS` would (the caller parses it: this file does not know the command line).
pub enum Ran {
    Done(Outcome),
    Exec(Vec<OsString>),
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Ran> {
    if let Some(protocol) = args.protocol {
        return Ok(exec(args, protocol));
    }
    let mut input = Vec::new();
    std::io::stdin()
        .read_to_end(&mut input)
        .context("cannot read the request from stdin")?;
    output::json(&protocol::serve(env, &input));
    Ok(Ran::Done(Outcome::Ok))
}

/// `-- ARGS`: the command, as `spex ARGS` would run it, in this process.
fn exec(args: &Args, protocol: u32) -> Ran {
    if let Some(fd) = args.stderr_fd {
        take_stderr(fd);
    }
    let refused = args
        .command
        .first()
        .is_none_or(|c| c == "rpc" || c == "dispatch");
    if refused || !protocol::serves(protocol, &args.require) {
        return Ran::Done(Outcome::Relayed(REFUSED));
    }
    if let Some(name) = &args.addressed_as {
        super::report::address_as(name);
    }
    Ran::Exec(
        std::iter::once(OsString::from("spex"))
            .chain(args.command.iter().cloned())
            .collect(),
    )
}

/// Makes `fd` this process's stderr again (and closes `fd`).
#[expect(
    unsafe_code,
    reason = "`dup2` and `close` of descriptors the caller's shell opened for this process"
)]
fn take_stderr(fd: i32) {
    if fd <= 2 {
        return;
    }
    // SAFETY: plain descriptor calls; no Rust object owns `fd` (the shell opened it), and
    // stderr is owned by no object either.
    unsafe {
        if libc::dup2(fd, 2) == 2 {
            libc::close(fd);
        }
    }
}
