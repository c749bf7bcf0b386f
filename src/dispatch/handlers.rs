//! Built-in handlers: the activity state machine, ask capture, turn failure, the touched-file
//! ledger (with a warning when another live session touched the same file), spec-of-file,
//! spec-first and the stop gate. Pure over (record, event): the caller holds the lock.

use serde_json::{Map, Value, json};

use crate::config::{Policy, StopGate};
use crate::seam::event::{Answer, HookEvent, Kind};
use crate::store::session::{Attention, DeclaredState, Session, Status, Turn, TurnState};
use crate::store::{Governed, ProjectStore};

/// Everything the handlers read besides the record.
pub struct Ctx<'a> {
    pub hook: &'a str,
    pub ev: &'a HookEvent,
    /// Edited files, repo-relative.
    pub edits: &'a [String],
    pub now: &'a str,
    pub spec_first: Policy,
    pub stop_gate: StopGate,
    pub governance: &'a [Governed],
    pub store: &'a ProjectStore,
    /// A project hook node blocks this call.
    pub denied: bool,
}

/// One event to append: (kind, source hook, fields).
pub type NewEvent = (String, String, Map<String, Value>);

fn fields(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m.into_iter().filter(|(_, v)| !v.is_null()).collect(),
        _ => Map::new(),
    }
}

fn headline_of(prompt: &str) -> String {
    let line = prompt
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .trim();
    let mut out: String = line.chars().take(80).collect();
    if line.chars().count() > 80 {
        out.push('…');
    }
    out
}

/// Which spec node governs `rel`, if any (first match in path order).
fn governing<'g>(governance: &'g [Governed], rel: &str) -> Option<&'g Governed> {
    governance.iter().find(|g| {
        g.code.iter().any(|pat| {
            globset::GlobBuilder::new(pat)
                .literal_separator(false)
                .build()
                .is_ok_and(|glob| glob.compile_matcher().is_match(rel))
        })
    })
}

