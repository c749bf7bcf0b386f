//! `spex remote`: the other machines spex reaches over SSH — add, list, remove and check them.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::outcome::Outcome;
use super::output;
use crate::env::Env;
use crate::remote::{self, Remote, RemoteError};

/// The other machines spex reaches over SSH, by name: `host:handle` names a session there.
///
/// spex runs your own `ssh` (your config, keys, agent and `known_hosts`; `BatchMode=yes`, so
/// it never prompts) with one shared connection per machine, and the spex installed there.
/// It opens no port and stores no key or password. The machines are kept under `remotes` in
/// your config file (`~/.config/spex/config.jsonc`).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Name a machine.
    Add(AddArgs),
    /// The machines: reachable, the spex version there and the round trip.
    List(ListArgs),
    /// Forget a machine (nothing on it changes).
    Remove {
        /// The machine's name.
        #[arg(add = super::complete::remotes())]
        name: String,
    },
    /// Connect to a machine and check the spex there speaks this spex's protocol; says what to
    /// do when it is missing or too old.
    Check(CheckArgs),
}

#[derive(Debug, clap::Args)]
pub struct AddArgs {
    /// The name sessions there are known by (`NAME:handle`): letters, digits, `-`, `_`.
    pub name: String,
    /// What `ssh` connects to: `user@host`, an alias of `~/.ssh/config`, `ssh://user@host:port`.
    pub dest: String,
    /// The spex program there, when it is not `spex` on the login `PATH` (e.g.
    /// `~/.cargo/bin/spex`).
    #[arg(long, value_name = "PATH")]
    pub spex: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Print the machines as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The machine's name.
    #[arg(add = super::complete::remotes())]
    pub name: String,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    match &args.action {
        Action::Add(a) => {
            let r = Remote {
                name: a.name.clone(),
                dest: a.dest.clone(),
                spex: a.spex.clone(),
            };
            remote::config::add(env, &r)?;
            output::print(&format!(
                "added `{}` ({}); `spex remote check {}` connects to it\n",
                r.name, r.dest, r.name
            ));
        }
        Action::Remove { name } => {
            let r = remote::config::remove(env, name)?;
            output::print(&format!("removed `{}` ({})\n", r.name, r.dest));
        }
        Action::List(a) => list(env, a.json)?,
        Action::Check(a) => check(env, &a.name, a.json)?,
    }
    Ok(Outcome::Ok)
}

/// One machine as `list` and `check` show it: its `hello` (or why none), the round trip,
/// and (for `list`) its live sessions.
struct Probe {
    remote: Remote,
    hello: Result<remote::Hello, RemoteError>,
    elapsed: Duration,
    live: Option<Result<Live, RemoteError>>,
}

/// The live sessions of a machine: how many, and how many need a person.
struct Live {
    sessions: usize,
    attention: usize,
}

fn probe(env: &Env, r: Remote, with_live: bool) -> Probe {
    let start = Instant::now();
    let hello = remote::hello(env, &r);
    let elapsed = start.elapsed();
    let live = (with_live && hello.is_ok()).then(|| live(env, &r));
    Probe {
        remote: r,
        hello,
        elapsed,
        live,
    }
}

/// Reads the live sessions of every project there, through `spex sessions --json`.
fn live(env: &Env, r: &Remote) -> Result<Live, RemoteError> {
    let ran = remote::run(env, r, &["sessions", "--all-projects", "--json"], None)?;
    let garbled = |message: String| RemoteError::Garbled {
        name: r.name.clone(),
        message,
    };
    if ran.exit != Some(0) {
        return Err(RemoteError::Failed {
            name: r.name.clone(),
            message: format!("`spex sessions` failed: {}", ran.stderr.trim()),
            hint: None,
        });
    }
    let rows: Vec<Value> = serde_json::from_str(&ran.stdout)
        .map_err(|e| garbled(format!("`spex sessions --json`: {e}")))?;
    Ok(Live {
        sessions: rows.len(),
        attention: rows.iter().filter(|s| !s["attention"].is_null()).count(),
    })
}

