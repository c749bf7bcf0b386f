//! The one way spex writes files: a temp file beside the target, renamed over it, and only when
//! the bytes differ. Reads that treat "missing" as a value live here too. Every call goes
//! through `fs_err` (its errors name the path); [`named`] words the errors of the few calls it
//! does not wrap the same way.

use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The name every temp file spex writes beside a target starts with.
pub const TEMP_PREFIX: &str = ".spex-tmp";
/// The name a file spex is deleting has while it is moved aside (checked, then removed).
pub const ASIDE_PREFIX: &str = ".spex-del-";

/// Reads a file, `None` when it does not exist.
pub fn read_opt(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs_err::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The file `path` names once symlinks in its last component are followed (`path` itself
/// when it is no link): spex edits a linked file (`AGENTS.md -> CLAUDE.md`, a dotfile
/// manager's `~/.claude.json`) at its target, so the link stays a link. A target that does not
/// exist yet is still the path to write.
pub fn resolve_link(path: &Path) -> std::path::PathBuf {
    let mut p = path.to_path_buf();
    // As many hops as the kernel follows (`ELOOP` past 40); a longer chain is edited as is.
    for _ in 0..40 {
        let Ok(target) = fs_err::read_link(&p) else {
            return p;
        };
        p = match p.parent() {
            Some(dir) if target.is_relative() => dir.join(target),
            _ => target,
        };
    }
    path.to_path_buf()
}

/// Reads the file `name` (relative to the open folder `dir`) into `buf` from its start: the
/// length read. For reading many small files: one `openat` from a folder already open (no walk
/// of the whole path), then `read` into a buffer that grows only when a file outgrows it (no
/// `stat` for a size hint, no buffer per file). Its errors do not name the file: for callers
/// that skip a file they cannot read.
pub fn read_at(dir: impl rustix::fd::AsFd, name: &str, buf: &mut Vec<u8>) -> io::Result<usize> {
    use rustix::fs::{Mode, OFlags};
    let file = rustix::fs::openat(dir, name, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
    if buf.is_empty() {
        buf.resize(16 * 1024, 0);
    }
    let mut n = 0;
    loop {
        if n == buf.len() {
            buf.resize(2 * n, 0);
        }
        match rustix::io::read(&file, &mut buf[n..]) {
            Ok(0) => return Ok(n),
            Ok(k) => n += k,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Writes `bytes` to `path` atomically unless it already holds exactly these bytes. Returns
/// whether it wrote. Missing parent directories are created; the data is synced before the
/// rename (these are the user's files).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<bool> {
    if read_opt(path)?.as_deref() == Some(bytes) {
        return Ok(false);
    }
    fs_err::create_dir_all(dir_of(path))?;
    rename_into(path, bytes, Some(mode_for(path)), true)?;
    Ok(true)
}

fn dir_of(path: &Path) -> &Path {
    path.parent().unwrap_or_else(|| Path::new("."))
}

/// Keep the mode of the file we replace (config files may be private); a new file gets the
/// usual 0644 rather than the temp file's 0600.
fn mode_for(path: &Path) -> std::fs::Permissions {
    fs_err::metadata(path).map_or_else(
        |_| std::fs::Permissions::from_mode(0o644),
        |m| m.permissions(),
    )
}

/// Replaces `path`, which spex read as `expected` (`None`: absent), with `new` (`None`:
/// deleted), but only if no other program wrote it in between. The check is made at the rename
/// itself: the old file is swapped out atomically (`RENAME_EXCHANGE`) and compared, and if it
/// is not what spex read, the caller learns what it replaced (`Swap::Raced`).
pub fn swap_if_unchanged(
    path: &Path,
    expected: Option<&[u8]>,
    new: Option<&[u8]>,
) -> io::Result<Swap> {
    if read_opt(path)?.as_deref() != expected {
        return Ok(Swap::Changed);
    }
    if expected == new {
        return Ok(Swap::Done);
    }
    let dir = dir_of(path);
    match (expected, new) {
        (None, Some(bytes)) => {
            fs_err::create_dir_all(dir)?;
            let tmp = temp_with(dir, bytes, Some(mode_for(path)), true)?;
            // A file another program created meanwhile is never replaced.
            match tmp.persist_noclobber(path) {
                Ok(_) => Ok(Swap::Done),
                Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => Ok(Swap::Changed),
                Err(e) => Err(named(&e.error, "rename into", path)),
            }
        }
        (Some(old), Some(bytes)) => {
            // The check sits right before the exchange, and the data is synced after it (through
            // the temp file's handle, which now names the file in place): the window in which
            // another writer can slip in is a few system calls, never an fsync under load.
            let tmp = temp_with(dir, bytes, Some(mode_for(path)), false)?;
            if read_opt(path)?.as_deref() != Some(old) {
                return Ok(Swap::Changed);
            }
            match exchange(tmp.path(), path) {
                Ok(()) => {}
                // No atomic exchange on this file system: the window is the check above.
                Err(e) if e.kind() == io::ErrorKind::Unsupported => {
                    sync_temp(&tmp, path)?;
                    tmp.persist(path)
                        .map_err(|e| named(&e.error, "rename into", path))?;
                    return Ok(Swap::Done);
                }
                Err(e) => return Err(e),
            }
            sync_temp(&tmp, path)?;
            // The temp path now holds what was swapped out; dropping `tmp` deletes it.
            let theirs = fs_err::read(tmp.path())?;
            Ok(if theirs == old {
                Swap::Done
            } else {
                Swap::Raced(theirs)
            })
        }
        (Some(old), None) => {
            let aside = dir.join(format!(
                "{ASIDE_PREFIX}{}-{}",
                std::process::id(),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos())
            ));
            rustix::fs::renameat_with(
                rustix::fs::CWD,
                path,
                rustix::fs::CWD,
                &aside,
                rustix::fs::RenameFlags::NOREPLACE,
            )
            .map_err(|e| named(&e.into(), "rename into", path))?;
            if fs_err::read(&aside)? == old {
                remove_file(&aside)?;
                return Ok(Swap::Done);
            }
            rustix::fs::renameat_with(
                rustix::fs::CWD,
                &aside,
                rustix::fs::CWD,
                path,
                rustix::fs::RenameFlags::NOREPLACE,
            )
            .map_err(|e| {
                io::Error::new(
                    io::Error::from(e).kind(),
                    format!(
                        "`{}` was written while spex removed it; the other version is kept as `{}`",
                        path.display(),
                        aside.display()
                    ),
                )
            })?;
            Ok(Swap::Changed)
        }
        (None, None) => Ok(Swap::Done),
    }
}

/// What [`swap_if_unchanged`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Swap {
    /// The new bytes are in place (or nothing needed to change).
    Done,
    /// The file did not hold what was expected: nothing was written.
    Changed,
    /// Another program wrote the file between the last check and the exchange: the new bytes
    /// are in place and `theirs` is what they replaced. The caller redoes its edit on `theirs`
    /// (expecting its own bytes now), or puts `theirs` back.
    Raced(Vec<u8>),
}

/// Atomically swaps the files at `a` and `b`; `Unsupported` where the system cannot.
fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        a,
        rustix::fs::CWD,
        b,
        rustix::fs::RenameFlags::EXCHANGE,
    )
    .map_err(|e| {
        if e == rustix::io::Errno::INVAL || e == rustix::io::Errno::NOSYS {
            io::Error::new(io::ErrorKind::Unsupported, "no RENAME_EXCHANGE")
        } else {
            named(&e.into(), "rename into", b)
        }
    })
}

/// `e`, from a call `fs_err` does not wrap (tempfile's rename, rustix's `renameat2`, std's
/// `DirBuilder`, an open on the hook path), worded as `fs_err` words its own: "failed to
/// `doing` `path`: cause".
pub fn named(e: &io::Error, doing: &str, path: &Path) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("failed to {doing} `{}`: {e}", path.display()),
    )
}

