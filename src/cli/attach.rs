//! `spex attach`: this terminal becomes the session's terminal until the detach key (`Ctrl-\`
//! unless the configuration's `detachKey` names another) detaches.

use super::outcome::Outcome;
use super::terminal::{attach, detach_key};
use crate::env::Env;

/// Attach this terminal to a hosted session; `Ctrl-\` (or the configured `detachKey`) detaches and
/// leaves it running.
///
/// This terminal becomes the session's (several terminals may attach at once) until the detach key
/// or the session's end, however quiet it is. Leaving prints one line (`detached`, `ended` or
/// `disconnected`) below the program's screen and gives the terminal back: cursor shown; bracketed
/// paste, mouse and keypad modes off; alternate screen left; termios restored.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(value_name = "ID", help = super::args::ID_HELP, add = super::complete::sessions())]
    pub id: String,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let (store, id) = super::args::project_and_id(env, &args.id)?;
    let record = store
        .load(&id)?
        .ok_or_else(|| crate::store::session::StoreError::NotFound(id.clone()))?;
    // A terminal answers for the session (one on a server gets it back if it was closed).
    crate::runtime::transport::of(env, &store, &record)?.open_terminal(|| {
        super::start::relaunch(env, &record, std::time::Duration::from_mins(1))
    })?;
    attach(env, &id, detach_key(env, &record.tree))?;
    Ok(Outcome::Ok)
}
