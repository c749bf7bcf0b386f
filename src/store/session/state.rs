//! The state machine of a session record: the transitions every writer shares (the hook
//! handlers and the readers that fold in evidence), each returning the events it appends.
//! Pure: it reads and writes no file (`storage.rs` does).

use serde_json::Value;

use super::attention::{Attention, Via};
use super::record::{CHILDREN_KEPT, Session, Status};
use super::text::{elapsed_ms, one_line};
use super::turn::{Child, ChildState, Failure, INTERRUPT_SETTLE, Turn, TurnState};
use super::vocab::{AnswerWay, AttentionKind};

/// One event to append: (kind, source, fields).
pub type NewEvent = (String, String, serde_json::Map<String, Value>);

/// An event with its fields (null fields dropped).
pub fn new_event(kind: &str, source: &str, fields: Value) -> NewEvent {
    let fields = match fields {
        Value::Object(m) => m.into_iter().filter(|(_, v)| !v.is_null()).collect(),
        _ => serde_json::Map::new(),
    };
    (kind.to_owned(), source.to_owned(), fields)
}

/// The state a session's `since` and `source` describe: its status and its turn's state.
pub type StateKey = (Status, Option<TurnState>);

/// The transitions every writer of a record shares (the hook handlers and the readers that
/// fold in evidence), so the event log keeps one grammar: every `turn.started` has exactly one
/// ending event, and attention is raised and cleared in pairs.
impl Session {
    pub fn state_key(&self) -> StateKey {
        (self.status, self.turn.as_ref().map(|t| t.state))
    }

    pub fn turn_running(&self) -> bool {
        self.turn
            .as_ref()
            .is_some_and(|t| t.state == TurnState::Running)
    }

    /// Ends the running turn as `state`: a `tool.interrupted` for each tool call still open
    /// (so every `tool.started` ends), then its ending event (`turn.<state>`, with `extra`
    /// fields); nothing when no turn runs (a finished turn keeps its state).
    pub fn end_turn(
        &mut self,
        state: TurnState,
        now: &str,
        source: &str,
        extra: Value,
    ) -> Vec<NewEvent> {
        let Some(turn) = self.turn.as_mut().filter(|t| t.state == TurnState::Running) else {
            return Vec::new();
        };
        let mut out: Vec<NewEvent> = std::mem::take(&mut turn.open_calls)
            .into_iter()
            .map(|(call, tool)| {
                new_event(
                    "tool.interrupted",
                    source,
                    serde_json::json!({ "call_id": call, "tool": tool, "turn_id": turn.id }),
                )
            })
            .collect();
        turn.state = state;
        turn.ended_at = Some(now.to_owned());
        turn.stopped_at = None;
        turn.stalled_at = None;
        let asked = turn.interrupting.take();
        turn.interrupting_at = None;
        let turn_id = turn.id.clone();
        let mut fields = serde_json::json!({ "turn_id": turn_id });
        if let (Some(f), Value::Object(extra)) = (fields.as_object_mut(), extra) {
            f.extend(extra.into_iter().filter(|(_, v)| !v.is_null()));
        }
        if state == TurnState::Interrupted {
            // Who asked for an interrupt on its way knows better than the evidence that saw
            // the turn end (an Esc key, an idle screen).
            if let Some(by) = asked {
                fields["by"] = by.into();
            }
            turn.by = fields["by"].as_str().map(str::to_owned);
        }
        if state != TurnState::Completed {
            // Its sub-agents do not outlive a turn that did not complete (a completed turn
            // waited for them, or was followed by a prompt while they work on); a turn past
            // its budget takes them past it too.
            let running: Vec<String> = self
                .children
                .iter()
                .filter(|c| c.state == ChildState::Running && c.turn_id == turn_id)
                .map(|c| c.id.clone())
                .collect();
            let (end, why) = if state == TurnState::TimedOut {
                (ChildState::TimedOut, "its turn timed out".to_owned())
            } else {
                (
                    ChildState::Interrupted,
                    format!("its turn ended {}", state.as_str()),
                )
            };
            for id in running {
                out.extend(self.end_child(&id, end, now, source, None, Some(&why)));
            }
        }
        let (total, failed, _) = self.turn_children();
        if total > 0 {
            fields["subagents"] = total.into();
            fields["subagents_failed"] = failed.into();
        }
        out.push(new_event(
            &format!("turn.{}", state.as_str()),
            source,
            fields,
        ));
        out
    }

