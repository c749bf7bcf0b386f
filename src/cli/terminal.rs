//! This terminal joined to a hosted session: raw mode, the session's stream and this
//! terminal's keys and window changes, until the detach key; shared by `attach`, `launch` and
//! `resume`. Imports no subcommand.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use crate::env::Env;
use crate::pty::terminal::Terminal;
use crate::runtime::protocol::Request;
use crate::runtime::{Client, RuntimeError};

/// The detach key the configuration of the checkout at `tree` names (`Ctrl-\` by default, and
/// when the configuration cannot be read: attaching must not fail on it).
pub fn detach_key(env: &Env, tree: &Path) -> u8 {
    let root = crate::repo::Tree::discover(tree).map_or_else(
        |_| tree.to_owned(),
        |t| crate::config::source_root(&t.root, &t.main),
    );
    crate::config::load(&env.user_config_file(), &root, &crate::adapters::known())
        .map_or(crate::config::DETACH_KEY, |c| c.detach_key)
}

/// How an attached terminal came to leave.
enum Left {
    /// The person typed the detach key (or closed this terminal's input).
    Detached,
    /// The host closed the stream: the session ended, or the host dropped this terminal.
    Closed,
}

/// Streams session `id` to this terminal (raw mode) until the user types `detach` or the
/// session ends, however long it is quiet; then gives the terminal back as it found it and
/// says, in one line on a clean line, which of the two happened.
///
/// One thread waits on the session's stream, this terminal's input and window changes at
/// once, so exactly one of them ends the attachment and exactly one line says which.
pub fn attach(env: &Env, id: &str, detach: u8) -> anyhow::Result<()> {
    join(env, id, detach, false)
}

/// [`attach`] that only watches: the host drops what this terminal types and never resizes
/// the session to it; the session's screen is drawn at the session's size, cropped or padded
/// to this terminal's, on this terminal's alternate screen.
pub fn watch(env: &Env, id: &str, detach: u8) -> anyhow::Result<()> {
    join(env, id, detach, true)
}

fn join(env: &Env, id: &str, detach: u8, read_only: bool) -> anyhow::Result<()> {
    use rustix::termios;
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let size = termios::tcgetwinsize(&stdout).ok();
    let mut client = Client::connect(env, id)?;
    let answer = client.call(
        Request::Attach {
            rows: size.map_or(0, |s| s.ws_row),
            cols: size.map_or(0, |s| s.ws_col),
            read_only,
        },
        std::time::Duration::from_secs(10),
    )?;
    if !answer.ok {
        return Err(RuntimeError::Refused {
            id: id.to_owned(),
            message: answer.error.unwrap_or_default(),
        }
        .into());
    }
    let (reader, writer) = client.into_parts();
    // What the handshake read past its response line is the start of the stream.
    let early = reader.buffer().to_vec();
    let stream = reader.into_inner();
    // The handshake's timeout must not end a quiet session's stream.
    stream.set_read_timeout(None)?;
    let (rows, cols) = size
        .filter(|s| s.ws_row > 0 && s.ws_col > 0)
        .map_or((24, 80), |s| (s.ws_row, s.ws_col));
    // What this terminal shows, to know where a clean line is when we leave.
    let mut screen = Terminal::new(rows, cols);
    screen.set_answering(false);
    // A watcher draws the session's screen through a model at the session's size.
    let view = read_only.then(|| {
        let (r, c) = answer
            .snapshot
            .as_ref()
            .map_or((rows, cols), |s| (s.rows, s.cols));
        Terminal::watching(r, c)
    });
    let (winch, winch_tx) = UnixStream::pair()?;
    let _ = signal_hook::low_level::pipe::register(signal_hook::consts::SIGWINCH, winch_tx);
    winch.set_nonblocking(true)?;
    let original = termios::tcgetattr(&stdin).ok();
    if let Some(orig) = &original {
        let mut raw = orig.clone();
        raw.make_raw();
        let _ = termios::tcsetattr(&stdin, termios::OptionalActions::Now, &raw);
    }
    // People read the handle; `id` stays the full id for the calls below.
    let shown = super::args::project_and_id(env, id)
        .map_or_else(|_| id.to_owned(), |(s, _)| s.label_of(id));
    if read_only {
        eprint!(
            "[watching {shown}, read-only: {} detaches]\r\n",
            crate::config::control_key_name(detach)
        );
        // On this terminal's alternate screen: leaving gives back what it showed.
        let enter = b"\x1b[?1049h\x1b[H\x1b[2J";
        screen.feed(enter);
        let mut out = stdout.lock();
        let _ = out.write_all(enter).and_then(|()| out.flush());
    } else {
        eprint!(
            "[attached to {shown}: {} detaches]\r\n",
            crate::config::control_key_name(detach)
        );
    }
    let streams = Streams {
        session: &stream,
        keys: &writer,
        winch: &winch,
    };
    let mut view = View {
        screen: &mut screen,
        watched: view,
    };
    let left = pump(&streams, detach, &early, &mut view, env, id);
    let _ = writer.shutdown(std::net::Shutdown::Both);
    if let Some(orig) = &original {
        let _ = termios::tcsetattr(&stdin, termios::OptionalActions::Now, orig);
    }
    let mut out = stdout.lock();
    let _ = out.write_all(&screen.leave()).and_then(|()| out.flush());
    drop(out);
    match left {
        Left::Detached => eprint!("[detached from {shown}; it keeps running]\r\n"),
        // The host also drops a terminal that stalls it: then the session still answers.
        Left::Closed if crate::runtime::call(env, id, Request::Ping).is_ok() => {
            eprint!(
                "[disconnected from {shown}; it keeps running: `spex attach {shown}` comes back]\r\n"
            );
        }
        // A session held by a server outlives its terminal (the harness's UI quit).
        Left::Closed if lives_on(env, id) => {
            eprint!(
                "[the terminal of {shown} closed; the session keeps running: `spex attach {shown}` opens it again]\r\n"
            );
        }
        Left::Closed => eprint!("[session {shown} ended]\r\n"),
    }
    Ok(())
}

