//! `spex sessions`, `spex show`, `spex wait` and `spex session done|park|ask`: reading and
//! declaring session state.

use std::time::{Duration, Instant};

use anyhow::Context;

mod hosts;
mod table;
mod watch;

use table::{limit_reset, note, reset_phrase};

use super::args::project;
use super::outcome::{Failed, Outcome};
use super::output::{self, Style};
use super::turns::{clock, turn_detail, turn_sentence_with};
use crate::adapters;
use crate::env::Env;
use crate::hint::Hinted;
use crate::reconcile;
use crate::runtime;
use crate::store::session::{
    AnswerWay, Attention, AttentionKind, Declared, DeclaredState, Session, Status, TurnState, Via,
    ellipsis,
};
use crate::store::{self};
use crate::text::visible;

/// List the agent sessions of this project, or of every project (every harness, launched by spex
/// or not).
///
/// The sessions that are live and ran a turn (a live session spex launched shows before its first
/// turn too); `--all` adds exited ones and records that never ran a turn. Attention first: the
/// sessions that need a person (the longest waiting first), then working, idle and exited ones
/// (the most recently changed first in each). Outside a repository, and with `--all-projects`,
/// every project in the store, with a `PROJECT` column (the checkout's folder name, or its path
/// when two share a name; `PROJECT/ID` names a session from anywhere).
///
/// `UPDATED` is the last change of state (a hook that changes nothing, such as Claude's idle
/// notification at an idle prompt, writes nothing), with its date when older than today. `TURN`
/// names the turn's state and what its sub-agents did (`completed, 1 of 3 sub-agents failed`,
/// `running, 2 sub-agents running`). `USAGE` is the session's input / output tokens as the harness
/// recorded them (`12.3k/1.2k`). An attention (a failed turn's alert, a question) closes only by an
/// answer, a new turn, an interrupt or an exit.
#[derive(Debug, clap::Args)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "each is one independent flag of the command line"
)]
pub struct ListArgs {
    /// Include exited sessions and sessions that never ran a turn.
    #[arg(long)]
    pub all: bool,
    /// Print the records as JSON (the fields of `session.json`).
    #[arg(long)]
    pub json: bool,
    /// Every project in the store, with a `PROJECT` column (the default outside a repository).
    #[arg(long)]
    pub all_projects: bool,
    /// Redraw the table in place on every change of the store until Ctrl-C (woken by the
    /// store, no timer), then leave the terminal as it was; when stdout is no terminal, print
    /// the table again on every change, a blank line between.
    #[arg(long, conflicts_with = "json")]
    pub watch: bool,
    /// Every project of this machine and of every remote (`spex remote list`), with a `HOST`
    /// column (`local` for this machine; `host` in `--json`, null for this machine), attention
    /// first across all of them; a remote that cannot be reached is named on stderr.
    #[arg(long, conflicts_with = "watch")]
    pub all_hosts: bool,
}

/// One sub-agent: `a4c7e6eb general-purpose completed in 0.1 s: its last line`.
fn child_line(c: &crate::store::session::Child, now: &str) -> String {
    let end = c.ended_at.as_deref().unwrap_or(now);
    let took = crate::store::session::elapsed_ms(&c.started_at, end).unwrap_or(0);
    let verb = if c.ended_at.is_some() { "in" } else { "for" };
    #[expect(clippy::cast_precision_loss, reason = "one decimal is shown")]
    let secs = took as f64 / 1000.0;
    let mut line = format!(
        "{} {} {} {verb} {secs:.1} s",
        c.id,
        c.agent_type.as_deref().unwrap_or("agent"),
        c.state.as_str(),
    );
    if let Some(e) = &c.error {
        line.push_str(&format!(": {}", ellipsis(e, 100)));
    } else if let Some(sum) = &c.summary {
        line.push_str(&format!(": {sum}"));
    }
    if let Some(u) = &c.usage {
        line.push_str(&format!(" ({})", u.brief()));
    }
    line
}

