//! The PTY host: one process per hosted session, detached from the terminal that launched it.
//! It runs the harness's TUI on a PTY, keeps the terminal model (answering the TUI's queries
//! while no terminal is attached), serves the session's socket (ping, inject, snapshot, resize,
//! attach, stop) and writes the program's exit to the record. Its socket answering is the proof
//! the session is alive. Threads block on reads: nothing wakes while nothing happens.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use super::protocol::{Envelope, Request, Response, VERSION};
use crate::pty::cassette::{self, Manifest, Recorder, Rule, Scrubber};
use crate::pty::session::{Exit, Session, Size, Spawn};
use crate::pty::tee::{Event as TeeEvent, Tee};
use crate::pty::terminal::Terminal;
use crate::seam::Harness;
use crate::seam::terminal::{Activity, TerminalHost};
use crate::store::ProjectStore;
use crate::store::session::{ExitStatus, NewEvent, Status, TurnState};

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

struct Shared {
    session: Mutex<Session>,
    /// Shared with the thread that copies record events into a recording (it notes the screen
    /// at each one).
    term: Arc<Mutex<Terminal>>,
    /// Attached terminals (by a number of their own), each getting every output chunk.
    clients: Mutex<Vec<(u64, UnixStream)>>,
    next_client: std::sync::atomic::AtomicU64,
    harness: &'static dyn Harness,
    terminal: &'static dyn TerminalHost,
    child_pid: u32,
    store: ProjectStore,
    id: String,
    watch: Mutex<Watch>,
    /// Everything crossing the terminal; a recorder listens while the session is recorded.
    tee: Tee,
    /// Notes screens in the recording (shared with the thread that copies record events).
    frames: Arc<Frames>,
    spawn: Spawn,
    scrub: Vec<String>,
    following_events: std::sync::atomic::AtomicBool,
    /// Output chunks seen so far and when the last came, signalled on each: an injection
    /// waits for the harness to react to the previous Enter before it types.
    chunks: (Mutex<Chunks>, Condvar),
    /// Held through one whole injection, so two deliveries never interleave their keys; holds
    /// the chunk count at the last Enter until the next injection has seen the harness settle
    /// after it (the delivery that typed it is answered at once).
    injecting: Mutex<Option<u64>>,
    /// The last time the screen showed progress while a turn ran (its text changed, spinners,
    /// clocks and counters aside): evidence for the stall budget no record holds.
    progress: Mutex<Option<std::time::SystemTime>>,
    /// The record's running turn is marked stalled (by this host's budget watch).
    stalled: std::sync::atomic::AtomicBool,
    /// The program is the session (see `HostSpec`): its screen may end the session's turns.
    /// A client of a server (its thread's turns end by the server's word) may not.
    program_is_session: bool,
}

/// The output chunks a host has seen.
struct Chunks {
    count: u64,
    last: std::time::Instant,
}

/// What the host last saw the harness do, to act on transitions only.
#[derive(Default)]
struct Watch {
    activity: Option<Activity>,
    /// An interrupt key went in while a turn ran: the next idle screen ends that turn.
    interrupt_pending: bool,
    /// Who typed it: `terminal` (a person attached), `spex interrupt`, `spex answer`,
    /// `timeout`.
    interrupt_by: &'static str,
    /// When it was typed.
    interrupt_at: Option<std::time::SystemTime>,
    summary: Option<String>,
    /// The screen's text as last seen, its volatile parts (spinners, clocks) made stable.
    screen: Vec<String>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    fn write(&self, bytes: &[u8]) -> std::io::Result<()> {
        lock(&self.session).write(bytes)
    }

    /// Input from a person: a lone interrupt key (a keypress arrives as its own chunk) or
    /// Ctrl-C counts as an interrupt of the running turn.
    fn write_input(&self, bytes: &[u8]) -> std::io::Result<()> {
        self.write_input_by(bytes, "terminal")
    }

    /// [`Self::write_input`] from someone other than a person at an attached terminal.
    fn write_input_by(&self, bytes: &[u8], by: &'static str) -> std::io::Result<()> {
        let interrupt = self.terminal.interrupt_keys();
        if interrupt == Some(bytes) || bytes.contains(&0x03) {
            let mut watch = lock(&self.watch);
            // At an idle prompt the key only clears the input.
            if matches!(watch.activity, Some(Activity::Busy | Activity::Waiting)) {
                watch.interrupt_pending = true;
                watch.interrupt_by = by;
                watch.interrupt_at = Some(std::time::SystemTime::now());
            }
        }
        self.write(bytes)
    }

