//! The supervisor of one project's harness server, the body of the hidden `spex serve`: it
//! starts the server, records what runs (`servers/<harness>.json`), observes it and folds what
//! it says into the records of its threads, judges their turn budgets, and, through a guard
//! process, stops the server should the supervisor die. The commands' side is `client`.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::json;

use super::{Running, START_TIMEOUT, Server, signal_group, stop_process};
use crate::log::log;
use crate::runtime::budget;
use crate::runtime::error::{RuntimeError, io};
use crate::seam::evidence::{self, Finding};
use crate::seam::session_server::{ServerEvent, TurnEnd};
use crate::store;
use crate::store::session::{ProcessId, Status, new_event};

/// What the observer heard about its threads' progress, shared with the budget watch.
#[derive(Default)]
struct Progress {
    /// The last word of progress from the server, per thread.
    activity: HashMap<String, SystemTime>,
    /// Threads whose running turn the watch marked stalled.
    stalled: HashSet<String>,
    /// When a turn last started (the watch looks again shortly: its record may lag).
    poked: Option<Instant>,
    /// The observer is done: so is the watch.
    done: bool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Server<'_> {
    /// The body of `spex serve`: start the server, say so, follow it until it goes, then mark
    /// every session still live on it exited (`server gone`). A guard process (`spex serve
    /// --guard`) holds a pipe from this one: should the supervisor die in any way (`kill -9`
    /// included), the pipe closes and the guard stops the server, so it is never orphaned.
    pub fn supervise(&self, spex_bin: &Path) -> Result<(), RuntimeError> {
        // Our own session: the launching terminal closing must not take the server down.
        let _ = rustix::process::setsid();
        let server_pid = self
            .proto
            .start(&self.ctx(), START_TIMEOUT)
            .map_err(|e| self.failed_unbound(&e))?;
        let me = std::process::id();
        let running = Running {
            server_pid,
            server_start: evidence::process_start(server_pid).unwrap_or(0),
            supervisor_pid: me,
            supervisor_start: evidence::process_start(me).unwrap_or(0),
            socket: self.socket.clone(),
            started_at: Some(store::now_rfc3339()),
        };
        let guard = self.spawn_guard(spex_bin, running.server());
        if let Err(e) = &guard {
            log!("error: no guard for the server: {e}");
        }
        let file = self.running_file();
        crate::fsutil::write_private(&file, &store::json_bytes(&running))
            .map_err(RuntimeError::Fs)?;
        log!("server {server_pid} answers");
        let progress = (Mutex::new(Progress::default()), Condvar::new());
        let result = std::thread::scope(|scope| {
            scope.spawn(|| self.watch_budgets(&progress));
            let result = self.proto.observe(&self.ctx(), &mut |ev| match ev {
                ServerEvent::Activity { thread } => self.progressed(&progress, &thread, false),
                ServerEvent::TurnStarted { thread } => self.progressed(&progress, &thread, true),
                ServerEvent::RateLimits { thread, reading } => self.rate_limits(&thread, reading),
                ev => {
                    log!("{ev:?}");
                    self.fold(ev);
                }
            });
            lock(&progress.0).done = true;
            progress.1.notify_all();
            result
        });
        log!("server gone ({result:?})");
        self.sessions_gone("the server's connection closed");
        // The connection may close before the process ends; do not leave it half alive.
        if evidence::alive(running.server()) {
            signal_group(running.server_pid, rustix::process::Signal::TERM);
        }
        let _ = fs_err::remove_file(&file);
        // The guard sees its pipe close and finds the server gone.
        drop(guard);
        Ok(())
    }

