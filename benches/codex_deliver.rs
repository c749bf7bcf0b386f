//! Benchmark of `spex deliver` into a live Codex thread through spex's app-server runtime (the
//! real pinned Codex `app-server` against the tests' fake Responses API): the whole `deliver`
//! process, spawn to exit (which is after the confirmation), steering into a turn kept in
//! progress by the fake's `hang` scenario, and starting turns on an idle thread.
//! Needs `scripts/install-peers.sh`. Run: `cargo bench --bench codex_deliver`.

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

use std::time::Duration;

const WARMUPS: usize = 5;
const DELIVERIES: usize = 100;
/// Turns started on an idle thread (each waits for its turn to end before the next).
const STARTS: usize = 30;
/// How long after the record reads the turn completed the server is given to end it too.
const SERVER_LAG: Duration = Duration::from_millis(300);

/// `n` deliveries after `WARMUPS`; each one's time and mode. `settle` runs after each.
fn measure(
    w: &World,
    id: &str,
    prefix: &str,
    n: usize,
    settle: impl Fn(),
) -> (Vec<Duration>, Vec<String>) {
    let mut took = Vec::new();
    let mut modes = Vec::new();
    for i in 0..WARMUPS + n {
        let (t, d) = w.deliver(id, &format!("{prefix} {i}"));
        settle();
        if i >= WARMUPS {
            took.push(t);
            modes.push(d["mode"].as_str().unwrap_or("?").to_owned());
        }
    }
    (took, modes)
}

fn main() {
    let w = world("never", "danger-full-access");

    // Steer: one turn held in progress by the fake; every delivery adds input to it.
    let launched = w.spex(&[
        "launch",
        "--harness",
        "codex",
        "--detach",
        "--json",
        "SCENARIO:hang",
    ]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    w.until(&id, "the hanging turn never started", |s| {
        s["session"]["status"] == "working"
    });
    let (mut took, modes) = measure(&w, &id, "steer", DELIVERIES, || {});
    report("deliver (steer) into a live Codex turn", &mut took, &modes);

    // Start: an idle thread on the same server; each delivery starts a turn that completes at
    // once, awaited before the next. The record reads `completed` at Codex's `Stop` hook, a
    // moment before the server ends the turn: a delivery right then would steer into it.
    let idle = w.spex(&["launch", "--harness", "codex", "--detach", "--json"]);
    let iid = idle["session"]["id"].as_str().unwrap().to_owned();
    w.spex(&["stop", &id, "--json"]);
    let (mut took, modes) = measure(&w, &iid, "start", STARTS, || {
        w.until(&iid, "the turn never completed", |s| {
            s["session"]["status"] == "idle" && s["session"]["turn"]["state"] == "completed"
        });
        std::thread::sleep(SERVER_LAG);
    });
    report("deliver (start) on an idle Codex thread", &mut took, &modes);
    w.spex(&["stop", &iid, "--json"]);

    // `stop` of the last thread stops the server; give it a moment, then sweep.
    std::thread::sleep(Duration::from_secs(2));
    let left = w.kill_leftovers();
    println!("processes left behind after stop: {left}");
}