    /// The current turn's sub-agents: how many it started, how many of them failed (or timed
    /// out) and how many still run.
    pub fn turn_children(&self) -> (usize, usize, usize) {
        let Some(turn) = &self.turn else {
            return (0, 0, 0);
        };
        let mine = self.children.iter().filter(|c| c.turn_id == turn.id);
        let (mut total, mut failed, mut running) = (0, 0, 0);
        for c in mine {
            total += 1;
            match c.state {
                ChildState::Failed | ChildState::TimedOut => failed += 1,
                ChildState::Running => running += 1,
                ChildState::Completed | ChildState::Interrupted => {}
            }
        }
        (total, failed, running)
    }

    /// How many of the session's sub-agents still run.
    pub fn running_children(&self) -> usize {
        self.children
            .iter()
            .filter(|c| c.state == ChildState::Running)
            .count()
    }

    /// The current turn's state, with what its sub-agents did where it started any:
    /// `completed, 1 of 3 sub-agents failed`, `running, 2 sub-agents running`.
    pub fn turn_phrase(&self) -> Option<String> {
        let t = self.turn.as_ref()?;
        Some(format!("{}{}", t.state.as_str(), self.children_phrase()))
    }

    /// What the current turn's sub-agents did, where it started any: `, 1 of 3 sub-agents
    /// failed`, `, 2 sub-agents running`, `, 2 sub-agents ended`; empty otherwise.
    pub fn children_phrase(&self) -> String {
        let mut out = String::new();
        let (total, failed, running) = self.turn_children();
        let plural = |n: usize| if n == 1 { "sub-agent" } else { "sub-agents" };
        if failed > 0 {
            out.push_str(&format!(", {failed} of {total} {} failed", plural(total)));
        }
        if running > 0 {
            out.push_str(&format!(", {running} {} running", plural(running)));
        }
        if failed == 0 && running == 0 && total > 0 {
            out.push_str(&format!(", {total} {} ended", plural(total)));
        }
        out
    }

    /// The harness says the turn is over: a running one ends `completed`, attention cleared
    /// and the session idle, unless sub-agents it started still run: then it waits for them
    /// (`stopped_at`) and nothing is recorded yet. Returns the events and whether the session
    /// is now done with the turn.
    pub fn complete_turn(&mut self, now: &str, source: &str) -> (Vec<NewEvent>, bool) {
        if self.turn_running() && self.turn_children().2 > 0 {
            if let Some(t) = self.turn.as_mut() {
                t.stopped_at.get_or_insert_with(|| now.to_owned());
            }
            return (Vec::new(), false);
        }
        // A turn that already ended (`timed_out` while the harness went on with it) adds no
        // second ending; the session is idle all the same.
        let mut out = self.end_turn(TurnState::Completed, now, source, Value::Null);
        out.extend(self.clear_attention(source));
        if self.status != Status::Exited {
            self.status = Status::Idle;
        }
        (out, true)
    }

