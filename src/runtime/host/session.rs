//! The hosted session: what the host's threads share (the program, its screen, the attached
//! terminals, what the host last saw the harness do), how input reaches the program, the
//! transitions the screen shows, and the budget watch. Knows nothing of the socket's protocol.

use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use super::evidence::{SOURCE, record};
use super::recording::{Frames, follow_events, recorder};
use crate::log::log;
use crate::pty::session::{Session, Size, Spawn};
use crate::pty::tee::{Event as TeeEvent, Tee};
use crate::pty::terminal::Terminal;
use crate::seam::Harness;
use crate::seam::terminal::{Activity, TerminalHost};
use crate::store::ProjectStore;
use crate::store::session::{INTERRUPT_SETTLE, Status, TurnState};

pub(super) struct Shared {
    pub(super) session: Mutex<Session>,
    /// Shared with the thread that copies record events into a recording (it notes the screen
    /// at each one).
    pub(super) term: Arc<Mutex<Terminal>>,
    /// Attached terminals, each getting every output chunk.
    pub(super) clients: Mutex<Vec<Attached>>,
    pub(super) next_client: std::sync::atomic::AtomicU64,
    /// Whether a terminal is attached, as the session folder's `attached` marker says.
    pub(super) attached: std::sync::atomic::AtomicBool,
    pub(super) harness: &'static dyn Harness,
    pub(super) terminal: &'static dyn TerminalHost,
    pub(super) child_pid: u32,
    pub(super) store: ProjectStore,
    pub(super) id: String,
    pub(super) watch: Mutex<Watch>,
    /// Everything crossing the terminal; a recorder listens while the session is recorded.
    pub(super) tee: Tee,
    /// Notes screens in the recording (shared with the thread that copies record events).
    pub(super) frames: Arc<Frames>,
    pub(super) spawn: Spawn,
    pub(super) scrub: Vec<String>,
    pub(super) following_events: std::sync::atomic::AtomicBool,
    /// Output chunks seen so far and when the last came, signalled on each: an injection
    /// waits for the harness to react to the previous Enter before it types.
    pub(super) chunks: (Mutex<Chunks>, Condvar),
    /// Held through one whole injection, so two deliveries never interleave their keys; holds
    /// the chunk count at the last Enter until the next injection has seen the harness settle
    /// after it (the delivery that typed it is answered at once).
    pub(super) injecting: Mutex<Option<u64>>,
    /// The screen just before the last prompt was pasted: a prompt typed again is typed only
    /// while the screen shows nothing of the first copy since.
    pub(super) before_paste: Mutex<String>,
    /// The last time the screen showed progress while a turn ran (its text changed, spinners,
    /// clocks and counters aside): evidence for the stall budget no record holds.
    pub(super) progress: Mutex<Option<std::time::SystemTime>>,
    /// The record's running turn is marked stalled (by this host's budget watch).
    pub(super) stalled: std::sync::atomic::AtomicBool,
    /// The program is the session (see `HostSpec`): its screen may end the session's turns.
    /// A client of a server (its thread's turns end by the server's word) may not.
    pub(super) program_is_session: bool,
}

/// An attached terminal: a number of its own, its stream, and whether it only watches (its
/// bytes and sizes are dropped: it never types into the session nor resizes it).
pub(super) struct Attached {
    pub(super) id: u64,
    pub(super) stream: UnixStream,
    pub(super) read_only: bool,
}

/// The output chunks a host has seen.
pub(super) struct Chunks {
    pub(super) count: u64,
    pub(super) last: std::time::Instant,
}

/// What the host last saw the harness do, to act on transitions only.
#[derive(Default)]
pub(super) struct Watch {
    pub(super) activity: Option<Activity>,
    /// An interrupt key went in while a turn ran: the next idle screen ends that turn.
    pub(super) interrupt_pending: bool,
    /// Who typed it: `terminal` (a person attached), `spex interrupt`, `spex answer`,
    /// `timeout`.
    pub(super) interrupt_by: &'static str,
    /// When it was typed.
    pub(super) interrupt_at: Option<std::time::SystemTime>,
    pub(super) summary: Option<String>,
    /// The screen's text as last seen, its volatile parts (spinners, clocks) made stable.
    pub(super) screen: Vec<String>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub(super) fn write(&self, bytes: &[u8]) -> std::io::Result<()> {
        lock(&self.session).write(bytes)
    }

