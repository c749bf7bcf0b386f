//! Turn budgets (`turnTimeout`, `stallTimeout`, `onTimeout`), judged outside the hook path: by
//! the long-lived process that owns a session (its PTY host, or its server's supervisor), which
//! also sees progress no record holds (the screen, the server's notifications) and can
//! interrupt; and by the readers (`sessions`, `show`, `wait`, `events`) for a session nobody
//! owns (started in the person's own terminal, or whose owner died), which they only mark.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use crate::adapters;
use crate::config::{Budgets, ConfigError};
use crate::env::Env;
use crate::store::ProjectStore;
use crate::store::session::{Session, Status, TurnState};

/// The budgets that apply to session `s`: the configuration of its checkout (the main
/// checkout's when a worktree has none, or is gone).
pub fn of_session(env: &Env, s: &Session) -> Result<Budgets, ConfigError> {
    let tree = if s.tree.is_dir() { &s.tree } else { &s.project };
    let root = crate::config::source_root(tree, &s.project);
    crate::config::load(&env.user_config_file(), &root, &adapters::known()).map(|c| c.budgets)
}

/// The budgets of the sessions one reader looks at, read once per checkout; a configuration
/// that does not load is said once (on stderr) and judges nothing.
#[derive(Default)]
pub struct Book {
    by_root: HashMap<PathBuf, Budgets>,
}

impl Book {
    fn of(&mut self, env: &Env, s: &Session) -> Budgets {
        if let Some(b) = self.by_root.get(&s.tree) {
            return *b;
        }
        let b = of_session(env, s).unwrap_or_else(|e| {
            eprintln!("warning: turn budgets not judged: {e}");
            Budgets::default()
        });
        self.by_root.insert(s.tree.clone(), b);
        b
    }
}

/// Whether a long-lived spex process judges session `s` itself: the host that runs its
/// program, or the supervisor of the server that holds its thread.
pub fn owned(env: &Env, store: &ProjectStore, s: &Session) -> bool {
    let Some(harness) = adapters::lookup(&s.harness) else {
        return false;
    };
    if s.launched_by == "spex"
        && let Ok(Some(server)) =
            super::server::Server::new(env, harness, store, &s.project, PathBuf::new(), Vec::new())
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

/// Whether the running turn's record asks for an interrupt the owner has not sent yet (a
/// turn past its budget with `onTimeout: interrupt`).
pub fn interrupt_owed(s: &Session) -> bool {
    s.status != Status::Exited
        && s.turn.as_ref().is_some_and(|t| {
            t.state == TurnState::TimedOut
                && t.timeout
                    .as_ref()
                    .is_some_and(|x| x.action == "interrupt" && x.interrupt_sent_at.is_none())
        })
}

/// Notes on the record that the owner sent the interrupt a timed-out turn was owed.
pub fn interrupt_sent(store: &ProjectStore, id: &str) {
    let _ = store.update(id, |cur| {
        let Some(mut s) = cur else {
            return (None, Vec::new(), ());
        };
        if let Some(x) = s.turn.as_mut().and_then(|t| t.timeout.as_mut()) {
            x.interrupt_sent_at = Some(crate::store::now_rfc3339());
        }
        (Some(s), Vec::new(), ())
    });
}
