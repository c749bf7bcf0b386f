//! Benchmarks of a reader, `spex sessions`, each case in a project of its own:
//!
//! - `live`: `spex sessions --json` in a project whose store holds 100 live Claude sessions
//!   (each with its registry file `<config>/sessions/<pid>.json` and a running process, so the
//!   reader checks every one: a small read and a `/proc` stat each) and 1,000 exited sessions.
//! - `all`: `spex sessions --all --json` over 10,000 records: 9,800 exited (Claude and Codex,
//!   half each) and 200 live (Claude and Codex, half working and half idle, each with a running
//!   process: a Claude registry file, or a process holding the Codex rollout log open). The live
//!   ones and one exited record per harness are made by real `spex dispatch` calls; the other
//!   exited records are copies of those two under fresh ids, as the store writes them
//!   (`sessions/<id>/session.json`, `events.jsonl`, `lock`, the alias file).
//!
//! - `projects`: `spex sessions --all-projects`, run outside any repository, over 20 projects
//!   of 100 records each (2,000): per project 5 live Claude sessions (3 working, 2 idle, each
//!   with its registry file and a running process) made by real `spex dispatch` calls, and 95
//!   exited ones (one dispatched, the others copies of it under fresh ids); the table, and
//!   `--all --json` of every record.
//!
//! Run: `cargo bench --bench sessions` (every case), or `cargo bench --bench sessions -- all`. With
//! `SPEX_BENCH_KEEP=1` the `all` and `projects` cases keep their store and home (to profile against) and prints
//! where they are.

#![expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::too_many_lines,
    reason = "benchmark rigging, not product code: a failed setup call panics on the spot, so fs_err's path adds little, and a scenario reads best as one function"
)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "rig/live.rs"]
mod live;
use live::{ClaudeEnv, dispatch, ms, percentile, repo_in};

const LIVE: usize = 100;
const EXITED: usize = 1000;
const RUNS: usize = 60;

/// The `all` case: live sessions per harness and state (working, idle), exited records in all.
const ALL_LIVE_EACH: usize = 50;
const ALL_EXITED: usize = 9800;
const ALL_RUNS: usize = 20;

/// `spex <args>` in `repo`, timed from process start to exit: (time, stdout).
fn time_spex(
    spex: &Path,
    args: &[&str],
    env: &[(&str, &Path)],
    repo: &Path,
) -> (Duration, Vec<u8>) {
    let start = Instant::now();
    let out = Command::new(spex)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .current_dir(repo)
        .output()
        .expect("spex sessions");
    let took = start.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (took, out.stdout)
}

fn main() {
    let case = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    if case.as_deref().is_none_or(|c| c == "live") {
        live();
    }
    if case.as_deref().is_none_or(|c| c == "all") {
        all();
    }
    if case.as_deref().is_none_or(|c| c == "projects") {
        projects();
    }
}

fn live() {
    let spex = PathBuf::from(env!("CARGO_BIN_EXE_spex"));
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = repo_in(dir.path());
    let store = dir.path().join("store");
    let home = dir.path().join("home");
    let config = home.join(".claude");
    std::fs::create_dir_all(config.join("sessions")).unwrap();
    let env: Vec<(&str, &Path)> = vec![("SPEX_HOME", &store), ("HOME", &home)];
    eprintln!("creating {LIVE} live Claude sessions (processes + registry files)...");
    let claude = ClaudeEnv {
        spex: &spex,
        env: &env,
        repo: &repo,
        config: &config,
    };
    let mut children: Vec<Child> = Vec::new();
    for i in 0..LIVE {
        let sid = format!("00000000-0000-4000-8000-{i:012}");
        children.push(claude.live_session(&sid, i, false));
    }
    eprintln!("creating {EXITED} exited Codex sessions...");
    for i in 0..EXITED {
        let base = serde_json::json!({"session_id": format!("thread-{i:04}"), "cwd": repo, "turn_id": "t1"});
        let mut ups = base.clone();
        ups["prompt"] = "done long ago".into();
        dispatch(&spex, &env, &repo, "codex", "UserPromptSubmit", &ups);
        dispatch(&spex, &env, &repo, "codex", "SessionEnd", &base);
    }
    let run = || time_spex(&spex, &["sessions", "--json"], &env, &repo);
    // The first reader records each live session's process and claims every handle.
    let (first, _) = run();
    let (_, out) = run();
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&out).expect("json");
    assert_eq!(listed.len(), LIVE, "the live sessions, and only they");
    assert!(
        listed
            .iter()
            .all(|s| s["status"] == "working" && s["process"]["pid"].is_u64()),
        "every live session is working with its process recorded"
    );
    let mut t: Vec<Duration> = (0..RUNS).map(|_| run().0).collect();
    t.sort();
    println!(
        "spex sessions --json ({LIVE} live sessions with registry files and processes, {EXITED} exited; {RUNS} runs)"
    );
    println!(
        "  first run (records processes, claims handles): {:.1} ms",
        ms(first)
    );
    println!(
        "  p50 {:.1} ms   p90 {:.1} ms   max {:.1} ms   (goal: < 50 ms)",
        ms(percentile(&t, 500)),
        ms(percentile(&t, 900)),
        ms(t[t.len() - 1])
    );
    for mut c in children {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// splitmix64: ids that look random and are the same on every run.
struct Ids(u64);

impl Ids {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A random (version 4) UUID, as Claude names its sessions.
    fn v4(&mut self) -> String {
        let (a, b) = (self.next(), self.next());
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            0x8000 | ((b >> 48) & 0x3fff),
            b & 0xffff_ffff_ffff
        )
    }

    /// A time-ordered (version 7) UUID made at `ms`, as Codex names its threads (ids made close together share
    /// their first characters).
    fn v7(&mut self, ms: u64) -> String {
        let b = self.next();
        format!(
            "{:08x}-{:04x}-7{:03x}-{:04x}-{:012x}",
            ms >> 16,
            ms & 0xffff,
            (b >> 52) & 0xfff,
            0x8000 | ((b >> 36) & 0x3fff),
            b & 0xffff_ffff_ffff
        )
    }
}