    /// Takes the right to type (one injection at a time), once the harness has settled after
    /// the previous injection's Enter.
    fn start_typing(&self) -> std::sync::MutexGuard<'_, Option<u64>> {
        let mut typing = lock(&self.injecting);
        if let Some(seen) = typing.take() {
            self.settle(seen);
        }
        typing
    }

    /// Waits until the harness has drawn something after output chunk `seen` and then been
    /// quiet for a moment (bounded): keys typed while it still handles an Enter can be lost
    /// (a paste right behind a queued prompt's Enter vanished in Claude under load).
    fn settle(&self, seen: u64) {
        const QUIET: Duration = Duration::from_millis(60);
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        let mut chunks = lock(&self.chunks.0);
        loop {
            let now = std::time::Instant::now();
            if chunks.count != seen && now.duration_since(chunks.last) >= QUIET {
                return;
            }
            if now >= deadline {
                return;
            }
            let wait = if chunks.count == seen {
                deadline - now
            } else {
                (chunks.last + QUIET).saturating_duration_since(now)
            };
            chunks = self
                .chunks
                .1
                .wait_timeout(chunks, wait.min(deadline - now))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Empties the input box of an idle harness before a prompt is typed into it: text left
    /// there (an interrupted prompt the harness put back, a person's draft) would join the
    /// prompt. The harness's clear key goes in batches that double until the screen shows an
    /// empty box, or a batch changes nothing.
    fn clear_input(&self) -> std::io::Result<()> {
        let Some(key) = self.terminal.clear_input_key() else {
            return Ok(());
        };
        if lock(&self.watch).activity != Some(Activity::Idle) {
            return Ok(());
        }
        let screen = || lock(&self.term).text();
        let mut sent = 0;
        let mut batch = 1;
        while !self.terminal.ready_for_input(&screen()) && sent < MAX_CLEAR_KEYS {
            let before = screen();
            let seen = lock(&self.chunks.0).count;
            self.write(&key.repeat(batch))?;
            self.settle(seen);
            sent += batch;
            batch *= 2;
            if screen() == before {
                break;
            }
        }
        if sent > 0 {
            eprintln!(
                "{} cleared the input box ({sent} keys)",
                crate::store::now_rfc3339()
            );
        }
        Ok(())
    }

    /// Notes the screen in the recording (at transitions and at the end).
    fn frame(&self, reason: &str) {
        self.frames.note(reason, false);
    }

    /// Starts recording into `dir` mid-session: the recording opens with the current screen
    /// and says its capture is partial. (A recording from the start begins before the
    /// program, in [`run`].)
    fn start_recording(&self, dir: &std::path::Path) -> std::io::Result<()> {
        if self.tee.has_sinks() {
            return Err(std::io::Error::other(
                "the session is already being recorded",
            ));
        }
        let (rows, cols) = {
            let s = lock(&self.term).snapshot();
            (s.rows, s.cols)
        };
        let mut spawn = self.spawn.clone();
        spawn.size = Size { rows, cols };
        let mut recorder = recorder(self.harness, &spawn, &self.scrub, dir).ok_or_else(|| {
            std::io::Error::other("the recording could not start (see the host log)")
        })?;
        recorder.set_partial();
        // A new recording has no frame yet to compare a quiet screen with.
        *lock(&self.frames.last) = None;
        self.tee.add_sink(Box::new(recorder));
        let screen = lock(&self.term).redraw();
        self.tee.record(TeeEvent::Output { bytes: screen });
        self.follow_events();
        Ok(())
    }

    /// Copies the session's record events into the recording (one thread per host).
    fn follow_events(&self) {
        if !self
            .following_events
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            follow_events(&self.store, &self.id, Arc::clone(&self.frames));
        }
    }

    /// After new output: acts on what the screen now says (a turn interrupted, a dialog
    /// answered, a new self-summary), never on a timer.
    fn observe(&self) {
        let (activity, summary, lines) = {
            let term = lock(&self.term);
            let title = term.title().to_owned();
            (
                self.terminal.screen_activity(&title, &term.text()),
                self.terminal.title_summary(&title),
                term.snapshot().lines,
            )
        };
        let mut watch = lock(&self.watch);
        // Progress on the screen while a turn runs: its text changed, spinners, clocks and
        // counters aside (they move while a tool hangs).
        if activity == Some(Activity::Busy) || watch.activity == Some(Activity::Busy) {
            let screen = crate::pty::normalize::lines(&lines, self.terminal.spinner_glyphs());
            let screen = steady(screen);
            if screen != watch.screen {
                watch.screen = screen;
                let now = std::time::SystemTime::now();
                *lock(&self.progress) = Some(now);
                if self
                    .stalled
                    .swap(false, std::sync::atomic::Ordering::Relaxed)
                {
                    record(&self.store, &self.id, |s, events, now| {
                        events.extend(s.note_progress(now, SOURCE));
                    });
                }
            }
        }
        if summary.is_some() && summary != watch.summary {
            watch.summary.clone_from(&summary);
            record(&self.store, &self.id, |s, _, _| {
                s.headline.clone_from(&summary);
            });
        }
        let Some(activity) = activity else { return };
        if watch.activity == Some(activity) {
            return;
        }
        let before = watch.activity.replace(activity);
        self.frame(&format!("{activity:?}").to_lowercase());
        eprintln!(
            "{} activity {before:?} -> {activity:?} (interrupt pending: {})",
            crate::store::now_rfc3339(),
            watch.interrupt_pending
        );
        match activity {
            Activity::Idle if watch.interrupt_pending => {
                watch.interrupt_pending = false;
                let by = watch.interrupt_by;
                let at = watch.interrupt_at.take();
                self.interrupted(at, by);
            }
            // A dialog that gives way to the idle prompt with no interrupt key typed: its
            // request was denied, which stops the turn (Claude's `No`, no hook follows).
            Activity::Idle if before == Some(Activity::Waiting) && self.program_is_session => self
                .stopped(
                    "the dialog was denied: the prompt came back and the turn ended",
                    "denial",
                    true,
                ),
            Activity::Busy if before == Some(Activity::Waiting) => {
                record(&self.store, &self.id, |s, events, now| {
                    if s.status == Status::NeedsAttention {
                        let before = s.state_key();
                        s.status = Status::Working;
                        events.extend(s.clear_attention(SOURCE));
                        let why = "the dialog was answered: the screen shows the turn running";
                        s.stamp(before, now, SOURCE, Some(why.into()));
                    }
                });
            }
            _ => {}
        }
    }

    /// The prompt came back after an interrupt key typed at `at` by `by`: the running turn ends
    /// `interrupted`; a turn whose end the harness reported after the key as a completion (a
    /// harness whose turn-end hook also fires on a cancel, with the partial answer) was
    /// interrupted all the same, and its ending is corrected (`turn.amended`, not a second
    /// ending).
    fn interrupted(&self, at: Option<std::time::SystemTime>, by: &'static str) {
        const WHY: &str = "an interrupt key was typed, then the prompt came back";
        let at = at.map(|t| {
            crate::store::parse_time(&humantime::format_rfc3339_millis(t).to_string()).unwrap_or(t)
        });
        record(&self.store, &self.id, |s, events, now| {
            let before = s.state_key();
            let Some(t) = s.turn.as_mut().filter(|t| t.state == TurnState::Completed) else {
                return;
            };
            let ended = t.ended_at.as_deref().and_then(crate::store::parse_time);
            if at.is_none() || ended < at {
                return;
            }
            t.state = TurnState::Interrupted;
            t.by = Some(by.to_owned());
            events.push(crate::store::session::new_event(
                "turn.amended",
                SOURCE,
                serde_json::json!({ "turn_id": t.id, "state": TurnState::Interrupted,
                    "was": TurnState::Completed, "reason": WHY, "by": by }),
            ));
            s.stamp(before, now, SOURCE, Some(WHY.into()));
        });
        self.stopped(WHY, by, false);
    }

    /// The prompt came back after the turn was stopped (by `by`, as `why` says; with
    /// `at_dialog`, only while the session waits on a dialog): the running turn ends
    /// `interrupted` and what it asked closes; a turn that had already ended (`timed_out`, the
    /// harness going on with it) has now stopped, and the session is idle with no second
    /// ending.
    fn stopped(&self, why: &'static str, by: &'static str, at_dialog: bool) {
        record(&self.store, &self.id, |s, events, now| {
            if at_dialog && s.status != Status::NeedsAttention {
                return;
            }
            let before = s.state_key();
            let ended = s.end_turn(
                TurnState::Interrupted,
                now,
                SOURCE,
                serde_json::json!({ "reason": why, "by": by }),
            );
            if ended.is_empty() && !at_dialog && s.status != Status::Working {
                return;
            }
            events.extend(ended);
            s.status = Status::Idle;
            events.extend(s.clear_attention(SOURCE));
            s.stamp(before, now, SOURCE, Some(why.into()));
        });
    }

    /// The terminal model answers queries exactly while no real terminal is attached.
    fn set_clients(&self, clients: &[(u64, UnixStream)]) {
        lock(&self.term).set_answering(clients.is_empty());
    }
}