/// The turn's and the session's usage: `turn 19 in (5 cached) / 7 out; session ...; model x`.
fn usage_line(s: &Session) -> Option<String> {
    let session = s.usage.as_ref()?;
    let mut parts = Vec::new();
    if let Some(u) = s.turn.as_ref().and_then(|t| t.usage.as_ref()) {
        parts.push(format!("turn {}", u.brief()));
    }
    parts.push(format!(
        "session {} in {} requests",
        session.brief(),
        session.requests
    ));
    if let Some(m) = &session.model {
        parts.push(format!("model {m}"));
    }
    Some(parts.join("; "))
}

/// One line: the state, since when, and what set it ("idle since 12:03:41, turn interrupted:
/// Claude's registry went busy -> idle with no Stop").
fn explain(s: &Session) -> String {
    let mut out = s.status.as_str().to_owned();
    if let Some(since) = &s.since {
        out.push_str(&format!(" since {}", clock(since)));
    }
    if let Some(reason) = &s.exit_reason {
        out.push_str(&format!(" ({reason})"));
    } else if s.attended == Some(false) {
        out.push_str(", no client");
    }
    if let Some(phrase) = s.turn_phrase() {
        out.push_str(&format!(", turn {phrase}"));
    }
    match (&s.why, &s.source) {
        (Some(why), _) => out.push_str(&format!(": {why}")),
        (None, Some(source)) => out.push_str(&format!(" (from {source})")),
        _ => {}
    }
    out
}

pub fn list(args: &ListArgs, env: &Env) -> anyhow::Result<Outcome> {
    if args.all_hosts {
        hosts::list(env, args.all, args.json)?;
        return Ok(Outcome::Ok);
    }
    if args.watch {
        return watch::run(args.all, args.all_projects, env);
    }
    let listing = table::read(env, &table::Scope::of(args.all_projects, env), args.all)?;
    if args.json {
        listing.print_json(env);
    } else {
        output::print(&listing.text(env, args.all));
    }
    Ok(Outcome::Ok)
}

/// Show one session: its record and its latest events.
///
/// The record, a one-line explanation of its state, its sub-agents and usage, and its latest
/// events.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    #[arg(value_name = "ID", help = super::args::ID_HELP, add = super::complete::sessions())]
    pub id: String,
    /// How many of the latest events to include.
    #[arg(long, default_value_t = 10)]
    pub events: usize,
    /// Print `{session, events}` as JSON.
    #[arg(long)]
    pub json: bool,
}