fn all() {
    let spex = PathBuf::from(env!("CARGO_BIN_EXE_spex"));
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = repo_in(dir.path());
    let store = dir.path().join("store");
    let home = dir.path().join("home");
    let claude = home.join(".claude");
    let rollouts = home.join(".codex/sessions/2026/11/23");
    std::fs::create_dir_all(claude.join("sessions")).unwrap();
    std::fs::create_dir_all(&rollouts).unwrap();
    let env: Vec<(&str, &Path)> = vec![("SPEX_HOME", &store), ("HOME", &home)];
    let rollout =
        |thread: &str| rollouts.join(format!("rollout-2026-11-23T10-00-00-{thread}.jsonl"));
    let mut ids = Ids(0x5e55_1075);
    let mut thread_ms: u64 = 1_763_892_000_000;
    let mut v7 = |ids: &mut Ids| {
        thread_ms += 1500;
        ids.v7(thread_ms)
    };
    let live_claude = ClaudeEnv {
        spex: &spex,
        env: &env,
        repo: &repo,
        config: &claude,
    };
    let mut children: Vec<Child> = Vec::new();
    eprintln!(
        "creating {} live Claude and Codex sessions (half working, half idle; processes)...",
        4 * ALL_LIVE_EACH
    );
    for idle in [false, true] {
        for i in 0..ALL_LIVE_EACH {
            let sid = ids.v4();
            children.push(live_claude.live_session(&sid, i, idle));
        }
        for i in 0..ALL_LIVE_EACH {
            let thread = v7(&mut ids);
            let log = rollout(&thread);
            std::fs::write(&log, "{}\n").unwrap();
            // The process that holds the thread keeps its rollout log open.
            let child = Command::new("sleep")
                .arg("600")
                .stdin(std::fs::File::open(&log).unwrap())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn sleep");
            children.push(child);
            let base = serde_json::json!({"session_id": thread, "cwd": repo,
                "transcript_path": log, "turn_id": "t1"});
            let mut ups = base.clone();
            ups["prompt"] = format!("prompt {i}").into();
            dispatch(&spex, &env, &repo, "codex", "SessionStart", &base);
            dispatch(&spex, &env, &repo, "codex", "UserPromptSubmit", &ups);
            if idle {
                dispatch(&spex, &env, &repo, "codex", "Stop", &base);
            }
        }
    }
    eprintln!("creating {ALL_EXITED} exited Claude and Codex sessions...");
    let mut templates: Vec<(&str, String)> = Vec::new();
    for harness in ["claude", "codex"] {
        let (sid, base) = if harness == "claude" {
            let sid = ids.v4();
            let transcript = claude.join(format!("projects/-repo/{sid}.jsonl"));
            let base =
                serde_json::json!({"session_id": sid, "cwd": repo, "transcript_path": transcript});
            (sid, base)
        } else {
            let thread = v7(&mut ids);
            let base = serde_json::json!({"session_id": thread, "cwd": repo,
                "transcript_path": rollout(&thread), "turn_id": "t1"});
            (thread, base)
        };
        let mut ups = base.clone();
        ups["prompt"] = "done long ago".into();
        ups["prompt_id"] = "p-0".into();
        let mut end = base.clone();
        end["reason"] = "exit".into();
        dispatch(&spex, &env, &repo, harness, "SessionStart", &base);
        dispatch(&spex, &env, &repo, harness, "UserPromptSubmit", &ups);
        dispatch(&spex, &env, &repo, harness, "Stop", &base);
        dispatch(&spex, &env, &repo, harness, "SessionEnd", &end);
        templates.push((harness, sid));
    }
    let projects: Vec<PathBuf> = std::fs::read_dir(store.join("projects"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(projects.len(), 1, "one project");
    let project = &projects[0];
    // Each template's files (`session.json`, `events.jsonl`, `lock`), copied under a new id.
    let files: Vec<Vec<(std::ffi::OsString, String)>> = templates
        .iter()
        .map(|(_, sid)| {
            std::fs::read_dir(project.join("sessions").join(sid))
                .unwrap()
                .map(|e| {
                    let e = e.unwrap();
                    (e.file_name(), std::fs::read_to_string(e.path()).unwrap())
                })
                .collect()
        })
        .collect();
    for i in 0..ALL_EXITED - templates.len() {
        let t = i % templates.len();
        let (harness, template) = &templates[t];
        let id = if *harness == "claude" {
            ids.v4()
        } else {
            v7(&mut ids)
        };
        let at = project.join("sessions").join(&id);
        std::fs::create_dir_all(&at).unwrap();
        for (name, text) in &files[t] {
            std::fs::write(at.join(name), text.replace(template.as_str(), &id)).unwrap();
        }
        std::fs::write(project.join("aliases").join(format!("{harness}-{id}")), &id).unwrap();
    }
    let total = 4 * ALL_LIVE_EACH + ALL_EXITED;
    let run = || time_spex(&spex, &["sessions", "--all", "--json"], &env, &repo);
    // The first reader records each live session's process and claims every handle.
    let (first, _) = run();
    let (_, out) = run();
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&out).expect("json");
    assert_eq!(listed.len(), total, "every record");
    let count = |status: &str| listed.iter().filter(|s| s["status"] == status).count();
    assert_eq!(count("exited"), ALL_EXITED);
    assert_eq!(count("working"), 2 * ALL_LIVE_EACH);
    assert_eq!(count("idle"), 2 * ALL_LIVE_EACH);
    assert!(
        listed.iter().all(|s| s["handle"].is_string()
            && (s["status"] == "exited" || s["process"]["pid"].is_u64())),
        "every record has its handle, every live one its process"
    );
    let mut t: Vec<Duration> = (0..ALL_RUNS).map(|_| run().0).collect();
    t.sort();
    println!(
        "spex sessions --all --json ({total} records: {ALL_EXITED} exited, {} working, {} idle, Claude and Codex; {} KiB of JSON; {ALL_RUNS} runs)",
        2 * ALL_LIVE_EACH,
        2 * ALL_LIVE_EACH,
        out.len() / 1024
    );
    println!(
        "  first run (records processes, claims handles): {:.1} ms",
        ms(first)
    );
    println!(
        "  p50 {:.1} ms   p90 {:.1} ms   max {:.1} ms   (goal: < 250 ms)",
        ms(percentile(&t, 500)),
        ms(percentile(&t, 900)),
        ms(t[t.len() - 1])
    );
    if std::env::var_os("SPEX_BENCH_KEEP").is_some() {
        let kept = dir.keep();
        let pids: Vec<String> = children.iter().map(|c| c.id().to_string()).collect();
        eprintln!(
            "kept {}: SPEX_HOME={} HOME={} (repo {}); the live sessions' processes run for 600 s: {}",
            kept.display(),
            store.display(),
            home.display(),
            repo.display(),
            pids.join(" ")
        );
        return;
    }
    for mut c in children {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// The `projects` case: projects, and per project live sessions (working, idle) and records.
const PROJECTS: usize = 20;
const PROJECT_WORKING: usize = 3;
const PROJECT_IDLE: usize = 2;
const PROJECT_RECORDS: usize = 100;
const PROJECT_RUNS: usize = 30;

/// Copies session `template` of `project` (its store folder) `n` times under fresh ids, with
/// its alias file, as the store writes them.
fn copies(project: &Path, harness: &str, template: &str, n: usize, ids: &mut Ids) {
    let files: Vec<(std::ffi::OsString, String)> =
        std::fs::read_dir(project.join("sessions").join(template))
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.file_name(), std::fs::read_to_string(e.path()).unwrap())
            })
            .collect();
    for _ in 0..n {
        let id = ids.v4();
        let at = project.join("sessions").join(&id);
        std::fs::create_dir_all(&at).unwrap();
        for (name, text) in &files {
            std::fs::write(at.join(name), text.replace(template, &id)).unwrap();
        }
        std::fs::write(project.join("aliases").join(format!("{harness}-{id}")), &id).unwrap();
    }
}

