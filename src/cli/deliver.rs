//! `spex deliver`: type a prompt into a hosted session and confirm the harness accepted it.

use std::time::Duration;

use super::args::text_arg;
use super::outcome::Outcome;
use super::output;
use crate::env::Env;
use crate::runtime::{self, RuntimeError};

/// Deliver a prompt to a running session, confirmed by the session's own prompt hook.
///
/// Refused while a dialog is open (a permission, a question asked through the harness's ask
/// tool): keys typed there answer the dialog, whatever they say. The answer to a question the
/// agent declared in text (`spex session ask`) is a prompt, delivered as any other. A busy
/// session queues the prompt (`mode: queued`). Control characters in the text are made visible
/// rather than typed (`sanitized: true`), so the prompt arrives as one paste. A session that
/// has exited, or whose host no longer answers, exits 3 (whatever its transport); with
/// `--json` a failure prints `{delivered, confirmed: false, reason, error}` too.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(value_name = "ID", help = super::args::ID_HELP, add = super::complete::sessions())]
    pub id: String,
    /// The prompt (`-` reads it from stdin).
    pub text: String,
    /// Retired: it typed into an open dialog, which took the keys as its answer.
    #[arg(long, hide = true)]
    pub force: bool,
    /// For a queued prompt, wait until the harness takes it up.
    #[arg(long)]
    pub wait: bool,
    /// Seconds to wait for the confirmation.
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
    /// Print `{delivered, mode, turn_id, confirmed, elapsed_ms, sanitized}` as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let (store, id) = super::args::project_and_id(env, &args.id)?;
    if args.force {
        anyhow::bail!(
            "`--force` is retired: it typed the prompt into an open dialog, which took the keys as its answer (Enter picked the dialog's default, whatever the text said)\nhint: drop `--force`; answer a dialog in the session's terminal (`spex attach {id}`)"
        );
    }
    let text = text_arg(&args.text)?;
    if text.trim().is_empty() {
        anyhow::bail!(
            "the prompt is empty\nhint: pass the text to deliver, or `-` to read it from stdin"
        );
    }
    let record = store
        .load(&id)?
        .ok_or_else(|| crate::store::session::StoreError::NotFound(id.clone()))?;
    if record.tree_gone() && record.status != crate::store::session::Status::Exited {
        anyhow::bail!(
            "session `{id}` works in `{}`, which is gone (a removed worktree): its harness may still run, but its hooks start in that folder, so spex could not confirm a delivery\nhint: `spex stop {id}` ends it; `spex launch` starts a new session in a checkout that exists",
            record.tree.display()
        );
    }
    let delivered = match super::start::server_of(env, &store, &record, false)? {
        Some(server) => server.deliver(&id, &text),
        None => runtime::deliver(
            env,
            &store,
            &id,
            &text,
            args.wait,
            Duration::from_secs(args.timeout),
        ),
    };
    let d = match delivered {
        Ok(d) => d,
        Err(e) => return failed(args.json, e, env),
    };
    let label = store.label_of(&id);
    if args.json {
        output::json(&d);
    } else if d.confirmed {
        output::print(&format!(
            "delivered to {label} ({}, confirmed in {} ms)\n",
            format!("{:?}", d.mode).to_lowercase(),
            d.elapsed_ms
        ));
    } else {
        output::print(&format!(
            "queued in {label}: it runs when the current turn ends\n"
        ));
    }
    Ok(Outcome::Ok)
}

/// A delivery that failed says why on stderr and, with `--json`, on stdout as well; a session
/// that is gone (exited, or its host does not answer) exits 3, as `wait` does.
fn failed(json: bool, e: RuntimeError, env: &Env) -> anyhow::Result<Outcome> {
    if json {
        output::json(&serde_json::json!({
            // Not confirmed: the text was typed, but the harness never reported it.
            "delivered": matches!(e, RuntimeError::NotConfirmed { .. }),
            "confirmed": false,
            "reason": e.reason(),
            "error": e.to_string(),
        }));
    }
    if e.gone() {
        eprintln!("error: {}", output::with_handles(&e.into(), env));
        return Ok(Outcome::Gone);
    }
    Err(e.into())
}
