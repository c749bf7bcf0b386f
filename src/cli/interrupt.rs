//! `spex interrupt`: stop the running turn of a hosted session, keeping the session.

use std::time::Duration;

use super::outcome::Outcome;
use super::output;
use crate::env::Env;
use crate::runtime;

/// Interrupt a hosted session's running turn (the harness's own interrupt key, e.g. Esc).
///
/// Claude Code and Gemini CLI: their interrupt key, Esc. Codex: `turn/interrupt` on its server.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(value_name = "ID", help = super::args::ID_HELP, add = super::complete::sessions())]
    pub id: String,
    /// Seconds to wait for the turn to end.
    #[arg(long, default_value_t = 10)]
    pub timeout: u64,
    /// Print the record afterwards as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let (store, id) = super::args::project_and_id(env, &args.id)?;
    let record = store
        .load(&id)?
        .ok_or_else(|| crate::store::session::StoreError::NotFound(id.clone()))?;
    runtime::checked::refuse_if_off(env, &record, "interrupt", "`spex interrupt`")?;
    let timeout = Duration::from_secs(args.timeout);
    let s = runtime::transport::of(env, &store, &record)?.interrupt(timeout)?;
    if args.json {
        output::json(&s);
    } else {
        output::print(&format!("{}: {}\n", store.label_of(&id), s.status.as_str()));
    }
    Ok(Outcome::Ok)
}
