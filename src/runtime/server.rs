//! Sessions that run as threads of one harness server per project (the adapter's
//! `SessionServer`): the server's lifecycle (started at most once per project under a lock,
//! supervised by a detached `spex serve` that also observes it, stopped with the project's
//! last thread), and launch, deliver, interrupt, stop, resume and attach on a thread. The
//! record of a thread is keyed by the thread id, as the hooks key it.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::answer::{self, Answered};
use super::budget;
use super::client::{call, runtime_dir, socket_path};
use super::delivery::{Delivery, Mode, StageAt, elapsed_ms};
use super::error::{RuntimeError, io};
use super::marks::mark_interrupting;
use super::protocol::Request;
use super::start::{Launch, Launched, identity_vars, start_host};
use super::wait::{interrupted, wait_for};
use crate::env::Env;
use crate::seam::Harness;
use crate::seam::evidence::{self, Evidence, Finding};
use crate::seam::server::{
    DeliverMode, ServerCtx, ServerError, ServerErrorKind, ServerEvent, SessionServer, TurnEnd,
};
use crate::store::session::{LaunchedBy, ProcessId, Session, Status, StoreError, new_event};
use crate::store::{self, ProjectStore};

/// How long a server may take to answer its first request.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an answering server may take to answer the liveness check.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What `spex serve` writes once the server answers: the processes to signal at the end, and
/// the server's identity (pid and start time) its sessions are bound to.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Running {
    server_pid: u32,
    server_start: u64,
    supervisor_pid: u32,
    /// The supervisor's start time (0 when written by an older spex).
    #[serde(default)]
    supervisor_start: u64,
    socket: PathBuf,
    /// When the server answered (absent when written by an older spex).
    #[serde(default)]
    started_at: Option<String>,
}

impl Running {
    fn server(&self) -> ProcessId {
        ProcessId {
            pid: self.server_pid,
            start: self.server_start,
        }
    }

    fn supervisor(&self) -> ProcessId {
        ProcessId {
            pid: self.supervisor_pid,
            start: self.supervisor_start,
        }
    }
}

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

/// What `spex server status` reports about one project's server.
#[derive(Debug, Clone, Serialize)]
pub struct ServerStatus {
    pub harness: String,
    /// The server process runs (the pid and start time its supervisor recorded).
    pub running: bool,
    /// It answers on its socket.
    pub answers: bool,
    pub pid: Option<u32>,
    pub supervisor_pid: Option<u32>,
    /// The supervisor runs (a server whose supervisor is gone is stopped by its guard).
    pub supervised: bool,
    pub started_at: Option<String>,
    pub uptime_s: Option<u64>,
    pub socket: PathBuf,
    pub log: PathBuf,
    /// The threads it holds, with the session each belongs to (when spex has its record).
    pub threads: Vec<HeldThread>,
}

/// One thread a server holds: the session record it belongs to (its id, handle and status),
/// when spex has one.
#[derive(Debug, Clone, Serialize)]
pub struct HeldThread {
    pub thread: String,
    pub session: Option<String>,
    pub handle: Option<String>,
    pub status: Option<String>,
}

/// One project's server for one harness.
pub struct Server<'a> {
    env: &'a Env,
    harness: &'static dyn Harness,
    proto: &'static dyn SessionServer,
    store: ProjectStore,
    main: PathBuf,
    binary: PathBuf,
    args: Vec<String>,
    socket: PathBuf,
    log: PathBuf,
}

