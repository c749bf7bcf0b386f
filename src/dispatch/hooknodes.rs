//! The project's `surface: hook` spec nodes: each handler runs after the built-in handlers,
//! in `order`, fed the original payload on stdin, with a timeout. Its stdout becomes context;
//! exit 2 blocks only when the node says `block: true`. The handler is executed directly
//! (its shebang decides the interpreter); spex itself starts no shell.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::seam::event::Answer;
use crate::store::HookNode;

const TIMEOUT: Duration = Duration::from_secs(10);

pub fn run(nodes: &[&HookNode], payload: &[u8], session: &str, event: &str, answer: &mut Answer) {
    let mut nodes = nodes.to_vec();
    nodes.sort_by(|a, b| a.order.cmp(&b.order).then_with(|| a.spec.cmp(&b.spec)));
    for node in nodes {
        let Ok(mut child) = Command::new(&node.handler)
            .current_dir(node.handler.parent().unwrap_or(std::path::Path::new("/")))
            .env("SPEX_SESSION_ID", session)
            .env("SPEX_HOOK_EVENT", event)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
        else {
            continue;
        };
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(payload);
        }
        let start = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(st)) => break Some(st),
                Ok(None) if start.elapsed() < TIMEOUT => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
        };
        let read = |r: Option<&mut dyn Read>| {
            let mut s = String::new();
            if let Some(r) = r {
                let _ = r.take(64 * 1024).read_to_string(&mut s);
            }
            s
        };
        let stdout = read(child.stdout.as_mut().map(|r| r as &mut dyn Read));
        let stderr = read(child.stderr.as_mut().map(|r| r as &mut dyn Read));
        match status.and_then(|s| s.code()) {
            Some(0) => super::merge(answer, Some(stdout), None),
            Some(2) if node.block => {
                let reason = if stderr.trim().is_empty() {
                    format!("blocked by {}", node.spec)
                } else {
                    stderr.trim().to_owned()
                };
                super::merge(answer, None, Some(reason));
            }
            _ => {}
        }
    }
}
