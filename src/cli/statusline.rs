//! `spex statusline <harness>` (hidden): the status-line command spex installs with
//! `limits.statusLine` (Claude Code's `statusLine` in a tree's `.claude/settings.json`). It
//! records the rate limits the harness passes it, then runs the person's own status line with
//! the same input, so theirs shows as before.

use std::io::{Read as _, Write as _};
use std::process::{Command, Stdio};

use anyhow::Context;

use super::outcome::Outcome;
use crate::adapters;
use crate::env::Env;
use crate::seam::edit::owned::Owned;

/// The largest status-line input read (Claude's is a few KiB).
const MAX_INPUT: u64 = 1024 * 1024;

/// Record the rate limits a harness passes its status line, then run the person's own status
/// line (run by the harness; installed with `limits.statusLine`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The harness that runs it.
    pub harness: String,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let harness = adapters::lookup(&args.harness)
        .with_context(|| format!("unknown harness `{}`", args.harness))?;
    let mut input = Vec::new();
    std::io::stdin()
        .take(MAX_INPUT)
        .read_to_end(&mut input)
        .context("reading the status line's input")?;
    let Some(facet) = harness.limits() else {
        return Ok(Outcome::Ok);
    };
    // spex installs its status line only in a tree's settings: the harness runs it there.
    let Ok(tree) = super::args::current_tree() else {
        return Ok(Outcome::Ok);
    };
    let store = crate::store::ProjectStore::new(&env.spex_home(), &tree.main);
    let payload: Option<serde_json::Value> = serde_json::from_slice(&input).ok();
    if let Some(reading) = payload.as_ref().and_then(|p| facet.status_line_reading(p)) {
        // The session whose status line this is: its record, by the harness's session id.
        let session = || {
            let sid = payload.as_ref()?.get("session_id")?.as_str()?;
            store
                .alias(harness.id(), sid)
                .or_else(|| store.load(sid).ok().flatten().map(|s| s.id))
        };
        crate::runtime::limits::heard(env, &store, harness.id(), reading, "status line", session);
    }
    let owned = Owned::load(
        crate::fsutil::read_opt(&store.owned_file())
            .ok()
            .flatten()
            .as_deref(),
    );
    if let Some(command) = facet.chained_status_line(env, &owned, &tree.root) {
        chain(&command, &input)?;
    }
    Ok(Outcome::Ok)
}

/// Runs the person's status-line `command` (a shell line, as the harness would) with `input`
/// on its stdin, its output straight to ours.
fn chain(command: &str, input: &[u8]) -> anyhow::Result<()> {
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("running the status line `{command}`"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A command that reads nothing closes its end early: not an error.
        let _ = stdin.write_all(input);
    }
    child.wait().context("waiting for the status line")?;
    Ok(())
}
