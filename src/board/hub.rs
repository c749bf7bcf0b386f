//! The board's view of every project: a snapshot (every session, with the cursor of the
//! streams it was taken at) and a follower that reads every project's stream as it grows,
//! woken by inotify on the store (never by a timer), and pushes each change to the sockets.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Context;
use rustix::fs::inotify;
use serde_json::Value;
use tokio::sync::broadcast;

use super::view;
use crate::env::Env;
use crate::runtime;
use crate::store::remotes::{HostStore, JournalReader};
use crate::store::session::{LaunchedBy, Session, Status};
use crate::store::stream::{Cursor, Reader};
use crate::store::{self, ProjectStore};

/// What the board pushes to every socket.
#[derive(Debug, Clone)]
pub enum Push {
    /// New lines of one project's stream, and the sessions they changed as they are now.
    Change(Arc<Change>),
    /// A message for the pages as it is (a delivery's stages).
    Notice(Arc<Value>),
}

#[derive(Debug)]
pub struct Change {
    /// The project's stream key.
    pub key: String,
    pub lines: Vec<Value>,
    pub sessions: Vec<Value>,
    /// The harnesses' rate limits, when a line says they changed ([`limits`]).
    pub limits: Option<Value>,
}

/// Every session of every project now, and the events after `from` up to the cursor it was
/// taken at (a page that reconnects with its cursor misses nothing).
pub struct Snapshot {
    pub cursor: Cursor,
    pub events: Vec<Value>,
    pub sessions: Vec<Value>,
    /// The harnesses' rate limits now ([`limits`]).
    pub limits: Value,
    /// Projects whose cursor was too old (rotated out) or ahead: their events were skipped.
    pub gaps: Vec<String>,
}

/// Whether the board shows a record: a session that ran a turn, or one spex started (as
/// `spex sessions` shows them), exited ones included.
fn shown(s: &Session) -> bool {
    s.turn.is_some() || s.launched_by == LaunchedBy::Spex || s.status == Status::NeedsAttention
}

/// The view of session `id` of `store` now, with its evidence folded in.
pub fn session_view(env: &Env, store: &ProjectStore, id: &str) -> Option<Value> {
    let s = crate::reconcile::session(env, store, id).ok()?;
    let s = runtime::reconcile_hosted(env, store, &s).unwrap_or(s);
    shown(&s).then(|| card(env, store, &s))
}

/// The page's view of `s`, with when the limit its failed turn ran into resets (a failed
/// session's own card says it, not only the limits line).
fn card(env: &Env, store: &ProjectStore, s: &Session) -> Value {
    let mut v = view::session(store, s, runtime::live(env, store, s));
    if let Some(at) = runtime::limits::failed_turn_reset(env, s) {
        v["limit_resets_at"] = at.into();
    }
    // Its harness version failed `spex check`'s events promises: the card says its state may
    // be wrong, as `show` does.
    if let Some(why) = runtime::checked::state_unverified(env, s) {
        v["state_unverified"] = why.into();
    }
    v
}

pub fn snapshot(env: &Env, from: Option<&Cursor>) -> Snapshot {
    let mut out = Snapshot {
        cursor: Cursor::default(),
        events: Vec::new(),
        sessions: Vec::new(),
        limits: limits(env),
        gaps: Vec::new(),
    };
    let text = from.map(ToString::to_string).unwrap_or_default();
    for store in store::all_projects(&env.spex_home()) {
        let key = store.stream_key();
        let mut reader = Reader::new(store.clone(), from.map(|c| c.after(&key)), &text);
        if let Ok(lines) = reader.next_batch(None) {
            out.events.extend(lines.into_iter().map(|l| tag(&store, l)));
        } else {
            // A cursor the stream no longer holds: the snapshot stands alone.
            out.gaps.push(key.clone());
            reader = Reader::new(store.clone(), None, "");
            let _ = reader.next_batch(None);
        }
        out.cursor.set(&key, reader.after);
        let Ok(all) = crate::reconcile::sessions(env, &store) else {
            continue;
        };
        for s in all {
            let s = runtime::reconcile_hosted(env, &store, &s).unwrap_or(s);
            if shown(&s) {
                out.sessions.push(card(env, &store, &s));
            }
        }
    }
    remote_snapshot(env, from, &mut out);
    keep_recent_exited(&mut out.sessions);
    out
}