/// Opens `path` with `options`, as `fs_err::OpenOptions::open` does but without its copy of the
/// path in the file it returns: an allocation on every open of the hook path (the lock, the
/// event log), for an error that almost never comes. The error still names the path.
#[expect(
    clippy::disallowed_types,
    clippy::disallowed_methods,
    reason = "the std file fs_err wraps, opened through fs_err's own options; the error is worded as fs_err words it"
)]
pub fn open_lean(options: &fs_err::OpenOptions, path: &Path) -> io::Result<std::fs::File> {
    options
        .options()
        .open(path)
        .map_err(|e| named(&e, "open file", path))
}

/// Opens `path` for reading; `None` when it cannot be (missing, unreadable). For the hook
/// path's reads that take any failure as "nothing there" (a transcript not written yet): no
/// path is copied or worded, on success or failure, for an error no one reads.
#[expect(
    clippy::disallowed_types,
    clippy::disallowed_methods,
    reason = "the error is dropped, so fs_err's path in it would be built for nothing"
)]
pub fn open_quiet(path: &Path) -> Option<std::fs::File> {
    std::fs::File::open(path).ok()
}

/// Syncs the temp file `tmp`, whose data is (or is about to be) the file at `path`, to disk:
/// tempfile leaves `sync_all` to the std file, whose error names nothing.
fn sync_temp(tmp: &tempfile::NamedTempFile, path: &Path) -> io::Result<()> {
    tmp.as_file()
        .sync_all()
        .map_err(|e| named(&e, "sync file", path))
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
    let tmp = temp_with(dir_of(path), bytes, mode, sync)?;
    tmp.persist(path)
        .map_err(|e| named(&e.error, "rename into", path))?;
    Ok(())
}

