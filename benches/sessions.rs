//! Benchmark of a reader: `spex sessions --json` in a project whose store holds 100 live Claude
//! sessions (each with its registry file `<config>/sessions/<pid>.json` and a running process,
//! so the reader checks every one: a small read and a `/proc` stat each) and 1,000 exited
//! sessions. Run: `cargo bench --bench sessions`.

#![expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LIVE: usize = 100;
const EXITED: usize = 1000;
const RUNS: usize = 60;

fn dispatch(
    spex: &Path,
    env: &[(&str, &Path)],
    repo: &Path,
    harness: &str,
    event: &str,
    payload: &serde_json::Value,
) {
    let mut child = Command::new(spex)
        .args(["dispatch", harness, event])
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .current_dir(repo)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn spex");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(payload.to_string().as_bytes())
        .expect("write payload");
    assert!(child.wait().expect("wait").success());
}

/// Field 22 of `/proc/<pid>/stat`: what Claude writes as `procStart`.
fn proc_start(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("proc stat");
    let rest = &stat[stat.rfind(')').expect("comm") + 1..];
    rest.split_whitespace()
        .nth(19)
        .expect("field 22")
        .to_owned()
}

fn percentile(sorted: &[Duration], per_mille: usize) -> Duration {
    sorted[((sorted.len() - 1) * per_mille).div_ceil(1000)]
}

fn main() {
    let spex = PathBuf::from(env!("CARGO_BIN_EXE_spex"));
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    assert!(
        Command::new("git")
            .args(["init", "-q"])
            .current_dir(&repo)
            .status()
            .unwrap()
            .success()
    );
    let store = dir.path().join("store");
    let home = dir.path().join("home");
    let config = home.join(".claude");
    std::fs::create_dir_all(config.join("sessions")).unwrap();
    let env: Vec<(&str, &Path)> = vec![("SPEX_HOME", &store), ("HOME", &home)];
    eprintln!("creating {LIVE} live Claude sessions (processes + registry files)...");
    let mut children: Vec<Child> = Vec::new();
    for i in 0..LIVE {
        let sid = format!("00000000-0000-4000-8000-{i:012}");
        let child = Command::new("sleep")
            .arg("600")
            .spawn()
            .expect("spawn sleep");
        let pid = child.id();
        children.push(child);
        let transcript = config.join(format!("projects/-repo/{sid}.jsonl"));
        let base =
            serde_json::json!({"session_id": sid, "cwd": repo, "transcript_path": transcript});
        let mut ups = base.clone();
        ups["prompt"] = format!("prompt {i}").into();
        ups["prompt_id"] = format!("p-{i}").into();
        dispatch(&spex, &env, &repo, "claude", "SessionStart", &base);
        dispatch(&spex, &env, &repo, "claude", "UserPromptSubmit", &ups);
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis();
        let reg = serde_json::json!({"pid": pid, "sessionId": sid, "cwd": repo, "procStart": proc_start(pid),
            "kind": "interactive", "status": "busy", "updatedAt": now_ms, "statusUpdatedAt": now_ms});
        std::fs::write(config.join(format!("sessions/{pid}.json")), reg.to_string()).unwrap();
    }
    eprintln!("creating {EXITED} exited Codex sessions...");
    for i in 0..EXITED {
        let base = serde_json::json!({"session_id": format!("thread-{i:04}"), "cwd": repo, "turn_id": "t1"});
        let mut ups = base.clone();
        ups["prompt"] = "done long ago".into();
        dispatch(&spex, &env, &repo, "codex", "UserPromptSubmit", &ups);
        dispatch(&spex, &env, &repo, "codex", "SessionEnd", &base);
    }
    let run = || {
        let start = Instant::now();
        let out = Command::new(&spex)
            .args(["sessions", "--json"])
            .envs(env.iter().map(|(k, v)| (*k, *v)))
            .current_dir(&repo)
            .output()
            .expect("spex sessions");
        let took = start.elapsed();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (took, out.stdout)
    };
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
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
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
