//! `spex events`: the project's event stream (every change of every session's record), as
//! lines a person reads or JSON lines a script resumes by cursor; `--follow` is woken by
//! inotify on the store, never by a timer.

use std::collections::HashMap;
use std::io::Write;

use anyhow::Context;
use rustix::fs::inotify;
use serde_json::Value;

use super::outcome::Outcome;
use crate::env::Env;
use crate::remote;
use crate::runtime;
use crate::store::stream::{Cursor, Reader};
use crate::store::{self, ProjectStore};
use crate::text::visible;

/// Print every change of every session's record (state, turns, tool calls, attention, exits,
/// renames) as one line each, oldest first.
///
/// State, turns, tool calls, attention raised and cleared, exits, renames and resumes, in one order
/// for the whole project. Each `--json` line carries a `cursor`: `--since CURSOR` resumes right
/// after it, with no event lost or repeated, also from another process. Without `--since`,
/// `--follow` prints only what happens from now on, and a plain `spex events` prints every event
/// kept; `--follow` keeps printing as the store changes.
#[derive(Debug, clap::Args)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent command-line flags, as clap reads them"
)]
pub struct Args {
    /// Keep printing events as they happen (woken by the store changing).
    #[arg(long, short)]
    pub follow: bool,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// Resume after this cursor (the `cursor` of a `--json` line; `0`: from the oldest kept).
    #[arg(long, value_name = "CURSOR")]
    pub since: Option<String>,
    /// Every project in the store, not only this one.
    #[arg(long)]
    pub all_projects: bool,
    /// Every project of this machine and of every remote (`spex remote add`): each remote
    /// event carries its `host`; a remote that cannot be reached says so with a
    /// `host.unreachable` line (since when, ssh's error), and its sessions are stale until it
    /// answers again. Followed over each remote's SSH connection, resumed after a drop.
    #[arg(long)]
    pub all_hosts: bool,
    /// Only these sessions' events.
    #[arg(value_name = "SESSION", help = "Only these sessions' events (handle, name, id or unique prefix; of any project, `PROJECT/HANDLE` names one of another)", add = super::complete::sessions())]
    pub sessions: Vec<String>,
}

struct Project {
    reader: Reader,
    /// Running turns no spex process owns, and when their budgets next need judging.
    budgets: HashMap<String, std::time::Instant>,
    key: String,
    /// Watched session folders: watch descriptor -> session id.
    wds: HashMap<i32, String>,
    sessions_wd: Option<i32>,
    dir_wd: Option<i32>,
}

