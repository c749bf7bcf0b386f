//! `spex replay`: play a recorded session to this terminal.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::Outcome;
use super::output;
use crate::env::Env;
use crate::pty::cassette::Cassette;
use crate::pty::normalize;
use crate::pty::terminal::Terminal;
use crate::runtime;

/// Play a recorded session: in real time, scaled, or collapsed (no pauses, same bytes).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A cassette folder, or the id of a session recorded with `launch --record`.
    pub cassette: String,
    /// Play this many times faster (2 = twice as fast).
    #[arg(long, conflicts_with = "collapsed")]
    pub speed: Option<f64>,
    /// No pauses: write the output as fast as possible, in order.
    #[arg(long)]
    pub collapsed: bool,
    /// Print the recorded frames (screens at moments that mattered) instead.
    #[arg(long)]
    pub frames: bool,
    /// Print, as JSON, the session at this moment of the recording (milliseconds from its
    /// start, on the recording's own clock): the screen the terminal model shows, its lines
    /// with clocks, durations, spinners and token counts made stable (`normalized`, for
    /// comparing recordings) and the state the session's events had reached.
    #[arg(long, value_name = "MS", conflicts_with_all = ["frames", "speed", "collapsed"])]
    pub at: Option<u64>,
}

/// The session's status after `events` (the record's event kinds, in order): the same
/// transitions the dispatcher and the host make.
fn status_after<'a>(events: impl Iterator<Item = &'a str>) -> &'static str {
    let mut status = "starting";
    for kind in events {
        status = match kind {
            "session.started" | "turn.completed" | "turn.failed" | "turn.interrupted" => "idle",
            "turn.started" | "tool.started" | "tool.completed" | "attention.cleared" => "working",
            "input.required" => "needs_attention",
            "session.exited" => "exited",
            _ => status,
        };
    }
    status
}

/// The screen and the session state at `at` ms of the recording.
fn at(cassette: &Cassette, at: u64) -> serde_json::Value {
    let rows = cassette
        .manifest
        .terminal
        .get("rows")
        .and_then(serde_json::Value::as_u64);
    let cols = cassette
        .manifest
        .terminal
        .get("cols")
        .and_then(serde_json::Value::as_u64);
    let mut term = Terminal::new(
        rows.and_then(|r| u16::try_from(r).ok()).unwrap_or(24),
        cols.and_then(|c| u16::try_from(c).ok()).unwrap_or(80),
    );
    let mut events = Vec::new();
    for r in cassette.records.iter().filter(|r| r.t_ms <= at) {
        match r.stream {
            "output.jsonl" => {
                let range = r.value["offset"].as_u64().zip(r.value["len"].as_u64());
                if let Some((o, l)) = range
                    && let (Ok(o), Ok(l)) = (usize::try_from(o), usize::try_from(l))
                    && let Some(bytes) = cassette.output.get(o..o + l)
                {
                    term.feed(bytes);
                }
            }
            "input.jsonl" if r.value["kind"] == "resize" => {
                let size = r.value["rows"].as_u64().zip(r.value["cols"].as_u64());
                if let Some((rows, cols)) = size {
                    term.resize(
                        u16::try_from(rows).unwrap_or(24),
                        u16::try_from(cols).unwrap_or(80),
                    );
                }
            }
            "service-events.jsonl" => events.push(r.value.clone()),
            _ => {}
        }
    }
    let status = status_after(events.iter().filter_map(|e| e["kind"].as_str()));
    let screen = term.snapshot();
    serde_json::json!({
        "t_ms": at,
        "status": status,
        "last_event": events.last(),
        "normalized": normalize::lines(&screen.lines),
        "screen": screen,
    })
}

/// A cassette folder given directly, else the recording of the session the argument names.
pub fn cassette_dir(arg: &str, env: &Env) -> anyhow::Result<PathBuf> {
    let path = Path::new(arg);
    if path.join("manifest.json").is_file() {
        return Ok(path.to_owned());
    }
    let store = super::sessions::project(env)?;
    let id = store
        .resolve(arg)
        .map_err(|e| anyhow::anyhow!("`{arg}` is neither a cassette folder nor a session: {e}"))?;
    let dir = runtime::cassette_dir(&store, &id);
    if !dir.is_dir() {
        anyhow::bail!(
            "session `{id}` was not recorded\nhint: `spex launch --record` records a session"
        );
    }
    Ok(dir)
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let cassette = Cassette::open(&cassette_dir(&args.cassette, env)?)?;
    if let Some(t) = args.at {
        output::json(&at(&cassette, t));
        return Ok(Outcome::Ok);
    }
    if args.frames {
        let frames: Vec<&serde_json::Value> = cassette
            .records
            .iter()
            .filter(|r| r.stream == "frames.jsonl")
            .map(|r| &r.value)
            .collect();
        output::json(&frames);
        return Ok(Outcome::Ok);
    }
    let speed = if args.collapsed {
        None
    } else {
        Some(args.speed.unwrap_or(1.0).max(0.001))
    };
    let start = Instant::now();
    let mut out = std::io::stdout().lock();
    for (t_ms, bytes) in cassette.output_chunks() {
        if let Some(speed) = speed {
            #[expect(clippy::cast_precision_loss, reason = "milliseconds of a recording")]
            let due = Duration::from_secs_f64(t_ms as f64 / 1000.0 / speed);
            if let Some(wait) = due.checked_sub(start.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        out.write_all(bytes)?;
        out.flush()?;
    }
    Ok(Outcome::Ok)
}