    /// The server said thread `thread` made progress (`started`: a turn began): noted for
    /// the budget watch, and a turn it had marked stalled works again (`turn.resumed`).
    fn progressed(&self, progress: &(Mutex<Progress>, Condvar), thread: &str, started: bool) {
        let resumed = {
            let mut p = lock(&progress.0);
            p.activity.insert(thread.to_owned(), SystemTime::now());
            if started {
                p.poked = Some(Instant::now());
                progress.1.notify_all();
            }
            p.stalled.remove(thread)
        };
        if let Some(id) = resumed.then(|| self.record_of(thread)).flatten() {
            let _ = self.store.update(&id, |cur| {
                let Some(mut s) = cur else {
                    return (None, Vec::new(), ());
                };
                let now = store::now_rfc3339();
                let events = s.note_progress(&now, "server");
                (Some(s), events, ())
            });
        }
    }

    /// The server reported its account's rate limits, which thread `thread`'s model request
    /// brought: recorded for the user, and, when they changed, said on that thread's record
    /// (`limits.updated`, which the notifier reads for its thresholds).
    fn rate_limits(&self, thread: &str, reading: store::limits::Reading) {
        crate::runtime::limits::heard(
            self.env,
            &self.store,
            self.harness.id(),
            reading,
            "server",
            || self.record_of(thread),
        );
    }

    /// The budget watch of the threads on this server (one thread of `spex serve`): it sleeps
    /// until the next deadline of a running turn (or a turn's start), never on a timer while
    /// nothing runs. Past the turn budget a turn ends `timed_out` and, with `onTimeout:
    /// interrupt`, is interrupted (`turn/interrupt`, also for a turn a reader marked first); a
    /// working turn the server and the hooks showed no progress of for the stall budget is
    /// marked `turn.stalled` (the server's next word about the thread resumes it).
    fn watch_budgets(&self, progress: &(Mutex<Progress>, Condvar)) {
        loop {
            let now = SystemTime::now();
            let mut next: Option<SystemTime> = None;
            let mut judged = false;
            for s in self.store.sessions() {
                if !self.on_server(&s) || s.status == Status::Exited {
                    continue;
                }
                let thread = Self::thread_of(&s);
                if budget::interrupt_owed(&s) {
                    log!("turn of {thread} past its budget: interrupting it");
                    if let Err(e) = self.proto.interrupt(&self.ctx(), &thread) {
                        log!("error: interrupting {thread}: {e}");
                    }
                    budget::interrupt_sent(&self.store, &s.id);
                }
                if !s.turn_running() {
                    continue;
                }
                let b = budget::of_session(self.env, &s).unwrap_or_default();
                let activity = lock(&progress.0).activity.get(&thread).copied();
                match s.budget_deadline(&b, activity) {
                    Some(at) if at <= now => {
                        let interrupt = b.on_timeout == crate::config::OnTimeout::Interrupt;
                        let _ = self.store.update(&s.id, |cur| {
                            let Some(mut cur) = cur else {
                                return (None, Vec::new(), ());
                            };
                            let events = cur.judge_budgets(&b, now, activity, interrupt, "server");
                            if events.iter().any(|e| e.0 == "turn.stalled") {
                                lock(&progress.0).stalled.insert(thread.clone());
                            }
                            if events.is_empty() {
                                return (None, Vec::new(), ());
                            }
                            cur.updated_at = store::now_rfc3339();
                            (Some(cur), events, ())
                        });
                        judged = true;
                    }
                    Some(at) => next = Some(next.map_or(at, |n| n.min(at))),
                    None => {}
                }
            }
            if judged {
                // What was judged may owe an interrupt, or have a deadline of its own next.
                continue;
            }
            let mut p = lock(&progress.0);
            if p.done {
                return;
            }
            // A turn the server started may not be in its record yet (its hook is on its
            // way): look again shortly for a few seconds after each start.
            let settling = p
                .poked
                .is_some_and(|at| at.elapsed() < Duration::from_secs(5));
            let mut wait = next.map_or(Duration::from_secs(u64::from(u32::MAX)), |at| {
                at.duration_since(SystemTime::now()).unwrap_or_default()
            });
            if settling {
                wait = wait.min(Duration::from_millis(250));
            }
            p.poked = p.poked.filter(|_| settling);
            let _ = progress.1.wait_timeout(p, wait);
        }
    }