    /// Input from a person: a lone interrupt key (a keypress arrives as its own chunk) or
    /// Ctrl-C counts as an interrupt of the running turn.
    pub(super) fn write_input(&self, bytes: &[u8]) -> std::io::Result<()> {
        self.write_input_by(bytes, "terminal")
    }

    /// [`Self::write_input`] from someone other than a person at an attached terminal.
    pub(super) fn write_input_by(&self, bytes: &[u8], by: &'static str) -> std::io::Result<()> {
        let interrupt = self.terminal.interrupt_keys();
        if interrupt == Some(bytes) || bytes.contains(&0x03) {
            let mut watch = lock(&self.watch);
            // At an idle prompt the key only clears the input.
            if matches!(watch.activity, Some(Activity::Busy | Activity::Waiting)) {
                watch.interrupt_pending = true;
                watch.interrupt_by = by;
                watch.interrupt_at = Some(std::time::SystemTime::now());
                drop(watch);
                // In the record before the harness sees the key: its turn-end report, which
                // may follow the key at once, then ends the turn `interrupted`.
                if crate::runtime::marks::mark_interrupt_key(&self.store, &self.id, by) {
                    log!("interrupt key by {by}: noted on the running turn");
                }
            }
        }
        self.write(bytes)
    }

    /// Takes the right to type (one injection at a time), once the harness has settled after
    /// the previous injection's Enter.
    pub(super) fn start_typing(&self) -> std::sync::MutexGuard<'_, Option<u64>> {
        let mut typing = lock(&self.injecting);
        if let Some(seen) = typing.take() {
            self.settle(seen);
        }
        typing
    }

    /// Waits until the harness has drawn something after output chunk `seen` and then been
    /// quiet for a moment (bounded): keys typed while it still handles an Enter can be lost
    /// (a paste right behind a queued prompt's Enter vanished in Claude under load).
    pub(super) fn settle(&self, seen: u64) {
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

    /// Whether the input box, empty before a paste, shows text now: waits (bounded) for a
    /// harness slow to draw it. A paste seen there reached the harness, so a delivery not
    /// confirmed later was taken (its hook late) or lacks only its Enter, and is never typed
    /// again; a paste never seen may have been dropped (typed while the harness read no keys).
    pub(super) fn shows_typed_text(&self) -> bool {
        // Within the client's call timeout with room to spare; an Enter behind a paste the
        // harness has not taken yet may be taken with it as one chunk.
        let deadline = std::time::Instant::now() + Duration::from_secs(4);
        loop {
            if !self.terminal.ready_for_input(&lock(&self.term).text()) {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Empties the input box of `text` typed before, whatever the screen shows (a harness slow
    /// to draw shows an empty box while it holds the text): the clear key once per line it
    /// could take, and once more, in one write. The harness takes keys in order, so the box is
    /// empty when the next paste comes. Clear keys do nothing on an empty box (see each
    /// adapter's `clear_input_key`).
    pub(super) fn clear_blindly(&self, text: &str) -> std::io::Result<()> {
        let Some(key) = self.terminal.clear_input_key() else {
            return Ok(());
        };
        let keys = 2 * (text.lines().count() + 1);
        let seen = lock(&self.chunks.0).count;
        self.write(&key.repeat(keys))?;
        self.settle(seen);
        log!("cleared the input box blindly ({keys} keys)");
        Ok(())
    }

    /// Empties the input box of an idle harness before a prompt is typed into it: text left
    /// there (an interrupted prompt the harness put back, a person's draft) would join the
    /// prompt. The harness's clear key goes in batches that double until the screen shows an
    /// empty box, or a batch changes nothing.
    pub(super) fn clear_input(&self) -> std::io::Result<()> {
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
            log!("cleared the input box ({sent} keys)");
        }
        Ok(())
    }

    /// Notes the screen in the recording (at transitions and at the end).
    pub(super) fn frame(&self, reason: &str) {
        self.frames.note(reason, false);
    }

    /// Starts recording into `dir` mid-session: the recording opens with the current screen
    /// and says its capture is partial. (A recording from the start begins before the
    /// program, in [`super::run`].)
    pub(super) fn start_recording(&self, dir: &std::path::Path) -> std::io::Result<()> {
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
        let pids = [std::process::id(), self.child_pid];
        let mut recorder =
            recorder(self.harness, &spawn, &self.scrub, dir, &pids).ok_or_else(|| {
                std::io::Error::other("the recording could not start (see the host log)")
            })?;
        recorder.set_partial("started mid-session: it opens with the screen as it was");
        // A new recording has no frame yet to compare a quiet screen with.
        *lock(&self.frames.last) = None;
        self.tee.add_sink(Box::new(recorder));
        let screen = lock(&self.term).redraw();
        self.tee.record(TeeEvent::Output { bytes: screen });
        self.follow_events();
        Ok(())
    }

    /// Copies the session's record events into the recording (one thread per host).
    pub(super) fn follow_events(&self) {
        if !self
            .following_events
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            follow_events(&self.store, &self.id, Arc::clone(&self.frames));
        }
    }

    /// After new output: acts on what the screen now says (a turn interrupted, a dialog
    /// answered, a new self-summary), never on a timer.
    pub(super) fn observe(&self) {
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
        log!(
            "activity {before:?} -> {activity:?} (interrupt pending: {})",
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

    /// The prompt came back after an interrupt key typed at `at` by `by`: the running turn
    /// ends `interrupted`. A turn the harness already reported ended stays as its one ending
    /// says (the key was marked on the record before the harness saw it, so a report the key
    /// caused ended it `interrupted` already); a key typed longer than [`INTERRUPT_SETTLE`]
    /// ago did not bring the prompt back (the turn went on past it) and ends nothing.
    pub(super) fn interrupted(&self, at: Option<std::time::SystemTime>, by: &'static str) {
        const WHY: &str = "an interrupt key was typed, then the prompt came back";
        let settled = at
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|d| d > INTERRUPT_SETTLE);
        if settled {
            log!("the prompt came back long after the interrupt key: it ended nothing");
            return;
        }
        self.stopped(WHY, by, false);
    }

    /// The prompt came back after the turn was stopped (by `by`, as `why` says; with
    /// `at_dialog`, only while the session waits on a dialog): the running turn ends
    /// `interrupted` and what it asked closes; a turn that had already ended (`timed_out`, the
    /// harness going on with it) has now stopped, and the session is idle with no second
    /// ending.
    pub(super) fn stopped(&self, why: &'static str, by: &'static str, at_dialog: bool) {
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

    /// The terminal model answers queries exactly while no real terminal that types is
    /// attached (a watching one's replies are dropped with the rest of its bytes). A watching
    /// terminal counts as a person looking (the `attached` marker the notifier reads).
    pub(super) fn set_clients(&self, clients: &[Attached]) {
        let attached = !clients.is_empty();
        lock(&self.term).set_answering(clients.iter().all(|c| c.read_only));
        // Written on a change only (this runs for every output chunk).
        if self
            .attached
            .swap(attached, std::sync::atomic::Ordering::SeqCst)
            != attached
        {
            let marker = self.store.attached_file(&self.id);
            let r = if attached {
                crate::fsutil::replace(&marker, format!("{}\n", std::process::id()).as_bytes())
            } else {
                fs_err::remove_file(&marker)
            };
            if let Err(e) = r {
                crate::log::log!("host: the attached marker: {e}");
            }
        }
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
pub(super) fn watch_budgets(shared: &Arc<Shared>) {
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
                let b = crate::runtime::budget::of_session(&env, &s).unwrap_or_default();
                if crate::runtime::budget::interrupt_owed(&s) {
                    owe_interrupt(&shared);
                }
                let activity = *lock(&shared.progress);
                let deadline = s.budget_deadline(&b, activity).map_or(forever, |at| {
                    std::time::Instant::now()
                        + at.duration_since(std::time::SystemTime::now())
                            .unwrap_or_default()
                });
                let seq = s.seq;
                let changed = crate::runtime::wait::wait_in(&dir, deadline, false, || {
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
    log!("the turn ran past its budget: typing the interrupt key");
    if let Some(keys) = shared.terminal.interrupt_keys()
        && let Err(e) = shared.write_input_by(keys, "timeout")
    {
        log!("error: the interrupt key: {e}");
    }
    crate::runtime::budget::interrupt_sent(&shared.store, &shared.id);
}

/// At most this many clear keys go into one input box (a 64 KiB prompt of 1,500 lines needs
/// about 3,000 with Claude's Ctrl-U).
const MAX_CLEAR_KEYS: usize = 16_384;

#[cfg(test)]
mod tests {
    use super::steady;

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
}
