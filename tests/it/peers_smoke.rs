//! Smoke tests: the fakes in `support` drive the REAL pinned harnesses end to end (no mocks).
//! They need `scripts/install-peers.sh` and fail (never skip) without it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::common::read_or_empty;
use crate::support::claude_home::{claude_command, print_turn};
use crate::support::codex_home::{codex_command, write_codex_config};
use crate::support::fake_anthropic::{FakeAnthropic, WRITE_CONTENT};
use crate::support::fake_responses::FakeResponses;
use crate::support::rpc::AppServer;

const TURN_TIMEOUT: Duration = Duration::from_secs(90);

fn git_init(dir: &Path, home: &Path) {
    fs::create_dir_all(dir).unwrap();
    let st = Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .status()
        .expect("run git");
    assert!(st.success(), "git init failed in {}", dir.display());
}

#[test]
fn claude_print_mode_writes_file_and_fires_project_hooks() {
    let started = Instant::now();
    let fake = FakeAnthropic::start();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let repo = tmp.path().join("repo");
    fs::create_dir_all(&home).unwrap();
    git_init(&repo, &home);

    // Each hook appends its event name; an absolute path keeps the hook independent of cwd.
    let hook_log = tmp.path().join("hooks.log");
    let hook = |event: &str| {
        json!([{"hooks": [{"type": "command",
            "command": format!("echo {event} >> '{}'", hook_log.display())}]}])
    };
    fs::create_dir_all(repo.join(".claude")).unwrap();
    fs::write(
        repo.join(".claude/settings.json"),
        json!({"hooks": {"PreToolUse": hook("PreToolUse"), "Stop": hook("Stop")}}).to_string(),
    )
    .unwrap();

    let mut cmd = claude_command(&home, &fake.base_url());
    let run = print_turn(&mut cmd, &fake, &repo, tmp.path(), "claude", TURN_TIMEOUT);
    let diag = &run.diag;

    assert_eq!(
        read_or_empty(&repo.join("hello.txt")),
        WRITE_CONTENT,
        "hello.txt not written\n{diag}"
    );
    let hooks = read_or_empty(&hook_log);
    let fired: Vec<&str> = hooks.lines().collect();
    assert!(
        fired.contains(&"PreToolUse"),
        "hooks fired: {fired:?}\n{diag}"
    );
    assert!(fired.contains(&"Stop"), "hooks fired: {fired:?}\n{diag}");
    let result = run
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "result")
        .unwrap_or_else(|| panic!("no result line\n{diag}"));
    assert_eq!(result["subtype"], "success", "{result}");
    // The fake's script ran as designed: one Write, then the final answer after its result.
    let answered: Vec<Value> = fake
        .requests()
        .iter()
        .map(|r| r["answered"].clone())
        .collect();
    let write = answered.iter().position(|a| a == "Write");
    let fin = answered.iter().position(|a| a == "final");
    assert!(
        write.is_some() && fin > write,
        "answers: {answered:?}\n{diag}"
    );
    eprintln!("claude smoke: {:?}", started.elapsed());
}

/// A real `codex app-server` on a Unix socket, configured for a [`FakeResponses`], with one
/// initialized WebSocket client, after one thread ran one completed turn.
struct CodexRig {
    // First: the server stops before the fake and the folders go.
    app: AppServer,
    fake: FakeResponses,
    repo: PathBuf,
    _tmp: TempDir,
}

impl CodexRig {
    /// Runs `text` as the first turn of a new thread (approval `never`, sandbox
    /// `danger-full-access`); the turn must complete.
    fn run(text: &str) -> CodexRig {
        let fake = FakeResponses::start();
        // AF_UNIX paths max out at 108 bytes; keep the socket's directory short.
        let tmp = tempfile::Builder::new()
            .prefix("spx")
            .tempdir_in("/tmp")
            .unwrap();
        let codex_home = tmp.path().join("ch");
        let home = tmp.path().join("h");
        let repo = tmp.path().join("r");
        fs::create_dir_all(&home).unwrap();
        git_init(&repo, &home);
        write_codex_config(&codex_home, &fake.base_url(), "never", "danger-full-access");
        let mut cmd = codex_command(&codex_home, &home);
        cmd.current_dir(&repo);
        let app = AppServer::start(&mut cmd, tmp.path(), "s", "spex-smoke");
        let mut rig = CodexRig {
            app,
            fake,
            repo,
            _tmp: tmp,
        };

        let thread_id = rig.app.start_thread(&json!({"cwd": rig.repo}));
        let turn = rig.app.start_turn(&thread_id, text);
        let completed = rig.app.wait_completed(&turn, TURN_TIMEOUT);
        let completed = completed.unwrap_or_else(|| panic!("no turn/completed\n{}", rig.diag()));
        assert_eq!(
            completed["turn"]["status"],
            "completed",
            "{completed}\n{}",
            rig.diag()
        );
        rig
    }

    fn diag(&self) -> String {
        format!(
            "{}\nrequests: {:?}",
            self.app.log(),
            self.fake.request_lines()
        )
    }
}

#[test]
fn codex_app_server_turn_applies_patch_from_fake() {
    let started = Instant::now();
    let rig = CodexRig::run("SCENARIO:patch");
    assert_eq!(
        read_or_empty(&rig.repo.join("hello.txt")),
        "hello from fake model\n",
        "hello.txt not written\n{}",
        rig.diag()
    );
    // The scripted reply depends on reading the request body, so it must have been plain JSON.
    assert!(
        rig.fake
            .requests()
            .iter()
            .all(|r| r["headers"].get("content-encoding").is_none()),
        "Codex compressed a request body\n{}",
        rig.diag()
    );
    drop(rig);
    eprintln!("codex smoke: {:?}", started.elapsed());
}

/// The invented `multipatch` scenario really reaches Codex's `apply_patch` with several files
/// per envelope (adds, a new subdirectory, an update), which the dispatcher tests rely on.
#[test]
fn codex_multipatch_scenario_touches_every_file() {
    let rig = CodexRig::run("SCENARIO:multipatch");
    for (file, content) in [
        ("a.txt", "alpha two\n"),
        ("sub/b.txt", "beta\n"),
        ("c.txt", "gamma\n"),
    ] {
        assert_eq!(
            read_or_empty(&rig.repo.join(file)),
            content,
            "{file}\n{}",
            rig.diag()
        );
    }
}