#[expect(
    clippy::too_many_lines,
    reason = "one block of rows per part of the record, in the order `show` prints them"
)]
pub fn show(args: &ShowArgs, env: &Env) -> anyhow::Result<Outcome> {
    let (store, id) = super::args::project_and_id(env, &args.id)?;
    let s = reconcile::session(env, &store, &id)?;
    let s = runtime::reconcile_hosted(env, &store, &s).unwrap_or(s);
    let s = runtime::judge::judge(env, &store, s, &mut runtime::budget::Book::default());
    let events = store.events(&id, Some(args.events))?;
    let reset = limit_reset(env, &s);
    // A harness version whose events promise failed `spex check`: its state is not trusted.
    let unverified = runtime::checked::state_unverified(env, &s);
    if args.json {
        let mut shown =
            serde_json::json!({ "session": runtime::with_live(env, &store, &s), "events": events });
        if let Some(at) = &reset {
            shown["limit_resets_at"] = at.clone().into();
        }
        if let Some(why) = &unverified {
            shown["state_unverified"] = why.clone().into();
        }
        output::json(&shown);
        return Ok(Outcome::Ok);
    }
    let style = Style::detect(env.no_color);
    let mut rows = vec![
        vec!["id".into(), format!("{} ({})", s.label(), s.id)],
        vec!["name".into(), s.name.clone().unwrap_or_else(|| "-".into())],
        vec![
            "harness".into(),
            format!(
                "{} ({})",
                s.harness,
                s.harness_session_id.as_deref().unwrap_or("-")
            ),
        ],
        vec!["state".into(), visible(&explain(&s))],
    ];
    if let Some(why) = &unverified {
        rows.push(vec!["unverified".into(), visible(why)]);
    }
    rows.extend([
        vec![
            "tree".into(),
            visible(&format!(
                "{} ({}){}",
                s.tree.display(),
                s.branch.as_deref().unwrap_or("detached"),
                if s.tree_gone() { ", worktree gone" } else { "" }
            )),
        ],
        vec!["launched by".into(), s.launched_by.to_string()],
    ]);
    if let Some(live) = runtime::live(env, &store, &s) {
        rows.push(vec![
            "transport".into(),
            if live { "live" } else { "not reachable" }.into(),
        ]);
    }
    if let Some(t) = &s.turn {
        let mut line = format!(
            "{}{}{}, started {}",
            t.state.as_str(),
            turn_detail(t),
            s.children_phrase(),
            clock(&t.started_at)
        );
        if let Some(end) = &t.ended_at {
            line.push_str(&format!(", ended {}", clock(end)));
        }
        if let Some(kind) = t.error_kind {
            line.push_str(&format!(", {}", kind.as_str()));
        }
        if let Some(note) = &t.note {
            line.push_str(&format!(": {note}"));
        }
        rows.push(vec!["turn".into(), visible(&line)]);
        if let Some(p) = &t.partial {
            rows.push(vec![
                "partial text".into(),
                visible(&format!(
                    "(written before the failure, not an answer) {}",
                    ellipsis(p.lines().next().unwrap_or_default(), 80)
                )),
            ]);
        }
        if let Some(at) = &reset {
            rows.push(vec!["limit".into(), reset_phrase(at)]);
        }
        if let Some(next) = &t.next {
            rows.push(vec!["next".into(), visible(next)]);
        }
    }
    let now = crate::store::now_rfc3339();
    for c in &s.children {
        rows.push(vec!["sub-agent".into(), visible(&child_line(c, &now))]);
    }
    if let Some(line) = usage_line(&s) {
        rows.push(vec!["usage".into(), visible(&line)]);
    }
    if let Some(a) = &s.attention {
        let id = a.id.as_deref().map(|i| format!("{i} ")).unwrap_or_default();
        rows.push(vec![
            "attention".into(),
            visible(&format!(
                "{id}{}: {} (since {})",
                a.reason,
                a.text,
                clock(&a.since)
            )),
        ]);
        let mut offers: Vec<String> = a
            .choices
            .iter()
            .map(|c| {
                format!(
                    "{} ({}{})",
                    c.id,
                    c.label,
                    if c.message { ", --message" } else { "" }
                )
            })
            .collect();
        for q in &a.questions {
            let mut line = format!("{}: {}", q.question, q.options.join(" / "));
            if q.multi_select {
                line.push_str(" (several)");
            }
            if q.free_text {
                line.push_str(" (or free text)");
            }
            offers.push(line);
        }
        if !offers.is_empty() {
            rows.push(vec!["choices".into(), visible(&offers.join("; "))]);
        }
        if let Some(v) = &a.via {
            let how = match &v.why {
                Some(why) => format!("{}: {why}", v.how),
                None => format!("{} (`spex answer {} <choice>`)", v.how, s.label()),
            };
            rows.push(vec!["answer".into(), visible(&how)]);
        }
    }
    if let Some(d) = &s.declared {
        rows.push(vec![
            "declared".into(),
            visible(&format!(
                "{}: {}",
                format!("{:?}", d.state).to_lowercase(),
                d.note
            )),
        ]);
    }
    if let Some(h) = &s.headline {
        rows.push(vec!["headline".into(), visible(h)]);
    }
    if !s.touched.is_empty() {
        rows.push(vec!["touched".into(), visible(&s.touched.join(", "))]);
    }
    let mut text = output::table(&rows);
    text.push_str("events:\n");
    for e in events {
        let fields = serde_json::Value::Object(e.fields).to_string();
        text.push_str(&format!(
            "  {:>4} {} {:<17} {}\n",
            e.seq,
            e.time.get(11..23).unwrap_or_default(),
            visible(&e.kind),
            style.dim(&visible(&fields))
        ));
    }
    output::print(&text);
    Ok(Outcome::Ok)
}

/// A state `wait` waits for: spelled as `spex sessions` prints it (`needs_attention`) or with
/// dashes (`needs-attention`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Until {
    Working,
    Idle,
    #[value(alias = "needs_attention")]
    NeedsAttention,
    Exited,
    /// The end of the running turn, or of the next one if none is running.
    #[value(alias = "turn_end")]
    TurnEnd,
}

