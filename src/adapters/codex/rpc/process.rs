//! The `codex app-server` process: started with `--listen unix://SOCK` in its own process
//! group, waited on until it answers `initialize`, probed for liveness, and stopped (SIGTERM,
//! then SIGKILL). Speaks to it only through the transport's [`Client`].

use std::ffi::OsString;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use fs_err::{File, OpenOptions};
use serde_json::Value;

use super::transport::{Client, RpcError};

/// Session-identity variables removed from the server's environment: the server outlives the
/// session that happened to start it, and hooks of every thread it runs would otherwise think
/// they belong to that one session.
pub const SESSION_ENV_VARS: [&str; 3] = [
    "SPEX_SESSION_ID",
    "CODEX_THREAD_ID",
    "CLAUDE_CODE_SESSION_ID",
];

/// How long `codex app-server` may take to answer its first `initialize`.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// Grace period between SIGTERM and SIGKILL. SIGTERM lets codex run `SessionEnd` hooks (whose
/// timeout is clamped to at most 3s) and remove its socket and symlink; SIGKILL leaves both.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Poll interval while waiting for a starting server or a dying one.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Connects and initializes, answering whether a server is alive at `sock`. Liveness means
/// the server answers `initialize`; a socket file alone may be left over from a killed server.
pub fn probe(sock: &Path, timeout: Duration) -> Result<Value, RpcError> {
    let mut client = Client::connect(sock, timeout)?;
    // Named plain "spex": codex takes the first client's name as the server-wide user-agent
    // originator (`userAgent: "spex/0.169.0 ..."` for every later client too), and the first
    // client of a server spex starts is this probe.
    let result = client.initialize("spex")?;
    client.close();
    Ok(result)
}

/// How to start an app-server.
#[derive(Debug, Clone)]
pub struct AppServerConfig {
    /// The `codex` executable.
    pub codex_bin: PathBuf,
    /// The socket path passed to `--listen unix://`; codex makes it a symlink.
    pub sock: PathBuf,
    /// `CODEX_HOME` for the server (config.toml, trust state, sessions).
    pub codex_home: PathBuf,
    /// Where the server's stdout and stderr go (appended, so a crash's log survives a restart).
    pub log: PathBuf,
    /// Extra environment for the server, applied after [`SESSION_ENV_VARS`] are removed.
    pub env: Vec<(OsString, OsString)>,
    /// The server's working directory; inherited when `None`.
    pub cwd: Option<PathBuf>,
    pub startup_timeout: Duration,
}

impl AppServerConfig {
    pub fn new(
        codex_bin: impl Into<PathBuf>,
        sock: impl Into<PathBuf>,
        codex_home: impl Into<PathBuf>,
        log: impl Into<PathBuf>,
    ) -> Self {
        Self {
            codex_bin: codex_bin.into(),
            sock: sock.into(),
            codex_home: codex_home.into(),
            log: log.into(),
            env: Vec::new(),
            cwd: None,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AppServerError {
    #[error("a codex app-server already answers at `{sock}`")]
    AlreadyRunning { sock: PathBuf },
    #[error("cannot open the codex app-server log `{path}`")]
    Log {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot start `{bin} app-server`")]
    Spawn {
        bin: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "codex app-server for `{sock}` exited ({status}) before answering `initialize`; see `{log}`{tail}"
    )]
    Exited {
        sock: PathBuf,
        status: ExitStatus,
        log: PathBuf,
        /// The last lines of the log, preformatted (empty when the log is empty).
        tail: String,
    },
    #[error(
        "codex app-server for `{sock}` did not answer `initialize` within {waited:?}; see `{log}`"
    )]
    NotReady {
        sock: PathBuf,
        waited: Duration,
        log: PathBuf,
        #[source]
        last: Option<Box<RpcError>>,
    },
}

/// A running `codex app-server` child, in its own process group. Dropping it stops the whole
/// group (SIGTERM, then SIGKILL after a grace period) unless [`AppServer::detach`] was called.
#[derive(Debug)]
pub struct AppServer {
    child: Child,
    sock: PathBuf,
    log: PathBuf,
    detached: bool,
}

impl AppServer {
    /// Starts the server and waits until it answers `initialize`. Fails if a server already
    /// answers at the socket: two servers on one path would fight over the symlink.
    pub fn spawn(config: &AppServerConfig) -> Result<Self, AppServerError> {
        if probe(&config.sock, Duration::from_secs(2)).is_ok() {
            return Err(AppServerError::AlreadyRunning {
                sock: config.sock.clone(),
            });
        }
        let log_error = |source| AppServerError::Log {
            path: config.log.clone(),
            source,
        };
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&config.log)
            .map_err(log_error)?;
        // Where this run's output starts, so a startup error quotes this run and not an
        // earlier one (the log is appended to).
        let log_start = log.metadata().map_err(log_error)?.len();
        let log_err = log.try_clone().map_err(log_error)?;

