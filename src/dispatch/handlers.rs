//! Built-in handlers: the activity state machine, ask capture, turn failure, the touched-file
//! ledger (with a warning when another live session touched the same file), spec-of-file,
//! spec-first and the stop gate. Pure over (record, event): the caller holds the lock.

use serde_json::{Value, json};

use super::governance::Governance;
use crate::config::{Policy, StopGate};
use crate::seam::event::{Answer, HookEvent, Kind};
use crate::store::ProjectStore;
use crate::store::session::{
    AnswerWay, AttentionKind, ChildState, DeclaredState, ErrorKind, Failure, LaunchedBy, Session,
    Status, Turn, TurnState, Usage, Via, new_event,
};

/// Everything the handlers read besides the record.
pub struct Ctx<'a> {
    pub hook: &'a str,
    pub ev: &'a HookEvent,
    /// Edited files, repo-relative.
    pub edits: &'a [String],
    pub now: &'a str,
    pub spec_first: Policy,
    pub stop_gate: StopGate,
    pub governance: &'a Governance,
    pub store: &'a ProjectStore,
    /// A project hook node blocks this call.
    pub denied: bool,
    /// The harness's answering facet (how an attention can be answered here).
    pub answering: Option<&'static dyn crate::seam::answer::Answering>,
    /// The harness runs spex-launched sessions on a server that reports failed commands
    /// (which its hook payloads lack) on its own.
    pub server_reports_failures: bool,
    /// This hook will wait for an answer to the attention it raises (`dispatch::wait`): the
    /// attention is answered `via: hook`, and names this process as its waiter.
    pub hook_wait: Option<crate::store::session::ProcessId>,
}

pub use crate::store::session::NewEvent;

fn headline_of(prompt: &str) -> String {
    let line = prompt
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .trim();
    crate::store::session::ellipsis(line, 80)
}