/// The features this spex's remote commands use that `hello` does not list.
fn missing_features(h: &remote::Hello) -> Vec<&'static str> {
    remote::protocol::FEATURES
        .iter()
        .copied()
        .filter(|f| !h.features.iter().any(|g| g == f))
        .collect()
}

impl Probe {
    fn json(&self) -> Value {
        let mut v = json!({
            "name": self.remote.name,
            "dest": self.remote.dest,
            "spex_path": self.remote.spex,
            "reachable": !matches!(self.hello, Err(RemoteError::Unreachable { .. })),
        });
        match &self.hello {
            Ok(h) => {
                v["spex"] = Value::from(h.spex.as_str());
                v["protocol"] = Value::from(h.protocol);
                v["features"] = json!(h.features);
                v["latency_ms"] =
                    Value::from(u64::try_from(self.elapsed.as_millis()).unwrap_or(u64::MAX));
            }
            Err(e) => v["error"] = Value::from(crate::hint::spelled(e)),
        }
        match &self.live {
            Some(Ok(l)) => {
                v["live_sessions"] = Value::from(l.sessions);
                v["attention"] = Value::from(l.attention);
            }
            Some(Err(e)) => v["live_error"] = Value::from(crate::hint::spelled(e)),
            None => {}
        }
        v
    }
}

fn list(env: &Env, json: bool) -> anyhow::Result<()> {
    let all = remote::remotes(env)?;
    // One thread per machine: a slow or hung one costs its own timeout, not the sum.
    let probes: Vec<Probe> = std::thread::scope(|s| {
        let handles: Vec<_> = all
            .into_iter()
            .map(|r| s.spawn(move || probe(env, r, true)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a probe does not panic"))
            .collect()
    });
    if json {
        output::json(&probes.iter().map(Probe::json).collect::<Vec<_>>());
        return Ok(());
    }
    if probes.is_empty() {
        output::print("no remotes; `spex remote add NAME DEST` adds one\n");
        return Ok(());
    }
    let mut rows = vec![[
        "NAME".to_owned(),
        "DEST".to_owned(),
        "SPEX".to_owned(),
        "RTT".to_owned(),
        "LIVE".to_owned(),
        "STATE".to_owned(),
    ]];
    for p in &probes {
        let (version, rtt, mut state) = match &p.hello {
            Ok(h) => (
                h.spex.clone(),
                format!("{} ms", p.elapsed.as_millis()),
                "ok".to_owned(),
            ),
            Err(e) => ("-".to_owned(), "-".to_owned(), e.to_string()),
        };
        let live = match &p.live {
            Some(Ok(l)) if l.attention > 0 => format!("{} ({} need you)", l.sessions, l.attention),
            Some(Ok(l)) => l.sessions.to_string(),
            Some(Err(e)) => {
                state = e.to_string();
                "-".to_owned()
            }
            None => "-".to_owned(),
        };
        rows.push([
            p.remote.name.clone(),
            p.remote.dest.clone(),
            version,
            rtt,
            live,
            state,
        ]);
    }
    output::print(&table(&rows));
    Ok(())
}

fn table(rows: &[[String; 6]]) -> String {
    let mut widths = [0; 6];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, (w, cell)) in widths.iter().zip(row).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  "));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn check(env: &Env, name: &str, json: bool) -> anyhow::Result<()> {
    let mut p = probe(env, remote::find(env, name)?, false);
    // A spex there that lacks a method this one uses is refused here by name, before a
    // command needs it.
    let refusal = p.hello.as_ref().ok().and_then(|h| {
        let missing = missing_features(h);
        (!missing.is_empty()).then(|| RemoteError::Unsupported {
            name: p.remote.name.clone(),
            feature: missing.join("`, `"),
            version: h.spex.clone(),
            protocol: h.protocol,
        })
    });
    if let Some(e) = refusal {
        p.hello = Err(e);
    }
    if json {
        output::json(&p.json());
    }
    let h = p.hello?;
    if !json {
        output::print(&format!(
            "`{}` ({}): spex {}, protocol {}, {} ms round trip; ok\n",
            p.remote.name,
            p.remote.dest,
            h.spex,
            h.protocol,
            p.elapsed.as_millis()
        ));
    }
    Ok(())
}
