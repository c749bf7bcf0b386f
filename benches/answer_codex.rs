//! Benchmark of `spex approve` / `spex deny` of a Codex escalation on spex's app-server (the
//! real pinned Codex `app-server` against the tests' fake Responses API, the Codex TUI
//! attached under spex's host as `spex launch` leaves it): the whole answering process, spawn
//! to exit, which is after the server's confirmation (`serverRequest/resolved`, then the item's
//! end: for `approve` the escalated command has run, for `deny` the turn went on without it),
//! and the times spex itself reports from reading the attention: to that confirmation
//! (`elapsed_ms`) and to the server's resolving the request (`taken_ms`). Each answer is
//! to a fresh escalation: the turn is asked again (`deliver SCENARIO:escalate`) once the
//! session is idle. Needs `scripts/install-peers.sh`. Run: `cargo bench --bench answer_codex`.

#![expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::too_many_lines,
    reason = "benchmark rigging, not product code: a failed setup call panics on the spot, so fs_err's path adds little, and a scenario reads best as one function"
)]
#![allow(
    dead_code,
    reason = "the shared test support has more than this benchmark uses"
)]

#[path = "../tests/it/adapters/mod.rs"]
#[allow(
    unused_imports,
    reason = "clippy --all-targets builds the fakes' unit tests here without their harness"
)]
mod adapters;
#[path = "../tests/it/support"]
#[allow(
    unused_imports,
    reason = "clippy --all-targets builds the support's unit tests here without their harness"
)]
mod support {
    pub mod codex_home;
    pub mod fake_responses;
    pub mod http;
    pub mod peers;
}
#[path = "rig/codex.rs"]
mod rig;
use rig::{World, report, world};

use std::time::{Duration, Instant};

use serde_json::Value;

const WARMUPS: usize = 3;
const ANSWERS: usize = 30;

/// The session's record as the store holds it (no reader of ours in the measured path).
fn record(w: &World, id: &str) -> Value {
    let path = w
        .project_dir()
        .join("sessions")
        .join(id)
        .join("session.json");
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null)
}

fn wait_record(w: &World, id: &str, what: &str, pred: impl Fn(&Value) -> bool) {
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        let r = record(w, id);
        if pred(&r) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {r}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// `n` answers `cmd` after `WARMUPS`, each to a fresh escalation: spawn-to-exit times, and the
/// times spex reported to the confirmation and to the server's resolving the request.
fn measure(
    w: &World,
    id: &str,
    cmd: &str,
    n: usize,
) -> (Vec<Duration>, Vec<Duration>, Vec<Duration>) {
    let mut took = Vec::new();
    let mut inner = Vec::new();
    let mut taken = Vec::new();
    for i in 0..WARMUPS + n {
        wait_record(w, id, "the escalation never asked", |r| {
            r["status"] == "needs_attention" && r["attention"]["via"]["how"] == "server"
        });
        let start = Instant::now();
        let out = w.cmd(&[cmd, id, "--json"]).output().expect("spex runs");
        let t = start.elapsed();
        let d: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        assert!(
            out.status.success(),
            "spex {cmd}: {d}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        if i >= WARMUPS {
            took.push(t);
            let ms = |k: &str| Duration::from_millis(d[k].as_u64().unwrap_or(u64::MAX));
            inner.push(ms("elapsed_ms"));
            taken.push(ms("taken_ms"));
        }
        wait_record(w, id, "the turn never ended", |r| r["status"] == "idle");
        w.deliver(id, "SCENARIO:escalate");
    }
    (took, inner, taken)
}

fn main() {
    let w = world("on-request", "workspace-write");
    println!("load average at start: {}", load());
    let launched = w.spex(&[
        "launch",
        "--harness",
        "codex",
        "--detach",
        "--json",
        "SCENARIO:escalate",
    ]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    for cmd in ["approve", "deny"] {
        let (mut took, mut inner, mut taken) = measure(&w, &id, cmd, ANSWERS);
        let kind = if cmd == "approve" {
            "accept: the command ran"
        } else {
            "decline"
        };
        report(
            &format!("spex {cmd} (server, {kind}), spawn to exit"),
            &mut took,
            &[],
        );
        report(
            &format!("spex {cmd} (server, {kind}), to confirmed (elapsed_ms)"),
            &mut inner,
            &[],
        );
        report(
            &format!("spex {cmd} (server, {kind}), to the server's resolving it (taken_ms)"),
            &mut taken,
            &[],
        );
    }
    println!("load average at end: {}", load());
    w.spex(&["stop", &id, "--json"]);
    std::thread::sleep(Duration::from_secs(2));
    let left = w.kill_leftovers();
    println!("processes left behind after stop: {left}");
}
