//! The command line: one file per subcommand, each an `Args` struct (its doc comment is the
//! help) and a `run` that resolves arguments into settings and calls the module doing the work.

pub mod attach;
pub mod cassette;
pub mod clean;
pub mod deliver;
pub mod dispatch;
pub mod doctor;
pub mod host;
pub mod init;
pub mod interrupt;
pub mod launch;
pub mod materialize;
pub mod output;
pub mod prune;
pub mod record;
pub mod replay;
pub mod resume;
pub mod serve;
pub mod sessions;
pub mod slash;
pub mod snapshot;
pub mod stop;

use std::path::PathBuf;

use clap::{CommandFactory, Parser, Subcommand};

use crate::env::Env;

/// Install a project's contract into AI coding-agent harnesses (Claude Code, Codex), and watch
/// and steer their sessions.
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
    Sessions(sessions::ListArgs),
    Show(sessions::ShowArgs),
    Wait(sessions::WaitArgs),
    Session(sessions::DeclareArgs),
    Launch(launch::Args),
    Deliver(deliver::Args),
    Attach(attach::Args),
    Snapshot(snapshot::Args),
    Stop(stop::Args),
    Interrupt(interrupt::Args),
    Resume(resume::Args),
    Prune(prune::Args),
    Record(record::Args),
    Replay(replay::Args),
    Cassette(cassette::Args),
    #[command(hide = true)]
    Host(host::Args),
    #[command(hide = true)]
    Serve(serve::Args),
    /// Print shell completions.
    Completions {
        /// bash, zsh, fish, elvish or powershell
        shell: clap_complete::Shell,
    },
}

/// How a command ended, for `main` to turn into an exit code.
pub enum Outcome {
    Ok,
    /// Ran fine but reports a negative answer (e.g. `materialize --check` found changes).
    Differs,
    /// The session waited on has exited (or its process is gone): exit code 3.
    Gone,
    /// The person pressed Ctrl-C and the command undid what it had started: exit code 130.
    Interrupted,
}

/// The running spex binary, as hook commands should call it.
pub fn spex_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    Ok(std::fs::canonicalize(&exe).unwrap_or(exe))
}

pub fn run(cli: Cli, env: &Env) -> anyhow::Result<Outcome> {
    match cli.command {
        Command::Init(a) => init::run(&a, env),
        Command::Materialize(a) => materialize::run(&a, env),
        Command::Clean(a) => clean::run(&a, env),
        Command::Dispatch(a) => Ok(dispatch::run(&a)),
        Command::Slash(a) => slash::run(&a, env),
        Command::Doctor(a) => doctor::run(&a, env),
        Command::Sessions(a) => sessions::list(&a, env),
        Command::Show(a) => sessions::show(&a, env),
        Command::Wait(a) => sessions::wait(&a, env),
        Command::Session(a) => sessions::declare(&a, env),
        Command::Launch(a) => launch::run(&a, env),
        Command::Deliver(a) => deliver::run(&a, env),
        Command::Attach(a) => attach::run(&a, env),
        Command::Snapshot(a) => snapshot::run(&a, env),
        Command::Stop(a) => stop::run(&a, env),
        Command::Interrupt(a) => interrupt::run(&a, env),
        Command::Resume(a) => resume::run(&a, env),
        Command::Prune(a) => prune::run(&a, env),
        Command::Record(a) => record::run(&a, env),
        Command::Replay(a) => replay::run(&a, env),
        Command::Cassette(a) => cassette::run(&a, env),
        Command::Host(a) => host::run(&a, env),
        Command::Serve(a) => serve::run(&a, env),
        Command::Completions { shell } => {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "spex", &mut buf);
            output::print(&String::from_utf8_lossy(&buf));
            Ok(Outcome::Ok)
        }
    }
}