/// The harnesses' rate limits as the page shows them: `[{harness, known, reached, line}]`,
/// `line` as `spex sessions` prints it below its table.
pub fn limits(env: &Env) -> Value {
    let now = std::time::SystemTime::now();
    Value::Array(
        runtime::limits::current(env)
            .iter()
            .map(|l| {
                serde_json::json!({ "harness": l.harness, "known": l.known, "reached": l.reached,
                    "line": runtime::limits::line(l, now) })
            })
            .collect(),
    )
}

/// The configured remotes' kept journals and stores (`store::remotes`).
pub fn hosts(env: &Env) -> Vec<HostStore> {
    let names: Vec<String> = crate::remote::remotes(env)
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.name)
        .collect();
    store::remotes::all_hosts(&env.spex_home())
        .into_iter()
        .filter(|h| names.contains(&h.name))
        .collect()
}

/// Every remote session as last heard (stale while its host does not answer), and the hosts'
/// journal lines after `from`.
fn remote_snapshot(env: &Env, from: Option<&Cursor>, out: &mut Snapshot) {
    for host in hosts(env) {
        let key = host.stream_key();
        let state = host.state();
        if let Some(c) = from {
            out.events.extend(host.lines_after(c.after(&key)));
        }
        out.cursor.set(&key, state.last);
        out.sessions.extend(
            state
                .sessions
                .values()
                .map(|k| view::remote_session(&host.name, &key, k, &state.reach)),
        );
    }
}

/// One remote's journal as the board follows it.
struct Host {
    store: HostStore,
    reader: JournalReader,
    wd: Option<i32>,
}

/// Pushes what the host's journal took in since the board last looked: its lines, and the
/// sessions they changed (every one of the host's when its reachability changed: stale or not).
fn push_host(h: &mut Host, tx: &broadcast::Sender<Push>) {
    let lines = h.reader.next(&h.store);
    if lines.is_empty() {
        return;
    }
    let state = h.store.state();
    let key = h.store.stream_key();
    let every = lines
        .iter()
        .any(|l| l["kind"].as_str().is_some_and(|k| k.starts_with("host.")));
    let sessions = state
        .sessions
        .values()
        .filter(|k| {
            every
                || lines.iter().any(|l| {
                    l["session"].as_str() == Some(k.session.as_str())
                        && l["project"].as_str() == k.project.as_deref()
                })
        })
        .map(|k| view::remote_session(&h.store.name, &key, k, &state.reach))
        .collect();
    // Another machine's limits are that machine's account's: this board shows its own.
    let change = Change {
        key,
        lines,
        sessions,
        limits: None,
    };
    let _ = tx.send(Push::Change(Arc::new(change)));
}

/// Follows the remotes' journals that appear (their folders under `remotes/`).
fn add_hosts(fd: &impl rustix::fd::AsFd, env: &Env, hosts: &mut Vec<Host>) {
    for store in self::hosts(env) {
        if hosts.iter().any(|h| h.store.name == store.name) {
            continue;
        }
        let after = store.state().last;
        let wd = inotify::add_watch(
            fd,
            &store.dir,
            inotify::WatchFlags::MODIFY
                | inotify::WatchFlags::CREATE
                | inotify::WatchFlags::MOVED_TO,
        )
        .ok();
        hosts.push(Host {
            store,
            reader: JournalReader::new(after),
            wd,
        });
    }
}

/// How many exited sessions a snapshot carries (the latest changed): a store keeps thousands.
pub const EXITED_SHOWN: usize = 100;

