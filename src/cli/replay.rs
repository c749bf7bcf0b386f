//! `spex replay`: play a recorded session to this terminal.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::Outcome;
use super::output;
use crate::env::Env;
use crate::pty::cassette::Cassette;
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