impl<'a> Server<'a> {
    /// The server of `harness` for the project `store` keeps (main checkout `main`), or `None`
    /// when the harness runs no server.
    pub fn new(
        env: &'a Env,
        harness: &'static dyn Harness,
        store: &ProjectStore,
        main: &Path,
        binary: PathBuf,
        args: Vec<String>,
    ) -> Result<Option<Server<'a>>, RuntimeError> {
        let Some(proto) = harness.server() else {
            return Ok(None);
        };
        let socket = runtime_dir(env)?.join(format!(
            "srv-{}-{}.sock",
            store::path_key(main),
            harness.id()
        ));
        Ok(Some(Server {
            env,
            harness,
            proto,
            store: store.clone(),
            main: main.to_owned(),
            binary,
            args,
            socket,
            log: store
                .dir
                .join("servers")
                .join(format!("{}.log", harness.id())),
        }))
    }

    fn dir(&self) -> PathBuf {
        self.store.dir.join("servers")
    }

    fn running_file(&self) -> PathBuf {
        self.dir().join(format!("{}.json", self.harness.id()))
    }

    fn ctx(&self) -> ServerCtx<'_> {
        ServerCtx {
            env: self.env,
            binary: &self.binary,
            args: &self.args,
            main: &self.main,
            socket: &self.socket,
            log: &self.log,
        }
    }

    /// Whether the server answers.
    pub fn answers(&self) -> bool {
        self.proto.answers(&self.ctx(), PROBE_TIMEOUT)
    }

    /// A server failure no session is bound to yet (starting the server, starting a thread).
    fn failed_unbound(&self, e: &ServerError) -> RuntimeError {
        RuntimeError::ServerWide {
            harness: self.harness.id().to_owned(),
            message: e.message.clone(),
            hint: format!("see the server log `{}`", self.log.display()),
        }
    }

    fn failed(&self, id: &str, e: &ServerError) -> RuntimeError {
        let hint = match e.kind {
            ServerErrorKind::Down => format!(
                "the {} server of this project is not running; `spex resume {id}` starts it and brings the session back",
                self.harness.id()
            ),
            ServerErrorKind::UnknownThread => format!(
                "the server does not know the session's thread; `spex show {id}` shows its record"
            ),
            ServerErrorKind::Timeout => {
                format!("the server is busy or stuck; try again, or `spex stop {id}`")
            }
            ServerErrorKind::Refused | ServerErrorKind::Start => {
                format!("see the server log `{}`", self.log.display())
            }
        };
        RuntimeError::Server {
            id: id.to_owned(),
            message: e.message.clone(),
            hint,
        }
    }

    /// Starts the server unless one answers, under the project's lock so two commands never
    /// start two; the supervisor (`spex serve`) runs detached and outlives this command.
    pub fn ensure(&self, spex_bin: &Path) -> Result<(), RuntimeError> {
        let dir = self.dir();
        let lock = dir.join(format!("{}.lock", self.harness.id()));
        store::lock::with(&lock, || self.ensure_locked(spex_bin)).map_err(io(&lock))?
    }

    fn ensure_locked(&self, spex_bin: &Path) -> Result<(), RuntimeError> {
        if self.answers() {
            return Ok(());
        }
        // A socket nothing answers on is left over from a killed server.
        if std::fs::symlink_metadata(&self.socket).is_ok() {
            std::fs::remove_file(&self.socket).map_err(io(&self.socket))?;
        }
        let log = self.log.clone();
        let mut file = {
            use std::os::unix::fs::OpenOptionsExt as _;
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(crate::fsutil::PRIVATE_FILE)
                .open(&log)
                .map_err(io(&log))?
        };
        let from = file.seek(SeekFrom::End(0)).map_err(io(&log))?;
        let mut cmd = Command::new(spex_bin);
        cmd.arg("serve")
            .arg("--harness")
            .arg(self.harness.id())
            .arg("--project")
            .arg(&self.main)
            .arg("--binary")
            .arg(&self.binary)
            .arg("--")
            .args(&self.args)
            .current_dir(&self.main)
            .stdin(Stdio::null())
            .stdout(file.try_clone().map_err(io(&log))?)
            .stderr(file);
        // The server is shared by every thread: no session's identity may leak into it.
        for var in identity_vars() {
            cmd.env_remove(var);
        }
        cmd.env(crate::seam::server::SERVER_MARK, "1");
        let mut child = cmd.spawn().map_err(io(spex_bin))?;
        let deadline = Instant::now() + START_TIMEOUT + Duration::from_secs(5);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(RuntimeError::ServerWide {
                    harness: self.harness.id().to_owned(),
                    message: format!("it did not start ({status}):\n{}", tail(&log, from)),
                    hint: format!("see `{}`", log.display()),
                });
            }
            if self.running_file().is_file() && self.answers() {
                break;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                return Err(RuntimeError::ServerWide {
                    harness: self.harness.id().to_owned(),
                    message: format!("it did not answer within {} s", START_TIMEOUT.as_secs()),
                    hint: format!("see `{}`", log.display()),
                });
            }
            // Startup only: the supervisor announces readiness by a file; look 20 times a second.
            std::thread::sleep(Duration::from_millis(50));
        }
        // The supervisor leads its own session and outlives us; reap it if it ends first.
        std::thread::spawn(move || child.wait());
        Ok(())
    }

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
            eprintln!("error: no guard for the server: {e}");
        }
        let file = self.running_file();
        crate::fsutil::write_private(&file, &store::json_bytes(&running)).map_err(io(&file))?;
        eprintln!("{} server {server_pid} answers", store::now_rfc3339());
        let progress = (Mutex::new(Progress::default()), Condvar::new());
        let result = std::thread::scope(|scope| {
            scope.spawn(|| self.watch_budgets(&progress));
            let result = self.proto.observe(&self.ctx(), &mut |ev| match ev {
                ServerEvent::Activity { thread } => self.progressed(&progress, &thread, false),
                ServerEvent::TurnStarted { thread } => self.progressed(&progress, &thread, true),
                ev => {
                    eprintln!("{} {ev:?}", store::now_rfc3339());
                    self.fold(ev);
                }
            });
            lock(&progress.0).done = true;
            progress.1.notify_all();
            result
        });
        eprintln!("{} server gone ({result:?})", store::now_rfc3339());
        self.sessions_gone("the server's connection closed");
        // The connection may close before the process ends; do not leave it half alive.
        if evidence::alive(running.server()) {
            signal_group(running.server_pid, rustix::process::Signal::TERM);
        }
        let _ = std::fs::remove_file(&file);
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
                    eprintln!(
                        "{} turn of {thread} past its budget: interrupting it",
                        store::now_rfc3339()
                    );
                    if let Err(e) = self.proto.interrupt(&self.ctx(), &thread) {
                        eprintln!("error: interrupting {thread}: {e}");
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
        let mut cmd = Command::new(spex_bin);
        cmd.arg("serve")
            .arg("--harness")
            .arg(self.harness.id())
            .arg("--project")
            .arg(&self.main)
            .arg("--binary")
            .arg(&self.binary)
            .arg("--guard")
            .arg(format!("{}:{}", server.pid, server.start))
            .arg("--")
            .args(&self.args)
            .current_dir(&self.main)
            .stdin(Stdio::piped())
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
        eprintln!(
            "{} the supervisor is gone; stopping server {}",
            store::now_rfc3339(),
            server.pid
        );
        stop_process(server);
        self.sessions_gone("its supervisor (`spex serve`) died, and spex stopped the server");
        if self.running().is_some_and(|r| r.server() == server) {
            let _ = std::fs::remove_file(self.running_file());
        }
    }

    /// Every session still live on this server: `exited` (`server gone`), with `why`; their
    /// hosts' terminals close too.
    fn sessions_gone(&self, why: &str) {
        for s in self.store.sessions() {
            if self.on_server(&s) && s.status != Status::Exited {
                self.conclude(&s.id, Finding::Gone("server gone"), why);
                let _ = call(self.env, &s.id, Request::Stop { grace_ms: 2000 });
            }
        }
    }

    /// Whether `s` is a thread on this server (launched or resumed by spex).
    fn on_server(&self, s: &Session) -> bool {
        s.harness == self.harness.id() && s.launched_by == LaunchedBy::Spex
    }

    /// The record of a thread, when spex knows it.
    fn record_of(&self, thread: &str) -> Option<String> {
        let id = self
            .store
            .alias(self.harness.id(), thread)
            .unwrap_or_else(|| thread.to_owned());
        self.store.load(&id).ok().flatten().map(|s| s.id)
    }

    fn conclude(&self, id: &str, finding: Finding, why: &str) {
        let ev = Evidence {
            child_failures: Vec::new(),
            process: None,
            observed: None,
            finding: Some(finding),
            source: "server".into(),
            why: Some(why.to_owned()),
            attended: None,
        };
        let now = store::now_rfc3339();
        let r = self.store.update(id, |cur| {
            let Some(mut s) = cur else {
                return (None, Vec::new(), ());
            };
            let observed = s.observed.clone();
            let events = evidence::apply(&mut s, &ev, &now);
            s.observed = observed;
            (Some(s), events, ())
        });
        if let Err(e) = r {
            eprintln!("error: updating session {id}: {e}");
        }
    }

    /// What the server said, folded into the thread's record.
    fn fold(&self, ev: ServerEvent) {
        match ev {
            ServerEvent::ThreadLoaded { .. }
            | ServerEvent::TurnStarted { .. }
            | ServerEvent::Activity { .. } => {}
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
                    eprintln!("error: updating session {id}: {e}");
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

    fn load(&self, id: &str) -> Result<Session, RuntimeError> {
        Ok(self
            .store
            .load(id)?
            .ok_or_else(|| StoreError::NotFound(id.to_owned()))?)
    }

    /// The record of a session on this server. A session the person started in their own
    /// terminal lives in another server process: reaching it through this one would load its
    /// thread twice.
    fn ours(&self, id: &str) -> Result<Session, RuntimeError> {
        let s = self.load(id)?;
        if !self.on_server(&s) {
            return Err(RuntimeError::Server {
                id: id.to_owned(),
                message: format!(
                    "it was started outside spex (its own {} process holds it)",
                    self.harness.id()
                ),
                hint: format!(
                    "use its own terminal; once it has exited, `spex resume {id}` brings it onto spex's server"
                ),
            });
        }
        Ok(s)
    }

    fn thread_of(s: &Session) -> String {
        s.harness_session_id.clone().unwrap_or_else(|| s.id.clone())
    }

    /// A new thread in `l.tree`, its record (keyed by the thread id, `launched_by: spex`, bound
    /// to the server process by the pid and start time its supervisor recorded), the harness's
    /// terminal UI on it under a spex host, and `prompt` as its first turn.
    pub fn launch(
        &self,
        l: &Launch,
        prompt: Option<&str>,
    ) -> Result<(Launched, Option<Delivery>), RuntimeError> {
        self.ensure(&l.spex_bin)?;
        let tree = &l.tree;
        let name = format!("spex {}", tree.branch().as_deref().unwrap_or("session"));
        let thread = self
            .proto
            .start_thread(&self.ctx(), &tree.root, &name)
            .map_err(|e| self.failed_unbound(&e))?;
        let now = store::now_rfc3339();
        let server = self.running().map(|r| r.server());
        self.store.update(&thread, |cur| {
            // A hook may have made the record already; either way it is spex's now.
            let mut s = cur.unwrap_or_else(|| {
                Session::new(
                    &thread,
                    self.harness.id(),
                    Some(thread.clone()),
                    tree,
                    LaunchedBy::Spex,
                    &now,
                )
            });
            s.launched_by = LaunchedBy::Spex;
            s.set_process(server);
            if s.status == Status::Starting {
                s.status = Status::Idle;
            }
            s.updated_at.clone_from(&now);
            let mut f = serde_json::Map::new();
            f.insert("harness".into(), self.harness.id().into());
            f.insert("thread".into(), thread.clone().into());
            (
                Some(s),
                vec![("session.launched".to_owned(), "launch".to_owned(), f)],
                (),
            )
        })?;
        self.store.set_alias(self.harness.id(), &thread, &thread)?;
        // Ctrl-C (see `catch_interrupt`) ends the launch at the next step: the caller stops
        // the thread started here and says so.
        let cancelled = || interrupted().then(|| RuntimeError::Cancelled { id: thread.clone() });
        if let Some(e) = cancelled() {
            return Err(e);
        }
        let launched = self.host(l, &thread)?;
        if let Some(e) = cancelled() {
            return Err(e);
        }
        let delivery = prompt.map(|p| self.deliver(&thread, p)).transpose()?;
        if let Some(e) = cancelled() {
            return Err(e);
        }
        Ok((launched, delivery))
    }

    /// Runs the harness's terminal UI on session `id`'s thread under a spex host (as every
    /// hosted session runs), unless a host already answers for it; the host's program is a
    /// client of the thread, so its end does not end the session.
    pub fn host(&self, l: &Launch, id: &str) -> Result<Launched, RuntimeError> {
        let s = self.ours(id)?;
        if s.status == Status::Exited {
            return Err(RuntimeError::exited(&s));
        }
        if let Ok(r) = call(self.env, id, Request::Ping) {
            return Ok(Launched {
                id: id.to_owned(),
                socket: socket_path(self.env, id)?,
                host_pid: r.host_pid,
                child_pid: r.child_pid,
            });
        }
        let thread = Self::thread_of(&s);
        let loaded = self
            .proto
            .loaded(&self.ctx(), &thread)
            .map_err(|e| self.failed(id, &e))?;
        if !loaded {
            return Err(self.failed(
                id,
                &ServerError::new(
                    ServerErrorKind::UnknownThread,
                    "the server does not hold the session's thread",
                ),
            ));
        }
        let argv = self.proto.tui_argv(&self.ctx(), &thread);
        let store = self.store.clone();
        start_host(l, &store, id, &argv)
    }

    /// Whether the supervisor (`spex serve`, which also judges its threads' budgets) runs.
    pub fn supervised(&self) -> bool {
        self.running()
            .is_some_and(|r| evidence::alive(r.supervisor()))
    }

    fn running(&self) -> Option<Running> {
        let bytes = std::fs::read(self.running_file()).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Delivers `text` into session `id`'s thread: steered into its running turn, else a new
    /// turn; confirmed by the server's answer naming the turn.
    pub fn deliver(&self, id: &str, text: &str) -> Result<Delivery, RuntimeError> {
        let started = Instant::now();
        let s = self.ours(id)?;
        if s.status == Status::Exited {
            return Err(RuntimeError::exited(&s));
        }
        let d = self
            .proto
            .deliver(&self.ctx(), &Self::thread_of(&s), text)
            .map_err(|e| self.failed(id, &e))?;
        Ok(Delivery {
            delivered: true,
            mode: match d.mode {
                DeliverMode::Steer => Mode::Steer,
                DeliverMode::Start => Mode::Start,
            },
            turn_id: Some(d.turn_id),
            confirmed: true,
            elapsed_ms: elapsed_ms(started),
            // The text goes to the server as data, never typed into a terminal.
            sanitized: false,
            // The server's answer names the turn that runs with the text.
            stages: vec![
                StageAt::now("accepted", started),
                StageAt::now("started", started),
            ],
        })
    }

    /// Answers attention `a` of session `id` as a client of the server, confirmed by the
    /// server (the request resolved, the item's end); then the record closes it.
    pub fn answer(
        &self,
        id: &str,
        a: &crate::store::session::Attention,
        r: &crate::seam::answer::Response,
    ) -> Result<Answered, RuntimeError> {
        let started = Instant::now();
        let s = self.load(id)?;
        // A session the person started runs on the harness's own server, when it has one
        // other clients may join (Codex's per-user background server); else only its
        // terminal answers it.
        let own;
        let ctx = if self.on_server(&s) {
            self.ctx()
        } else {
            own = self.proto.own_server(self.env, &s).ok_or_else(|| RuntimeError::Answer {
                id: id.to_owned(),
                message: format!(
                    "session `{}` runs in a {} terminal started outside spex whose server no other client can join; nothing was sent\nhint: answer it in its own terminal",
                    s.label(),
                    self.harness.id()
                ),
            })?;
            ServerCtx {
                socket: &own,
                ..self.ctx()
            }
        };
        let att = a.id.clone().unwrap_or_default();
        if !answer::mark(&self.store, id, &att, Some(r)) {
            return Err(RuntimeError::Answer {
                id: id.to_owned(),
                message: format!(
                    "attention `{att}` of session `{}` closed before spex answered it; nothing was sent\nhint: `spex show {}`",
                    s.label(),
                    s.label()
                ),
            });
        }
        let confirmed = self.proto.answer(&ctx, &Self::thread_of(&s), a, r);
        let confirmed = match confirmed {
            Ok(c) => c,
            Err(e) => {
                answer::mark(&self.store, id, &att, None);
                return Err(RuntimeError::Answer {
                    id: id.to_owned(),
                    message: format!(
                        "attention `{att}` of session `{}` was not answered: {}\nhint: `spex show {}` says what it waits on",
                        s.label(),
                        e.message,
                        s.label()
                    ),
                });
            }
        };
        answer::close(&self.store, id, &att);
        Ok(Answered {
            attention: att,
            choice: r.choice.clone(),
            message: r.message.clone(),
            via: "server".into(),
            confirmed: confirmed.what,
            elapsed_ms: elapsed_ms(started),
            taken_ms: confirmed.taken.map(|t| {
                u64::try_from(t.saturating_duration_since(started).as_millis()).unwrap_or(u64::MAX)
            }),
        })
    }

    /// Interrupts the running turn and waits until the record says it ended.
    pub fn interrupt(&self, id: &str, timeout: Duration) -> Result<Session, RuntimeError> {
        let s = self.ours(id)?;
        if s.status == Status::Exited {
            return Err(RuntimeError::exited(&s));
        }
        mark_interrupting(&self.store, id, Some("spex interrupt"));
        let interrupted = self
            .proto
            .interrupt(&self.ctx(), &Self::thread_of(&s))
            .map_err(|e| self.failed(id, &e));
        let Some(_) = interrupted.inspect_err(|_| {
            mark_interrupting(&self.store, id, None);
        })?
        else {
            mark_interrupting(&self.store, id, None);
            return self.load(id);
        };
        let ended = wait_for(
            &self.store.session_dir(id),
            Instant::now() + timeout,
            || {
                self.store
                    .load(id)
                    .ok()
                    .flatten()
                    .filter(|s| !s.turn_running())
            },
        )?;
        ended.ok_or_else(|| RuntimeError::NotInterrupted {
            id: id.to_owned(),
            secs: timeout.as_secs(),
        })
    }

    /// Closes the thread, ends its terminal and records the session `exited`; the server
    /// stops once it holds no thread of a live session.
    pub fn stop(&self, id: &str) -> Result<Session, RuntimeError> {
        let s = self.ours(id)?;
        if s.status != Status::Exited {
            match self.proto.close_thread(&self.ctx(), &Self::thread_of(&s)) {
                Ok(()) => {}
                // A server that is gone holds no thread: the record only catches up.
                Err(e) if e.kind == ServerErrorKind::Down => {}
                Err(e) => return Err(self.failed(id, &e)),
            }
            self.conclude(
                id,
                Finding::Gone("stopped"),
                "`spex stop` closed the thread",
            );
        }
        let _ = call(self.env, id, Request::Stop { grace_ms: 2000 });
        // A thread no live session of spex's names (its record pruned, or exited while the
        // server kept it, or one another client started) does not keep the server running.
        if let Ok(threads) = self.proto.threads(&self.ctx())
            && !threads.iter().any(|t| {
                self.record_of(t)
                    .and_then(|id| self.store.load(&id).ok().flatten())
                    .is_some_and(|s| self.on_server(&s) && s.status != Status::Exited)
            })
        {
            self.shutdown();
        }
        self.load(id)
    }

    /// Stops the server and waits until it is gone (TERM to its process group, KILL after a
    /// grace); every session still live on it reads `exited` (`server gone`). False when no
    /// server of spex's ran.
    pub fn shutdown(&self) -> bool {
        let Some(r) = self.running() else {
            return false;
        };
        if !evidence::alive(r.server()) {
            return false;
        }
        stop_process(r.server());
        self.sessions_gone("the project's server was stopped");
        true
    }

    /// What the project's server is doing: whether it runs and answers, its pid, uptime and
    /// the threads it holds.
    pub fn status(&self) -> ServerStatus {
        let running = self.running().filter(|r| evidence::alive(r.server()));
        let answers = running.is_some() && self.answers();
        let threads = if answers {
            self.proto.threads(&self.ctx()).unwrap_or_default()
        } else {
            Vec::new()
        };
        let threads = threads
            .into_iter()
            .map(|thread| {
                let s = self
                    .record_of(&thread)
                    .and_then(|id| self.store.load(&id).ok().flatten());
                HeldThread {
                    session: s.as_ref().map(|s| s.id.clone()),
                    // People read handles: one is claimed now for a record that has none yet.
                    handle: s.as_ref().map(|s| self.store.label_of(&s.id)),
                    status: s.as_ref().map(|s| s.status.as_str().to_owned()),
                    thread,
                }
            })
            .collect();
        let uptime_s = running
            .as_ref()
            .and_then(|r| store::parse_time(r.started_at.as_deref()?))
            .and_then(|t| std::time::SystemTime::now().duration_since(t).ok())
            .map(|d| d.as_secs());
        ServerStatus {
            harness: self.harness.id().to_owned(),
            running: running.is_some(),
            answers,
            pid: running.as_ref().map(|r| r.server_pid),
            supervisor_pid: running.as_ref().map(|r| r.supervisor_pid),
            supervised: running
                .as_ref()
                .is_some_and(|r| evidence::alive(r.supervisor())),
            started_at: running.as_ref().and_then(|r| r.started_at.clone()),
            uptime_s,
            socket: self.socket.clone(),
            log: self.log.clone(),
            threads,
        }
    }

    /// Brings session `id`'s thread back on the server (starting it if needed) with its
    /// terminal UI under a spex host. Refuses a live session unless `force`.
    pub fn resume(&self, l: &Launch, id: &str, force: bool) -> Result<Launched, RuntimeError> {
        let s = self.load(id)?;
        let thread = Self::thread_of(&s);
        let live = if self.on_server(&s) {
            self.live(&s)
        } else {
            // Started outside spex: live until its record says it exited.
            true
        };
        if !force && s.status != Status::Exited && live {
            return Err(RuntimeError::Refused {
                id: id.to_owned(),
                message: format!("it is running; `spex attach {id}` reaches it, or pass `--force`"),
            });
        }
        self.ensure(&l.spex_bin)?;
        self.proto
            .resume_thread(&self.ctx(), &thread)
            .map_err(|e| self.failed(id, &e))?;
        let server = self.running().map(|r| r.server());
        self.store.update(id, |cur| {
            let Some(mut s) = cur else {
                return (None, Vec::new(), ());
            };
            let now = store::now_rfc3339();
            let before = s.state_key();
            s.status = Status::Idle;
            s.exit_reason = None;
            s.forget_process();
            s.set_process(server);
            s.launched_by = LaunchedBy::Spex;
            s.stamp(before, &now, "resume", None);
            s.updated_at = now;
            let mut f = serde_json::Map::new();
            f.insert("harness".into(), self.harness.id().into());
            (
                Some(s),
                vec![("session.resumed".to_owned(), "resume".to_owned(), f)],
                (),
            )
        })?;
        self.host(l, id)
    }

    /// Whether session `s`'s thread is live: the server answers and holds it.
    pub fn live(&self, s: &Session) -> bool {
        self.proto
            .loaded(&self.ctx(), &Self::thread_of(s))
            .unwrap_or(false)
    }
}

/// The servers of the project `store` keeps (main checkout `main`): one per harness that runs
/// its sessions on a server. Enough to report on and stop them (no harness binary resolved).
pub fn of_project<'a>(
    env: &'a Env,
    store: &ProjectStore,
    main: &Path,
) -> Result<Vec<Server<'a>>, RuntimeError> {
    let mut out = Vec::new();
    for h in crate::adapters::all() {
        if let Some(s) = Server::new(env, *h, store, main, PathBuf::new(), Vec::new())? {
            out.push(s);
        }
    }
    Ok(out)
}

/// `3h 5m`, `4m 10s`, `12s`: an uptime for people.
pub fn duration_words(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

/// TERM to the process group of `p`, KILL after a grace when it still runs.
fn stop_process(p: ProcessId) {
    signal_group(p.pid, rustix::process::Signal::TERM);
    let deadline = Instant::now() + Duration::from_secs(5);
    while evidence::alive(p) && Instant::now() < deadline {
        // A process's end announces itself to its parent only; look 20 times a second.
        std::thread::sleep(Duration::from_millis(50));
    }
    if evidence::alive(p) {
        signal_group(p.pid, rustix::process::Signal::KILL);
    }
}

fn signal_group(pid: u32, sig: rustix::process::Signal) {
    if let Some(p) = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap_or(0)) {
        let _ = rustix::process::kill_process_group(p, sig);
    }
}

/// The log written since `from`, for an error message.
fn tail(log: &Path, from: u64) -> String {
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(log)
        && f.seek(SeekFrom::Start(from)).is_ok()
    {
        let _ = f.take(8192).read_to_string(&mut text);
    }
    text.trim_end().to_owned()
}
