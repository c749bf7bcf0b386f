//! The notifier: one sender per user that follows every project's event stream and tells a
//! person, through the channels they configured (`notify` key), that a session needs them
//! (a permission, a question, a plan, a failed turn), finished a turn, or exited. It runs the
//! watcher in its own process (`crate::watch::spawn`), so the stream holds what no hook says.
//!
//! Once, and only when it matters: an attention is announced after the dwell (default 5 s),
//! only if it is still open then and nobody looks at its session (an attached `spex attach`
//! terminal, the board's viewing marker: `state::viewing_file`).
//! Before anything goes out the notification's key is recorded as sent, under a lock, in
//! `notify/sent.json`: delivery is AT MOST ONCE (a crash between the record and the channel
//! loses that one notification rather than ever sending it twice; spam is the failure people
//! turn notifications off for). The stream cursor is saved only up to the oldest event still
//! waiting out its dwell, so a restart re-reads those and the sent record skips the rest.

pub mod channels;
pub mod desktop;
pub mod links;
pub mod message;
pub mod remote;
pub mod state;

use std::collections::HashMap;
use std::io::Seek as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use rustix::fs::inotify;
use serde_json::Value;

use crate::config::notify::Notify;
use crate::env::Env;
use crate::log::log;
use crate::store::stream::{Cursor, Reader};
use crate::store::{self, ProjectStore};
use message::Message;

/// Events older than this when first read are history, not news: never announced.
const FRESH: Duration = Duration::from_mins(10);

/// The sender's lock (its pid inside).
pub fn lock_path(env: &Env) -> PathBuf {
    state::dir(env).join("sender.lock")
}

/// The pid of the sender that holds the lock, when one does.
pub fn holder(env: &Env) -> Option<u32> {
    let path = lock_path(env);
    let file = fs_err::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .ok()?;
    let mut lock = fd_lock::RwLock::new(file.into_parts().0);
    match lock.try_write() {
        Ok(_) => None,
        Err(_) => fs_err::read_to_string(&path).ok()?.trim().parse().ok(),
    }
}

/// Another sender runs: this one exits, naming it.
#[derive(Debug, thiserror::Error)]
#[error(
    "another notifier sends already (pid {pid}): one sender per user, so each notification goes out once"
)]
pub struct AlreadyRunning {
    pub pid: String,
}

impl crate::hint::Hint for AlreadyRunning {
    fn hint(&self) -> Option<String> {
        Some(
            "`spex notify --status` shows it; stop it first to run another in the foreground"
                .into(),
        )
    }
}

/// One project followed.
struct Project {
    reader: Reader,
    key: String,
    wds: HashMap<i32, String>,
    sessions_wd: Option<i32>,
}

/// Something waiting out its dwell.
struct Pending {
    due: Instant,
    /// Its stream position (the cursor is not saved past it).
    pos: u64,
    key: String,
    project: usize,
    session: String,
    what: What,
}

enum What {
    Attention(String),
    TurnEnd(Value),
    Exited(Value),
    /// A rate-limit window rose past a threshold of `notify.limits`: what to say.
    Limits(String),
}

/// What a `limits.updated` line says when one of its windows rose past a threshold
/// (`5h window at 80%: 85% used, resets in 1h 12m`), `None` when none did.
fn limits_crossed(line: &Value, thresholds: &[u8]) -> Option<String> {
    use crate::store::limits::{Window, crossed};
    let now: Vec<Window> = serde_json::from_value(line["windows"].clone()).ok()?;
    let was: Option<Vec<Window>> = serde_json::from_value(line["was"].clone()).ok();
    let at = SystemTime::now();
    let parts: Vec<String> = crossed(was.as_deref(), &now, thresholds)
        .iter()
        .map(|(w, t)| {
            format!(
                "{} window past {t}%: {}",
                w.label(),
                crate::runtime::limits::window_text(w, at)
            )
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The sender's lock file, opened (made when missing).
#[expect(
    clippy::disallowed_types,
    reason = "fd_lock locks the std file inside fs_err's: named here, opened through fs_err"
)]
fn open_lock(env: &Env) -> anyhow::Result<fd_lock::RwLock<std::fs::File>> {
    crate::fsutil::create_private_dir_all(&state::dir(env))?;
    let file = {
        use fs_err::os::unix::fs::OpenOptionsExt as _;
        fs_err::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(crate::fsutil::PRIVATE_FILE)
            .open(lock_path(env))?
    };
    Ok(fd_lock::RwLock::new(file.into_parts().0))
}

/// Writes this process's pid in the held lock and says which process it is
/// (`state::SenderInfo`).
#[expect(
    clippy::disallowed_types,
    reason = "fd_lock locks the std file inside fs_err's: named here, opened through fs_err"
)]
fn claim_lock(env: &Env, file: &mut std::fs::File, by: &str) -> anyhow::Result<()> {
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(format!("{}\n", std::process::id()).as_bytes())?;
    if let Err(e) = state::save_sender(env, by) {
        log!("notify: cannot record which process sends: {e}");
    }
    Ok(())
}

