//! `spex sessions --watch`: the table redrawn in place on every change of the store, woken by
//! inotify on the project folders (never a timer; only a running turn's budget deadline, when
//! no spex process judges it, bounds a wait), until Ctrl-C; a resized terminal is redrawn. On a terminal it draws on the
//! alternate screen with the cursor hidden and puts both back when it ends; elsewhere it prints
//! one table per change.

use std::collections::HashSet;
use std::io::IsTerminal;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use anyhow::Context;
use rustix::fs::inotify;

use super::table::{Scope, read};
use crate::cli::outcome::Outcome;
use crate::cli::output;
use crate::env::Env;

/// Enter the alternate screen, hide the cursor.
const ENTER: &str = "\x1b[?1049h\x1b[?25l";
/// Show the cursor, leave the alternate screen: the terminal as it was.
const LEAVE: &str = "\x1b[?25h\x1b[?1049l";
/// Cursor home, clear the screen.
const CLEAR: &str = "\x1b[H\x1b[2J";

/// Puts the terminal back however the loop ends (Ctrl-C, an error, a panic).
struct Screen;

impl Screen {
    fn enter() -> Screen {
        output::print(ENTER);
        Screen
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        output::print(LEAVE);
    }
}

/// The folders whose changes redraw the table: the projects folder (a new project), each
/// project's folder (its `sessions/` appearing), its `sessions/` (a session starting or
/// pruned) and each session's folder (its record replaced: the rename is the commit).
struct Watches {
    fd: rustix::fd::OwnedFd,
    watched: HashSet<PathBuf>,
}

impl Watches {
    fn new() -> anyhow::Result<Watches> {
        let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)
            .context("inotify_init")?;
        Ok(Watches {
            fd,
            watched: HashSet::new(),
        })
    }

    fn add(&mut self, dir: PathBuf, flags: inotify::WatchFlags) {
        // A folder that does not exist yet is added once its parent reports it.
        if !self.watched.contains(&dir) && inotify::add_watch(&self.fd, &dir, flags).is_ok() {
            self.watched.insert(dir);
        }
    }

    /// Watches every folder of `scope` not watched yet.
    fn cover(&mut self, env: &Env, scope: &Scope) {
        let appear = inotify::WatchFlags::CREATE
            | inotify::WatchFlags::MOVED_TO
            | inotify::WatchFlags::DELETE
            | inotify::WatchFlags::MOVED_FROM;
        let stores = match scope {
            Scope::Here(store) => vec![store.clone()],
            Scope::All => {
                let projects = env.spex_home().join("projects");
                self.add(projects, appear);
                crate::store::all_projects(&env.spex_home())
            }
        };
        for store in stores {
            self.add(store.dir.clone(), appear);
            self.add(store.sessions_dir(), appear);
            for id in store.session_ids() {
                self.add(
                    store.session_dir(&id),
                    inotify::WatchFlags::MOVED_TO | inotify::WatchFlags::CLOSE_WRITE,
                );
            }
        }
    }

    /// Empties the queue of notifications (the next read looks at everything anyway).
    fn drain(&self) {
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 8192];
        let mut reader = inotify::Reader::new(&self.fd, &mut buf);
        while reader.next().is_ok() {}
    }
}

/// Runs `sessions --watch` (`all`: every record, `all_projects`: every project) until Ctrl-C
/// (or, off a terminal, until stdout's reader goes).
pub fn run(all: bool, all_projects: bool, env: &Env) -> anyhow::Result<Outcome> {
    let scope = Scope::of(all_projects, env);
    // Ctrl-C (and a hang-up or `kill`) wakes the loop through this pipe, so the terminal is
    // put back before the process ends.
    let (signals, tx) = UnixStream::pair()?;
    signals.set_nonblocking(true)?;
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::low_level::pipe::register(sig, tx.try_clone()?)?;
    }
    // A resized terminal is drawn again.
    let (winch, winch_tx) = UnixStream::pair()?;
    winch.set_nonblocking(true)?;
    signal_hook::low_level::pipe::register(signal_hook::consts::SIGWINCH, winch_tx)?;
    let terminal = std::io::stdout().is_terminal();
    let mut watches = Watches::new()?;
    let _screen = terminal.then(Screen::enter);
    let stdout = std::io::stdout();
    let mut shown = String::new();
    loop {
        // Watched before reading: a change during the read wakes the next round.
        watches.cover(env, &scope);
        let listing = read(env, &scope, all)?;
        let table = listing.text(env, all);
        let judge_at = listing.next_judgement(env);
        drop(listing);
        if table != shown {
            if terminal {
                let title = match &scope {
                    Scope::Here(_) => "this project",
                    Scope::All => "every project",
                };
                output::print(&format!(
                    "{CLEAR}spex sessions --watch: {title}, updated {} (Ctrl-C quits)\n\n{table}",
                    crate::cli::turns::clock(&crate::store::now_rfc3339())
                ));
            } else {
                // One table per change, a blank line between them.
                let gap = if shown.is_empty() { "" } else { "\n" };
                output::print(&format!("{gap}{table}"));
            }
            shown = table;
        }
        let mut fds = [
            rustix::event::PollFd::new(&watches.fd, rustix::event::PollFlags::IN),
            rustix::event::PollFd::new(&signals, rustix::event::PollFlags::IN),
            rustix::event::PollFd::new(&stdout, rustix::event::PollFlags::empty()),
            rustix::event::PollFd::new(&winch, rustix::event::PollFlags::IN),
        ];
        // Only a budget's deadline, where one is due, bounds the sleep: no timer otherwise.
        let timeout = judge_at
            .map(|at| at.saturating_duration_since(std::time::Instant::now()))
            .and_then(|d| rustix::event::Timespec::try_from(d).ok());
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e).context("poll"),
        }
        let gone = fds[2]
            .revents()
            .intersects(rustix::event::PollFlags::ERR | rustix::event::PollFlags::HUP);
        if !fds[1].revents().is_empty() || gone {
            return Ok(Outcome::Ok);
        }
        if !fds[3].revents().is_empty() {
            let mut buf = [0u8; 64];
            while std::io::Read::read(&mut &winch, &mut buf).is_ok_and(|n| n > 0) {}
            if terminal {
                shown.clear();
            }
        }
        watches.drain();
    }
}
