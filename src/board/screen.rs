//! A hosted session's screen for the page, read-only: the host's snapshot (the one
//! `spex snapshot` asks for), sent when it differs from the last one sent. The page has no way
//! to send the session input: nothing here writes to a host.

use std::time::Duration;

use serde_json::{Value, json};

use crate::env::Env;
use crate::store::ProjectStore;

/// How often the screen a page looks at is asked for (only while a page looks at one).
const EVERY: Duration = Duration::from_millis(250);

/// The screen one page looks at, and the last one it was sent.
#[derive(Debug, Default)]
pub struct Watch {
    key: Option<String>,
    last: Option<Value>,
}

/// The project and id of a board key (`<stream key>/<id>`).
pub fn resolve(env: &Env, key: &str) -> Option<(ProjectStore, String)> {
    let (project, id) = key.split_once('/')?;
    crate::store::session::check_id(id, "board").ok()?;
    let store = crate::store::all_projects(&env.spex_home())
        .into_iter()
        .find(|s| s.stream_key() == project)?;
    store
        .session_dir(id)
        .is_dir()
        .then(|| (store, id.to_owned()))
}

impl Watch {
    pub fn set(&mut self, key: Option<String>) {
        self.key = key;
        self.last = None;
    }

    /// The next screen that differs from the last sent; never returns while no screen is
    /// looked at.
    pub async fn next(&mut self, env: &Env) -> Option<Value> {
        let Some(key) = self.key.clone() else {
            return std::future::pending().await;
        };
        if self.last.is_some() {
            tokio::time::sleep(EVERY).await;
        }
        let env = env.clone();
        let k = key.clone();
        let shot = tokio::task::spawn_blocking(move || {
            let (store, id) = resolve(&env, &k)?;
            Some(match crate::runtime::snapshot(&env, &store, &id, 0) {
                Ok(s) => {
                    json!({"lines": s.lines, "title": s.title, "rows": s.rows, "cols": s.cols})
                }
                Err(e) => json!({"error": e.to_string()}),
            })
        })
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| json!({"error": "no such session"}));
        if self.last.as_ref() == Some(&shot) {
            return None;
        }
        self.last = Some(shot.clone());
        let mut v = json!({"type": "screen", "session": key});
        if let (Some(o), Some(s)) = (v.as_object_mut(), shot.as_object()) {
            o.extend(s.clone());
        }
        Some(v)
    }
}
