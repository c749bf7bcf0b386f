//! `spex deliver`: type a prompt into a hosted session and confirm the harness accepted it.

use std::time::{Duration, Instant};

use super::args::text_arg;
use super::outcome::{Failed, Outcome};
use super::output;
use crate::env::Env;
use crate::hint::Hinted;
use crate::reconcile;
use crate::runtime::{self, Delivery, RuntimeError, StageAt};
use crate::store::ProjectStore;
use crate::store::session::{Status, Turn, TurnState};
use crate::text::visible;

/// Deliver a prompt to a running session, confirmed by the session's own prompt hook.
///
/// Refused while a dialog is open (a permission, a question asked through the harness's ask tool):
/// keys typed there answer the dialog, whatever they say, so answer it with `spex answer` or in the
/// session's terminal. The answer to a question the agent declared in text (`spex session ask`) is
/// a prompt, delivered as any other, and closes it. A busy session queues the prompt (`mode:
/// queued`). Control characters in the text that would end the paste or act as keys (`ESC[201~`,
/// Shift+Tab's `ESC[Z`) are made visible (`␛`) rather than typed (`sanitized: true`), so the prompt
/// arrives as one paste. `--force` is retired (it typed into the dialog, whose Enter picked the
/// default whatever the text said) and is refused with that reason.
///
/// Claude Code: typed into the hosted session as one paste, confirmed when its own prompt hook
/// reports that text as Claude normalises a prompt (trailing blanks and newlines trimmed, a tab as
/// four spaces). Gemini CLI: typed as one paste, Enter 250 ms later, confirmed when its
/// `BeforeAgent` hook reports the text as Gemini normalises a prompt (line breaks as `\n`, the
/// whole trimmed at both ends, tabs kept). For both the Enter waits (at most 4 s) until the paste
/// shows in the input box; a prompt never seen there (Gemini reads no keys for a moment after
/// loading a resumed conversation) is typed again, over a box cleared first, once the session
/// shows idle with its box empty and the prompt nowhere on its screen. Codex: `turn/steer` into the running turn (`mode: steer`, that turn's
/// id), else `turn/start` (`mode: start`, the new turn's id), confirmed by the server's answer; a
/// steer that loses the race to the turn's end becomes a start.
///
/// An empty prompt, an exited session or a server that is down is an error that says what to run. A
/// session spex does not host (started in the person's own terminal) is refused as such (exit 2;
/// `stop`, `interrupt`, `snapshot`, `record` and `attach` say the same). A session that has exited
/// (the error says how and when), or whose host no longer answers, exits 3 (whatever its
/// transport); with `--json` a failure prints `{delivered, confirmed: false, reason, error}` too
/// (`reason`: `host_gone`, `exited`, `needs_attention`, `not_confirmed`, ...).
///
/// `--json` lists the `stages` reached, each `{stage, at, elapsed_ms}`: `accepted` (the harness
/// took the text: typed into the hosted terminal, or answered by the server), `started` (a turn
/// runs with it: the prompt hook reported it, or the server's answer named the turn).
///
/// `--wait-until accepted|started|done` waits for that stage within `--timeout` (accepted: the
/// harness took the text; started: a turn runs with it, a queued prompt taken up as with `--wait`;
/// done: that turn ended, and `outcome` is the turn's record: state, `note`, `error_kind`, `next`,
/// `by`). It prints `delivered to <handle>: <stage reached>[, turn <state and why>]`, or with
/// `--json` adds `reached` and `outcome`. Exit 0 when the stage is reached (`done` only when the
/// turn `completed`; 4 when it ended any other way, with its state and why), 1 on timeout (saying
/// the stage reached), 3 when the session exited.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(value_name = "ID", help = super::args::ID_HELP, add = super::complete::sessions())]
    pub id: String,
    /// The prompt (`-` reads it from stdin).
    pub text: String,
    /// Retired: it typed into an open dialog, which took the keys as its answer.
    #[arg(long, hide = true)]
    pub force: bool,
    /// For a queued prompt, wait until the harness takes it up (`--wait-until started`).
    #[arg(long)]
    pub wait: bool,
    /// The stage to wait for: `accepted` (the harness took the text), `started` (a turn runs
    /// with it), `done` (that turn ended; exit 4 unless it completed).
    #[arg(long, value_enum)]
    pub wait_until: Option<Stage>,
    /// Seconds to wait for the confirmation (with `--wait-until`, for that stage).
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
    /// Print `{delivered, mode, turn_id, confirmed, elapsed_ms, sanitized}` as JSON.
    #[arg(long)]
    pub json: bool,
}

