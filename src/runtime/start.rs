//! Starting a session's PTY host and waiting until its harness is ready for a prompt: what
//! `launch`, `resume` and a server's terminal share.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::client::{CALL_TIMEOUT, call, socket_path};
use super::error::{RuntimeError, io};
use super::marks::host_gone;
use super::protocol::Request;
use super::recordings::new_cassette_dir;
use super::wait::interrupted;
use crate::adapters;
use crate::env::Env;
use crate::pty::session::Size;
use crate::repo::Tree;
use crate::seam::Harness;
use crate::seam::terminal::TerminalHost;
use crate::store::ProjectStore;
use crate::store::session::Status;

/// What `launch` needs, resolved by the command line.
pub struct Launch<'a> {
    pub env: &'a Env,
    pub harness: &'static dyn Harness,
    /// The harness binary and the user's default arguments for it.
    pub binary: PathBuf,
    pub args: Vec<String>,
    pub tree: Tree,
    /// The spex binary the host runs as.
    pub spex_bin: PathBuf,
    pub size: Size,
    pub ready_timeout: Duration,
    /// Record the session as a cassette (in the session's folder of the store).
    pub record: bool,
}

#[derive(Debug, Serialize)]
pub struct Launched {
    pub id: String,
    pub socket: PathBuf,
    pub host_pid: Option<u32>,
    pub child_pid: Option<u32>,
}

/// A new session id (a random UUID, which the harness adopts as its own).
pub fn new_id() -> Result<String, RuntimeError> {
    let path = Path::new("/dev/urandom");
    let mut b = [0u8; 16];
    std::io::Read::read_exact(
        &mut fs_err::File::open(path).map_err(RuntimeError::Fs)?,
        &mut b,
    )
    .map_err(RuntimeError::Fs)?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    ))
}

/// The variables that name another session; a hosted session must not inherit them.
pub(super) fn identity_vars() -> Vec<&'static str> {
    let mut vars = vec!["SPEX_SESSION_ID"];
    vars.extend(
        adapters::all()
            .iter()
            .filter_map(|h| h.identity().session_env_var),
    );
    vars
}

/// The terminal spex hosts for `h`, or why it hosts none.
pub(super) fn terminal_of(h: &dyn Harness) -> Result<&'static dyn TerminalHost, RuntimeError> {
    h.terminal()
        .ok_or_else(|| RuntimeError::NotHosted(h.id().to_owned()))
}

/// Starts the host of session `id` running `argv` and waits until the harness is ready.
/// Sessions on a server get their host through [`harness_server::Server::host`]. A recorded
/// launch that fails while its host runs says so in the recording (its capture is `partial`).
pub(super) fn start_host(
    l: &Launch,
    store: &ProjectStore,
    id: &str,
    argv: &[String],
) -> Result<Launched, RuntimeError> {
    let started = start_and_wait(l, store, id, argv);
    if let Err(e) = &started
        && l.record
    {
        let reason = match e {
            RuntimeError::Blocked { what, .. } => {
                Some(format!("the launch failed at a screen: {what}"))
            }
            RuntimeError::Stuck { .. } => {
                Some("the launch failed at a screen spex does not know".to_owned())
            }
            RuntimeError::NoStart { .. } => {
                Some("the launch failed: the start hook never reported".to_owned())
            }
            RuntimeError::NotReady { .. } => {
                Some("the launch failed: the harness was not ready in time".to_owned())
            }
            _ => None,
        };
        if let Some(reason) = reason {
            let _ = call(l.env, id, Request::Incomplete { reason });
        }
    }
    started
}

