//! `spex resume`: bring an exited session back with its conversation; never a live one.

use std::time::Duration;

use super::outcome::Outcome;
use crate::env::Env;
use crate::runtime;

/// Resume an exited session (its conversation) under a new terminal host, then attach.
///
/// Claude Code: its conversation under a new host. Gemini CLI: the same, with `--resume <id>`.
/// Codex: the same thread on the server, started if needed. A live session is refused, `--force` or
/// not (one in the person's own terminal is said to run there).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(value_name = "ID", help = super::args::ID_HELP, add = super::complete::sessions())]
    pub id: String,
    /// Do not attach this terminal.
    #[arg(long)]
    pub detach: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    /// No effect, kept so scripts still run: a live session is never resumed (a second
    /// process on its conversation would split it).
    #[arg(long, hide = true)]
    pub force: bool,
    /// How long the harness may take to be ready for a prompt.
    #[arg(long, default_value_t = 60)]
    pub ready_timeout: u64,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let (store, id) = super::args::project_and_id(env, &args.id)?;
    // With the harness's own evidence folded in: a session whose process is gone reads exited.
    let record = crate::reconcile::session(env, &store, &id)?;
    let transport = runtime::transport::of(env, &store, &record)?;
    let launch = super::start::relaunch(env, &record, Duration::from_secs(args.ready_timeout))?;
    let launched = transport.resume(&launch)?;
    super::start::report(&store, args.json, args.detach, &launched, None);
    if !args.detach {
        super::terminal::attach(
            env,
            &launched.id,
            super::terminal::detach_key(env, &launch.tree.root),
        )?;
    }
    Ok(Outcome::Ok)
}