/// Runs the host until the program ends. Returns the program's exit.
pub fn run(spec: &HostSpec) -> anyhow::Result<Exit> {
    // Our own session: closing the launching terminal must not take the host down.
    let _ = rustix::process::setsid();
    let listener = bind(&spec.socket)?;
    let tee = Tee::new();
    // The recorder listens before the program starts: its first byte is in the recording.
    let recording = spec
        .record
        .as_ref()
        .and_then(|dir| recorder(spec.harness, &spec.spawn, &spec.scrub, dir));
    if let Some(recorder) = recording {
        tee.add_sink(Box::new(recorder));
    }
    let mut session = Session::spawn(&spec.spawn, Some(tee.clone()))?;
    let output = session.take_output();
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
    let shared = Arc::new(Shared {
        session: Mutex::new(session),
        term,
        frames,
        clients: Mutex::new(Vec::new()),
        next_client: std::sync::atomic::AtomicU64::new(0),
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
        progress: Mutex::new(None),
        stalled: std::sync::atomic::AtomicBool::new(false),
        program_is_session: spec.program_is_session,
    });
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
    // The pump: every output chunk goes to the model (which may answer a query) and to every
    // attached terminal; the stream ends when the program has closed the terminal. While the
    // session is recorded, the screen is noted once output has paused for a moment (a timed
    // wait only after output and only while recording: an idle host never wakes).
    let mut unframed = false;
    loop {
        let chunk = if unframed && shared.tee.has_sinks() {
            match output.recv_timeout(QUIET_FRAME) {
                Ok(chunk) => chunk,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    // Only when the screen changed since the last frame: a quiet period
                    // after output that redrew the same text (a cursor blink, a repaint) adds
                    // nothing to the recording.
                    shared.frames.note("quiet", true);
                    unframed = false;
                    continue;
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
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
        clients.retain_mut(|(_, c)| c.write_all(&chunk).is_ok());
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
    let exit = loop {
        if let Some(exit) = lock(&shared.session).wait_timeout(Duration::from_secs(1))? {
            break exit;
        }
    };
    if spec.program_is_session {
        record_exit(&spec.store, &spec.id, exit);
    } else {
        eprintln!(
            "{} the terminal UI ended ({exit:?}); the session lives on in its server",
            crate::store::now_rfc3339()
        );
    }
    // The recording ends with the last screen (its `final.json` quotes it) and every byte the
    // program wrote, even after it was reaped.
    shared.frame("end");
    shared.tee.close_sinks();
    // The last screen says why a program ended early (a refused flag, a dialog).
    eprintln!("final screen:\n{}", lock(&shared.term).text());
    let _ = std::fs::remove_file(&spec.socket);
    for (_, c) in lock(&shared.clients).iter() {
        let _ = c.shutdown(std::net::Shutdown::Both);
    }
    Ok(exit)
}

/// The recorder writing a cassette into `dir`, or `None` (logged) when it cannot start: a
/// recording never stands in the session's way.
fn recorder(
    harness: &dyn Harness,
    spawn: &Spawn,
    scrub: &[String],
    dir: &std::path::Path,
) -> Option<Recorder> {
    let env = crate::env::Env::from_process(crate::adapters::env_vars());
    let rule = |name: &str, find: &std::path::Path, replace: &str| Rule {
        name: name.to_owned(),
        find: find.to_string_lossy().into_owned(),
        replace: replace.to_owned(),
    };
    let mut rules = vec![rule("tree path", &spawn.cwd, "$TREE")];
    if let Some(home) = &env.home {
        rules.push(rule("home path", home, "$HOME"));
    }
    rules.push(rule("spex store", &env.spex_home(), "$SPEX_HOME"));
    for (name, value) in crate::env::Env::secret_values() {
        rules.push(Rule {
            name: format!("${name}"),
            find: value,
            replace: format!("${name}"),
        });
    }
    for (i, text) in scrub.iter().enumerate() {
        rules.push(Rule {
            name: format!("config scrub[{i}]"),
            find: text.clone(),
            replace: "<scrubbed>".into(),
        });
    }
    let mut scrubber = Scrubber::new(rules);
    let argv: Vec<String> = spawn
        .argv
        .iter()
        .map(|a| scrubber.scrub_str(&a.to_string_lossy()))
        .collect();
    let binary = spawn.argv.first().map(PathBuf::from).unwrap_or_default();
    // What the binary says it is (its `--version`), beside the version spex was verified with.
    let version =
        crate::env::version_output(&binary).and_then(|o| (harness.identity().parse_version)(&o));
    let fingerprint = std::fs::metadata(&binary).ok().map(|m| {
        use std::os::unix::fs::MetadataExt;
        format!("size {} mtime {}", m.len(), m.mtime())
    });
    let manifest = Manifest {
        version: cassette::VERSION,
        id: super::start::new_id().unwrap_or_default(),
        content_digest: None,
        harness: serde_json::json!({"id": harness.id(), "binary": scrubber.scrub_str(&binary.to_string_lossy()), "fingerprint": fingerprint, "version": version, "pinned_version": harness.identity().version}),
        command: serde_json::json!({"argv": argv, "cwd": "$TREE", "env_names": crate::env::Env::names()}),
        terminal: serde_json::json!({"rows": spawn.size.rows, "cols": spawn.size.cols,
            "term": std::env::var("TERM").ok(), "locale": std::env::var("LANG").ok(),
            "model": "vt100", "model_version": "0.16"}),
        timing: serde_json::json!({"resolution_ms": 100}),
        provenance: serde_json::json!({"spex_version": env!("CARGO_PKG_VERSION"),
            "os": std::env::consts::OS, "arch": std::env::consts::ARCH,
            "recorded_at": crate::store::now_rfc3339()}),
        capture: "full".into(),
    };
    match Recorder::create(dir, manifest, scrubber) {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("error: not recording: {e}");
            None
        }
    }
}

/// Copies the session's new record events into the recording as they are appended (inotify on
/// the session folder), so they are numbered in the order they happened, each followed by a
/// frame: the screen when the event was seen. An event is copied once the record written with
/// it is saved (the store appends the events first); the last one copied carries the state the
/// record reached (`record`: status and turn state), so a replay reads spex's own state
/// instead of deriving it from the event kinds.
fn follow_events(store: &ProjectStore, id: &str, frames: Arc<Frames>) {
    let dir = store.session_dir(id);
    let store = store.clone();
    let id = id.to_owned();
    let _ = std::thread::Builder::new()
        .name("host-events".into())
        .spawn(move || {
            let mut seen = store.events(&id, None).map_or(0, |e| e.len());
            let forever = std::time::Instant::now() + Duration::from_secs(u64::from(u32::MAX));
            let _ = super::wait::wait_for(&dir, forever, || -> Option<()> {
                let (record, events) = store.committed(&id).ok()?;
                let done = events.len();
                for (i, e) in events.iter().enumerate().skip(seen) {
                    if !frames.tee.has_sinks() {
                        break;
                    }
                    let mut data = serde_json::to_value(e).unwrap_or_default();
                    if let Some(r) = record.as_ref().filter(|r| i + 1 == done && r.seq == e.seq) {
                        data["record"] = serde_json::json!({
                            "status": r.status.as_str(),
                            "turn": r.turn.as_ref().map(|t| t.state.as_str()),
                        });
                    }
                    frames.tee.record(TeeEvent::Mark {
                        stream: "service".into(),
                        data,
                    });
                    frames.note(&e.kind, false);
                }
                seen = seen.max(done);
                None
            });
        });
}

/// Notes the screen in a recording as a frame, remembering the text of the last one.
struct Frames {
    tee: Tee,
    term: Arc<Mutex<Terminal>>,
    /// The lines of the last frame noted in the current recording.
    last: Mutex<Option<Vec<String>>>,
}

impl Frames {
    /// Notes the screen with `reason` while recording; with `if_changed`, only when its text
    /// differs from the last frame's.
    fn note(&self, reason: &str, if_changed: bool) {
        if !self.tee.has_sinks() {
            return;
        }
        let mut last = lock(&self.last);
        let snapshot = lock(&self.term).snapshot();
        if if_changed && last.as_ref() == Some(&snapshot.lines) {
            return;
        }
        *last = Some(snapshot.lines.clone());
        self.tee.record(TeeEvent::Mark {
            stream: "frames".into(),
            data: serde_json::json!({ "reason": reason, "screen": snapshot }),
        });
    }
}

/// The screen's lines with a blinking mark taken out: a TUI blinks the glyph that leads a
/// running item's line (seen live: Claude's `●` before a running Bash call goes on and off
/// every half second), which is no progress. A glyph that is not a letter or digit, leading a
/// line and followed by a space, reads as a space.
fn steady(lines: Vec<String>) -> Vec<String> {
    lines
        .into_iter()
        .map(|l| {
            let mut chars = l.chars();
            match (chars.next(), chars.next()) {
                (Some(c), Some(' ')) if !c.is_alphanumeric() && !c.is_ascii() => {
                    format!("  {}", chars.as_str())
                }
                _ => l,
            }
        })
        .collect()
}

/// The budget watch of a session whose program this host runs (one thread): it sleeps until
/// the running turn's next budget deadline or a change of the record (inotify), never on a
/// timer while nothing runs. Past the turn budget it ends the turn `timed_out` and, with
/// `onTimeout: interrupt`, types the harness's interrupt key (also for a turn a reader marked
/// first); a working turn whose screen and hooks showed no progress for the stall budget is
/// marked `turn.stalled` (the screen's next progress writes `turn.resumed`).
fn watch_budgets(shared: &Arc<Shared>) {
    let shared = Arc::clone(shared);
    let _ = std::thread::Builder::new()
        .name("host-budgets".into())
        .spawn(move || {
            let env = crate::env::Env::from_process(crate::adapters::env_vars());
            let dir = shared.store.session_dir(&shared.id);
            let forever = std::time::Instant::now() + Duration::from_secs(u64::from(u32::MAX));
            loop {
                let Some(s) = shared.store.load(&shared.id).ok().flatten() else {
                    return;
                };
                if s.status == Status::Exited {
                    return;
                }
                let b = super::budget::of_session(&env, &s).unwrap_or_default();
                if super::budget::interrupt_owed(&s) {
                    owe_interrupt(&shared);
                }
                let activity = *lock(&shared.progress);
                let deadline = s.budget_deadline(&b, activity).map_or(forever, |at| {
                    std::time::Instant::now()
                        + at.duration_since(std::time::SystemTime::now())
                            .unwrap_or_default()
                });
                let seq = s.seq;
                let changed = super::wait::wait_in(&dir, deadline, false, || {
                    shared
                        .store
                        .load(&shared.id)
                        .ok()
                        .flatten()
                        .filter(|r| r.seq != seq || r.status != s.status)
                });
                if !matches!(changed, Ok(None)) {
                    continue;
                }
                let interrupt = b.on_timeout == crate::config::OnTimeout::Interrupt;
                let mut stalled = false;
                record(&shared.store, &shared.id, |s, events, _| {
                    let activity = *lock(&shared.progress);
                    let judged = s.judge_budgets(
                        &b,
                        std::time::SystemTime::now(),
                        activity,
                        interrupt,
                        SOURCE,
                    );
                    stalled = judged.iter().any(|e| e.0 == "turn.stalled");
                    events.extend(judged);
                });
                if stalled {
                    shared
                        .stalled
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                }
            }
        });
}

/// Types the interrupt key a timed-out turn is owed (`onTimeout: interrupt`), once.
fn owe_interrupt(shared: &Shared) {
    eprintln!(
        "{} the turn ran past its budget: typing the interrupt key",
        crate::store::now_rfc3339()
    );
    if let Some(keys) = shared.terminal.interrupt_keys()
        && let Err(e) = shared.write_input_by(keys, "timeout")
    {
        eprintln!("error: the interrupt key: {e}");
    }
    super::budget::interrupt_sent(&shared.store, &shared.id);
}

/// Records this host's process and the program's (pid and start time) in the session's folder:
/// the evidence that the session runs, whatever happens to the socket.
fn write_host_record(store: &ProjectStore, id: &str, child_pid: u32) {
    let me = std::process::id();
    let process = |pid: u32| {
        crate::seam::evidence::process_start(pid)
            .map(|start| crate::store::session::ProcessId { pid, start })
    };
    let (Some(host), Some(child)) = (process(me), process(child_pid)) else {
        eprintln!("error: no start time for the host ({me}) or the program ({child_pid})");
        return;
    };
    let path = super::host_record_path(store, id);
    let bytes = serde_json::to_vec(&super::HostRecord { host, child }).expect("serializes");
    if let Err(e) = crate::fsutil::write_private(&path, &bytes) {
        eprintln!("error: writing `{}`: {e}", path.display());
    }
}

/// On SIGUSR1 (spex sends it when it finds this host alive and its socket gone, e.g. the
/// runtime folder was removed at logout), binds the socket again, re-creating its folder.
fn listen_again_on_request(socket: &std::path::Path, shared: &Arc<Shared>) -> std::io::Result<()> {
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGUSR1])?;
    let (socket, shared) = (socket.to_owned(), Arc::clone(shared));
    std::thread::Builder::new()
        .name("host-rebind".into())
        .spawn(move || {
            for _ in signals.forever() {
                if UnixStream::connect(&socket).is_ok() {
                    continue;
                }
                let listener = socket
                    .parent()
                    .map_or(Ok(()), crate::fsutil::create_private_dir)
                    .map_err(anyhow::Error::from)
                    .and_then(|()| bind(&socket));
                match listener {
                    Ok(listener) => {
                        eprintln!(
                            "{} socket `{}` was gone: listening there again",
                            crate::store::now_rfc3339(),
                            socket.display()
                        );
                        let shared = Arc::clone(&shared);
                        let _ = std::thread::Builder::new()
                            .name("host-accept".into())
                            .spawn(move || accept(&listener, &shared));
                    }
                    Err(e) => eprintln!(
                        "{} socket `{}` is gone and cannot be bound again: {e}",
                        crate::store::now_rfc3339(),
                        socket.display()
                    ),
                }
            }
        })?;
    Ok(())
}

