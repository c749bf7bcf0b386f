//! Exclusive file locks (fd-lock) around every read-modify-write of shared state.
//!
//! A lock file may be removed while others wait on it (`prune` removes a session's folder,
//! its lock included, while it holds the lock). A waiter that then gets the lock holds a file
//! no one else can find: so once locked, the lock is checked to still be the file at its path,
//! and taken again from the path when it is not. Two holders never work at once.

use std::io;
use std::os::fd::AsFd;
use std::path::Path;

use crate::fsutil;

/// Opens the lock file (creating it and its folder).
fn open_creating(path: &Path) -> io::Result<impl AsFd> {
    use fs_err::os::unix::fs::OpenOptionsExt as _;
    let mut options = fs_err::OpenOptions::new();
    options
        .create(true)
        .truncate(false)
        .write(true)
        .mode(fsutil::PRIVATE_FILE);
    // The folder usually exists: try the open first (one syscall on the hook path).
    match fsutil::open_lean(&options, path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                fsutil::create_private_dir_all(dir)?;
            }
            fsutil::open_lean(&options, path)
        }
        other => other,
    }
}

/// Whether the open `file` is still the file at `path` (not removed or replaced meanwhile).
fn still_at(file: impl AsFd, path: &Path) -> bool {
    let (Ok(held), Ok(there)) = (rustix::fs::fstat(file), rustix::fs::stat(path)) else {
        return false;
    };
    (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)
}

/// Runs `f` while holding an exclusive lock on `path` (creating the file and its folder).
pub fn with<R>(path: &Path, f: impl FnOnce() -> R) -> io::Result<R> {
    // Each round means the lock file was removed or replaced while this waited on it.
    for _ in 0..64 {
        let mut lock = fd_lock::RwLock::new(open_creating(path)?);
        let guard = lock.write().map_err(|e| fsutil::named(&e, "lock", path))?;
        if still_at(&*guard, path) {
            return Ok(f());
        }
    }
    Err(io::Error::other(format!(
        "`{}` kept being removed while spex waited to lock it",
        path.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// `prune` removes a lock file while it holds it and a hook waits on it; a hook that comes
    /// after makes a new lock file at the path. The waiter must not work beside the newcomer.
    #[test]
    fn a_lock_removed_while_waited_on_is_taken_again_from_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s").join("lock");
        let inside = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let work = || {
            let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(n, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(150));
            inside.fetch_sub(1, Ordering::SeqCst);
        };
        std::thread::scope(|scope| {
            with(&path, || {
                // The waiter opens the lock file that is about to go.
                scope.spawn(|| with(&path, work).unwrap());
                std::thread::sleep(Duration::from_millis(150));
                fs_err::remove_dir_all(path.parent().unwrap()).unwrap();
            })
            .unwrap();
            // The newcomer finds no file and makes a new one.
            with(&path, work).unwrap();
        });
        assert_eq!(most.load(Ordering::SeqCst), 1, "two holders at once");
    }
}