/// A temp file beside the target holding `bytes`.
fn temp_with(
    dir: &Path,
    bytes: &[u8],
    mode: Option<std::fs::Permissions>,
    sync: bool,
) -> io::Result<tempfile::NamedTempFile> {
    let mut tmp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        // tempfile's own errors name the temp file.
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    if let Some(mode) = mode {
        tmp.as_file()
            .set_permissions(mode)
            .map_err(|e| named(&e, "set permissions for file", tmp.path()))?;
    }
    if sync {
        sync_temp(&tmp, tmp.path())?;
    }
    Ok(tmp)
}

/// Appends `bytes` with a single `write` on an `O_APPEND` file (creating it and its folder),
/// so concurrent writers of whole lines never interleave within a line.
/// These are spex's own files (logs, event logs, indexes in the store): a new one is private
/// (0600, its new folders 0700).
pub fn append(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use fs_err::os::unix::fs::OpenOptionsExt as _;
    let mut options = fs_err::OpenOptions::new();
    options.create(true).append(true).mode(PRIVATE_FILE);
    let mut file = match open_lean(&options, path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            create_private_dir_all(path.parent().unwrap_or(path))?;
            open_lean(&options, path)
        }
        other => other,
    }?;
    file.write_all(bytes)
        .map_err(|e| named(&e, "append to", path))
}

/// Appends like [`append`], keeping the file under `limit` bytes: when the line would cross it,
/// the file first becomes `<name>.1` (replacing the previous segment) and a new one starts. The
/// line being appended is never lost; what is kept is this segment and the one before.
/// Returns whether the file was readable by others (an older spex made it so): it is made
/// private, and the caller may tighten what lies around it.
pub fn append_bounded(path: &Path, bytes: &[u8], limit: u64) -> io::Result<bool> {
    let mut loose = false;
    if let Ok(meta) = fs_err::metadata(path) {
        if meta.permissions().mode() & 0o077 != 0 {
            loose = true;
            fs_err::set_permissions(path, std::fs::Permissions::from_mode(PRIVATE_FILE))?;
        }
        if meta.len() > 0 && meta.len() + bytes.len() as u64 > limit {
            fs_err::rename(path, previous_segment(path))?;
        }
    }
    append(path, bytes)?;
    Ok(loose)
}

/// The mode of every file spex creates in its store: its prompts and commands are private.
pub const PRIVATE_FILE: u32 = 0o600;
/// The mode of every folder spex creates in its store.
pub const PRIVATE_DIR: u32 = 0o700;

/// Creates `dir` and its missing parents, each private (0700).
pub fn create_private_dir_all(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR)
        .create(dir)
        .map_err(|e| named(&e, "create directory", dir))
}