/// Applies one hook event to a session record. Returns the events to append and the answer
/// for the harness. The log keeps its grammar here: a turn ends once (an ending hook for a
/// turn that is not running appends nothing), a prompt while a turn still runs closes that
/// turn first, an exit closes the running turn, and attention that goes away is `attention.closed`.
#[expect(
    clippy::too_many_lines,
    reason = "the event log's grammar: one arm per hook event kind, read as one table of transitions"
)]
pub fn apply(ctx: &Ctx, s: &mut Session) -> (Vec<NewEvent>, Answer) {
    let ev = ctx.ev;
    let mut answer = Answer::default();
    let src = ctx.hook;
    let event = |kind: &str, f: Value| new_event(kind, src, f);
    let sub = ev.subagent;
    let mut out: Vec<NewEvent> = Vec::new();
    if ctx.denied && matches!(ev.kind, Some(Kind::PromptSubmitted | Kind::TurnCompleted)) {
        // A hook node blocked it: the prompt is dropped, or the turn goes on.
        return (out, answer);
    }
    if s.status == Status::Exited {
        // One rule for hooks after the session exited: a start or a new prompt of its own is
        // the session resumed (`session.resumed`, the exit forgotten); anything else is a late
        // word of a session that is over, and moves nothing.
        let resumes = match ev.kind {
            Some(Kind::SessionStart) => true,
            Some(Kind::PromptSubmitted) => !sub,
            _ => false,
        };
        if !resumes {
            return (out, answer);
        }
        out.push(event(
            "session.resumed",
            json!({ "harness_session_id": ev.session_id, "after": s.exit_reason }),
        ));
        s.exit_reason = None;
        s.forget_process();
        s.status = Status::Idle;
    }
    match ev.kind.unwrap_or(Kind::Other) {
        Kind::SessionStart => {
            if s.status == Status::Starting {
                s.status = Status::Idle;
            }
            out.push(event(
                "session.started",
                json!({ "harness_session_id": ev.session_id }),
            ));
        }
        // A subagent's own turn and prompt never move the parent session: they are the child's.
        Kind::PromptSubmitted | Kind::TurnCompleted | Kind::TurnInterrupted | Kind::IdleNotice
            if sub => {}
        Kind::ModelRequestStarted | Kind::ModelRequestFailed | Kind::ModelRequestCompleted
            if sub =>
        {
            child_attempt(ctx, s, &mut out);
        }
        Kind::SubagentStarted => {
            if let Some(id) = &ev.agent_id {
                out.extend(s.start_child(id, ev.agent_type.as_deref(), ctx.now, src));
            }
        }
        Kind::SubagentStopped => {
            if let Some(id) = &ev.agent_id {
                let ended = s.end_child(
                    id,
                    ChildState::Completed,
                    ctx.now,
                    src,
                    ev.summary.as_deref(),
                    None,
                );
                child_ended(ctx, s, &mut out, ended);
            }
        }
        Kind::TurnFailed if sub => {
            // A sub-agent's model request failed for good: the child failed, not its parent.
            if let Some(id) = &ev.agent_id {
                let error = ev.error.as_deref().unwrap_or("the sub-agent failed");
                let ended = s.end_child(id, ChildState::Failed, ctx.now, src, None, Some(error));
                child_ended(ctx, s, &mut out, ended);
            }
        }
        Kind::PromptSubmitted
            if s.turn_running()
                && s.flags.stop_gate_asked
                && ev
                    .prompt
                    .as_deref()
                    .is_some_and(|p| p.contains(STOP_GATE_ASK)) =>
        {
            // The stop gate blocked this turn's end and the harness goes on with its text as
            // the next prompt (Gemini fires its prompt hook for it): the same turn, still
            // the person's prompt.
        }
        Kind::PromptSubmitted => {
            let prompt = ev.prompt.clone().unwrap_or_default();
            let same_turn = s.turn_running()
                && s.turn.as_ref().is_some_and(|t| {
                    (ev.turn_id.is_some() && t.id == ev.turn_id)
                        || (!ev.turn_id_names_turn && joins_queue(&t.started_at, ctx.now))
                });
            if !prompt.trim().is_empty() {
                s.headline = Some(headline_of(&prompt));
            }
            if same_turn {
                // Input steered into the running turn (Codex `turn/steer`): the same turn.
                if let Some(t) = s.turn.as_mut() {
                    t.prompt = Some(prompt.clone());
                }
                out.push(event(
                    "turn.steered",
                    json!({ "turn_id": ev.turn_id, "prompt": prompt }),
                ));
            } else {
                // A turn still running here ended without its hook (Esc fires no Stop), unless
                // the harness had said it was over and it waited on sub-agents (which work on).
                let waited = s.turn.as_ref().is_some_and(|t| t.stopped_at.is_some());
                if waited {
                    out.extend(s.end_turn(TurnState::Completed, ctx.now, src, Value::Null));
                } else {
                    out.extend(s.end_turn(TurnState::Interrupted, ctx.now, src, by_terminal()));
                }
                out.extend(s.clear_attention(src));
                s.turn = Some(Turn {
                    id: ev.turn_id.clone(),
                    state: TurnState::Running,
                    prompt: Some(prompt.clone()),
                    started_at: ctx.now.to_owned(),
                    ..Default::default()
                });
                out.push(event(
                    "turn.started",
                    json!({ "turn_id": ev.turn_id, "prompt": prompt }),
                ));
            }
            s.status = Status::Working;
            s.declared = None;
            s.flags.stop_gate_asked = false;
        }
        Kind::ToolStarted => {
            policies_before_edit(ctx, s, &mut answer);
            if answer.block.is_some() || ctx.denied {
                // spex denies the call: the tool never starts, so nothing moves.
                return (Vec::new(), answer);
            }
            if let Some((reason, text)) = &ev.attention {
                raise(s, &mut out, ctx, reason, text);
            } else {
                if !sub && s.status != Status::NeedsAttention {
                    s.status = Status::Working;
                }
                out.push(event(
                    "tool.started",
                    json!({ "tool": ev.tool, "call_id": ev.call_id, "files": nonempty(ctx.edits), "subagent": sub.then_some(true), "agent_id": ev.agent_id }),
                ));
                // Open until its own hook ends it, or its sub-agent's or turn's ending closes it.
                let call = (call_key(ev), ev.tool.clone().unwrap_or_default());
                if let Some(c) = ev.agent_id.as_deref().and_then(|id| s.running_child(id)) {
                    c.open_calls.push(call);
                } else if let Some(t) = s.turn.as_mut().filter(|t| t.state == TurnState::Running) {
                    t.open_calls.push(call);
                }
            }
        }
        Kind::ToolCompleted | Kind::ToolFailed => {
            let mut ok = ev.kind == Some(Kind::ToolCompleted);
            let mut error = ev.error.clone();
            // The harness's server may have told spex the command failed (a payload without
            // an exit code); only its sessions keep that bookkeeping.
            let on_server = ctx.server_reports_failures && s.launched_by == LaunchedBy::Spex;
            let failed = ev.call_id.as_deref().filter(|_| on_server);
            if let Some(code) = failed.and_then(|c| s.flags.take_failure(c)) {
                ok = false;
                error = Some(format!("exit code {code}"));
            }
            if ok {
                record_touched(ctx, s);
            }
            let key = call_key(ev);
            if let Some(c) = ev.agent_id.as_deref().and_then(|id| s.running_child(id)) {
                c.open_calls.retain(|(k, _)| *k != key);
            } else if let Some(t) = s.turn.as_mut() {
                t.open_calls.retain(|(k, _)| *k != key);
            }
            // A call that ran a sub-agent reports what the sub-agent used.
            if let (Some(id), Some(usage)) = (&ev.spawned, &ev.usage)
                && let Some(c) = s.children.iter_mut().find(|c| c.id == *id)
            {
                c.usage = Some(usage.clone());
            }
            out.push(event(
                "tool.completed",
                json!({ "tool": ev.tool, "call_id": ev.call_id, "ok": ok, "error": error, "files": nonempty(ctx.edits), "subagent": sub.then_some(true), "agent_id": ev.agent_id }),
            ));
            if !sub {
                s.status = Status::Working;
                out.extend(s.clear_attention(src));
            }
        }
        Kind::PermissionRequest | Kind::AttentionNotice => {
            let (reason, text) = ev
                .attention
                .clone()
                .unwrap_or_else(|| ("permission".into(), String::new()));
            // A notice repeats what a request already raised; one that comes after the person
            // answered (the turn moved on or ended) is stale.
            let stale = ev.kind == Some(Kind::AttentionNotice)
                && (s.status == Status::NeedsAttention || !s.turn_running());
            if !stale {
                raise(s, &mut out, ctx, &reason, &text);
            }
        }
        Kind::ModelRequestStarted => {
            // A new attempt (Codex retries a failed model request): the turn goes on, the
            // last error stays its note until an attempt succeeds.
            if let Some(t) = s.turn.as_mut().filter(|t| t.state == TurnState::Running) {
                t.attempt_failed_at = None;
            }
        }
        Kind::ModelRequestFailed => {
            // Codex reports each failed attempt and retries; no hook follows the last one, so
            // the reader concludes the failure from the harness's own log (see `reconcile`).
            if let Some(t) = s.turn.as_mut().filter(|t| t.state == TurnState::Running) {
                let error = ev
                    .error
                    .clone()
                    .unwrap_or_else(|| "model request failed".into());
                t.note = Some(error.clone());
                t.attempt_failed_at = Some(ctx.now.to_owned());
                out.push(event(
                    "model.failed",
                    json!({ "turn_id": t.id, "error": error }),
                ));
            }
        }
        Kind::ModelRequestCompleted => {
            if let Some(t) = s.turn.as_mut().filter(|t| t.state == TurnState::Running) {
                t.note = None;
                t.attempt_failed_at = None;
            }
            // The payload's own count of the request (the harness recorded it; nothing read).
            if let Some(u) = &ev.usage {
                if let Some(t) = s.turn.as_mut() {
                    t.usage.get_or_insert_with(Usage::default).add(u);
                }
                s.usage.get_or_insert_with(Usage::default).add(u);
            }
        }
        // A turn with an interrupt on its way (`spex interrupt`, or a key the host saw typed
        // at the terminal, marked before it reached the harness): a harness whose turn-end
        // hook also fires on a cancel, with the partial answer (Gemini CLI's `AfterAgent`),
        // reports the interrupt as a completion. The ending is written once, here, never
        // corrected after (see `Turn::interrupt_decides` for the settle time).
        Kind::TurnCompleted
            if s.turn
                .as_ref()
                .is_some_and(|t| t.interrupt_decides(ctx.now)) =>
        {
            out.extend(s.end_turn(TurnState::Interrupted, ctx.now, src, Value::Null));
            out.extend(s.clear_attention(src));
            s.status = Status::Idle;
        }
        Kind::TurnCompleted => {
            if !stop_gate(ctx, s, &mut answer) {
                complete(ctx, s, &mut out);
            }
        }
        Kind::TurnFailed => {
            let failure = ev.failure.clone().unwrap_or_else(|| {
                let error = ev.error.as_deref().unwrap_or("the turn failed");
                Failure::new(error, ErrorKind::Unknown)
            });
            out.extend(s.fail_turn(&failure, ctx.now, src));
        }
        Kind::TurnInterrupted => {
            out.extend(s.end_turn(TurnState::Interrupted, ctx.now, src, by_terminal()));
            out.extend(s.clear_attention(src));
            s.status = Status::Idle;
        }
        Kind::SessionEnded => {
            out.extend(s.exit("session end", ctx.now, src));
            if let (Some(last), Some(r)) = (out.last_mut(), &ev.reason) {
                last.2.insert("harness_reason".into(), r.clone().into());
            }
        }
        Kind::IdleNotice => {
            // Claude waits at its prompt. A turn still running here was interrupted (Esc fires
            // no Stop, at a dialog too, which it rejects): that ends the turn and what it
            // asked. Otherwise the notice closes nothing: an attention closes only by an
            // answer, a new turn, an interrupt or an exit, so a failed turn's alert and a
            // declared question stay (and a notice that changes nothing is not recorded).
            let asking = s
                .declared
                .as_ref()
                .is_some_and(|d| d.state == DeclaredState::Asking);
            // A turn the harness said was over waits on its sub-agents: it was not interrupted.
            let waiting = s.turn.as_ref().is_some_and(|t| t.stopped_at.is_some());
            let ended = if waiting {
                Vec::new()
            } else {
                s.end_turn(TurnState::Interrupted, ctx.now, src, by_terminal())
            };
            if !ended.is_empty() && !asking {
                out.extend(ended);
                s.status = Status::Idle;
                out.extend(s.clear_attention(src));
            } else {
                out.extend(ended);
                if s.attention.is_none() && !asking {
                    s.status = Status::Idle;
                }
            }
        }
        Kind::Other => {}
    }
    (out, answer)
}

