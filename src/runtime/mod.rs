//! Harness-neutral runtime: start a session under a spex PTY host, deliver prompts into it with
//! a real confirmation (the session's own prompt hook), snapshot, attach and stop it. Every
//! harness-specific step (argv, readiness, how to type a prompt) is an adapter method; nothing
//! here names a harness.

pub mod answer;
pub mod budget;
pub mod checked;
pub mod client;
pub mod delivery;
pub mod error;
pub mod harness_server;
pub mod host;
pub mod judge;
pub mod limits;
pub mod marks;
pub mod protocol;
pub mod recordings;
pub mod start;
pub mod transport;
pub mod wait;

use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::adapters;
use crate::env::Env;
use crate::pty::terminal::Snapshot;
use crate::seam::terminal::Activity;
use crate::store::ProjectStore;
use crate::store::session::{AttentionKind, LaunchedBy, ProcessId, Session, Status};
use client::CALL_TIMEOUT;
pub use client::{Client, call, socket_path};
pub use delivery::{Delivery, Mode, StageAt, elapsed_ms};
pub use error::{RuntimeError, how_it_ended};
use marks::host_gone;
pub use marks::mark_interrupting;
use protocol::Request;
pub use recordings::{cassette_dir, new_cassette_dir};
pub use start::{Launch, Launched, new_id};
use start::{start_host, terminal_of};
use wait::wait_in;
pub use wait::{catch_interrupt, interrupted, wait_for};

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
        && (s.launched_by == LaunchedBy::Spex
            || store.session_dir(&s.id).join("host.log").is_file())
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
        && s.launched_by == LaunchedBy::Spex
        && adapters::lookup(&s.harness).is_some_and(|h| h.capabilities().server)
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
    // A host of an earlier boot was not killed: the machine stopped under it.
    if let Some(ended) = reconcile_hosted(env, store, &s)
        .filter(|e| e.exit_reason.as_deref() == Some(crate::seam::boot::MACHINE_STOPPED))
    {
        return RuntimeError::exited(&ended);
    }
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

