//! The table `spex sessions` prints: the sessions of this project or of every project (with a
//! `PROJECT` column), their evidence folded in, attention first; and its JSON. Reads the store
//! through `reconcile` and `runtime` as `show` does; prints nothing itself.

use crate::cli::output::{self, Style};
use crate::cli::turns::clock;
use crate::env::Env;
use crate::reconcile;
use crate::runtime;
use crate::store::ProjectStore;
use crate::store::projects::labels;
use crate::store::session::{
    LaunchedBy, Session, Status, TurnState, attention_first, count, ellipsis,
};
use crate::store::sorted::SortedRecord;
use crate::text::visible;

/// Which projects a listing reads.
pub enum Scope {
    /// The project of the checkout the command runs in.
    Here(ProjectStore),
    /// Every project of the store (`--all-projects`, or run outside any checkout).
    All,
}

impl Scope {
    /// Every project when asked (`all_projects`) or outside any checkout, else this one.
    pub fn of(all_projects: bool, env: &Env) -> Scope {
        if all_projects {
            return Scope::All;
        }
        crate::cli::args::project(env).map_or(Scope::All, Scope::Here)
    }

    fn stores(&self, env: &Env) -> Vec<ProjectStore> {
        match self {
            Scope::Here(store) => vec![store.clone()],
            Scope::All => crate::store::all_projects(&env.spex_home()),
        }
    }
}

/// The sessions listed, attention first, each with its project.
pub struct Listing {
    pub stores: Vec<ProjectStore>,
    /// What the `PROJECT` column says of each store (`None`: one project, no column).
    pub labels: Option<Vec<String>>,
    /// The records listed, with the index of their store.
    pub rows: Vec<(usize, Session)>,
    /// The order they are shown in: indices into `rows` (sorted by reference: moving
    /// thousands of records costs more than comparing them).
    pub order: Vec<usize>,
}

/// Reads the sessions of `scope`: every record with its evidence folded in and its budget
/// judged, the live ones that ran a turn (a live session spex started shows before its first
/// turn) or, with `all`, every record.
pub fn read(env: &Env, scope: &Scope, all: bool) -> anyhow::Result<Listing> {
    let stores = scope.stores(env);
    let mut book = runtime::budget::Book::default();
    // Every project's records in one fold: each harness's evidence is read once.
    let records = reconcile::sessions_of(env, &stores)?;
    let mut checkouts: Vec<Option<std::path::PathBuf>> = vec![None; stores.len()];
    for (i, s) in &records {
        if checkouts[*i].is_none() && !s.project.as_os_str().is_empty() {
            checkouts[*i] = Some(s.project.clone());
        }
    }
    let rows: Vec<(usize, Session)> = records
        .into_iter()
        .map(|(i, s)| {
            let store = &stores[i];
            let s = runtime::reconcile_hosted(env, store, &s).unwrap_or(s);
            (i, runtime::judge::judge(env, store, s, &mut book))
        })
        // Records that never ran a turn say nothing, except a live session spex started.
        .filter(|(_, s)| {
            all || (s.status != Status::Exited
                && (s.turn.is_some() || s.launched_by == LaunchedBy::Spex))
        })
        .collect();
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by(|a, b| attention_first(&rows[*a].1, &rows[*b].1));
    let labels = matches!(scope, Scope::All).then(|| {
        let pairs: Vec<_> = stores
            .iter()
            .zip(&checkouts)
            .map(|(s, c)| (s, c.as_deref()))
            .collect();
        labels(&pairs)
    });
    Ok(Listing {
        stores,
        labels,
        rows,
        order,
    })
}

impl Listing {
    /// When a running turn that no spex process judges next needs judging (its budget's
    /// deadline): no file changes then, so a watching reader wakes for it.
    pub fn next_judgement(&self, env: &Env) -> Option<std::time::Instant> {
        let mut book = runtime::budget::Book::default();
        self.rows
            .iter()
            .filter_map(|(i, s)| {
                runtime::judge::deadline(env, s, &mut book)
                    .filter(|_| !runtime::judge::owned(env, &self.stores[*i], s))
            })
            .min()
    }

    /// Prints the records as `sessions --json` does: each record as `session.json` holds it,
    /// with `live` and `subagents_running`.
    pub fn print_json(self, env: &Env) {
        let mut asked = std::collections::HashMap::new();
        let rows: Vec<SortedRecord> = self
            .order
            .iter()
            .map(|k| {
                let (i, s) = &self.rows[*k];
                // Whether any is: asked once per harness and checkout, as the text's footer
                // does; the words name each session.
                let any = *asked
                    .entry((s.harness.as_str(), s.tree.as_path()))
                    .or_insert_with(|| runtime::checked::state_unverified(env, s).is_some());
                let why = any
                    .then(|| runtime::checked::state_unverified(env, s))
                    .flatten();
                SortedRecord::new(s, runtime::live(env, &self.stores[*i], s)).unverified(why)
            })
            .collect();
        output::json(&rows);
        drop(rows);
        // The process ends next: freeing thousands of records one string at a time would
        // cost a twentieth of the run (measured), and the system takes the memory back anyway.
        std::mem::forget(self.rows);
    }

    /// The table a person reads (or what to say when there is no row).
    pub fn text(&self, env: &Env, all: bool) -> String {
        if self.rows.is_empty() {
            return if all {
                "no sessions\n"
            } else {
                "no live sessions that ran a turn (`--all` shows every record)\n"
            }
            .to_owned();
        }
        let style = Style::detect(env.no_color);
        let mut header = HEADER.to_vec();
        if self.labels.is_some() {
            header.insert(0, "PROJECT");
        }
        let mut rows = vec![header.into_iter().map(String::from).collect::<Vec<_>>()];
        for (i, s) in self.order.iter().map(|k| &self.rows[*k]) {
            let mut row = Vec::with_capacity(10);
            if let Some(labels) = &self.labels {
                row.push(visible(&labels[*i]));
            }
            row.extend(cells(Some(env), style, s));
            rows.push(row);
        }
        let mut out = output::table(&rows);
        out.push_str(&limits_footer(env, &self.rows));
        out.push_str(&unverified_footer(env, &self.rows));
        out
    }
}

