//! Benchmark of what recording costs a hosted session, for each harness (the real pinned Claude
//! Code, Codex and Gemini CLI against the tests' fake model servers): `spex deliver` to
//! confirmation and the PTY host's CPU per minute of an active session, each with and without
//! `--record`; then `spex cassette test` on the whole committed set
//! (`tests/fixtures/cassettes`). Needs `scripts/install-peers.sh`.
//! Run: `cargo bench --bench recording` (`-- claude` etc. for one harness).

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
    pub mod claude_home;
    pub mod codex_home;
    pub mod fake_anthropic;
    pub mod fake_gemini;
    pub mod fake_responses;
    pub mod gemini_home;
    pub mod http;
    pub mod peers;
    pub mod term;
}

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use support::peers::peers_path;

/// Turns per measured session.
const DELIVERIES: usize = 10;

/// A harness's project in a temporary home, spex run in it against the harness's fake.
struct World {
    _dir: tempfile::TempDir,
    base: PathBuf,
    harness: &'static str,
    env: Vec<(&'static str, OsString)>,
    /// A prompt the fake answers at once, with no tool.
    prompt: &'static str,
    /// Keeps the fake serving.
    _fake: Box<dyn std::any::Any>,
}

impl World {
    fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_spex"))
            .args(args)
            .current_dir(self.base.join("repo"))
            .env_clear()
            .env("PATH", peers_path())
            .env("HOME", self.base.join("home"))
            .env("LANG", "C.UTF-8")
            .env("SPEX_HOME", self.base.join("store"))
            .env("XDG_CONFIG_HOME", self.base.join("xdg"))
            .env("XDG_RUNTIME_DIR", self.base.join("run"))
            .env("CODEX_HOME", self.base.join("codex"))
            .envs(self.env.iter().cloned())
            .stdin(Stdio::null())
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

fn git(repo: &std::path::Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(["-c", "user.name=b", "-c", "user.email=b@b"])
        .args(args)
        .current_dir(repo)
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

fn world(harness: &'static str) -> World {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("spxr")
        .tempdir_in("/tmp")
        .unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let repo = base.join("repo");
    let home = base.join("home");
    for d in [&repo, &home, &base.join("run"), &base.join("codex")] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::set_permissions(base.join("run"), std::fs::Permissions::from_mode(0o700)).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(
        repo.join("spex.jsonc"),
        format!("{{ \"harnesses\": [\"{harness}\"] }}\n"),
    )
    .unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    let (env, prompt, fake): (Vec<(&'static str, OsString)>, _, Box<dyn std::any::Any>) =
        match harness {
            "claude" => {
                let fake = support::fake_anthropic::FakeAnthropic::start();
                let key = support::claude_home::DUMMY_API_KEY;
                support::claude_home::seed_claude_home(
                    &home,
                    key,
                    &[&repo],
                    support::claude_home::SeedOptions::default(),
                );
                (
                    vec![
                        ("ANTHROPIC_BASE_URL", fake.base_url().into()),
                        ("ANTHROPIC_API_KEY", key.into()),
                        ("DISABLE_AUTOUPDATER", "1".into()),
                        ("TERM", "xterm-256color".into()),
                    ],
                    "USE_NONE prompt",
                    Box::new(fake),
                )
            }
            "gemini" => {
                let fake = support::fake_gemini::FakeGemini::start();
                support::gemini_home::seed_gemini_home(&home);
                (
                    support::gemini_home::gemini_env(&fake.base_url()).into(),
                    "SCENARIO:plain prompt",
                    Box::new(fake),
                )
            }
            _ => {
                let fake = support::fake_responses::FakeResponses::start_with_hang_limit(
                    Duration::from_mins(1),
                );
                let codex = base.join("codex");
                support::codex_home::write_codex_config(
                    &codex,
                    &fake.base_url(),
                    "never",
                    "danger-full-access",
                );
                let cfg = codex.join("config.toml");
                let mut text = std::fs::read_to_string(&cfg).unwrap();
                text.push_str("\n[notice.model_migrations]\n\"gpt-5.5\" = \"gpt-6-sol\"\n\n[tui.model_availability_nux]\n\"gpt-6.1-sol\" = 1\n\n[tui]\nscreen_reader_detection_done = true\n");
                std::fs::write(&cfg, text).unwrap();
                (
                    vec![
                        ("FAKE_API_KEY", "dummy".into()),
                        ("OPENAI_API_KEY", "sk-dummy".into()),
                        ("RUST_LOG", "warn".into()),
                        ("TERM", "xterm-256color".into()),
                    ],
                    "SCENARIO:plain prompt",
                    Box::new(fake),
                )
            }
        };
    let w = World {
        _dir: dir,
        base,
        harness,
        env,
        prompt,
        _fake: fake,
    };
    w.spex(&["materialize", "--json"]);
    w
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: i64) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(") ").map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

fn wait_completed(w: &World, id: &str, prompt: &str) {
    let deadline = Instant::now() + Duration::from_mins(2);
    loop {
        let s = w.spex(&["show", id, "--json"]);
        let t = &s["session"]["turn"];
        if s["session"]["status"] == "idle" && t["state"] == "completed" && t["prompt"] == prompt {
            return;
        }
        assert!(Instant::now() < deadline, "the turn never completed: {s}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One session (`--record` or not): `DELIVERIES` prompts, each to the end of its turn; the
/// time of each `deliver` to confirmation, the host's CPU ticks and the wall time over them,
/// and the cassette's size.
struct Run {
    took: Vec<Duration>,
    ticks: u64,
    wall: Duration,
    cassette_bytes: u64,
}

fn session(w: &World, record: bool) -> Run {
    let mut args = vec!["launch", "--harness", w.harness, "--detach", "--json"];
    if record {
        args.push("--record");
    }
    let launched = w.spex(&args);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let host = launched["session"]["host_pid"].as_i64().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let ticks = cpu_ticks(host);
    let began = Instant::now();
    let mut took = Vec::new();
    for i in 0..DELIVERIES {
        let prompt = format!("{} {i}", w.prompt);
        let start = Instant::now();
        let d = w.spex(&["deliver", &id, &prompt, "--json"]);
        took.push(start.elapsed());
        assert_eq!(d["confirmed"], true, "{d}");
        wait_completed(w, &id, &prompt);
    }
    let wall = began.elapsed();
    let ticks = cpu_ticks(host) - ticks;
    w.spex(&["stop", &id, "--json"]);
    let dir = std::fs::read_dir(w.base.join("store/projects"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("sessions")
        .join(&id)
        .join("cassette");
    let cassette_bytes = std::fs::read_dir(&dir)
        .map_or(0, |d| d.map(|e| e.unwrap().metadata().unwrap().len()).sum());
    took.sort();
    Run {
        took,
        ticks,
        wall,
        cassette_bytes,
    }
}

fn per_minute(amount: u64, over: Duration) -> u64 {
    u64::try_from(u128::from(amount) * 60_000 / over.as_millis().max(1)).unwrap_or(u64::MAX)
}

fn pct(took: &[Duration], q: usize) -> u128 {
    took[((took.len() - 1) * q).div_ceil(100)].as_millis()
}

fn harness(name: &'static str) {
    let w = world(name);
    // Unrecorded first, then recorded: the same work in the same warm project.
    let plain = session(&w, false);
    let recorded = session(&w, true);
    for (what, r) in [("unrecorded", &plain), ("recorded", &recorded)] {
        println!(
            "{name} {what}: deliver to confirmation, {DELIVERIES} turns: p50 {} ms, p90 {} ms, max {} ms; host CPU {} ticks per minute; cassette {} KiB per minute",
            pct(&r.took, 50),
            pct(&r.took, 90),
            r.took[r.took.len() - 1].as_millis(),
            per_minute(r.ticks, r.wall),
            per_minute(r.cassette_bytes, r.wall) / 1024
        );
    }
}

/// `spex cassette test tests/fixtures/cassettes`, five times: each run's wall time.
fn cassette_test() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/cassettes");
    let mut took = Vec::new();
    let mut line = String::new();
    for _ in 0..5 {
        let start = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_spex"))
            .args(["cassette", "test", root])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap();
        took.push(start.elapsed());
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{text}");
        text.lines()
            .last()
            .unwrap_or_default()
            .clone_into(&mut line);
    }
    took.sort();
    println!(
        "cassette test on the committed set ({line}), 5 runs: min {} ms, median {} ms, max {} ms",
        took[0].as_millis(),
        took[2].as_millis(),
        took[4].as_millis()
    );
}

fn main() {
    // `cargo bench` passes `--bench`; other arguments name the harnesses to run.
    let chosen: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    for name in ["claude", "codex", "gemini"] {
        if chosen.is_empty() || chosen.iter().any(|c| c == name) {
            harness(name);
        }
    }
    if chosen.is_empty() || chosen.iter().any(|c| c == "cassettes") {
        cassette_test();
    }
}