    /// Starts `spex serve --guard` in its own process group, reading a pipe this process
    /// holds the other end of; the returned writer is that end (closing it, or dying, lets
    /// the guard act).
    fn spawn_guard(
        &self,
        spex_bin: &Path,
        server: ProcessId,
    ) -> Result<std::process::ChildStdin, RuntimeError> {
        let mut cmd = self.serve_command(
            spex_bin,
            &[
                "--guard".to_owned(),
                format!("{}:{}", server.pid, server.start),
            ],
        );
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            // Neither a signal to the supervisor's group nor its terminal reaches the guard.
            .process_group(0);
        let mut child = cmd.spawn().map_err(io(spex_bin))?;
        let pipe = child.stdin.take().expect("stdin is piped");
        // Reaped when it ends (the supervisor outlives it only after the server is gone).
        std::thread::spawn(move || child.wait());
        Ok(pipe)
    }

    /// The body of `spex serve --guard`: waits until its supervisor's pipe closes (the
    /// supervisor ended, however), then stops `server` if it still runs and records every
    /// session still live on it exited.
    pub fn guard(&self, server: ProcessId) {
        let mut sink = Vec::new();
        // EOF (or an error) on stdin: the supervisor is gone.
        let _ = std::io::stdin().read_to_end(&mut sink);
        if !evidence::alive(server) {
            return;
        }
        log!("the supervisor is gone; stopping server {}", server.pid);
        stop_process(server);
        self.sessions_gone("its supervisor (`spex serve`) died, and spex stopped the server");
        if self.running().is_some_and(|r| r.server() == server) {
            let _ = fs_err::remove_file(self.running_file());
        }
    }

    /// What the server said, folded into the thread's record.
    fn fold(&self, ev: ServerEvent) {
        match ev {
            ServerEvent::ThreadLoaded { .. }
            | ServerEvent::TurnStarted { .. }
            | ServerEvent::Activity { .. }
            | ServerEvent::RateLimits { .. } => {}
            ServerEvent::TurnEnded { thread, turn, end } => {
                let Some(id) = self.record_of(&thread) else {
                    return;
                };
                let same = self.store.load(&id).ok().flatten().is_some_and(|s| {
                    s.turn_running()
                        && s.turn
                            .as_ref()
                            .is_some_and(|t| t.id.as_deref().is_none_or(|t| t == turn))
                });
                if !same {
                    return;
                }
                let (finding, why) = match end {
                    TurnEnd::Completed => (
                        Finding::TurnCompleted,
                        "the server reported the turn completed",
                    ),
                    TurnEnd::Interrupted => (
                        Finding::TurnInterrupted("terminal"),
                        "the server reported the turn interrupted",
                    ),
                    TurnEnd::Failed(e) => (
                        Finding::TurnFailed(e),
                        "the server reported the turn failed",
                    ),
                };
                self.conclude(&id, finding, why);
            }
            ServerEvent::CommandFailed {
                thread,
                call_id,
                exit_code,
            } => {
                let Some(id) = self.record_of(&thread) else {
                    return;
                };
                let r = self.store.update(&id, |cur| {
                    let Some(mut s) = cur else {
                        return (None, Vec::new(), ());
                    };
                    let mut events = Vec::new();
                    if !s.flags.note_failure(&call_id, exit_code) {
                        // Its hook came first and said ok: say what the server saw.
                        events.push(new_event(
                            "tool.exit",
                            "server",
                            json!({ "call_id": call_id, "ok": false, "exit_code": exit_code }),
                        ));
                    }
                    (Some(s), events, ())
                });
                if let Err(e) = r {
                    log!("error: updating session {id}: {}", crate::hint::spelled(&e));
                }
            }
            ServerEvent::ThreadClosed { thread } => {
                if let Some(id) = self.record_of(&thread) {
                    self.conclude(
                        &id,
                        Finding::Gone("thread closed"),
                        "the server let go of the thread",
                    );
                }
            }
        }
    }
}