/// Binds the session's socket, replacing a stale file (one nobody answers on), never a live one.
fn bind(path: &std::path::Path) -> anyhow::Result<UnixListener> {
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            anyhow::bail!(
                "`{}` is served by a running host\nhint: this session already runs; `spex attach` to it",
                path.display()
            );
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

fn accept(listener: &UnixListener, shared: &Arc<Shared>) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        // Only the user who owns the session may drive it.
        let same_user = rustix::net::sockopt::socket_peercred(&stream)
            .is_ok_and(|cred| cred.uid == rustix::process::getuid());
        if !same_user {
            continue;
        }
        let shared = Arc::clone(shared);
        let _ = std::thread::Builder::new()
            .name("host-client".into())
            .spawn(move || serve(stream, &shared));
    }
}

fn respond(stream: &mut UnixStream, r: &Response) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(r).expect("a response serializes");
    line.push(b'\n');
    stream.write_all(&line)
}

/// One client connection: requests until it closes, or the raw stream after `attach`.
fn serve(stream: UnixStream, shared: &Shared) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let request = match serde_json::from_str::<Envelope>(&line) {
            Ok(e) if e.v == VERSION => e.request,
            Ok(e) => {
                let _ = respond(
                    &mut writer,
                    &Response::fail(format!(
                        "protocol version {} is not served (this host speaks {VERSION})",
                        e.v
                    )),
                );
                continue;
            }
            Err(e) => {
                let _ = respond(&mut writer, &Response::fail(format!("bad request: {e}")));
                continue;
            }
        };
        if let Request::Attach { rows, cols } = request {
            attach(reader, writer, shared, rows, cols);
            return;
        }
        let response = handle(shared, request);
        if respond(&mut writer, &response).is_err() {
            return;
        }
    }
}

