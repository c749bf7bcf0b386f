//! Benchmark of the hook hot path: `spex dispatch codex PreToolUse` (a Bash tool call of a
//! known session) in a project whose store holds 1,000 session records, against starting
//! `/bin/true` with the same stdin in the same run; then, with 500 governed spec nodes (mixed
//! glob forms), an `apply_patch` of a governed file against the same call in a linked worktree
//! of the project that has no spec tree (the no-spec case), interleaved in the same run, with
//! an ungoverned file and a Bash call (which edits nothing) beside them. Run:
//! `cargo bench --bench dispatch`.

#![expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SESSIONS: usize = 1000;
const RUNS: usize = 400;
const NODES: usize = 500;

fn run(program: &Path, args: &[&str], env: &[(&str, &Path)], cwd: &Path, stdin: &[u8]) -> Duration {
    let start = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    // `/bin/true` exits without reading: a broken pipe here is expected.
    let _ = child.stdin.take().expect("stdin").write_all(stdin);
    let status = child.wait().expect("wait");
    let took = start.elapsed();
    assert!(status.success());
    took
}

/// The value at `per_mille` / 1000 of a sorted sample (nearest rank).
fn percentile(sorted: &[Duration], per_mille: usize) -> Duration {
    sorted[((sorted.len() - 1) * per_mille).div_ceil(1000)]
}

fn payload(repo: &Path, thread: &str, event: &str) -> Vec<u8> {
    serde_json::json!({
        "session_id": thread, "turn_id": "turn-1", "cwd": repo, "hook_event_name": event, "model": "gpt-5.5",
        "permission_mode": "bypassPermissions", "tool_name": "Bash", "tool_use_id": "call_1",
        "tool_input": { "command": "cargo test" },
        "transcript_path": "/tmp/rollout.jsonl",
    })
    .to_string()
    .into_bytes()
}

