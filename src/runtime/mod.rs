//! Harness-neutral runtime: start a session under a spex PTY host, deliver prompts into it with
//! a real confirmation (the session's own prompt hook), snapshot, attach and stop it. Every
//! harness-specific step (argv, readiness, how to type a prompt) is an adapter method; nothing
//! here names a harness.

pub mod answer;
pub mod budget;
pub mod host;
pub mod judge;
pub mod protocol;
pub mod server;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::adapters;
use crate::env::Env;
use crate::pty::session::Size;
use crate::pty::terminal::Snapshot;
use crate::repo::Tree;
use crate::seam::Harness;
use crate::seam::terminal::{Activity, TerminalHost};
use crate::store::ProjectStore;
use crate::store::session::{ProcessId, Session, Status};
use protocol::{Envelope, Request, Response, VERSION};

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(
        "spex does not host `{0}` sessions in a terminal\nhint: start it yourself; spex records it through its hooks"
    )]
    NotHosted(String),
    #[error("`{path}`: {message}\nhint: {hint}")]
    RuntimeDir {
        path: PathBuf,
        message: String,
        hint: String,
    },
    #[error(
        "session `{id}` has no running host (nothing answers on `{socket}`): the host was killed or crashed, which ends the session\nhint: `spex resume {id}` brings it back; `spex launch` starts a new one"
    )]
    HostGone { id: String, socket: PathBuf },
    #[error(
        "session `{id}` runs (its host, pid {pid}, is alive), but its socket `{socket}` is gone and the host could not listen there again\nhint: make `{}` a folder you own again (it went with `$XDG_RUNTIME_DIR`; logging in again brings that back), then `kill -USR1 {pid}` makes the host listen again; `spex stop {id}` is not needed",
        .socket.parent().map(|p| p.display().to_string()).unwrap_or_default()
    )]
    Unreachable {
        id: String,
        pid: u32,
        socket: PathBuf,
    },
    #[error(
        "session `{id}` has exited ({how}){}\nhint: `spex resume {id}` brings it back; `spex launch` starts a new one",
        .when.as_deref().map(|w| format!(" at {w}")).unwrap_or_default()
    )]
    Exited {
        id: String,
        /// How it ended: the reason and the program's exit status, in a few words.
        how: String,
        when: Option<String>,
    },
    /// The session lives on in its harness's server, but the terminal UI spex hosted on it was
    /// quit (the host ends with it): nothing shows its screen until `attach` opens one again.
    #[error(
        "session `{id}` runs on in the project's server, but no terminal is open on it (its terminal UI was quit), so spex cannot {what} it\nhint: `spex attach {id}` opens its terminal again"
    )]
    NoTerminal { id: String, what: &'static str },
    /// The session runs in a terminal of its own that spex does not host (the person started
    /// the harness there): spex can read its hooks, never type into it or signal it.
    #[error(
        "session `{id}` runs in a terminal of its own that spex does not host (it was not started by `spex launch`), so spex cannot {what} it\nhint: {hint}"
    )]
    NotHostedHere {
        id: String,
        what: &'static str,
        hint: &'static str,
    },
    #[error(
        "session `{id}` has a {reason} dialog open{}: {text}\nspex types nothing into a dialog: a delivery is a prompt, and a dialog takes keys as its answer\nhint: {}",
        attention.as_ref().map(|a| format!(" (attention `{a}`)")).unwrap_or_default(),
        match attention {
            Some(a) => format!("answer it: `spex answer {id} <choice> --attention {a}` (`spex show {id}` lists its choices), or in its terminal (`spex attach {id}`); then deliver"),
            None => format!("answer the dialog in the session's terminal (`spex attach {id}`), then deliver"),
        }
    )]
    NeedsAttention {
        id: String,
        reason: String,
        text: String,
        /// The open attention's id, when the record holds one.
        attention: Option<String>,
    },
    /// An answer that was refused or not confirmed (the message says why and what to do).
    #[error("{message}")]
    Answer { id: String, message: String },
    #[error("the launch of session `{id}` was interrupted (Ctrl-C)")]
    Cancelled { id: String },
    #[error("the host of session `{id}` refused: {message}")]
    Refused { id: String, message: String },
    #[error(
        "session `{id}` did not become ready for input within {secs} s; its screen:\n{screen}\nhint: answer that screen with `spex attach {id}`, or prepare the harness so it starts straight into its prompt"
    )]
    NotReady {
        id: String,
        secs: u64,
        screen: String,
    },
    #[error(
        "session `{id}` cannot start: {what}; its screen:\n{screen}\nhint: {hint}; while the session still shows that screen, `spex attach {id}` answers it and `spex stop {id}` ends it"
    )]
    Blocked {
        id: String,
        what: String,
        hint: String,
        screen: String,
    },
    #[error(
        "session `{id}` stopped at a screen spex does not know (no prompt, unchanged for {secs} s); its screen:\n{screen}\nhint: answer it with `spex attach {id}` (`spex stop {id}` ends the session), or prepare the harness so it starts straight into its prompt"
    )]
    Stuck {
        id: String,
        secs: u64,
        screen: String,
    },
    #[error(
        "session `{id}` is at its prompt, but its start hook has not reported in {secs} s, so spex would see none of its turns; its screen:\n{screen}\nhint: `spex doctor` checks this checkout's hooks (shims and trust); `spex stop {id}` ends the session"
    )]
    NoStart {
        id: String,
        secs: u64,
        screen: String,
    },
    #[error(
        "the host of session `{id}` ended before it was ready; its log `{log}`:\n{text}\nhint: {hint}"
    )]
    HostFailed {
        id: String,
        log: PathBuf,
        text: String,
        hint: String,
    },
    #[error(
        "session `{id}` did not report the prompt within {secs} s\nhint: `spex snapshot {id}` shows its screen"
    )]
    NotConfirmed { id: String, secs: u64 },
    #[error(
        "session `{id}` was still running its turn {secs} s after the interrupt\nhint: `spex snapshot {id}` shows its screen"
    )]
    NotInterrupted { id: String, secs: u64 },
    #[error("session `{id}`: {message}\nhint: {hint}")]
    Server {
        id: String,
        message: String,
        hint: String,
    },
    /// The project's server failed before any one session was involved.
    #[error("the {harness} server of this project: {message}\nhint: {hint}")]
    ServerWide {
        harness: String,
        message: String,
        hint: String,
    },
    #[error(transparent)]
    Store(#[from] crate::store::session::StoreError),
    #[error("`{path}`: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl RuntimeError {
    /// The session has exited, as its record says: how and when.
    pub fn exited(s: &Session) -> RuntimeError {
        RuntimeError::Exited {
            id: s.id.clone(),
            how: how_it_ended(s),
            when: s.since.clone().or_else(|| Some(s.updated_at.clone())),
        }
    }

    /// Whether the error means the session is gone (its program or host ended).
    pub fn gone(&self) -> bool {
        matches!(
            self,
            RuntimeError::HostGone { .. } | RuntimeError::Exited { .. }
        )
    }

    /// A stable word for what went wrong, for `--json` answers.
    pub fn reason(&self) -> &'static str {
        match self {
            RuntimeError::HostGone { .. } => "host_gone",
            RuntimeError::Unreachable { .. } => "host_unreachable",
            RuntimeError::Exited { .. } => "exited",
            RuntimeError::NeedsAttention { .. } => "needs_attention",
            RuntimeError::Answer { .. } => "not_answered",
            RuntimeError::NotConfirmed { .. } => "not_confirmed",
            RuntimeError::Refused { .. } => "refused",
            RuntimeError::NotHostedHere { .. } => "not_hosted",
            RuntimeError::NoTerminal { .. } => "no_terminal",
            _ => "error",
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RuntimeError + '_ {
    move |source| RuntimeError::Io {
        path: path.to_owned(),
        source,
    }
}

/// How a session's program ended, in a few words: why (as recorded) and its exit status.
pub fn how_it_ended(s: &Session) -> String {
    let status = s.exited_with().map(|e| match (e.code, e.signal) {
        (_, Some(sig)) => format!("signal {sig}"),
        (Some(code), None) => format!("exit code {code}"),
        (None, None) => "unknown status".to_owned(),
    });
    match (s.exit_reason.as_deref(), status) {
        (Some(r), Some(st)) => format!("{r}, {st}"),
        (Some(r), None) => r.to_owned(),
        (None, Some(st)) => st,
        (None, None) => "unknown status".to_owned(),
    }
}

/// What a command wanted to do to a session spex could not reach, for the message that says
/// why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    Deliver,
    Stop,
    Interrupt,
    Resume,
    Snapshot,
    Record,
    Attach,
}

