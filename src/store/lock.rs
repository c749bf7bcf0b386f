//! Exclusive file locks (fd-lock) around every read-modify-write of shared state.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

fn open(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
}

/// Runs `f` while holding an exclusive lock on `path` (creating the file and its folder).
pub fn with<R>(path: &Path, f: impl FnOnce() -> R) -> io::Result<R> {
    // The folder usually exists: try the open first (one syscall on the hook path).
    let file = match open(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                fs_err::create_dir_all(dir)?;
            }
            open(path)
        }
        other => other,
    }
    .map_err(|e| io::Error::new(e.kind(), format!("{e} (opening `{}`)", path.display())))?;
    let mut lock = fd_lock::RwLock::new(file);
    let _guard = lock
        .write()
        .map_err(|e| io::Error::new(e.kind(), format!("{e} (locking `{}`)", path.display())))?;
    Ok(f())
}