/// Runs the sender in the foreground: takes the per-user lock (refusing when another sender
/// holds it), starts the watcher in this process, then follows every project until killed.
pub fn run(env: &Env, cfg: &Notify) -> anyhow::Result<()> {
    let path = lock_path(env);
    let mut lock = open_lock(env)?;
    let mut guard = match lock.try_write() {
        Ok(g) => g,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
            let pid = fs_err::read_to_string(&path).unwrap_or_default();
            return Err(AlreadyRunning {
                pid: pid.trim().to_owned(),
            }
            .into());
        }
        Err(e) => return Err(crate::fsutil::named(&e, "lock", &path).into()),
    };
    claim_lock(env, &mut guard, "spex notify --watch")?;
    let _watcher = crate::watch::spawn(env.clone());
    send(env, cfg)
}

/// Runs the sender in a thread of this long-lived process (`by`: which one, e.g. `spex
/// board`), beside the watcher the process runs already: in standby on the lock while another
/// sender holds it (blocked in the kernel, no wakeups), taking over when that one ends.
pub fn spawn(env: Env, cfg: Notify, by: &'static str) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("spex-notify".into())
        .spawn(move || {
            if let Err(e) = standby(&env, &cfg, by) {
                log!("notify: the sender stopped: {e:#}");
            }
        })
        .expect("a thread starts")
}

fn standby(env: &Env, cfg: &Notify, by: &str) -> anyhow::Result<()> {
    let path = lock_path(env);
    let mut lock = open_lock(env)?;
    if let Some(pid) = holder(env) {
        log!("notify: standby: another sender sends (pid {pid}); taking over when it ends");
    }
    let mut guard = lock
        .write()
        .map_err(|e| crate::fsutil::named(&e, "lock", &path))?;
    claim_lock(env, &mut guard, by)?;
    send(env, cfg)
}

/// Follows every project and sends, this process holding the lock.
fn send(env: &Env, cfg: &Notify) -> anyhow::Result<()> {
    log!(
        "notify: sending for every project under `{}` (pid {})",
        env.spex_home().display(),
        std::process::id()
    );
    let outs = channels::start(env, channels::configured(env, cfg));
    Sender::new(env, cfg, outs).follow()
}

struct Sender<'a> {
    env: &'a Env,
    cfg: &'a Notify,
    outs: Vec<mpsc::Sender<Message>>,
    projects: Vec<Project>,
    pending: Vec<Pending>,
    saved: Option<Cursor>,
    /// Other machines' attentions (`remote`).
    remotes: remote::Remotes,
}

impl<'a> Sender<'a> {
    fn new(env: &'a Env, cfg: &'a Notify, outs: Vec<mpsc::Sender<Message>>) -> Self {
        Sender {
            env,
            cfg,
            outs,
            projects: Vec::new(),
            pending: Vec::new(),
            saved: state::cursor(env),
            remotes: remote::Remotes::default(),
        }
    }

    fn add_project(&mut self, store: ProjectStore, fd: &impl rustix::fd::AsFd, appeared: bool) {
        let key = store.stream_key();
        // A first run starts at the streams' ends; a project that appeared since, from its
        // beginning.
        let after = match &self.saved {
            Some(c) if c.0.contains_key(&key) => Some(c.after(&key)),
            Some(_) => Some(0),
            None if appeared => Some(0),
            None => None,
        };
        let mut p = Project {
            reader: Reader::new(store, after, ""),
            key,
            wds: HashMap::new(),
            sessions_wd: None,
        };
        watch(fd, &mut p);
        self.projects.push(p);
    }

