//! `spex attach`: this terminal becomes the session's terminal until the detach key (`Ctrl-\`
//! unless the configuration's `detachKey` names another) detaches.

use super::outcome::Outcome;
use super::terminal::{attach, detach_key};
use crate::env::Env;
use crate::runtime::protocol::Request;

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
    // A session on a server gets its terminal back under a host if it was closed.
    if let Some(server) = super::start::server_of(env, &store, &record, true)? {
        let l = super::start::relaunch(env, &record, std::time::Duration::from_mins(1))?;
        server.host(&l, &id)?;
    } else {
        crate::runtime::reach_if_alive(env, &store, &id)?;
        // A host that does not answer is explained: the session ended, or runs in a terminal
        // of its own, or its host died.
        crate::runtime::explained(
            env,
            &store,
            &id,
            crate::runtime::Act::Attach,
            crate::runtime::call(env, &id, Request::Ping),
        )?;
    }
    attach(env, &id, detach_key(env, &record.tree))?;
    Ok(Outcome::Ok)
}
