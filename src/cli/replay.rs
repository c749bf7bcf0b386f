//! `spex replay`: play a recorded session to this terminal.

use std::io::Write;
use std::time::{Duration, Instant};

use super::args::cassette_dir;
use super::outcome::Outcome;
use super::output;
use crate::env::Env;
use crate::pty::cassette::Cassette;
use crate::pty::cassette::status::status_after;
use crate::pty::normalize;
use crate::pty::terminal::Terminal;

/// Play a recorded session: in real time, scaled, or collapsed (no pauses, same bytes).
///
/// With neither `--speed` nor `--collapsed`, as the cassette's manifest says (`replay_default`;
/// real time when it does not say). A cassette whose frames were derived by another version of
/// the terminal emulator than this spex's is refused, naming both. Plays to this terminal; `--frames` prints its frames instead; `--at MS` prints, as JSON, the
/// screen and session state at a moment of the recording. A session's latest recording is played; a
/// folder path names any of them.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A cassette folder, or a session recorded with `launch --record`: its handle (the `ID`
    /// column of `spex sessions`), name, id, or a unique prefix of a handle or id.
    #[arg(add = super::complete::sessions())]
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

/// The glyphs the recorded harness spins with (none for a harness spex does not know).
fn spinner_glyphs(cassette: &Cassette) -> &'static [char] {
    cassette.manifest.harness["id"]
        .as_str()
        .and_then(crate::adapters::lookup)
        .and_then(crate::seam::Harness::terminal)
        .map_or(&[], |t| t.spinner_glyphs())
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
    let recorded = cassette
        .records
        .iter()
        .any(|r| r.stream == "service-events.jsonl" && r.value["record"]["status"].is_string());
    let status = status_after(&events, recorded);
    let screen = term.snapshot();
    serde_json::json!({
        "t_ms": at,
        "status": status,
        "last_event": events.last(),
        "normalized": normalize::lines(&screen.lines, spinner_glyphs(cassette)),
        "screen": screen,
    })
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
    // With no flag, as the recording says it is best played.
    let collapsed = args.collapsed
        || (args.speed.is_none()
            && cassette.manifest.replay_default.as_deref() == Some("collapsed"));
    let speed = if collapsed {
        None
    } else {
        Some(args.speed.unwrap_or(1.0).max(0.001))
    };
    play(&cassette, speed)?;
    Ok(Outcome::Ok)
}

/// Writes the recorded output to this terminal (pausing as recorded, `speed` times faster;
/// no pauses without one), then gives the terminal back as it was before: the recorded
/// program's modes (hidden cursor, bracketed paste, mouse, alternate screen) are reset, also
/// when the person stops the replay with Ctrl-C (on a terminal only: a pipe gets the exact
/// recorded bytes).
fn play(cassette: &Cassette, speed: Option<f64>) -> anyhow::Result<()> {
    let stopped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(signal, std::sync::Arc::clone(&stopped))?;
    }
    let stop = || stopped.load(std::sync::atomic::Ordering::Relaxed);
    let (rows, cols) = rustix::termios::tcgetwinsize(std::io::stdout())
        .ok()
        .filter(|s| s.ws_row > 0 && s.ws_col > 0)
        .map_or((24, 80), |s| (s.ws_row, s.ws_col));
    let mut screen = Terminal::new(rows, cols);
    screen.set_answering(false);
    let start = Instant::now();
    let mut out = std::io::stdout().lock();
    let mut written = Ok(());
    'chunks: for (t_ms, bytes) in cassette.output_chunks() {
        if let Some(speed) = speed {
            #[expect(clippy::cast_precision_loss, reason = "milliseconds of a recording")]
            let due = Duration::from_secs_f64(t_ms as f64 / 1000.0 / speed);
            // Short naps, so a Ctrl-C is seen at once.
            while let Some(wait) = due.checked_sub(start.elapsed()) {
                if stop() {
                    break 'chunks;
                }
                std::thread::sleep(wait.min(Duration::from_millis(50)));
            }
        }
        if stop() {
            break;
        }
        screen.feed(bytes);
        written = out.write_all(bytes).and_then(|()| out.flush());
        if written.is_err() {
            break;
        }
    }
    // Into a pipe or a file the recording goes byte for byte, with nothing of ours.
    if rustix::termios::isatty(std::io::stdout()) {
        let _ = out.write_all(&screen.leave()).and_then(|()| out.flush());
    }
    written?;
    Ok(())
}