impl Act {
    fn verb(self) -> &'static str {
        match self {
            Act::Deliver => "deliver a prompt to",
            Act::Stop => "stop",
            Act::Interrupt => "interrupt",
            Act::Resume => "resume",
            Act::Snapshot => "show the screen of",
            Act::Record => "record",
            Act::Attach => "attach to",
        }
    }

    fn hint(self) -> &'static str {
        match self {
            Act::Deliver => {
                "type the prompt in that terminal; a session `spex launch` starts takes prompts from `spex deliver`"
            }
            Act::Stop => "end it in its own terminal (its exit command or keys)",
            Act::Interrupt => "interrupt it in its own terminal (its interrupt key)",
            Act::Resume => {
                "it is still running: carry on in its terminal; `spex resume` brings back a session that has ended"
            }
            Act::Snapshot | Act::Record | Act::Attach => {
                "spex sees the terminal only of sessions it hosts; `spex show` prints what its hooks reported"
            }
        }
    }
}

/// Whether spex's host runs the session's current process: spex started it (`launch`, or
/// `resume`, which leaves the host's log) and no host has recorded its end since. A session the
/// person started, or took back into their own terminal after spex's host ended, is not.
fn hosted(store: &ProjectStore, s: &Session) -> bool {
    s.exit_status.is_none()
        && (s.launched_by == "spex" || store.session_dir(&s.id).join("host.log").is_file())
}

/// The truth about a session whose host did not answer `act`: it has exited (how and when);
/// it runs in a terminal spex does not host; or its host died, which ends the session (the
/// record says so from now on).
pub fn not_reached(env: &Env, store: &ProjectStore, id: &str, act: Act) -> RuntimeError {
    let Ok(Some(s)) = store.load(id) else {
        return RuntimeError::HostGone {
            id: id.to_owned(),
            socket: socket_path(env, id).unwrap_or_default(),
        };
    };
    if s.status == Status::Exited && !hosted(store, &s) {
        return RuntimeError::exited(&s);
    }
    // A session a server holds outlives the terminal spex hosted on it.
    if s.status != Status::Exited
        && s.launched_by == "spex"
        && adapters::lookup(&s.harness).is_some_and(|h| h.server().is_some())
    {
        return RuntimeError::NoTerminal {
            id: id.to_owned(),
            what: act.verb(),
        };
    }
    if !hosted(store, &s) {
        return RuntimeError::NotHostedHere {
            id: id.to_owned(),
            what: act.verb(),
            hint: act.hint(),
        };
    }
    reconcile_hosted(env, store, &s);
    RuntimeError::HostGone {
        id: id.to_owned(),
        socket: socket_path(env, id).unwrap_or_default(),
    }
}