impl Until {
    /// `start`: when the turn running as the wait began started, else when the wait began.
    fn reached(self, s: &Session, start: &str) -> bool {
        match self {
            Until::Working => s.status == Status::Working,
            Until::Idle => s.status == Status::Idle,
            Until::NeedsAttention => s.status == Status::NeedsAttention,
            Until::Exited => s.status == Status::Exited,
            Until::TurnEnd => s
                .turn
                .as_ref()
                .is_some_and(|t| t.state != TurnState::Running && t.started_at.as_str() >= start),
        }
    }
}

/// How often `wait` re-reads evidence that sends no file event (a process that died).
const LIVENESS_TICK: Duration = Duration::from_millis(500);

/// Block until a session reaches a state.
///
/// `--until` takes one state, or several separated by commas for the first reached (`--until
/// idle,needs-attention`); `needs_attention`, as `spex sessions` prints it, is accepted too.
/// `turn-end` is the end of the running turn, or of the next one if none runs.
///
/// Woken by file-change notifications on the record and on the harness's own state files, and every
/// 0.5 s to check that the harness process still runs. Exits 1 on timeout, 3 at once when the
/// session has exited (or its process is gone) before reaching the state, and with `--until
/// turn-end` 4 when the turn ended other than `completed` (its state and why printed).
#[derive(Debug, clap::Args)]
pub struct WaitArgs {
    #[arg(value_name = "ID", help = super::args::ID_HELP, add = super::complete::sessions())]
    pub id: String,
    /// The state to wait for; several, separated by commas, wait for the first reached
    /// (`--until idle,needs-attention`).
    #[arg(long, value_enum, value_delimiter = ',', required = true)]
    pub until: Vec<Until>,
    /// Give up after this many seconds.
    #[arg(long)]
    pub timeout: Option<f64>,
    /// Print the record as JSON when done.
    #[arg(long)]
    pub json: bool,
}

