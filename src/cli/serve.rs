//! `spex serve` (hidden): the supervisor of one project's harness server, started by the
//! session commands; it starts the server, observes it and records what no hook reports.

use std::path::PathBuf;

use anyhow::Context;

use super::outcome::Outcome;
use crate::adapters;
use crate::env::Env;
use crate::runtime::harness_server::Server;
use crate::store::ProjectStore;

/// Run one project's harness server (started by `spex launch`; not for people).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(long)]
    pub harness: String,
    /// The project's main checkout.
    #[arg(long)]
    pub project: PathBuf,
    /// The harness binary.
    #[arg(long)]
    pub binary: PathBuf,
    /// Run as the guard of the server `PID:START` (pid and start time): wait until the
    /// supervisor's pipe on stdin closes, then stop that server if it still runs.
    #[arg(long, value_name = "PID:START")]
    pub guard: Option<String>,
    /// The user's arguments for the harness.
    #[arg(last = true)]
    pub extra: Vec<String>,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let harness = adapters::lookup(&args.harness)
        .with_context(|| format!("unknown harness `{}`", args.harness))?;
    let store = ProjectStore::new(&env.spex_home(), &args.project);
    let server = Server::new(
        env,
        harness,
        &store,
        &args.project,
        args.binary.clone(),
        args.extra.clone(),
    )?
    .with_context(|| format!("`{}` runs no server", args.harness))?;
    if let Some(guard) = &args.guard {
        let (pid, start) = guard
            .split_once(':')
            .and_then(|(p, s)| Some((p.parse().ok()?, s.parse().ok()?)))
            .with_context(|| format!("`--guard {guard}` is not PID:START"))?;
        server.guard(crate::store::session::ProcessId { pid, start });
        return Ok(Outcome::Ok);
    }
    server.supervise(&super::args::spex_binary()?)?;
    Ok(Outcome::Ok)
}
