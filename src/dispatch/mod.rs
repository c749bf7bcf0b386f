//! The hook hot path: read the payload once, decode it through the harness's adapter, resolve
//! the session, run the built-in handlers and then the project's hook nodes, apply one state
//! transition and append one event under the record lock, and answer in the harness's
//! protocol. Synchronous, no async runtime, no shell; any internal failure is logged and
//! swallowed so the agent is never broken by spex.

#[cfg(test)]
mod fuzz_tests;
mod glob;
pub mod governance;
pub mod handlers;
mod hooknodes;
mod payload;
pub mod wait;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::adapters;
use crate::env::Env;
use crate::fsutil;
use crate::repo::Tree;
use crate::seam::Harness;
use crate::seam::event::{Answer, HookEvent, Kind, Reply};
use crate::seam::wire::HookWire;
use crate::store::session::{self, LaunchedBy, Session};
use crate::store::{self, ProjectStore};

/// Payloads above this size are not read further (a hook payload is a few KB; a runaway one
/// must not cost the agent time or memory): the event is recorded from what was read.
const MAX_PAYLOAD: usize = 8 * 1024 * 1024;

/// Runs the dispatcher for one hook; `None` means "print nothing, exit 0".
pub fn run(harness: &str, event: &str) -> Option<Reply> {
    std::panic::set_hook(Box::new(|_| {}));
    let mut raw = Vec::new();
    // One byte more than the limit tells a payload that is over it.
    let _ = std::io::stdin()
        .lock()
        .take(MAX_PAYLOAD as u64 + 1)
        .read_to_end(&mut raw);
    let env = Env::from_process(adapters::env_vars());
    let result = std::panic::catch_unwind(|| handle(&env, harness, event, &raw));
    match result {
        Ok(Ok(reply)) => reply.filter(|r| *r != Reply::default()),
        Ok(Err(e)) => {
            log_error(&env, harness, event, &e);
            None
        }
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned());
            log_error(
                &env,
                harness,
                event,
                &format!("panic: {}", msg.unwrap_or_default()),
            );
            None
        }
    }
}

fn log_error(env: &Env, harness: &str, event: &str, error: &str) {
    let line = serde_json::json!({ "time": store::now_rfc3339(), "harness": harness, "event": event, "error": error });
    // Nowhere left to report a failure to log: the harness must not hear of it.
    let _ = fsutil::append_bounded(
        &env.spex_home().join("dispatch-errors.log"),
        format!("{line}\n").as_bytes(),
        store::LOG_BYTES,
    );
}

