//! A running turn judged against the project's budgets: the turn budget (`turnTimeout`) that
//! ends it `timed_out`, and the stall budget (`stallTimeout`) that marks it `turn.stalled`
//! until progress resumes it. Transitions of the record, like `state.rs`'s; no file is read.

use std::time::{Duration, SystemTime};

use super::record::{Session, Status};
use super::state::{NewEvent, new_event};
use super::turn::{Timeout, TurnState};
use crate::config::Budgets;

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Milliseconds from one time the store wrote to another (0 when either does not parse).
fn ms_between(from: &str, to: &str) -> u64 {
    match (crate::store::parse_time(from), crate::store::parse_time(to)) {
        (Some(a), Some(b)) => b.duration_since(a).map_or(0, ms),
        _ => 0,
    }
}

impl Session {
    /// Evidence that the running turn makes progress (a hook, the screen, the server): noted
    /// in `progress_at`, and a stalled turn is working again (`turn.resumed`).
    pub fn note_progress(&mut self, now: &str, source: &str) -> Vec<NewEvent> {
        let Some(turn) = self.turn.as_mut().filter(|t| t.state == TurnState::Running) else {
            return Vec::new();
        };
        turn.progress_at = Some(now.to_owned());
        let Some(stalled) = turn.stalled_at.take() else {
            return Vec::new();
        };
        let quiet = ms_between(&stalled, now);
        vec![new_event(
            "turn.resumed",
            source,
            serde_json::json!({ "turn_id": turn.id, "stalled_at": stalled, "stalled_ms": quiet }),
        )]
    }

    /// The running turn's last evidence of progress: the newest of its start, the progress
    /// the record holds and `activity` (what the caller saw that the record does not hold).
    fn last_progress(&self, activity: Option<SystemTime>) -> Option<SystemTime> {
        let t = self
            .turn
            .as_ref()
            .filter(|t| t.state == TurnState::Running)?;
        [
            crate::store::parse_time(&t.started_at),
            t.progress_at.as_deref().and_then(crate::store::parse_time),
            activity,
        ]
        .into_iter()
        .flatten()
        .max()
    }

    /// When the budgets next have something to judge about this record: the end of the
    /// running turn's budget, or the moment it would have shown no progress for the stall
    /// budget; `None` when nothing runs or no budget is set.
    pub fn budget_deadline(&self, b: &Budgets, activity: Option<SystemTime>) -> Option<SystemTime> {
        let t = self
            .turn
            .as_ref()
            .filter(|t| t.state == TurnState::Running)?;
        let end = b
            .turn
            .and_then(|d| Some(crate::store::parse_time(&t.started_at)? + d));
        let stall = b
            .stall
            .filter(|_| self.status == Status::Working && t.stalled_at.is_none())
            .and_then(|d| Some(self.last_progress(activity)? + d));
        [end, stall].into_iter().flatten().min()
    }

