//! Answering Codex's approvals and questions (docs/harnesses/facts/answering-codex.md): what a
//! `PermissionRequest` payload opens, and how an attention of a thread on spex's own
//! app-server is answered as a client of that server (`session_server.rs` sends the response).

use std::time::Duration;

use serde_json::{Value, json};

use super::rpc::Notification;
use crate::adapters::common::wire::choice;
use crate::seam::answer::{Answering, Confirmed, Response};
use crate::seam::session_server::{ServerCtx, ServerError, ServerErrorKind};
use crate::store::session::{AnswerWay, Attention, AttentionKind, LaunchedBy, Session, Via};

pub struct CodexAnswering;

/// The attention a `PermissionRequest` opens: a command or patch approval with the decisions
/// the app-server takes for it (§1.3: `accept`, `acceptForSession`, `decline`, `cancel`; never
/// the permanent execpolicy amendment). A decline carries no message to the model.
pub fn ask(tool: Option<&str>, _input: &Value) -> Attention {
    Attention {
        kind: Some(AttentionKind::Permission),
        tool: tool.map(str::to_owned),
        choices: vec![
            choice("allow", "accept", false),
            choice("allow-session", "acceptForSession", false),
            choice("deny", "decline", false),
            choice("cancel", "cancel (decline and end the turn)", false),
        ],
        ..Attention::default()
    }
}

impl Answering for CodexAnswering {
    fn away_waits(&self, event: &str, env: &crate::env::Env, away: &dyn Fn() -> bool) -> bool {
        // Only a `--no-daemon` TUI needs it (§4): its prompt is answerable nowhere else, and a
        // waiting hook hides it (§3). A thread on spex's server or on the person's background
        // server is answered as a client of that server, with the prompt left on screen.
        event == "PermissionRequest"
            && env.var(crate::seam::session_server::SERVER_MARK).is_none()
            && away()
            && !super::evidence::under_managed_daemon()
    }

    fn hook_takes(&self, _a: &Attention, r: &Response) -> Result<(), String> {
        match r.choice.as_str() {
            "allow" | "deny" => Ok(()),
            other => Err(format!(
                "Codex's permission hook can allow once or deny (with a message), not `{other}`"
            )),
        }
    }

    fn confirmed(
        &self,
        s: &Session,
        a: &Attention,
        answer: &crate::store::answers::Posted,
    ) -> Option<String> {
        // The rollout holds what the model was sent for the call: a denied one is
        // `exec_command failed: CreateProcess { message: "Rejected(\"<message>\")" }`.
        let output = call_output(s.transcript.as_deref()?, a.call_id.as_deref()?)?;
        let denied = output.contains("Rejected(");
        match (answer.choice.as_str(), &answer.message) {
            ("deny", Some(m)) if denied && output.contains(m.as_str()) => {
                Some("Codex sent the model the denial and its message".into())
            }
            ("deny", _) if denied => Some("the command was denied".into()),
            ("allow", _) if !denied => Some("the command ran".into()),
            _ => None,
        }
    }

    fn hook_reply(
        &self,
        event: &str,
        _payload: &Value,
        answer: &crate::store::answers::Posted,
    ) -> Option<crate::seam::event::Reply> {
        // §3: `hookEventName` is required; a deny's message reaches the model.
        let decision = match answer.choice.as_str() {
            "allow" => json!({ "behavior": "allow" }),
            "deny" => json!({
                "behavior": "deny",
                "message": answer.message.as_deref().unwrap_or("denied with `spex deny`"),
            }),
            _ => return None,
        };
        let out = json!({ "hookSpecificOutput": { "hookEventName": event, "decision": decision } });
        Some(crate::seam::event::Reply {
            stdout: out.to_string(),
            ..crate::seam::event::Reply::default()
        })
    }

    fn via(&self, a: &Attention, s: &Session) -> Via {
        // Called by the attention's hook: a thread of the person's TUI in its default mode is
        // held by the per-user background server that runs the hook, which another client
        // may join (§4); a `--no-daemon` TUI runs its server inside itself, with no socket.
        let asks = matches!(
            a.kind,
            Some(AttentionKind::Permission | AttentionKind::Question)
        );
        if s.launched_by == LaunchedBy::Spex || (asks && super::evidence::under_managed_daemon()) {
            Via {
                how: AnswerWay::Server,
                why: None,
            }
        } else {
            Via {
                how: AnswerWay::TerminalOnly,
                why: Some("a Codex TUI started with `--no-daemon` holds its thread in its own process, which no other client can join".into()),
            }
        }
    }
}