#[expect(
    clippy::too_many_lines,
    reason = "the first read and the follow loop share the watches, the projects' cursors and the printer set up before them"
)]
pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let cursor = match &args.since {
        Some(text) => Some(Cursor::parse(text)?),
        None => None,
    };
    // Named sessions are found from anywhere; their projects' streams are read.
    let named: Vec<(ProjectStore, String)> = args
        .sessions
        .iter()
        .map(|a| super::args::project_and_id(env, a))
        .collect::<anyhow::Result<_>>()?;
    let stores: Vec<ProjectStore> = if args.all_projects || args.all_hosts {
        store::all_projects(&env.spex_home())
    } else if named.is_empty() {
        vec![super::args::project(env)?]
    } else {
        let mut stores: Vec<ProjectStore> = Vec::new();
        for (store, _) in &named {
            if !stores.iter().any(|s| s.dir == store.dir) {
                stores.push(store.clone());
            }
        }
        stores
    };
    let several = stores.len() > 1 || args.all_projects || args.all_hosts;
    let only: Vec<String> = named.into_iter().map(|(_, id)| id).collect();
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)
        .context("inotify_init")?;
    let projects_dir = env.spex_home().join("projects");
    let projects_wd = if args.follow && (args.all_projects || args.all_hosts) {
        let _ = fs_err::create_dir_all(&projects_dir);
        inotify::add_watch(
            &fd,
            &projects_dir,
            inotify::WatchFlags::CREATE | inotify::WatchFlags::MOVED_TO,
        )
        .ok()
    } else {
        None
    };
    let since_text = args.since.clone().unwrap_or_default();
    let mut cur = cursor.clone().unwrap_or_default();
    let new_project = |store: ProjectStore, cur: &mut Cursor| -> Project {
        let key = store.stream_key();
        // With no cursor, `--follow` starts at the end and a plain read at the beginning.
        let after = match &cursor {
            Some(c) => Some(c.after(&key)),
            None if args.follow => None,
            None => Some(0),
        };
        if let Some(a) = after {
            cur.set(&key, a);
        }
        Project {
            budgets: HashMap::new(),
            reader: Reader::new(store, after, &since_text),
            key,
            wds: HashMap::new(),
            sessions_wd: None,
            dir_wd: None,
        }
    };
    let mut projects: Vec<Project> = stores
        .into_iter()
        .map(|s| new_project(s, &mut cur))
        .collect();
    let mut out = Printer {
        json: args.json,
        all: several,
        only,
        labels: HashMap::new(),
    };
    let mut hosts = if args.all_hosts {
        open_hosts(env, args.follow, cursor.as_ref(), &mut cur)
    } else {
        Vec::new()
    };
    // Started after the hosts' ends were read: `--follow` with no cursor prints what comes.
    let _followers = (args.all_hosts && args.follow).then(|| remote::follow::spawn_all(env));
    let mut book = runtime::budget::Book::default();
    for p in &mut projects {
        // Turns past their budget that no spex process judges are judged here, as `show`
        // judges them, before their events are read.
        let ids = p.reader.store.session_ids();
        judge(env, p, &ids, &mut book);
        if args.follow {
            watch(&fd, p);
        }
        let lines = p.reader.next_batch(None)?;
        cur.set(&p.key, p.reader.after);
        if !out.emit(p, &lines, &mut cur) {
            return Ok(Outcome::Ok);
        }
    }
    for h in &mut hosts {
        if args.follow {
            h.wd = inotify::add_watch(&fd, &h.store.dir, host_flags()).ok();
        }
        if !out.emit_host(h, &mut cur) {
            return Ok(Outcome::Ok);
        }
    }
    if !args.follow {
        return Ok(Outcome::Ok);
    }
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 8192];
    let stdout = std::io::stdout();
    loop {
        // Woken by the store, or by stdout's reader going away (`| head`): no timer.
        let mut fds = [
            rustix::event::PollFd::new(&fd, rustix::event::PollFlags::IN),
            rustix::event::PollFd::new(&stdout, rustix::event::PollFlags::empty()),
        ];
        // The next budget deadline of a turn no spex process owns: nothing else would wake
        // this reader then.
        let next = projects
            .iter()
            .flat_map(|p| p.budgets.values())
            .min()
            .map(|at| at.saturating_duration_since(std::time::Instant::now()));
        let timeout = next.and_then(|d| rustix::event::Timespec::try_from(d).ok());
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e).context("poll"),
        }
        if fds[1]
            .revents()
            .intersects(rustix::event::PollFlags::ERR | rustix::event::PollFlags::HUP)
        {
            return Ok(Outcome::Ok);
        }
        // Which sessions changed, per project (`None`: look at every session).
        let mut changed: Vec<Option<Vec<String>>> = vec![Some(Vec::new()); projects.len()];
        let mut new_dirs = false;
        let mut hosts_changed = false;
        let mut reader = inotify::Reader::new(&fd, &mut buf);
        while let Ok(ev) = reader.next() {
            let wd = ev.wd();
            if Some(wd) == projects_wd {
                new_dirs = true;
                continue;
            }
            if hosts.iter().any(|h| h.wd == Some(wd)) {
                hosts_changed = true;
                continue;
            }
            for (i, p) in projects.iter().enumerate() {
                if let Some(id) = p.wds.get(&wd) {
                    if let Some(list) = changed[i].as_mut()
                        && !list.contains(id)
                    {
                        list.push(id.clone());
                    }
                } else if Some(wd) == p.sessions_wd
                    // In the project's folder only `sessions/` appearing matters (the stream's
                    // own files are written there too).
                    || (Some(wd) == p.dir_wd
                        && ev.file_name().is_some_and(|n| n.to_bytes() == b"sessions"))
                {
                    changed[i] = None;
                }
            }
        }
        if new_dirs {
            let known: Vec<std::path::PathBuf> = projects
                .iter()
                .map(|p| p.reader.store.dir.clone())
                .collect();
            for store in store::all_projects(&env.spex_home()) {
                if !known.contains(&store.dir) {
                    let mut p = new_project(store, &mut cur);
                    // A project that appears while following is read from its beginning.
                    p.reader = Reader::new(p.reader.store.clone(), Some(0), &since_text);
                    cur.set(&p.key, 0);
                    watch(&fd, &mut p);
                    projects.push(p);
                    changed.push(None);
                }
            }
        }
        for (i, p) in projects.iter_mut().enumerate() {
            let now = std::time::Instant::now();
            let mut due: Vec<String> = p
                .budgets
                .iter()
                .filter(|(_, at)| **at <= now)
                .map(|(id, _)| id.clone())
                .collect();
            match &changed[i] {
                Some(ids) => due.extend(ids.iter().cloned()),
                None => due = p.reader.store.session_ids(),
            }
            judge(env, p, &due, &mut book);
            if changed[i].as_ref().is_some_and(Vec::is_empty) {
                continue;
            }
            if changed[i].is_none() {
                watch(&fd, p);
            }
            let lines = p.reader.next_batch(changed[i].as_deref())?;
            if !out.emit(p, &lines, &mut cur) {
                return Ok(Outcome::Ok);
            }
        }
        if hosts_changed {
            for h in &mut hosts {
                if !out.emit_host(h, &mut cur) {
                    return Ok(Outcome::Ok);
                }
            }
        }
    }
}