/// [`write_atomic`] for spex's own files: the file private (0600) whether new or not, its new
/// folders 0700.
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<bool> {
    let private = std::fs::Permissions::from_mode(PRIVATE_FILE);
    if read_opt(path)?.as_deref() == Some(bytes) {
        if fs_err::metadata(path)?.permissions().mode() & 0o777 != PRIVATE_FILE {
            fs_err::set_permissions(path, private)?;
        }
        return Ok(false);
    }
    create_private_dir_all(dir_of(path))?;
    rename_into(path, bytes, Some(private), true)?;
    Ok(true)
}

/// Makes the file at `path` private (0600).
pub fn make_private(path: &Path) -> io::Result<()> {
    fs_err::set_permissions(path, std::fs::Permissions::from_mode(PRIVATE_FILE))
}

/// Makes every folder under `root` (itself included) 0700 and every file 0600, where others
/// could read them: a store an older spex wrote, tightened once.
pub fn tighten(root: &Path) {
    for e in walkdir::WalkDir::new(root)
        .into_iter()
        .filter_map(Result::ok)
    {
        let Ok(meta) = e.metadata() else { continue };
        let mode = meta.permissions().mode();
        let want = if meta.is_dir() {
            PRIVATE_DIR
        } else if meta.is_file() {
            PRIVATE_FILE | (mode & 0o100)
        } else {
            continue;
        };
        if mode & 0o077 != 0 {
            let _ = fs_err::set_permissions(e.path(), std::fs::Permissions::from_mode(want));
        }
    }
}

/// `<path>.1`: where [`append_bounded`] keeps the previous segment.
pub fn previous_segment(path: &Path) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".1");
    name.into()
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
    fs_err::remove_dir(path).is_ok()
}

/// Creates `dir` (its parents as the umask makes them) with the folder itself born 0700, so
/// no other process (another spex starting at the same moment included) ever sees it open.
/// A folder that already exists is left as it is: the caller checks what it found.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs_err::create_dir_all(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(named(&e, "create directory", dir)),
        Ok(()) => Ok(()),
    }
}

/// Blocks until `check` gives a value, `deadline` passes, or `also` (a file descriptor such as
/// a signal pipe) becomes readable (then `None`), waking on every change in `dirs` (inotify:
/// a file created, renamed in or written), never polling. A folder that cannot be watched is
/// left out; with none left it is still woken by `also` and the deadline.
pub fn wait_on<T>(
    dirs: &[&Path],
    deadline: std::time::Instant,
    also: Option<std::os::fd::BorrowedFd<'_>>,
    mut check: impl FnMut() -> Option<T>,
) -> io::Result<Option<T>> {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    use rustix::fs::inotify;
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)?;
    for dir in dirs {
        let _ = inotify::add_watch(
            &fd,
            *dir,
            inotify::WatchFlags::MOVED_TO
                | inotify::WatchFlags::MODIFY
                | inotify::WatchFlags::CREATE
                | inotify::WatchFlags::DELETE,
        );
    }
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
    loop {
        if let Some(v) = check() {
            return Ok(Some(v));
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        let timeout = Timespec::try_from(left).ok();
        let mut fds = vec![PollFd::new(&fd, PollFlags::IN)];
        if let Some(a) = also {
            fds.push(PollFd::from_borrowed_fd(a, PollFlags::IN));
        }
        let _ = poll(&mut fds, timeout.as_ref());
        if fds.get(1).is_some_and(|f| !f.revents().is_empty()) {
            return Ok(None);
        }
        let mut reader = inotify::Reader::new(&fd, &mut buf);
        while reader.next().is_ok() {}
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    /// Two spex processes starting at once both create the runtime folder: neither may see it
    /// with the umask's mode, however their calls interleave.
    #[test]
    fn a_private_dir_is_never_seen_open_by_a_racing_creator() {
        for round in 0..20 {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join(format!("run{round}")).join("spex");
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    let dir = dir.clone();
                    std::thread::spawn(move || {
                        super::create_private_dir(&dir).unwrap();
                        fs_err::metadata(&dir).unwrap().permissions().mode() & 0o777
                    })
                })
                .collect();
            for t in threads {
                assert_eq!(t.join().unwrap(), 0o700, "round {round}");
            }
        }
    }
}