/// The whole pipeline; an `Err` is logged by the caller and never reaches the harness. `raw`
/// longer than [`MAX_PAYLOAD`] is taken as cut there.
#[expect(
    clippy::too_many_lines,
    reason = "the hook pipeline in the order it runs; its stages share the payload, receipt and record borrowed in place"
)]
pub fn handle(env: &Env, harness: &str, event: &str, raw: &[u8]) -> Result<Option<Reply>, String> {
    let Some(h) = adapters::lookup(harness) else {
        return Err(format!("unknown harness id `{harness}`"));
    };
    let Some(wire) = h.wire() else {
        return Err(format!("harness `{harness}` has no hooks"));
    };
    let cut = raw.len() > MAX_PAYLOAD;
    let raw = &raw[..raw.len().min(MAX_PAYLOAD)];
    // A payload that does not parse as it came is mended (and the mending logged) rather than
    // dropped: a lost Stop would leave its session working forever.
    let (payload, mended) = payload::parse(raw, cut).unwrap_or((Value::Null, None));
    let mended_bytes;
    let raw = match &mended {
        Some(m) => {
            log_error(env, harness, event, &m.why(MAX_PAYLOAD));
            // Hook nodes get the payload as spex read it, as JSON.
            mended_bytes = payload.to_string().into_bytes();
            &mended_bytes[..]
        }
        None => raw,
    };
    let cut = mended.as_ref().is_some_and(|m| m.cut);
    let ev = wire.decode(event, &payload);
    let cwd = ev
        .cwd
        .as_deref()
        .map(PathBuf::from)
        .or_else(|| std::env::current_dir().ok())
        .ok_or("no working directory")?;
    let tree = Tree::discover(&cwd).map_err(|e| crate::hint::spelled(&e))?;
    let mut project = ProjectStore::new(&env.spex_home(), &tree.main);
    let kind = ev.kind.unwrap_or(Kind::Other);
    if env.trace_dispatch {
        let log = serde_json::json!({
            "time": store::now_rfc3339(), "harness": h.id(), "event": event, "session_id": ev.session_id, "tree": tree.root,
        });
        let _ = fsutil::append_bounded(
            &project.dispatch_log(),
            format!("{log}\n").as_bytes(),
            store::LOG_BYTES,
        );
    }
    // Policies and hook nodes come from the receipt `materialize` wrote, so the hot path reads
    // one small file instead of the config layers and the `.spec` tree. The governance index
    // beside it is read only if the event edits a file, and then only the buckets that file
    // can hit.
    let mut receipt = project.receipt(&tree.root).unwrap_or_default();
    let governance = governance::Governance::of(&mut receipt, project.governance_file(&tree.root));
    if let Some(bytes) = receipt.event_log_bytes {
        project.event_log_bytes = bytes;
    }
    let nodes: Vec<&store::HookNode> = receipt
        .hooks
        .iter()
        .filter(|n| n.events.iter().any(|e| e == event))
        .collect();
    let id = if kind == Kind::Other {
        None
    } else {
        // A garbled alias file drops this event (logged by the caller): its id is no path.
        resolve(env, h, wire, &project, &ev)?
    };
    // Hook nodes run first and outside the record lock (they may take seconds), so their
    // verdict is known before the transition: a call a node denies never shows as started.
    // They run even when there is nothing to record; their context follows the built-ins'.
    let mut from_nodes = Answer::default();
    if !nodes.is_empty() {
        let label = id
            .clone()
            .or_else(|| env.spex_session_id.clone())
            .or_else(|| ev.session_id.clone());
        hooknodes::run(
            &nodes,
            raw,
            &label.unwrap_or_default(),
            event,
            &mut from_nodes,
        );
    }
    // Only the event the adapter says waits, and not a call a project hook node blocked.
    let answering = h.answering();
    // A receipt from before the wait existed set no shim timeout for it: no wait.
    let budget = Duration::from_secs(receipt.answer_wait_secs.unwrap_or(0));
    let away = || crate::store::away::read(&env.spex_home()).map_or(receipt.away, |a| a.on);
    let hook_wait = answering
        .filter(|a| a.hook_waits(event, env) || a.away_waits(event, env, &away))
        .filter(|_| !budget.is_zero() && from_nodes.block.is_none())
        .filter(|_| wait::run_by(h.identity().binary))
        .and_then(|_| wait::me());
    let mut waits_on = None;
    let mut answer = match &id {
        Some(id) => {
            let edits: Vec<String> = ev
                .edits
                .iter()
                .filter_map(|p| repo_relative(&tree.root, &cwd, p))
                .collect();
            let now = store::now_rfc3339();
            let ctx = handlers::Ctx {
                hook: event,
                ev: &ev,
                edits: &edits,
                now: &now,
                spec_first: receipt.policies.spec_first,
                stop_gate: receipt.policies.stop_gate,
                governance: &governance,
                store: &project,
                denied: from_nodes.block.is_some(),
                server_reports_failures: h.capabilities().server,
                answering,
                hook_wait,
            };
            let launched_by_spex = wire.hook_env_names_session()
                && env.spex_session_id.as_deref() == Some(id.as_str());
            let (answer, waiting) = project
                .update(id, |current| {
                    let existed = current.is_some();
                    let mut s = current
                        .unwrap_or_else(|| new_session(id, h, &ev, &tree, launched_by_spex, &now));
                    let mut filled = false;
                    if s.harness_session_id.is_none() && ev.session_id.is_some() {
                        s.harness_session_id.clone_from(&ev.session_id);
                        filled = true;
                    }
                    if s.transcript.is_none() && ev.transcript.is_some() {
                        s.transcript = ev.transcript.as_deref().map(PathBuf::from);
                        filled = true;
                    }
                    let before = s.state_key();
                    // A hook during a running turn is evidence of progress (a stalled turn
                    // works again); a notice is the harness waiting, not working.
                    let mut events =
                        if matches!(kind, Kind::IdleNotice | Kind::AttentionNotice | Kind::Other) {
                            Vec::new()
                        } else {
                            s.note_progress(&now, event)
                        };
                    let (handled, mut answer) = handlers::apply(&ctx, &mut s);
                    events.extend(handled);
                    carry_context(wire, event, &mut s, &mut answer);
                    // The process the hook runs under is the session's (after `apply`, which
                    // forgets an exited session's old process when it resumes).
                    if let Some(p) = ev.process.filter(|_| s.status != session::Status::Exited) {
                        s.set_process(Some(p));
                    }
                    // The attention this hook waits on: open, and naming this process.
                    let waiting = s
                        .attention
                        .as_ref()
                        .filter(|a| hook_wait.is_some() && a.hook == hook_wait)
                        .filter(|_| {
                            s.status == session::Status::NeedsAttention && answer.is_empty()
                        })
                        .and_then(|a| Some((a.id.clone()?, a.call_id.clone())));
                    let answer = (answer, waiting);
                    // A notice that changes nothing (Claude's idle notification, every minute
                    // or so at an idle prompt) leaves the record as it was: `updated` does
                    // not move, so the table does not reorder.
                    if existed
                        && !filled
                        && events.is_empty()
                        && s.state_key() == before
                        && matches!(kind, Kind::IdleNotice | Kind::AttentionNotice)
                    {
                        return (None, events, answer);
                    }
                    if cut {
                        for (_, _, fields) in &mut events {
                            fields.insert("payload_cut".into(), true.into());
                        }
                    }
                    s.stamp(before, &now, &format!("hook {event}"), None);
                    s.updated_at.clone_from(&now);
                    (Some(s), events, answer)
                })
                .map_err(|e| crate::hint::spelled(&e))?;
            waits_on = waiting;
            answer
        }
        None => Answer::default(),
    };
    // An index that could not be read governed nothing; the next `materialize` writes it anew.
    if let Some(why) = governance.trouble() {
        log_error(env, h.id(), event, &why);
    }
    if let (Some(id), Some((att, call)), Some(answering)) = (&id, waits_on, answering) {
        match wait::wait(&project, id, &att, call.as_deref(), budget) {
            wait::Waited::Answered(posted) => {
                return Ok(answering.hook_reply(event, &payload, &posted));
            }
            _ => wait::release(&project, id, &att, hook_wait, answering),
        }
    }
    answer.context.extend(from_nodes.context);
    if answer.block.is_none() {
        answer.block = from_nodes.block;
    }
    Ok(Some(wire.encode(event, &answer)).filter(|_| !answer.is_empty()))
}