/// Drops all but the [`EXITED_SHOWN`] latest exited sessions.
fn keep_recent_exited(sessions: &mut Vec<Value>) {
    let mut exited: Vec<String> = sessions
        .iter()
        .filter(|s| s["group"] == "exited")
        .filter_map(|s| s["updated_at"].as_str().map(str::to_owned))
        .collect();
    if exited.len() <= EXITED_SHOWN {
        return;
    }
    exited.sort_unstable_by(|a, b| b.cmp(a));
    let oldest_kept = exited[EXITED_SHOWN - 1].clone();
    let mut kept = 0;
    sessions.retain(|s| {
        if s["group"] != "exited" {
            return true;
        }
        let keep = kept < EXITED_SHOWN && s["updated_at"].as_str() >= Some(oldest_kept.as_str());
        kept += usize::from(keep);
        keep
    });
}

/// A stream line with the project it belongs to.
fn tag(store: &ProjectStore, mut line: Value) -> Value {
    line["project_key"] = store.stream_key().into();
    if let Some(id) = line["session"].as_str() {
        line["key"] = view::key_of(store, id).into();
    }
    line
}

struct Project {
    reader: Reader,
    wds: HashMap<i32, String>,
    sessions_wd: Option<i32>,
    dir_wd: Option<i32>,
}

/// Follows every project's stream until the process ends, pushing each change to `tx`.
pub fn follow(env: &Env, tx: &broadcast::Sender<Push>) -> anyhow::Result<()> {
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC).context("inotify_init")?;
    let root = env.spex_home().join("projects");
    let _ = crate::fsutil::create_private_dir_all(&root);
    let root_wd = inotify::add_watch(
        &fd,
        &root,
        inotify::WatchFlags::CREATE | inotify::WatchFlags::MOVED_TO,
    )
    .ok();
    let mut projects: Vec<Project> = Vec::new();
    let remotes_root = store::remotes::root(&env.spex_home());
    let _ = crate::fsutil::create_private_dir_all(&remotes_root);
    let remotes_wd = inotify::add_watch(&fd, &remotes_root, inotify::WatchFlags::CREATE).ok();
    let mut hosts: Vec<Host> = Vec::new();
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 8192];
    let mut first = true;
    loop {
        if first || root_wd.is_none() {
            add_new(&fd, env, &mut projects, !first);
            add_hosts(&fd, env, &mut hosts);
        }
        let mut changed: Vec<Option<Vec<String>>> = vec![Some(Vec::new()); projects.len()];
        if first {
            first = false;
        } else {
            // Blocks until the store changes.
            let mut reader = inotify::Reader::new(&fd, &mut buf);
            let mut new_dirs = false;
            loop {
                let ev = match reader.next() {
                    Ok(ev) => ev,
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(_) => break,
                };
                if Some(ev.wd()) == remotes_wd {
                    add_hosts(&fd, env, &mut hosts);
                } else if let Some(h) = hosts.iter_mut().find(|h| h.wd == Some(ev.wd())) {
                    push_host(h, tx);
                } else {
                    note(&ev, &projects, &mut changed, root_wd, &mut new_dirs);
                }
                if !reader.is_buffer_empty() {
                    continue;
                }
                break;
            }
            if new_dirs {
                add_new(&fd, env, &mut projects, true);
                changed.resize(projects.len(), None);
            }
        }
        for (i, p) in projects.iter_mut().enumerate() {
            if changed[i].as_ref().is_some_and(Vec::is_empty) {
                continue;
            }
            if changed[i].is_none() {
                watch(&fd, p);
            }
            let Ok(lines) = p.reader.next_batch(changed[i].as_deref()) else {
                continue;
            };
            if lines.is_empty() {
                continue;
            }
            let store = p.reader.store.clone();
            let mut ids: Vec<&str> = lines.iter().filter_map(|l| l["session"].as_str()).collect();
            ids.sort_unstable();
            ids.dedup();
            let sessions = ids
                .iter()
                .filter_map(|id| session_view(env, &store, id))
                .collect();
            // Read again only when a harness reported new limits (they cost a few file reads).
            let limits = lines
                .iter()
                .any(|l| l["kind"] == "limits.updated")
                .then(|| limits(env));
            let change = Change {
                key: store.stream_key(),
                lines: lines.into_iter().map(|l| tag(&store, l)).collect(),
                sessions,
                limits,
            };
            // No socket listening is no error: the next one starts from a snapshot.
            let _ = tx.send(Push::Change(Arc::new(change)));
        }
    }
}