    /// Judges the running turn against the budgets at `now`, with `activity` the newest
    /// progress the caller saw that the record may not hold yet. Past the turn budget the turn
    /// ends `timed_out` (its one ending: later evidence of its end adds none), with the budget,
    /// the time it ran and what to do; `interrupt` says whether the caller will interrupt the
    /// session (`onTimeout: interrupt` and a transport it owns). A working turn with no
    /// progress for the stall budget is marked `turn.stalled` (not an ending); one that shows
    /// progress after that is `turn.resumed`.
    pub fn judge_budgets(
        &mut self,
        b: &Budgets,
        now: SystemTime,
        activity: Option<SystemTime>,
        interrupt: bool,
        source: &str,
    ) -> Vec<NewEvent> {
        let Some(t) = self.turn.as_ref().filter(|t| t.state == TurnState::Running) else {
            return Vec::new();
        };
        let stamp = humantime::format_rfc3339_millis(now).to_string();
        let elapsed = crate::store::parse_time(&t.started_at)
            .and_then(|s| now.duration_since(s).ok())
            .unwrap_or_default();
        if let Some(budget) = b.turn.filter(|d| elapsed >= *d) {
            let action = if interrupt { "interrupt" } else { "mark" };
            let words = crate::config::duration_words(budget);
            let ran = crate::config::duration_words(elapsed);
            let next = if interrupt {
                "spex interrupts the session; send the next prompt (`spex deliver`), or raise `turnTimeout` in `spex.jsonc`".to_owned()
            } else {
                "the harness may still be working on it: `spex interrupt` stops it (where spex hosts the session), or raise `turnTimeout` in `spex.jsonc`".to_owned()
            };
            let timeout = Timeout {
                budget_ms: ms(budget),
                elapsed_ms: ms(elapsed),
                interrupt_sent_at: None,
                action: action.to_owned(),
            };
            let note = format!("ran past its turn budget of {words} ({ran})");
            let before = self.state_key();
            let out = self.end_turn(
                TurnState::TimedOut,
                &stamp,
                source,
                serde_json::json!({ "budget_ms": timeout.budget_ms, "elapsed_ms": timeout.elapsed_ms,
                    "budget": words, "on_timeout": action, "next": next }),
            );
            if let Some(t) = self.turn.as_mut() {
                t.note = Some(note.clone());
                t.next = Some(next);
                t.timeout = Some(timeout);
            }
            self.stamp(before, &stamp, source, Some(note));
            return out;
        }
        let last = self.last_progress(activity);
        let stalled = self.turn.as_ref().is_some_and(|t| t.stalled_at.is_some());
        // Progress the caller saw after the turn was marked stalled: it works again.
        let since_stall = self
            .turn
            .as_ref()
            .and_then(|t| t.stalled_at.as_deref())
            .and_then(crate::store::parse_time);
        if stalled {
            if let (Some(a), Some(st)) = (activity, since_stall)
                && a > st
            {
                let at = humantime::format_rfc3339_millis(a).to_string();
                return self.note_progress(&at, source);
            }
            return Vec::new();
        }
        let Some(budget) = b.stall.filter(|_| self.status == Status::Working) else {
            return Vec::new();
        };
        let quiet = last
            .and_then(|l| now.duration_since(l).ok())
            .unwrap_or_default();
        if quiet < budget {
            return Vec::new();
        }
        let turn = self.turn.as_mut().expect("a running turn");
        turn.stalled_at = Some(stamp.clone());
        vec![new_event(
            "turn.stalled",
            source,
            serde_json::json!({ "turn_id": turn.id, "budget_ms": ms(budget),
                "budget": crate::config::duration_words(budget), "quiet_ms": ms(quiet),
                "last_progress": last.map(|l| humantime::format_rfc3339_millis(l).to_string()) }),
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::session::state::tests::running_at_ten;
    use serde_json::Value;

    fn at(t: &str) -> SystemTime {
        crate::store::parse_time(&format!("2026-11-26T{t}Z")).unwrap()
    }

    fn kinds(events: &[NewEvent]) -> Vec<&str> {
        events.iter().map(|e| e.0.as_str()).collect()
    }

    #[test]
    fn budgets_end_a_turn_once_and_mark_a_stall_that_progress_resumes() {
        let b = Budgets {
            turn: Some(Duration::from_mins(45)),
            stall: Some(Duration::from_mins(10)),
            on_timeout: crate::config::OnTimeout::Mark,
        };
        let mut s = running_at_ten();
        assert_eq!(s.budget_deadline(&b, None), Some(at("10:10:00")));
        // Screen activity the record does not hold moves the stall deadline.
        assert_eq!(
            s.budget_deadline(&b, Some(at("10:05:00"))),
            Some(at("10:15:00"))
        );
        assert!(
            s.judge_budgets(&b, at("10:09:59"), None, false, "t")
                .is_empty()
        );
        let stalled = s.judge_budgets(&b, at("10:10:00"), None, false, "t");
        assert_eq!(kinds(&stalled), ["turn.stalled"]);
        assert_eq!(stalled[0].2["quiet_ms"], 600_000);
        assert!(s.turn_running(), "a stall is no ending");
        // Marked once; then only the turn budget is left to judge.
        assert!(
            s.judge_budgets(&b, at("10:11:00"), None, false, "t")
                .is_empty()
        );
        assert_eq!(s.budget_deadline(&b, None), Some(at("10:45:00")));
        // Progress seen after the mark: working again.
        let resumed = s.judge_budgets(&b, at("10:12:00"), Some(at("10:11:30")), false, "t");
        assert_eq!(kinds(&resumed), ["turn.resumed"]);
        assert_eq!(
            s.note_progress("2026-11-26T10:13:00.000Z", "hook"),
            Vec::new()
        );
        // Past the turn budget: one ending, with the budget and the time it ran.
        let ended = s.judge_budgets(&b, at("10:46:00"), None, true, "t");
        assert_eq!(kinds(&ended), ["turn.timed_out"]);
        assert_eq!(ended[0].2["budget_ms"], 2_700_000);
        assert_eq!(ended[0].2["elapsed_ms"], 2_760_000);
        assert_eq!(ended[0].2["on_timeout"], "interrupt");
        let t = s.turn.as_ref().unwrap();
        assert_eq!(t.state, TurnState::TimedOut);
        assert!(t.note.as_deref().unwrap().contains("45m"));
        assert!(t.next.is_some());
        // The harness's own ending, later, adds none.
        assert!(
            s.end_turn(TurnState::Interrupted, "x", "hook", Value::Null)
                .is_empty()
        );
        assert!(
            s.judge_budgets(&b, at("11:00:00"), None, true, "t")
                .is_empty()
        );
        assert_eq!(s.budget_deadline(&b, None), None);
        // No budget, no judgement; a turn waiting on a person is not stalled.
        let mut quiet = running_at_ten();
        assert!(
            quiet
                .judge_budgets(&Budgets::default(), at("23:00:00"), None, false, "t")
                .is_empty()
        );
        quiet.status = Status::NeedsAttention;
        let stall_only = Budgets { turn: None, ..b };
        assert!(
            quiet
                .judge_budgets(&stall_only, at("11:00:00"), None, false, "t")
                .is_empty()
        );
    }
}
