//! `spex watch`: the watcher in the foreground (see `crate::watch`), logging to stderr.

use super::outcome::Outcome;
use crate::env::Env;

/// Keep every project's event stream complete: fold in what no hook reports, as it happens.
///
/// Harnesses fire no hook on an Esc at their own terminal, a killed process, a model request
/// that failed for good, or a dialog cancelled; the readers (`sessions`, `show`, `wait`) find
/// these out when they run. The watcher finds them out as they happen, for every live session of
/// every project, and puts them in the event stream, so `spex events --follow` (and anything built
/// on it) hears of them within a second with no reader running. It waits on file and process
/// events only: idle, it costs nothing.
///
/// One watcher works per user: a second one waits in standby and takes over when the first ends.
/// Stops on Ctrl-C or SIGTERM. `spex service install` runs it at login; see
/// docs/guides/watcher.md.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    super::notifier::beside(env, "spex watch", None);
    crate::watch::run(env)?;
    Ok(Outcome::Ok)
}
