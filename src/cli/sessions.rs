//! `spex sessions`, `spex show`, `spex wait` and `spex session done|park|ask`: reading and
//! declaring session state.

use std::time::{Duration, Instant};

use anyhow::Context;

use super::Outcome;
use super::materialize::current_tree;
use super::output::{self, Style};
use crate::adapters;
use crate::env::Env;
use crate::runtime;
use crate::store::session::{Attention, Declared, DeclaredState, Session, Status};
use crate::store::{self, ProjectStore};

pub fn project(env: &Env) -> anyhow::Result<ProjectStore> {
    let tree = current_tree()?;
    Ok(ProjectStore::new(&env.spex_home(), &tree.main))
}

/// List the agent sessions of this project (every harness, launched by spex or not).
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Include exited sessions.
    #[arg(long)]
    pub all: bool,
    /// Print the records as JSON (the fields of `session.json`).
    #[arg(long)]
    pub json: bool,
}

fn status_cell(style: Style, s: Status) -> String {
    match s {
        Status::Working => style.green(s.as_str()),
        Status::NeedsAttention => style.yellow(s.as_str()),
        Status::Exited => style.dim(s.as_str()),
        _ => s.as_str().to_owned(),
    }
}

fn note(s: &Session) -> String {
    match (&s.attention, &s.declared) {
        (Some(a), _) => format!(
            "{}: {}",
            a.reason,
            a.text.lines().next().unwrap_or_default()
        ),
        (None, Some(d)) => format!("{:?}: {}", d.state, d.note).to_lowercase(),
        _ => s.headline.clone().unwrap_or_default(),
    }
}