#[expect(
    clippy::too_many_lines,
    reason = "one wait loop over the watches, the progress line and the budget book it sets up"
)]
pub fn wait(args: &WaitArgs, env: &Env) -> anyhow::Result<Outcome> {
    use rustix::fs::inotify;
    let (store, id) = super::args::project_and_id(env, &args.id)?;
    let dir = store.session_dir(&id);
    let deadline = args
        .timeout
        .map(|t| Instant::now() + Duration::from_secs_f64(t.max(0.0)));
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)
        .context("inotify_init")?;
    // Records (and the harnesses' state files) are replaced by rename, so watch the folders
    // for files moved or written into them.
    let flags = inotify::WatchFlags::MOVED_TO
        | inotify::WatchFlags::CLOSE_WRITE
        | inotify::WatchFlags::CREATE
        | inotify::WatchFlags::DELETE;
    inotify::add_watch(&fd, &dir, flags)
        .with_context(|| format!("cannot watch `{}`", dir.display()))?;
    let mut watched: Vec<std::path::PathBuf> = Vec::new();
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
    // On a terminal, show what the session is doing while we wait.
    let progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut shown: Option<Status> = None;
    let began = store::now_rfc3339();
    let mut start: Option<String> = None;
    let mut book = runtime::budget::Book::default();
    loop {
        let s = reconcile::session(env, &store, &id)?;
        let s = runtime::reconcile_hosted(env, &store, &s).unwrap_or(s);
        // A session nobody else judges is judged here, and the wait wakes at its budget's
        // deadline (no hook or file event may come then).
        let s = runtime::judge::judge(env, &store, s, &mut book);
        let budget_at = runtime::judge::deadline(env, &s, &mut book);
        if let Some(o) = adapters::lookup(&s.harness).and_then(crate::seam::Harness::evidence) {
            for d in o.evidence_dirs(env, &s) {
                // A folder that does not exist yet is picked up on a later pass.
                if !watched.contains(&d) && inotify::add_watch(&fd, &d, flags).is_ok() {
                    watched.push(d);
                }
            }
        }
        let start = start.get_or_insert_with(|| {
            s.turn
                .as_ref()
                .filter(|t| t.state == TurnState::Running)
                .map_or_else(|| began.clone(), |t| t.started_at.clone())
        });
        let handle = s.label().to_owned();
        if progress && shown != Some(s.status) {
            eprint!(
                "\r\x1b[2Kwaiting for {handle}: {} ({})",
                s.status.as_str(),
                visible(&note(&s))
            );
            shown = Some(s.status);
        }
        let reached = args.until.iter().any(|u| u.reached(&s, start));
        // A turn that ended any other way than `completed` is no success for a script.
        let turn_end = args.until.contains(&Until::TurnEnd)
            && Until::TurnEnd.reached(&s, start)
            && !args
                .until
                .iter()
                .any(|u| *u != Until::TurnEnd && u.reached(&s, start));
        let ended = s.turn.as_ref().filter(|_| turn_end).map(|t| t.state);
        if reached || (s.status == Status::Exited) {
            if progress {
                eprint!("\r\x1b[2K");
            }
            if args.json {
                output::json(&s);
            } else if let Some(t) = s.turn.as_ref().filter(|_| turn_end) {
                output::print(&format!(
                    "{handle} turn {}\n",
                    visible(&turn_sentence_with(t, &s.children_phrase()))
                ));
            } else {
                output::print(&format!("{handle} {}\n", s.status.as_str()));
            }
            match ended {
                Some(TurnState::Completed) => return Ok(Outcome::Ok),
                Some(_) if s.status != Status::Exited => return Ok(Outcome::TurnNotCompleted),
                None if reached => return Ok(Outcome::Ok),
                // The session is gone (too): that is what a script must hear (exit 3).
                _ => {}
            }
            return Err(Failed::with(
                Outcome::Gone,
                anyhow::anyhow!(
                    "session {handle} has exited{}: it will not become {}",
                    s.exit_reason
                        .as_deref()
                        .map(|r| format!(" ({})", visible(r)))
                        .unwrap_or_default(),
                    until_names(&args.until)
                ),
            ));
        }
        let mut tick = LIVENESS_TICK;
        if let Some(at) = budget_at {
            tick = tick.min(at.saturating_duration_since(Instant::now()));
        }
        if let Some(d) = deadline {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Failed::with(
                    Outcome::Differs,
                    anyhow::anyhow!(
                        "timed out: session {handle} is `{}`, not {}",
                        s.status.as_str(),
                        until_names(&args.until)
                    ),
                ));
            }
            tick = tick.min(left);
        }
        let ts = rustix::event::Timespec {
            tv_sec: i64::try_from(tick.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(tick.subsec_nanos()),
        };
        let mut fds = [rustix::event::PollFd::new(
            &fd,
            rustix::event::PollFlags::IN,
        )];
        match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e).context("poll"),
        }
        // Drain the queued notifications; the loop re-reads the record either way.
        let mut reader = inotify::Reader::new(&fd, &mut buf);
        while reader.next().is_ok() {}
    }
}

/// "`idle` or `needs-attention`".
fn until_names(until: &[Until]) -> String {
    until
        .iter()
        .filter_map(clap::ValueEnum::to_possible_value)
        .map(|v| format!("`{}`", v.get_name()))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// The live session whose recorded harness process this command runs under, for a harness
/// that runs one session per process and gives its shell commands no session id of its own.
fn session_above(store: &store::ProjectStore) -> Option<String> {
    use crate::seam::evidence::{alive, ancestors};
    let mine = ancestors(256);
    store
        .sessions()
        .into_iter()
        .filter(|s| s.status != Status::Exited)
        .filter(|s| {
            adapters::lookup(&s.harness)
                .and_then(crate::seam::Harness::wire)
                .is_some_and(crate::seam::wire::HookWire::hook_env_names_session)
        })
        .find(|s| {
            s.process_id()
                .is_some_and(|p| mine.contains(&p.pid) && alive(p))
        })
        .map(|s| s.id)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Subcommand)]
pub enum Declare {
    /// The work asked for is done.
    Done,
    /// The session stops here on purpose (blocked, waiting on something else).
    Park,
    /// The session needs a person to answer a question.
    Ask,
}

