//! `spex record`: start or stop recording a hosted session that is already running.

use super::outcome::Outcome;
use super::output;
use crate::env::Env;
use crate::runtime;

/// Record a running hosted session from now on (`--stop` ends the recording).
///
/// The recording goes into a new folder beside the session's earlier recordings (`cassette`,
/// `cassette-2`, ...). A recording started mid-session opens with the current screen and is marked
/// `partial`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(value_name = "ID", help = super::args::ID_HELP, add = super::complete::sessions())]
    pub id: String,
    /// Stop recording and finish the cassette.
    #[arg(long)]
    pub stop: bool,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let (store, id) = super::args::project_and_id(env, &args.id)?;
    let dir = runtime::record(env, &store, &id, args.stop)?;
    let what = if args.stop {
        "stopped recording"
    } else {
        "recording"
    };
    output::print(&format!(
        "{}: {what} ({})\n",
        store.label_of(&id),
        dir.display()
    ));
    Ok(Outcome::Ok)
}