pub fn list(args: &ListArgs, env: &Env) -> anyhow::Result<Outcome> {
    let store = project(env)?;
    let mut sessions: Vec<Session> = store
        .sessions()
        .into_iter()
        .map(|s| runtime::reconcile_hosted(env, &store, &s).unwrap_or(s))
        .filter(|s| args.all || s.status != Status::Exited)
        .collect();
    sessions.sort_by(|a, b| b.updated_at.cmp(&a.updated_at));
    if args.json {
        output::json(&sessions);
        return Ok(Outcome::Ok);
    }
    if sessions.is_empty() {
        output::print(if args.all {
            "no sessions\n"
        } else {
            "no live sessions (`--all` shows exited ones)\n"
        });
        return Ok(Outcome::Ok);
    }
    let style = Style::detect(env.no_color);
    let mut rows = vec![
        [
            "ID", "HARNESS", "STATUS", "TURN", "BRANCH", "UPDATED", "NOTE",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for s in &sessions {
        rows.push(vec![
            s.id.chars().take(8).collect(),
            s.harness.clone(),
            status_cell(style, s.status),
            s.turn
                .as_ref()
                .map_or_else(|| "-".into(), |t| format!("{:?}", t.state).to_lowercase()),
            s.branch.clone().unwrap_or_else(|| "-".into()),
            s.updated_at.get(11..19).unwrap_or_default().to_owned(),
            note(s).chars().take(60).collect(),
        ]);
    }
    output::print(&output::table(&rows));
    Ok(Outcome::Ok)
}

/// Show one session: its record and its latest events.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// Session id or a unique prefix of it.
    pub id: String,
    /// How many of the latest events to include.
    #[arg(long, default_value_t = 10)]
    pub events: usize,
    /// Print `{session, events}` as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn show(args: &ShowArgs, env: &Env) -> anyhow::Result<Outcome> {
    let store = project(env)?;
    let id = store.resolve(&args.id)?;
    let s = store
        .load(&id)?
        .ok_or_else(|| store::session::StoreError::NotFound(id.clone()))?;
    let s = runtime::reconcile_hosted(env, &store, &s).unwrap_or(s);
    let events = store.events(&id, Some(args.events))?;
    if args.json {
        output::json(&serde_json::json!({ "session": s, "events": events }));
        return Ok(Outcome::Ok);
    }
    let style = Style::detect(env.no_color);
    let mut rows = vec![
        vec!["id".into(), s.id.clone()],
        vec![
            "harness".into(),
            format!(
                "{} ({})",
                s.harness,
                s.harness_session_id.as_deref().unwrap_or("-")
            ),
        ],
        vec!["status".into(), status_cell(style, s.status)],
        vec![
            "tree".into(),
            format!(
                "{} ({})",
                s.tree.display(),
                s.branch.as_deref().unwrap_or("detached")
            ),
        ],
        vec!["launched by".into(), s.launched_by.clone()],
    ];
    if let Some(t) = &s.turn {
        rows.push(vec![
            "turn".into(),
            format!(
                "{} since {}",
                format!("{:?}", t.state).to_lowercase(),
                t.started_at
            ),
        ]);
    }
    if let Some(a) = &s.attention {
        rows.push(vec![
            "attention".into(),
            format!("{}: {}", a.reason, a.text),
        ]);
    }
    if let Some(d) = &s.declared {
        rows.push(vec![
            "declared".into(),
            format!("{:?}: {}", d.state, d.note).to_lowercase(),
        ]);
    }
    if !s.touched.is_empty() {
        rows.push(vec!["touched".into(), s.touched.join(", ")]);
    }
    let mut text = output::table(&rows);
    text.push_str("events:\n");
    for e in events {
        let fields = serde_json::Value::Object(e.fields).to_string();
        text.push_str(&format!(
            "  {:>4} {} {:<17} {}\n",
            e.seq,
            e.time.get(11..23).unwrap_or_default(),
            e.kind,
            style.dim(&fields)
        ));
    }
    output::print(&text);
    Ok(Outcome::Ok)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Until {
    Working,
    Idle,
    NeedsAttention,
    Exited,
}

impl Until {
    fn reached(self, s: Status) -> bool {
        matches!(
            (self, s),
            (Until::Working, Status::Working)
                | (Until::Idle, Status::Idle)
                | (Until::NeedsAttention, Status::NeedsAttention)
                | (Until::Exited, Status::Exited)
        )
    }
}

/// Block until a session reaches a status.
///
/// Woken by file-change notifications (no polling loop). Exits 1 on timeout.
#[derive(Debug, clap::Args)]
pub struct WaitArgs {
    /// Session id or a unique prefix of it.
    pub id: String,
    #[arg(long, value_enum)]
    pub until: Until,
    /// Give up after this many seconds.
    #[arg(long)]
    pub timeout: Option<f64>,
    /// Print the record as JSON when done.
    #[arg(long)]
    pub json: bool,
}

pub fn wait(args: &WaitArgs, env: &Env) -> anyhow::Result<Outcome> {
    use rustix::fs::inotify;
    let store = project(env)?;
    let id = store.resolve(&args.id)?;
    let dir = store.session_dir(&id);
    let deadline = args
        .timeout
        .map(|t| Instant::now() + Duration::from_secs_f64(t.max(0.0)));
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)
        .context("inotify_init")?;
    // Records are replaced by rename, so watch the folder for files moved or written into it.
    inotify::add_watch(
        &fd,
        &dir,
        inotify::WatchFlags::MOVED_TO
            | inotify::WatchFlags::CLOSE_WRITE
            | inotify::WatchFlags::CREATE,
    )
    .with_context(|| format!("cannot watch `{}`", dir.display()))?;
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
    // On a terminal, show what the session is doing while we wait.
    let progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut shown: Option<Status> = None;
    loop {
        let s = store
            .load(&id)?
            .ok_or_else(|| store::session::StoreError::NotFound(id.clone()))?;
        let s = runtime::reconcile_hosted(env, &store, &s).unwrap_or(s);
        if progress && shown != Some(s.status) {
            eprint!(
                "\r\x1b[2Kwaiting for {}: {} ({})",
                id.chars().take(8).collect::<String>(),
                s.status.as_str(),
                note(&s)
            );
            shown = Some(s.status);
        }
        if args.until.reached(s.status) {
            if progress {
                eprint!("\r\x1b[2K");
            }
            if args.json {
                output::json(&s);
            } else {
                output::print(&format!("{} {}\n", s.id, s.status.as_str()));
            }
            return Ok(Outcome::Ok);
        }
        let timeout = match deadline {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    let want = clap::ValueEnum::to_possible_value(&args.until)
                        .map(|v| v.get_name().to_owned())
                        .unwrap_or_default();
                    eprintln!(
                        "error: timed out: session {id} is `{}`, not `{want}`",
                        s.status.as_str()
                    );
                    return Ok(Outcome::Differs);
                }
                Some(left)
            }
            None => None,
        };
        let ts = timeout.map(|t| rustix::event::Timespec {
            tv_sec: i64::try_from(t.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(t.subsec_nanos()),
        });
        let mut fds = [rustix::event::PollFd::new(
            &fd,
            rustix::event::PollFlags::IN,
        )];
        match rustix::event::poll(&mut fds, ts.as_ref()) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e).context("poll"),
        }
        // Drain the queued notifications; the loop re-reads the record either way.
        let mut reader = inotify::Reader::new(&fd, &mut buf);
        while reader.next().is_ok() {}
    }
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
/// The session is found from the harness's own id (`CODEX_THREAD_ID`,
/// `CLAUDE_CODE_SESSION_ID`) through the alias index, else `SPEX_SESSION_ID`.
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
    let note = args
        .note
        .clone()
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "a declaration needs a note\nhint: `spex session {:?} --note \"<text>\"`",
                args.state
            )
            .context("missing --note")
        })?;
    let id = adapters::all()
        .iter()
        .find_map(|h| {
            let var = h.session_env_var()?;
            store.alias(h.id(), env.var(var)?)
        })
        .or_else(|| env.spex_session_id.clone().filter(|id| store.session_dir(id).join("session.json").is_file()))
        .ok_or_else(|| {
            let vars: Vec<&str> = adapters::all().iter().filter_map(|h| h.session_env_var()).collect();
            anyhow::anyhow!(
                "cannot tell which session this is: no harness session id ({}) maps to a session of this project, and SPEX_SESSION_ID is not set\nhint: run this from inside an agent session, after its first hook fired",
                vars.join(", ")
            )
        })?;
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
        });
        if state == DeclaredState::Asking {
            s.status = Status::NeedsAttention;
            s.attention = Some(Attention {
                reason: "question".into(),
                text: note.clone(),
                since: now.clone(),
            });
        }
        s.updated_at.clone_from(&now);
        let mut fields = serde_json::Map::new();
        fields.insert(
            "state".into(),
            serde_json::to_value(state).expect("serializes"),
        );
        fields.insert("note".into(), note.clone().into());
        (
            Some(s.clone()),
            vec![("declared".to_owned(), "spex session".to_owned(), fields)],
            Some(s),
        )
    })?;
    let s = record.ok_or_else(|| store::session::StoreError::NotFound(id.clone()))?;
    if args.json {
        output::json(&s);
    } else {
        output::print(&format!("{}: declared {:?}\n", s.id, state).to_lowercase());
    }
    Ok(Outcome::Ok)
}
