//! What the runtime itself notes in a session's record, beside what its hooks report: that
//! its host is gone, and who is about to interrupt its turn.

use crate::store::ProjectStore;
use crate::store::session::{Session, Status};

/// Ends session `id` (unless it has exited already): `exited`, reason `host gone`, with `why`.
pub(super) fn host_gone(store: &ProjectStore, id: &str, why: &str) -> Option<Session> {
    store
        .update(id, |current| {
            let Some(mut s) = current.filter(|s| s.status != Status::Exited) else {
                return (None, Vec::new(), None);
            };
            let now = crate::store::now_rfc3339();
            let before = s.state_key();
            let events = s.exit("host gone", &now, "liveness");
            s.stamp(before, &now, "liveness", Some(why.to_owned()));
            s.updated_at = now;
            (Some(s.clone()), events, Some(s))
        })
        .ok()
        .flatten()
}

/// Notes on the running turn who is about to interrupt it (or, with `None`, that the
/// interrupt did not go out), so whatever evidence ends the turn (a hook, the screen, the
/// server) records who did (`by`).
pub fn mark_interrupting(store: &ProjectStore, id: &str, by: Option<&str>) {
    let _ = store.update(id, |cur| {
        let Some(mut s) = cur else {
            return (None, Vec::new(), ());
        };
        match s
            .turn
            .as_mut()
            .filter(|t| t.state == crate::store::session::TurnState::Running)
        {
            Some(t) => {
                t.interrupting = by.map(str::to_owned);
                t.interrupting_at = by.map(|_| crate::store::now_rfc3339());
            }
            None => return (None, Vec::new(), ()),
        }
        (Some(s), Vec::new(), ())
    });
}

/// Notes on the running turn that an interrupt key typed by `by` is about to reach the harness
/// (unless an interrupt is already on its way, whose asker and time stay): written before the
/// key goes in, so the harness's report of the turn's end, which follows the key, finds it
/// and the turn ends `interrupted` once, never `completed` and corrected after. Whether it
/// was noted (not when no turn runs, or one is already on its way).
pub fn mark_interrupt_key(store: &ProjectStore, id: &str, by: &str) -> bool {
    store
        .update(id, |cur| {
            let Some(mut s) = cur else {
                return (None, Vec::new(), false);
            };
            match s.turn.as_mut().filter(|t| {
                t.state == crate::store::session::TurnState::Running && t.interrupting.is_none()
            }) {
                Some(t) => {
                    t.interrupting = Some(by.to_owned());
                    t.interrupting_at = Some(crate::store::now_rfc3339());
                }
                None => return (None, Vec::new(), false),
            }
            (Some(s), Vec::new(), true)
        })
        .unwrap_or(false)
}
