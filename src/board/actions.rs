//! The board's actions: each one the code path of the CLI command it stands for (the table
//! [`ACTIONS`] names it), run for a request that passed the gate and does not come from a
//! session's own process tree.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::hub::Push;
use super::screen::resolve;
use super::shared::Shared;
use crate::env::Env;
use crate::runtime::{self, RuntimeError, StageAt};
use crate::store::ProjectStore;
use crate::store::session::{Status, TurnState};

/// Every board action and the command it runs the code of (docs/guides/board.md lists them).
pub const ACTIONS: [(&str, &str); 7] = [
    (
        "answer",
        "spex answer <session> <choice>... [--message TEXT] --attention <att>",
    ),
    ("deliver", "spex deliver <session> <text> --wait-until done"),
    ("interrupt", "spex interrupt <session>"),
    ("stop", "spex stop <session>"),
    ("resume", "spex resume <session> --detach --json"),
    ("diff", "spex diff <session> [--json] [-- FILE]"),
    ("open", "spex open <session> [FILE]"),
];

/// How long an answer or an interrupt waits for the harness to confirm (the CLI's default).
const CONFIRM: Duration = Duration::from_secs(30);
/// How long a delivery's turn is followed to its end.
const TURN: Duration = Duration::from_hours(1);

type Reply = (StatusCode, Value);

fn refused(status: StatusCode, error: impl Into<String>) -> Reply {
    (status, json!({"ok": false, "error": error.into()}))
}

fn failed(e: &RuntimeError) -> Reply {
    (
        StatusCode::CONFLICT,
        json!({"ok": false, "reason": e.reason(), "error": crate::hint::spelled(e)}),
    )
}

/// Runs action `name` with `body` for the client at `peer`.
pub async fn run(shared: Arc<Shared>, peer: SocketAddr, name: &str, body: Value) -> Reply {
    if !ACTIONS.iter().any(|(a, _)| *a == name) {
        return refused(StatusCode::NOT_FOUND, format!("no action `{name}`"));
    }
    let name = name.to_owned();
    let done = tokio::task::spawn_blocking(move || {
        let env = &shared.env;
        if let Some(why) = from_a_session(env, peer, shared.local) {
            return refused(
                StatusCode::FORBIDDEN,
                format!("refused: the request comes from inside a session ({why}); a session cannot act on the board"),
            );
        }
        if let Some(key) = body["session"].as_str().filter(|k| k.contains(':')) {
            return remote_action(env, key, &name, &body);
        }
        let Some((store, id)) = body["session"].as_str().and_then(|k| resolve(env, k)) else {
            return refused(StatusCode::NOT_FOUND, "no such session");
        };
        match name.as_str() {
            "answer" => answer(env, &store, &id, &body),
            "deliver" => deliver(&shared, &store, &id, &body),
            "interrupt" => interrupt(env, &store, &id),
            "stop" => stop(env, &store, &id),
            "resume" => resume(&store, &id),
            "diff" => diff(&store, &id, &body),
            "open" => open(&store, &id, &body),
            _ => refused(StatusCode::NOT_FOUND, "no such action"),
        }
    })
    .await;
    done.unwrap_or_else(|_| refused(StatusCode::INTERNAL_SERVER_ERROR, "the action failed"))
}

/// The words of the CLI command that action `name` stands for, on session `id` of another
/// machine (`None`: not offered for a remote session on the board).
fn remote_words(name: &str, id: &str, body: &Value) -> Result<Vec<String>, Reply> {
    let mut words = vec![name.to_owned(), id.to_owned()];
    match name {
        "answer" => {
            let choices = strings(&body["choices"]);
            if choices.is_empty() {
                return Err(refused(StatusCode::BAD_REQUEST, "no choice given"));
            }
            let Some(att) = body["attention"].as_str() else {
                return Err(refused(StatusCode::BAD_REQUEST, "no attention named"));
            };
            words.extend(choices);
            words.extend(["--attention".to_owned(), att.to_owned()]);
            // Recorded there as answered by the board, as a local session's answer is.
            words.extend(["--by".to_owned(), "board".to_owned()]);
            if let Some(m) = body["message"].as_str().filter(|m| !m.is_empty()) {
                words.extend(["--message".to_owned(), m.to_owned()]);
            }
        }
        "deliver" => {
            let text = body["text"].as_str().unwrap_or_default();
            if text.trim().is_empty() {
                return Err(refused(StatusCode::BAD_REQUEST, "the prompt is empty"));
            }
            words.push(text.to_owned());
        }
        "resume" => words.push("--detach".to_owned()),
        "interrupt" | "stop" => {}
        _ => {
            return Err(refused(
                StatusCode::NOT_IMPLEMENTED,
                format!(
                    "`{name}` of a session on another machine is not on the board: `spex {name} HOST:HANDLE` runs it"
                ),
            ));
        }
    }
    words.push("--json".to_owned());
    Ok(words)
}

