//! Sessions that run as threads of one harness server per project (the adapter's
//! `SessionServer`): what the server of a project is (its socket, log and the record of what
//! runs), shared by its two sides: the supervisor (`supervisor`, the body of `spex serve`, which
//! starts the server, observes it and stops it with its last thread's end) and the commands'
//! client (`client`: start it once under a lock, launch, deliver, interrupt, stop, resume and
//! attach on a thread). The record of a thread is keyed by the thread id, as the hooks key it.
//! This file imports neither side.

mod client;
mod supervisor;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::client::{call, runtime_dir};
use super::error::RuntimeError;
use super::protocol::Request;
use crate::env::Env;
use crate::seam::Harness;
use crate::seam::evidence::{self, Evidence, Finding};
use crate::seam::session_server::{ServerCtx, ServerError, ServerErrorKind, SessionServer};
use crate::store::session::{LaunchedBy, ProcessId, Session, Status, StoreError};
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
    /// `spex serve` for this project's server (`extra` before the harness's own arguments,
    /// which follow `--`), run in the main checkout: the supervisor and its guard start alike.
    fn serve_command(&self, spex_bin: &Path, extra: &[String]) -> std::process::Command {
        let mut cmd = std::process::Command::new(spex_bin);
        cmd.arg("serve")
            .arg("--harness")
            .arg(self.harness.id())
            .arg("--project")
            .arg(&self.main)
            .arg("--binary")
            .arg(&self.binary)
            .args(extra)
            .arg("--")
            .args(&self.args)
            .current_dir(&self.main);
        cmd
    }

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

    /// This server with the harness binary and the user's arguments for it, which starting
    /// the server or its terminal UI needs.
    pub fn with_binary(&self, binary: PathBuf, args: Vec<String>) -> Server<'a> {
        Server {
            env: self.env,
            harness: self.harness,
            proto: self.proto,
            store: self.store.clone(),
            main: self.main.clone(),
            binary,
            args,
            socket: self.socket.clone(),
            log: self.log.clone(),
        }
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
            eprintln!("error: updating session {id}: {}", crate::hint::spelled(&e));
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

    fn running(&self) -> Option<Running> {
        let bytes = fs_err::read(self.running_file()).ok()?;
        serde_json::from_slice(&bytes).ok()
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
