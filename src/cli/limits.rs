//! `spex limits`: each harness account's provider rate limits (the windows, how much of each
//! is used, when each resets), from the harness's own evidence, or `unknown` with why.

use std::time::SystemTime;

use serde::Serialize;

use super::outcome::Outcome;
use super::output;
use crate::env::Env;
use crate::runtime::limits::{self, HarnessLimits};

/// Show each harness account's rate limits: the windows the provider reports (a 5-hour one, a
/// weekly one, ...), how much of each is used, when each resets, and whether a limit is reached.
///
/// Read from each harness's own evidence, never estimated: Codex reports its provider's
/// rate-limit headers (spex hears them from the project's `codex app-server` after each model
/// request, and reads them from Codex's session logs for sessions spex did not start); Claude
/// Code reports them to its status line only for a subscription login; Gemini CLI reports none
/// for an API key. A harness that reported nothing is `unknown`, with the reason.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print `{harnesses: [{harness, known, reached, windows, observed_at, source, why}]}` as
    /// JSON (`windows`: `{name, used_percent, window_minutes, resets_at}`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Report {
    harnesses: Vec<HarnessLimits>,
}

pub fn run(args: &Args, env: &Env) -> Outcome {
    let all = limits::current(env);
    if args.json {
        output::json(&Report { harnesses: all });
        return Outcome::Ok;
    }
    output::print(&text(&all, SystemTime::now()));
    Outcome::Ok
}

/// The human report: one block per harness.
fn text(all: &[HarnessLimits], now: SystemTime) -> String {
    let mut out = String::new();
    for l in all {
        out.push_str(&limits::line(l, now));
        out.push('\n');
        match (&l.reading, l.why) {
            (Some(r), _) => {
                for w in r.windows.iter().filter(|w| w.reached()) {
                    if let Some(at) = &w.resets_at {
                        out.push_str(&format!("  {} window reached: resets at {at}\n", w.label()));
                    }
                }
                out.push_str(&format!(
                    "  reported {} ({})\n",
                    limits::age(&r.observed_at, now),
                    r.source
                ));
            }
            (None, Some(why)) => out.push_str(&format!("  {why}\n")),
            (None, None) => {}
        }
    }
    out
}
