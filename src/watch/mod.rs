//! The watcher: one long-lived reader per user that folds every live session's evidence beyond
//! hooks (the harnesses' own files, their processes, spex's hosts) into its record as it
//! changes, and takes each conclusion into its project's event stream, so `spex events
//! --follow` (and the board, and the notifier) hear of an Esc, a kill or a failed retry with no
//! other reader running. It blocks on events only (inotify, pidfds, a real deadline) and never
//! touches the hook path.
//!
//! One watcher works per user: it holds an exclusive lock on `watch.lock` in spex's home (its
//! pid written inside); a second one waits on that lock in standby (blocked in the kernel, no
//! wakeups) and takes over when the holder dies. Each conclusion is also applied under the
//! record's lock with the record's `seq` checked (`reconcile`), so two writers never write one
//! conclusion twice.

pub mod service;
mod watcher;

use std::io::{Read as _, Seek as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context as _;

use crate::env::Env;
use crate::fsutil;
use crate::log::log;

/// The lock the working watcher holds (its pid inside).
pub fn lock_path(env: &Env) -> PathBuf {
    env.spex_home().join("watch.lock")
}

/// Whether a watcher works now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// No watcher holds the lock.
    Free,
    /// A watcher holds it: its pid (`None` until it has written it).
    Held(Option<u32>),
}

/// Who holds the watcher's lock.
pub fn holder(env: &Env) -> std::io::Result<Holder> {
    let path = lock_path(env);
    let file = match fs_err::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Holder::Free),
        Err(e) => return Err(e),
    };
    let mut lock = fd_lock::RwLock::new(file.into_parts().0);
    match lock.try_write() {
        Ok(_) => Ok(Holder::Free),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
            let mut text = String::new();
            fs_err::File::open(&path)?.read_to_string(&mut text)?;
            Ok(Holder::Held(text.trim().parse().ok()))
        }
        Err(e) => Err(fsutil::named(&e, "lock", &path)),
    }
}

/// Runs a watcher in the foreground until SIGINT or SIGTERM: in standby while another process's
/// watcher holds the lock, then watching. Logs to stderr.
pub fn run(env: &Env) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let (mut woken, wake) = UnixStream::pair().context("socketpair")?;
    let mut registered = Vec::new();
    for sig in [SIGINT, SIGTERM] {
        registered.push(
            signal_hook::low_level::pipe::register(sig, wake.try_clone()?)
                .context("install the signal handler")?,
        );
    }
    let (stop_rx, mut stop_tx) = UnixStream::pair().context("socketpair")?;
    let active = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(AtomicBool::new(false));
    let worker = {
        let (env, active, finished) = (env.clone(), Arc::clone(&active), Arc::clone(&finished));
        let mut done = wake.try_clone()?;
        std::thread::Builder::new()
            .name("spex-watch".into())
            .spawn(move || {
                let r = serve(&env, Some(&stop_rx), &active);
                finished.store(true, Ordering::SeqCst);
                let _ = done.write_all(b"x");
                r
            })
            .context("start the watcher's thread")?
    };
    let mut byte = [0u8; 1];
    let _ = woken.read(&mut byte);
    for id in registered {
        signal_hook::low_level::unregister(id);
    }
    if finished.load(Ordering::SeqCst) {
        return worker
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the watcher's thread panicked")));
    }
    log!("watcher: stopping (signal)");
    if !active.load(Ordering::SeqCst) {
        // In standby, blocked on the lock: nothing to finish.
        return Ok(());
    }
    // The watcher finishes the wake it is in (a record's write is never cut short).
    let _ = stop_tx.write_all(b"x");
    worker
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the watcher's thread panicked")))
}

/// Runs a watcher in a thread of this process (the board, the notifier): in standby while
/// another watcher holds the lock, taking over when it dies. It runs as long as the process.
pub fn spawn(env: Env) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("spex-watch".into())
        .spawn(move || {
            if let Err(e) = serve(&env, None, &AtomicBool::new(false)) {
                log!("watcher: stopped: {e:#}");
            }
        })
        .expect("a thread starts")
}

/// Takes the lock (waiting in standby while another watcher holds it), then watches until
/// `stop` is readable.
fn serve(env: &Env, stop: Option<&UnixStream>, active: &AtomicBool) -> anyhow::Result<()> {
    let path = lock_path(env);
    fsutil::create_private_dir_all(&env.spex_home())?;
    let file = {
        use fs_err::os::unix::fs::OpenOptionsExt as _;
        fs_err::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(fsutil::PRIVATE_FILE)
            .open(&path)?
    };
    let mut lock = fd_lock::RwLock::new(file.into_parts().0);
    let free = match lock.try_write() {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        Err(e) => return Err(fsutil::named(&e, "lock", &path).into()),
    };
    if !free {
        let other = holder_pid(&path);
        log!(
            "watcher: standby: another watcher works (pid {}); taking over when it ends",
            other.map_or_else(|| "unknown".to_owned(), |p| p.to_string())
        );
    }
    // Released just above when it was free: taken again here (another watcher may win it in
    // between, and this one waits in standby after all).
    let mut guard = lock.write().map_err(|e| fsutil::named(&e, "lock", &path))?;
    guard.set_len(0)?;
    guard.rewind()?;
    guard.write_all(format!("{}\n", std::process::id()).as_bytes())?;
    active.store(true, Ordering::SeqCst);
    log!(
        "watcher: watching every project under `{}` (pid {})",
        env.spex_home().display(),
        std::process::id()
    );
    // The other machines' streams are followed by the watcher that works (each host's
    // follower stands by while another process's follows it); they stop with it.
    let followers = crate::remote::follow::spawn_all(env);
    let r = watcher::Watcher::new(env)?.run(stop);
    drop(followers);
    active.store(false, Ordering::SeqCst);
    drop(guard);
    r
}

fn holder_pid(path: &std::path::Path) -> Option<u32> {
    fs_err::read_to_string(path).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two watchers in one process: the first takes the lock (its pid written in it), the
    /// second waits in standby; `holder` names this process either way.
    #[test]
    fn a_spawned_watcher_holds_the_lock_and_a_second_waits() {
        let dir = tempfile::tempdir().unwrap();
        let env = Env {
            spex_home: Some(dir.path().join("store")),
            home: Some(dir.path().to_path_buf()),
            ..Env::default()
        };
        assert_eq!(holder(&env).unwrap(), Holder::Free);
        let _first = spawn(env.clone());
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while holder(&env).unwrap() != Holder::Held(Some(std::process::id())) {
            assert!(std::time::Instant::now() < end, "{:?}", holder(&env));
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let second = spawn(env.clone());
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!second.is_finished());
        assert_eq!(
            holder(&env).unwrap(),
            Holder::Held(Some(std::process::id()))
        );
    }
}