/// The harness says the turn is over: it completes (or waits on its sub-agents), and a
/// question the agent declared is raised.
fn complete(ctx: &Ctx, s: &mut Session, out: &mut Vec<NewEvent>) {
    let (ended, done) = s.complete_turn(ctx.now, ctx.hook);
    out.extend(ended);
    if !done {
        return;
    }
    if let Some(note) = s
        .declared
        .as_ref()
        .filter(|d| d.state == DeclaredState::Asking)
        .map(|d| d.note.clone())
    {
        raise(s, out, ctx, "question", &note);
    }
}

/// A sub-agent ended (`ended`: its events, empty when it had already ended): a turn that
/// waited on it completes when none of its sub-agents runs any more.
fn child_ended(ctx: &Ctx, s: &mut Session, out: &mut Vec<NewEvent>, ended: Vec<NewEvent>) {
    if ended.is_empty() {
        return;
    }
    out.extend(ended);
    if s.turn_running() && s.turn.as_ref().is_some_and(|t| t.stopped_at.is_some()) {
        complete(ctx, s, out);
    }
}

/// A sub-agent's model request: a failed one is noted on the child (the harness may retry,
/// and says nothing after the last try: the readers conclude it), a new one clears that, a
/// completed one adds its usage to the child's.
fn child_attempt(ctx: &Ctx, s: &mut Session, out: &mut Vec<NewEvent>) {
    let ev = ctx.ev;
    let Some(c) = ev.agent_id.as_deref().and_then(|id| s.running_child(id)) else {
        return;
    };
    match ev.kind {
        Some(Kind::ModelRequestFailed) => {
            let error = ev
                .error
                .clone()
                .unwrap_or_else(|| "model request failed".into());
            c.attempt_failed_at = Some(ctx.now.to_owned());
            c.error = Some(error.clone());
            out.push(new_event(
                "model.failed",
                ctx.hook,
                json!({ "agent_id": c.id, "error": error }),
            ));
        }
        Some(Kind::ModelRequestStarted) => c.attempt_failed_at = None,
        _ => {
            c.attempt_failed_at = None;
            c.error = None;
            if let Some(u) = &ev.usage {
                c.usage.get_or_insert_with(Usage::default).add(u);
            }
        }
    }
}