/// `result`, with a host that did not answer explained by [`not_reached`].
pub fn explained<T>(
    env: &Env,
    store: &ProjectStore,
    id: &str,
    act: Act,
    result: Result<T, RuntimeError>,
) -> Result<T, RuntimeError> {
    result.map_err(|e| match e {
        RuntimeError::HostGone { .. } => not_reached(env, store, id, act),
        e => e,
    })
}

/// The per-user folder for session sockets: `$XDG_RUNTIME_DIR/spex`, else `/tmp/spex-<uid>`;
/// mode 0700 and owned by this user, or refused.
pub fn runtime_dir(env: &Env) -> Result<PathBuf, RuntimeError> {
    let uid = rustix::process::getuid().as_raw();
    let dir = match &env.xdg_runtime_dir {
        Some(d) => d.join("spex"),
        None => PathBuf::from(format!("/tmp/spex-{uid}")),
    };
    crate::fsutil::create_private_dir(&dir).map_err(io(&dir))?;
    let meta = std::fs::symlink_metadata(&dir).map_err(io(&dir))?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(RuntimeError::RuntimeDir {
            path: dir,
            message: "is not a private folder of this user (want a directory, owner you, mode 0700)".into(),
            hint: "remove it or fix its owner and mode; spex will not put sockets where others can reach them".into(),
        });
    }
    Ok(dir)
}

/// The socket of session `id`.
pub fn socket_path(env: &Env, id: &str) -> Result<PathBuf, RuntimeError> {
    let path = runtime_dir(env)?.join(format!("{id}.sock"));
    // `sun_path` holds 108 bytes with its NUL.
    if path.as_os_str().len() > 100 {
        return Err(RuntimeError::RuntimeDir {
            message: "the socket path is too long for a Unix socket".into(),
            hint: "set XDG_RUNTIME_DIR to a shorter folder".into(),
            path,
        });
    }
    Ok(path)
}

/// A connection to a session's host.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Client {
    pub fn connect(env: &Env, id: &str) -> Result<Client, RuntimeError> {
        let socket = socket_path(env, id)?;
        let gone = || RuntimeError::HostGone {
            id: id.to_owned(),
            socket: socket.clone(),
        };
        let stream = UnixStream::connect(&socket).map_err(|_| gone())?;
        let writer = stream.try_clone().map_err(|_| gone())?;
        Ok(Client {
            reader: BufReader::new(stream),
            writer,
        })
    }

    /// One request and its response, within `timeout`.
    pub fn call(&mut self, request: Request, timeout: Duration) -> std::io::Result<Response> {
        self.writer.set_read_timeout(Some(timeout))?;
        let mut line = serde_json::to_vec(&Envelope {
            v: VERSION,
            request,
        })
        .expect("a request serializes");
        line.push(b'\n');
        self.writer.write_all(&line)?;
        let mut answer = String::new();
        self.reader.get_ref().set_read_timeout(Some(timeout))?;
        if self.reader.read_line(&mut answer)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the host closed the connection",
            ));
        }
        serde_json::from_str(&answer).map_err(std::io::Error::other)
    }

    /// The raw stream, after a successful `attach`.
    pub fn into_parts(self) -> (BufReader<UnixStream>, UnixStream) {
        (self.reader, self.writer)
    }
}

const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// `request` to the host of `id`; a host that does not answer is `HostGone`.
pub fn call(env: &Env, id: &str, request: Request) -> Result<Response, RuntimeError> {
    let mut client = Client::connect(env, id)?;
    let response = client
        .call(request, CALL_TIMEOUT)
        .map_err(|_| RuntimeError::HostGone {
            id: id.to_owned(),
            socket: socket_path(env, id).unwrap_or_default(),
        })?;
    if response.ok {
        Ok(response)
    } else {
        Err(RuntimeError::Refused {
            id: id.to_owned(),
            message: response.error.unwrap_or_default(),
        })
    }
}

/// Set by Ctrl-C once [`catch_interrupt`] made it cancel instead of kill.
static INTERRUPTED: std::sync::OnceLock<std::sync::Arc<std::sync::atomic::AtomicBool>> =
    std::sync::OnceLock::new();

/// From now on the first Ctrl-C (SIGINT) does not kill this process: it cancels the waits of
/// `launch` and `deliver`, which end with `Cancelled`, so the caller can stop what it started
/// and say so. A second Ctrl-C kills as usual.
pub fn catch_interrupt() -> std::io::Result<()> {
    use signal_hook::consts::SIGINT;
    let flag = INTERRUPTED.get_or_init(std::sync::Arc::default);
    // The order matters: the default action runs only once the flag is already set.
    signal_hook::flag::register_conditional_default(SIGINT, std::sync::Arc::clone(flag))?;
    signal_hook::flag::register(SIGINT, std::sync::Arc::clone(flag))?;
    Ok(())
}

