//! `spex service`: the watcher as a user service (a systemd user unit where systemd's user
//! manager runs, else the command to run at login), and whether a watcher works now.

use super::outcome::Outcome;
use super::output;
use crate::env::Env;
use crate::watch::service;

/// Run the watcher (`spex watch`) as a user service, so the event stream stays complete across
/// logouts and reboots.
///
/// `install` writes a systemd user unit (`~/.config/systemd/user/spex-watch.service`, running
/// this binary's `watch`) and enables and starts it with `systemctl --user`; where systemd's user
/// manager does not run, it prints the command to run at login instead. `uninstall` stops,
/// disables and removes the unit. `status` says whether a watcher works now (and its pid) and
/// whether the unit is installed. A unit file spex did not write is never changed.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
    /// Print the result as JSON.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, clap::Subcommand)]
pub enum Action {
    /// Write, enable and start the user unit (or print the command to run at login).
    Install,
    /// Stop, disable and remove the user unit spex wrote.
    Uninstall,
    /// Whether a watcher works (its pid) and whether the unit is installed.
    Status,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let report = match args.action {
        Action::Install => service::install(env)?,
        Action::Uninstall => service::uninstall(env)?,
        Action::Status => service::status(env)?,
    };
    if args.json {
        output::json(&report.json);
    } else {
        output::print(&report.text);
    }
    Ok(Outcome::Ok)
}
