//! Which sessions a page shows with the page visible: the page says so over its socket (the
//! Page Visibility API and the cards in its viewport), again every 10 s while it holds,
//! and the board touches the notifier's viewing marker (`crate::notify::state::viewing_file`)
//! for each each time, so nothing is sent for a session a person looks at. A marker goes as
//! soon as no page shows its session (hidden, scrolled away, closed); one a page stopped
//! confirming (its network gone) or a killed board left counts only while it is fresh
//! (`VIEWING_FRESH`).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, PoisonError};

use crate::env::Env;
use crate::notify::state::viewing_file;

/// How many sessions one page may say it shows (a page shows a screenful of cards).
const MOST: usize = 200;

/// How many of the board's pages show each session (by session id).
#[derive(Debug, Default)]
pub struct Viewing {
    pages: Mutex<HashMap<String, usize>>,
}

impl Viewing {
    /// One page now shows `new` where it showed `old`: the markers of sessions it began to show
    /// are touched; those no page shows any more are removed.
    pub fn change(&self, env: &Env, old: &BTreeSet<String>, new: &BTreeSet<String>) {
        let mut pages = self.pages.lock().unwrap_or_else(PoisonError::into_inner);
        for id in new.difference(old) {
            *pages.entry(id.clone()).or_default() += 1;
            touch(env, id);
        }
        for id in old.difference(new) {
            let left = pages.get_mut(id).map(|n| {
                *n = n.saturating_sub(1);
                *n
            });
            if left == Some(0) {
                pages.remove(id);
                let _ = fs_err::remove_file(viewing_file(env, id));
            }
        }
    }

    /// Touches the markers of `ids` again (a page still shows them).
    pub fn refresh(env: &Env, ids: &BTreeSet<String>) {
        for id in ids {
            touch(env, id);
        }
    }

    /// Removes every marker this board keeps (it stops).
    pub fn clear(&self, env: &Env) {
        let mut pages = self.pages.lock().unwrap_or_else(PoisonError::into_inner);
        for (id, _) in pages.drain() {
            let _ = fs_err::remove_file(viewing_file(env, &id));
        }
    }
}

/// Writes session `id`'s marker (the board's pid inside), so its time is now.
fn touch(env: &Env, id: &str) {
    let path = viewing_file(env, id);
    if let Some(dir) = path.parent()
        && let Err(e) = crate::fsutil::create_private_dir_all(dir)
    {
        crate::log::log!("board: cannot keep the viewing marker of `{id}`: {e}");
        return;
    }
    if let Err(e) = fs_err::write(&path, format!("{}\n", std::process::id())) {
        crate::log::log!("board: cannot keep the viewing marker of `{id}`: {e}");
    }
}

/// The session ids of the board keys a page names (`<stream key>/<id>`), each a session of a
/// project in the store: a key naming none is dropped, so a page makes no other file.
pub fn resolve(env: &Env, keys: &[String]) -> BTreeSet<String> {
    keys.iter()
        .take(MOST)
        .filter_map(|k| super::screen::resolve(env, k).map(|(_, id)| id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::state::VIEWING_FRESH;

    #[test]
    fn a_marker_stays_while_any_page_shows_its_session_and_goes_with_the_last() {
        let dir = tempfile::tempdir().unwrap();
        let env = Env {
            spex_home: Some(dir.path().join("store")),
            home: Some(dir.path().to_path_buf()),
            ..Env::default()
        };
        let v = Viewing::default();
        let set = |ids: &[&str]| ids.iter().map(|s| (*s).to_owned()).collect::<BTreeSet<_>>();
        let none = set(&[]);
        v.change(&env, &none, &set(&["s1", "s2"]));
        v.change(&env, &none, &set(&["s1"]));
        assert!(crate::notify::state::viewed(&env, "s1"));
        assert!(crate::notify::state::viewed(&env, "s2"));
        // The first page is hidden: s2 is shown by none, s1 still by the second page.
        v.change(&env, &set(&["s1", "s2"]), &none);
        assert!(crate::notify::state::viewed(&env, "s1"));
        assert!(!viewing_file(&env, "s2").exists());
        v.clear(&env);
        assert!(!viewing_file(&env, "s1").exists());
    }

    /// The page says again what it shows well within a marker's freshness.
    #[test]
    fn the_page_says_it_again_well_within_a_markers_freshness() {
        let every = super::super::assets::JS
            .split("setInterval(")
            .nth(1)
            .filter(|part| part.contains("tellViewing"))
            .and_then(|part| part.split("}, ").nth(1))
            .and_then(|rest| rest.split(')').next())
            .and_then(|ms| ms.parse::<u64>().ok())
            .expect("board.js says again what it shows on an interval");
        assert!(
            std::time::Duration::from_millis(every) * 3 <= VIEWING_FRESH,
            "{every} ms"
        );
    }
}
