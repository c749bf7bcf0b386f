//! The command line: one file per subcommand, each an `Args` struct (its doc comment is the
//! help) and a `run` that resolves arguments into settings and calls the module doing the work.

pub mod answer;
pub mod args;
pub mod attach;
pub mod away;
pub mod board;
#[cfg(test)]
mod board_map;
pub mod cassette;
pub mod check;
pub mod clean;
pub mod complete;
pub mod deliver;
pub mod diff;
pub mod dispatch;
pub mod doctor;
pub mod events;
pub mod host;
pub mod init;
pub mod interrupt;
pub mod launch;
pub mod limits;
pub mod materialize;
pub mod notifier;
pub mod notify;
pub mod on_remote;
#[cfg(test)]
mod on_remote_tests;
pub mod open;
pub mod outcome;
pub mod output;
pub mod plan;
pub mod prune;
pub mod record;
#[cfg(test)]
mod reference;
pub mod remote;
pub mod rename;
pub mod replay;
pub mod report;
pub mod resume;
pub mod rpc;
pub mod serve;
pub mod server;
pub mod service;
pub mod sessions;
pub mod slash;
pub mod snapshot;
pub mod start;
pub mod statusline;
pub mod stop;
pub mod terminal;
pub mod turns;
pub mod usage;
pub mod watch;

use clap::{Parser, Subcommand};

use crate::env::Env;
use on_remote::Forward;
pub use outcome::{Failed, Outcome};

/// Install a project's contract into AI coding-agent harnesses (Claude Code, Codex, Gemini CLI),
/// and watch and steer their sessions.
#[derive(Debug, Parser)]
#[command(name = "spex", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Init(init::Args),
    Materialize(materialize::Args),
    Clean(clean::Args),
    Dispatch(dispatch::Args),
    Slash(slash::Args),
    Doctor(doctor::Args),
    Check(check::Args),
    Sessions(sessions::ListArgs),
    Show(sessions::ShowArgs),
    Wait(sessions::WaitArgs),
    Events(events::Args),
    Session(sessions::DeclareArgs),
    Launch(launch::Args),
    Deliver(deliver::Args),
    Answer(answer::Args),
    Approve(answer::ApproveArgs),
    Deny(answer::DenyArgs),
    Away(away::Args),
    Attach(attach::Args),
    Snapshot(snapshot::Args),
    Stop(stop::Args),
    Rename(rename::Args),
    Diff(diff::Args),
    Open(open::Args),
    Usage(usage::Args),
    Limits(limits::Args),
    Interrupt(interrupt::Args),
    Resume(resume::Args),
    Prune(prune::Args),
    Record(record::Args),
    Replay(replay::Args),
    Cassette(cassette::Args),
    Server(server::Args),
    Board(board::Args),
    Watch(watch::Args),
    Notify(notify::Args),
    Service(service::Args),
    Remote(remote::Args),
    #[command(hide = true)]
    Rpc(rpc::Args),
    #[command(hide = true)]
    Host(host::Args),
    #[command(hide = true)]
    Serve(serve::Args),
    #[command(hide = true)]
    Statusline(statusline::Args),
    /// Print the script that gives a shell spex's completions (commands, flags, and the live
    /// sessions' handles and names for every session argument).
    ///
    /// bash: `source <(spex completions bash)`; zsh: `source <(spex completions zsh)`; fish:
    /// `spex completions fish | source`. The shell calls spex back (`COMPLETE=<shell>`), which
    /// offers the live sessions' handles and names for session arguments.
    Completions {
        /// bash, zsh, fish, elvish or powershell
        shell: clap_complete::Shell,
    },
}