    /// Sub-agent `id` started (within the running turn, or the last one): `subagent.started`.
    /// Nothing when it is already known.
    pub fn start_child(
        &mut self,
        id: &str,
        agent_type: Option<&str>,
        now: &str,
        source: &str,
    ) -> Vec<NewEvent> {
        if self.children.iter().any(|c| c.id == id) {
            return Vec::new();
        }
        if self.children.len() >= CHILDREN_KEPT {
            let at = self
                .children
                .iter()
                .position(|c| c.state != ChildState::Running)
                .unwrap_or(0);
            self.children.remove(at);
        }
        let turn_id = self.turn.as_ref().and_then(|t| t.id.clone());
        self.children.push(Child {
            agent_type: agent_type.filter(|t| !t.is_empty()).map(str::to_owned),
            attempt_failed_at: None,
            ended_at: None,
            error: None,
            id: id.to_owned(),
            open_calls: Vec::new(),
            started_at: now.to_owned(),
            state: ChildState::Running,
            summary: None,
            turn_id: turn_id.clone(),
            usage: None,
            other: serde_json::Map::new(),
        });
        vec![new_event(
            "subagent.started",
            source,
            serde_json::json!({ "agent_id": id, "agent_type": agent_type, "turn_id": turn_id }),
        )]
    }

    /// Sub-agent `id`, if it runs, ends as `state` (with its last message or its error): a
    /// `tool.interrupted` for each of its calls still open, then `subagent.<state>`. Nothing
    /// for a sub-agent that is not running (it ends once).
    pub fn end_child(
        &mut self,
        id: &str,
        state: ChildState,
        now: &str,
        source: &str,
        summary: Option<&str>,
        error: Option<&str>,
    ) -> Vec<NewEvent> {
        let Some(c) = self
            .children
            .iter_mut()
            .find(|c| c.id == id && c.state == ChildState::Running)
        else {
            return Vec::new();
        };
        let mut out: Vec<NewEvent> = std::mem::take(&mut c.open_calls)
            .into_iter()
            .map(|(call, tool)| {
                new_event(
                    "tool.interrupted",
                    source,
                    serde_json::json!({ "call_id": call, "tool": tool, "agent_id": id }),
                )
            })
            .collect();
        c.state = state;
        c.ended_at = Some(now.to_owned());
        c.attempt_failed_at = None;
        if let Some(text) = summary.map(one_line).filter(|t| !t.is_empty()) {
            c.summary = Some(text);
        }
        c.error = error.map(str::to_owned);
        let elapsed_ms = elapsed_ms(&c.started_at, now);
        out.push(new_event(
            &format!("subagent.{}", state.as_str()),
            source,
            serde_json::json!({ "agent_id": id, "agent_type": c.agent_type, "turn_id": c.turn_id,
                "summary": c.summary, "error": c.error, "elapsed_ms": elapsed_ms }),
        ));
        out
    }

    /// The running sub-agent `id`, if there is one.
    pub fn running_child(&mut self, id: &str) -> Option<&mut Child> {
        self.children
            .iter_mut()
            .find(|c| c.id == id && c.state == ChildState::Running)
    }

    /// The running turn failed: it ends `partial_failed` when the model had written text,
    /// else `failed`, with the error as its note, its kind and the next step; the failure
    /// becomes the session's attention (a person should look). Nothing when no turn runs.
    pub fn fail_turn(&mut self, failure: &Failure, now: &str, source: &str) -> Vec<NewEvent> {
        // Text from before the turn began is an earlier answer (Claude may fail a request before
        // it writes the turn's prompt into its transcript).
        let started = self
            .turn
            .as_ref()
            .and_then(|t| crate::store::parse_time(&t.started_at));
        let earlier = match (
            failure
                .partial_at
                .as_deref()
                .and_then(crate::store::parse_time),
            started,
        ) {
            (Some(at), Some(started)) => at < started,
            _ => false,
        };
        let partial = failure
            .partial
            .as_deref()
            .map(str::trim)
            .filter(|p| !p.is_empty() && !earlier);
        let state = if partial.is_some() {
            TurnState::PartialFailed
        } else {
            TurnState::Failed
        };
        let next = failure.kind.next();
        let ended = self.end_turn(
            state,
            now,
            source,
            serde_json::json!({ "error": failure.error, "error_kind": failure.kind,
                "next": next, "partial": partial }),
        );
        if ended.is_empty() {
            return Vec::new();
        }
        if let Some(t) = self.turn.as_mut() {
            t.note = Some(failure.error.clone());
            t.error_kind = Some(failure.kind);
            t.next = Some(next.to_owned());
            t.partial = partial.map(str::to_owned);
        }
        let mut out: Vec<NewEvent> = self
            .close_attention(source, "unanswered")
            .into_iter()
            .collect();
        out.extend(ended);
        self.status = Status::Idle;
        let mut failed = Attention::new(AttentionKind::TurnFailed, failure.error.clone(), now);
        failed.kind = Some(AttentionKind::other());
        failed.via = Some(Via {
            how: AnswerWay::TerminalOnly,
            why: Some(
                "a failed turn asks no question: a new prompt (`spex deliver`) answers it".into(),
            ),
        });
        out.extend(self.open_attention(failed, source));
        out
    }

