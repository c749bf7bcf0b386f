//! `spex prune`: remove sessions that exited long ago.

use std::time::{Duration, SystemTime};

use super::outcome::Outcome;
use super::output;
use crate::env::Env;
use crate::hint::Hinted;

/// Remove exited sessions older than a duration, with their aliases and index entries.
///
/// Removes the sessions whose record last changed longer ago than `--older-than`, with their
/// aliases and touched-index entries; their model usage stays as daily totals, which `spex
/// usage` counts. A session that has not exited is never removed.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How long ago a session must have last changed, e.g. `30d`, `12h`, `90min`.
    #[arg(long, default_value = "30d")]
    pub older_than: String,
    /// Only list what would be removed.
    #[arg(long)]
    pub dry_run: bool,
    /// Print `{removed: [ids], dry_run}` as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let age: Duration = humantime::parse_duration(&args.older_than).map_err(|e| {
        Hinted::new(
            format!("`--older-than {}` is not a duration", args.older_than),
            "e.g. `30d`, `12h`, `90min`",
        )
        .caused_by(e)
    })?;
    let cutoff = SystemTime::now()
        .checked_sub(age)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let store = super::args::project(env)?;
    // A start whose host is gone ends `exited` here, so it can be pruned.
    for s in store.sessions() {
        if s.status == crate::store::session::Status::Starting {
            crate::runtime::reconcile_hosted(env, &store, &s);
        }
    }
    let sessions = if args.dry_run {
        store.prunable(cutoff)
    } else {
        store.prune(cutoff)?
    };
    if args.json {
        let ids: Vec<&str> = sessions.iter().map(|s| s.id.as_str()).collect();
        output::json(&serde_json::json!({ "removed": ids, "dry_run": args.dry_run }));
        return Ok(Outcome::Ok);
    }
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    let mut text = format!(
        "{verb} {} exited session{} older than {}\n",
        sessions.len(),
        if sessions.len() == 1 { "" } else { "s" },
        args.older_than
    );
    for s in &sessions {
        text.push_str(&format!(
            "  {}  {}  {}\n",
            s.label(),
            s.updated_at,
            crate::text::visible(s.headline.as_deref().unwrap_or(""))
        ));
    }
    output::print(&text);
    Ok(Outcome::Ok)
}