/// One remote's journal as this reader reads it.
struct Host {
    store: store::remotes::HostStore,
    key: String,
    reader: store::remotes::JournalReader,
    wd: Option<i32>,
}

/// What wakes a follower of a host's journal: its appends.
fn host_flags() -> inotify::WatchFlags {
    inotify::WatchFlags::MODIFY | inotify::WatchFlags::CREATE | inotify::WatchFlags::MOVED_TO
}

/// The configured remotes' journals, each from the cursor's position (with none: from its end
/// when following, from its start otherwise). Without `--follow`, each host is first asked
/// for what it has that the journal lacks (at once, all hosts side by side), unless a
/// follower keeps that host's journal current.
fn open_hosts(env: &Env, follow: bool, cursor: Option<&Cursor>, cur: &mut Cursor) -> Vec<Host> {
    let all = remote::remotes(env).unwrap_or_default();
    if !follow {
        std::thread::scope(|scope| {
            for r in &all {
                scope.spawn(|| remote::follow::catch_up(env, r));
            }
        });
    }
    let mut hosts = Vec::new();
    for r in &all {
        let Some(store) = store::remotes::host(&env.spex_home(), &r.name) else {
            continue;
        };
        let _ = crate::fsutil::create_private_dir_all(&store.dir);
        let key = store.stream_key();
        let after = match cursor {
            Some(c) => c.after(&key),
            None if follow => store.state().last,
            None => 0,
        };
        cur.set(&key, after);
        hosts.push(Host {
            store,
            key,
            reader: store::remotes::JournalReader::new(after),
            wd: None,
        });
    }
    hosts
}

/// Judges the budgets of sessions `ids` of project `p` where no spex process does (see
/// `runtime::judge`), and notes when each running turn among them needs judging next.
fn judge(env: &Env, p: &mut Project, ids: &[String], book: &mut runtime::budget::Book) {
    let store = p.reader.store.clone();
    for id in ids {
        let Some(s) = store.load(id).ok().flatten() else {
            p.budgets.remove(id);
            continue;
        };
        let s = runtime::judge::judge(env, &store, s, book);
        match runtime::judge::deadline(env, &s, book)
            .filter(|_| !runtime::judge::owned(env, &store, &s))
        {
            Some(at) => p.budgets.insert(id.clone(), at),
            None => p.budgets.remove(id),
        };
    }
}

