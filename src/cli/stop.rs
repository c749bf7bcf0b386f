//! `spex stop`: end a hosted session's program.

use std::time::Duration;

use super::outcome::Outcome;
use super::output;
use crate::env::Env;
use crate::runtime;
use crate::store::session::{Session, Status};

/// End a hosted session: its own exit keys at an idle prompt, then SIGTERM to its process group,
/// then SIGKILL after the grace period.
///
/// Claude Code and Gemini CLI: at an idle prompt their own exit keys (Ctrl-D twice); else, or when
/// that has not ended the session within 3 s, SIGTERM, then SIGKILL of its process group after
/// `--grace`. Whatever the program left running in its process group once it ended gets 1 s to end,
/// then SIGTERM, then SIGKILL at the grace's end (Gemini's launcher ignores SIGTERM and runs the
/// real CLI as its child, which ends on it). Codex: the thread is closed. A session that has
/// already exited is no error: `stop` says how it ended.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(value_name = "ID", help = super::args::ID_HELP, add = super::complete::sessions())]
    pub id: String,
    /// Seconds between SIGTERM and SIGKILL (and at most how long the exit keys may take).
    #[arg(long, default_value_t = 5)]
    pub grace: u64,
    /// Print the final record as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let (store, id) = super::args::project_and_id(env, &args.id)?;
    let record = store
        .load(&id)?
        .ok_or_else(|| crate::store::session::StoreError::NotFound(id.clone()))?;
    // A start whose host is gone has ended: nothing to stop.
    let record = runtime::reconcile_hosted(env, &store, &record).unwrap_or(record);
    // Nothing left to stop: say how it ended (stopping twice is not an error).
    let already = record.status == Status::Exited;
    let s = if already {
        record
    } else {
        runtime::transport::of(env, &store, &record)?.stop(Duration::from_secs(args.grace))?
    };
    if args.json {
        output::json(&s);
    } else {
        let when = if already {
            "had already exited"
        } else {
            "exited"
        };
        output::print(&format!("{}: {when} ({})\n", store.label_of(&id), how(&s)));
    }
    Ok(Outcome::Ok)
}

/// How the session's program ended, in a few words.
fn how(s: &Session) -> String {
    match s.exited_with() {
        Some(e) => match (e.code, e.signal) {
            (_, Some(sig)) => format!("signal {sig}"),
            (Some(code), None) => format!("exit code {code}"),
            (None, None) => "unknown status".to_owned(),
        },
        None => s
            .exit_reason
            .clone()
            .unwrap_or_else(|| "unknown status".to_owned()),
    }
}
