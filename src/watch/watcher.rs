//! The watcher's loop: what it watches (the projects folder, each project's sessions folder and
//! session folders, the evidence folders adapters name for each live session, a pidfd per live
//! session process or host), and what it does when one of them wakes it: fold the projects they
//! belong to (`reconcile`, the hosts, turn budgets) and take what the records committed into the
//! project's stream. A timer only for a real deadline (a budget, an adapter's settle time).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use rustix::event::{PollFd, PollFlags};
use rustix::fs::inotify::{self, ReadFlags, WatchFlags};

use crate::adapters;
use crate::env::Env;
use crate::log::log;
use crate::reconcile;
use crate::runtime;
use crate::seam::evidence::alive;
use crate::store::session::{ProcessId, Session, Status};
use crate::store::{self, ProjectStore};

/// Past a deadline by this much before looking, so what the deadline waits for holds then (a
/// bound the evidence compares with `>`, a clock read a moment earlier).
const SLACK: Duration = Duration::from_millis(100);

/// Evidence folders: files renamed, written, created or removed there.
fn evidence_flags() -> WatchFlags {
    WatchFlags::MOVED_TO | WatchFlags::CLOSE_WRITE | WatchFlags::CREATE | WatchFlags::DELETE
}

struct Project {
    store: ProjectStore,
    /// The project's folder, watched only until its `sessions` folder appears (the stream's
    /// own files are written in it).
    dir_wd: Option<i32>,
    sessions_wd: Option<i32>,
    /// Session folders (records are replaced by rename: the rename is the commit).
    session_wds: HashMap<i32, String>,
    /// What its live sessions' adapters name as evidence, and their processes.
    evidence: Vec<PathBuf>,
    pids: Vec<ProcessId>,
    /// When a live session next needs a look with nothing else to wake the watcher.
    next: Option<SystemTime>,
    /// Each session's state as last seen (for the log).
    seen: HashMap<String, String>,
}

pub struct Watcher<'a> {
    env: &'a Env,
    fd: OwnedFd,
    projects_wd: Option<i32>,
    projects: Vec<Project>,
    /// Evidence folders watched: path -> watch descriptor.
    evidence: HashMap<PathBuf, i32>,
    pidfds: HashMap<ProcessId, OwnedFd>,
    /// Processes seen ending (never watched again: a zombie's pidfd stays readable).
    ended: HashSet<ProcessId>,
    book: runtime::budget::Book,
}

impl<'a> Watcher<'a> {
    pub fn new(env: &'a Env) -> anyhow::Result<Watcher<'a>> {
        let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)
            .context("inotify_init")?;
        let root = env.spex_home().join("projects");
        crate::fsutil::create_private_dir_all(&root)?;
        let projects_wd =
            inotify::add_watch(&fd, &root, WatchFlags::CREATE | WatchFlags::MOVED_TO).ok();
        Ok(Watcher {
            env,
            fd,
            projects_wd,
            projects: Vec::new(),
            evidence: HashMap::new(),
            pidfds: HashMap::new(),
            ended: HashSet::new(),
            book: runtime::budget::Book::default(),
        })
    }

