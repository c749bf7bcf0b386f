//! The hook that waits for an answer from elsewhere (harness-neutral). Off the hot path: only
//! for an event the adapter's answering facet says waits (`Answering::hook_waits`), only once
//! the event's record is written with an attention open for it, and never when a project hook
//! node blocked the call.
//!
//! How it fits together (for an adapter that wants a waiting hook):
//! - `Answering::hook_waits(event, env)` says the hook for `event` may wait. `dispatch::handle`
//!   then opens (or keeps) the attention with `via: hook` and `hook`: this process (pid and
//!   start time), and its `call_id` from the decoded event, all under the record's lock.
//! - [`wait`] sleeps on inotify on the session's folder and on a pipe SIGTERM/SIGINT/SIGHUP
//!   write to (sync, no runtime, nothing spawned), until `spex answer` posts an answer for this
//!   attention AND this call (`ProjectStore::post_answer`; taken with `take_answer`), the
//!   record no longer holds the attention open (the harness's own hooks closed it: the call ran
//!   or failed, the turn ended or was interrupted, another attention replaced it), a signal,
//!   or the budget (`answering.hookWaitSecs` of the receipt).
//! - With an answer, `Answering::hook_reply(event, payload, posted)` is what the hook prints.
//!   Without one, [`release`] gives the attention back its usual `via` (keys on a hosted
//!   terminal, or terminal only) and the hook prints nothing, so the harness's own prompt
//!   stays for the person.

use std::io::Read as _;
use std::os::fd::AsFd as _;
use std::time::{Duration, Instant};

use crate::seam::answer::Answering;
use crate::store::ProjectStore;
use crate::store::answers::Posted;
use crate::store::session::{ProcessId, Status};

/// How a wait ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waited {
    Answered(Posted),
    /// The attention closed another way (answered at the terminal, the call ended, the turn
    /// ended, another attention replaced it).
    Closed,
    /// SIGTERM, SIGINT or SIGHUP: the harness gave up on the hook (a deny at the terminal
    /// aborts the turn and signals the hook), or is going away.
    Signalled,
    /// The wait's budget ran out: the harness's prompt stays for the person.
    Budget,
}

/// Whether the harness whose binary is `binary` runs this hook (it is this process's parent,
/// or the parent of the shell between them): a hook fed by anything else (a script, a test)
/// has no dialog open to wait beside.
pub fn run_by(binary: &str) -> bool {
    let mut pid = std::process::id();
    for _ in 0..3 {
        let Some(parent) = crate::seam::evidence::parent_of(pid) else {
            return false;
        };
        // `comm` is the program's name, cut at 15 bytes.
        let comm = fs_err::read_to_string(format!("/proc/{parent}/comm")).unwrap_or_default();
        let cut = &binary.as_bytes()[..binary.len().min(15)];
        if comm.trim_end().as_bytes() == cut {
            return true;
        }
        pid = parent;
    }
    false
}

/// This process as a record names it.
pub fn me() -> Option<ProcessId> {
    let pid = std::process::id();
    crate::seam::evidence::process_start(pid).map(|start| ProcessId { pid, start })
}

/// Waits for the answer to attention `att` (about call `call_id`) of session `id`, at most
/// `budget`.
pub fn wait(
    store: &ProjectStore,
    id: &str,
    att: &str,
    call_id: Option<&str>,
    budget: Duration,
) -> Waited {
    let deadline = Instant::now() + budget;
    let Ok((mut rx, tx)) = std::os::unix::net::UnixStream::pair() else {
        return Waited::Budget;
    };
    let mut ids = Vec::new();
    for sig in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
    ] {
        let Ok(w) = tx.try_clone() else {
            return Waited::Budget;
        };
        match signal_hook::low_level::pipe::register(sig, w) {
            Ok(i) => ids.push(i),
            Err(_) => return Waited::Budget,
        }
    }
    let dir = store.session_dir(id);
    let still_open = || {
        store.load(id).ok().flatten().is_some_and(|s| {
            s.status != Status::Exited
                && s.attention.as_ref().and_then(|a| a.id.as_deref()) == Some(att)
        })
    };
    let got = crate::fsutil::wait_on(&[&dir], deadline, Some(rx.as_fd()), || {
        if let Some(p) = store.take_answer(id, att, call_id) {
            return Some(Waited::Answered(p));
        }
        (!still_open()).then_some(Waited::Closed)
    });
    let signalled = {
        let _ = rx.set_nonblocking(true);
        rx.read(&mut [0u8; 8]).is_ok_and(|n| n > 0)
    };
    for i in ids {
        signal_hook::low_level::unregister(i);
    }
    match got {
        Ok(Some(w)) => w,
        _ if signalled => Waited::Signalled,
        _ => Waited::Budget,
    }
}

/// The hook stops waiting without an answer: attention `att`, while still open and still
/// waited on by `me`, drops its hook and gets its usual `via` back. Writes no event.
pub fn release(
    store: &ProjectStore,
    id: &str,
    att: &str,
    me: Option<ProcessId>,
    answering: &dyn Answering,
) {
    let _ = store.update(id, |cur| {
        let Some(mut s) = cur else {
            return (None, Vec::new(), ());
        };
        let snapshot = s.clone();
        let Some(a) = s
            .attention
            .as_mut()
            .filter(|a| a.id.as_deref() == Some(att) && a.hook.is_some() && a.hook == me)
        else {
            return (None, Vec::new(), ());
        };
        a.hook = None;
        a.via = Some(answering.via(a, &snapshot));
        (Some(s), Vec::new(), ())
    });
}
