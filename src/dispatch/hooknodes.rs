//! The project's `surface: hook` spec nodes: each handler runs after the built-in handlers,
//! in `order`, fed the original payload on stdin, within a time budget. Its stdout becomes
//! context; exit 2 blocks only when the node says `block: true`. The handler is executed directly
//! (its shebang decides the interpreter); spex itself starts no shell.
//!
//! A node runs in a process group of its own, and nothing it starts outlives its hook: once the
//! node has exited (or at the budget, when it has not), the whole group is killed and spex stops
//! reading, so a background child that keeps the node's output open cannot hold the harness.

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt as _;
use std::process::{ChildStderr, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};

use crate::seam::event::Answer;
use crate::store::HookNode;

/// How long one node may run.
const TIMEOUT: Duration = Duration::from_secs(10);

/// How long, after the node exited, its output may take to reach its end (what the node wrote
/// is in the pipe already; only a child it left behind keeps the pipe open).
const AFTER_EXIT: Duration = Duration::from_millis(100);

/// How much of a node's stdout (and stderr) spex keeps, its cut mark included.
const OUTPUT_CAP: usize = 64 * 1024;

pub fn run(nodes: &[&HookNode], payload: &[u8], session: &str, event: &str, answer: &mut Answer) {
    let mut nodes = nodes.to_vec();
    nodes.sort_by(|a, b| a.order.cmp(&b.order).then_with(|| a.spec.cmp(&b.spec)));
    for node in nodes {
        let Some(ran) = run_one(node, payload, session, event, TIMEOUT) else {
            continue;
        };
        match ran.code {
            Some(0) => merge(answer, Some(ran.stdout), None),
            Some(2) if node.block => {
                let reason = if ran.stderr.trim().is_empty() {
                    format!("blocked by {}", node.spec)
                } else {
                    ran.stderr.trim().to_owned()
                };
                merge(answer, None, Some(reason));
            }
            _ => {}
        }
    }
}

/// Merges `extra` context into an answer.
fn merge(answer: &mut Answer, context: Option<String>, block: Option<String>) {
    if let Some(c) = context.filter(|c| !c.trim().is_empty()) {
        answer.context.push(c.trim().to_owned());
    }
    if block.is_some() && answer.block.is_none() {
        answer.block = block;
    }
}

/// What one node did: its exit code (`None`: killed at the budget, or by a signal) and its
/// output as text.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs one node within `budget`; `None` when it cannot be started.
fn run_one(
    node: &HookNode,
    payload: &[u8],
    session: &str,
    event: &str,
    budget: Duration,
) -> Option<Ran> {
    let mut child = Command::new(&node.handler)
        .current_dir(node.handler.parent().unwrap_or(std::path::Path::new("/")))
        .env("SPEX_SESSION_ID", session)
        .env("SPEX_HOOK_EVENT", event)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .ok()?;
    let pid = Pid::from_raw(i32::try_from(child.id()).ok()?)?;
    let mut io = Pipes {
        stdin: child.stdin.take(),
        input: payload,
        stdout: child.stdout.take(),
        stderr: child.stderr.take(),
        out: Capture::default(),
        err: Capture::default(),
    };
    let exited = io.pump(pid, Instant::now() + budget);
    // The node's group goes whatever happened: a child it left behind must not outlive the
    // hook. The node itself is still unreaped here, so its pid (the group's id) is not reused.
    let _ = rustix::process::kill_process_group(pid, Signal::KILL);
    let status = child.wait().ok();
    Some(Ran {
        code: status.filter(|_| exited).and_then(|s| s.code()),
        stdout: io.out.text(),
        stderr: io.err.text(),
    })
}

/// The node's three pipes, moved on one thread: the payload goes in while the output comes
/// out, so a node that writes before it has read all of a large payload (`cat`, `jq .`) never
/// blocks on a full pipe while spex blocks on the other.
struct Pipes<'a> {
    stdin: Option<ChildStdin>,
    input: &'a [u8],
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    out: Capture,
    err: Capture,
}