/// Flushes what setting the store up wrote, so its writeback does not land in the timed runs
/// (each dispatch renames a record, which waits on the file system's journal).
fn settle_writes() {
    assert!(Command::new("sync").status().expect("sync").success());
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
    // A first commit, so that the project can have a linked worktree without the spec tree.
    assert!(
        Command::new("git")
            .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"])
            .args(["commit", "-q", "--allow-empty", "-m", "init"])
            .current_dir(&repo)
            .status()
            .unwrap()
            .success()
    );
    let store = dir.path().join("store");
    let env: Vec<(&str, &Path)> = vec![("SPEX_HOME", &store), ("HOME", dir.path())];
    std::fs::write(repo.join("spex.jsonc"), "{ \"harnesses\": [\"codex\"] }").unwrap();
    let materialize = |tree: &Path| {
        let st = Command::new(&spex)
            .arg("materialize")
            .current_dir(tree)
            .envs(env.iter().map(|(k, v)| (*k, *v)))
            .env("CODEX_HOME", dir.path().join("codex"))
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
    };
    materialize(&repo);
    eprintln!("creating {SESSIONS} session records...");
    for i in 0..SESSIONS {
        run(
            &spex,
            &["dispatch", "codex", "SessionStart"],
            &env,
            &repo,
            &payload(&repo, &format!("thread-{i:04}"), "SessionStart"),
        );
    }
    let sessions = std::fs::read_dir(store.join("projects"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("sessions");
    assert_eq!(
        std::fs::read_dir(&sessions).unwrap().count(),
        SESSIONS,
        "every session has a record"
    );
    let hot = payload(&repo, "thread-0500", "PreToolUse");
    let truth = PathBuf::from("/bin/true");
    settle_writes();
    // Warm the page cache for both.
    for _ in 0..20 {
        run(
            &spex,
            &["dispatch", "codex", "PreToolUse"],
            &env,
            &repo,
            &hot,
        );
        run(&truth, &[], &env, &repo, &hot);
    }
    let (mut s, mut t) = (Vec::with_capacity(RUNS), Vec::with_capacity(RUNS));
    for _ in 0..RUNS {
        // Interleaved, so both see the same machine load.
        s.push(run(
            &spex,
            &["dispatch", "codex", "PreToolUse"],
            &env,
            &repo,
            &hot,
        ));
        t.push(run(&truth, &[], &env, &repo, &hot));
    }
    s.sort();
    t.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let (sp50, sp99, tp50, tp99) = (
        percentile(&s, 500),
        percentile(&s, 990),
        percentile(&t, 500),
        percentile(&t, 990),
    );
    println!(
        "dispatch codex PreToolUse ({SESSIONS} sessions in store, {RUNS} runs each, interleaved)"
    );
    println!(
        "  spex dispatch: p50 {:7.0} us   p99 {:7.0} us",
        us(sp50),
        us(sp99)
    );
    println!(
        "  /bin/true:     p50 {:7.0} us   p99 {:7.0} us",
        us(tp50),
        us(tp99)
    );
    println!(
        "  ratio p50: {:.2}x   ratio p99: {:.2}x   (goal: p50 <= 1.5x)",
        us(sp50) / us(tp50),
        us(sp99) / us(tp99)
    );
    let events = std::fs::read_to_string(sessions.join("thread-0500/events.jsonl")).unwrap();
    assert_eq!(
        events.lines().count(),
        1 + 20 + RUNS,
        "every dispatch appended its event"
    );

    // 500 governed nodes: does the cost grow with the spec tree?
    for i in 0..NODES {
        let code = match i % 4 {
            0 => format!("dir{i}/**"),
            1 => format!("**/*.p{i}"),
            2 => format!("lib{i}/a*_*.rs"),
            _ => format!("{{a{i},b{i}}}/**/*.ts"),
        };
        let node = repo.join(format!(".spec/n{i}"));
        std::fs::create_dir_all(&node).unwrap();
        std::fs::write(
            node.join("spec.md"),
            format!("---\ntitle: Node {i}\nsurface: system\ncode: [\"{code}\"]\n---\nRule {i}.\n"),
        )
        .unwrap();
    }
    materialize(&repo);
    let plain = dir.path().join("plain");
    assert!(
        Command::new("git")
            .args(["worktree", "add", "-q"])
            .arg(&plain)
            .current_dir(&repo)
            .status()
            .unwrap()
            .success()
    );
    std::fs::write(plain.join("spex.jsonc"), "{ \"harnesses\": [\"codex\"] }").unwrap();
    materialize(&plain);
    let edit = |tree: &Path, file: &str| {
        serde_json::json!({
            "session_id": "thread-0501", "turn_id": "turn-1", "cwd": tree, "hook_event_name": "PreToolUse",
            "model": "gpt-5.5", "permission_mode": "bypassPermissions", "tool_name": "apply_patch",
            "tool_use_id": "call_2", "transcript_path": "/tmp/rollout.jsonl",
            "tool_input": { "command": format!("*** Begin Patch\n*** Update File: {file}\n@@\n-a\n+b\n*** End Patch\n") },
        })
        .to_string()
        .into_bytes()
    };
    let cases: [(&str, Vec<u8>); 5] = [
        ("governed file", edit(&repo, "dir248/x.rs")),
        ("ungoverned file", edit(&repo, "docs/readme.md")),
        ("no-spec case", edit(&plain, "dir248/x.rs")),
        ("Bash call", payload(&repo, "thread-0500", "PreToolUse")),
        (
            "Bash, no spec",
            payload(&plain, "thread-0500", "PreToolUse"),
        ),
    ];
    let args = ["dispatch", "codex", "PreToolUse"];
    settle_writes();
    let mut took: Vec<Vec<Duration>> = vec![Vec::with_capacity(RUNS); cases.len() + 1];
    for round in 0..RUNS {
        // Interleaved, each round starting one case later, so no case always follows another.
        for k in 0..=cases.len() {
            let i = (round + k) % (cases.len() + 1);
            took[i].push(match cases.get(i) {
                Some((_, stdin)) => run(&spex, &args, &env, &repo, stdin),
                None => run(&truth, &[], &env, &repo, &cases[0].1),
            });
        }
    }
    let p50: Vec<f64> = took
        .iter_mut()
        .map(|v| {
            v.sort();
            us(percentile(v, 500))
        })
        .collect();
    let p99: Vec<f64> = took.iter().map(|v| us(percentile(v, 990))).collect();
    println!(
        "apply_patch PreToolUse with {NODES} governed spec nodes vs a worktree without them ({RUNS} runs each, interleaved)"
    );
    for (i, (name, _)) in cases.iter().enumerate() {
        println!("  {name:16} p50 {:7.0} us   p99 {:7.0} us", p50[i], p99[i]);
    }
    let t = cases.len();
    println!(
        "  {:16} p50 {:7.0} us   p99 {:7.0} us",
        "/bin/true", p50[t], p99[t]
    );
    println!(
        "  governed / no-spec p50: {:.2}x (goal <= 1.10x)   governed / true p50: {:.2}x (goal <= 1.5x)",
        p50[0] / p50[2],
        p50[0] / p50[t]
    );
    println!(
        "  ungoverned / no-spec p50: {:.2}x   Bash / Bash without spec p50: {:.2}x",
        p50[1] / p50[2],
        p50[3] / p50[4]
    );
}