/// An action on a session of another machine (`<host>:<project>/<id>`): the same command run
/// by the spex there through the protocol's `run` over the host's SSH connection
/// (`crate::remote`), its `--json` answer back; the remote confirms it as it confirms a local
/// one.
fn remote_action(env: &Env, key: &str, name: &str, body: &Value) -> Reply {
    let Some((host, id)) = key
        .split_once(':')
        .and_then(|(h, rest)| Some((h, rest.rsplit_once('/')?.1)))
    else {
        return refused(StatusCode::NOT_FOUND, "no such session");
    };
    if crate::store::session::check_id(id, "board").is_err() {
        return refused(StatusCode::NOT_FOUND, "no such session");
    }
    let Ok(remote) = crate::remote::find(env, host) else {
        return refused(StatusCode::NOT_FOUND, format!("no remote named `{host}`"));
    };
    let words = match remote_words(name, id, body) {
        Ok(w) => w,
        Err(reply) => return reply,
    };
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    match crate::remote::run(env, &remote, &words, None) {
        Ok(ran) if ran.exit == Some(0) => {
            let answer: Value = serde_json::from_str(&ran.stdout).unwrap_or(Value::Null);
            let mut reply = json!({"ok": true, "host": host, "remote": answer});
            // An answer reads as a local one's (`answered`), so the page says what was given.
            if name == "answer" {
                reply["answered"] = reply["remote"].clone();
            }
            (StatusCode::OK, reply)
        }
        Ok(ran) => {
            let line = ran
                .stderr
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("the command failed there");
            (
                StatusCode::CONFLICT,
                json!({"ok": false, "host": host, "error": format!("on `{host}`: {}", crate::text::visible(line))}),
            )
        }
        Err(e) => (
            StatusCode::BAD_GATEWAY,
            json!({"ok": false, "host": host, "error": crate::hint::spelled(&e)}),
        ),
    }
}

/// Why the client at `peer` counts as inside a session, if it does: its process or an
/// ancestor is a live session's recorded process or host, or carries a session's variable.
pub fn from_a_session(env: &Env, peer: SocketAddr, local: SocketAddr) -> Option<String> {
    let pid = super::peer::process_of(peer, local)?;
    let mut pids: HashSet<u32> = HashSet::new();
    for store in crate::store::all_projects(&env.spex_home()) {
        for s in store.sessions() {
            if s.status == Status::Exited {
                continue;
            }
            pids.extend(s.process_id().map(|p| p.pid));
            pids.extend(runtime::host_pids(&store, &s.id));
        }
    }
    super::peer::inside_session(pid, &pids)
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::Array(a) => a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_owned))
            .collect(),
        Value::String(s) => vec![s.clone()],
        _ => Vec::new(),
    }
}

/// `spex answer`: the choices (one per question, a multi-select's comma-separated), the
/// message, the attention it is for; recorded as answered by the board.
fn answer(env: &Env, store: &ProjectStore, id: &str, body: &Value) -> Reply {
    let choices = strings(&body["choices"]);
    if choices.is_empty() {
        return refused(StatusCode::BAD_REQUEST, "no choice given");
    }
    let Some(att) = body["attention"].as_str() else {
        return refused(StatusCode::BAD_REQUEST, "no attention named");
    };
    let message = body["message"]
        .as_str()
        .filter(|m| !m.is_empty())
        .map(str::to_owned);
    match runtime::transport::answer(
        env,
        store,
        id,
        Some(att),
        &choices,
        message,
        "board",
        CONFIRM,
    ) {
        Ok(done) => (StatusCode::OK, json!({"ok": true, "answered": done})),
        Err(e) => failed(&e),
    }
}