/// An interrupt the harness reported with nobody named: the person at its terminal (an
/// interrupt spex sent names itself on the turn, and that wins; see `Session::end_turn`).
fn by_terminal() -> Value {
    json!({ "by": "terminal" })
}

/// What pairs a tool call's start and end: the harness's call id, else the tool's name.
fn call_key(ev: &HookEvent) -> String {
    ev.call_id
        .clone()
        .or_else(|| ev.tool.clone())
        .unwrap_or_default()
}

/// Opens attention (`attention.opened`, after closing attention of another kind, so opens
/// and closes pair up), with what the harness asks in full when its adapter decoded it. One
/// question or request opens once, however many hooks report it.
fn raise(s: &mut Session, out: &mut Vec<NewEvent>, ctx: &Ctx, reason: &str, text: &str) {
    let reason = AttentionKind::from(reason);
    s.status = Status::NeedsAttention;
    let asked = asked_call(ctx, s);
    if let Some(a) = s
        .attention
        .as_mut()
        .filter(|a| a.reason == reason && a.text == text)
    {
        // Asked again by the hook that will wait for its answer (a question opened by its
        // call's start): that hook answers it from now on.
        if let Some(me) = ctx.hook_wait {
            a.hook = Some(me);
            if a.call_id.is_none() {
                a.call_id = asked;
            }
            a.via = Some(Via {
                how: AnswerWay::Hook,
                why: None,
            });
        }
        return;
    }
    let mut a = ctx.ev.ask.clone().unwrap_or_default();
    a.reason = reason;
    text.clone_into(&mut a.text);
    ctx.now.clone_into(&mut a.since);
    if a.tool.is_none() {
        a.tool.clone_from(&ctx.ev.tool);
    }
    if a.turn_id.is_none() {
        a.turn_id.clone_from(&ctx.ev.turn_id);
    }
    if a.call_id.is_none() {
        a.call_id = asked;
    }
    a.hook = ctx.hook_wait;
    a.via = if a.hook.is_some() {
        Some(Via {
            how: AnswerWay::Hook,
            why: None,
        })
    } else {
        ctx.answering.map(|h| h.via(&a, s))
    };
    out.extend(s.open_attention(a, ctx.hook));
}

