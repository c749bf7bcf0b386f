//! Turn budgets (`turnTimeout`, `stallTimeout`, `onTimeout`), judged outside the hook path: by
//! the long-lived process that owns a session (its PTY host, or its server's supervisor), which
//! also sees progress no record holds (the screen, the server's notifications) and can
//! interrupt; and by the readers (`judge.rs`) for a session nobody owns. What both share: the
//! budgets of a session, and the interrupt a timed-out turn is owed. Imports nothing else of
//! the runtime (the host and the server use it).

use std::collections::HashMap;
use std::path::PathBuf;

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
    pub fn of(&mut self, env: &Env, s: &Session) -> Budgets {
        if let Some(b) = self.by_root.get(&s.tree) {
            return *b;
        }
        let b = of_session(env, s).unwrap_or_else(|e| {
            eprintln!(
                "warning: turn budgets not judged: {}",
                crate::hint::spelled(&e)
            );
            Budgets::default()
        });
        self.by_root.insert(s.tree.clone(), b);
        b
    }
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