/// The live sessions whose harness version failed `spex check`'s events promises: their state
/// is not trusted (`spex show` says which promise). Asked once per harness and checkout.
fn unverified_footer(env: &Env, rows: &[(usize, Session)]) -> String {
    let mut asked = std::collections::HashMap::new();
    let labels: Vec<&str> = rows
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.status != Status::Exited)
        .filter(|s| {
            *asked
                .entry((s.harness.clone(), s.tree.clone()))
                .or_insert_with(|| runtime::checked::state_unverified(env, s).is_some())
        })
        .map(Session::label)
        .collect();
    if labels.is_empty() {
        return String::new();
    }
    format!(
        "\nstate unverified (the harness version failed `spex check`): {}; `spex show` says why, `spex attach` shows the screen\n",
        labels.join(", ")
    )
}

/// When the limit a session's failed turn ran into resets, as its harness reported it: only
/// for a turn that failed on a rate limit, and only when a reached window says when.
pub(crate) fn limit_reset(env: &Env, s: &crate::store::session::Session) -> Option<String> {
    runtime::limits::failed_turn_reset(env, s)
}

/// `resets 17:46 (in 1h 12m)`.
pub(crate) fn reset_phrase(at: &str) -> String {
    let left = crate::store::parse_time(at).map_or_else(String::new, |t| {
        format!(
            " ({})",
            runtime::limits::until(t, std::time::SystemTime::now())
        )
    });
    format!("reached; resets {}{left}", clock(at))
}

/// The note, led by when the limit resets for a turn that failed on one.
fn limit_note(env: &Env, s: &Session) -> String {
    match limit_reset(env, s) {
        Some(at) => format!("limit {}: {}", reset_phrase(&at), note(s)),
        None => note(s),
    }
}

/// `limits: codex: 5h 42% (resets in 1h 12m), 7d 7% (resets in 4d 1h) · claude: unknown`, for
/// the harnesses of the rows listed, when any of them reported limits (`spex limits` says
/// more).
fn limits_footer(env: &Env, rows: &[(usize, Session)]) -> String {
    let now = std::time::SystemTime::now();
    let listed: Vec<runtime::limits::HarnessLimits> = runtime::limits::stored(env)
        .into_iter()
        .filter(|l| rows.iter().any(|(_, s)| s.harness == l.harness))
        .collect();
    // Nothing known: no line (`spex limits` says why each is unknown).
    if !listed.iter().any(|l| l.known) {
        return String::new();
    }
    let parts: Vec<String> = listed
        .iter()
        .map(|l| runtime::limits::line(l, now))
        .collect();
    format!("\nlimits: {}\n", parts.join(" · "))
}

/// The table's header after its `HOST` and `PROJECT` columns.
pub(super) const HEADER: [&str; 9] = [
    "ID", "NAME", "HARNESS", "STATUS", "TURN", "BRANCH", "UPDATED", "USAGE", "NOTE",
];

/// A session's cells under [`HEADER`].
pub(super) fn cells(env: Option<&Env>, style: Style, s: &Session) -> [String; 9] {
    [
        s.label().to_owned(),
        s.name.clone().unwrap_or_else(|| "-".into()),
        visible(&s.harness),
        status_cell(style, s.status),
        s.turn_phrase().unwrap_or_else(|| "-".into()),
        branch_cell(s),
        clock(&s.updated_at),
        s.usage.as_ref().map_or_else(
            || "-".into(),
            |u| format!("{}/{}", count(u.input_tokens), count(u.output_tokens)),
        ),
        ellipsis(
            &visible(&env.map_or_else(|| note(s), |e| limit_note(e, s))),
            60,
        ),
    ]
}

pub(super) fn status_cell(style: Style, s: Status) -> String {
    match s {
        Status::Working => style.green(s.as_str()),
        Status::NeedsAttention => style.yellow(s.as_str()),
        Status::Exited => style.dim(s.as_str()),
        _ => s.as_str().to_owned(),
    }
}

pub(super) fn note(s: &Session) -> String {
    let retrying = s
        .turn
        .as_ref()
        .filter(|t| t.state == TurnState::Running)
        .and_then(|t| t.note.as_deref());
    if s.attended == Some(false) && s.status != Status::Exited {
        return format!("no client: {}", s.headline.clone().unwrap_or_default());
    }
    match (&s.attention, &s.declared, retrying) {
        (Some(a), _, _) => format!(
            "{}: {}",
            a.reason,
            a.text.lines().next().unwrap_or_default()
        ),
        (None, Some(d), _) => format!("{}: {}", format!("{:?}", d.state).to_lowercase(), d.note),
        (None, None, Some(error)) => format!("retrying: {error}"),
        _ if s
            .turn
            .as_ref()
            .is_some_and(|t| t.stalled_at.is_some() && t.state == TurnState::Running) =>
        {
            format!("stalled: {}", s.headline.clone().unwrap_or_default())
        }
        _ => s.headline.clone().unwrap_or_default(),
    }
}

/// The branch a session works on, marked when its checkout is gone (a removed worktree): the
/// session may still run there, and stays listed.
fn branch_cell(s: &Session) -> String {
    let branch = s.branch.as_deref().map_or_else(|| "-".into(), visible);
    if s.tree_gone() {
        format!("{branch} (worktree gone)")
    } else {
        branch
    }
}
