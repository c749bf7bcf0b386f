//! Benchmark of a hosted Claude session (the real pinned Claude Code TUI against the tests' fake
//! Messages API): `spex deliver` to confirmation on an idle session, and the PTY host's memory,
//! CPU and wakeups while nothing happens. Needs `scripts/install-peers.sh`.
//! Run: `cargo bench --bench hosted`.

#![expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![allow(
    dead_code,
    reason = "the shared test support has more than this benchmark uses"
)]

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
use support::fake_anthropic;
use support::peers::peers_path;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const DELIVERIES: usize = 20;
const API_KEY: &str = "sk-ant-dummy-key-for-spex-tests-0000";

struct World {
    _dir: tempfile::TempDir,
    base: PathBuf,
    fake: fake_anthropic::FakeAnthropic,
}

impl World {
    /// `spex args` in the world; its output whatever its exit.
    fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_spex"))
            .args(args)
            .current_dir(self.base.join("repo"))
            .env_clear()
            .env("PATH", peers_path())
            .env("HOME", self.base.join("home"))
            .env("SPEX_HOME", self.base.join("store"))
            .env("XDG_CONFIG_HOME", self.base.join("xdg"))
            .env("XDG_RUNTIME_DIR", self.base.join("run"))
            .env("ANTHROPIC_BASE_URL", self.fake.base_url())
            .env("ANTHROPIC_API_KEY", API_KEY)
            .env("DISABLE_AUTOUPDATER", "1")
            .env("TERM", "xterm-256color")
            .output()
            .expect("spex runs")
    }

    fn spex(&self, args: &[&str]) -> Value {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "spex {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }
}

/// A bench that fails half way leaves no host running.
impl Drop for World {
    fn drop(&mut self) {
        let out = self.run(&["sessions", "--json"]);
        let live: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        for s in live.as_array().into_iter().flatten() {
            if let Some(id) = s["id"].as_str() {
                let _ = self.run(&["stop", id]);
            }
        }
    }
}

fn world() -> World {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("spxb")
        .tempdir_in("/tmp")
        .unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let repo = base.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::create_dir_all(base.join("home/.claude")).unwrap();
    std::fs::create_dir_all(base.join("run")).unwrap();
    std::fs::set_permissions(base.join("run"), std::fs::Permissions::from_mode(0o700)).unwrap();
    assert!(
        Command::new("git")
            .args(["init", "-q"])
            .current_dir(&repo)
            .status()
            .unwrap()
            .success()
    );
    std::fs::write(repo.join("spex.jsonc"), "{ \"harnesses\": [\"claude\"] }\n").unwrap();
    // The seeding the facts describe: no onboarding, key approved, project trusted.
    let tail = &API_KEY[API_KEY.len() - 20..];
    let state = json!({
        "hasCompletedOnboarding": true, "lastOnboardingVersion": "2.1.197", "theme": "dark",
        "numStartups": 1, "customApiKeyResponses": {"approved": [tail], "rejected": []},
        "projects": { repo.to_string_lossy(): {"hasTrustDialogAccepted": true,
            "hasCompletedProjectOnboarding": true, "allowedTools": []}},
    });
    std::fs::write(base.join("home/.claude.json"), state.to_string()).unwrap();
    let w = World {
        _dir: dir,
        base,
        fake: fake_anthropic::FakeAnthropic::start(),
    };
    w.spex(&["materialize", "--json"]);
    w
}

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

fn main() {
    let w = world();
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