/// Watches the project's folder, its sessions folder and every session folder (records are
/// replaced by rename after their events are appended: the rename is the commit).
fn watch(fd: &impl rustix::fd::AsFd, p: &mut Project) {
    let dir = p.reader.store.dir.clone();
    let _ = fs_err::create_dir_all(&dir);
    if p.dir_wd.is_none() {
        p.dir_wd = inotify::add_watch(fd, &dir, inotify::WatchFlags::CREATE).ok();
    }
    let sessions = p.reader.store.sessions_dir();
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

struct Printer {
    json: bool,
    all: bool,
    only: Vec<String>,
    labels: HashMap<String, String>,
}

impl Printer {
    /// Prints the lines; `false` once stdout is closed (the reader went away).
    fn emit(&mut self, p: &Project, lines: &[Value], cur: &mut Cursor) -> bool {
        let mut text = String::new();
        for line in lines {
            let Some(pos) = line["pos"].as_u64() else {
                continue;
            };
            cur.set(&p.key, pos);
            let session = line["session"].as_str().unwrap_or_default();
            if !self.only.is_empty() && !self.only.iter().any(|o| o == session) {
                continue;
            }
            if self.json {
                let mut v = line.clone();
                v["cursor"] = cur.to_string().into();
                if self.all {
                    v["project"] = p
                        .reader
                        .store
                        .dir
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .into();
                }
                text.push_str(&serde_json::to_string(&v).expect("serializes"));
                text.push('\n');
            } else {
                let label = self
                    .labels
                    .entry(session.to_owned())
                    .or_insert_with(|| p.reader.store.label_of(session))
                    .clone();
                text.push_str(&human(&label, line));
                text.push('\n');
            }
        }
        cur.set(&p.key, p.reader.after);
        write(&text)
    }

    /// Prints the host's journal lines past its position; `false` once stdout is closed.
    fn emit_host(&mut self, h: &mut Host, cur: &mut Cursor) -> bool {
        let mut text = String::new();
        for line in h.reader.next(&h.store) {
            let Some(pos) = line["pos"].as_u64() else {
                continue;
            };
            cur.set(&h.key, pos);
            let session = line["session"].as_str().unwrap_or_default();
            if !self.only.is_empty() && !self.only.iter().any(|o| o == session) {
                continue;
            }
            if self.json {
                let mut v = line.clone();
                v["cursor"] = cur.to_string().into();
                text.push_str(&serde_json::to_string(&v).expect("serializes"));
            } else {
                let host = line["host"].as_str().unwrap_or_default();
                let label = if session.is_empty() {
                    host.to_owned()
                } else {
                    let handle = line["handle"].as_str().or(line["name"].as_str());
                    format!(
                        "{host}:{}",
                        handle.unwrap_or(session.get(..8).unwrap_or(session))
                    )
                };
                text.push_str(&human(&label, &line));
            }
            text.push('\n');
        }
        write(&text)
    }
}

/// Writes `text` to stdout; `false` once stdout is closed (the reader went away).
fn write(text: &str) -> bool {
    if text.is_empty() {
        return true;
    }
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .is_ok()
}

/// One short line: the time, the session's handle, the kind, and what it is about.
fn human(label: &str, line: &Value) -> String {
    let time = line["time"].as_str().unwrap_or_default();
    // `2026-11-25T09:48:16.123Z` -> `09:48:16.123`
    let clock = time.get(11..23).unwrap_or(time);
    let kind = line["kind"].as_str().unwrap_or_default();
    let mut detail = Vec::new();
    for key in [
        "tool", "command", "prompt", "reason", "error", "name", "was", "text", "why",
    ] {
        if let Some(s) = line[key].as_str().filter(|s| !s.is_empty()) {
            let s = crate::store::session::ellipsis(s, 60);
            detail.push(if key == "tool" || key == "prompt" {
                visible(&s)
            } else {
                format!("{key}: {}", visible(&s))
            });
        }
    }
    if kind == "stream.gap" && line["from_seq"].is_u64() {
        detail.push(format!(
            "events {}..{} were rotated out before they were read",
            line["from_seq"], line["to_seq"]
        ));
    }
    if let Some(status) = line["state"]["status"].as_str() {
        detail.push(format!("-> {status}"));
    }
    format!("{clock} {} {kind} {}", visible(label), detail.join(" "))
        .trim_end()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_lines_show_control_characters_escaped() {
        let line = serde_json::json!({
            "time": "2026-11-25T09:48:16.123Z", "kind": "turn.started",
            "prompt": "hi\u{1b}[2J there\u{7}", "state": {"status": "working"},
        });
        let text = human("a1b2", &line);
        assert_eq!(
            text,
            "09:48:16.123 a1b2 turn.started hi\\e[2J there\\x07 -> working"
        );
        assert!(!text.contains('\u{1b}'));
    }
}
