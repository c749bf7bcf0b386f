//! `spex answer`: answers the attention a session waits on, only the one it names, and only
//! once the harness's own evidence confirms it (the dialog is gone and the record closed it,
//! or the server resolved the request). Harness-neutral: the adapter's answering facet says
//! which keys answer a dialog on the hosted screen, the server facet sends a server's response.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::client::call;
use super::delivery::elapsed_ms;
use super::error::RuntimeError;
use super::protocol::Request;
use super::wait::wait_for;
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

fn refuse(id: &str, message: impl Into<String>, hint: impl Into<String>) -> RuntimeError {
    RuntimeError::NotAnswered {
        id: id.to_owned(),
        message: message.into(),
        hint: hint.into(),
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
            .and_then(|h| h.identity().session_env_var)
            .and_then(|v| env.var(v))
            .is_some_and(|v| s.harness_session_id.as_deref() == Some(v));
    // The harness process counts where it runs one session (not a server shared by many).
    let own_process = adapters::lookup(&s.harness)
        .and_then(crate::seam::Harness::wire)
        .is_some_and(crate::seam::wire::HookWire::hook_env_names_session)
        .then_some(s.process_id())
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
                "session `{label}` cannot answer its own attention (this command runs inside it)"
            ),
            format!(
                "a person or another session answers it: `spex answer {label} <choice>` from another terminal"
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
            format!("session `{label}` waits on nothing{what}: no attention is open"),
            format!("`spex show {label}` says what it does"),
        ));
    };
    let a_id = a.id.clone().unwrap_or_default();
    if let Some(n) = named
        && n != a_id
    {
        return Err(refuse(
            id,
            format!(
                "attention `{n}` of session `{label}` is not open (the open one is `{a_id}`: {}); nothing was answered",
                a.text
            ),
            format!("`spex show {label}` shows it; answer it with `--attention {a_id}`"),
        ));
    }
    Ok((s, a))
}

/// The answer `args` give attention `a`: a choice among its own (`allow`, `deny`, ...), or for
/// a question one answer per question (`deny` alone denies it).
pub fn response(
    id: &str,
    a: &Attention,
    args: &[String],
    message: Option<String>,
) -> Result<Response, RuntimeError> {
    let question = !a.questions.is_empty();
    if question && !(args.len() == 1 && args[0] == "deny") {
        let answers = crate::seam::answer::question_answers(a, args).map_err(|why| {
            refuse(
                id,
                why,
                format!("`spex show {id}` lists the questions and their options"),
            )
        })?;
        return Ok(Response {
            choice: args.join("; "),
            message,
            by: "cli",
            answers,
        });
    }
    let [arg] = args else {
        return Err(refuse(
            id,
            format!(
                "attention `{}` takes one choice, and {} were given",
                a.id.as_deref().unwrap_or("?"),
                args.len()
            ),
            format!("`spex show {id}` lists its choices"),
        ));
    };
    Ok(Response {
        choice: resolve_choice(id, a, arg)?,
        message,
        by: "cli",
        answers: Vec::new(),
    })
}

/// The refusal for an attention nothing here can answer: no hook waits for it, and no host
/// holds its terminal.
pub fn terminal_only(s: &Session, a: &Attention) -> RuntimeError {
    let label = s.label();
    let why = a
        .via
        .as_ref()
        .and_then(|v| v.why.clone())
        .unwrap_or_else(|| {
            "no hook waits for its answer and spex does not host its terminal".into()
        });
    refuse(
        &s.id,
        format!(
            "attention `{}` of session `{label}` can be answered only at its terminal: {why}; nothing was sent",
            a.id.as_deref().unwrap_or("?")
        ),
        "answer it in the terminal the session runs in",
    )
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
                format!(
                    "`{arg}` is not a choice of attention `{}` (it offers: {})",
                    a.id.as_deref().unwrap_or("?"),
                    offered.join(", ")
                ),
                "`spex answer <session> <choice>` with one of those",
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
                from: Some(r.by.to_owned()),
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
#[expect(
    clippy::too_many_lines,
    reason = "the dialog answered step by step, each step checked against the screen, then confirmed: one sequence"
)]
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
    let answering = harness.answering().ok_or_else(|| {
        refuse(
            id,
            format!("session `{label}`'s harness cannot be answered from outside its terminal"),
            format!("`spex attach {label}` and answer there"),
        )
    })?;
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
                        "cannot answer attention `{att}` of session `{label}`: {why}; nothing was typed"
                    ),
                    format!(
                        "`spex snapshot {label}` shows the screen; `spex attach {label}` to answer there"
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
                "attention `{att}` of session `{label}` closed before spex answered it; nothing was typed"
            ),
            format!("`spex show {label}`"),
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
                    "the answer to attention `{att}` of session `{label}` stopped at step {} of {}: {e}",
                    i + 1,
                    steps.len()
                ),
                format!(
                    "`spex snapshot {label}` shows the screen; `spex attach {label}` to finish there"
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
                "attention `{att}` of session `{label}` was sent its keys but the harness did not confirm within {} s",
                timeout.as_secs()
            ),
            format!("`spex snapshot {label}` shows the screen"),
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

