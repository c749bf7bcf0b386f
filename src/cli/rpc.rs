//! `spex rpc`: the other end of `crate::remote` — another spex runs it here over SSH with one
//! JSON request on stdin and reads the JSON reply from stdout.

use std::io::Read as _;

use anyhow::Context as _;

use super::outcome::Outcome;
use super::output;
use crate::env::Env;

/// For other spex machines: answer one protocol request (JSON on stdin, the reply as JSON on
/// stdout).
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let mut input = Vec::new();
    std::io::stdin()
        .read_to_end(&mut input)
        .context("cannot read the request from stdin")?;
    output::json(&crate::remote::protocol::serve(env, &input));
    Ok(Outcome::Ok)
}
