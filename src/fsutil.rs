//! The one way spex writes files: a temp file beside the target, renamed over it, and only when
//! the bytes differ. Reads that treat "missing" as a value live here too.

use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Reads a file, `None` when it does not exist.
pub fn read_opt(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs_err::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes `bytes` to `path` atomically unless it already holds exactly these bytes. Returns
/// whether it wrote. Missing parent directories are created; the data is synced before the
/// rename (these are the user's files).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<bool> {
    if read_opt(path)?.as_deref() == Some(bytes) {
        return Ok(false);
    }
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    fs_err::create_dir_all(dir)?;
    // Keep the mode of the file we replace (config files may be private); a new file gets the
    // usual 0644 rather than the temp file's 0600.
    let mode = std::fs::metadata(path).map_or_else(
        |_| std::fs::Permissions::from_mode(0o644),
        |m| m.permissions(),
    );
    rename_into(path, bytes, Some(mode), true)?;
    Ok(true)
}

/// Replaces `path` with `bytes` by rename, without comparing first and without `fsync`: for
/// spex's own state on the hook path, where a rename keeps readers from ever seeing a torn
/// record and an fsync per tool call would cost more than the rest of the hook.
pub fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    rename_into(path, bytes, None, false)
}

/// Writes a temp file beside `path` and renames it over `path`.
fn rename_into(
    path: &Path,
    bytes: &[u8],
    mode: Option<std::fs::Permissions>,
    sync: bool,
) -> io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".spex-tmp")
        .tempfile_in(dir)
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("{e} (creating a temp file in `{}`)", dir.display()),
            )
        })?;
    tmp.write_all(bytes)?;
    if let Some(mode) = mode {
        tmp.as_file().set_permissions(mode)?;
    }
    if sync {
        tmp.as_file().sync_all()?;
    }
    tmp.persist(path).map_err(|e| {
        io::Error::new(
            e.error.kind(),
            format!("{} (renaming into `{}`)", e.error, path.display()),
        )
    })?;
    Ok(())
}

/// Appends `bytes` with a single `write` on an `O_APPEND` file (creating it and its folder),
/// so concurrent writers of whole lines never interleave within a line.
pub fn append(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let open = || {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    };
    let mut file = match open() {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs_err::create_dir_all(path.parent().unwrap_or(path))?;
            open()
        }
        other => other,
    }
    .map_err(|e| io::Error::new(e.kind(), format!("{e} (appending to `{}`)", path.display())))?;
    file.write_all(bytes)
}

/// Removes a file; a missing file is not an error.
pub fn remove_file(path: &Path) -> io::Result<()> {
    match fs_err::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Removes a directory only if it is empty; reports whether it did.
pub fn remove_dir_if_empty(path: &Path) -> bool {
    std::fs::remove_dir(path).is_ok()
}
