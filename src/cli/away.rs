//! `spex away on|off|status`: the person says they are away from their terminals, so a hook
//! that can only answer by holding the harness's prompt back waits a while for `spex answer`
//! first (a Codex TUI started with `--no-daemon`); per user.

use serde::Serialize;

use super::outcome::Outcome;
use super::output;
use crate::env::Env;
use crate::store::away;

/// Say you are away from your terminals (per user): hooks then wait for `spex answer` where nothing
/// else can answer.
///
/// While on, the permission hook of a Codex TUI started with `--no-daemon` (whose prompt nothing
/// else can answer) waits up to `answering.hookWaitSecs` for `spex answer`, `approve` or `deny`,
/// then lets the TUI show its prompt; while it waits the TUI shows no prompt (Esc there interrupts
/// the turn). Never for a thread of spex's own server, or of Codex's background server (those are
/// answered as its client). Without `spex away on|off` ever run, `answering.away` in the
/// configuration (read by `spex materialize`) is the default.
///
/// `status` (the default) says whether it is on, since when and from where (`spex away` or the
/// configuration's `answering.away`).
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
            "a permission hook that nothing else can answer waits up to {} s for `spex answer`, then the harness shows its prompt\nhint: `spex away off` when you are back",
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

/// `answering.away` and `answering.hookWaitSecs` of the configuration here (the user's, and
/// the project's when this runs in one); the defaults when it cannot be read.
fn configured(env: &Env) -> (bool, u64) {
    let here = std::env::current_dir().unwrap_or_default();
    let root = crate::repo::Tree::discover(&here)
        .map_or(here, |t| crate::config::source_root(&t.root, &t.main));
    crate::config::load(&env.user_config_file(), &root, &crate::adapters::known())
        .map_or((false, crate::config::ANSWER_WAIT_SECS), |c| {
            (c.away, c.answer_wait_secs)
        })
}