/// `spex deliver --wait-until done`: the receipt's stages go to the pages as they come
/// (`accepted`, `started` here, `done` when the turn ends).
fn deliver(shared: &Arc<Shared>, store: &ProjectStore, id: &str, body: &Value) -> Reply {
    let env = &shared.env;
    let began = Instant::now();
    let text = body["text"].as_str().unwrap_or_default();
    if text.trim().is_empty() {
        return refused(StatusCode::BAD_REQUEST, "the prompt is empty");
    }
    let request = body["request"].as_str().unwrap_or_default().to_owned();
    let Ok(Some(record)) = store.load(id) else {
        return refused(StatusCode::NOT_FOUND, "no such session");
    };
    let d = match runtime::transport::of(env, store, &record)
        .and_then(|t| t.deliver(text, true, CONFIRM))
    {
        Ok(d) => d,
        Err(e) => return failed(&e),
    };
    let key = super::view::key_of(store, id);
    let notice = move |stages: &[StageAt], outcome: Option<TurnState>| json!({"type": "receipt", "request": request, "session": key, "stages": stages, "outcome": outcome});
    let _ = shared
        .tx
        .send(Push::Notice(Arc::new(notice(&d.stages, None))));
    if d.stages.last().is_some_and(|s| s.stage == "started") {
        // The turn is followed to its end apart: the request is answered now.
        let shared = shared.clone();
        let (store, id, mut stages, turn_id) = (
            store.clone(),
            id.to_owned(),
            d.stages.clone(),
            d.turn_id.clone(),
        );
        std::thread::spawn(move || {
            let ended = turn_end(&shared.env, &store, &id, turn_id.as_deref(), began + TURN);
            if let Some(state) = ended {
                stages.push(StageAt::now("done", began));
                let _ = shared
                    .tx
                    .send(Push::Notice(Arc::new(notice(&stages, Some(state)))));
            }
        });
    }
    (StatusCode::OK, json!({"ok": true, "delivery": d}))
}

/// Waits until the turn `turn_id` (else the running one) of session `id` ended; its state.
fn turn_end(
    env: &Env,
    store: &ProjectStore,
    id: &str,
    turn_id: Option<&str>,
    deadline: Instant,
) -> Option<TurnState> {
    let mut started: Option<String> = None;
    loop {
        let s = store.load(id).ok().flatten()?;
        let s = runtime::reconcile_hosted(env, store, &s).unwrap_or(s);
        let turn = s.turn.as_ref().filter(|t| match turn_id {
            Some(tid) => t.id.as_deref() == Some(tid),
            None => started.get_or_insert_with(|| t.started_at.clone()).as_str() == t.started_at,
        });
        if let Some(t) = turn.filter(|t| t.state != TurnState::Running) {
            return Some(t.state);
        }
        if s.status == Status::Exited || Instant::now() >= deadline {
            return None;
        }
        // Woken by the record's changes; a look every half second for what sends none.
        let _ = runtime::wait_for(
            &store.session_dir(id),
            Instant::now() + Duration::from_millis(500),
            || {
                store
                    .load(id)
                    .ok()
                    .flatten()
                    .filter(|r| r.seq != s.seq || r.status != s.status)
            },
        );
    }
}

/// `spex interrupt`.
fn interrupt(env: &Env, store: &ProjectStore, id: &str) -> Reply {
    let Ok(Some(record)) = store.load(id) else {
        return refused(StatusCode::NOT_FOUND, "no such session");
    };
    match runtime::transport::of(env, store, &record).and_then(|t| t.interrupt(CONFIRM)) {
        Ok(s) => (
            StatusCode::OK,
            json!({"ok": true, "status": s.status.as_str()}),
        ),
        Err(e) => failed(&e),
    }
}

