//! spex: install a project's contract into AI coding-agent harnesses and watch their sessions.
//! `main` parses, runs and maps the result to an exit code: 0 ok, 1 "differs" (e.g.
//! `materialize --check` found changes), 2 error, 3 the session waited on has exited, 130
//! Ctrl-C undid what the command had started.

#![cfg_attr(not(test), no_main)]

mod adapters;
mod board;
mod check;
mod cli;
mod config;
mod dispatch;
mod env;
mod fsutil;
mod hint;
mod log;
mod materialize;
mod notify;
mod pty;
mod reconcile;
mod remote;
mod repo;
mod runtime;
mod seam;
mod spec;
mod store;
mod text;
mod watch;

use std::ffi::OsString;
use std::io::Write as _;

use clap::Parser;

/// The process's entry in place of std's start-up, which before `main` reads
/// `/proc/self/maps` to place a stack guard and sets up an alternate signal stack: a tenth of
/// what starting `spex dispatch` costs, on a path that runs at every tool call. It does the
/// two parts of that start-up spex relies on ([`stdio_open`], [`ignore_sigpipe`]); a panic
/// outside the hook path exits 101, as std's start-up would.
#[cfg(not(test))]
#[expect(
    unsafe_code,
    reason = "the C `main` symbol must keep its name: it replaces std's start-up"
)]
#[unsafe(no_mangle)]
extern "C" fn main(
    _argc: std::ffi::c_int,
    _argv: *const *const std::ffi::c_char,
) -> std::ffi::c_int {
    std::ffi::c_int::from(std::panic::catch_unwind(entry).unwrap_or(101))
}

#[cfg_attr(test, allow(dead_code, reason = "the test harness has its own entry"))]
fn entry() -> u8 {
    stdio_open();
    ignore_sigpipe();
    // The hook path skips clap and everything else: it must be fast, and it must exit 0 even
    // on arguments it does not understand.
    let args: Vec<OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "dispatch") {
        cli::dispatch::run_raw(&args[2..]);
        return 0;
    }
    let code = run();
    // std's start-up flushed stdout after `main`; nothing else does now.
    let _ = std::io::stdout().flush();
    code
}

/// Standard input, output and error are open (on `/dev/null` if they came closed), so no file
/// spex opens takes their number and receives what is printed.
fn stdio_open() {
    loop {
        // Through `open_lean`: every hook runs this, and fs_err's own open copies the path.
        let Ok(null) = fsutil::open_lean(
            fs_err::OpenOptions::new().read(true).write(true),
            std::path::Path::new("/dev/null"),
        ) else {
            return;
        };
        if std::os::fd::AsRawFd::as_raw_fd(&null) > 2 {
            return;
        }
        // It took the number of a closed standard descriptor: it stays open there.
        std::mem::forget(null);
    }
}

/// A write to a closed pipe or socket returns an error instead of killing the process: a hook
/// node that exits without reading its payload, a person's `| head`, a terminal that went
/// away from the PTY host. Children get the default back (std's `Command` resets it).
#[expect(
    unsafe_code,
    reason = "setting a signal's disposition is a libc call; SIG_IGN runs no code of ours"
)]
fn ignore_sigpipe() {
    // SAFETY: SIG_IGN is a valid disposition for SIGPIPE, and no handler code runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// Every command but `dispatch`: parse, run, and the exit code: 0 ok, 1 "differs", 2 error
/// (or the code of the outcome a `cli::Failed` error names), 3 gone, 4 turn not completed, 130
/// interrupted. An error prints as `error:`, its `Caused by:` lines, then its `hint:` lines.
fn run() -> u8 {
    // `COMPLETE=<shell> spex ...`: the shell asks for completions (see `spex completions`).
    clap_complete::CompleteEnv::with_factory(<cli::Cli as clap::CommandFactory>::command)
        .complete();
    let cli = cli::Cli::parse();
    let env = env::Env::from_process(adapters::env_vars());
    match cli::run(cli, &env) {
        Ok(outcome) => code(outcome),
        Err(e) => {
            // An error means 2, unless it says which outcome's code it means.
            let (code, e) = match e.downcast::<cli::Failed>() {
                Ok(failed) => (code(failed.outcome), failed.error),
                Err(e) => (2, e),
            };
            // uv's order: the error, what caused it, then what to do about it.
            let report = cli::report::report(&e, &env);
            eprintln!("error: {}", report.error);
            for cause in &report.causes {
                eprintln!("  Caused by: {cause}");
            }
            for hint in &report.hints {
                eprintln!("hint: {hint}");
            }
            code
        }
    }
}

fn code(outcome: cli::Outcome) -> u8 {
    match outcome {
        cli::Outcome::Ok => 0,
        cli::Outcome::Differs => 1,
        cli::Outcome::Gone => 3,
        cli::Outcome::TurnNotCompleted => 4,
        cli::Outcome::Interrupted => 130,
        cli::Outcome::Relayed(code) => code,
    }
}