/// The call a request asks about: the id the event carries, else the newest call of its tool
/// still open in the running turn (its start was reported with its id).
fn asked_call(ctx: &Ctx, s: &Session) -> Option<String> {
    ctx.ev.call_id.clone().or_else(|| {
        let tool = ctx.ev.tool.as_deref()?;
        let t = s.turn.as_ref().filter(|t| t.state == TurnState::Running)?;
        t.open_calls
            .iter()
            .rev()
            .find(|(key, t)| t == tool && key != tool)
            .map(|(key, _)| key.clone())
    })
}

fn nonempty(v: &[String]) -> Option<&[String]> {
    (!v.is_empty()).then_some(v)
}

fn record_touched(ctx: &Ctx, s: &mut Session) {
    for rel in ctx.edits {
        if !s.touched.contains(rel) {
            s.touched.push(rel.clone());
        }
        ctx.store.note_touched(rel, &s.id);
    }
}

/// A prompt reported within a moment of the running turn's start joins that turn: the harness
/// took several queued prompts up together (Claude fires one prompt hook per queued prompt,
/// milliseconds apart, for one turn). An interrupt and a new prompt typed by a person are
/// seconds apart.
fn joins_queue(turn_started: &str, now: &str) -> bool {
    let at = crate::store::parse_time;
    match (at(turn_started), at(now)) {
        (Some(start), Some(now)) => now
            .duration_since(start)
            .is_ok_and(|d| d < std::time::Duration::from_secs(1)),
        _ => false,
    }
}