/// Whether Ctrl-C was pressed since [`catch_interrupt`].
pub fn interrupted() -> bool {
    INTERRUPTED
        .get()
        .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
}

/// Blocks until `check` gives an answer or `deadline` passes (or Ctrl-C was pressed, see
/// [`catch_interrupt`]), waking on every change in the
/// session's folder (inotify: the record is replaced, the event log appended), never polling.
pub fn wait_for<T>(
    dir: &Path,
    deadline: Instant,
    check: impl FnMut() -> Option<T>,
) -> Result<Option<T>, RuntimeError> {
    wait_in(dir, deadline, true, check)
}

/// [`wait_for`], cut short by Ctrl-C only when `cancellable`: the wait for a stop that a
/// Ctrl-C asked for must not end because of that same Ctrl-C.
fn wait_in<T>(
    dir: &Path,
    deadline: Instant,
    cancellable: bool,
    mut check: impl FnMut() -> Option<T>,
) -> Result<Option<T>, RuntimeError> {
    use rustix::fs::inotify;
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)
        .map_err(|e| io(dir)(e.into()))?;
    inotify::add_watch(
        &fd,
        dir,
        inotify::WatchFlags::MOVED_TO | inotify::WatchFlags::MODIFY | inotify::WatchFlags::CREATE,
    )
    .map_err(|e| io(dir)(e.into()))?;
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
    loop {
        if let Some(v) = check() {
            return Ok(Some(v));
        }
        let mut left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || (cancellable && interrupted()) {
            return Ok(None);
        }
        if cancellable && INTERRUPTED.get().is_some() {
            // The signal may land on another thread, which leaves this poll asleep.
            left = left.min(Duration::from_millis(200));
        }
        let mut fds = [rustix::event::PollFd::new(
            &fd,
            rustix::event::PollFlags::IN,
        )];
        let timeout = rustix::event::Timespec::try_from(left).ok();
        let _ = rustix::event::poll(&mut fds, timeout.as_ref());
        let mut reader = inotify::Reader::new(&fd, &mut buf);
        while reader.next().is_ok() {}
    }
}

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
    std::io::Read::read_exact(&mut std::fs::File::open(path).map_err(io(path))?, &mut b)
        .map_err(io(path))?;
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
fn identity_vars() -> Vec<&'static str> {
    let mut vars = vec!["SPEX_SESSION_ID"];
    vars.extend(adapters::all().iter().filter_map(|h| h.session_env_var()));
    vars
}

/// The terminal spex hosts for `h`, or why it hosts none.
fn terminal_of(h: &dyn Harness) -> Result<&'static dyn TerminalHost, RuntimeError> {
    h.terminal()
        .ok_or_else(|| RuntimeError::NotHosted(h.id().to_owned()))
}

/// Creates the record, starts the host and waits until the harness is ready for a prompt.
pub fn launch(l: &Launch) -> Result<Launched, RuntimeError> {
    let id = new_id()?;
    let argv = terminal_of(l.harness)?
        .host_argv(&l.binary, &l.args, &id)
        .ok_or_else(|| RuntimeError::NotHosted(l.harness.id().to_owned()))?;
    let store = ProjectStore::new(&l.env.spex_home(), &l.tree.main);
    let now = crate::store::now_rfc3339();
    store.update(&id, |_| {
        let record = Session::new(&id, l.harness.id(), None, &l.tree, "spex", &now);
        let mut f = serde_json::Map::new();
        f.insert("harness".into(), l.harness.id().into());
        (
            Some(record),
            vec![("session.launched".to_owned(), "launch".to_owned(), f)],
            (),
        )
    })?;
    start_host(l, &store, &id, &argv)
}

/// Brings an exited session back under a new host (`resume`): the harness reloads its
/// conversation; the record is live again from its next session start.
pub fn resume(l: &Launch, store: &ProjectStore, id: &str) -> Result<Launched, RuntimeError> {
    let s = store
        .load(id)?
        .ok_or_else(|| crate::store::session::StoreError::NotFound(id.to_owned()))?;
    // Never a second harness on a live conversation: the host (by its process, whether or
    // not its socket is there) and the harness process the record names must both be gone.
    match reach(l.env, store, id) {
        Ok(()) => {
            return Err(RuntimeError::Refused {
                id: id.to_owned(),
                message: format!("it is running; `spex attach {id}` reaches it"),
            });
        }
        Err(RuntimeError::HostGone { .. }) => {}
        Err(e) => return Err(e),
    }
    // One spex does not host, and that has not ended, runs in the person's own terminal.
    if s.status != Status::Exited && !hosted(store, &s) {
        return Err(not_reached(l.env, store, id, Act::Resume));
    }
    let harness_runs = host_record(store, id)
        .map(|r| r.child)
        .into_iter()
        .chain(s.process_id())
        .find(|&p| crate::seam::evidence::alive(p));
    if let Some(p) = harness_runs {
        return Err(RuntimeError::Refused {
            id: id.to_owned(),
            message: format!(
                "its harness process (pid {}) still runs the conversation; end it first (`kill {}`) or `spex launch` a new session",
                p.pid, p.pid
            ),
        });
    }
    // A hosted session whose host is gone has ended: the record says so from now on.
    let s = reconcile_hosted(l.env, store, &s).unwrap_or(s);
    let argv = terminal_of(l.harness)?
        .resume_argv(
            &l.binary,
            &l.args,
            s.harness_session_id.as_deref().unwrap_or(id),
        )
        .ok_or_else(|| RuntimeError::NotHosted(l.harness.id().to_owned()))?;
    store.update(id, |current| {
        let Some(mut s) = current else {
            return (None, Vec::new(), ());
        };
        s.status = Status::Starting;
        s.exit_reason = None;
        // What was still open (a failed turn's attention outlives the exit) closes unanswered,
        // with its event, so every opened attention has its `attention.closed`.
        let mut events: Vec<_> = s
            .close_attention("resume", "unanswered")
            .into_iter()
            .collect();
        s.forget_process();
        s.updated_at = crate::store::now_rfc3339();
        let mut f = serde_json::Map::new();
        f.insert("harness".into(), l.harness.id().into());
        events.push(("session.resumed".to_owned(), "resume".to_owned(), f));
        (Some(s), events, ())
    })?;
    start_host(l, store, id, &argv)
}