    /// Opens attention `a` (closing any other first): it gets the session's next id, and the
    /// `attention.opened` event carries all of it.
    pub fn open_attention(&mut self, mut a: Attention, source: &str) -> Vec<NewEvent> {
        let mut out: Vec<NewEvent> = self
            .close_attention(source, "replaced")
            .into_iter()
            .collect();
        self.flags.attentions += 1;
        a.id = Some(format!("a{}", self.flags.attentions));
        a.kind.get_or_insert_with(|| match a.reason {
            AttentionKind::Permission | AttentionKind::Question | AttentionKind::Plan => {
                a.reason.clone()
            }
            _ => AttentionKind::other(),
        });
        let mut fields = match serde_json::to_value(&a) {
            Ok(Value::Object(m)) => m,
            _ => serde_json::Map::new(),
        };
        // The event names the attention by `attention`; `since` is the event's own time.
        // (`kind` is the event's own: the attention's is `attention_kind`.)
        if let Some(id) = fields.remove("id") {
            fields.insert("attention".into(), id);
        }
        if let Some(kind) = fields.remove("kind") {
            fields.insert("attention_kind".into(), kind);
        }
        fields.remove("since");
        out.push(("attention.opened".to_owned(), source.to_owned(), fields));
        self.attention = Some(a);
        out
    }

    /// Closes any attention as answered at the terminal (or by whatever spex's own answer
    /// was on its way): `attention.closed`, or nothing when there was none.
    pub fn clear_attention(&mut self, source: &str) -> Option<NewEvent> {
        self.close_attention(source, "terminal")
    }

    /// Closes any attention: `attention.closed` with its id and how it went (`how`: `terminal`,
    /// `unanswered`, `replaced`; an answer `spex answer` had sent takes precedence: `how` is
    /// then `spex answer`, with the choice and message).
    pub fn close_attention(&mut self, source: &str, how: &str) -> Option<NewEvent> {
        let a = self.attention.take()?;
        let (how, answer) = match &a.answering {
            Some(ans) => (ans.by.as_str(), Some(ans)),
            None => (how, None),
        };
        Some(new_event(
            "attention.closed",
            source,
            serde_json::json!({
                "attention": a.id,
                "reason": a.reason,
                "attention_kind": a.kind,
                "how": how,
                "choice": answer.map(|x| &x.choice),
                "message": answer.and_then(|x| x.message.as_ref()),
                "by": answer.and_then(|x| x.from.as_ref()),
            }),
        ))
    }

    /// Records that the state changed since `before`: `since`, `source` and `why` describe the
    /// new one. Nothing changes when the state did not.
    pub fn stamp(&mut self, before: StateKey, now: &str, source: &str, why: Option<String>) {
        if self.state_key() != before || self.since.is_none() {
            self.since = Some(now.to_owned());
            self.source = Some(source.to_owned());
            self.why = why;
        }
    }