/// Before an edit: name the governing spec (once per spec per session), the spec-first
/// policy (once per session), and other live sessions that touched the same file.
fn policies_before_edit(ctx: &Ctx, s: &mut Session, answer: &mut Answer) {
    for rel in ctx.edits {
        if let Some(g) = ctx.governance.governing(rel) {
            if !s.flags.spec_first_done && ctx.spec_first != Policy::Off {
                s.flags.spec_first_done = true;
                let text = format!(
                    "spec-first: `{rel}` is governed by `{}` ({}). Update that spec to describe the change before editing the code.",
                    g.spec, g.title
                );
                if ctx.spec_first == Policy::Block {
                    answer.block = Some(text);
                    s.flags.specs_announced.push(g.spec.clone());
                    return;
                }
                answer.context.push(text);
                s.flags.specs_announced.push(g.spec.clone());
            } else if !s.flags.specs_announced.contains(&g.spec) {
                s.flags.specs_announced.push(g.spec.clone());
                answer.context.push(format!("`{rel}` is governed by the spec `{}` ({}); read it before you change the file.", g.spec, g.title));
            }
        }
        let others: Vec<String> = ctx
            .store
            .touched_by(rel)
            .into_iter()
            .filter(|id| *id != s.id)
            .filter_map(|id| ctx.store.load(&id).ok().flatten())
            .filter(|o| o.status != Status::Exited)
            .map(|o| format!("{} ({}, {})", o.id, o.harness, o.status.as_str()))
            .collect();
        if !others.is_empty() {
            answer.context.push(format!(
                "warning: `{rel}` was also edited by another live session: {}. Coordinate before overwriting its changes.",
                others.join(", ")
            ));
        }
    }
}

/// The stop gate: an undeclared stop is asked, once per turn, to declare. True if it blocks.
fn stop_gate(ctx: &Ctx, s: &mut Session, answer: &mut Answer) -> bool {
    if ctx.stop_gate == StopGate::Off
        || s.declared.is_some()
        || ctx.ev.stop_hook_active
        || s.flags.stop_gate_asked
    {
        return false;
    }
    s.flags.stop_gate_asked = true;
    answer.block = Some(STOP_GATE_ASK.into());
    true
}

/// What the stop gate asks an agent that stops without declaring where it stands.
const STOP_GATE_ASK: &str = "Before you stop, declare where this session stands: run `spex session done --note \"<what is done>\"`, `spex session park --note \"<why>\"` or `spex session ask --note \"<your question>\"`.";

#[cfg(test)]
mod tests {
    use super::*;

    /// The kinds of the events a prompt makes in a session whose turn `t1` began at
    /// 12:14:45.183, reported 9 ms later with `turn_id`.
    fn prompt_in_a_running_turn(turn_id: &str, names_turn: bool) -> Vec<String> {
        let mut s = Session {
            turn: Some(Turn {
                id: Some("t1".into()),
                state: TurnState::Running,
                prompt: Some("first".into()),
                started_at: "2026-11-23T12:14:45.183Z".into(),
                ..Default::default()
            }),
            ..Session::default()
        };
        let ev = HookEvent {
            kind: Some(Kind::PromptSubmitted),
            turn_id: Some(turn_id.into()),
            turn_id_names_turn: names_turn,
            prompt: Some("next".into()),
            ..HookEvent::default()
        };
        run_at(&mut s, &[ev], "2026-11-23T12:14:45.192Z")
    }