    fn follow(mut self) -> anyhow::Result<()> {
        let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)
            .context("inotify_init")?;
        let projects_dir = self.env.spex_home().join("projects");
        let _ = fs_err::create_dir_all(&projects_dir);
        let projects_wd = inotify::add_watch(
            &fd,
            &projects_dir,
            inotify::WatchFlags::CREATE | inotify::WatchFlags::MOVED_TO,
        )
        .ok();
        for s in store::all_projects(&self.env.spex_home()) {
            self.add_project(s, &fd, false);
        }
        if self.saved.is_none() {
            self.open_at_first_start();
        }
        let remotes_root = store::remotes::root(&self.env.spex_home());
        let _ = crate::fsutil::create_private_dir_all(&remotes_root);
        let remotes_wd = inotify::add_watch(&fd, &remotes_root, inotify::WatchFlags::CREATE).ok();
        self.add_remotes(&fd);
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 8192];
        loop {
            self.read_all(&fd);
            self.fire_due();
            self.save_cursor();
            self.remotes
                .read(self.cfg.dwell, FRESH, |k| state::was_sent(self.env, k));
            for (key, pkey, s) in self.remotes.due() {
                let Some(a) = s.attention.as_ref() else {
                    continue;
                };
                let mut m = message::attention(&pkey, &s, a);
                m.remote = true;
                self.add_links(&mut m, &pkey, &s, a);
                self.send(&key, &m);
            }
            // Woken by the store, or by the next dwell's end: no timer otherwise.
            let next = self
                .pending
                .iter()
                .map(|p| p.due)
                .chain(self.remotes.next_due())
                .map(|due| due.saturating_duration_since(Instant::now()))
                .min();
            let timeout = next.and_then(|d| rustix::event::Timespec::try_from(d).ok());
            let mut fds = [rustix::event::PollFd::new(
                &fd,
                rustix::event::PollFlags::IN,
            )];
            match rustix::event::poll(&mut fds, timeout.as_ref()) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e).context("poll"),
            }
            let mut new_dirs = false;
            let mut reader = inotify::Reader::new(&fd, &mut buf);
            let mut new_remotes = false;
            while let Ok(ev) = reader.next() {
                if Some(ev.wd()) == projects_wd {
                    new_dirs = true;
                }
                new_remotes |= Some(ev.wd()) == remotes_wd;
            }
            if new_remotes {
                self.add_remotes(&fd);
            }
            if new_dirs {
                let known: Vec<PathBuf> = self
                    .projects
                    .iter()
                    .map(|p| p.reader.store.dir.clone())
                    .collect();
                for s in store::all_projects(&self.env.spex_home()) {
                    if !known.contains(&s.dir) {
                        self.add_project(s, &fd, true);
                    }
                }
            }
            for p in &mut self.projects {
                watch(&fd, p);
            }
        }
    }

    /// A first start reads each stream from its end, so an attention opened before it would
    /// never be announced: those still open are noted as if just read, each due at the end of
    /// its own dwell and sent once (the sent record), whatever their age (a live session still
    /// waiting for a person is news however long it waited).
    fn open_at_first_start(&mut self) {
        let on = |e: &str| self.cfg.on.iter().any(|o| o == e);
        let mut found = Vec::new();
        for (i, p) in self.projects.iter().enumerate() {
            let Ok(sessions) = crate::reconcile::sessions(self.env, &p.reader.store) else {
                continue;
            };
            // An ended session's left-over attention (a failed last turn) waits for no one.
            for s in sessions
                .into_iter()
                .filter(|s| s.status != store::session::Status::Exited)
            {
                let Some(a) = &s.attention else {
                    continue;
                };
                let Some(id) = a.id.clone() else {
                    continue;
                };
                let failed = a.reason == store::session::AttentionKind::TurnFailed;
                if !on(if failed { "failed" } else { "needs_attention" }) {
                    continue;
                }
                let key = format!("{}/{}/{id}", p.key, s.id);
                if state::was_sent(self.env, &key) {
                    continue;
                }
                let age = store::parse_time(&a.since)
                    .and_then(|t| t.elapsed().ok())
                    .unwrap_or_default();
                found.push(Pending {
                    due: Instant::now() + self.cfg.dwell.saturating_sub(age),
                    // Before nothing the stream holds: the cursor is not held back for it.
                    pos: u64::MAX,
                    key,
                    project: i,
                    session: s.id.clone(),
                    what: What::Attention(id),
                });
            }
        }
        if !found.is_empty() {
            log!(
                "notify: first start: {} attention(s) already open",
                found.len()
            );
        }
        self.pending.extend(found);
    }

    /// Follows the attentions of the configured remotes' journals not followed yet.
    fn add_remotes(&mut self, fd: &impl rustix::fd::AsFd) {
        let names: Vec<String> = crate::remote::remotes(self.env)
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.name)
            .collect();
        self.remotes.add(&self.env.spex_home(), &names, fd);
    }

    fn read_all(&mut self, _fd: &impl rustix::fd::AsFd) {
        for i in 0..self.projects.len() {
            let lines = match self.projects[i].reader.next_batch(None) {
                Ok(l) => l,
                Err(e) => {
                    log!(
                        "notify: reading `{}`: {e}",
                        self.projects[i].reader.store.dir.display()
                    );
                    // A cursor older than the stream keeps: go on from its end.
                    let store = self.projects[i].reader.store.clone();
                    self.projects[i].reader = Reader::new(store, None, "");
                    let _ = self.projects[i].reader.next_batch(None);
                    continue;
                }
            };
            for line in lines {
                self.take(i, &line);
            }
        }
    }

    /// Notes what a stream line may announce.
    fn take(&mut self, i: usize, line: &Value) {
        let (Some(pos), Some(session), Some(kind)) = (
            line["pos"].as_u64(),
            line["session"].as_str(),
            line["kind"].as_str(),
        ) else {
            return;
        };
        let at = line["time"]
            .as_str()
            .and_then(store::parse_time)
            .unwrap_or_else(SystemTime::now);
        let age = at.elapsed().unwrap_or_default();
        if age > FRESH {
            return;
        }
        let on = |e: &str| self.cfg.on.iter().any(|o| o == e);
        let pkey = self.projects[i].key.clone();
        let seq = line["seq"].as_u64().unwrap_or(pos);
        let what = match kind {
            "attention.opened" => {
                let failed = line["reason"] == "turn_failed";
                if !(if failed {
                    on("failed")
                } else {
                    on("needs_attention")
                }) {
                    return;
                }
                let Some(a) = line["attention"].as_str() else {
                    return;
                };
                What::Attention(a.to_owned())
            }
            "attention.closed" => {
                // Closed before its dwell ended: never sent.
                let a = line["attention"].as_str().unwrap_or_default();
                self.pending.retain(|p| {
                    !(p.project == i
                        && p.session == session
                        && matches!(&p.what, What::Attention(x) if x == a))
                });
                if state::was_sent(self.env, &format!("{pkey}/{session}/{a}")) {
                    self.fan_out(&Message {
                        event: channels::RETRACT.into(),
                        project_key: pkey,
                        session: session.to_owned(),
                        attention: Some(a.to_owned()),
                        ..Message::default()
                    });
                }
                return;
            }
            "turn.completed" if on("turn_end") => What::TurnEnd(line.clone()),
            "session.exited" if on("exited") => What::Exited(line.clone()),
            "limits.updated" if !self.cfg.limits.is_empty() => {
                let Some(text) = limits_crossed(line, &self.cfg.limits) else {
                    return;
                };
                What::Limits(text)
            }
            _ => return,
        };
        let key = match &what {
            What::Attention(a) => format!("{pkey}/{session}/{a}"),
            _ => format!("{pkey}/{session}/{seq}"),
        };
        if state::was_sent(self.env, &key) {
            return;
        }
        let due = Instant::now() + self.cfg.dwell.saturating_sub(age);
        self.pending.push(Pending {
            due,
            pos,
            key,
            project: i,
            session: session.to_owned(),
            what,
        });
    }

    /// Sends what waited out its dwell; turn ends due together become one summary.
    fn fire_due(&mut self) {
        let now = Instant::now();
        if !self.pending.iter().any(|p| p.due <= now) {
            return;
        }
        // Turn ends go together once the first of them is due (a burst is one message).
        let turn_due = self
            .pending
            .iter()
            .any(|p| p.due <= now && matches!(p.what, What::TurnEnd(_)));
        let (due, rest): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| p.due <= now || (turn_due && matches!(p.what, What::TurnEnd(_))));
        self.pending = rest;
        let mut turn_ends = Vec::new();
        for p in due {
            let store = self.projects[p.project].reader.store.clone();
            // The record with its evidence folded in, as `spex show` reads it: an attention a
            // person closed where no hook fires (an Esc in their own terminal) reads closed
            // even before the watcher got to it, and a session only a hook saw gets its handle.
            let Ok(s) = crate::reconcile::session(self.env, &store, &p.session) else {
                continue;
            };
            if self.looked_at(&store, &s) {
                continue;
            }
            let pkey = &self.projects[p.project].key;
            let m = match &p.what {
                What::Attention(id) => {
                    let Some(a) = s.attention.as_ref().filter(|a| a.id.as_deref() == Some(id))
                    else {
                        continue;
                    };
                    let mut m = message::attention(pkey, &s, a);
                    self.add_links(&mut m, pkey, &s, a);
                    m
                }
                What::TurnEnd(line) => {
                    turn_ends.push((
                        p.key.clone(),
                        message::lifecycle("turn_end", pkey, &s, line),
                    ));
                    continue;
                }
                What::Exited(line) => message::lifecycle("exited", pkey, &s, line),
                What::Limits(text) => message::limits(pkey, &s, text),
            };
            self.send(&p.key, &m);
        }
        match turn_ends.len() {
            0 => {}
            1 => {
                let (k, m) = turn_ends.remove(0);
                self.send(&k, &m);
            }
            _ => {
                let mut parts = Vec::new();
                for (k, m) in turn_ends {
                    // Each turn end is claimed: a restart does not send them again one by one.
                    if state::claim(self.env, &k).unwrap_or(false) {
                        parts.push(m);
                    }
                }
                if !parts.is_empty() {
                    let m = if parts.len() == 1 {
                        parts.remove(0)
                    } else {
                        message::summary(&parts)
                    };
                    self.fan_out(&m);
                }
            }
        }
    }

    /// Whether a person looks at session `s` now: a `spex attach` terminal on its host, or the
    /// board's page. Not the harness's own client (`attended`): a TUI running in the person's
    /// own terminal says nothing of whether they are at it, and those sessions are announced.
    fn looked_at(&self, store: &ProjectStore, s: &store::session::Session) -> bool {
        store.attached(&s.id) || state::viewed(self.env, &s.id)
    }

    fn add_links(
        &self,
        m: &mut Message,
        pkey: &str,
        s: &store::session::Session,
        a: &store::session::Attention,
    ) {
        let Some(public) = &self.cfg.public_url else {
            return;
        };
        m.view = Some(format!(
            "{}/#session={pkey}/{}",
            public.trim_end_matches('/'),
            s.id
        ));
        if m.taps.is_empty() {
            // Nothing one tap answers (several questions are answered on the board).
            return;
        }
        let Ok((token, link)) = links::mint(pkey, s, a, self.cfg.link_ttl, SystemTime::now())
        else {
            return;
        };
        if let Err(e) = links::update(self.env, |all| {
            links::prune(all, SystemTime::now());
            all.insert(link.hash.clone(), link);
        }) {
            log!("notify: cannot keep an answer link: {e}");
            return;
        }
        let url = links::url(public, &token);
        m.links = m
            .taps
            .iter()
            .map(|t| message::LinkOut {
                label: t.label.clone(),
                choice: t.choice.clone(),
                url: url.clone(),
            })
            .collect();
    }

    /// Claims `key` (recorded as sent), then hands `m` to every channel.
    fn send(&self, key: &str, m: &Message) {
        match state::claim(self.env, key) {
            Ok(true) => self.fan_out(m),
            Ok(false) => {}
            Err(e) => log!("notify: cannot record `{key}` as sent, so it is not sent: {e}"),
        }
    }

    fn fan_out(&self, m: &Message) {
        for out in &self.outs {
            let _ = out.send(m.clone());
        }
    }

    /// Saves each project's position, held back to just before its oldest pending event.
    fn save_cursor(&mut self) {
        let mut c = Cursor::default();
        for (i, p) in self.projects.iter().enumerate() {
            let held = self
                .pending
                .iter()
                .filter(|x| x.project == i)
                .map(|x| x.pos.saturating_sub(1))
                .min();
            let after = p.reader.after;
            if after == u64::MAX {
                continue;
            }
            c.set(&p.key, held.map_or(after, |h| h.min(after)));
        }
        if self.saved.as_ref() != Some(&c) {
            if let Err(e) = state::save_cursor(self.env, &c) {
                log!("notify: cannot save the cursor: {e}");
            }
            self.saved = Some(c);
        }
    }
}

/// Watches the project's sessions folder and every session folder (a record's rename commits).
fn watch(fd: &impl rustix::fd::AsFd, p: &mut Project) {
    let sessions = p.reader.store.sessions_dir();
    let _ = fs_err::create_dir_all(&sessions);
    if p.sessions_wd.is_none() {
        p.sessions_wd = inotify::add_watch(
            fd,
            &sessions,
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

/// Sends `m` once through every configured channel now, in this thread: what each said.
pub fn test(env: &Env, cfg: &Notify, m: &Message) -> Vec<(&'static str, Result<String, String>)> {
    let mut out = Vec::new();
    for ch in channels::configured(env, cfg) {
        let (r, attempts) = ch.deliver(m);
        state::note(
            env,
            ch.name(),
            r.is_ok(),
            r.as_ref().unwrap_or_else(|e| e),
            attempts,
        );
        out.push((ch.name(), r));
    }
    out
}