/// Creates the record, starts the host and waits until the harness is ready for a prompt.
pub fn launch(l: &Launch) -> Result<Launched, RuntimeError> {
    let id = new_id()?;
    let argv = terminal_of(l.harness)?
        .host_argv(&l.binary, &l.args, &id)
        .ok_or_else(|| RuntimeError::NotHosted(l.harness.id().to_owned()))?;
    let store = ProjectStore::new(&l.env.spex_home(), &l.tree.main);
    let now = crate::store::now_rfc3339();
    store.update(&id, |_| {
        let mut record = Session::new(&id, l.harness.id(), None, &l.tree, LaunchedBy::Spex, &now);
        record.boot_id = crate::seam::boot::Boot::now(l.env).id;
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
        s.boot_id = crate::seam::boot::Boot::now(l.env).id;
        s.updated_at = crate::store::now_rfc3339();
        let mut f = serde_json::Map::new();
        f.insert("harness".into(), l.harness.id().into());
        events.push(("session.resumed".to_owned(), "resume".to_owned(), f));
        (Some(s), events, ())
    })?;
    start_host(l, store, id, &argv)
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
        || adapters::lookup(&s.harness).is_some_and(|h| h.capabilities().server)
        || s.exit_status.is_some()
        || !store.session_dir(&s.id).join("host.log").is_file()
    {
        return None;
    }
    // A host of an earlier boot did not die: the machine stopped under it.
    let boot = crate::seam::boot::Boot::now(env);
    let folded = crate::seam::boot::fold(store, &boot, s);
    if let Some(ended) = folded.as_ref().filter(|f| f.status == Status::Exited) {
        return Some(ended.clone());
    }
    let s = folded.as_ref().unwrap_or(s);
    if s.status == Status::Starting {
        return start_unfinished(env, store, s);
    }
    match reach(env, store, &s.id) {
        Err(RuntimeError::HostGone { socket, .. }) => {
            let _ = fs_err::remove_file(&socket);
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

/// Whether a session spex launched can still be reached through its transport (its host
/// answers, or its server holds its thread); `None` for sessions spex did not launch.
pub fn live(env: &Env, store: &ProjectStore, s: &Session) -> Option<bool> {
    if s.launched_by != LaunchedBy::Spex {
        return None;
    }
    if s.status == Status::Exited {
        return Some(false);
    }
    let harness = adapters::lookup(&s.harness)?;
    if let Ok(Some(server)) =
        harness_server::Server::new(env, harness, store, &s.project, PathBuf::new(), Vec::new())
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
    let bytes = fs_err::read(host_record_path(store, id)).ok()?;
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

/// Whether the session's attention is a dialog of the harness (a permission, a question the
/// agent asked through its ask tool, a plan to approve). Not one: a question the agent
/// declared in text (`spex session ask`) and a failed turn, where the harness waits at its
/// prompt and an answer is an ordinary prompt.
fn dialog_attention(s: &Session) -> bool {
    use crate::store::session::DeclaredState;
    s.status == Status::NeedsAttention
        && s.attention.as_ref().is_none_or(|a| {
            let declared = a.reason == AttentionKind::Question
                && s.declared
                    .as_ref()
                    .is_some_and(|d| d.state == DeclaredState::Asking && d.note == a.text);
            !declared && a.reason != AttentionKind::TurnFailed
        })
}

/// Types `text` into session `id` and waits until the session's prompt hook reports exactly
/// that text (as the harness normalises a prompt). A queued prompt (the session is busy) is
/// confirmed only with `wait_queued`. Refused while a dialog is open, whatever asked: keys
/// typed into a dialog answer it. The answer to a question the agent declared in text is a
/// prompt: it is delivered, and the new turn closes the attention.
#[expect(
    clippy::too_many_lines,
    reason = "the delivery in the order it happens (checks, typing, confirmation and the one resend), sharing its clock and stages"
)]
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
    let asks = dialog_attention(&s);
    if dialog || asks {
        // A failed turn's attention is no dialog: the one on screen is the harness's own (a
        // limit's options menu), answered in its terminal, not by the attention's choices.
        let (reason, text, attention) = match s.attention {
            Some(a) if asks => (a.reason.to_string(), a.text, a.id),
            Some(a) => (
                a.reason.to_string(),
                format!("the session's screen shows a dialog after it: {}", a.text),
                None,
            ),
            None => (
                "permission".into(),
                "the session's screen shows a dialog".into(),
                None,
            ),
        };
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
    let landed = call(
        env,
        id,
        Request::Inject {
            text: text.clone().into_owned(),
            submit: true,
            clear: false,
        },
    )?
    .landed;
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
    // idle through two looks: until then the harness may still be taking it up. A prompt
    // typed into an idle session can also never reach the box (typed while the harness read no
    // keys, as Gemini CLI just after loading a resumed conversation): when the screen then
    // shows the session idle with its box empty, the prompt is typed again with its Enter,
    // unless the host saw it in the box: then the harness took it, and only its hook is late
    // (a just-resumed Claude under load got it twice when it was typed again).
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
            let lost = mode == Mode::Inject
                && landed != Some(true)
                && call(env, id, Request::Snapshot)
                    .ok()
                    .and_then(|r| r.snapshot)
                    .is_some_and(|s| {
                        let now = s.lines.join("\n");
                        term.ready_for_input(&now)
                            && term.screen_activity(&s.title, &now) == Some(Activity::Idle)
                            && !shown_since(&screen, &now, &text)
                    });
            // Typed again over a cleared box: a first copy the harness holds but has not drawn
            // yet goes, rather than joining the second into one prompt never confirmed.
            call(
                env,
                id,
                Request::Inject {
                    text: if lost {
                        text.clone().into_owned()
                    } else {
                        String::new()
                    },
                    submit: true,
                    clear: lost,
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

/// Whether screen `now` shows the start of `text` more often than screen `before` did: the
/// prompt reached the harness (drawn in its conversation), whatever its box shows. Blanks are
/// left out of both, so a line the screen wrapped still matches.
fn shown_since(before: &str, now: &str, text: &str) -> bool {
    let compact = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    let start: String = compact(text).chars().take(24).collect();
    if start.is_empty() {
        return false;
    }
    compact(now).matches(&start).count() > compact(before).matches(&start).count()
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
    let exited = exited.ok_or_else(|| RuntimeError::HostGone {
        id: id.to_owned(),
        socket: socket_path(env, id).unwrap_or_default(),
    })?;
    // The host records the exit, then finishes the recording and removes its socket: what
    // `stop` returns to may read the recording whole (`cassette export` right after). A host
    // killed before it could remove the socket is not waited for long.
    let finished_by = deadline.min(Instant::now() + Duration::from_secs(3));
    if let Ok(socket) = socket_path(env, id) {
        while socket.exists() && Instant::now() < finished_by {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    Ok(exited)
}

#[cfg(test)]
mod tests {
    use super::shown_since;

    #[test]
    fn a_prompt_is_shown_since_only_when_the_screen_holds_one_more_copy() {
        let text = "USE_NONE say it only once, and nothing more than that please";
        let box_empty = "❯ \n? for shortcuts";
        // Drawn in the conversation, wrapped by the screen.
        let drawn = "❯ USE_NONE say it only once, and\n  nothing more than that please\n\n❯ ";
        assert!(shown_since(box_empty, drawn, text));
        assert!(!shown_since(box_empty, box_empty, text));
        // An earlier turn with the same prompt (a resumed conversation) is no new copy.
        assert!(!shown_since(drawn, drawn, text));
        assert!(!shown_since(box_empty, drawn, "   "));
    }
}