fn handle(shared: &Shared, request: Request) -> Response {
    let ok = Response {
        ok: true,
        host_pid: Some(std::process::id()),
        child_pid: Some(shared.child_pid),
        ..Response::default()
    };
    let result = match request {
        Request::Ping => Ok(()),
        Request::Snapshot => {
            return Response {
                snapshot: Some(lock(&shared.term).snapshot()),
                ..ok
            };
        }
        Request::Scrollback { lines } => {
            let mut term = lock(&shared.term);
            let snapshot = crate::pty::terminal::Snapshot {
                scrollback: term.scrollback(lines),
                ..term.snapshot()
            };
            return Response {
                snapshot: Some(snapshot),
                ..ok
            };
        }
        Request::Inject { text, submit } => {
            eprintln!(
                "{} inject {} bytes{}",
                crate::store::now_rfc3339(),
                text.len(),
                if submit { " + submit" } else { "" }
            );
            let mut one_at_a_time = shared.start_typing();
            let Some((paste, pause, enter)) = shared.terminal.paste(&text) else {
                return Response::fail(
                    "prompts are not typed into this harness's terminal".to_owned(),
                );
            };
            let typed = if text.is_empty() {
                Ok(())
            } else {
                shared.clear_input().and_then(|()| shared.write(&paste))
            };
            typed.and_then(|()| {
                if submit {
                    if !text.is_empty() {
                        std::thread::sleep(pause);
                    }
                    let seen = lock(&shared.chunks.0).count;
                    shared.write(&enter)?;
                    *one_at_a_time = Some(seen);
                }
                Ok(())
            })
        }
        Request::Keys { expect, keys } => {
            // The screen is checked and the keys written under the terminal's lock, so no
            // redraw slips between the check and the keys.
            let term = lock(&shared.term);
            let screen = term.snapshot().lines.join("\n");
            if let Some(missing) = expect.iter().find(|e| !screen.contains(e.as_str())) {
                Err(std::io::Error::other(format!(
                    "the screen does not show `{missing}`"
                )))
            } else {
                eprintln!("{} keys {} bytes", crate::store::now_rfc3339(), keys.len());
                let written = shared.write_input_by(&keys, "spex answer");
                drop(term);
                written
            }
        }
        Request::Resize { rows, cols } => resize(shared, rows, cols),
        Request::Stop { grace_ms } => stop(shared, Duration::from_millis(grace_ms)),
        Request::Record { dir: Some(dir) } => shared.start_recording(&dir),
        Request::Record { dir: None } => {
            shared.frame("end");
            shared.tee.close_sinks();
            Ok(())
        }
        Request::Interrupt => match shared.terminal.interrupt_keys() {
            Some(keys) => shared.write_input_by(keys, "spex interrupt"),
            None => Err(std::io::Error::other("this harness has no interrupt key")),
        },
        Request::Attach { .. } => unreachable!("handled by serve"),
    };
    match result {
        Ok(()) => ok,
        Err(e) => Response::fail(e.to_string()),
    }
}

