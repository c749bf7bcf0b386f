//! The hook hot path: read the payload once, find the project, record the invocation, and
//! answer the harness. Synchronous, no subprocess, no async runtime; any internal failure is
//! logged and swallowed so the agent is never broken by spex.

use std::io::{Read, Write};
use std::path::PathBuf;

use serde_json::Value;

use crate::env::Env;
use crate::repo::Tree;
use crate::store::{self, ProjectStore};

/// What the harness gets back.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reply {
    pub stdout: String,
    pub stderr: String,
    pub exit_code: i32,
}

/// Payloads above this size are not decoded (a hook payload is a few KB; a runaway one must
/// not cost the agent time).
const MAX_PAYLOAD: u64 = 8 * 1024 * 1024;

/// Runs the dispatcher; `None` means "print nothing, exit 0".
pub fn run(harness: &str, event: &str) -> Option<Reply> {
    let result = std::panic::catch_unwind(|| {
        std::panic::set_hook(Box::new(|_| {}));
        let mut raw = Vec::new();
        let _ = std::io::stdin()
            .lock()
            .take(MAX_PAYLOAD)
            .read_to_end(&mut raw);
        let env = Env::from_process();
        handle(&env, harness, event, &raw)
    });
    result.ok().flatten()
}

fn handle(env: &Env, harness: &str, event: &str, raw: &[u8]) -> Option<Reply> {
    let payload: Value = serde_json::from_slice(raw).unwrap_or(Value::Null);
    let cwd = payload
        .get("cwd")
        .and_then(Value::as_str)
        .map(PathBuf::from)
        .or_else(|| std::env::current_dir().ok())?;
    let tree = Tree::discover(&cwd).ok()?;
    let project = ProjectStore::new(&env.spex_home(), &tree.main);
    let line = serde_json::json!({
        "time": store::now_rfc3339(),
        "harness": harness,
        "event": event,
        "session_id": payload.get("session_id").and_then(Value::as_str),
        "tree": tree.root,
    });
    append_line(&project.dispatch_log(), &line.to_string());
    None
}

/// Appends one line with a single `write` on an `O_APPEND` file, so concurrent hooks never
/// interleave within a line.
pub fn append_line(path: &std::path::Path, line: &str) {
    let open = || {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    };
    let file = open().or_else(|_| {
        std::fs::create_dir_all(path.parent().unwrap_or(path))?;
        open()
    });
    if let Ok(mut f) = file {
        let mut buf = String::with_capacity(line.len() + 1);
        buf.push_str(line);
        buf.push('\n');
        let _ = f.write_all(buf.as_bytes());
    }
}