/// Runs a command. Its error goes back to `main` as it was made (its exit code and hints are
/// read from it there; [`report::report`] says it for a person).
pub fn run(cli: Cli, env: &Env) -> anyhow::Result<Outcome> {
    // A session of another machine: the command runs there.
    if let Some(f) = forwarded(&cli.command) {
        let root = <Cli as clap::CommandFactory>::command();
        if let Some(outcome) = on_remote::run(&f, &root, env)? {
            return Ok(outcome);
        }
    }
    match cli.command {
        Command::Init(a) => init::run(&a, env),
        Command::Materialize(a) => materialize::run(&a, env),
        Command::Clean(a) => clean::run(&a, env),
        Command::Dispatch(a) => Ok(dispatch::run(&a)),
        Command::Slash(a) => slash::run(&a, env),
        Command::Doctor(a) => doctor::run(&a, env),
        Command::Check(a) => check::run(&a, env),
        Command::Sessions(a) => sessions::list(&a, env),
        Command::Show(a) => sessions::show(&a, env),
        Command::Wait(a) => sessions::wait(&a, env),
        Command::Events(a) => events::run(&a, env),
        Command::Session(a) => sessions::declare(&a, env),
        Command::Launch(a) => launch::run(&a, env),
        Command::Deliver(a) => deliver::run(&a, env),
        Command::Answer(a) => answer::run(&a, env),
        Command::Approve(a) => answer::approve(&a, env),
        Command::Deny(a) => answer::deny(&a, env),
        Command::Away(a) => away::run(&a, env),
        Command::Attach(a) => attach::run(&a, env),
        Command::Snapshot(a) => snapshot::run(&a, env),
        Command::Stop(a) => stop::run(&a, env),
        Command::Rename(a) => rename::run(&a, env),
        Command::Diff(a) => diff::run(&a, env),
        Command::Open(a) => open::run(&a, env),
        Command::Usage(a) => usage::run(&a, env),
        Command::Limits(a) => Ok(limits::run(&a, env)),
        Command::Statusline(a) => statusline::run(&a, env),
        Command::Interrupt(a) => interrupt::run(&a, env),
        Command::Resume(a) => resume::run(&a, env),
        Command::Prune(a) => prune::run(&a, env),
        Command::Record(a) => record::run(&a, env),
        Command::Replay(a) => replay::run(&a, env),
        Command::Cassette(a) => cassette::run(&a, env),
        Command::Server(a) => server::run(&a, env),
        Command::Board(a) => board::run(&a, env),
        Command::Watch(a) => watch::run(&a, env),
        Command::Notify(a) => notify::run(&a, env),
        Command::Service(a) => service::run(&a, env),
        Command::Remote(a) => remote::run(&a, env),
        Command::Rpc(a) => match rpc::run(&a, env)? {
            rpc::Ran::Done(outcome) => Ok(outcome),
            // A usage error, `--help`: printed and exited as `spex ARGS` would.
            rpc::Ran::Exec(argv) => {
                run(Cli::try_parse_from(argv).unwrap_or_else(|e| e.exit()), env)
            }
        },
        Command::Host(a) => host::run(&a, env),
        Command::Serve(a) => serve::run(&a, env),
        Command::Completions { shell } => {
            output::print(&complete::registration(shell)?);
            Ok(Outcome::Ok)
        }
    }
}

/// The commands that may run on another machine, and what names the machine
/// (`on_remote` runs them there).
fn forwarded(command: &Command) -> Option<Forward<'_>> {
    Some(match command {
        Command::Show(a) => Forward::sessions([&a.id], 1),
        Command::Wait(a) => Forward::sessions([&a.id], 1),
        Command::Deliver(a) => Forward::sessions([&a.id], 1),
        Command::Answer(a) => Forward::sessions([&a.id], 1),
        Command::Approve(a) => Forward::sessions([&a.id], 1),
        Command::Deny(a) => Forward::sessions([&a.id], 1),
        Command::Interrupt(a) => Forward::sessions([&a.id], 1),
        Command::Stop(a) => Forward::sessions([&a.id], 1),
        Command::Rename(a) => Forward::sessions([&a.id], 1),
        Command::Diff(a) => Forward::sessions([&a.id], 1),
        Command::Resume(a) => Forward::sessions(a.id.as_ref(), 1),
        Command::Events(a) => Forward::sessions(&a.sessions, usize::MAX),
        Command::Attach(a) => Forward {
            tty: true,
            ..Forward::sessions([&a.id], 1)
        },
        Command::Usage(a) => Forward {
            remote: a.remote.as_deref(),
            ..Forward::sessions([], 0)
        },
        Command::Launch(a) => Forward {
            remote: a.remote.as_deref(),
            // Without `--detach` this terminal attaches to the session there.
            tty: !a.detach && !a.json,
            launch: true,
            repo: a.repo.as_deref(),
            ..Forward::sessions([], 0)
        },
        _ => return None,
    })
}
