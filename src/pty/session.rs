//! The raw PTY session: spawn a program with argv/env/cwd and a size in its own session and
//! process group, write input, resize, read output, signal, wait with a timeout, kill and reap.
//! Output is read on its own thread (blocking reads), as portable-pty expects.

use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};

use super::tee::{Event, Tee};

#[derive(Debug, thiserror::Error)]
pub enum PtyError {
    #[error("cannot open a pseudo-terminal: {0}")]
    Open(String),
    #[error("cannot start `{program}` in `{cwd}`: {message}")]
    Spawn {
        program: String,
        cwd: PathBuf,
        message: String,
    },
}

/// Rows and columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    pub rows: u16,
    pub cols: u16,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Spawn {
    pub argv: Vec<OsString>,
    pub cwd: PathBuf,
    /// Start from an empty environment instead of this process's.
    pub env_clear: bool,
    /// Set after `env_remove` is applied.
    pub env: Vec<(OsString, OsString)>,
    /// Removed from the inherited environment (session-identity variables, say).
    pub env_remove: Vec<OsString>,
    pub size: Size,
}

/// How the program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

/// What one read gave.
#[cfg(test)]
#[derive(Debug, PartialEq, Eq)]
pub enum Chunk {
    Data(Vec<u8>),
    /// Nothing arrived before the timeout.
    Timeout,
    /// The program closed the terminal (it exited, or every holder closed it).
    Closed,
}

pub struct Session {
    master: Box<dyn MasterPty + Send>,
    writer: Box<dyn Write + Send>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
    output: Receiver<Vec<u8>>,
    pid: u32,
    tee: Option<Tee>,
    exit: Option<Exit>,
}

fn pty_size(size: Size) -> PtySize {
    PtySize {
        rows: size.rows,
        cols: size.cols,
        pixel_width: 0,
        pixel_height: 0,
    }
}