fn projects() {
    let spex = PathBuf::from(env!("CARGO_BIN_EXE_spex"));
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let home = dir.path().join("home");
    let claude = home.join(".claude");
    let outside = dir.path().join("elsewhere");
    std::fs::create_dir_all(claude.join("sessions")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let env: Vec<(&str, &Path)> = vec![("SPEX_HOME", &store), ("HOME", &home)];
    let mut ids = Ids(0x90e1_ec75);
    let mut children: Vec<Child> = Vec::new();
    let live = PROJECT_WORKING + PROJECT_IDLE;
    eprintln!(
        "creating {PROJECTS} projects of {PROJECT_RECORDS} records ({live} live sessions with processes each)..."
    );
    for p in 0..PROJECTS {
        let repo = repo_in(&dir.path().join(format!("p{p:02}")));
        let claude_env = ClaudeEnv {
            spex: &spex,
            env: &env,
            repo: &repo,
            config: &claude,
        };
        for i in 0..live {
            children.push(claude_env.live_session(&ids.v4(), i, i >= PROJECT_WORKING));
        }
        let sid = ids.v4();
        let base = serde_json::json!({"session_id": sid, "cwd": repo});
        let mut ups = base.clone();
        ups["prompt"] = "done long ago".into();
        let mut end = base.clone();
        end["reason"] = "exit".into();
        for (event, payload) in [
            ("SessionStart", &base),
            ("UserPromptSubmit", &ups),
            ("Stop", &base),
            ("SessionEnd", &end),
        ] {
            dispatch(&spex, &env, &repo, "claude", event, payload);
        }
        let project = std::fs::read_dir(store.join("projects"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|d| d.join("sessions").join(&sid).is_dir())
            .expect("the project's store folder");
        copies(
            &project,
            "claude",
            &sid,
            PROJECT_RECORDS - live - 1,
            &mut ids,
        );
    }
    let table = || time_spex(&spex, &["sessions", "--all-projects"], &env, &outside);
    let json = || {
        time_spex(
            &spex,
            &["sessions", "--all-projects", "--all", "--json"],
            &env,
            &outside,
        )
    };
    // The first reader records each live session's process and claims every handle.
    let (first, _) = json();
    let (_, out) = json();
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&out).expect("json");
    let total = PROJECTS * PROJECT_RECORDS;
    assert_eq!(listed.len(), total, "every record");
    let statuses: Vec<&str> = listed
        .iter()
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    let working = PROJECTS * PROJECT_WORKING;
    let idle = PROJECTS * PROJECT_IDLE;
    assert!(
        statuses[..working].iter().all(|s| *s == "working")
            && statuses[working..working + idle]
                .iter()
                .all(|s| *s == "idle")
            && statuses[working + idle..].iter().all(|s| *s == "exited"),
        "working, then idle, then exited"
    );
    let (_, out) = table();
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("PROJECT"), "{text}");
    assert_eq!(text.lines().count(), 1 + working + idle, "{text}");
    for (what, run) in [
        (
            "spex sessions --all-projects (the table of the live sessions)",
            &table as &dyn Fn() -> (Duration, Vec<u8>),
        ),
        (
            "spex sessions --all-projects --all --json (every record)",
            &json,
        ),
    ] {
        let mut t: Vec<Duration> = (0..PROJECT_RUNS).map(|_| run().0).collect();
        t.sort();
        println!(
            "{what}: {PROJECTS} projects, {total} records ({working} working, {idle} idle with processes); {PROJECT_RUNS} runs"
        );
        println!(
            "  p50 {:.1} ms   p90 {:.1} ms   max {:.1} ms   (goal: <= 50 ms)",
            ms(percentile(&t, 500)),
            ms(percentile(&t, 900)),
            ms(t[t.len() - 1])
        );
    }
    println!(
        "  first run (records processes, claims handles): {:.1} ms",
        ms(first)
    );
    if std::env::var_os("SPEX_BENCH_KEEP").is_some() {
        let kept = dir.keep();
        eprintln!(
            "kept {}: SPEX_HOME={} HOME={} (run from {}); the live sessions' processes run for 600 s",
            kept.display(),
            store.display(),
            home.display(),
            outside.display()
        );
        return;
    }
    for mut c in children {
        let _ = c.kill();
        let _ = c.wait();
    }
}
