//! The readers' side of turn budgets (`sessions`, `show`, `wait`, `events`, `deliver
//! --wait-until`): they judge a session no spex process owns (started in the person's own
//! terminal, or whose host or supervisor died), and only mark it; a session with an owner is
//! left to it (it also sees the screen or the server, and can interrupt).

use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use super::budget::Book;
use crate::adapters;
use crate::env::Env;
use crate::store::ProjectStore;
use crate::store::session::{LaunchedBy, Session, Status, TurnState};

/// Whether a long-lived spex process judges session `s` itself: the host that runs its
/// program, or the supervisor of the server that holds its thread.
pub fn owned(env: &Env, store: &ProjectStore, s: &Session) -> bool {
    let Some(harness) = adapters::lookup(&s.harness) else {
        return false;
    };
    if s.launched_by == LaunchedBy::Spex
        && let Ok(Some(server)) = super::harness_server::Server::new(
            env,
            harness,
            store,
            &s.project,
            PathBuf::new(),
            Vec::new(),
        )
    {
        return server.supervised();
    }
    super::hosted(store, s)
        && super::host_record(store, &s.id).is_some_and(|r| crate::seam::evidence::alive(r.host))
}

/// A reader's judgement of a session no spex process owns: its running turn past the turn
/// budget ends `timed_out` (marked; nothing can interrupt it from here), a working turn with
/// no recorded progress for the stall budget is `turn.stalled`. Returns the record as saved.
pub fn judge(env: &Env, store: &ProjectStore, s: Session, book: &mut Book) -> Session {
    let running = s
        .turn
        .as_ref()
        .is_some_and(|t| t.state == TurnState::Running);
    if s.status == Status::Exited || !running {
        return s;
    }
    let b = book.of(env, &s);
    let now = SystemTime::now();
    if s.budget_deadline(&b, None).is_none_or(|d| d > now) || owned(env, store, &s) {
        return s;
    }
    let saved = store.update(&s.id, |cur| {
        let Some(mut cur) = cur else {
            return (None, Vec::new(), None);
        };
        let events = cur.judge_budgets(&b, now, None, false, "budget");
        if events.is_empty() {
            return (None, Vec::new(), Some(cur));
        }
        cur.updated_at = crate::store::now_rfc3339();
        (Some(cur.clone()), events, Some(cur))
    });
    saved.ok().flatten().unwrap_or(s)
}

/// When a reader that waits on `s` must look again for its budgets (`wait` wakes then, with
/// no event to wake it), or `None`.
pub fn deadline(env: &Env, s: &Session, book: &mut Book) -> Option<Instant> {
    if s.status == Status::Exited || !s.turn_running() {
        return None;
    }
    let at = s.budget_deadline(&book.of(env, s), None)?;
    Some(Instant::now() + at.duration_since(SystemTime::now()).unwrap_or_default())
}