    /// A new harness process runs the session (it was resumed): forget the old one and what
    /// its evidence said, so the readers find the new one.
    pub fn forget_process(&mut self) {
        self.process = None;
        self.boot_id = None;
        self.observed = None;
        self.attended = None;
        self.exit_status = None;
    }

    /// The session is over: a running turn is closed (`turn.interrupted`), attention that
    /// asked for a person is cleared (a failed turn's stays visible), `session.exited`.
    pub fn exit(&mut self, reason: &str, now: &str, source: &str) -> Vec<NewEvent> {
        let mut out: Vec<NewEvent> = Vec::new();
        out.extend(self.end_turn(
            TurnState::Interrupted,
            now,
            source,
            serde_json::json!({ "by": "exit" }),
        ));
        let running: Vec<String> = self
            .children
            .iter()
            .filter(|c| c.state == ChildState::Running)
            .map(|c| c.id.clone())
            .collect();
        for id in running {
            out.extend(self.end_child(
                &id,
                ChildState::Interrupted,
                now,
                source,
                None,
                Some("the session ended"),
            ));
        }
        if self
            .attention
            .as_ref()
            .is_some_and(|a| a.reason != AttentionKind::TurnFailed)
        {
            out.extend(self.close_attention(source, "unanswered"));
        }
        self.status = Status::Exited;
        self.exit_reason = Some(reason.to_owned());
        out.push(new_event(
            "session.exited",
            source,
            serde_json::json!({ "reason": reason }),
        ));
        out
    }
}

/// One ending per turn, never taken back: what may still change about a turn that ended.
impl Turn {
    /// Whether the harness's report at `now` that the running turn ended is the doing of the
    /// interrupt on its way (`interrupting`): one went out no longer than
    /// [`INTERRUPT_SETTLE`] before (a mark with no time, from an older spex, counts). The
    /// interrupt is one part of the evidence and the harness's report the other; the ending
    /// is written once, when the second comes, never corrected after.
    pub fn interrupt_decides(&self, now: &str) -> bool {
        if self.state != TurnState::Running || self.interrupting.is_none() {
            return false;
        }
        let Some(at) = self.interrupting_at.as_deref() else {
            return true;
        };
        match (crate::store::parse_time(at), crate::store::parse_time(now)) {
            (Some(at), Some(now)) => now
                .duration_since(at)
                .map_or(true, |d| d <= INTERRUPT_SETTLE),
            _ => true,
        }
    }

