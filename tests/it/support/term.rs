//! A terminal a test owns: runs a command in a PTY of a given size, as a person's terminal
//! emulator would, and reads what the program drew (a `vt100` screen plus every raw byte).
//! It answers the queries a TUI sends (cursor position, device attributes, colors, the kitty
//! keyboard protocol), so a program waiting for its terminal never stalls, and it reports the
//! modes the program left set, so a test can check the terminal was restored.
//!
//! ```ignore
//! let mut t = Term::spawn(&w.cmd(&w.repo, &["attach", id]), 40, 120);
//! t.wait_until(Duration::from_secs(20), |v| v.text().contains("shortcuts")).unwrap();
//! let mark = t.mark();
//! t.send(b"\x1c");
//! t.exit_within(Duration::from_secs(10)).expect("detached");
//! assert_eq!(t.modes(), Modes::RESTORED, "{}", t.diag());
//! ```

use std::io::{Read, Write};
use std::process::Command;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use portable_pty::{Child, CommandBuilder, ExitStatus, MasterPty, PtySize, native_pty_system};

/// Replies to the terminal queries a TUI sends; a real terminal would answer them.
#[derive(Default)]
pub struct Answers {
    replies: Vec<u8>,
}

impl vt100::Callbacks for Answers {
    fn unhandled_csi(
        &mut self,
        screen: &mut vt100::Screen,
        i1: Option<u8>,
        _: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        let first = params.first().and_then(|p| p.first()).copied();
        let reply = match (i1, c, first) {
            (None, 'n', Some(6)) => {
                let (row, col) = screen.cursor_position();
                format!("\x1b[{};{}R", row + 1, col + 1)
            }
            (None, 'n', Some(5)) => "\x1b[0n".to_owned(),
            (None, 'c', None | Some(0)) => "\x1b[?62;22c".to_owned(),
            (Some(b'>'), 'c', None | Some(0)) => "\x1b[>0;0;0c".to_owned(),
            (Some(b'?'), 'u', _) => "\x1b[?0u".to_owned(),
            _ => return,
        };
        self.replies.extend_from_slice(reply.as_bytes());
    }

    fn unhandled_osc(&mut self, _: &mut vt100::Screen, params: &[&[u8]]) {
        if params.get(1) != Some(&&b"?"[..]) {
            return;
        }
        let color = match params.first() {
            Some(&b"10") => "10;rgb:ffff/ffff/ffff",
            Some(&b"11") => "11;rgb:0000/0000/0000",
            _ => return,
        };
        self.replies
            .extend_from_slice(format!("\x1b]{color}\x1b\\").as_bytes());
    }
}

/// A screen model that answers queries, for a test that reads a PTY itself: feed it each
/// chunk of output and write back what it returns.
pub struct Answerer(vt100::Parser<Answers>);

impl Answerer {
    pub fn new(rows: u16, cols: u16) -> Answerer {
        Answerer(vt100::Parser::new_with_callbacks(
            rows,
            cols,
            0,
            Answers::default(),
        ))
    }

    /// The replies owed for `chunk` (queries split across chunks are answered once whole).
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.0.process(chunk);
        std::mem::take(&mut self.0.callbacks_mut().replies)
    }
}

/// The terminal modes a program can leave set; [`Modes::RESTORED`] is a fresh terminal's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "each is one independent mode a terminal has"
)]
pub struct Modes {
    pub cursor_hidden: bool,
    pub bracketed_paste: bool,
    pub alternate_screen: bool,
    pub mouse_reporting: bool,
    pub application_keypad: bool,
    pub application_cursor: bool,
    /// The line discipline is not cooked (raw mode: no `ICANON` or no `ECHO`).
    pub raw_termios: bool,
}

impl Modes {
    pub const RESTORED: Modes = Modes {
        cursor_hidden: false,
        bracketed_paste: false,
        alternate_screen: false,
        mouse_reporting: false,
        application_keypad: false,
        application_cursor: false,
        raw_termios: false,
    };
}

