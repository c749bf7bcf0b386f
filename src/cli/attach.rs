//! `spex attach`: this terminal becomes the session's terminal until the detach key (`Ctrl-\`
//! unless the configuration's `detachKey` names another) detaches.

use super::outcome::Outcome;
use super::terminal::{attach, detach_key, watch};
use crate::env::Env;

/// Attach this terminal to a hosted session; `Ctrl-\` (or the configured `detachKey`) detaches and
/// leaves it running.
///
/// This terminal becomes the session's (several terminals may attach at once) until the detach key
/// or the session's end, however quiet it is. Leaving prints one line (`detached`, `ended` or
/// `disconnected`) below the program's screen and gives the terminal back: cursor shown; bracketed
/// paste, mouse and keypad modes off; alternate screen left; termios restored.
///
/// `--read-only` watches without disturbing: the session's host drops everything this terminal
/// sends (keys, pastes, window sizes), so it can neither type into the session nor resize it;
/// its screen is drawn at the session's size, cropped or padded to this terminal's. Several
/// terminals may watch at once, beside one that types. A recording of the session notes each
/// watcher as a service event (`observer.joined`, `observer.left`), never as input.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(value_name = "ID", help = super::args::ID_HELP, add = super::complete::sessions())]
    pub id: String,
    /// Watch only: nothing typed here reaches the session, and the session keeps its size.
    #[arg(long)]
    pub read_only: bool,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let (store, id) = super::args::project_and_id(env, &args.id)?;
    let record = store
        .load(&id)?
        .ok_or_else(|| crate::store::session::StoreError::NotFound(id.clone()))?;
    if args.read_only {
        // A watcher changes nothing: a session whose terminal is closed is not reopened for it.
        watch(env, &id, detach_key(env, &record.tree))?;
        return Ok(Outcome::Ok);
    }
    // A terminal answers for the session (one on a server gets it back if it was closed).
    crate::runtime::transport::of(env, &store, &record)?.open_terminal(|| {
        super::start::relaunch(env, &record, std::time::Duration::from_mins(1))
    })?;
    attach(env, &id, detach_key(env, &record.tree))?;
    Ok(Outcome::Ok)
}
