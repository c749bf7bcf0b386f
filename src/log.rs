//! The log of a long-lived process (the PTY host `spex host`, the harness-server supervisor
//! `spex serve`, and what comes after them): one timestamped line per [`log!`]. It owns the
//! line's form only; it knows no session or harness, and never writes to stdout (a protocol).
//!
//! Such a process's starter points its stderr at its log file (`host.log`,
//! `servers/<harness>.log`), so the line goes to stderr, where a panic's message and a child's
//! output land too: one file tells the whole story in order.

use std::io::Write as _;

/// Writes one line to this process's log: the time (RFC 3339, UTC, milliseconds), a space,
/// then the message as `format!` makes it.
macro_rules! log {
    ($($arg:tt)*) => {
        $crate::log::line(::std::format_args!($($arg)*))
    };
}
pub(crate) use log;

/// The line [`log!`] writes, in one `write`, so the lines of several threads never interleave.
/// A log that cannot be written (stderr closed) fails nothing.
pub fn line(message: std::fmt::Arguments<'_>) {
    let line = format!(
        "{} {message}\n",
        humantime::format_rfc3339_millis(std::time::SystemTime::now())
    );
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