/// The control socket of the per-user background server a Codex TUI started in its default
/// mode runs its threads on (§4): `$CODEX_HOME/app-server-control/app-server-control.sock`,
/// `$CODEX_HOME` read from the thread's rollout path (`$CODEX_HOME/sessions/Y/M/D/rollout-…`;
/// the person's TUI may run with another home than this command), else this command's.
pub fn daemon_socket(env: &crate::env::Env, s: &Session) -> Option<std::path::PathBuf> {
    let from_rollout = s.transcript.as_deref().and_then(|t| {
        let sessions = t.ancestors().nth(4)?;
        (sessions.file_name()? == "sessions").then(|| sessions.parent())?
    });
    let home = from_rollout.map_or_else(
        || super::home::codex_home(env),
        std::path::Path::to_path_buf,
    );
    let sock = home.join("app-server-control/app-server-control.sock");
    // `exists` follows the link to the socket Codex binds under `/tmp/codex-daemon-<uid>/`.
    sock.exists().then_some(sock)
}

/// What the model was sent for call `call` (its tool output), from the rollout's end.
fn call_output(rollout: &std::path::Path, call: &str) -> Option<String> {
    crate::adapters::common::log::jsonl_tail(rollout)?
        .iter()
        .rev()
        .map(|e| &e["payload"])
        .find(|p| {
            p["call_id"] == call
                && p["type"]
                    .as_str()
                    .is_some_and(|t| t.ends_with("_call_output"))
        })
        .and_then(|p| p["output"].as_str().map(str::to_owned))
}

/// How long the server takes to re-send a pending request after `thread/resume` (~50 ms seen,
/// §0.2), and to report what became of an answered one.
const REPLAY_WAIT: Duration = Duration::from_secs(5);
const OUTCOME_WAIT: Duration = Duration::from_secs(30);