        let mut listen = OsString::from("unix://");
        listen.push(&config.sock);
        let mut command = Command::new(&config.codex_bin);
        command
            .arg("app-server")
            .arg("--listen")
            .arg(listen)
            .env("CODEX_HOME", &config.codex_home)
            .stdin(Stdio::null())
            .stdout(log.into_file())
            .stderr(log_err.into_file())
            // Its own group: a Ctrl-C in the launching terminal must not reach it, and Drop can
            // stop codex together with whatever it spawned.
            .process_group(0);
        for var in SESSION_ENV_VARS {
            command.env_remove(var);
        }
        command.envs(config.env.iter().map(|(k, v)| (k, v)));
        if let Some(cwd) = &config.cwd {
            command.current_dir(cwd);
        }
        let child = command.spawn().map_err(|source| AppServerError::Spawn {
            bin: config.codex_bin.clone(),
            source,
        })?;
        let mut server = Self {
            child,
            sock: config.sock.clone(),
            log: config.log.clone(),
            detached: false,
        };
        server.wait_ready(config.startup_timeout, log_start)?;
        Ok(server)
    }

    fn wait_ready(&mut self, timeout: Duration, log_start: u64) -> Result<(), AppServerError> {
        let start = Instant::now();
        let mut last = None;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(AppServerError::Exited {
                    sock: self.sock.clone(),
                    status,
                    log: self.log.clone(),
                    tail: log_tail(&self.log, log_start),
                });
            }
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(AppServerError::NotReady {
                    sock: self.sock.clone(),
                    waited: timeout,
                    log: self.log.clone(),
                    last,
                });
            }
            // Until codex binds, connect fails at once (no file, or a refused stale socket);
            // the short per-attempt budget keeps a wedged accept from eating the deadline.
            match probe(&self.sock, left.min(Duration::from_secs(2))) {
                Ok(_) => return Ok(()),
                Err(e) => last = Some(Box::new(e)),
            }
            thread::sleep(POLL_INTERVAL.min(left));
        }
    }

    /// Leaves the server running after this handle is gone (it is meant to outlive the
    /// `spex` invocation that started it). Returns its pid.
    pub fn detach(mut self) -> u32 {
        self.detached = true;
        self.child.id()
    }

    /// Stops the process group: SIGTERM, then SIGKILL if it is still alive after the grace
    /// period. Returns the server's exit status.
    fn stop(&mut self) -> io::Result<ExitStatus> {
        self.detached = true;
        if let Some(status) = self.child.try_wait()? {
            return Ok(status);
        }
        let group = rustix::process::Pid::from_child(&self.child);
        // ESRCH only means the group is already gone.
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::TERM);
        let deadline = Instant::now() + SHUTDOWN_GRACE;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            thread::sleep(POLL_INTERVAL);
        }
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        self.child.wait()
    }
}

impl Drop for AppServer {
    fn drop(&mut self) {
        if !self.detached {
            let _ = self.stop();
        }
    }
}

/// The last few lines written to a log since `start`, indented under a heading, for an error
/// message. Best effort: an unreadable log gives an empty string.
fn log_tail(path: &Path, start: u64) -> String {
    const MAX_BYTES: u64 = 4096;
    let Ok(mut file) = File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let mut bytes = Vec::new();
    if file
        .seek(SeekFrom::Start(start.max(len.saturating_sub(MAX_BYTES))))
        .is_err()
        || file.read_to_end(&mut bytes).is_err()
    {
        return String::new();
    }
    format_tail(&String::from_utf8_lossy(&bytes))
}

pub(super) fn format_tail(text: &str) -> String {
    const MAX_LINES: usize = 8;
    // codex colors its tracing output even into a file; escapes would garble the terminal.
    let clean = strip_ansi(text);
    let lines: Vec<&str> = clean.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return String::new();
    }
    let mut out = String::from("\nlast lines of the log:");
    for line in &lines[lines.len().saturating_sub(MAX_LINES)..] {
        out.push_str("\n  ");
        out.push_str(line);
    }
    out
}

/// Removes CSI escape sequences (`ESC [ ... final byte`), which is all codex's logger emits.
pub(super) fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            // Parameter and intermediate bytes, then one final byte in `@`..=`~`.
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