/// A delivery stage `--wait-until` waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Stage {
    Accepted,
    Started,
    Done,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let began = Instant::now();
    let (store, id) = super::args::project_and_id(env, &args.id)?;
    if args.force {
        anyhow::bail!(Hinted::new(
            "`--force` is retired: it typed the prompt into an open dialog, which took the keys as its answer (Enter picked the dialog's default, whatever the text said)",
            format!(
                "drop `--force`; answer a dialog in the session's terminal (`spex attach {id}`)"
            )
        ));
    }
    let text = text_arg(&args.text)?;
    if text.trim().is_empty() {
        anyhow::bail!(Hinted::new(
            "the prompt is empty",
            "pass the text to deliver, or `-` to read it from stdin"
        ));
    }
    let record = store
        .load(&id)?
        .ok_or_else(|| crate::store::session::StoreError::NotFound(id.clone()))?;
    if record.tree_gone() && record.status != crate::store::session::Status::Exited {
        anyhow::bail!(Hinted::new(
            format!(
                "session `{id}` works in `{}`, which is gone (a removed worktree): its harness may still run, but its hooks start in that folder, so spex could not confirm a delivery",
                record.tree.display()
            ),
            format!(
                "`spex stop {id}` ends it; `spex launch` starts a new session in a checkout that exists"
            )
        ));
    }
    // A version whose confirmation promise failed `spex check`: the prompt is still typed, and
    // what confirms it is said first.
    if let Some((message, hint)) =
        runtime::checked::switched_off(env, &record, "deliver", "confirming a delivery")
    {
        eprintln!("warning: {message}\nhint: {hint}");
    }
    let delivered = runtime::transport::of(env, &store, &record)?.deliver(
        &text,
        args.wait || args.wait_until >= Some(Stage::Started),
        Duration::from_secs(args.timeout),
    );
    let d = match delivered {
        Ok(d) => d,
        Err(e) => return failed(args.json, e),
    };
    let label = store.label_of(&id);
    if let Some(until) = args.wait_until {
        let deadline = began + Duration::from_secs(args.timeout);
        return staged(env, &store, &id, d, until, (began, deadline), args.json);
    }
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

/// Waits for stage `until` of delivery `d` into session `id` and says how far it got: exit 0
/// at the stage (`done` with a `completed` turn), 4 for a turn that ended any other way, 1 on
/// timeout, 3 when the session exited first.
fn staged(
    env: &Env,
    store: &ProjectStore,
    id: &str,
    mut d: Delivery,
    until: Stage,
    (began, deadline): (Instant, Instant),
    json: bool,
) -> anyhow::Result<Outcome> {
    let reached = |d: &Delivery| d.stages.last().map_or("none", |s| s.stage);
    let label = store.label_of(id);
    let mut outcome: Option<Turn> = None;
    let mut exited = false;
    // The turn that runs with the text: by the harness's id for it, else the turn the
    // session ran when the delivery was confirmed.
    let mut started_at: Option<String> = None;
    if until == Stage::Done && reached(&d) == "started" {
        loop {
            let s = reconcile::session(env, store, id)?;
            let s = runtime::reconcile_hosted(env, store, &s).unwrap_or(s);
            let s = runtime::judge::judge(env, store, s, &mut runtime::budget::Book::default());
            let turn = s.turn.as_ref().filter(|t| match &d.turn_id {
                Some(tid) => t.id.as_deref() == Some(tid.as_str()),
                None => {
                    started_at
                        .get_or_insert_with(|| t.started_at.clone())
                        .as_str()
                        == t.started_at
                }
            });
            if let Some(t) = turn.filter(|t| t.state != TurnState::Running) {
                d.stages.push(StageAt::now("done", began));
                outcome = Some(t.clone());
                break;
            }
            if s.status == Status::Exited {
                exited = true;
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            // Woken by the record's changes; a look every half second for what sends none.
            runtime::wait_for(
                &store.session_dir(id),
                Instant::now() + left.min(Duration::from_millis(500)),
                || {
                    store
                        .load(id)
                        .ok()
                        .flatten()
                        .filter(|r| r.seq != s.seq || r.status != s.status)
                },
            )?;
        }
    }
    let at = reached(&d);
    let wanted = match until {
        Stage::Accepted => "accepted",
        Stage::Started => "started",
        Stage::Done => "done",
    };
    let state = outcome.as_ref().map(|t| t.state);
    if json {
        output::json(&serde_json::json!({
            "delivered": d.delivered, "mode": d.mode, "turn_id": d.turn_id,
            "confirmed": d.confirmed, "elapsed_ms": runtime::elapsed_ms(began), "sanitized": d.sanitized,
            "stages": d.stages, "reached": at, "outcome": outcome,
        }));
    } else {
        let mut line = format!("delivered to {label}: {at}");
        if let Some(t) = &outcome {
            line.push_str(&format!(
                ", turn {}",
                visible(&super::turns::turn_sentence(t))
            ));
        }
        output::print(&format!("{line}\n"));
    }
    let order = |stage: &str| {
        ["none", "accepted", "started", "done"]
            .iter()
            .position(|s| *s == stage)
    };
    if order(at) >= order(wanted) {
        return Ok(match state {
            Some(TurnState::Completed) | None => Outcome::Ok,
            Some(_) => Outcome::TurnNotCompleted,
        });
    }
    if exited {
        return Err(Failed::with(
            Outcome::Gone,
            anyhow::anyhow!("session {label} has exited before its turn ended ({at} reached)"),
        ));
    }
    Err(Failed::with(
        Outcome::Differs,
        anyhow::anyhow!("timed out: the delivery to {label} reached `{at}`, not `{wanted}`"),
    ))
}

/// A delivery that failed says why on stderr and, with `--json`, on stdout as well; a session
/// that is gone (exited, or its host does not answer) exits 3, as `wait` does.
fn failed(json: bool, e: RuntimeError) -> anyhow::Result<Outcome> {
    if json {
        output::json(&serde_json::json!({
            // Not confirmed: the text was typed, but the harness never reported it.
            "delivered": matches!(e, RuntimeError::NotConfirmed { .. }),
            "confirmed": false,
            "reason": e.reason(),
            "error": crate::hint::spelled(&e),
        }));
    }
    if e.gone() {
        return Err(Failed::with(Outcome::Gone, e));
    }
    Err(e.into())
}