impl Pipes<'_> {
    /// Moves bytes until the node has exited and its output ended (or `AFTER_EXIT` passed),
    /// or until `deadline`. Whether the node exited.
    fn pump(&mut self, pid: Pid, deadline: Instant) -> bool {
        for fd in [
            self.stdin.as_ref().map(AsFd::as_fd),
            self.stdout.as_ref().map(AsFd::as_fd),
            self.stderr.as_ref().map(AsFd::as_fd),
        ]
        .into_iter()
        .flatten()
        {
            let _ = rustix::io::ioctl_fionbio(fd, true);
        }
        if self.input.is_empty() {
            self.stdin = None;
        }
        // Readable when the node exits; without it (an old kernel), poll wakes every 10 ms.
        let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok();
        let mut exited_at: Option<Instant> = None;
        loop {
            if exited_at.is_none() && has_exited(pid) {
                exited_at = Some(Instant::now());
            }
            let outputs_open = self.stdout.is_some() || self.stderr.is_some();
            let until = exited_at.map_or(deadline, |t| deadline.min(t + AFTER_EXIT));
            let now = Instant::now();
            if (exited_at.is_some() && !outputs_open) || now >= until {
                return exited_at.is_some();
            }
            let mut wait = until - now;
            if pidfd.is_none() || exited_at.is_some() {
                wait = wait.min(Duration::from_millis(10));
            }
            let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(4);
            let mut slots = [None; 4];
            if let Some(fd) = &self.stdin {
                slots[0] = Some(fds.len());
                fds.push(PollFd::new(fd, PollFlags::OUT));
            }
            if let Some(fd) = &self.stdout {
                slots[1] = Some(fds.len());
                fds.push(PollFd::new(fd, PollFlags::IN));
            }
            if let Some(fd) = &self.stderr {
                slots[2] = Some(fds.len());
                fds.push(PollFd::new(fd, PollFlags::IN));
            }
            if let Some(fd) = pidfd.as_ref().filter(|_| exited_at.is_none()) {
                slots[3] = Some(fds.len());
                fds.push(PollFd::new(fd, PollFlags::IN));
            }
            let timeout = Timespec::try_from(wait).ok();
            if rustix::event::poll(&mut fds, timeout.as_ref()).is_err() {
                // EINTR: go round again.
                continue;
            }
            let ready: Vec<bool> = slots
                .iter()
                .map(|s| s.is_some_and(|i| !fds[i].revents().is_empty()))
                .collect();
            drop(fds);
            if ready[0] {
                self.feed();
            }
            if ready[1] && !read_some(&mut self.stdout, &mut self.out) {
                self.stdout = None;
            }
            if ready[2] && !read_some(&mut self.stderr, &mut self.err) {
                self.stderr = None;
            }
        }
    }

    /// Writes what the pipe takes of the payload; the pipe closes once all is in (or the node
    /// stopped reading: a node may exit without reading it all).
    fn feed(&mut self) {
        let Some(stdin) = self.stdin.as_mut() else {
            return;
        };
        match stdin.write(self.input) {
            Ok(n) => self.input = &self.input[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => self.input = &[],
        }
        if self.input.is_empty() {
            self.stdin = None;
        }
    }
}

/// Whether the node has exited, leaving it unreaped (its pid stays its group's id).
fn has_exited(pid: Pid) -> bool {
    rustix::process::waitid(
        WaitId::Pid(pid),
        WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
    )
    .is_ok_and(|s| s.is_some())
}

/// Reads what is there into `into`; `false` at the end of the output (or an error).
fn read_some(pipe: &mut Option<impl Read>, into: &mut Capture) -> bool {
    let Some(r) = pipe.as_mut() else {
        return false;
    };
    let mut buf = [0u8; 16 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) => return false,
            Ok(n) => into.push(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// A node's output: the first bytes up to the cap, and how many it wrote in all (the rest is
/// read and dropped, so the node never blocks on a full pipe).
#[derive(Default)]
struct Capture {
    kept: Vec<u8>,
    total: usize,
}

impl Capture {
    fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len();
        let room = (OUTPUT_CAP + 4).saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// The output as text (invalid UTF-8 replaced). Over the cap it is cut at the last whole
    /// character that leaves room for a mark saying so, never inside one.
    fn text(&self) -> String {
        if self.total <= OUTPUT_CAP {
            return String::from_utf8_lossy(&self.kept).into_owned();
        }
        let mark = format!(
            "\n[spex: output cut at {} KiB; the node wrote {} bytes]",
            OUTPUT_CAP / 1024,
            self.total
        );
        let head = cut_at_char(&self.kept, OUTPUT_CAP - mark.len());
        let mut text = String::from_utf8_lossy(head).into_owned();
        text.push_str(&mark);
        text
    }
}

/// The longest head of `bytes` of at most `max` bytes that does not end inside a UTF-8
/// character.
fn cut_at_char(bytes: &[u8], max: usize) -> &[u8] {
    if bytes.len() <= max {
        return bytes;
    }
    // Step back over continuation bytes to the start of the character the cut falls in.
    let mut at = max;
    while at > 0 && (bytes[at] & 0b1100_0000) == 0b1000_0000 {
        at -= 1;
    }
    &bytes[..at]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_never_splits_a_character() {
        let euro = "€".repeat(10); // three bytes each
        for max in 0..=euro.len() {
            let head = cut_at_char(euro.as_bytes(), max);
            assert!(std::str::from_utf8(head).is_ok(), "cut at {max}");
            assert!(head.len() + 3 > max, "cut at {max} lost a whole character");
        }
    }

    #[test]
    fn output_over_the_cap_is_cut_and_marked() {
        let mut c = Capture::default();
        let text = "€".repeat(30_000); // 90,000 bytes
        c.push(text.as_bytes());
        let out = c.text();
        assert!(out.len() <= OUTPUT_CAP, "{}", out.len());
        assert!(out.starts_with("€€€"), "{out:.20}");
        assert!(
            out.ends_with("[spex: output cut at 64 KiB; the node wrote 90000 bytes]"),
            "{}",
            &out[out.len() - 80..]
        );
        let mut small = Capture::default();
        small.push("ok €\n".as_bytes());
        assert_eq!(small.text(), "ok €\n");
    }
}
