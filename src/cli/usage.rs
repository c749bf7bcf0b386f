//! `spex usage`: the model usage the records hold (as the harnesses recorded it), summed per
//! project, harness, session or day, with the pruned sessions' daily totals, and a cost where
//! the configuration prices the model.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use super::outcome::Outcome;
use super::output;
use crate::config::prices::Prices;
use crate::env::Env;
use crate::hint::Hinted;
use crate::store::daily::{self, day_of};
use crate::store::session::Usage;
use crate::store::{self, ProjectStore};

/// Sum the model usage of sessions: tokens and requests, per project, harness, session or day.
///
/// Input tokens count every input token (those read from a cache included); `CACHED` is the
/// part of them read from a cache. Each session counts on the day (UTC) of its last change, its
/// sub-agents' usage with it. Sessions removed by `spex prune` are counted from the daily totals
/// prune keeps (by day, project, harness and model; `--by session` shows them as one row per
/// day). With `usage.prices` in the configuration (per model, per million tokens), a `COST`
/// column sums what the priced models cost; `+?` marks a sum that leaves out usage of a model
/// with no price. spex ships no prices of its own.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only sessions that changed within this long, e.g. `7d`, `24h` (pruned ones by whole day).
    #[arg(long, value_name = "DURATION")]
    pub since: Option<String>,
    /// How to group the rows.
    #[arg(long, value_enum, default_value_t = By::Day)]
    pub by: By,
    /// Every project in the store, not only this one (the default outside a repository).
    #[arg(long)]
    pub all_projects: bool,
    /// The usage recorded on another machine: the remote NAME (`spex remote list`), whose spex
    /// sums it there as here.
    #[arg(long, value_name = "NAME")]
    pub remote: Option<String>,
    /// Print `{by, since, groups: [{key, sessions, requests, input_tokens, cached_input_tokens,
    /// output_tokens, cost, unpriced}], total}` as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum By {
    Project,
    Harness,
    Session,
    Day,
}

/// One part of the usage: a session's (per model), or a pruned day's row.
struct Part {
    project: PathBuf,
    harness: String,
    /// The session's label, `None` for a pruned day's row.
    session: Option<(String, String)>,
    day: String,
    sessions: u64,
    usage: Usage,
}

/// A group's sums.
#[derive(Debug, Default, Clone, serde::Serialize)]
struct Sum {
    key: String,
    sessions: u64,
    requests: u64,
    input_tokens: u64,
    cached_input_tokens: u64,
    output_tokens: u64,
    /// What the priced usage cost; `None` without `usage.prices`.
    cost: Option<f64>,
    /// Whether some of its usage is of a model with no price (left out of `cost`).
    unpriced: bool,
}

impl Sum {
    fn add(&mut self, p: &Part, prices: &Prices, unpriced: &mut BTreeSet<String>) {
        self.sessions += p.sessions;
        self.requests += p.usage.requests;
        self.input_tokens += p.usage.input_tokens;
        self.cached_input_tokens += p.usage.cached_input_tokens;
        self.output_tokens += p.usage.output_tokens;
        if prices.is_empty() {
            return;
        }
        let u = &p.usage;
        let cost = self.cost.get_or_insert(0.0);
        if let Some(price) = u.model.as_deref().and_then(|m| prices.of(m)) {
            *cost += price.cost(u.input_tokens, u.cached_input_tokens, u.output_tokens);
        } else if u.input_tokens + u.output_tokens > 0 {
            self.unpriced = true;
            unpriced.insert(u.model.clone().unwrap_or_else(|| "(unknown)".into()));
        }
    }
}

/// The stores to sum: this project's, or every project's.
fn stores(args: &Args, env: &Env) -> anyhow::Result<(Vec<ProjectStore>, Prices)> {
    let known = crate::adapters::known();
    let here = super::args::current_tree();
    if args.all_projects || here.is_err() {
        let prices = match &here {
            Ok(t) => {
                let root = crate::config::source_root(&t.root, &t.main);
                crate::config::load(&env.user_config_file(), &root, &known)?.prices
            }
            Err(_) => crate::config::load_user(&env.user_config_file(), &known)?.prices,
        };
        return Ok((store::all_projects(&env.spex_home()), prices));
    }
    let tree = here?;
    let root = crate::config::source_root(&tree.root, &tree.main);
    let prices = crate::config::load(&env.user_config_file(), &root, &known)?.prices;
    Ok((vec![super::args::project(env)?], prices))
}

