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
        // The payload goes in and the output comes out on threads of their own: a node that
        // writes before it has read all of a large payload (`cat`, `jq .`) would otherwise
        // fill one pipe while spex blocks on the other, and neither would ever move on.
        let (status, stdout, stderr) = std::thread::scope(|scope| {
            if let Some(mut stdin) = child.stdin.take() {
                // A node may exit without reading it all: the broken pipe is expected.
                scope.spawn(move || stdin.write_all(payload));
            }
            let stdout = child.stdout.take().map(|r| scope.spawn(move || drain(r)));
            let stderr = child.stderr.take().map(|r| scope.spawn(move || drain(r)));
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
            let text = |h: Option<std::thread::ScopedJoinHandle<'_, String>>| {
                h.and_then(|h| h.join().ok()).unwrap_or_default()
            };
            (status, text(stdout), text(stderr))
        });
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

/// The first 64 KiB of a node's output; the rest is read and dropped, so the node never
/// blocks on a full pipe.
fn drain(mut r: impl Read) -> String {
    let mut s = String::new();
    let _ = (&mut r).take(64 * 1024).read_to_string(&mut s);
    let _ = std::io::copy(&mut r, &mut std::io::sink());
    s
}