fn resize(shared: &Shared, rows: u16, cols: u16) -> std::io::Result<()> {
    lock(&shared.term).resize(rows, cols);
    lock(&shared.session).resize(Size { rows, cols })
}

/// Ends the program and its whole process group: at an idle prompt first as a person would
/// (the harness's exit keys), then SIGTERM to the group, then SIGKILL after `grace`; and once
/// the program has ended, whatever of its group it left running (a process that ignores
/// SIGTERM would hold the terminal open and the session would never read exited).
fn stop(shared: &Shared, grace: Duration) -> std::io::Result<()> {
    let deadline = std::time::Instant::now() + grace;
    if stop_program(shared, grace)? {
        // SIGKILL went to the whole group: nothing of it is left to wait for.
        return Ok(());
    }
    // What it started may still be finishing on its own (a hook of its exit).
    let settled = std::time::Instant::now() + LEFTOVER_WAIT.min(grace);
    while lock(&shared.session).group_alive() && std::time::Instant::now() < settled {
        std::thread::sleep(Duration::from_millis(10));
    }
    if !lock(&shared.session).group_alive() {
        return Ok(());
    }
    let deadline = deadline.max(std::time::Instant::now() + LEFTOVER_WAIT.min(grace));
    eprintln!(
        "{} stop: the program ended, its process group did not: SIGTERM",
        crate::store::now_rfc3339()
    );
    lock(&shared.session).signal(rustix::process::Signal::TERM)?;
    while lock(&shared.session).group_alive() {
        if std::time::Instant::now() >= deadline {
            eprintln!("{} stop: SIGKILL to the group", crate::store::now_rfc3339());
            return lock(&shared.session).signal(rustix::process::Signal::KILL);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// Ends the program itself (see [`stop`]); whether that took SIGKILL of its group.
fn stop_program(shared: &Shared, grace: Duration) -> std::io::Result<bool> {
    let keys = shared.terminal.exit_keys();
    // A turn that just ended can still be drawing its last lines (Claude runs its Stop hook
    // under a spinner): give the prompt a moment to come back.
    let idle = || lock(&shared.watch).activity == Some(Activity::Idle);
    let deadline = std::time::Instant::now() + IDLE_WAIT.min(grace);
    while !keys.is_empty() && !idle() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if idle() && !keys.is_empty() {
        eprintln!("{} stop: typing the exit keys", crate::store::now_rfc3339());
        {
            let _typing = shared.start_typing();
            for key in keys {
                shared.write(key)?;
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        if ended_within(shared, EXIT_KEYS_WAIT.min(grace))? {
            return Ok(false);
        }
    }
    eprintln!("{} stop: SIGTERM", crate::store::now_rfc3339());
    lock(&shared.session).signal(rustix::process::Signal::TERM)?;
    if ended_within(shared, grace)? {
        return Ok(false);
    }
    lock(&shared.session).signal(rustix::process::Signal::KILL)?;
    Ok(true)
}

/// Whether the program ends within `limit`; the session lock is held only for each look, so
/// the pump can still answer the program's terminal queries meanwhile.
fn ended_within(shared: &Shared, limit: Duration) -> std::io::Result<bool> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if lock(&shared.session).try_wait()?.is_some() {
            return Ok(true);
        }
        if std::time::Instant::now() >= deadline {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Streams the terminal to one client: a redraw of the screen, then every chunk (the pump
/// writes them); the client's bytes go to the program until it disconnects.
fn attach(
    mut reader: BufReader<UnixStream>,
    mut writer: UnixStream,
    shared: &Shared,
    rows: u16,
    cols: u16,
) {
    if respond(
        &mut writer,
        &Response {
            ok: true,
            ..Response::default()
        },
    )
    .is_err()
    {
        return;
    }
    // A stalled client must not stall the program: its writes time out and it is dropped.
    let _ = writer.set_write_timeout(Some(Duration::from_secs(2)));
    if rows > 0 && cols > 0 {
        let _ = resize(shared, rows, cols);
    }
    let me = shared
        .next_client
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    {
        let mut clients = lock(&shared.clients);
        let redraw = lock(&shared.term).redraw();
        if writer.write_all(&redraw).is_err() {
            return;
        }
        let Ok(clone) = writer.try_clone() else {
            return;
        };
        clients.push((me, clone));
        shared.set_clients(&clients);
    }
    let mut buf = [0u8; 4096];
    loop {
        match reader.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if shared.write_input(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = writer.shutdown(std::net::Shutdown::Both);
    let mut clients = lock(&shared.clients);
    clients.retain(|(n, _)| *n != me);
    shared.set_clients(&clients);
}

/// What host-made transitions name as their source.
const SOURCE: &str = "host";

/// How many rows that scrolled off the screen the host keeps (for `snapshot --scrollback`):
/// about 5 MB of cells at 120 columns.
const SCROLLBACK_LINES: usize = 1000;

/// How long output must pause before a recording notes the screen.
const QUIET_FRAME: Duration = Duration::from_millis(500);

/// At most this many clear keys go into one input box (a 64 KiB prompt of 1,500 lines needs
/// about 3,000 with Claude's Ctrl-U).
const MAX_CLEAR_KEYS: usize = 16_384;

/// How long `stop` waits for a session's screen to come back to its prompt before it signals.
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// How long `stop` lets what the program left in its process group end on its own (and then
/// at least, after SIGTERM, before SIGKILL).
const LEFTOVER_WAIT: Duration = Duration::from_secs(1);

/// How long `stop` waits for the harness to exit on its own exit keys before signalling.
const EXIT_KEYS_WAIT: Duration = Duration::from_secs(3);

/// Read-modify-write of the record under its lock; `f` may change it and add events.
fn record(
    store: &ProjectStore,
    id: &str,
    f: impl FnOnce(&mut crate::store::session::Session, &mut Vec<NewEvent>, &str),
) {
    let result = store.update(id, |current| {
        let Some(mut s) = current else {
            return (None, Vec::new(), ());
        };
        let before = s.clone();
        let mut events = Vec::new();
        let now = crate::store::now_rfc3339();
        f(&mut s, &mut events, &now);
        if s == before {
            return (None, Vec::new(), ());
        }
        s.updated_at = now;
        (Some(s), events, ())
    });
    if let Err(e) = result {
        eprintln!("error: updating session {id}: {e}");
    }
}

/// The program ended: the record says so, with its exit, and a running turn ends with it.
fn record_exit(store: &ProjectStore, id: &str, exit: Exit) {
    record(store, id, |s, events, now| {
        s.exit_status = Some(
            ExitStatus {
                code: exit.code,
                signal: exit.signal,
            }
            .into(),
        );
        if s.status != Status::Exited {
            let before = s.state_key();
            let mut ended = s.exit("process exited", now, SOURCE);
            if let Some((_, _, fields)) = ended.last_mut() {
                fields.insert("code".into(), exit.code.into());
                fields.insert("signal".into(), exit.signal.into());
            }
            events.extend(ended);
            s.stamp(before, now, SOURCE, None);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pty::tee::{Event as TeeEvent, Memory};

    #[test]
    fn a_blinking_mark_is_no_progress() {
        let on = vec![
            "● Bash(sleep 20)".to_owned(),
            "❯ ".to_owned(),
            "x y".to_owned(),
        ];
        let off = vec![
            "  Bash(sleep 20)".to_owned(),
            "❯ ".to_owned(),
            "x y".to_owned(),
        ];
        assert_eq!(steady(on), steady(off));
        assert_ne!(
            steady(vec!["● Working on it.".to_owned()]),
            steady(vec!["● Done.".to_owned()])
        );
    }

    #[test]
    fn a_quiet_frame_of_an_unchanged_screen_is_not_written() {
        let tee = Tee::new();
        let memory = Memory::default();
        tee.add_sink(Box::new(memory.clone()));
        let term = Arc::new(Mutex::new(Terminal::new(4, 20)));
        let frames = Frames {
            tee: tee.clone(),
            term: Arc::clone(&term),
            last: Mutex::new(None),
        };
        let reasons = || -> Vec<String> {
            memory
                .observations()
                .iter()
                .filter_map(|o| match &o.event {
                    TeeEvent::Mark { data, .. } => data["reason"].as_str().map(str::to_owned),
                    _ => None,
                })
                .collect()
        };
        lock(&term).feed(b"hello");
        frames.note("turn.started", false);
        // The same text, redrawn (the cursor moved): nothing new to note.
        lock(&term).feed(b"\rhello\x1b[H");
        frames.note("quiet", true);
        assert_eq!(reasons(), ["turn.started"]);
        lock(&term).feed(b"\r\nworld");
        frames.note("quiet", true);
        frames.note("quiet", true);
        // A frame of any other reason is written even when nothing changed.
        frames.note("end", false);
        assert_eq!(reasons(), ["turn.started", "quiet", "end"]);
    }
}
