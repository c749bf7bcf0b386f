//! `spex answer`: answers the attention a session waits on, only the one it names, and only
//! once the harness's own evidence confirms it (the dialog is gone and the record closed it,
//! or the server resolved the request). Harness-neutral: the adapter's answering facet says
//! which keys answer a dialog on the hosted screen, the server facet sends a server's response.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::protocol::Request;
use super::{RuntimeError, call, elapsed_ms, wait_for};
use crate::adapters;
use crate::env::Env;
use crate::seam::answer::Response;
use crate::store::ProjectStore;
use crate::store::session::{Answering, Attention, Session, Status};

/// What `spex answer` prints.
#[derive(Debug, Clone, Serialize)]
pub struct Answered {
    pub attention: String,
    pub choice: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `keys` or `server`.
    pub via: String,
    /// What the harness's evidence showed.
    pub confirmed: String,
    pub elapsed_ms: u64,
    /// When the harness said it took the answer (a server's resolved request), before what
    /// followed from it (the command's run) confirmed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taken_ms: Option<u64>,
}

fn refuse(id: &str, message: impl Into<String>) -> RuntimeError {
    RuntimeError::Answer {
        id: id.to_owned(),
        message: message.into(),
    }
}

/// The open attention of session `id` that the answer is for: the one `--attention` names (an
/// attention that has closed meanwhile, or another than the open one, is refused), and never
/// from inside the session itself.
pub fn target(
    env: &Env,
    store: &ProjectStore,
    id: &str,
    named: Option<&str>,
    host_pids: &[u32],
) -> Result<(Session, Attention), RuntimeError> {
    let s = store
        .load(id)?
        .ok_or_else(|| crate::store::session::StoreError::NotFound(id.to_owned()))?;
    let label = s.label().to_owned();
    let own_env = env.spex_session_id.as_deref() == Some(s.id.as_str())
        || adapters::lookup(&s.harness)
            .and_then(crate::seam::Harness::session_env_var)
            .and_then(|v| env.var(v))
            .is_some_and(|v| s.harness_session_id.as_deref() == Some(v));
    // The harness process counts where it runs one session (not a server shared by many).
    let own_process = adapters::lookup(&s.harness)
        .is_some_and(crate::seam::Harness::hook_env_names_session)
        .then_some(s.process)
        .flatten();
    let inside = own_process
        .map(|p| p.pid)
        .into_iter()
        .chain(host_pids.iter().copied())
        .any(|pid| crate::seam::evidence::ancestors(256).contains(&pid));
    if own_env || inside {
        return Err(refuse(
            id,
            format!(
                "session `{label}` cannot answer its own attention (this command runs inside it)\nhint: a person or another session answers it: `spex answer {label} <choice>` from another terminal"
            ),
        ));
    }
    if s.status == Status::Exited {
        return Err(RuntimeError::exited(&s));
    }
    let open = s
        .attention
        .clone()
        .filter(|_| s.status == Status::NeedsAttention);
    let Some(a) = open else {
        let what = named.map_or_else(String::new, |n| format!(" (`{n}` has closed)"));
        return Err(refuse(
            id,
            format!(
                "session `{label}` waits on nothing{what}: no attention is open\nhint: `spex show {label}` says what it does"
            ),
        ));
    };
    let a_id = a.id.clone().unwrap_or_default();
    if let Some(n) = named
        && n != a_id
    {
        return Err(refuse(
            id,
            format!(
                "attention `{n}` of session `{label}` is not open (the open one is `{a_id}`: {}); nothing was answered\nhint: `spex show {label}` shows it; answer it with `--attention {a_id}`",
                a.text
            ),
        ));
    }
    Ok((s, a))
}

/// The choice `arg` names among the attention's, as its id (`allow`, `deny`, ...); a question's
/// options pass as given (the adapter reads them).
pub fn resolve_choice(id: &str, a: &Attention, arg: &str) -> Result<String, RuntimeError> {
    if !a.questions.is_empty() {
        return Ok(arg.to_owned());
    }
    crate::seam::answer::pick(a, arg)
        .map(|c| c.id.clone())
        .ok_or_else(|| {
            let offered: Vec<&str> = a.choices.iter().map(|c| c.id.as_str()).collect();
            refuse(
                id,
                format!("`{arg}` is not a choice of attention `{}` (it offers: {})\nhint: `spex answer <session> <choice>` with one of those", a.id.as_deref().unwrap_or("?"), offered.join(", ")),
            )
        })
}

/// Marks attention `att` as being answered (its close then says `spex answer`), while it is
/// still the open one. False when it has closed meanwhile.
pub fn mark(store: &ProjectStore, id: &str, att: &str, r: Option<&Response>) -> bool {
    let now = crate::store::now_rfc3339();
    store
        .update(id, |cur| {
            let Some(mut s) = cur else {
                return (None, Vec::new(), false);
            };
            let Some(a) = s
                .attention
                .as_mut()
                .filter(|a| a.id.as_deref() == Some(att))
            else {
                return (None, Vec::new(), false);
            };
            a.answering = r.map(|r| Answering {
                at: now.clone(),
                by: "spex answer".into(),
                choice: r.choice.clone(),
                message: r.message.clone(),
            });
            (Some(s), Vec::new(), true)
        })
        .unwrap_or(false)
}