#[expect(
    clippy::too_many_lines,
    reason = "the host's command line, its start and the wait until the harness is ready share the launch's paths and log"
)]
fn start_and_wait(
    l: &Launch,
    store: &ProjectStore,
    id: &str,
    argv: &[String],
) -> Result<Launched, RuntimeError> {
    let term = terminal_of(l.harness)?;
    let socket = socket_path(l.env, id)?;
    let dir = store.session_dir(id);
    let log = dir.join("host.log");
    let log_file = {
        use fs_err::os::unix::fs::OpenOptionsExt as _;
        fs_err::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(crate::fsutil::PRIVATE_FILE)
            .open(&log)
            .map_err(RuntimeError::Fs)?
    };
    let mut cmd = Command::new(&l.spex_bin);
    cmd.arg("host")
        .arg("--session")
        .arg(id)
        .arg("--harness")
        .arg(l.harness.id())
        .arg("--tree")
        .arg(&l.tree.root)
        .arg("--socket")
        .arg(&socket)
        .arg("--rows")
        .arg(l.size.rows.to_string())
        .arg("--cols")
        .arg(l.size.cols.to_string());
    if l.record {
        cmd.arg("--record").arg(new_cassette_dir(store, id));
    }
    cmd.arg("--")
        .args(argv)
        // The harness reads project settings from its launch folder only.
        .current_dir(&l.tree.root)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().map_err(RuntimeError::Fs)?.into_file())
        .stderr(log_file.into_file());
    for var in identity_vars() {
        cmd.env_remove(var);
    }
    cmd.env("SPEX_SESSION_ID", id);
    let mut host = cmd.spawn().map_err(io(&l.spex_bin))?;
    let failed = |host: &mut std::process::Child| {
        host.try_wait().ok().flatten().map(|_| {
            let text = fs_err::read_to_string(&log).unwrap_or_default();
            let hint = term.blocking_screen(&text).map_or_else(
                || "the program's last screen above says why it ended".to_owned(),
                |b| format!("{}: {}", b.what, b.hint),
            );
            RuntimeError::HostFailed {
                id: id.to_owned(),
                log: log.clone(),
                text,
                hint,
            }
        })
    };
    let deadline = Instant::now() + l.ready_timeout;
    let mut last_screen = String::new();
    let mut changed_at = Instant::now();
    let mut prompt_since: Option<Instant> = None;
    // The program is a client of the harness's server rather than the session itself.
    let client = l.harness.capabilities().server;
    let ready = loop {
        if let Some(e) = failed(&mut host) {
            // The start will never finish: the record must not stay `starting`.
            host_gone(store, id, "its host ended before the session started");
            return Err(e);
        }
        if interrupted() {
            // The caller stops the session through its host, which must be answering first
            // (it leads its own session, so the Ctrl-C did not reach it).
            let deadline = Instant::now() + CALL_TIMEOUT;
            while call(l.env, id, Request::Ping).is_err()
                && failed(&mut host).is_none()
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            if failed(&mut host).is_some() {
                // Caught by the Ctrl-C itself before it left the terminal's process group:
                // nothing runs, and the record says so.
                store.update(id, |cur| {
                    let Some(mut s) = cur.filter(|s| s.status != Status::Exited) else {
                        return (None, Vec::new(), ());
                    };
                    let now = crate::store::now_rfc3339();
                    let before = s.state_key();
                    let events = s.exit("launch interrupted", &now, "launch");
                    s.stamp(before, &now, "launch", None);
                    s.updated_at = now;
                    (Some(s), events, ())
                })?;
            } else {
                std::thread::spawn(move || host.wait());
            }
            return Err(RuntimeError::Cancelled { id: id.to_owned() });
        }
        if let Ok(r) = call(l.env, id, Request::Snapshot) {
            let screen = r
                .snapshot
                .as_ref()
                .map(|s| s.lines.join("\n"))
                .unwrap_or_default();
            // A screen the adapter knows spex cannot answer fails at once, with what to do.
            if let Some(b) = term.blocking_screen(&screen) {
                return Err(RuntimeError::Blocked {
                    id: id.to_owned(),
                    what: b.what,
                    hint: b.hint,
                    screen: shown(&screen),
                });
            }
            let started = store
                .load(id)?
                .is_some_and(|s| s.status != Status::Starting);
            let at_prompt = term.ready_for_input(&screen);
            if started && at_prompt {
                break r;
            }
            // At its prompt, yet its start hook never reported: nothing will report its turns.
            if !at_prompt {
                prompt_since = None;
            } else if prompt_since.get_or_insert_with(Instant::now).elapsed() >= NO_START_AFTER {
                return Err(RuntimeError::NoStart {
                    id: id.to_owned(),
                    secs: NO_START_AFTER.as_secs(),
                    screen: shown(&screen),
                });
            }
            // Any other screen that sits unchanged with no prompt before the harness reported
            // its start is waiting for a person: a harness still starting keeps drawing.
            if screen != last_screen {
                last_screen = screen;
                changed_at = Instant::now();
            } else if client && !screen.trim().is_empty() && changed_at.elapsed() >= STUCK_AFTER {
                // A client of a server (the session runs there, prompts go there): a screen of
                // its own that waits for the person (a notice, an upgrade offer) is theirs to
                // answer on `attach`; the session is ready all the same.
                break r;
            } else if !started
                && !at_prompt
                && !screen.trim().is_empty()
                && changed_at.elapsed() >= STUCK_AFTER
            {
                return Err(RuntimeError::Stuck {
                    id: id.to_owned(),
                    secs: STUCK_AFTER.as_secs(),
                    screen: shown(&screen),
                });
            }
        }
        if Instant::now() >= deadline {
            return Err(RuntimeError::NotReady {
                id: id.to_owned(),
                secs: l.ready_timeout.as_secs(),
                screen: shown(&last_screen),
            });
        }
        // Readiness is a screen state, which no file change announces: look ten times a second.
        std::thread::sleep(Duration::from_millis(100));
    };
    // The host leads its own session and outlives us; reap it if it ends while we still run.
    std::thread::spawn(move || host.wait());
    Ok(Launched {
        id: id.to_owned(),
        socket,
        host_pid: ready.host_pid,
        child_pid: ready.child_pid,
    })
}

/// How long a screen with no prompt may sit unchanged, before the harness reported its start,
/// until `launch` takes it for a question spex cannot answer. Claude 2.1.197 draws its prompt
/// well within a second of its first frame; the margin is for a loaded machine.
const STUCK_AFTER: Duration = Duration::from_secs(8);

/// How long a harness may sit at its prompt before its start hook reports (it fires as the
/// harness starts, before or about when the prompt is drawn).
const NO_START_AFTER: Duration = Duration::from_secs(10);

/// A screen's text for a message: without the blank rows around it.
fn shown(screen: &str) -> String {
    let lines: Vec<&str> = screen.lines().skip_while(|l| l.trim().is_empty()).collect();
    lines.join("\n").trim_end().to_owned()
}