    /// Corrects the ended turn's state to `to` with what evidence read later adds, only
    /// where the outcome stays what it was (`failed` to `partial_failed`: the same failure,
    /// its partial text found): a waiter that already took the ending (`wait --until
    /// turn-end`, `deliver --wait-until done`) is never contradicted. The state it had, or
    /// `None` when the correction would change the outcome (and nothing changed).
    pub fn amend(&mut self, to: TurnState) -> Option<TurnState> {
        let was = self.state;
        let same_outcome = matches!((was, to), (TurnState::Failed, TurnState::PartialFailed));
        if !same_outcome {
            return None;
        }
        self.state = to;
        Some(was)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::store::session::turn::{ErrorKind, Turn};

    /// A working session whose turn started at 10:00:00.
    pub(crate) fn running_at_ten() -> Session {
        Session {
            status: Status::Working,
            turn: Some(Turn {
                id: Some("t1".into()),
                started_at: "2026-11-26T10:00:00.000Z".into(),
                ..Turn::default()
            }),
            ..Session::default()
        }
    }

    /// Found live: a request that fails at once, before Claude writes the turn's prompt into
    /// its transcript, left the previous turn's answer as the "partial" text.
    #[test]
    fn text_written_before_the_turn_began_is_no_partial_text() {
        let failure = |at: &str| Failure {
            partial: Some("an answer".into()),
            partial_at: Some(at.into()),
            ..Failure::new("API Error: 400", ErrorKind::ModelError)
        };
        let mut s = running_at_ten();
        s.fail_turn(
            &failure("2026-11-26T09:59:58.000Z"),
            "2026-11-26T10:00:01.000Z",
            "t",
        );
        assert_eq!(s.turn.as_ref().unwrap().state, TurnState::Failed);
        assert_eq!(s.turn.as_ref().unwrap().partial, None);
        let mut s = running_at_ten();
        s.fail_turn(
            &failure("2026-11-26T10:00:00.500Z"),
            "2026-11-26T10:00:01.000Z",
            "t",
        );
        assert_eq!(s.turn.as_ref().unwrap().state, TurnState::PartialFailed);
    }

    /// The settle logic: a turn-end report within the settle time of the interrupt key is
    /// the interrupt's doing (it ends `interrupted`, once); one later, or with no interrupt on
    /// its way, is the harness's own word.
    #[test]
    fn a_turn_end_reported_within_the_settle_time_of_an_interrupt_is_that_interrupt() {
        let marked = |at: Option<&str>| Turn {
            interrupting: Some("terminal".into()),
            interrupting_at: at.map(str::to_owned),
            ..running_at_ten().turn.unwrap()
        };
        let key = Some("2026-11-26T10:00:05.000Z");
        for (turn, now, decides) in [
            (marked(key), "2026-11-26T10:00:05.000Z", true),
            (marked(key), "2026-11-26T10:00:05.300Z", true),
            (marked(key), "2026-11-26T10:00:15.000Z", true),
            (marked(key), "2026-11-26T10:00:15.001Z", false),
            (marked(key), "2026-11-26T10:01:00.000Z", false),
            // A hook whose clock reads a moment before the key's: still within.
            (marked(key), "2026-11-26T10:00:04.990Z", true),
            (marked(None), "2026-11-26T10:09:00.000Z", true),
            (
                running_at_ten().turn.unwrap(),
                "2026-11-26T10:00:05.000Z",
                false,
            ),
        ] {
            assert_eq!(turn.interrupt_decides(now), decides, "{turn:?} at {now}");
        }
        let mut ended = marked(key);
        ended.state = TurnState::Completed;
        assert!(!ended.interrupt_decides("2026-11-26T10:00:05.100Z"));
    }

    #[test]
    fn a_completed_turn_is_never_amended() {
        use TurnState::{Completed, Failed, Interrupted, PartialFailed, TimedOut};
        for (from, to, allowed) in [
            (Completed, Interrupted, false),
            (Completed, Failed, false),
            (Completed, PartialFailed, false),
            (Interrupted, Completed, false),
            (Failed, Completed, false),
            (TimedOut, Interrupted, false),
            (Failed, PartialFailed, true),
        ] {
            let mut t = Turn {
                state: from,
                ..Turn::default()
            };
            assert_eq!(t.amend(to), allowed.then_some(from), "{from:?} -> {to:?}");
            assert_eq!(t.state, if allowed { to } else { from });
        }
    }

    #[test]
    fn an_interrupt_on_its_way_names_who_sent_it() {
        let mut s = running_at_ten();
        s.turn.as_mut().unwrap().interrupting = Some("spex interrupt".into());
        let ended = s.end_turn(
            TurnState::Interrupted,
            "x",
            "hook",
            serde_json::json!({"by": "terminal"}),
        );
        assert_eq!(ended.last().unwrap().2["by"], "spex interrupt");
        assert_eq!(
            s.turn.as_ref().unwrap().by.as_deref(),
            Some("spex interrupt")
        );
        let mut s = running_at_ten();
        s.end_turn(
            TurnState::Interrupted,
            "x",
            "hook",
            serde_json::json!({"by": "terminal"}),
        );
        assert_eq!(s.turn.as_ref().unwrap().by.as_deref(), Some("terminal"));
    }
}