/// How many pieces of context a record keeps for a later hook (the oldest go first).
const PENDING_CONTEXT_KEPT: usize = 8;

/// Context the harness cannot take with `event` is kept on the record (unless the answer
/// blocks: the block's text carries it); context kept earlier goes with an event that can
/// take it.
fn carry_context(wire: &dyn HookWire, event: &str, s: &mut Session, answer: &mut Answer) {
    if wire.takes_context(event) {
        if !s.flags.pending_context.is_empty() && answer.block.is_none() {
            let kept = std::mem::take(&mut s.flags.pending_context);
            answer.context.splice(0..0, kept);
        }
    } else if answer.block.is_none() && !answer.context.is_empty() {
        let p = &mut s.flags.pending_context;
        p.append(&mut answer.context);
        let over = p.len().saturating_sub(PENDING_CONTEXT_KEPT);
        p.drain(..over);
    }
}

fn new_session(
    id: &str,
    h: &dyn Harness,
    ev: &HookEvent,
    tree: &Tree,
    launched_by_spex: bool,
    now: &str,
) -> Session {
    let by = if launched_by_spex {
        LaunchedBy::Spex
    } else {
        LaunchedBy::Itself
    };
    Session::new(id, h.id(), ev.session_id.clone(), tree, by, now)
}

/// Which record a hook belongs to: the harness's own id through the alias index first; then,
/// where the hook's environment is the session's own, `SPEX_SESSION_ID`; else a new record
/// keyed by the harness's id (a session spex did not launch).
fn resolve(
    env: &Env,
    h: &dyn Harness,
    wire: &dyn HookWire,
    project: &ProjectStore,
    ev: &HookEvent,
) -> Result<Option<String>, String> {
    if let Some(bad) = ev
        .session_id
        .as_deref()
        .filter(|s| !session::is_valid_id(s))
    {
        return Err(format!(
            "event dropped: {}",
            session::check_id(bad, "the payload's session id").expect_err("invalid")
        ));
    }
    if let Some(bad) = env
        .spex_session_id
        .as_deref()
        .filter(|s| wire.hook_env_names_session() && !session::is_valid_id(s))
    {
        return Err(format!(
            "event dropped: {}",
            session::check_id(bad, "SPEX_SESSION_ID").expect_err("invalid")
        ));
    }
    let hsid = ev.session_id.as_deref();
    if let Some(hs) = hsid
        && let Some(id) = project
            .alias_entry(h.id(), hs)
            .map_err(|e| format!("event dropped: {e}"))?
    {
        return Ok(Some(id));
    }
    let id = match env
        .spex_session_id
        .as_deref()
        .filter(|_| wire.hook_env_names_session())
    {
        Some(spex_id) => spex_id.to_owned(),
        None => match hsid {
            Some(hs) => hs.to_owned(),
            None => return Ok(None),
        },
    };
    if let Some(hs) = hsid
        && project.set_alias(h.id(), hs, &id).is_err()
    {
        return Ok(None);
    }
    Ok(Some(id))
}

/// `p` (absolute or relative to `cwd`) relative to the tree root; `None` outside the tree.
fn repo_relative(root: &Path, cwd: &Path, p: &str) -> Option<String> {
    let abs = cwd.join(p);
    let rel = abs
        .strip_prefix(root)
        .ok()
        .map(Path::to_path_buf)
        .or_else(|| {
            // The payload may spell the tree through a symlink; compare canonical parents.
            let parent = fs_err::canonicalize(abs.parent()?).ok()?;
            parent
                .join(abs.file_name()?)
                .strip_prefix(root)
                .ok()
                .map(Path::to_path_buf)
        })?;
    let mut parts: Vec<String> = Vec::new();
    for c in rel.components() {
        match c {
            std::path::Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            std::path::Component::ParentDir => {
                parts.pop()?;
            }
            _ => {}
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}
