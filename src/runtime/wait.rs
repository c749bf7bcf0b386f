//! Waiting on a session's folder until its record says something (inotify, never polling),
//! and the Ctrl-C that cancels such a wait.

use std::path::Path;
use std::time::{Duration, Instant};

use super::error::{RuntimeError, io};

/// Set by Ctrl-C once [`catch_interrupt`] made it cancel instead of kill.
static INTERRUPTED: std::sync::OnceLock<std::sync::Arc<std::sync::atomic::AtomicBool>> =
    std::sync::OnceLock::new();

/// From now on the first Ctrl-C (SIGINT) does not kill this process: it cancels the waits of
/// `launch` and `deliver`, which end with `Cancelled`, so the caller can stop what it started
/// and say so. A second Ctrl-C kills as usual.
pub fn catch_interrupt() -> std::io::Result<()> {
    use signal_hook::consts::SIGINT;
    let flag = INTERRUPTED.get_or_init(std::sync::Arc::default);
    // The order matters: the default action runs only once the flag is already set.
    signal_hook::flag::register_conditional_default(SIGINT, std::sync::Arc::clone(flag))?;
    signal_hook::flag::register(SIGINT, std::sync::Arc::clone(flag))?;
    Ok(())
}

/// Whether Ctrl-C was pressed since [`catch_interrupt`].
pub fn interrupted() -> bool {
    INTERRUPTED
        .get()
        .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
}

/// Blocks until `check` gives an answer or `deadline` passes (or Ctrl-C was pressed, see
/// [`catch_interrupt`]), waking on every change in the
/// session's folder (inotify: the record is replaced, the event log appended), never polling.
pub fn wait_for<T>(
    dir: &Path,
    deadline: Instant,
    check: impl FnMut() -> Option<T>,
) -> Result<Option<T>, RuntimeError> {
    wait_in(dir, deadline, true, check)
}

/// [`wait_for`], cut short by Ctrl-C only when `cancellable`: the wait for a stop that a
/// Ctrl-C asked for must not end because of that same Ctrl-C.
pub(super) fn wait_in<T>(
    dir: &Path,
    deadline: Instant,
    cancellable: bool,
    mut check: impl FnMut() -> Option<T>,
) -> Result<Option<T>, RuntimeError> {
    use rustix::fs::inotify;
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)
        .map_err(|e| io(dir)(e.into()))?;
    inotify::add_watch(
        &fd,
        dir,
        inotify::WatchFlags::MOVED_TO | inotify::WatchFlags::MODIFY | inotify::WatchFlags::CREATE,
    )
    .map_err(|e| io(dir)(e.into()))?;
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
    loop {
        if let Some(v) = check() {
            return Ok(Some(v));
        }
        let mut left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || (cancellable && interrupted()) {
            return Ok(None);
        }
        if cancellable && INTERRUPTED.get().is_some() {
            // The signal may land on another thread, which leaves this poll asleep.
            left = left.min(Duration::from_millis(200));
        }
        let mut fds = [rustix::event::PollFd::new(
            &fd,
            rustix::event::PollFlags::IN,
        )];
        let timeout = rustix::event::Timespec::try_from(left).ok();
        let _ = rustix::event::poll(&mut fds, timeout.as_ref());
        let mut reader = inotify::Reader::new(&fd, &mut buf);
        while reader.next().is_ok() {}
    }
}