impl Session {
    /// Starts `spec` on a new PTY; everything that crosses it is recorded to `tee`.
    pub fn spawn(spec: &Spawn, tee: Option<Tee>) -> Result<Session, PtyError> {
        let open = |e: &dyn std::fmt::Display| PtyError::Open(e.to_string());
        let pair = native_pty_system()
            .openpty(pty_size(spec.size))
            .map_err(|e| open(&e))?;
        let mut cmd = CommandBuilder::from_argv(spec.argv.clone());
        if spec.env_clear {
            cmd.env_clear();
        }
        for name in &spec.env_remove {
            cmd.env_remove(name);
        }
        for (k, v) in &spec.env {
            cmd.env(k, v);
        }
        cmd.cwd(&spec.cwd);
        // portable-pty's child calls setsid(): it leads its own session and process group.
        let child = pair.slave.spawn_command(cmd).map_err(|e| PtyError::Spawn {
            program: spec
                .argv
                .first()
                .map(|a| a.to_string_lossy().into_owned())
                .unwrap_or_default(),
            cwd: spec.cwd.clone(),
            message: e.to_string(),
        })?;
        // Only the child holds the slave now, so its exit closes our reads.
        drop(pair.slave);
        let pid = child.process_id().unwrap_or(0);
        let mut reader = pair.master.try_clone_reader().map_err(|e| open(&e))?;
        let writer = pair.master.take_writer().map_err(|e| open(&e))?;
        let (tx, output) = mpsc::channel();
        // Before any output: a recording scrubs the pid from the first byte on (a note for
        // the recorder, `process`, not a record of a stream).
        if let Some(tee) = &tee {
            tee.record(Event::Mark {
                stream: "process".into(),
                data: serde_json::json!({ "pid": pid }),
            });
        }
        let reader_tee = tee.clone();
        std::thread::Builder::new()
            .name(format!("pty-read-{pid}"))
            .spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match reader.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let bytes = buf[..n].to_vec();
                            if let Some(tee) = &reader_tee {
                                tee.record(Event::Output {
                                    bytes: bytes.clone(),
                                });
                            }
                            if tx.send(bytes).is_err() {
                                break;
                            }
                        }
                    }
                }
            })
            .map_err(|e| open(&e))?;
        Ok(Session {
            master: pair.master,
            writer,
            child,
            output,
            pid,
            tee,
            exit: None,
        })
    }

    /// Hands the output stream to its own reader (a pump thread that blocks on it while others
    /// write); `read` then reports `Closed`.
    pub fn take_output(&mut self) -> Receiver<Vec<u8>> {
        let (_, closed) = mpsc::channel();
        std::mem::replace(&mut self.output, closed)
    }

    /// The program's pid (also its process group id).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    fn record(&self, event: Event) {
        if let Some(tee) = &self.tee {
            tee.record(event);
        }
    }

    /// Writes `bytes` to the program's terminal.
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.record(Event::Input {
            bytes: bytes.to_vec(),
        });
        self.writer.write_all(bytes)?;
        self.writer.flush()
    }

    pub fn resize(&mut self, size: Size) -> io::Result<()> {
        self.record(Event::Resize {
            rows: size.rows,
            cols: size.cols,
        });
        self.master
            .resize(pty_size(size))
            .map_err(|e| io::Error::other(e.to_string()))
    }

    /// The next output chunk, waiting at most `timeout` (the host takes the stream instead).
    #[cfg(test)]
    pub fn read(&mut self, timeout: Duration) -> Chunk {
        match self.output.recv_timeout(timeout) {
            Ok(bytes) => Chunk::Data(bytes),
            Err(mpsc::RecvTimeoutError::Timeout) => Chunk::Timeout,
            Err(mpsc::RecvTimeoutError::Disconnected) => Chunk::Closed,
        }
    }

    /// Sends `signal` to the program's whole process group.
    pub fn signal(&mut self, signal: rustix::process::Signal) -> io::Result<()> {
        self.record(Event::Signal {
            signal: signal.as_raw(),
        });
        let pid = rustix::process::Pid::from_raw(i32::try_from(self.pid).unwrap_or(0))
            .ok_or_else(|| io::Error::other("the program has no pid"))?;
        match rustix::process::kill_process_group(pid, signal) {
            // Already gone: nothing to signal.
            Err(rustix::io::Errno::SRCH) => Ok(()),
            other => other.map_err(io::Error::from),
        }
    }

    /// Whether any process of the program's process group is left (the program itself, or what
    /// it started and left behind after it ended: the group outlives its leader).
    pub fn group_alive(&self) -> bool {
        let Some(pid) = rustix::process::Pid::from_raw(i32::try_from(self.pid).unwrap_or(0)) else {
            return false;
        };
        if rustix::process::test_kill_process_group(pid).is_err() {
            return false;
        }
        // A zombie counts for `kill`, but runs nothing: only a living member keeps the group.
        let Ok(procs) = fs_err::read_dir("/proc") else {
            return true;
        };
        procs.flatten().any(|p| {
            fs_err::read_to_string(p.path().join("stat")).is_ok_and(|stat| {
                // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses.
                let mut rest = stat
                    .rsplit_once(')')
                    .map_or("", |(_, r)| r)
                    .split_whitespace();
                let state = rest.next();
                let pgrp = rest.nth(1).and_then(|g| g.parse::<u32>().ok());
                pgrp == Some(self.pid) && state != Some("Z")
            })
        })
    }

    /// The exit, once the program has ended (reaped here, recorded once).
    pub fn try_wait(&mut self) -> io::Result<Option<Exit>> {
        if self.exit.is_some() {
            return Ok(self.exit);
        }
        // The real status (with the signal number) comes from std's child, which portable-pty
        // uses on Unix.
        let child: &mut dyn portable_pty::Child = &mut *self.child;
        let status = match child.downcast_mut::<std::process::Child>() {
            Some(std_child) => std_child.try_wait()?.map(|s| Exit {
                code: s.code(),
                signal: s.signal(),
            }),
            None => self.child.try_wait()?.map(|s| Exit {
                code: i32::try_from(s.exit_code()).ok(),
                signal: None,
            }),
        };
        if let Some(exit) = status {
            self.exit = Some(exit);
            self.record(Event::Exit {
                code: exit.code,
                signal: exit.signal,
            });
        }
        Ok(status)
    }

    /// Waits for the program to end, at most `timeout`.
    pub fn wait_timeout(&mut self, timeout: Duration) -> io::Result<Option<Exit>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(exit) = self.try_wait()? {
                return Ok(Some(exit));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGKILL to the process group, then reap.
    pub fn kill(&mut self) -> io::Result<Exit> {
        if let Some(exit) = self.try_wait()? {
            return Ok(exit);
        }
        self.signal(rustix::process::Signal::KILL)?;
        loop {
            if let Some(exit) = self.wait_timeout(Duration::from_secs(5))? {
                return Ok(exit);
            }
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Never leave a program (or its children) running or a zombie behind.
        let _ = self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pty::tee::Memory;
    use crate::pty::terminal::Terminal;

    fn spec(argv: &[&str]) -> Spawn {
        Spawn {
            argv: argv.iter().map(OsString::from).collect(),
            cwd: std::env::temp_dir(),
            env_clear: false,
            env: vec![("TERM".into(), "xterm-256color".into())],
            env_remove: Vec::new(),
            size: Size { rows: 24, cols: 80 },
        }
    }

    /// Reads into `term` (answering its queries) until `done` holds or `timeout` passes.
    fn pump(
        s: &mut Session,
        term: &mut Terminal,
        timeout: Duration,
        done: impl Fn(&Terminal) -> bool,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            match s.read(Duration::from_millis(50)) {
                Chunk::Data(bytes) => {
                    let replies = term.feed(&bytes);
                    if !replies.is_empty() {
                        s.write(&replies).unwrap();
                    }
                }
                Chunk::Closed => return done(term),
                Chunk::Timeout => {}
            }
            if done(term) {
                return true;
            }
        }
        false
    }

    #[test]
    fn cat_echoes_input_and_ends_on_eof() {
        let tee = Tee::new();
        let memory = Memory::default();
        tee.add_sink(Box::new(memory.clone()));
        let mut s = Session::spawn(&spec(&["cat"]), Some(tee)).unwrap();
        let mut term = Terminal::new(24, 80);
        s.write(b"hello pty\r").unwrap();
        assert!(pump(&mut s, &mut term, Duration::from_secs(10), |t| {
            t.text().matches("hello pty").count() == 2
        }));
        s.write(&[4]).unwrap();
        let exit = s.wait_timeout(Duration::from_secs(10)).unwrap().unwrap();
        assert_eq!(
            exit,
            Exit {
                code: Some(0),
                signal: None
            }
        );
        let seen = memory.observations();
        assert!(seen.iter().enumerate().all(|(i, o)| o.seq == i as u64));
        // The program's pid first (a recording scrubs it from the first byte), then the input.
        assert!(
            matches!(&seen[0].event, Event::Mark { stream, data } if stream == "process" && data["pid"] == s.pid())
        );
        assert!(matches!(seen[1].event, Event::Input { .. }));
        assert!(matches!(seen.last().unwrap().event, Event::Exit { .. }));
        assert!(
            seen.iter()
                .any(|o| matches!(&o.event, Event::Output { .. }))
        );
    }

    #[test]
    fn program_sees_size_env_cwd_and_resize() {
        let dir = tempfile::tempdir().unwrap();
        let mut sp = spec(&[
            "sh",
            "-c",
            "stty size; pwd; echo \"v=$SPEX_T u=${HOME-none}\"; read x; stty size",
        ]);
        sp.cwd = dir.path().to_owned();
        sp.env.push(("SPEX_T".into(), "yes".into()));
        // Inherited from the test's environment, removed for the program.
        sp.env_remove.push("HOME".into());
        sp.size = Size {
            rows: 30,
            cols: 100,
        };
        let mut s = Session::spawn(&sp, None).unwrap();
        let mut term = Terminal::new(30, 100);
        assert!(
            pump(&mut s, &mut term, Duration::from_secs(10), |t| {
                t.text().contains("v=yes u=none")
            }),
            "{}",
            term.text()
        );
        let text = term.text();
        assert!(text.contains("30 100"), "{text}");
        let cwd = dir.path().canonicalize().unwrap();
        assert!(text.contains(cwd.to_str().unwrap()), "{text}");
        s.resize(Size {
            rows: 40,
            cols: 120,
        })
        .unwrap();
        term.resize(40, 120);
        s.write(b"\r").unwrap();
        assert!(
            pump(&mut s, &mut term, Duration::from_secs(10), |t| {
                t.text().contains("40 120")
            }),
            "{}",
            term.text()
        );
    }

    #[test]
    fn a_detached_program_gets_its_query_answered() {
        // Waits for the DA1 reply before printing: it would hang if nobody answered.
        let script = "import os,sys,tty; tty.setraw(0); os.write(1,b'\\x1b[c'); r=b''\n\
                      while not r.endswith(b'c'): r+=os.read(0,1)\n\
                      os.write(1,b'\\r\\nreply '+r[1:]+b'\\r\\n')";
        let mut s = Session::spawn(&spec(&["python3", "-c", script]), None).unwrap();
        let mut term = Terminal::new(24, 80);
        assert!(
            pump(&mut s, &mut term, Duration::from_secs(10), |t| {
                t.text().contains("reply [?62;22c")
            }),
            "{}",
            term.text()
        );
        assert_eq!(
            s.wait_timeout(Duration::from_secs(10))
                .unwrap()
                .unwrap()
                .code,
            Some(0)
        );
    }

    #[test]
    fn curses_program_renders_into_the_model() {
        let script = "import curses\n\
            def main(w):\n    w.addstr(2, 3, 'hello curses')\n    w.refresh()\n    w.getch()\n\
            curses.wrapper(main)";
        let mut s = Session::spawn(&spec(&["python3", "-c", script]), None).unwrap();
        let mut term = Terminal::new(24, 80);
        assert!(
            pump(&mut s, &mut term, Duration::from_secs(10), |t| {
                t.snapshot()
                    .lines
                    .get(2)
                    .is_some_and(|l| l == "   hello curses")
            }),
            "{}",
            term.text()
        );
        s.write(b"q").unwrap();
        assert_eq!(
            s.wait_timeout(Duration::from_secs(10))
                .unwrap()
                .unwrap()
                .code,
            Some(0)
        );
    }

    #[test]
    fn kill_ends_the_whole_process_group_and_reaps() {
        let mut s = Session::spawn(
            &spec(&["sh", "-c", "sleep 600 & echo child $!; wait"]),
            None,
        )
        .unwrap();
        let mut term = Terminal::new(24, 80);
        assert!(pump(&mut s, &mut term, Duration::from_secs(10), |t| {
            t.text().contains("child ")
        }));
        let text = term.text();
        let child: i32 = text
            .split("child ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|p| p.parse().ok())
            .unwrap();
        let exit = s.kill().unwrap();
        assert_eq!(exit.signal, Some(9));
        let gone = (0..200).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            !std::path::Path::new(&format!("/proc/{child}")).exists()
                || fs_err::read_to_string(format!("/proc/{child}/stat"))
                    .is_ok_and(|s| s.contains(") Z "))
        });
        assert!(gone, "the group's other process {child} survived");
    }
}