/// Whether session `id` still runs after its host closed (its record has not exited).
fn lives_on(env: &Env, id: &str) -> bool {
    // The session's own project, wherever the command runs.
    super::args::project_and_id(env, id)
        .ok()
        .and_then(|(store, _)| store.load(id).ok().flatten())
        .is_some_and(|s| s.status != crate::store::session::Status::Exited)
}

/// The attached connection (read: the session's output; write: keys) and the window-change
/// signal's pipe.
struct Streams<'a> {
    session: &'a UnixStream,
    keys: &'a UnixStream,
    winch: &'a UnixStream,
}

/// What this terminal shows (`screen`), and for a watcher the session's screen at the
/// session's size (`watched`), which is drawn onto it.
struct View<'a> {
    screen: &'a mut Terminal,
    watched: Option<Terminal>,
}

impl View<'_> {
    /// Shows the session's `bytes` on `out`: as they are, or, watching, the session's screen
    /// they leave drawn at this terminal's size.
    fn show(&mut self, out: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
        match &mut self.watched {
            None => {
                self.screen.feed(bytes);
                out.write_all(bytes)?;
            }
            Some(watched) => {
                watched.feed(bytes);
                let size = self.screen.snapshot();
                let drawn = watched.render(size.rows, size.cols);
                self.screen.feed(&drawn);
                out.write_all(&drawn)?;
            }
        }
        out.flush()
    }
}

/// Copies the session's stream to this terminal (and `screen`) and this terminal's keys to the
/// session until one side ends; window changes go to the session as they come (a watcher's
/// only redraw it: the session keeps its size).
fn pump(
    streams: &Streams<'_>,
    detach: u8,
    early: &[u8],
    view: &mut View<'_>,
    env: &Env,
    id: &str,
) -> Left {
    use rustix::event::{PollFd, PollFlags, poll};
    let mut out = std::io::stdout().lock();
    if view.show(&mut out, early).is_err() {
        return Left::Detached;
    }
    let stdin = std::io::stdin();
    let mut buf = [0u8; 8192];
    loop {
        let mut fds = [
            PollFd::new(streams.session, PollFlags::IN),
            PollFd::new(&stdin, PollFlags::IN),
            PollFd::new(streams.winch, PollFlags::IN),
        ];
        if poll(&mut fds, None).is_err() {
            // Interrupted by a signal: look again.
            continue;
        }
        let ready = |i: usize| !fds[i].revents().is_empty();
        let (session, keys, resized) = (ready(0), ready(1), ready(2));
        if session {
            match (&*streams.session).read(&mut buf) {
                Ok(0) | Err(_) => return Left::Closed,
                Ok(n) => {
                    if view.show(&mut out, &buf[..n]).is_err() {
                        return Left::Detached;
                    }
                }
            }
        }
        if keys {
            let n = match stdin.lock().read(&mut buf) {
                Ok(0) | Err(_) => return Left::Detached,
                Ok(n) => n,
            };
            let chunk = &buf[..n];
            let (send, detached) = match chunk.iter().position(|&b| b == detach) {
                Some(i) => (&chunk[..i], true),
                None => (chunk, false),
            };
            if (&*streams.keys).write_all(send).is_err() {
                return Left::Closed;
            }
            if detached {
                return Left::Detached;
            }
        }
        if resized {
            let mut drain = [0u8; 64];
            while matches!((&*streams.winch).read(&mut drain), Ok(n) if n > 0) {}
            if let Ok(size) = rustix::termios::tcgetwinsize(std::io::stdout()) {
                view.screen.resize(size.ws_row, size.ws_col);
                if view.watched.is_some() {
                    if view.show(&mut out, &[]).is_err() {
                        return Left::Detached;
                    }
                    continue;
                }
                let _ = crate::runtime::call(
                    env,
                    id,
                    Request::Resize {
                        rows: size.ws_row,
                        cols: size.ws_col,
                    },
                );
            }
        }
    }
}
