//! `spex snapshot`: what a hosted session's terminal shows now.

use super::Outcome;
use super::output;
use crate::env::Env;
use crate::runtime;

/// Print the screen of a hosted session (text, or JSON with rows, cursor and title).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(value_name = "ID", help = super::ID_HELP, add = super::complete::sessions())]
    pub id: String,
    /// Print `{rows, cols, cursor, title, lines}` as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let (store, id) = super::sessions::project_and_id(env, &args.id)?;
    let snap = runtime::snapshot(env, &store, &id)?;
    if args.json {
        output::json(&snap);
    } else {
        let text = snap.lines.join("\n");
        output::print(&format!("{}\n", text.trim_end()));
    }
    Ok(Outcome::Ok)
}