/// `spex stop` (its default grace of 5 s).
fn stop(env: &Env, store: &ProjectStore, id: &str) -> Reply {
    let Ok(Some(record)) = store.load(id) else {
        return refused(StatusCode::NOT_FOUND, "no such session");
    };
    let record = runtime::reconcile_hosted(env, store, &record).unwrap_or(record);
    if record.status == Status::Exited {
        return (
            StatusCode::OK,
            json!({"ok": true, "status": "exited", "already": true}),
        );
    }
    match runtime::transport::of(env, store, &record).and_then(|t| t.stop(Duration::from_secs(5))) {
        Ok(s) => (
            StatusCode::OK,
            json!({"ok": true, "status": s.status.as_str()}),
        ),
        Err(e) => failed(&e),
    }
}

/// Runs `spex <args>` as the command itself, in the checkout of session `id`'s project (where
/// the CLI finds the session), with no terminal; its output, or its error as the reply.
fn spex(store: &ProjectStore, id: &str, args: &[&str]) -> Result<Vec<u8>, Reply> {
    let Ok(Some(record)) = store.load(id) else {
        return Err(refused(StatusCode::NOT_FOUND, "no such session"));
    };
    let Ok(exe) = std::env::current_exe() else {
        return Err(refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot find the spex binary",
        ));
    };
    let out = std::process::Command::new(exe)
        .args(args)
        .current_dir(&record.project)
        .stdin(std::process::Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => Ok(o.stdout),
        Ok(o) => Err(refused(
            StatusCode::CONFLICT,
            String::from_utf8_lossy(&o.stderr).trim().to_owned(),
        )),
        Err(e) => Err(refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot run `spex {}`: {e}", args[0]),
        )),
    }
}

/// `spex resume --detach --json`, run as that command in the session's checkout: a resume
/// starts a terminal host as the CLI builds it, from the person's configuration there.
fn resume(store: &ProjectStore, id: &str) -> Reply {
    match spex(store, id, &["resume", id, "--detach", "--json"]) {
        Ok(out) => (
            StatusCode::OK,
            json!({"ok": true, "resumed": serde_json::from_slice::<Value>(&out).unwrap_or_default()}),
        ),
        Err(r) => r,
    }
}

/// `spex diff --json` (the files, their status and lines, which the session touched), then
/// each file's patch as git prints it (no colour: no terminal), for the page to show as text.
fn diff(store: &ProjectStore, id: &str, body: &Value) -> Reply {
    let listed = match spex(store, id, &["diff", id, "--json"]) {
        Ok(out) => serde_json::from_slice::<Value>(&out).unwrap_or_default(),
        Err(r) => return r,
    };
    let mut files = listed["files"].as_array().cloned().unwrap_or_default();
    let only = body["file"].as_str();
    for f in &mut files {
        let Some(path) = f["path"].as_str().map(str::to_owned) else {
            continue;
        };
        if only.is_some_and(|o| o != path) {
            continue;
        }
        match spex(store, id, &["diff", id, "--", &path]) {
            Ok(out) => f["patch"] = String::from_utf8_lossy(&out).into_owned().into(),
            Err((_, e)) => f["error"] = e["error"].clone(),
        }
    }
    (
        StatusCode::OK,
        json!({"ok": true, "base": listed["base"], "tree": listed["tree"], "files": files}),
    )
}

/// `spex open [FILE]`: the editor on this machine. A graphical editor returns at once; one
/// still running after a moment is left running (it has no terminal to wait on here).
fn open(store: &ProjectStore, id: &str, body: &Value) -> Reply {
    let Ok(Some(record)) = store.load(id) else {
        return refused(StatusCode::NOT_FOUND, "no such session");
    };
    let Ok(exe) = std::env::current_exe() else {
        return refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot find the spex binary",
        );
    };
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["open", id]);
    if let Some(file) = body["file"].as_str().filter(|f| !f.is_empty()) {
        cmd.arg(file);
    }
    let child = cmd
        .current_dir(&record.project)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            return refused(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot run `spex open`: {e}"),
            );
        }
    };
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return (StatusCode::OK, json!({"ok": true})),
            Ok(Some(_)) => {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                return refused(StatusCode::CONFLICT, err.trim().to_owned());
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return refused(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }
    }
    // Still running: reaped in a thread of its own when the editor ends.
    std::thread::spawn(move || child.wait());
    (StatusCode::OK, json!({"ok": true, "running": true}))
}
