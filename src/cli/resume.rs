//! `spex resume`: bring an exited session back with its conversation; never a live one.

use std::time::Duration;

use serde::Serialize;

use super::outcome::Outcome;
use super::output;
use crate::env::Env;
use crate::runtime;
use crate::store::ProjectStore;
use crate::store::session::{Session, Status};

/// Resume an exited session (its conversation) under a new terminal host, then attach.
///
/// Claude Code: its conversation under a new host. Gemini CLI: the same, with `--resume <id>`.
/// Codex: the same thread on the server, started if needed. A live session is refused, `--force` or
/// not (one in the person's own terminal is said to run there).
///
/// `--all-stopped` resumes, detached, every session of every project that the machine's stop
/// ended (a reboot or a crash: `exited`, reason `machine stopped`), each through its harness's
/// own resume, and lists what it resumed and what it could not, and why (`--json`: `{resumed:
/// [{project, id, handle, harness, session}], failed: [{project, id, handle, harness,
/// error}]}`). Exits 2 when any could not be resumed.
#[derive(Debug, clap::Args)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "each bool is one independent command-line flag"
)]
pub struct Args {
    #[arg(
        value_name = "ID",
        help = super::args::ID_HELP,
        add = super::complete::sessions(),
        required_unless_present = "all_stopped",
        conflicts_with = "all_stopped"
    )]
    pub id: Option<String>,
    /// Resume every session the machine's stop ended, in every project (detached).
    #[arg(long)]
    pub all_stopped: bool,
    /// Do not attach this terminal.
    #[arg(long)]
    pub detach: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    /// No effect, kept so scripts still run: a live session is never resumed (a second
    /// process on its conversation would split it).
    #[arg(long, hide = true)]
    pub force: bool,
    /// How long the harness may take to be ready for a prompt.
    #[arg(long, default_value_t = 60)]
    pub ready_timeout: u64,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let Some(id) = args.id.as_deref() else {
        return all_stopped(args, env);
    };
    let (store, id) = super::args::project_and_id(env, id)?;
    // With the harness's own evidence folded in: a session whose process is gone reads exited.
    let record = crate::reconcile::session(env, &store, &id)?;
    runtime::checked::refuse_if_off(env, &record, "resume", "`spex resume`")?;
    let transport = runtime::transport::of(env, &store, &record)?;
    let launch = super::start::relaunch(env, &record, Duration::from_secs(args.ready_timeout))?;
    let launched = transport.resume(&launch)?;
    super::start::report(&store, args.json, args.detach, &launched, None);
    if !args.detach {
        super::terminal::attach(
            env,
            &launched.id,
            super::terminal::detach_key(env, &launch.tree.root),
        )?;
    }
    Ok(Outcome::Ok)
}

/// One session `--all-stopped` tried to bring back.
#[derive(Debug, Serialize)]
struct Tried {
    /// The project's checkout folder name.
    project: String,
    id: String,
    handle: String,
    harness: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<runtime::Launched>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// `--all-stopped`: every session the machine's stop ended, in every project, resumed
/// detached through its own transport; each failure is listed with why, and ends the command
/// with exit 2 once all were tried.
fn all_stopped(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let ready = Duration::from_secs(args.ready_timeout);
    let (mut resumed, mut failed) = (Vec::new(), Vec::new());
    for store in crate::store::all_projects(&env.spex_home()) {
        // With the evidence folded in: a session live before the machine stopped reads
        // `exited`, `machine stopped` from here on.
        let Ok(sessions) = crate::reconcile::sessions(env, &store) else {
            continue;
        };
        for s in sessions.iter().filter(|s| {
            s.status == Status::Exited
                && s.exit_reason.as_deref() == Some(crate::seam::boot::MACHINE_STOPPED)
        }) {
            let mut tried = Tried {
                project: project_name(s),
                id: s.id.clone(),
                handle: s.label().to_owned(),
                harness: s.harness.clone(),
                session: None,
                error: None,
            };
            match resume_one(env, &store, s, ready) {
                Ok(launched) => {
                    tried.session = Some(launched);
                    resumed.push(tried);
                }
                Err(e) => {
                    tried.error = Some(format!("{e:#}"));
                    failed.push(tried);
                }
            }
        }
    }
    if args.json {
        output::json(&serde_json::json!({ "resumed": resumed, "failed": failed }));
    } else {
        output::print(&listing(&resumed, &failed));
    }
    if failed.is_empty() {
        return Ok(Outcome::Ok);
    }
    Err(crate::hint::Hinted::new(
        format!(
            "{} of {} sessions the machine's stop ended could not be resumed",
            failed.len(),
            failed.len() + resumed.len()
        ),
        "each one's reason is listed above; `spex resume <project>/<handle>` tries one again",
    )
    .into())
}

/// Resumes one exited session through its transport, detached.
fn resume_one(
    env: &Env,
    store: &ProjectStore,
    record: &Session,
    ready: Duration,
) -> anyhow::Result<runtime::Launched> {
    let transport = runtime::transport::of(env, store, record)?;
    let launch = super::start::relaunch(env, record, ready)?;
    Ok(transport.resume(&launch)?)
}

/// The folder name of the session's project checkout (its path when it has none).
fn project_name(s: &Session) -> String {
    s.project.file_name().map_or_else(
        || s.project.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// What `--all-stopped` did, for a person: one line per session.
fn listing(resumed: &[Tried], failed: &[Tried]) -> String {
    use crate::text::{visible, visible_lines};
    if resumed.is_empty() && failed.is_empty() {
        return "no session was ended by the machine's stop\n".to_owned();
    }
    let mut out = String::new();
    let line = |t: &Tried| format!("{}/{} ({})", visible(&t.project), t.handle, t.harness);
    if !resumed.is_empty() {
        out.push_str(&format!("resumed {}:\n", resumed.len()));
        for t in resumed {
            out.push_str(&format!("  {}\n", line(t)));
        }
    }
    if !failed.is_empty() {
        out.push_str(&format!("could not resume {}:\n", failed.len()));
        for t in failed {
            // The error may span lines (a host's last screen): each indented under its line.
            let why = t.error.as_deref().map(visible_lines).unwrap_or_default();
            let why = why.trim_end().replace('\n', "\n    ");
            out.push_str(&format!("  {}: {why}\n", line(t)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listing_says_what_was_resumed_and_why_the_rest_was_not() {
        let tried = |handle: &str, error: Option<&str>| Tried {
            project: "repo".into(),
            id: format!("{handle}-id"),
            handle: handle.into(),
            harness: "alpha".into(),
            session: None,
            error: error.map(str::to_owned),
        };
        assert_eq!(
            listing(
                &[tried("ab12", None)],
                &[tried(
                    "cd34",
                    Some("its host ended\nNo conversation found\n")
                )]
            ),
            "resumed 1:\n  repo/ab12 (alpha)\ncould not resume 1:\n  repo/cd34 (alpha): its host ended\n    No conversation found\n"
        );
        assert_eq!(
            listing(&[], &[]),
            "no session was ended by the machine's stop\n"
        );
    }
}