/// Applies one hook event to a session record. Returns the event to append (at most one)
/// and the answer for the harness.
pub fn apply(ctx: &Ctx, s: &mut Session) -> (Option<NewEvent>, Answer) {
    let ev = ctx.ev;
    let mut answer = Answer::default();
    let event = |kind: &str, f: Value| Some((kind.to_owned(), ctx.hook.to_owned(), fields(f)));
    let sub = ev.subagent;
    if ctx.denied && matches!(ev.kind, Some(Kind::PromptSubmitted | Kind::TurnCompleted)) {
        // A hook node blocked it: the prompt is dropped, or the turn goes on.
        return (None, answer);
    }
    let out = match ev.kind.unwrap_or(Kind::Other) {
        Kind::SessionStart => {
            if matches!(s.status, Status::Starting | Status::Exited) {
                s.status = Status::Idle;
            }
            event(
                "session.started",
                json!({ "harness_session_id": ev.session_id }),
            )
        }
        // A subagent's own turn and prompt never move the parent session.
        Kind::PromptSubmitted | Kind::TurnCompleted | Kind::TurnInterrupted | Kind::IdleNotice
            if sub =>
        {
            None
        }
        Kind::PromptSubmitted => {
            let prompt = ev.prompt.clone().unwrap_or_default();
            if s.headline.is_none() && !prompt.trim().is_empty() {
                s.headline = Some(headline_of(&prompt));
            }
            s.turn = Some(Turn {
                id: ev.turn_id.clone(),
                state: TurnState::Running,
                prompt: Some(prompt.clone()),
                started_at: ctx.now.to_owned(),
                ended_at: None,
            });
            s.status = Status::Working;
            s.attention = None;
            s.declared = None;
            s.flags.stop_gate_asked = false;
            event(
                "turn.started",
                json!({ "turn_id": ev.turn_id, "prompt": prompt }),
            )
        }
        Kind::ToolStarted => {
            policies_before_edit(ctx, s, &mut answer);
            if answer.block.is_some() || ctx.denied {
                // spex denies the call: the tool never starts, so nothing moves.
                return (None, answer);
            }
            if let Some((reason, text)) = &ev.attention {
                s.status = Status::NeedsAttention;
                s.attention = Some(attention(reason.clone(), text.clone(), ctx.now));
                event(
                    "input.required",
                    json!({ "reason": reason, "text": text, "tool": ev.tool }),
                )
            } else {
                if !sub && s.status != Status::NeedsAttention {
                    s.status = Status::Working;
                }
                event(
                    "tool.started",
                    json!({ "tool": ev.tool, "files": nonempty(ctx.edits), "subagent": sub.then_some(true) }),
                )
            }
        }
        Kind::ToolCompleted | Kind::ToolFailed => {
            let ok = ev.kind == Some(Kind::ToolCompleted);
            if ok {
                record_touched(ctx, s);
            }
            if !sub {
                s.status = Status::Working;
                s.attention = None;
            }
            event(
                "tool.completed",
                json!({ "tool": ev.tool, "ok": ok, "error": ev.error, "files": nonempty(ctx.edits), "subagent": sub.then_some(true) }),
            )
        }
        Kind::PermissionRequest | Kind::AttentionNotice => {
            let (reason, text) = ev
                .attention
                .clone()
                .unwrap_or_else(|| ("permission".into(), String::new()));
            if ev.kind == Some(Kind::AttentionNotice) && s.status == Status::NeedsAttention {
                None
            } else {
                s.status = Status::NeedsAttention;
                s.attention = Some(attention(reason.clone(), text.clone(), ctx.now));
                event(
                    "input.required",
                    json!({ "reason": reason, "text": text, "tool": ev.tool }),
                )
            }
        }
        Kind::TurnCompleted => {
            if stop_gate(ctx, s, &mut answer) {
                None
            } else {
                let turn_id = end_turn(s, TurnState::Completed, ctx.now);
                if let Some(d) = s
                    .declared
                    .as_ref()
                    .filter(|d| d.state == DeclaredState::Asking)
                {
                    s.status = Status::NeedsAttention;
                    s.attention = Some(attention("question", d.note.clone(), ctx.now));
                } else {
                    s.status = Status::Idle;
                    s.attention = None;
                }
                event("turn.completed", json!({ "turn_id": turn_id }))
            }
        }
        Kind::TurnFailed => {
            let turn_id = end_turn(s, TurnState::Failed, ctx.now);
            let error = ev.error.clone().unwrap_or_else(|| "the turn failed".into());
            s.status = Status::Idle;
            s.attention = Some(attention("turn_failed", error.clone(), ctx.now));
            event("turn.failed", json!({ "turn_id": turn_id, "error": error }))
        }
        Kind::TurnInterrupted => {
            let turn_id = end_turn(s, TurnState::Interrupted, ctx.now);
            s.status = Status::Idle;
            event("turn.interrupted", json!({ "turn_id": turn_id }))
        }
        Kind::SessionEnded => {
            end_turn(s, TurnState::Interrupted, ctx.now);
            s.status = Status::Exited;
            event("session.exited", json!({ "reason": ev.reason }))
        }
        Kind::IdleNotice => {
            // Claude waits at its prompt. A turn still running here was interrupted (Esc fires
            // no Stop), and a declared question keeps the session waiting for its answer.
            let interrupted = s
                .turn
                .as_ref()
                .is_some_and(|t| t.state == TurnState::Running);
            let turn_id = end_turn(s, TurnState::Interrupted, ctx.now);
            if s.declared
                .as_ref()
                .is_none_or(|d| d.state != DeclaredState::Asking)
            {
                s.status = Status::Idle;
                s.attention = None;
            }
            if interrupted {
                event("turn.interrupted", json!({ "turn_id": turn_id }))
            } else {
                None
            }
        }
        Kind::SubagentStopped | Kind::Other => None,
    };
    (out, answer)
}

fn attention(reason: impl Into<String>, text: impl Into<String>, now: &str) -> Attention {
    Attention {
        reason: reason.into(),
        text: text.into(),
        since: now.to_owned(),
    }
}

fn nonempty(v: &[String]) -> Option<&[String]> {
    (!v.is_empty()).then_some(v)
}

/// Ends the running turn (a finished turn keeps its state); returns its id.
fn end_turn(s: &mut Session, state: TurnState, now: &str) -> Option<String> {
    let turn = s.turn.as_mut()?;
    if turn.state == TurnState::Running {
        turn.state = state;
        turn.ended_at = Some(now.to_owned());
    }
    turn.id.clone()
}

fn record_touched(ctx: &Ctx, s: &mut Session) {
    for rel in ctx.edits {
        if !s.touched.contains(rel) {
            s.touched.push(rel.clone());
        }
        ctx.store.note_touched(rel, &s.id);
    }
}

/// Before an edit: name the governing spec (once per spec per session), the spec-first
/// policy (once per session), and other live sessions that touched the same file.
fn policies_before_edit(ctx: &Ctx, s: &mut Session, answer: &mut Answer) {
    for rel in ctx.edits {
        if let Some(g) = governing(ctx.governance, rel) {
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
    answer.block = Some(
        "Before you stop, declare where this session stands: run `spex session done --note \"<what is done>\"`, `spex session park --note \"<why>\"` or `spex session ask --note \"<your question>\"`.".into(),
    );
    true
}