    /// Folds every project, then waits for what changes, until `stop` is readable.
    pub fn run(mut self, stop: Option<&UnixStream>) -> anyhow::Result<()> {
        self.add_new_projects();
        loop {
            let now = SystemTime::now();
            let timeout = self
                .projects
                .iter()
                .filter_map(|p| p.next)
                .min()
                .map(|at| at.duration_since(now).unwrap_or_default() + SLACK)
                .and_then(|d| rustix::event::Timespec::try_from(d).ok());
            let pids: Vec<ProcessId> = self.pidfds.keys().copied().collect();
            let mut fds = vec![PollFd::new(&self.fd, PollFlags::IN)];
            if let Some(s) = stop {
                fds.push(PollFd::new(s, PollFlags::IN));
            }
            let first_pid = fds.len();
            fds.extend(
                pids.iter()
                    .map(|p| PollFd::new(&self.pidfds[p], PollFlags::IN)),
            );
            match rustix::event::poll(&mut fds, timeout.as_ref()) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e).context("poll"),
            }
            if stop.is_some() && !fds[1].revents().is_empty() {
                log!("watcher: stopped");
                return Ok(());
            }
            let gone: Vec<ProcessId> = fds[first_pid..]
                .iter()
                .zip(&pids)
                .filter(|(f, _)| !f.revents().is_empty())
                .map(|(_, p)| *p)
                .collect();
            drop(fds);
            let mut due: BTreeSet<usize> = BTreeSet::new();
            for p in gone {
                self.pidfds.remove(&p);
                self.ended.insert(p);
                due.extend(self.owners_of_pid(p));
            }
            let now = SystemTime::now();
            due.extend(
                self.projects
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| p.next.is_some_and(|at| at <= now))
                    .map(|(i, _)| i),
            );
            let rescan = self.drain(&mut due);
            if rescan {
                self.add_new_projects();
            }
            for i in due {
                self.fold(i);
            }
            self.settle_watches();
        }
    }

    /// Reads every queued inotify event; the projects they concern go into `due`. Returns
    /// whether the projects folder changed (a new project).
    fn drain(&mut self, due: &mut BTreeSet<usize>) -> bool {
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 8192];
        let mut rescan = false;
        let mut reader = inotify::Reader::new(&self.fd, &mut buf);
        while let Ok(ev) = reader.next() {
            let wd = ev.wd();
            if ev.events().contains(ReadFlags::QUEUE_OVERFLOW) {
                // Events were lost: look at everything.
                due.extend(0..self.projects.len());
                rescan = true;
                continue;
            }
            let ignored = ev.events().contains(ReadFlags::IGNORED);
            if Some(wd) == self.projects_wd {
                if ignored {
                    // The folder was removed (the store wiped): watched again when it is back.
                    self.projects_wd = None;
                }
                rescan = true;
                continue;
            }
            let name = ev.file_name().map(|n| n.to_bytes().to_vec());
            for (i, p) in self.projects.iter_mut().enumerate() {
                if Some(wd) == p.dir_wd {
                    if ignored {
                        p.dir_wd = None;
                    }
                    if name.as_deref() == Some(b"sessions") || ignored {
                        due.insert(i);
                    }
                } else if Some(wd) == p.sessions_wd {
                    if ignored {
                        p.sessions_wd = None;
                    }
                    due.insert(i);
                } else if p.session_wds.contains_key(&wd) {
                    if ignored {
                        p.session_wds.remove(&wd);
                    }
                    // The record, or the host's record of itself (its process to watch).
                    if ignored || matches!(name.as_deref(), Some(b"session.json" | b"host.json")) {
                        due.insert(i);
                    }
                }
            }
            if let Some(path) = self
                .evidence
                .iter()
                .find(|(_, w)| **w == wd)
                .map(|(p, _)| p.clone())
            {
                if ignored {
                    self.evidence.remove(&path);
                }
                due.extend(
                    self.projects
                        .iter()
                        .enumerate()
                        .filter(|(_, p)| p.evidence.contains(&path))
                        .map(|(i, _)| i),
                );
            }
        }
        rescan
    }

    fn owners_of_pid(&self, pid: ProcessId) -> Vec<usize> {
        self.projects
            .iter()
            .enumerate()
            .filter(|(_, p)| p.pids.contains(&pid))
            .map(|(i, _)| i)
            .collect()
    }

    /// Picks up project folders not known yet, and folds each.
    fn add_new_projects(&mut self) {
        if self.projects_wd.is_none() {
            let root = self.env.spex_home().join("projects");
            let _ = crate::fsutil::create_private_dir_all(&root);
            self.projects_wd =
                inotify::add_watch(&self.fd, &root, WatchFlags::CREATE | WatchFlags::MOVED_TO).ok();
        }
        for store in store::all_projects(&self.env.spex_home()) {
            if self.projects.iter().any(|p| p.store.dir == store.dir) {
                continue;
            }
            self.projects.push(Project {
                store,
                dir_wd: None,
                sessions_wd: None,
                session_wds: HashMap::new(),
                evidence: Vec::new(),
                pids: Vec::new(),
                next: None,
                seen: HashMap::new(),
            });
            self.fold(self.projects.len() - 1);
        }
        self.settle_watches();
    }

    /// [`Self::sync_watches`], then a second look at the projects of every evidence folder
    /// watched only now (it may have changed between their fold and the watch).
    fn settle_watches(&mut self) {
        for _ in 0..3 {
            let fresh = self.sync_watches();
            if fresh.is_empty() {
                return;
            }
            let due: Vec<usize> = (0..self.projects.len())
                .filter(|&i| fresh.iter().any(|f| self.projects[i].evidence.contains(f)))
                .collect();
            for i in due {
                self.fold(i);
            }
        }
    }

    /// Folds project `i`'s evidence into its records, judges budgets no spex process owns, takes
    /// the records' new events into its stream, and notes what to watch for it next.
    fn fold(&mut self, i: usize) {
        let env = self.env;
        let store = self.projects[i].store.clone();
        let sessions = match reconcile::sessions(env, &store) {
            Ok(all) => all,
            Err(e) => {
                log!("watcher: `{}`: {e}", store.dir.display());
                Vec::new()
            }
        };
        let sessions: Vec<Session> = sessions
            .into_iter()
            .map(|s| {
                // Only a host that no longer runs (or never came up) is news; asking a live
                // host over its socket at every wake would wake it for nothing.
                let host_alive = runtime::host_record(&store, &s.id).is_some_and(|r| alive(r.host));
                if host_alive {
                    return s;
                }
                runtime::reconcile_hosted(env, &store, &s).unwrap_or(s)
            })
            .map(|s| runtime::judge::judge(env, &store, s, &mut self.book))
            .collect();
        if let Err(e) = store::stream::take_in(&store, None) {
            log!("watcher: `{}`: the stream: {e}", store.dir.display());
        }
        let p = &mut self.projects[i];
        for s in &sessions {
            let state = state_of(s);
            if p.seen.get(&s.id) != Some(&state) {
                if p.seen.contains_key(&s.id) || s.status != Status::Exited {
                    log!("watcher: {} ({}): {state}", s.label(), s.harness);
                }
                p.seen.insert(s.id.clone(), state);
            }
        }
        if self.watch_project(i, &sessions) {
            // A session folder watched only now may have got its record before the watch:
            // looked at again (its later records wake this watcher).
            self.fold(i);
        }
    }

    /// Watches project `i`'s folders and notes its live sessions' evidence, processes and next
    /// deadline. Returns whether it began watching a session folder whose record this fold did
    /// not see.
    fn watch_project(&mut self, i: usize, sessions: &[Session]) -> bool {
        let (env, fd) = (self.env, &self.fd);
        let p = &mut self.projects[i];
        let sessions_dir = p.store.sessions_dir();
        if p.sessions_wd.is_none() {
            p.sessions_wd =
                inotify::add_watch(fd, &sessions_dir, WatchFlags::CREATE | WatchFlags::MOVED_TO)
                    .ok();
        }
        match (p.sessions_wd, p.dir_wd) {
            (Some(_), Some(wd)) => {
                let _ = inotify::remove_watch(fd, wd);
                p.dir_wd = None;
            }
            (None, None) => {
                p.dir_wd = inotify::add_watch(fd, &p.store.dir, WatchFlags::CREATE).ok();
                // Made between the two watches: its creation was seen by neither.
                p.sessions_wd = inotify::add_watch(
                    fd,
                    &sessions_dir,
                    WatchFlags::CREATE | WatchFlags::MOVED_TO,
                )
                .ok();
            }
            _ => {}
        }
        // Every session folder, with a record yet or not (its first record is renamed into
        // it after the folder is made).
        let folders = p.store.session_ids();
        p.session_wds.retain(|wd, id| {
            let keep = folders.contains(id);
            if !keep {
                let _ = inotify::remove_watch(fd, *wd);
            }
            keep
        });
        let mut unseen = false;
        for id in &folders {
            if p.session_wds.values().any(|w| w == id) {
                continue;
            }
            if let Ok(wd) = inotify::add_watch(fd, p.store.session_dir(id), WatchFlags::MOVED_TO) {
                p.session_wds.insert(wd, id.clone());
                unseen |= !sessions.iter().any(|s| s.id == *id);
            }
        }
        let now = SystemTime::now();
        let (mut evidence, mut pids, mut next) = (Vec::new(), Vec::new(), None::<SystemTime>);
        for s in sessions.iter().filter(|s| s.status != Status::Exited) {
            let observer = adapters::lookup(&s.harness).and_then(crate::seam::Harness::evidence);
            if let Some(o) = observer {
                evidence.extend(o.evidence_dirs(env, s));
            }
            pids.extend(s.process_id());
            if let Some(r) = runtime::host_record(&p.store, &s.id) {
                pids.push(r.host);
            }
            let budget = runtime::judge::deadline(env, s, &mut self.book)
                .filter(|_| !runtime::judge::owned(env, &p.store, s))
                .map(|at| now + at.saturating_duration_since(Instant::now()));
            let look = observer.and_then(|o| o.next_look(s));
            // A deadline already past was looked at in this fold: nothing waits on it now.
            for at in budget.into_iter().chain(look).filter(|at| *at > now) {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        evidence.sort();
        evidence.dedup();
        p.evidence = evidence;
        p.pids = pids;
        p.next = next;
        unseen
    }

    /// Watches the union of every project's evidence folders and processes (and no more).
    /// Returns the folders watched only now.
    fn sync_watches(&mut self) -> Vec<PathBuf> {
        let want: HashSet<&PathBuf> = self.projects.iter().flat_map(|p| &p.evidence).collect();
        let fd = &self.fd;
        self.evidence.retain(|path, wd| {
            let keep = want.contains(path);
            if !keep {
                let _ = inotify::remove_watch(fd, *wd);
            }
            keep
        });
        let mut fresh = Vec::new();
        for path in want {
            if !self.evidence.contains_key(path)
                // A folder that does not exist yet is picked up on a later fold (the hook that
                // makes the session live writes its record).
                && let Ok(wd) = inotify::add_watch(fd, path, evidence_flags())
            {
                self.evidence.insert(path.clone(), wd);
                fresh.push(path.clone());
            }
        }
        let pids: HashSet<ProcessId> = self
            .projects
            .iter()
            .flat_map(|p| p.pids.iter().copied())
            .collect();
        self.pidfds.retain(|p, _| pids.contains(p));
        // A process no live session names any more is forgotten (the set stays small).
        self.ended.retain(|p| pids.contains(p));
        for p in pids {
            if self.pidfds.contains_key(&p) || self.ended.contains(&p) {
                continue;
            }
            match pidfd(p) {
                Some(fd) => {
                    self.pidfds.insert(p, fd);
                }
                // Gone already: the fold that named it is followed by one that sees it gone.
                None => {
                    self.ended.insert(p);
                }
            }
        }
        fresh
    }
}

/// A pidfd of process `p` (readable once it ends), when it still runs as recorded.
fn pidfd(p: ProcessId) -> Option<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(i32::try_from(p.pid).ok()?)?;
    let fd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()?;
    // Opened first, checked after: the pid now names the process the record means, or not.
    alive(p).then_some(fd)
}

/// A session's state in a few words (for the log).
fn state_of(s: &Session) -> String {
    let mut out = s.status.as_str().to_owned();
    if let Some(t) = &s.turn {
        out.push_str(&format!(", turn {}", t.state.as_str()));
    }
    if let Some(a) = &s.attention {
        out.push_str(&format!(", attention {}", a.reason.as_str()));
    }
    out
}
