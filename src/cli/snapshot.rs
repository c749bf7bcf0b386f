//! `spex snapshot`: what a hosted session's terminal shows now.

use super::outcome::Outcome;
use super::output;
use crate::env::Env;
use crate::runtime;

/// Print the screen of a hosted session (text, or JSON with rows, cursor and title).
///
/// The screen as text, or `{rows, cols, cursor, title, lines}`; with `--scrollback N` also the last
/// N rows that scrolled off it (`scrollback`; the host keeps 1,000).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(value_name = "ID", help = super::args::ID_HELP, add = super::complete::sessions())]
    pub id: String,
    /// Print `{rows, cols, cursor, title, lines}` as JSON (with `scrollback` when asked).
    #[arg(long)]
    pub json: bool,
    /// Also the last N rows that scrolled off the screen, above it (the host keeps 1,000).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub scrollback: usize,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let (store, id) = super::args::project_and_id(env, &args.id)?;
    let snap = runtime::snapshot(env, &store, &id, args.scrollback)?;
    if args.json {
        output::json(&snap);
    } else {
        // What scrolled off first, then the screen, as the terminal would show it scrolled back.
        let text = snap
            .scrollback
            .iter()
            .chain(&snap.lines)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n");
        output::print(&format!("{}\n", text.trim_end()));
    }
    Ok(Outcome::Ok)
}
