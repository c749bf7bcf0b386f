//! Benchmark of `spex answer` on a hosted Claude session (the real pinned Claude Code TUI
//! against the tests' fake Messages API): from `spex approve` to the harness's confirmation,
//! through the waiting `PermissionRequest` hook and, with the hook's wait off
//! (`answering.hookWaitSecs: 0`), through the dialog's keys. Each run opens a Bash permission
//! dialog and waits until it is drawn and its attention names how it is answered before the
//! clock starts. Needs `scripts/install-peers.sh`. Run: `cargo bench --bench answer`.

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
    pub mod fake_anthropic;
    pub mod http;
    pub mod peers;
}

use std::time::{Duration, Instant};

use serde_json::Value;

#[path = "rig/live.rs"]
mod live;
#[path = "rig/claude.rs"]
mod rig;
use rig::{World, world};

const RUNS: usize = 12;

fn show(w: &World, id: &str) -> Value {
    w.spex(&["show", id, "--json"])["session"].clone()
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_mins(1);
    while !ok() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `RUNS` permission dialogs answered `allow` via `how`: the wall time of each `spex approve`
/// (process start to exit: the answer confirmed) and the time spex itself reports.
fn answers(w: &World, how: &str) -> (Vec<Duration>, Vec<u64>) {
    let launched = w.spex(&["launch", "--harness", "claude", "--detach", "--json"]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let mut wall = Vec::new();
    let mut by_spex = Vec::new();
    for i in 0..RUNS {
        let out = w.base.join("repo/bash_out.txt");
        let _ = std::fs::remove_file(&out);
        w.spex(&["deliver", &id, &format!("USE_BASH run {i}"), "--json"]);
        wait_until("the dialog's attention", || {
            let s = show(w, &id);
            s["status"] == "needs_attention" && s["attention"]["via"]["how"] == how
        });
        wait_until("the dialog drawn", || {
            w.spex(&["snapshot", &id, "--json"])["lines"]
                .as_array()
                .is_some_and(|l| {
                    l.iter().any(|l| {
                        l.as_str()
                            .is_some_and(|l| l.contains("Do you want to proceed?"))
                    })
                })
        });
        let start = Instant::now();
        let done = w.spex(&["approve", &id, "--json"]);
        wall.push(start.elapsed());
        assert_eq!(done["via"], how, "{done}");
        by_spex.push(done["elapsed_ms"].as_u64().unwrap_or(0));
        wait_until("the command ran", || out.exists());
        wait_until("the turn's end", || {
            let s = show(w, &id);
            s["status"] == "idle" && s["turn"]["state"] == "completed"
        });
    }
    w.spex(&["stop", &id, "--json"]);
    (wall, by_spex)
}

fn report(what: &str, goal: &str, (mut wall, mut by_spex): (Vec<Duration>, Vec<u64>)) {
    wall.sort();
    by_spex.sort_unstable();
    let at = |q: usize| ((wall.len() - 1) * q).div_ceil(100);
    println!(
        "{what}, {RUNS} runs (goal p50 {goal}): `spex approve` to confirmed p50 {} ms, p90 {} ms, max {} ms (spex's own elapsed_ms p50 {}, p90 {})",
        wall[at(50)].as_millis(),
        wall[at(90)].as_millis(),
        wall[wall.len() - 1].as_millis(),
        by_spex[at(50)],
        by_spex[at(90)]
    );
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() {
    println!("load average before: {}", load());
    let hook = answers(&world("{ \"harnesses\": [\"claude\"] }\n"), "hook");
    report(
        "Claude, hosted, through the waiting hook",
        "<= 300 ms",
        hook,
    );
    let keys = answers(
        &world("{ \"harnesses\": [\"claude\"], \"answering\": { \"hookWaitSecs\": 0 } }\n"),
        "keys",
    );
    report("Claude, hosted, through the dialog's keys", "<= 1 s", keys);
    println!("load average after: {}", load());
}