/// What the harness's hooks reported that closed attention `a`: its call's end, or else that
/// the session moved on.
fn closed_by(store: &ProjectStore, id: &str, a: &Attention) -> String {
    let events = store.events(id, Some(32)).unwrap_or_default();
    let ended = events.iter().rev().find(|e| {
        e.kind == "tool.completed"
            && a.call_id.is_some()
            && e.fields.get("call_id").and_then(serde_json::Value::as_str) == a.call_id.as_deref()
    });
    let tool = a.tool.as_deref().unwrap_or("the tool");
    match ended.map(|e| e.fields.get("ok") == Some(&serde_json::Value::Bool(true))) {
        Some(true) => format!("{tool} ran"),
        Some(false) => format!("{tool} ran and failed"),
        None => "the dialog closed and the session moved on".to_owned(),
    }
}

/// Whether a hook waits for the answer to `a` (see `dispatch::wait`): the process it names
/// still runs.
pub fn hook_waiting(a: &Attention) -> bool {
    a.hook.is_some_and(crate::seam::evidence::alive)
}

/// Answers attention `a` through the hook that waits for it: posts the answer for this
/// attention and its call (`ProjectStore::post_answer`), then waits until the hook took it and
/// the harness's own evidence shows it applied it (its hooks closed the attention: the call
/// ran; or its transcript shows the denial or the answers, the turn going on). An answer the
/// hook did not take (the dialog closed another way, the hook ended) is taken back and the
/// answer fails, changing nothing.
#[expect(
    clippy::too_many_lines,
    reason = "post, wait for the hook to take it, confirm or take it back: one sequence over the same attention"
)]
pub fn by_hook(
    store: &ProjectStore,
    s: &Session,
    a: &Attention,
    r: &Response,
    timeout: Duration,
) -> Result<Answered, RuntimeError> {
    use crate::store::answers::Posted;
    let started = Instant::now();
    let id = s.id.as_str();
    let label = s.label();
    let att = a.id.clone().unwrap_or_default();
    let answering = adapters::lookup(&s.harness).and_then(crate::seam::Harness::answering);
    if let Some(Err(why)) = answering.map(|h| h.hook_takes(a, r)) {
        return Err(refuse(
            id,
            format!(
                "attention `{att}` of session `{label}` cannot be answered `{}` through the hook that waits for it: {why}; nothing was sent",
                r.choice
            ),
            format!("`spex show {label}` lists its choices"),
        ));
    }
    let posted = Posted {
        answers: r.answers.clone(),
        attention: att.clone(),
        call_id: a.call_id.clone(),
        choice: r.choice.clone(),
        message: r.message.clone(),
    };
    if !mark(store, id, &att, Some(r)) {
        return Err(refuse(
            id,
            format!(
                "attention `{att}` of session `{label}` closed before spex answered it; nothing was sent"
            ),
            format!("`spex show {label}`"),
        ));
    }
    store.post_answer(id, &posted)?;
    let dir = store.session_dir(id);
    let transcript_dir = s
        .transcript
        .as_deref()
        .and_then(std::path::Path::parent)
        .map(std::path::Path::to_path_buf);
    let mut dirs = vec![dir.as_path()];
    dirs.extend(transcript_dir.as_deref());
    let outcome = crate::fsutil::wait_on(&dirs, started + timeout, None, || {
        let taken = !store.answer_pending(id, &att);
        let now = store.load(id).ok().flatten();
        let open = now.as_ref().is_some_and(|n| {
            n.status != Status::Exited
                && n.attention.as_ref().and_then(|x| x.id.as_deref()) == Some(att.as_str())
        });
        if !taken {
            if !open {
                return Some(Err(
                    "the dialog closed another way before the hook took the answer",
                ));
            }
            if !hook_waiting(a) {
                return Some(Err("the hook that waited for it has ended"));
            }
            return None;
        }
        let seen = now
            .as_ref()
            .and_then(|n| answering.and_then(|h| h.confirmed(n, a, &posted)));
        match seen {
            Some(what) => Some(Ok(what)),
            None if !open => Some(Ok(closed_by(store, id, a))),
            None => None,
        }
    })
    .map_err(|e| RuntimeError::Io {
        path: dir.clone(),
        source: e,
    })?;
    let what = match outcome {
        Some(Ok(what)) => what,
        failed => {
            let taken = !store.withdraw_answer(id, &att);
            if !taken {
                mark(store, id, &att, None);
            }
            let why = match failed {
                Some(Err(why)) => why.to_owned(),
                _ if taken => format!(
                    "the hook took the answer but the harness did not confirm it within {} s",
                    timeout.as_secs()
                ),
                _ => format!("no hook took the answer within {} s", timeout.as_secs()),
            };
            return Err(refuse(
                id,
                format!("attention `{att}` of session `{label}` was not answered: {why}"),
                format!("`spex show {label}` says what it waits on now"),
            ));
        }
    };
    close(store, id, &att);
    Ok(Answered {
        attention: att,
        choice: r.choice.clone(),
        message: r.message.clone(),
        via: "hook".into(),
        confirmed: what,
        elapsed_ms: elapsed_ms(started),
        taken_ms: None,
    })
}
