//! Benchmark of a hosted Claude session (the real pinned Claude Code TUI against the tests' fake
//! Messages API): `spex deliver` to confirmation on an idle session, and the PTY host's memory,
//! CPU and wakeups while nothing happens. Needs `scripts/install-peers.sh`.
//! Run: `cargo bench --bench hosted`.

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
#[path = "rig/live.rs"]
mod live;
#[path = "rig/claude.rs"]
mod rig;
use rig::{World, world};

use std::time::{Duration, Instant};

fn proc_field(pid: i64, file: &str, key: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: i64) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(") ").map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

fn wait_idle(w: &World, id: &str) {
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        let s = w.spex(&["show", id, "--json"]);
        if s["session"]["status"] == "idle" && s["session"]["turn"]["state"] == "completed" {
            return;
        }
        assert!(Instant::now() < deadline, "the turn never completed: {s}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `DELIVERIES` prompts, each to the end of its turn: the time of each `deliver`, and the
/// session's wall time.
fn active(w: &World, id: &str) -> (Vec<Duration>, Duration) {
    let began = Instant::now();
    let mut took = Vec::new();
    for i in 0..DELIVERIES {
        let start = Instant::now();
        let d = w.spex(&["deliver", id, &format!("USE_NONE prompt {i}"), "--json"]);
        took.push(start.elapsed());
        assert_eq!(
            d["confirmed"],
            true,
            "{d}\n{}",
            w.spex(&["show", id, "--json", "--events", "30"])
        );
        wait_idle(w, id);
    }
    (took, began.elapsed())
}

fn per_minute(amount: u64, over: Duration) -> u64 {
    u64::try_from(u128::from(amount) * 60_000 / over.as_millis().max(1)).unwrap_or(u64::MAX)
}

const DELIVERIES: usize = 20;

fn main() {
    let w = world("{ \"harnesses\": [\"claude\"] }\n");
    let launched = w.spex(&["launch", "--harness", "claude", "--detach", "--json"]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let host = launched["session"]["host_pid"].as_i64().unwrap();
    let ticks = cpu_ticks(host);
    let (mut took, wall) = active(&w, &id);
    let plain_ticks = cpu_ticks(host) - ticks;
    took.sort();
    let p = |q: usize| took[((took.len() - 1) * q).div_ceil(100)];
    println!(
        "deliver to confirmation, idle session, {DELIVERIES} runs: p50 {} ms, p90 {} ms, max {} ms",
        p(50).as_millis(),
        p(90).as_millis(),
        took[took.len() - 1].as_millis()
    );
    // Idle: nothing typed, no turn running.
    std::thread::sleep(Duration::from_secs(2));
    let (ticks, switches) = (
        cpu_ticks(host),
        proc_field(host, "status", "voluntary_ctxt_switches:"),
    );
    let idle = Duration::from_secs(10);
    std::thread::sleep(idle);
    let ticks = cpu_ticks(host) - ticks;
    let switches = proc_field(host, "status", "voluntary_ctxt_switches:") - switches;
    println!(
        "host while idle for {} s: RSS {} KiB, CPU {} ticks, {} voluntary context switches (threads: {})",
        idle.as_secs(),
        proc_field(host, "status", "VmRSS:"),
        ticks,
        switches,
        proc_field(host, "status", "Threads:")
    );
    w.spex(&["stop", &id, "--json"]);

    // The same work, recorded.
    let launched = w.spex(&[
        "launch",
        "--harness",
        "claude",
        "--record",
        "--detach",
        "--json",
    ]);
    let rid = launched["session"]["id"].as_str().unwrap().to_owned();
    let rhost = launched["session"]["host_pid"].as_i64().unwrap();
    let ticks = cpu_ticks(rhost);
    let (_, rwall) = active(&w, &rid);
    let recorded_ticks = cpu_ticks(rhost) - ticks;
    let dir = std::fs::read_dir(w.base.join("store/projects"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("sessions")
        .join(&rid)
        .join("cassette");
    let bytes: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    println!(
        "host CPU per minute of an active session ({DELIVERIES} turns): {} ticks unrecorded, {} ticks recorded; cassette {} KiB per minute",
        per_minute(plain_ticks, wall),
        per_minute(recorded_ticks, rwall),
        per_minute(bytes, rwall) / 1024
    );
    w.spex(&["stop", &rid, "--json"]);
}
