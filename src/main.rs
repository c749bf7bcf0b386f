//! spex: install a project's contract into AI coding-agent harnesses and watch their sessions.
//! `main` parses, runs and maps the result to an exit code: 0 ok, 1 "differs" (e.g.
//! `materialize --check` found changes), 2 error, 3 the session waited on has exited, 130
//! Ctrl-C undid what the command had started.

mod adapters;
mod cli;
mod config;
mod dispatch;
mod env;
mod fsutil;
mod materialize;
mod pty;
mod reconcile;
mod repo;
mod runtime;
mod seam;
mod spec;
mod store;
mod text;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // The hook path skips clap and everything else: it must be fast, and it must exit 0 even
    // on arguments it does not understand.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "dispatch") {
        return cli::dispatch::run_raw(&args[2..]);
    }
    // `COMPLETE=<shell> spex ...`: the shell asks for completions (see `spex completions`).
    clap_complete::CompleteEnv::with_factory(<cli::Cli as clap::CommandFactory>::command)
        .complete();
    let cli = cli::Cli::parse();
    let env = env::Env::from_process(adapters::env_vars());
    match cli::run(cli, &env) {
        Ok(cli::Outcome::Ok) => ExitCode::SUCCESS,
        Ok(cli::Outcome::Differs) => ExitCode::from(1),
        Ok(cli::Outcome::Gone) => ExitCode::from(3),
        Ok(cli::Outcome::TurnNotCompleted) => ExitCode::from(4),
        Ok(cli::Outcome::Interrupted) => ExitCode::from(130),
        Err(e) => {
            let top = e.to_string();
            eprintln!("error: {top}");
            // Module errors already spell out their cause; print only what adds information.
            for cause in e
                .chain()
                .skip(1)
                .map(ToString::to_string)
                .filter(|c| !top.contains(c.as_str()))
            {
                eprintln!("  Caused by: {cause}");
            }
            ExitCode::from(2)
        }
    }
}
