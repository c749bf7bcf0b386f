//! The PTY host: one process per hosted session, detached from the terminal that launched it.
//! It runs the harness's TUI on a PTY, keeps the terminal model (answering the TUI's queries
//! while no terminal is attached), serves the session's socket (ping, inject, snapshot, resize,
//! attach, stop) and writes the program's exit to the record. Its socket answering is the proof
//! the session is alive. Threads block on reads: nothing wakes while nothing happens.
//!
//! This file starts the host and runs the pump; `session` holds what the threads share (the
//! hosted program, its screen, what the host saw it do) and the budget watch, `clients` serves
//! the socket, `recording` writes cassettes, `evidence` what the host reports in the session's
//! folder. The children never import this file.

mod clients;
mod evidence;
mod recording;
mod session;

use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::log::log;
use crate::pty::session::{Exit, Session, Size, Spawn};
use crate::pty::tee::Tee;
use crate::pty::terminal::Terminal;
use crate::seam::Harness;
use crate::seam::terminal::TerminalHost;
use crate::store::ProjectStore;
use clients::{accept, bind, listen_again_on_request};
use evidence::{record_exit, write_host_record};
use recording::{Frames, note_final, recorder};
use session::{Chunks, Shared, Watch, lock, watch_budgets};

/// Everything the host needs, resolved by the launcher.
pub struct HostSpec {
    /// Record the session as a cassette into this folder.
    pub record: Option<PathBuf>,
    pub id: String,
    pub harness: &'static dyn Harness,
    /// The harness's terminal facet (what its screen says, its keys).
    pub terminal: &'static dyn TerminalHost,
    pub store: ProjectStore,
    pub socket: PathBuf,
    pub spawn: Spawn,
    /// Literal text a recording scrubs besides spex's own rules (config `scrub`).
    pub scrub: Vec<String>,
    /// The program is the session (its end ends the session), rather than a client of a
    /// server that holds the session (a harness's UI on a server thread, which outlives it).
    pub program_is_session: bool,
}

/// Runs the host until the program ends. Returns the program's exit.
pub fn run(spec: &HostSpec) -> anyhow::Result<Exit> {
    // Our own session: closing the launching terminal must not take the host down.
    let _ = rustix::process::setsid();
    let listener = bind(&spec.socket)?;
    let tee = Tee::new();
    // The recorder listens before the program starts: its first byte is in the recording.
    let recording = spec.record.as_ref().and_then(|dir| {
        recorder(
            spec.harness,
            &spec.spawn,
            &spec.scrub,
            dir,
            &[std::process::id()],
        )
    });
    if let Some(recorder) = recording {
        tee.add_sink(Box::new(recorder));
    }
    let mut session = Session::spawn(&spec.spawn, Some(tee.clone()))?;
    let output = session.take_output();
    let child_pid = session.pid();
    let shared = share(spec, session, tee);
    if shared.tee.has_sinks() {
        shared.follow_events();
    }
    write_host_record(&spec.store, &spec.id, child_pid);
    {
        let shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("host-accept".into())
            .spawn(move || accept(&listener, &shared))?;
    }
    listen_again_on_request(&spec.socket, &shared)?;
    if spec.program_is_session {
        watch_budgets(&shared);
    }
    pump(&shared, &output);
    let exit = loop {
        if let Some(exit) = lock(&shared.session).wait_timeout(Duration::from_secs(1))? {
            break exit;
        }
    };
    if spec.program_is_session {
        record_exit(&spec.store, &spec.id, exit);
    } else {
        log!("the terminal UI ended ({exit:?}); the session lives on in its server");
    }
    // The recording ends with the last screen (its `final.json` quotes it) and every byte the
    // program wrote, even after it was reaped.
    shared.frame("end");
    note_final(&shared.tee, &spec.store, &spec.id);
    shared.tee.close_sinks();
    // The last screen says why a program ended early (a refused flag, a dialog).
    log!("final screen:\n{}", lock(&shared.term).text());
    let _ = fs_err::remove_file(&spec.socket);
    for c in lock(&shared.clients).iter() {
        let _ = c.stream.shutdown(std::net::Shutdown::Both);
    }
    Ok(exit)
}

/// What the host's threads share, around the program `session` runs.
fn share(spec: &HostSpec, session: Session, tee: Tee) -> Arc<Shared> {
    let child_pid = session.pid();
    let Size { rows, cols } = spec.spawn.size;
    let term = Arc::new(Mutex::new(Terminal::with_scrollback(
        rows,
        cols,
        SCROLLBACK_LINES,
    )));
    let frames = Arc::new(Frames {
        tee: tee.clone(),
        term: Arc::clone(&term),
        last: Mutex::new(None),
    });
    Arc::new(Shared {
        session: Mutex::new(session),
        term,
        frames,
        clients: Mutex::new(Vec::new()),
        next_client: std::sync::atomic::AtomicU64::new(0),
        attached: std::sync::atomic::AtomicBool::new(false),
        harness: spec.harness,
        terminal: spec.terminal,
        child_pid,
        store: spec.store.clone(),
        id: spec.id.clone(),
        watch: Mutex::new(Watch::default()),
        tee,
        spawn: spec.spawn.clone(),
        scrub: spec.scrub.clone(),
        following_events: std::sync::atomic::AtomicBool::new(false),
        chunks: (
            Mutex::new(Chunks {
                count: 0,
                last: std::time::Instant::now(),
            }),
            Condvar::new(),
        ),
        injecting: Mutex::new(None),
        before_paste: Mutex::new(String::new()),
        progress: Mutex::new(None),
        stalled: std::sync::atomic::AtomicBool::new(false),
        program_is_session: spec.program_is_session,
    })
}

/// The pump: every output chunk goes to the model (which may answer a query) and to every
/// attached terminal; the stream ends when the program has closed the terminal. While the
/// session is recorded, the screen is noted once output has paused for a moment (a timed
/// wait only after output and only while recording: an idle host never wakes).
fn pump(shared: &Shared, output: &Receiver<Vec<u8>>) {
    let mut unframed = false;
    loop {
        let chunk = if unframed && shared.tee.has_sinks() {
            match output.recv_timeout(QUIET_FRAME) {
                Ok(chunk) => chunk,
                Err(RecvTimeoutError::Timeout) => {
                    // Only when the screen changed since the last frame: a quiet period
                    // after output that redrew the same text (a cursor blink, a repaint) adds
                    // nothing to the recording.
                    shared.frames.note("quiet", true);
                    unframed = false;
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
        } else {
            match output.recv() {
                Ok(chunk) => chunk,
                Err(_) => break,
            }
        };
        unframed = true;
        let replies = lock(&shared.term).feed(&chunk);
        if !replies.is_empty() {
            let _ = shared.write(&replies);
        }
        let mut clients = lock(&shared.clients);
        clients.retain_mut(|c| c.stream.write_all(&chunk).is_ok());
        shared.set_clients(&clients);
        drop(clients);
        shared.observe();
        {
            let mut chunks = lock(&shared.chunks.0);
            chunks.count += 1;
            chunks.last = std::time::Instant::now();
        }
        shared.chunks.1.notify_all();
    }
}

/// How many rows that scrolled off the screen the host keeps (for `snapshot --scrollback`):
/// about 5 MB of cells at 120 columns.
const SCROLLBACK_LINES: usize = 1000;

/// How long output must pause before a recording notes the screen.
const QUIET_FRAME: Duration = Duration::from_millis(500);