/// What the terminal holds at one moment: the screen and every byte the program wrote.
pub struct View<'a> {
    pub screen: &'a vt100::Screen,
    pub raw: &'a [u8],
    /// The program closed its side (it and everything sharing the PTY exited).
    pub closed: bool,
}

impl View<'_> {
    /// The screen's text, rows joined by newlines.
    pub fn text(&self) -> String {
        self.screen.contents()
    }

    /// The raw output from byte `mark` on, escapes made visible (`^[`).
    pub fn since(&self, mark: usize) -> String {
        visible(&self.raw[mark.min(self.raw.len())..])
    }
}

struct Shared {
    parser: vt100::Parser<Answers>,
    raw: Vec<u8>,
    closed: bool,
}

/// A command running in a PTY the test owns; killed (its process group) on drop.
pub struct Term {
    child: Box<dyn Child + Send + Sync>,
    master: Box<dyn MasterPty + Send>,
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    shared: Arc<(Mutex<Shared>, Condvar)>,
    /// The slave side's path, to read its termios.
    tty: Option<std::path::PathBuf>,
}

impl Term {
    /// Runs `cmd` (its program, arguments, explicitly set environment, which is all the child
    /// gets, and working folder) in a new `rows` x `cols` PTY.
    pub fn spawn(cmd: &Command, rows: u16, cols: u16) -> Term {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let mut builder = CommandBuilder::new(cmd.get_program());
        builder.args(cmd.get_args());
        builder.env_clear();
        for (k, v) in cmd.get_envs() {
            if let Some(v) = v {
                builder.env(k, v);
            }
        }
        if let Some(dir) = cmd.get_current_dir() {
            builder.cwd(dir);
        }
        let child = pair.slave.spawn_command(builder).unwrap_or_else(|e| {
            panic!("spawn {}: {e}", cmd.get_program().to_string_lossy());
        });
        drop(pair.slave);
        let tty = pair.master.tty_name();
        let mut reader = pair.master.try_clone_reader().expect("pty reader");
        let writer = Arc::new(Mutex::new(pair.master.take_writer().expect("pty writer")));
        let shared = Arc::new((
            Mutex::new(Shared {
                parser: vt100::Parser::new_with_callbacks(rows, cols, 0, Answers::default()),
                raw: Vec::new(),
                closed: false,
            }),
            Condvar::new(),
        ));
        let (sink, replies) = (Arc::clone(&shared), Arc::clone(&writer));
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                let n = reader.read(&mut buf).unwrap_or(0);
                let (lock, cvar) = &*sink;
                let mut s = lock.lock().unwrap();
                if n == 0 {
                    s.closed = true;
                    cvar.notify_all();
                    return;
                }
                s.raw.extend_from_slice(&buf[..n]);
                s.parser.process(&buf[..n]);
                let reply = std::mem::take(&mut s.parser.callbacks_mut().replies);
                drop(s);
                cvar.notify_all();
                if !reply.is_empty() {
                    let mut wr = replies.lock().unwrap();
                    let _ = wr.write_all(&reply).and_then(|()| wr.flush());
                }
            }
        });
        Term {
            child,
            master: pair.master,
            writer,
            shared,
            tty,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.process_id().expect("the child has a pid")
    }

    /// Types `bytes` (keys, a paste) into the program.
    pub fn send(&self, bytes: &[u8]) {
        let mut wr = self.writer.lock().unwrap();
        wr.write_all(bytes)
            .and_then(|()| wr.flush())
            .expect("write to the terminal");
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.0.lock().unwrap()
    }

    /// The screen's text now.
    pub fn text(&self) -> String {
        self.lock().parser.screen().contents()
    }

    /// A mark in the raw output: its length now (see [`Term::since`]).
    pub fn mark(&self) -> usize {
        self.lock().raw.len()
    }

    /// The raw output after `mark`, escapes made visible (`^[`).
    pub fn since(&self, mark: usize) -> String {
        let s = self.lock();
        visible(&s.raw[mark.min(s.raw.len())..])
    }

    /// The raw output after `mark`, exactly as written.
    pub fn raw_since(&self, mark: usize) -> Vec<u8> {
        let s = self.lock();
        s.raw[mark.min(s.raw.len())..].to_vec()
    }

    /// The modes the program has left set in this terminal.
    pub fn modes(&self) -> Modes {
        let raw_termios = self.tty.as_ref().is_some_and(|tty| {
            let Ok(f) = std::fs::File::open(tty) else {
                return false;
            };
            rustix::termios::tcgetattr(&f).is_ok_and(|t| {
                use rustix::termios::LocalModes;
                !t.local_modes
                    .contains(LocalModes::ICANON | LocalModes::ECHO)
            })
        });
        let s = self.lock();
        let screen = s.parser.screen();
        Modes {
            cursor_hidden: screen.hide_cursor(),
            bracketed_paste: screen.bracketed_paste(),
            alternate_screen: screen.alternate_screen(),
            mouse_reporting: screen.mouse_protocol_mode() != vt100::MouseProtocolMode::None,
            application_keypad: screen.application_keypad(),
            application_cursor: screen.application_cursor(),
            raw_termios,
        }
    }

    /// Waits until `pred` holds of what the terminal shows (checked on every output and every
    /// 100 ms); on timeout, [`Term::diag`] with what was waited for.
    pub fn wait_until(
        &self,
        timeout: Duration,
        pred: impl Fn(&View<'_>) -> bool,
    ) -> Result<(), String> {
        let end = Instant::now() + timeout;
        let (lock, cvar) = &*self.shared;
        let mut s = lock.lock().unwrap();
        loop {
            let view = View {
                screen: s.parser.screen(),
                raw: &s.raw,
                closed: s.closed,
            };
            if pred(&view) {
                return Ok(());
            }
            let now = Instant::now();
            if now >= end {
                drop(s);
                return Err(format!("waited {timeout:?} in vain\n{}", self.diag()));
            }
            let step = (end - now).min(Duration::from_millis(100));
            s = cvar.wait_timeout(s, step).unwrap().0;
        }
    }

    /// Waits for `needle` on the screen.
    pub fn wait_for(&self, needle: &str, timeout: Duration) -> Result<(), String> {
        self.wait_until(timeout, |v| v.text().contains(needle))
            .map_err(|e| format!("`{needle}` never showed: {e}"))
    }

    /// Resizes the terminal (the program gets `SIGWINCH`).
    pub fn resize(&self, rows: u16, cols: u16) {
        self.master
            .resize(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("resize the pty");
        self.lock().parser.screen_mut().set_size(rows, cols);
    }

    /// Whether the program still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The program's exit status once it has exited within `timeout`; `None` if it still runs.
    pub fn exit_within(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let end = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                // What it wrote last (a goodbye line) may still be on its way through the PTY:
                // read on until its side is closed (briefly, should something else hold it).
                let _ = self.wait_until(Duration::from_secs(2), |v| v.closed);
                return Some(status);
            }
            if Instant::now() >= end {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What a failure message needs: the screen, the modes and the raw output's tail.
    pub fn diag(&self) -> String {
        let modes = self.modes();
        let s = self.lock();
        let tail = &s.raw[s.raw.len().saturating_sub(2000)..];
        format!(
            "--- screen ({:?}, closed: {}):\n{}\n--- modes: {modes:?}\n--- raw tail:\n{}",
            s.parser.screen().size(),
            s.closed,
            s.parser.screen().contents(),
            visible(tail)
        )
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        if let Some(pid) = self.child.process_id() {
            // The child leads its own session and process group (portable-pty's setsid).
            let _ = Command::new("kill")
                .args(["-9", "--", &format!("-{pid}")])
                .stderr(std::process::Stdio::null())
                .status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `bytes` as text with ESC shown as `^[` (and other controls but newline as `^X`).
pub fn visible(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .chars()
        .map(|c| match c {
            '\x1b' => "^[".to_owned(),
            '\n' | '\t' => c.to_string(),
            c if (c as u32) < 0x20 => format!("^{}", char::from(b'@' + c as u8)),
            c => c.to_string(),
        })
        .collect()
}
