//! `spex dispatch <harness> <Event>`: the hook handler every harness calls, payload on stdin.

use std::ffi::OsString;
use std::io::Write as _;

use super::output;

/// Handle one harness hook (payload on stdin); harnesses call this.
///
/// It never fails the agent: on any internal problem it prints nothing and exits 0.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The harness id baked into the hook command (one `spex doctor` lists).
    pub harness: String,
    /// The hook event name (`PreToolUse`, `Stop`, ...).
    pub event: String,
}

/// Entry point from `main`'s fast path (no clap).
pub fn run_raw(args: &[OsString]) {
    let harness = args
        .first()
        .map(|a| a.to_string_lossy().into_owned())
        .unwrap_or_default();
    let event = args
        .get(1)
        .map(|a| a.to_string_lossy().into_owned())
        .unwrap_or_default();
    run(&Args { harness, event });
}

pub fn run(args: &Args) -> super::outcome::Outcome {
    let out = crate::dispatch::run(&args.harness, &args.event);
    if let Some(reply) = out {
        if !reply.stdout.is_empty() {
            output::print(&reply.stdout);
        }
        if !reply.stderr.is_empty() {
            // Not `eprint!`, which panics when the harness has closed its end: the exit code
            // below (a block) still reaches it.
            let _ = std::io::stderr().write_all(reply.stderr.as_bytes());
        }
        if reply.exit_code != 0 {
            std::process::exit(reply.exit_code);
        }
    }
    super::outcome::Outcome::Ok
}