/// Sorts one inotify event: a session that changed, a project's sessions folder, a new
/// project folder.
fn note(
    ev: &inotify::Event<'_>,
    projects: &[Project],
    changed: &mut [Option<Vec<String>>],
    root_wd: Option<i32>,
    new_dirs: &mut bool,
) {
    let wd = ev.wd();
    if Some(wd) == root_wd {
        *new_dirs = true;
        return;
    }
    for (i, p) in projects.iter().enumerate() {
        if let Some(id) = p.wds.get(&wd) {
            if let Some(list) = changed[i].as_mut()
                && !list.contains(id)
            {
                list.push(id.clone());
            }
        } else if Some(wd) == p.sessions_wd
            || (Some(wd) == p.dir_wd && ev.file_name().is_some_and(|n| n.to_bytes() == b"sessions"))
        {
            changed[i] = None;
        }
    }
}

/// Adds the projects not followed yet: from their stream's end at the board's start, from
/// their beginning when they appear later (everything in them is new).
fn add_new(fd: &impl rustix::fd::AsFd, env: &Env, projects: &mut Vec<Project>, later: bool) {
    for store in store::all_projects(&env.spex_home()) {
        if projects.iter().any(|p| p.reader.store.dir == store.dir) {
            continue;
        }
        let mut reader = Reader::new(store, later.then_some(0), "");
        if !later {
            let _ = reader.next_batch(None);
        }
        let mut p = Project {
            reader,
            wds: HashMap::new(),
            sessions_wd: None,
            dir_wd: None,
        };
        watch(fd, &mut p);
        projects.push(p);
    }
}

/// Watches the project's folder, its sessions folder and every session folder (a record is
/// replaced by rename after its events are appended: the rename is the commit).
fn watch(fd: &impl rustix::fd::AsFd, p: &mut Project) {
    let dir = p.reader.store.dir.clone();
    if p.dir_wd.is_none() {
        p.dir_wd = inotify::add_watch(fd, &dir, inotify::WatchFlags::CREATE).ok();
    }
    if p.sessions_wd.is_none() {
        p.sessions_wd = inotify::add_watch(
            fd,
            p.reader.store.sessions_dir(),
            inotify::WatchFlags::CREATE | inotify::WatchFlags::MOVED_TO,
        )
        .ok();
    }
    for id in p.reader.store.session_ids() {
        if p.wds.values().any(|w| *w == id) {
            continue;
        }
        if let Ok(wd) = inotify::add_watch(
            fd,
            p.reader.store.session_dir(&id),
            inotify::WatchFlags::MOVED_TO | inotify::WatchFlags::CLOSE_WRITE,
        ) {
            p.wds.insert(wd, id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_keeps_the_latest_exited_sessions_and_every_other() {
        let mut all: Vec<Value> = (0..EXITED_SHOWN + 30)
            .map(|i| serde_json::json!({"group": "exited", "updated_at": format!("2026-11-27T10:{:02}:{:02}Z", i / 60, i % 60)}))
            .collect();
        all.push(serde_json::json!({"group": "working", "updated_at": "2020-01-01T00:00:00Z"}));
        keep_recent_exited(&mut all);
        assert_eq!(all.len(), EXITED_SHOWN + 1);
        assert!(all.iter().any(|s| s["group"] == "working"));
        let oldest = all
            .iter()
            .filter(|s| s["group"] == "exited")
            .filter_map(|s| s["updated_at"].as_str())
            .min()
            .unwrap();
        assert_eq!(oldest, "2026-11-27T10:00:30Z");
    }
}
