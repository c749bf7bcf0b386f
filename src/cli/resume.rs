//! `spex resume`: bring an exited session back with its conversation; never a live one.

use std::time::Duration;

use super::Outcome;
use super::materialize::current_tree;
use crate::env::Env;
use crate::runtime;

/// Resume an exited session (its conversation) under a new terminal host, then attach.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id or a unique prefix of it.
    pub id: String,
    /// Do not attach this terminal.
    #[arg(long)]
    pub detach: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    /// Retired: it resumed a live session, which split its conversation between two
    /// processes.
    #[arg(long, hide = true)]
    pub force: bool,
    /// How long the harness may take to be ready for a prompt.
    #[arg(long, default_value_t = 60)]
    pub ready_timeout: u64,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let (store, id) = super::sessions::project_and_id(env, &args.id)?;
    if args.force {
        anyhow::bail!(
            "`--force` is retired: it resumed a session that was still running, which put a second process on its conversation\nhint: drop `--force`; end the session first (`spex stop {id}`, or in its own terminal), then resume it"
        );
    }
    // With the harness's own evidence folded in: a session whose process is gone reads exited.
    let record = crate::reconcile::session(env, &store, &id)?;
    if let Some(server) = super::launch::server_of(env, &store, &record, true)? {
        let launched = server.resume(&super::spex_binary()?, &id, false)?;
        super::launch::report(args.json, args.detach, &launched, None);
        if !args.detach {
            server.attach(&id)?;
        }
        return Ok(Outcome::Ok);
    }
    let tree = crate::repo::Tree::discover(&record.tree).or_else(|_| current_tree())?;
    let launch = super::launch::resolve(
        env,
        &tree,
        Some(&record.harness),
        Duration::from_secs(args.ready_timeout),
        false,
    )?;
    let launched = runtime::resume(&launch, &store, &id)?;
    super::launch::report(args.json, args.detach, &launched, None);
    if !args.detach {
        super::attach::attach(
            env,
            &launched.id,
            super::attach::detach_key(env, &tree.root),
        )?;
    }
    Ok(Outcome::Ok)
}