/// Whether server request `req` is the one attention `a` of `thread` waits on: its thread, its
/// turn (the hook's `turn_id`), its call (a question's `tool_use_id` is the request's `itemId`),
/// and for a command the command the hook reported.
fn matches(req: &Notification, thread: &str, a: &Attention) -> bool {
    let p = &req.params;
    let kind_fits = match a.kind {
        Some(AttentionKind::Question) => req.method == "item/tool/requestUserInput",
        _ => matches!(
            req.method.as_str(),
            "item/commandExecution/requestApproval" | "item/fileChange/requestApproval"
        ),
    };
    let same =
        |key: &str, want: Option<&String>| want.is_none_or(|w| p[key].as_str() == Some(w.as_str()));
    let command_fits = req.method != "item/commandExecution/requestApproval"
        || p["commandActions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["command"].as_str())
            .chain(p["command"].as_str())
            .any(|c| a.text.starts_with(c) || a.text.contains(c));
    kind_fits
        && p["threadId"].as_str() == Some(thread)
        && same("turnId", a.turn_id.as_ref())
        && same("itemId", a.call_id.as_ref())
        && command_fits
}

/// The response to request `req` that gives `r`: a decision (§1.3: never the permanent
/// execpolicy amendment) or a question's answers (§1.5).
fn result_for(req: &Notification, a: &Attention, r: &Response) -> Result<Value, String> {
    if req.method == "item/tool/requestUserInput" {
        return question_result(&req.params, r);
    }
    if r.message.is_some() {
        return Err(
            "a Codex approval takes no message (a decline reaches the model as `rejected by user`)"
                .into(),
        );
    }
    let decision = match r.choice.as_str() {
        "allow" => "accept",
        "allow-session" => "acceptForSession",
        "deny" => "decline",
        "cancel" => "cancel",
        other => {
            return Err(format!(
                "`{other}` is not a choice of attention `{}`",
                a.id.as_deref().unwrap_or("?")
            ));
        }
    };
    Ok(json!({ "decision": decision }))
}

/// The answers to a `request_user_input` (§1.5): one per question, in order, each an option's
/// label as the TUI sends it, or free text as the TUI sends "None of the above" with a note;
/// a message goes as a note to the first question.
fn question_result(params: &Value, r: &Response) -> Result<Value, String> {
    let questions = params["questions"].as_array().cloned().unwrap_or_default();
    if questions.is_empty() {
        return Err("the request asks no question".into());
    }
    if r.answers.len() != questions.len() {
        return Err(format!(
            "the request asks {} question(s), and {} answer(s) were given (a Codex question is not denied: Esc in its TUI interrupts the turn)",
            questions.len(),
            r.answers.len()
        ));
    }
    let mut answers = serde_json::Map::new();
    for (i, (q, given)) in questions.iter().zip(&r.answers).enumerate() {
        let labels: Vec<&str> = q["options"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|o| o["label"].as_str())
            .collect();
        let mut out: Vec<String> = match labels.iter().find(|l| l.eq_ignore_ascii_case(given)) {
            Some(l) => vec![(*l).to_owned()],
            None if q["isOther"].as_bool() == Some(true) => {
                vec!["None of the above".into(), format!("user_note: {given}")]
            }
            None => {
                return Err(format!(
                    "`{given}` is none of the options: {}",
                    labels.join(", ")
                ));
            }
        };
        if let Some(m) = r.message.as_ref().filter(|_| i == 0) {
            out.push(format!("user_note: {m}"));
        }
        let qid = q["id"].as_str().unwrap_or_default().to_owned();
        answers.insert(qid, json!({ "answers": out }));
    }
    Ok(json!({ "answers": answers }))
}

/// Answers attention `a` of `thread` on the server at `ctx.socket`: `thread/resume` makes the
/// server send the pending request again (§2), the one `a` names is answered, and the answer
/// is confirmed by `serverRequest/resolved` and the item's own end (the command ran, or was
/// declined) or, for a question, the resolved request.
pub fn answer(
    ctx: &ServerCtx,
    thread: &str,
    a: &Attention,
    r: &Response,
) -> Result<Confirmed, ServerError> {
    let refused = |m: String| ServerError::new(ServerErrorKind::Refused, m);
    let mut c = super::client::client(ctx)?;
    // Resuming a thread the server does not hold would load it there from its rollout, while
    // another process (a `--no-daemon` TUI) may run it.
    let loaded = c
        .thread_loaded_list()
        .map_err(|e| super::client::error(&e))?;
    if !loaded.iter().any(|t| t == thread) {
        return Err(ServerError::new(
            ServerErrorKind::UnknownThread,
            "the server does not hold the session's thread",
        ));
    }
    c.thread_resume(thread)
        .map_err(|e| super::client::error(&e))?;
    let (id, req) = c
        .wait_request(|req| matches(req, thread, a), REPLAY_WAIT)
        .map_err(|_| {
            refused(
                "the server holds no request this attention names (it was answered or withdrawn)"
                    .into(),
            )
        })?;
    let result = result_for(&req, a, r).map_err(refused)?;
    c.respond(&id, &result)
        .map_err(|e| super::client::error(&e))?;
    let resolved = |p: &Value| p["requestId"] == id && p["threadId"].as_str() == Some(thread);
    c.await_notification("serverRequest/resolved", resolved, OUTCOME_WAIT)
        .map_err(|e| super::client::error(&e))?;
    let taken = Some(std::time::Instant::now());
    if req.method == "item/tool/requestUserInput" {
        c.close();
        return Ok(Confirmed {
            what: "the server took the answers and the turn goes on".into(),
            taken,
        });
    }
    let item = req.params["itemId"].as_str().unwrap_or_default().to_owned();
    let decision = result["decision"].as_str().unwrap_or_default().to_owned();
    let accepted = matches!(decision.as_str(), "accept" | "acceptForSession");
    let in_thread = |n: &Notification| n.params["threadId"].as_str() == Some(thread);
    let end = std::time::Instant::now() + OUTCOME_WAIT;
    let what = loop {
        let left = end.saturating_duration_since(std::time::Instant::now());
        let n = c
            .next_notification(left)
            .map_err(|e| super::client::error(&e))?;
        let this_item = n.params.pointer("/item/id").and_then(Value::as_str) == Some(&item);
        match n.method.as_str() {
            "item/completed" if this_item => break outcome(&n.params),
            // A declined or cancelled request's item is not reported to a client that joined
            // after it started (seen live with 0.169.0); the turn moving on without it (its
            // next item, or its end) is the proof.
            "item/started" | "turn/completed" if !accepted && !this_item && in_thread(&n) => {
                break format!(
                    "the server resolved the request ({decision}) and the turn went on without it"
                );
            }
            _ => {}
        }
    };
    c.close();
    Ok(Confirmed { what, taken })
}

/// What an `item/completed` says became of the item.
fn outcome(p: &Value) -> String {
    let status = p
        .pointer("/item/status")
        .and_then(Value::as_str)
        .unwrap_or("?");
    match (status, p.pointer("/item/exitCode").and_then(Value::as_i64)) {
        ("declined", _) => "the request was declined: it did not run".to_owned(),
        ("completed", Some(code)) => format!("the command ran (exit code {code})"),
        ("completed", None) => "the change was applied".to_owned(),
        (other, _) => format!("the item ended `{other}`"),
    }
}
