//! Sessions that run as threads of one harness server per project (the adapter's
//! `SessionServer`): the server's lifecycle (started at most once per project under a lock,
//! supervised by a detached `spex serve` that also observes it, stopped with the project's
//! last thread), and launch, deliver, interrupt, stop, resume and attach on a thread. The
//! record of a thread is keyed by the thread id, as the hooks key it.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{Delivery, Launched, Mode, RuntimeError, io, runtime_dir, wait_for};
use crate::env::Env;
use crate::repo::Tree;
use crate::seam::Harness;
use crate::seam::evidence::{self, Evidence, Finding};
use crate::seam::server::{
    DeliverMode, ServerCtx, ServerError, ServerErrorKind, ServerEvent, SessionServer, TurnEnd,
};
use crate::store::session::{Session, Status, StoreError, new_event};
use crate::store::{self, ProjectStore};

/// How long a server may take to answer its first request.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an answering server may take to answer the liveness check.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What `spex serve` writes once the server answers: the processes to signal at the end.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Running {
    server_pid: u32,
    server_start: u64,
    supervisor_pid: u32,
    socket: PathBuf,
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
                "the server is busy or stuck; try again, or `spex stop` the session".to_owned()
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
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(io(&log))?;
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
        for var in super::identity_vars() {
            cmd.env_remove(var);
        }
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
    /// every session still live on it exited (`server gone`).
    pub fn supervise(&self) -> Result<(), RuntimeError> {
        // Our own session: the launching terminal closing must not take the server down.
        let _ = rustix::process::setsid();
        let server_pid = self
            .proto
            .start(&self.ctx(), START_TIMEOUT)
            .map_err(|e| self.failed_unbound(&e))?;
        let running = Running {
            server_pid,
            server_start: evidence::process_start(server_pid).unwrap_or(0),
            supervisor_pid: std::process::id(),
            socket: self.socket.clone(),
        };
        let file = self.running_file();
        crate::fsutil::write_atomic(&file, &store::json_bytes(&running)).map_err(io(&file))?;
        eprintln!("{} server {server_pid} answers", store::now_rfc3339());
        let result = self.proto.observe(&self.ctx(), &mut |ev| {
            eprintln!("{} {ev:?}", store::now_rfc3339());
            self.fold(ev);
        });
        eprintln!("{} server gone ({result:?})", store::now_rfc3339());
        for s in self.store.sessions() {
            if self.on_server(&s) && s.status != Status::Exited {
                self.conclude(
                    &s.id,
                    Finding::Gone("server gone"),
                    "the server's connection closed",
                );
            }
        }
        // The connection may close before the process ends; do not leave it half alive.
        if evidence::alive(crate::store::session::ProcessId {
            pid: running.server_pid,
            start: running.server_start,
        }) {
            signal_group(running.server_pid, rustix::process::Signal::TERM);
        }
        let _ = std::fs::remove_file(&file);
        Ok(())
    }

    /// Whether `s` is a thread on this server (launched or resumed by spex).
    fn on_server(&self, s: &Session) -> bool {
        s.harness == self.harness.id() && s.launched_by == "spex"
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
            ServerEvent::ThreadLoaded { .. } => {}
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
                        Finding::TurnInterrupted,
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

    /// A new thread in `tree`, its record (keyed by the thread id, `launched_by: spex`), and
    /// `prompt` as its first turn.
    pub fn launch(
        &self,
        spex_bin: &Path,
        tree: &Tree,
        prompt: Option<&str>,
    ) -> Result<(Launched, Option<Delivery>), RuntimeError> {
        self.ensure(spex_bin)?;
        let name = format!("spex {}", tree.branch().as_deref().unwrap_or("session"));
        let thread = self
            .proto
            .start_thread(&self.ctx(), &tree.root, &name)
            .map_err(|e| self.failed_unbound(&e))?;
        let now = store::now_rfc3339();
        self.store.update(&thread, |cur| {
            // A hook may have made the record already; either way it is spex's now.
            let mut s = cur.unwrap_or_else(|| {
                Session::new(
                    &thread,
                    self.harness.id(),
                    Some(thread.clone()),
                    tree,
                    "spex",
                    &now,
                )
            });
            "spex".clone_into(&mut s.launched_by);
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
        let delivery = prompt.map(|p| self.deliver(&thread, p)).transpose()?;
        Ok((
            Launched {
                id: thread,
                socket: self.socket.clone(),
                host_pid: self.running().map(|r| r.server_pid),
                child_pid: None,
            },
            delivery,
        ))
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
            elapsed_ms: super::elapsed_ms(started),
            // The text goes to the server as data, never typed into a terminal.
            sanitized: false,
        })
    }

    /// Interrupts the running turn and waits until the record says it ended.
    pub fn interrupt(&self, id: &str, timeout: Duration) -> Result<Session, RuntimeError> {
        let s = self.ours(id)?;
        if s.status == Status::Exited {
            return Err(RuntimeError::exited(&s));
        }
        let interrupted = self
            .proto
            .interrupt(&self.ctx(), &Self::thread_of(&s))
            .map_err(|e| self.failed(id, &e))?;
        if interrupted.is_none() {
            return self.load(id);
        }
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

    /// Closes the thread and records the session `exited`; the server stops with the
    /// project's last thread.
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
        if self.proto.thread_count(&self.ctx()).is_ok_and(|n| n == 0) {
            self.shutdown();
        }
        self.load(id)
    }

    /// Stops the server (its supervisor then records what was still live on it).
    pub fn shutdown(&self) {
        if let Some(r) = self.running()
            && evidence::alive(crate::store::session::ProcessId {
                pid: r.server_pid,
                start: r.server_start,
            })
        {
            signal_group(r.server_pid, rustix::process::Signal::TERM);
        }
    }

    /// Brings session `id`'s thread back on the server (starting it if needed). Refuses a
    /// live session unless `force`.
    pub fn resume(&self, spex_bin: &Path, id: &str, force: bool) -> Result<Launched, RuntimeError> {
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
                message: "it is running; `spex attach` to it, or pass `--force`".into(),
            });
        }
        self.ensure(spex_bin)?;
        self.proto
            .resume_thread(&self.ctx(), &thread)
            .map_err(|e| self.failed(id, &e))?;
        self.store.update(id, |cur| {
            let Some(mut s) = cur else {
                return (None, Vec::new(), ());
            };
            let now = store::now_rfc3339();
            let before = s.state_key();
            s.status = Status::Idle;
            s.exit_reason = None;
            s.forget_process();
            "spex".clone_into(&mut s.launched_by);
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
        Ok(Launched {
            id: id.to_owned(),
            socket: self.socket.clone(),
            host_pid: self.running().map(|r| r.server_pid),
            child_pid: None,
        })
    }

    /// Runs the harness's own terminal UI on the session's thread in this terminal, until the
    /// person quits it (the thread keeps running on the server).
    pub fn attach(&self, id: &str) -> Result<(), RuntimeError> {
        let s = self.ours(id)?;
        if s.status == Status::Exited {
            return Err(RuntimeError::exited(&s));
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
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]).current_dir(&s.tree);
        for var in super::identity_vars() {
            cmd.env_remove(var);
        }
        let status = cmd.status().map_err(io(Path::new(&argv[0])))?;
        if !status.success() {
            eprintln!("{} exited ({status})", argv[0]);
        }
        Ok(())
    }

    /// Whether session `s`'s thread is live: the server answers and holds it.
    pub fn live(&self, s: &Session) -> bool {
        self.proto
            .loaded(&self.ctx(), &Self::thread_of(s))
            .unwrap_or(false)
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