/// Starts the host of session `id` running `argv` and waits until the harness is ready.
/// Sessions on a server get their host through [`server::Server::host`].
fn start_host(
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
        use std::os::unix::fs::OpenOptionsExt as _;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(crate::fsutil::PRIVATE_FILE)
            .open(&log)
            .map_err(io(&log))?
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
        .stdout(log_file.try_clone().map_err(io(&log))?)
        .stderr(log_file);
    for var in identity_vars() {
        cmd.env_remove(var);
    }
    cmd.env("SPEX_SESSION_ID", id);
    let mut host = cmd.spawn().map_err(io(&l.spex_bin))?;
    let failed = |host: &mut std::process::Child| {
        host.try_wait().ok().flatten().map(|_| {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
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
    let client = l.harness.server().is_some();
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

/// Folds the host's liveness into a hosted session's record: a host that no longer runs (its
/// recorded pid and start time) means the session is gone (`exited`, reason `host gone`),
/// whatever killed it; a host that runs but lost its socket is asked to listen again. Sessions
/// not hosted by spex (no host log), sessions still starting and sessions a server holds (their
/// host runs only a client of it) are left to other evidence.
pub fn reconcile_hosted(env: &Env, store: &ProjectStore, s: &Session) -> Option<Session> {
    // The status first: it costs no syscall, and most records of a long-lived store have exited.
    // A host that recorded its program's end no longer hosts it: hooks after that come from
    // the person's own terminal (`claude --resume` there), and must not read "host gone".
    if s.status == Status::Exited
        || adapters::lookup(&s.harness).is_some_and(|h| h.server().is_some())
        || s.exit_status.is_some()
        || !store.session_dir(&s.id).join("host.log").is_file()
    {
        return None;
    }
    if s.status == Status::Starting {
        return start_unfinished(env, store, s);
    }
    match reach(env, store, &s.id) {
        Err(RuntimeError::HostGone { socket, .. }) => {
            let _ = std::fs::remove_file(&socket);
        }
        // Answering, or alive with its socket gone: live either way.
        _ => return None,
    }
    host_gone(
        store,
        &s.id,
        "the session's host no longer answers on its socket",
    )
}

/// How long after its launch a host that wrote no record of itself and does not answer is
/// taken for one that never came up (it writes the record as it starts, in milliseconds).
const NEVER_CAME_UP: Duration = Duration::from_mins(2);

/// A hosted session still `starting` whose host is gone (killed while the session started,
/// with the `launch` that waited for it): its start never finishes, so it ends `exited`.
fn start_unfinished(env: &Env, store: &ProjectStore, s: &Session) -> Option<Session> {
    let why = match host_record(store, &s.id) {
        Some(r) if crate::seam::evidence::alive(r.host) => return None,
        Some(_) => "its host ended before the session started",
        None => {
            let launched_long_ago = crate::store::parse_time(&s.updated_at)
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|d| d > NEVER_CAME_UP);
            if !launched_long_ago || UnixStream::connect(socket_path(env, &s.id).ok()?).is_ok() {
                return None;
            }
            "its host never came up"
        }
    };
    host_gone(store, &s.id, why)
}

/// Ends session `id` (unless it has exited already): `exited`, reason `host gone`, with `why`.
fn host_gone(store: &ProjectStore, id: &str, why: &str) -> Option<Session> {
    store
        .update(id, |current| {
            let Some(mut s) = current.filter(|s| s.status != Status::Exited) else {
                return (None, Vec::new(), None);
            };
            let now = crate::store::now_rfc3339();
            let before = s.state_key();
            let events = s.exit("host gone", &now, "liveness");
            s.stamp(before, &now, "liveness", Some(why.to_owned()));
            s.updated_at = now;
            (Some(s.clone()), events, Some(s))
        })
        .ok()
        .flatten()
}

/// Whether a session spex launched can still be reached through its transport (its host
/// answers, or its server holds its thread); `None` for sessions spex did not launch.
pub fn live(env: &Env, store: &ProjectStore, s: &Session) -> Option<bool> {
    if s.launched_by != "spex" {
        return None;
    }
    if s.status == Status::Exited {
        return Some(false);
    }
    let harness = adapters::lookup(&s.harness)?;
    if let Ok(Some(server)) =
        server::Server::new(env, harness, store, &s.project, PathBuf::new(), Vec::new())
    {
        return Some(server.live(s));
    }
    Some(!matches!(
        reach(env, store, &s.id),
        Err(RuntimeError::HostGone { .. })
    ))
}

/// What the host of a session wrote about itself when it started (`host.json` in the
/// session's folder): its process and the program's, each with its start time, so liveness is
/// read from the processes, never from a socket file (a runtime folder removed at logout takes
/// the sockets of live sessions with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct HostRecord {
    pub host: ProcessId,
    pub child: ProcessId,
}

/// The file holding session `id`'s [`HostRecord`].
pub fn host_record_path(store: &ProjectStore, id: &str) -> PathBuf {
    store.session_dir(id).join("host.json")
}

/// Session `id`'s host record, when its host wrote one.
pub fn host_record(store: &ProjectStore, id: &str) -> Option<HostRecord> {
    let bytes = std::fs::read(host_record_path(store, id)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The pids of session `id`'s host and of the program it runs (none when spex hosts nothing
/// for it).
pub fn host_pids(store: &ProjectStore, id: &str) -> Vec<u32> {
    host_record(store, id)
        .map(|r| vec![r.host.pid, r.child.pid])
        .unwrap_or_default()
}

/// Makes sure the host of session `id` can be reached: it answers on its socket; or it runs
/// (by its recorded pid and start time) but its socket is gone, and then it is asked (SIGUSR1)
/// to listen again, and answers within a moment or the error says how to bring it back
/// (`Unreachable`). A host that does not run is `HostGone`; so is one that left no record
/// and does not answer.
pub fn reach(env: &Env, store: &ProjectStore, id: &str) -> Result<(), RuntimeError> {
    let socket = socket_path(env, id)?;
    if UnixStream::connect(&socket).is_ok() {
        return Ok(());
    }
    let gone = || RuntimeError::HostGone {
        id: id.to_owned(),
        socket: socket.clone(),
    };
    let host = host_record(store, id)
        .map(|r| r.host)
        .filter(|&h| crate::seam::evidence::alive(h))
        .ok_or_else(gone)?;
    let pid =
        rustix::process::Pid::from_raw(i32::try_from(host.pid).unwrap_or(0)).ok_or_else(gone)?;
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::USR1);
    let deadline = Instant::now() + REBIND_WAIT;
    while Instant::now() < deadline {
        if UnixStream::connect(&socket).is_ok() {
            return Ok(());
        }
        if !crate::seam::evidence::alive(host) {
            return Err(gone());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(RuntimeError::Unreachable {
        id: id.to_owned(),
        pid: host.pid,
        socket,
    })
}

/// [`reach`] for a command about to talk to the host: only a host that runs but cannot be
/// reached is an error here (a host that is gone is the command's own case to report).
pub fn reach_if_alive(env: &Env, store: &ProjectStore, id: &str) -> Result<(), RuntimeError> {
    match reach(env, store, id) {
        Err(e @ RuntimeError::Unreachable { .. }) => Err(e),
        _ => Ok(()),
    }
}

/// How long a host that was asked to listen again may take to do it.
const REBIND_WAIT: Duration = Duration::from_secs(3);

/// A record as `show --json` prints it: with `live` (`sessions --json` prints the same bytes
/// through `store::sorted::SortedRecord`, building no value).
pub fn with_live(env: &Env, store: &ProjectStore, s: &Session) -> serde_json::Value {
    let mut v = serde_json::to_value(s).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("live".into(), live(env, store, s).into());
        o.insert("subagents_running".into(), s.running_children().into());
    }
    v
}

/// The folder of session `id`'s recording number `n` (from 1): `cassette`, then
/// `cassette-2`, `cassette-3`, ... (a resumed session records beside the earlier recordings).
fn nth_cassette_dir(store: &ProjectStore, id: &str, n: usize) -> PathBuf {
    let name = if n <= 1 {
        "cassette".to_owned()
    } else {
        format!("cassette-{n}")
    };
    store.session_dir(id).join(name)
}

/// Session `id`'s latest recording (its first folder when it has none).
pub fn cassette_dir(store: &ProjectStore, id: &str) -> PathBuf {
    (1..=MAX_RECORDINGS)
        .map(|n| nth_cassette_dir(store, id, n))
        .take_while(|d| d.exists())
        .last()
        .unwrap_or_else(|| nth_cassette_dir(store, id, 1))
}

/// The folder session `id`'s next recording goes into: never one that holds a recording.
pub fn new_cassette_dir(store: &ProjectStore, id: &str) -> PathBuf {
    (1..=MAX_RECORDINGS)
        .map(|n| nth_cassette_dir(store, id, n))
        .find(|d| !d.exists())
        .unwrap_or_else(|| nth_cassette_dir(store, id, MAX_RECORDINGS + 1))
}

/// More recordings of one session than anyone keeps; past it, new ones go into one last
/// folder, which a recorder refuses while it holds a recording (never overwritten).
const MAX_RECORDINGS: usize = 10_000;

/// Starts (or with `stop`, stops) recording a running hosted session into a new cassette
/// folder of its own (see [`new_cassette_dir`]).
pub fn record(
    env: &Env,
    store: &ProjectStore,
    id: &str,
    stop: bool,
) -> Result<PathBuf, RuntimeError> {
    reach_if_alive(env, store, id)?;
    let call = |request| explained(env, store, id, Act::Record, call(env, id, request));
    if stop {
        call(Request::Record { dir: None })?;
        return Ok(cassette_dir(store, id));
    }
    // Beside the earlier recordings, never over one.
    let dir = new_cassette_dir(store, id);
    call(Request::Record {
        dir: Some(dir.clone()),
    })?;
    Ok(dir)
}

/// Sends the harness's interrupt keys to a working session and waits until its turn ended.
pub fn interrupt(
    env: &Env,
    store: &ProjectStore,
    id: &str,
    timeout: Duration,
) -> Result<Session, RuntimeError> {
    let s = store
        .load(id)?
        .ok_or_else(|| crate::store::session::StoreError::NotFound(id.to_owned()))?;
    if !matches!(s.status, Status::Working | Status::NeedsAttention) {
        return Ok(s);
    }
    reach_if_alive(env, store, id)?;
    mark_interrupting(store, id, Some("spex interrupt"));
    explained(
        env,
        store,
        id,
        Act::Interrupt,
        call(env, id, Request::Interrupt),
    )
    .inspect_err(|_| mark_interrupting(store, id, None))?;
    let ended = wait_for(&store.session_dir(id), Instant::now() + timeout, || {
        store
            .load(id)
            .ok()
            .flatten()
            .filter(|s| !matches!(s.status, Status::Working | Status::NeedsAttention))
    })?;
    ended.ok_or_else(|| RuntimeError::NotInterrupted {
        id: id.to_owned(),
        secs: timeout.as_secs(),
    })
}

/// Notes on the running turn who is about to interrupt it (or, with `None`, that the
/// interrupt did not go out), so whatever evidence ends the turn (a hook, the screen, the
/// server) records who did (`by`).
pub fn mark_interrupting(store: &ProjectStore, id: &str, by: Option<&str>) {
    let _ = store.update(id, |cur| {
        let Some(mut s) = cur else {
            return (None, Vec::new(), ());
        };
        match s
            .turn
            .as_mut()
            .filter(|t| t.state == crate::store::session::TurnState::Running)
        {
            Some(t) => t.interrupting = by.map(str::to_owned),
            None => return (None, Vec::new(), ()),
        }
        (Some(s), Vec::new(), ())
    });
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Typed into an idle prompt.
    Inject,
    /// Typed while a turn runs: the harness queues it until the turn ends.
    Queued,
    /// Added to the running turn by the harness's server.
    Steer,
    /// Started a new turn through the harness's server.
    Start,
}

#[derive(Debug, Serialize)]
pub struct Delivery {
    pub delivered: bool,
    pub mode: Mode,
    /// The turn the prompt started, once the harness reported it.
    pub turn_id: Option<String>,
    pub confirmed: bool,
    pub elapsed_ms: u64,
    /// Control characters in the text (a paste's end, keys) were made visible instead of
    /// typed, so the prompt arrived as one paste (see `seam::terminal::neutralize_paste`).
    pub sanitized: bool,
    /// The stages reached so far, in order: `accepted` (the harness took the text), `started`
    /// (a turn runs with it), `done` (that turn ended).
    pub stages: Vec<StageAt>,
}

/// A delivery stage reached, and when.
#[derive(Debug, Clone, Serialize)]
pub struct StageAt {
    pub stage: &'static str,
    pub at: String,
    /// Since the delivery began.
    pub elapsed_ms: u64,
}

impl StageAt {
    pub fn now(stage: &'static str, since: Instant) -> StageAt {
        StageAt {
            stage,
            at: crate::store::now_rfc3339(),
            elapsed_ms: elapsed_ms(since),
        }
    }
}

/// Whether the session's attention is a dialog of the harness (a permission, a question the
/// agent asked through its ask tool, a plan to approve). Not one: a question the agent
/// declared in text (`spex session ask`) and a failed turn, where the harness waits at its
/// prompt and an answer is an ordinary prompt.
fn dialog_attention(s: &Session) -> bool {
    use crate::store::session::DeclaredState;
    s.status == Status::NeedsAttention
        && s.attention.as_ref().is_none_or(|a| {
            let declared = a.reason == "question"
                && s.declared
                    .as_ref()
                    .is_some_and(|d| d.state == DeclaredState::Asking && d.note == a.text);
            !declared && a.reason != "turn_failed"
        })
}

/// Types `text` into session `id` and waits until the session's prompt hook reports exactly
/// that text (as the harness normalises a prompt). A queued prompt (the session is busy) is
/// confirmed only with `wait_queued`. Refused while a dialog is open, whatever asked: keys
/// typed into a dialog answer it. The answer to a question the agent declared in text is a
/// prompt: it is delivered, and the new turn closes the attention.
pub fn deliver(
    env: &Env,
    store: &ProjectStore,
    id: &str,
    text: &str,
    wait_queued: bool,
    timeout: Duration,
) -> Result<Delivery, RuntimeError> {
    let started = Instant::now();
    let s = store
        .load(id)?
        .ok_or_else(|| crate::store::session::StoreError::NotFound(id.to_owned()))?;
    reach_if_alive(env, store, id)?;
    let harness =
        adapters::lookup(&s.harness).ok_or_else(|| RuntimeError::NotHosted(s.harness.clone()))?;
    // The screen, which also proves the host answers.
    let (title, screen) = explained(
        env,
        store,
        id,
        Act::Deliver,
        call(env, id, Request::Snapshot),
    )?
    .snapshot
    .map(|s| (s.title, s.lines.join("\n")))
    .unwrap_or_default();
    if s.status == Status::Exited {
        return Err(RuntimeError::exited(&s));
    }
    let term = terminal_of(harness)?;
    let dialog = term.screen_activity(&title, &screen) == Some(Activity::Waiting);
    if dialog || dialog_attention(&s) {
        let (reason, text, attention) = s.attention.map_or_else(
            || {
                (
                    "permission".into(),
                    "the session's screen shows a dialog".into(),
                    None,
                )
            },
            |a| (a.reason, a.text, a.id),
        );
        return Err(RuntimeError::NeedsAttention {
            id: s.handle.clone().unwrap_or_else(|| id.to_owned()),
            reason,
            text,
            attention,
        });
    }
    let (text, sanitized) = crate::seam::terminal::neutralize_paste(text);
    let mode = if s.status == Status::Working {
        Mode::Queued
    } else {
        Mode::Inject
    };
    let after = s.seq;
    call(
        env,
        id,
        Request::Inject {
            text: text.clone().into_owned(),
            submit: true,
        },
    )?;
    // Typed in: an idle harness takes it up as a turn, a busy one queues it.
    let mut stages = vec![StageAt::now("accepted", started)];
    if mode == Mode::Queued && !wait_queued {
        return Ok(Delivery {
            delivered: true,
            mode,
            turn_id: None,
            confirmed: false,
            elapsed_ms: elapsed_ms(started),
            sanitized,
            stages,
        });
    }
    let want = term.normalize_prompt(&text);
    let dir = store.session_dir(id);
    // Read through the record, so a reader right after the delivery sees the turn too.
    let reported = || -> Option<Option<String>> {
        let (_, events) = store.committed(id).ok()?;
        events
            .iter()
            // A prompt taken up together with another one joins that one's turn.
            .filter(|e| e.seq > after && (e.kind == "turn.started" || e.kind == "turn.steered"))
            .find(|e| {
                e.fields
                    .get("prompt")
                    .and_then(|p| p.as_str())
                    .is_some_and(|p| term.normalize_prompt(p) == want)
            })
            .map(|e| {
                e.fields
                    .get("turn_id")
                    .and_then(|t| t.as_str())
                    .map(str::to_owned)
            })
    };
    let deadline = started + timeout;
    // A prompt can stay in the input box unsubmitted (a first prompt, or one typed while the
    // harness was taking up its queue); one more Enter submits it (facts: resend once when the
    // hook has not come within ~1.5 s). A queued prompt gets it only once the session has sat
    // idle through two looks: until then the harness may still be taking it up.
    let mut found = None;
    let mut resent = false;
    let mut idle_before = false;
    while found.is_none() && Instant::now() < deadline {
        let look = if resent {
            deadline
        } else {
            (Instant::now() + Duration::from_secs(2)).min(deadline)
        };
        found = wait_for(&dir, look, reported)?;
        if found.is_none() && interrupted() {
            break;
        }
        if found.is_some() || resent || Instant::now() >= deadline {
            continue;
        }
        let idle = store
            .load(id)
            .ok()
            .flatten()
            .is_some_and(|s| s.status == Status::Idle);
        if mode == Mode::Inject || (idle && idle_before) {
            call(
                env,
                id,
                Request::Inject {
                    text: String::new(),
                    submit: true,
                },
            )?;
            resent = true;
        }
        idle_before = idle;
    }
    if found.is_none() && interrupted() {
        return Err(RuntimeError::Cancelled { id: id.to_owned() });
    }
    match found {
        Some(turn_id) => Ok(Delivery {
            delivered: true,
            mode,
            turn_id,
            confirmed: true,
            elapsed_ms: elapsed_ms(started),
            sanitized,
            stages: {
                stages.push(StageAt::now("started", started));
                stages
            },
        }),
        None => Err(RuntimeError::NotConfirmed {
            id: id.to_owned(),
            secs: timeout.as_secs(),
        }),
    }
}

pub fn elapsed_ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// The screen of session `id`, with the last `scrollback` rows that scrolled off it.
pub fn snapshot(
    env: &Env,
    store: &ProjectStore,
    id: &str,
    scrollback: usize,
) -> Result<Snapshot, RuntimeError> {
    reach_if_alive(env, store, id)?;
    let request = if scrollback > 0 {
        Request::Scrollback { lines: scrollback }
    } else {
        Request::Snapshot
    };
    Ok(
        explained(env, store, id, Act::Snapshot, call(env, id, request))?
            .snapshot
            .unwrap_or_else(|| Snapshot {
                rows: 0,
                cols: 0,
                cursor: (0, 0),
                title: String::new(),
                lines: Vec::new(),
                scrollback: Vec::new(),
            }),
    )
}

/// Ends the session's program (the harness's exit keys at an idle prompt, then TERM, then KILL
/// after `grace`) and waits until the record says it exited.
pub fn stop(
    env: &Env,
    store: &ProjectStore,
    id: &str,
    grace: Duration,
) -> Result<Session, RuntimeError> {
    let grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
    reach_if_alive(env, store, id)?;
    let mut client = explained(env, store, id, Act::Stop, Client::connect(env, id))?;
    // The host answers once the signals are sent; it may already be closing the socket.
    let _ = client.call(Request::Stop { grace_ms }, grace + CALL_TIMEOUT);
    let deadline = Instant::now() + grace + Duration::from_secs(5);
    let exited = wait_in(&store.session_dir(id), deadline, false, || {
        store
            .load(id)
            .ok()
            .flatten()
            .filter(|s| s.status == Status::Exited && s.exit_status.is_some())
    })?;
    exited.ok_or_else(|| RuntimeError::HostGone {
        id: id.to_owned(),
        socket: socket_path(env, id).unwrap_or_default(),
    })
}