/// Closes attention `att` as answered by `spex answer`, unless the harness's own hooks did
/// already; the record moves on as the evidence says (`working` while a turn runs).
pub fn close(store: &ProjectStore, id: &str, att: &str) {
    let now = crate::store::now_rfc3339();
    let _ = store.update(id, |cur| {
        let Some(mut s) = cur else {
            return (None, Vec::new(), ());
        };
        if s.attention.as_ref().and_then(|a| a.id.as_deref()) != Some(att) {
            return (None, Vec::new(), ());
        }
        let before = s.state_key();
        let events: Vec<_> = s
            .close_attention("spex answer", "spex answer")
            .into_iter()
            .collect();
        if s.status == Status::NeedsAttention {
            s.status = if s.turn_running() {
                Status::Working
            } else {
                Status::Idle
            };
        }
        s.stamp(before, &now, "spex answer", None);
        now.clone_into(&mut s.updated_at);
        (Some(s), events, ())
    });
}

/// Answers a dialog of a session spex hosts with its keys: each step only while the host's
/// screen shows what the adapter expects (checked by the host as it types), then waits until
/// the dialog is gone from the screen and the record has closed the attention.
pub fn by_keys(
    env: &Env,
    store: &ProjectStore,
    s: &Session,
    a: &Attention,
    r: &Response,
    timeout: Duration,
) -> Result<Answered, RuntimeError> {
    let started = Instant::now();
    let id = s.id.as_str();
    let label = s.label();
    let harness =
        adapters::lookup(&s.harness).ok_or_else(|| RuntimeError::NotHosted(s.harness.clone()))?;
    let answering = harness
        .answering()
        .ok_or_else(|| refuse(id, format!("session `{label}`'s harness cannot be answered from outside its terminal\nhint: `spex attach {label}` and answer there")))?;
    let att = a.id.clone().unwrap_or_default();
    let screen = || -> Result<String, RuntimeError> {
        Ok(call(env, id, Request::Snapshot)?
            .snapshot
            .map(|s| s.lines.join("\n"))
            .unwrap_or_default())
    };
    // The hook can come before the dialog is drawn: give the screen a moment to show it.
    let deadline = Instant::now() + Duration::from_secs(5);
    let steps = loop {
        let now = screen()?;
        match answering.keys(a, r, &now) {
            Ok(steps) => break steps,
            Err(why) if Instant::now() >= deadline => {
                return Err(refuse(
                    id,
                    format!(
                        "cannot answer attention `{att}` of session `{label}`: {why}; nothing was typed\nhint: `spex snapshot {label}` shows the screen; `spex attach {label}` to answer there"
                    ),
                ));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    if !mark(store, id, &att, Some(r)) {
        return Err(refuse(
            id,
            format!(
                "attention `{att}` of session `{label}` closed before spex answered it; nothing was typed\nhint: `spex show {label}`"
            ),
        ));
    }
    for (i, step) in steps.iter().enumerate() {
        // Each step waits until the screen has caught up with the one before.
        let deadline = Instant::now() + Duration::from_secs(5);
        let sent = loop {
            match call(
                env,
                id,
                Request::Keys {
                    expect: step.expect.clone(),
                    keys: step.keys.clone(),
                },
            ) {
                Ok(_) => break Ok(()),
                Err(e) if Instant::now() >= deadline => break Err(e),
                Err(RuntimeError::Refused { .. }) => std::thread::sleep(Duration::from_millis(50)),
                Err(e) => break Err(e),
            }
        };
        if let Err(e) = sent {
            if i == 0 {
                mark(store, id, &att, None);
            }
            return Err(refuse(
                id,
                format!(
                    "the answer to attention `{att}` of session `{label}` stopped at step {} of {}: {e}\nhint: `spex snapshot {label}` shows the screen; `spex attach {label}` to finish there",
                    i + 1,
                    steps.len()
                ),
            ));
        }
        std::thread::sleep(step.pause);
    }
    // Confirmed: the dialog is gone from the screen and the record no longer holds it (its
    // hooks or the host saw the harness move on).
    let dir = store.session_dir(id);
    let end = started + timeout;
    let gone = || {
        let closed = store
            .load(id)
            .ok()
            .flatten()
            .is_none_or(|s| s.attention.and_then(|a| a.id).as_deref() != Some(att.as_str()));
        closed.then_some(())
    };
    let mut confirmed = None;
    while Instant::now() < end {
        let off_screen = screen().is_ok_and(|now| !answering.shows_dialog(a, &now));
        if off_screen {
            if wait_for(
                &dir,
                (Instant::now() + Duration::from_millis(300)).min(end),
                gone,
            )?
            .is_some()
            {
                confirmed = Some("the dialog is gone and the session moved on");
                break;
            }
        } else {
            std::thread::sleep(Duration::from_millis(30));
        }
    }
    let Some(what) = confirmed else {
        return Err(refuse(
            id,
            format!(
                "attention `{att}` of session `{label}` was sent its keys but the harness did not confirm within {} s\nhint: `spex snapshot {label}` shows the screen",
                timeout.as_secs()
            ),
        ));
    };
    close(store, id, &att);
    Ok(Answered {
        attention: att,
        choice: r.choice.clone(),
        message: r.message.clone(),
        via: "keys".into(),
        confirmed: what.into(),
        elapsed_ms: elapsed_ms(started),
        taken_ms: None,
    })
}
