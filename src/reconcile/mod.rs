//! Reconcile on read: before `sessions`, `show` and `wait` answer, fold each live session's
//! evidence beyond hooks (what its adapter reads from the harness's own files and the process
//! table) into its record, under the record's lock and with the same event grammar as the hook
//! handlers. Never on the hook path: `dispatch` stays as fast as it is. Then what the harness's
//! own log adds (usage, a failed turn's text), for exited sessions too until the log is read
//! to its end. Also gives each session its short handle the first time a reader sees it. A
//! session live in an earlier boot of the machine ends `machine stopped` before any of that.

use std::collections::BTreeMap;

use crate::adapters;
use crate::env::Env;
use crate::seam::evidence::{Evidence, apply, apply_log};
use crate::store::session::{Session, Status, StoreError};
use crate::store::{self, ProjectStore};

/// Every record of the project, with the evidence folded in and a handle each.
#[allow(
    dead_code,
    reason = "the one-project reader; `spex sessions` reads through `sessions_of`, other readers (the board) may call either"
)]
pub fn sessions(env: &Env, store: &ProjectStore) -> Result<Vec<Session>, StoreError> {
    let all = store.sessions().into_iter().map(|s| (0, s)).collect();
    Ok(fold(env, std::slice::from_ref(store), all)?
        .into_iter()
        .map(|(_, s)| s)
        .collect())
}

/// Every record of every project in `stores`, each with the index of its store, with the
/// evidence folded in and a handle each: each harness's evidence (a registry folder, the
/// process table) is read once for all of them, not once per project.
pub fn sessions_of(
    env: &Env,
    stores: &[ProjectStore],
) -> Result<Vec<(usize, Session)>, StoreError> {
    let all = stores
        .iter()
        .enumerate()
        .flat_map(|(i, store)| store.sessions().into_iter().map(move |s| (i, s)))
        .collect();
    fold(env, stores, all)
}

/// One record, with its evidence folded in.
pub fn session(env: &Env, store: &ProjectStore, id: &str) -> Result<Session, StoreError> {
    let s = store
        .load(id)?
        .ok_or_else(|| StoreError::NotFound(id.to_owned()))?;
    Ok(fold(env, std::slice::from_ref(store), vec![(0, s)])?
        .pop()
        .expect("one record in, one out")
        .1)
}

/// Folds the evidence into records `all`, each with the index of its project in `stores`.
#[expect(
    clippy::too_many_lines,
    reason = "the machine's word, then each harness's evidence, then the logs: one pass over the same records"
)]
fn fold(
    env: &Env,
    stores: &[ProjectStore],
    mut all: Vec<(usize, Session)>,
) -> Result<Vec<(usize, Session)>, StoreError> {
    // First the machine's own word: a session live in an earlier boot was stopped with the
    // machine (`machine stopped`), whatever its harness's files say now.
    let mut boot = None;
    for (p, s) in all.iter_mut().filter(|(_, s)| s.status != Status::Exited) {
        let boot = boot.get_or_insert_with(|| crate::seam::boot::Boot::now(env));
        if let Some(fresh) = crate::seam::boot::fold(&stores[*p], boot, s) {
            *s = fresh;
        }
    }
    // Live sessions per harness, so an adapter reads its evidence once for all of them.
    let mut by_harness: BTreeMap<&'static str, Vec<usize>> = BTreeMap::new();
    for (i, (_, s)) in all.iter().enumerate() {
        if s.status == Status::Exited {
            continue;
        }
        if let Some(h) = adapters::lookup(&s.harness).filter(|h| h.evidence().is_some()) {
            by_harness.entry(h.id()).or_default().push(i);
        }
    }
    let mut found: Vec<(usize, Evidence)> = Vec::new();
    for (harness, idx) in &by_harness {
        let o = adapters::lookup(harness)
            .and_then(crate::seam::Harness::evidence)
            .expect("looked up above");
        let live: Vec<&Session> = idx.iter().map(|&i| &all[i].1).collect();
        for (k, ev) in o.observe(env, &live) {
            found.push((idx[k], ev));
        }
    }
    for (i, ev) in found {
        let (p, ref seen) = all[i];
        let (store, id, seq) = (&stores[p], seen.id.clone(), seen.seq);
        let now = store::now_rfc3339();
        // Judged on the record as read; applied to the record as it is under the lock. A hook
        // that landed in between wins: the evidence is read again by the next reader.
        let fresh = store.update(&id, |cur| {
            let Some(mut s) = cur else {
                return (None, Vec::new(), None);
            };
            if s.seq != seq {
                return (None, Vec::new(), Some(s));
            }
            let before = s.clone();
            let events = apply(&mut s, &ev, &now);
            if events.is_empty() && s == before {
                // Nothing concluded: nothing written (a watcher woken by its own write must
                // find nothing to do, or it never sleeps).
                return (None, Vec::new(), Some(s));
            }
            (Some(s.clone()), events, Some(s))
        })?;
        if let Some(s) = fresh {
            all[i].1 = s;
        }
    }
    // What the harnesses' own logs add (usage, a failed turn's text): read outside the lock,
    // applied under it only when no other reader applied a reading since. A record a hook
    // changed meanwhile (a turn that failed) is read again, so what a reader answers has its
    // log folded in.
    for (p, s) in &mut all {
        let store = &stores[*p];
        for _ in 0..3 {
            let Some(reading) = adapters::lookup(&s.harness)
                .and_then(crate::seam::Harness::evidence)
                .and_then(|o| o.read_log(s))
            else {
                break;
            };
            let (id, seen) = (s.id.clone(), s.seq);
            let read_from = s.usage_cursor.clone();
            let now = store::now_rfc3339();
            let source = "the harness's log".to_owned();
            let fresh = store.update(&id, |cur| {
                let Some(mut cur) = cur else {
                    return (None, Vec::new(), None);
                };
                if cur.usage_cursor != read_from {
                    return (None, Vec::new(), Some(cur));
                }
                let before = cur.clone();
                let events = apply_log(&mut cur, &reading, &now, &source);
                if events.is_empty() && cur == before {
                    return (None, Vec::new(), Some(cur));
                }
                (Some(cur.clone()), events, Some(cur))
            })?;
            let Some(fresh) = fresh else { break };
            let moved = fresh.seq != seen;
            *s = fresh;
            if !moved {
                break;
            }
        }
    }
    for (p, s) in &mut all {
        let store = &stores[*p];
        if s.handle.is_none() {
            let handle = store.claim_handle(&s.id)?;
            let id = s.id.clone();
            let saved = store.update(&id, |cur| {
                let Some(mut cur) = cur else {
                    return (None, Vec::new(), None);
                };
                cur.handle.get_or_insert_with(|| handle.clone());
                (Some(cur.clone()), Vec::new(), Some(cur))
            })?;
            if let Some(saved) = saved {
                *s = saved;
            }
        }
    }
    Ok(all)
}