/// Every part of the stores' usage that changed at or after `since`.
fn parts(env: &Env, stores: &[ProjectStore], since: Option<SystemTime>) -> Vec<Part> {
    let since_day = since.map(|t| day_of(&humantime::format_rfc3339_millis(t).to_string()));
    let mut out = Vec::new();
    for store in stores {
        let daily = store.daily_usage();
        // The readers fold in what the harnesses logged since they last read (live sessions).
        let records = crate::reconcile::sessions(env, store).unwrap_or_else(|_| store.sessions());
        for s in records {
            let recent =
                since.is_none_or(|t| store::parse_time(&s.updated_at).is_some_and(|u| u >= t));
            // A session prune folded in but had not removed yet is counted from the fold.
            if !recent || daily.folded.contains(&s.id) {
                continue;
            }
            for (i, usage) in daily::parts(&s).into_iter().enumerate() {
                out.push(Part {
                    project: s.project.clone(),
                    harness: s.harness.clone(),
                    session: Some((s.id.clone(), s.label().to_owned())),
                    day: day_of(&s.updated_at),
                    sessions: u64::from(i == 0),
                    usage,
                });
            }
        }
        for d in daily.days {
            if since_day.as_ref().is_some_and(|from| d.day < *from) {
                continue;
            }
            out.push(Part {
                project: d.project,
                harness: d.harness,
                session: None,
                day: d.day,
                sessions: d.sessions,
                usage: d.usage,
            });
        }
    }
    out
}

/// A project as a row names it: its folder's name, or its path when two share that name.
fn project_names(parts: &[Part]) -> BTreeMap<PathBuf, String> {
    let paths: BTreeSet<&PathBuf> = parts.iter().map(|p| &p.project).collect();
    let name = |p: &PathBuf| {
        p.file_name().map_or_else(
            || p.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    };
    paths
        .iter()
        .map(|p| {
            let shared = paths.iter().filter(|q| name(q) == name(p)).count() > 1;
            let shown = if shared {
                p.display().to_string()
            } else {
                name(p)
            };
            ((*p).clone(), shown)
        })
        .collect()
}

fn key(p: &Part, by: By, names: &BTreeMap<PathBuf, String>) -> (String, String) {
    match by {
        By::Project => (p.project.display().to_string(), names[&p.project].clone()),
        By::Harness => (p.harness.clone(), p.harness.clone()),
        By::Day => (p.day.clone(), p.day.clone()),
        By::Session => match &p.session {
            Some((id, label)) => (id.clone(), label.clone()),
            None => (format!("~pruned {}", p.day), format!("pruned on {}", p.day)),
        },
    }
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let since = match &args.since {
        None => None,
        Some(text) => {
            let d: Duration = humantime::parse_duration(text).map_err(|e| {
                Hinted::new(
                    format!("`--since {text}` is not a duration"),
                    "e.g. `7d`, `24h`, `90min`",
                )
                .caused_by(e)
            })?;
            Some(
                SystemTime::now()
                    .checked_sub(d)
                    .unwrap_or(SystemTime::UNIX_EPOCH),
            )
        }
    };
    let (stores, prices) = stores(args, env)?;
    let parts = parts(env, &stores, since);
    let names = project_names(&parts);
    let mut unpriced = BTreeSet::new();
    let mut groups: BTreeMap<String, Sum> = BTreeMap::new();
    let mut total = Sum {
        key: "total".into(),
        ..Sum::default()
    };
    for p in &parts {
        let (sort, shown) = key(p, args.by, &names);
        let g = groups.entry(sort).or_insert_with(|| Sum {
            key: shown,
            ..Sum::default()
        });
        g.add(p, &prices, &mut BTreeSet::new());
        total.add(p, &prices, &mut unpriced);
    }
    let groups: Vec<Sum> = groups.into_values().collect();
    if args.json {
        output::json(&serde_json::json!({
            "by": args.by,
            "since": args.since,
            "groups": groups,
            "total": total,
        }));
        return Ok(Outcome::Ok);
    }
    output::print(&table(
        args.by,
        &groups,
        &total,
        !prices.is_empty(),
        &unpriced,
    ));
    Ok(Outcome::Ok)
}

fn table(by: By, groups: &[Sum], total: &Sum, priced: bool, unpriced: &BTreeSet<String>) -> String {
    if groups.is_empty() {
        return "no usage recorded\n".to_owned();
    }
    let head = match by {
        By::Project => "PROJECT",
        By::Harness => "HARNESS",
        By::Session => "SESSION",
        By::Day => "DAY",
    };
    let mut rows = vec![
        [
            head, "SESSIONS", "REQUESTS", "INPUT", "CACHED", "OUTPUT", "COST",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for g in groups.iter().chain([total]) {
        rows.push(vec![
            crate::text::visible(&g.key),
            g.sessions.to_string(),
            g.requests.to_string(),
            g.input_tokens.to_string(),
            g.cached_input_tokens.to_string(),
            g.output_tokens.to_string(),
            g.cost.map_or_else(String::new, |c| {
                // Cents, or four places for what costs less than one unit.
                let shown = if c >= 1.0 {
                    format!("{c:.2}")
                } else {
                    format!("{c:.4}")
                };
                if g.unpriced {
                    format!("{shown}+?")
                } else {
                    shown
                }
            }),
        ]);
    }
    if !priced {
        for r in &mut rows {
            r.pop();
        }
    }
    let mut out = output::table(&rows);
    if !unpriced.is_empty() {
        let models: Vec<&str> = unpriced.iter().map(String::as_str).collect();
        out.push_str(&format!(
            "+? leaves out usage of models with no price in `usage.prices`: {}\n",
            models.join(", ")
        ));
    }
    out
}
