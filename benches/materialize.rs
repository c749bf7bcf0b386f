//! Benchmark of `spex materialize` in a repository with 200 spec nodes and 20 linked
//! worktrees: the first run, and the no-change run that every later call costs.
//! Run: `cargo bench --bench materialize`.

#![expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::too_many_lines,
    reason = "benchmark rigging, not product code: a failed setup call panics on the spot, so fs_err's path adds little, and a scenario reads best as one function"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const NODES: usize = 200;
const WORKTREES: usize = 20;
const RUNS: usize = 50;

fn git(cwd: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(args)
        .current_dir(cwd)
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@b")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@b")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

fn main() {
    let spex = PathBuf::from(env!("CARGO_BIN_EXE_spex"));
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(
        repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\", \"codex\"] }",
    )
    .unwrap();
    for i in 0..NODES {
        let (surface, extra) = match i % 4 {
            0 => ("system", String::new()),
            1 => ("skill", format!("desc: Skill number {i}\n")),
            2 => (
                "agent",
                format!("desc: Agent number {i}\ntools: [Read, Grep]\n"),
            ),
            _ => ("system", format!("code: [\"src/m{i}/**\"]\n")),
        };
        let node = repo.join(format!(".spec/area{}/node{i:03}", i % 10));
        std::fs::create_dir_all(&node).unwrap();
        std::fs::write(
            node.join("spec.md"),
            format!(
                "---\ntitle: Node {i}\nsurface: {surface}\n{extra}---\nRule {i}: keep it simple.\n"
            ),
        )
        .unwrap();
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "specs"]);
    let mut trees = vec![repo.clone()];
    for w in 0..WORKTREES {
        let path = dir.path().join(format!("wt{w:02}"));
        git(
            &repo,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                &format!("b{w}"),
                path.to_str().unwrap(),
            ],
        );
        trees.push(path);
    }
    let run = |cwd: &Path| {
        let start = Instant::now();
        let st = Command::new(&spex)
            .arg("materialize")
            .current_dir(cwd)
            .env("SPEX_HOME", dir.path().join("store"))
            .env("HOME", dir.path())
            .env("CODEX_HOME", dir.path().join("codex"))
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
        start.elapsed()
    };
    let first: Vec<Duration> = trees.iter().map(|t| run(t)).collect();
    let mut again: Vec<Duration> = (0..RUNS).map(|i| run(&trees[i % trees.len()])).collect();
    again.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("materialize: {NODES} spec nodes, {WORKTREES} linked worktrees");
    println!(
        "  first run, main checkout: {:.1} ms; all {} trees: {:.1} ms total",
        ms(first[0]),
        trees.len(),
        ms(first.iter().sum())
    );
    println!(
        "  no-change run: p50 {:.1} ms   p90 {:.1} ms   max {:.1} ms   (goal: < 50 ms)",
        ms(again[RUNS / 2]),
        ms(again[RUNS * 9 / 10]),
        ms(again[RUNS - 1])
    );
}