/// Declare where your session stands: done, park or ask (for agents).
///
/// The session is the one the harness's own session variable names (`CLAUDE_CODE_SESSION_ID`,
/// `CODEX_THREAD_ID`), found through the alias index, else `SPEX_SESSION_ID`, else the live session
/// whose recorded harness process runs this command (Gemini CLI gives its shell commands no session
/// id).
#[derive(Debug, clap::Args)]
pub struct DeclareArgs {
    #[command(subcommand)]
    pub state: Declare,
    /// What is done, why it is parked, or the question.
    #[arg(long, global = true)]
    pub note: Option<String>,
    /// Print the record as JSON.
    #[arg(long, global = true)]
    pub json: bool,
}

pub fn declare(args: &DeclareArgs, env: &Env) -> anyhow::Result<Outcome> {
    let store = project(env)?;
    let verb = format!("{:?}", args.state).to_lowercase();
    let note = args
        .note
        .clone()
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| {
            anyhow::anyhow!(Hinted::new(
                "a declaration needs a note",
                format!("`spex session {verb} --note \"<text>\"`")
            ))
            .context("missing --note")
        })?;
    let by_harness = adapters::all().iter().find_map(|h| {
        let var = h.identity().session_env_var?;
        store.alias(h.id(), env.var(var)?)
    });
    let id = match (by_harness, env.spex_session_id.as_deref()) {
        (Some(id), _) => id,
        // `SPEX_SESSION_ID` takes whatever names a session elsewhere: id, handle or name.
        (None, Some(given)) => store.resolve(given).map_err(|e| {
            let message = format!("SPEX_SESSION_ID names no session of this project: {e}");
            anyhow::Error::new(e).context(message)
        })?,
        (None, None) if let Some(id) = session_above(&store) => id,
        (None, None) => {
            let vars: Vec<&str> = adapters::all()
                .iter()
                .filter_map(|h| h.identity().session_env_var)
                .collect();
            anyhow::bail!(Hinted::new(
                format!(
                    "cannot tell which session this is: no harness session id ({}) maps to a session of this project, and SPEX_SESSION_ID is not set",
                    vars.join(", ")
                ),
                format!(
                    "run it inside an agent session after its first hook fired, or name the session: `SPEX_SESSION_ID=<handle> spex session {verb} --note \"<text>\"` (the handle is the `ID` column of `spex sessions`)"
                )
            ))
        }
    };
    let state = match args.state {
        Declare::Done => DeclaredState::Done,
        Declare::Park => DeclaredState::Parked,
        Declare::Ask => DeclaredState::Asking,
    };
    let now = store::now_rfc3339();
    let record = store.update(&id, |cur| {
        let Some(mut s) = cur else {
            return (None, Vec::new(), None);
        };
        s.declared = Some(Declared {
            state,
            note: note.clone(),
            at: now.clone(),
            other: serde_json::Map::new(),
        });
        let before = s.state_key();
        let mut events = Vec::new();
        if state == DeclaredState::Asking {
            // The declaration raises the attention (its `declared` event); any other is cleared.
            let mut asked = Attention::new(AttentionKind::Question, note.clone(), &now);
            asked.via = Some(Via {
                how: AnswerWay::Prompt,
                why: Some("the agent asked in text: a prompt (`spex deliver`) answers it".into()),
            });
            s.status = Status::NeedsAttention;
            events.extend(s.open_attention(asked, "spex session"));
        }
        s.stamp(before, &now, "spex session", None);
        s.updated_at.clone_from(&now);
        let mut fields = serde_json::Map::new();
        fields.insert(
            "state".into(),
            serde_json::to_value(state).expect("serializes"),
        );
        fields.insert("note".into(), note.clone().into());
        events.push(("declared".to_owned(), "spex session".to_owned(), fields));
        (Some(s.clone()), events, Some(s))
    })?;
    let s = record.ok_or_else(|| store::session::StoreError::NotFound(id.clone()))?;
    if args.json {
        output::json(&s);
    } else {
        output::print(&format!(
            "{}: declared {}\n",
            s.label(),
            format!("{state:?}").to_lowercase()
        ));
    }
    Ok(Outcome::Ok)
}
