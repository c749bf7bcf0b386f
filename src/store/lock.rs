//! Exclusive file locks (fd-lock) around every read-modify-write of shared state.

use std::io;
use std::path::Path;

/// Runs `f` while holding an exclusive lock on `path` (creating the file and its folder).
pub fn with<R>(path: &Path, f: impl FnOnce() -> R) -> io::Result<R> {
    if let Some(dir) = path.parent() {
        fs_err::create_dir_all(dir)?;
    }
    let file = fs_err::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?
        .into_parts()
        .0;
    let mut lock = fd_lock::RwLock::new(file);
    let _guard = lock
        .write()
        .map_err(|e| io::Error::new(e.kind(), format!("{e} (locking `{}`)", path.display())))?;
    Ok(f())
}