    #[test]
    fn a_new_turn_id_starts_a_new_turn_where_ids_name_turns() {
        // The same turn's id: the prompt steers it, whatever the harness.
        assert_eq!(prompt_in_a_running_turn("t1", true), ["turn.steered"]);
        // A prompt's own id, milliseconds after the turn began: taken up with it.
        assert_eq!(prompt_in_a_running_turn("p2", false), ["turn.steered"]);
        // Another turn's id: the running one ended unreported, a new one starts.
        assert_eq!(
            prompt_in_a_running_turn("t2", true),
            ["turn.interrupted", "turn.started"]
        );
    }

    /// Applies hook events in order to `s`; the kinds of the events they appended.
    fn run(s: &mut Session, evs: &[HookEvent]) -> Vec<String> {
        run_at(s, evs, "2026-11-23T12:14:46.000Z")
    }

    /// [`run`] at the time `now`.
    fn run_at(s: &mut Session, evs: &[HookEvent], now: &str) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let store = ProjectStore::new(dir.path(), dir.path());
        let mut out = Vec::new();
        for ev in evs {
            let ctx = Ctx {
                hook: "hook",
                ev,
                edits: &[],
                now,
                spec_first: Policy::Off,
                stop_gate: StopGate::Off,
                governance: &Governance::Inline(Vec::new()),
                store: &store,
                denied: false,
                server_reports_failures: false,
                answering: None,
                hook_wait: None,
            };
            out.extend(apply(&ctx, s).0.into_iter().map(|e| e.0));
        }
        out
    }

    fn child_event(kind: Kind, agent: &str) -> HookEvent {
        HookEvent {
            kind: Some(kind),
            subagent: true,
            agent_id: Some(agent.into()),
            agent_type: Some("general-purpose".into()),
            error: Some("API Error: 400".into()),
            ..HookEvent::default()
        }
    }

    #[test]
    fn a_completion_reported_after_spex_asked_to_interrupt_ends_the_turn_interrupted() {
        let prompt = || HookEvent {
            kind: Some(Kind::PromptSubmitted),
            prompt: Some("go".into()),
            ..HookEvent::default()
        };
        let end = || HookEvent {
            kind: Some(Kind::TurnCompleted),
            ..HookEvent::default()
        };
        let mut s = Session::default();
        run(&mut s, &[prompt()]);
        s.turn.as_mut().unwrap().interrupting = Some("spex interrupt".into());
        assert_eq!(run(&mut s, &[end()]), ["turn.interrupted"]);
        let t = s.turn.as_ref().unwrap();
        assert_eq!(
            (t.state, t.by.as_deref()),
            (TurnState::Interrupted, Some("spex interrupt"))
        );
        assert_eq!(s.status, Status::Idle);
        // Nobody asked: a completion is a completion.
        run(&mut s, &[prompt()]);
        assert_eq!(run(&mut s, &[end()]), ["turn.completed"]);
        // A key the host saw typed at the terminal (marked with its time before Gemini saw
        // it): the completion reported moments after is that key's doing, one reported past
        // the settle time is the harness's own end of the turn.
        for (reported, ending) in [
            ("2026-11-26T10:00:05.400Z", "turn.interrupted"),
            ("2026-11-26T10:01:05.000Z", "turn.completed"),
        ] {
            run_at(&mut s, &[prompt()], "2026-11-26T10:00:00.000Z");
            let t = s.turn.as_mut().unwrap();
            t.interrupting = Some("terminal".into());
            t.interrupting_at = Some("2026-11-26T10:00:05.000Z".into());
            assert_eq!(run_at(&mut s, &[end()], reported), [ending]);
            let t = s.turn.as_ref().unwrap();
            assert_eq!((&t.interrupting, &t.interrupting_at), (&None, &None));
        }
        assert_eq!(s.turn.as_ref().unwrap().by, None);
    }

    #[test]
    fn a_turn_waits_on_its_sub_agents_and_a_childs_failure_is_the_childs() {
        let mut s = Session::default();
        let prompt = HookEvent {
            kind: Some(Kind::PromptSubmitted),
            turn_id: Some("t1".into()),
            prompt: Some("delegate".into()),
            ..HookEvent::default()
        };
        let stop = HookEvent {
            kind: Some(Kind::TurnCompleted),
            ..HookEvent::default()
        };
        let started = run(
            &mut s,
            &[
                prompt,
                child_event(Kind::SubagentStarted, "a1"),
                child_event(Kind::SubagentStarted, "a2"),
                child_event(Kind::TurnFailed, "a1"),
                stop,
            ],
        );
        assert_eq!(
            started,
            [
                "turn.started",
                "subagent.started",
                "subagent.started",
                "subagent.failed"
            ],
            "the child's failure does not end the turn, and Stop waits for a2"
        );
        assert!(s.turn_running() && s.turn.as_ref().unwrap().stopped_at.is_some());
        assert_eq!(
            s.turn_phrase().unwrap(),
            "running, 1 of 2 sub-agents failed, 1 sub-agent running"
        );
        let ended = run(&mut s, &[child_event(Kind::SubagentStopped, "a2")]);
        assert_eq!(ended, ["subagent.completed", "turn.completed"]);
        assert_eq!(s.status, Status::Idle);
        assert_eq!(
            s.turn_phrase().unwrap(),
            "completed, 1 of 2 sub-agents failed"
        );
        // A late word of an ended child moves nothing.
        assert!(run(&mut s, &[child_event(Kind::SubagentStopped, "a2")]).is_empty());
    }

    #[test]
    fn the_stop_gates_text_sent_back_as_a_prompt_continues_the_turn() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProjectStore::new(dir.path(), dir.path());
        let mut s = Session::default();
        let prompt = |text: &str| HookEvent {
            kind: Some(Kind::PromptSubmitted),
            turn_id_names_turn: true,
            prompt: Some(text.into()),
            ..HookEvent::default()
        };
        let stop = |active: bool| HookEvent {
            kind: Some(Kind::TurnCompleted),
            stop_hook_active: active,
            ..HookEvent::default()
        };
        let mut run = |ev: &HookEvent, at: &str| {
            let ctx = Ctx {
                hook: "hook",
                ev,
                edits: &[],
                now: at,
                spec_first: Policy::Off,
                stop_gate: StopGate::Ask,
                governance: &Governance::Inline(Vec::new()),
                store: &store,
                denied: false,
                server_reports_failures: false,
                answering: None,
                hook_wait: None,
            };
            let (events, answer) = apply(&ctx, &mut s);
            (events.into_iter().map(|e| e.0).collect::<Vec<_>>(), answer)
        };
        let t = |secs: u32| format!("2026-11-23T12:14:{secs:02}.000Z");
        assert_eq!(run(&prompt("do it"), &t(1)).0, ["turn.started"]);
        let (events, answer) = run(&stop(false), &t(5));
        assert!(events.is_empty());
        let gate = answer.block.expect("the gate blocks an undeclared stop");
        // Gemini sends the block's reason as the next prompt, seconds later.
        let (events, answer) = run(&prompt(&gate), &t(7));
        assert!(events.is_empty() && answer.is_empty(), "{events:?}");
        assert_eq!(run(&stop(true), &t(9)).0, ["turn.completed"]);
        assert_eq!(s.turn.as_ref().unwrap().prompt.as_deref(), Some("do it"));
        assert_eq!(s.headline.as_deref(), Some("do it"));
        assert_eq!(s.status, Status::Idle);
    }

    #[test]
    fn a_prompt_milliseconds_after_the_turn_began_joins_it() {
        let start = "2026-11-23T12:14:45.183Z";
        assert!(joins_queue(start, "2026-11-23T12:14:45.192Z"));
        assert!(!joins_queue(start, "2026-11-23T12:14:47.000Z"));
        // A clock that went back, or a time that does not parse, joins nothing.
        assert!(!joins_queue(start, "2026-11-23T12:14:44.000Z"));
        assert!(!joins_queue("not a time", start));
    }
}
