//! Smoke tests: the fakes in `support` drive the REAL pinned harnesses end to end (no mocks).
//! They need `scripts/install-peers.sh` and fail (never skip) without it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::claude_home::{claude_command, print_turn};
use crate::support::codex_home::{codex_command, write_codex_config};
use crate::support::fake_anthropic::{FakeAnthropic, WRITE_CONTENT};
use crate::support::fake_gemini::{self, FakeGemini};
use crate::support::fake_responses::FakeResponses;
use crate::support::gemini_home::{
    FAKE_GEMINI_KEY, GEMINI_MODEL, INPUT_PLACEHOLDER, gemini_command, headless_turn,
    seed_gemini_home, submit_prompt, trust_folder, type_and_enter, wait_tui_ready,
};
use crate::support::peers::{group_members, processes_in};
use crate::support::rpc::AppServer;
use crate::support::term::Term;
use crate::support::world::read_or_empty;

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
        let completed = rig.app.completed_within(&turn, TURN_TIMEOUT);
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

/// A temp folder with a seeded Gemini home (`h`) and a trusted git repository (`r`).
struct GeminiRig {
    home: PathBuf,
    repo: PathBuf,
    tmp: TempDir,
}

impl GeminiRig {
    fn new() -> GeminiRig {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("h");
        let repo = tmp.path().join("r");
        fs::create_dir_all(&home).unwrap();
        git_init(&repo, &home);
        seed_gemini_home(&home);
        trust_folder(&home, &repo);
        GeminiRig { home, repo, tmp }
    }
}

/// The payloads a project hook appended to `log` (one JSON document per line).
fn hook_payloads(log: &Path) -> Vec<Value> {
    read_or_empty(log)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A headless `--yolo` turn of the real Gemini CLI against the fake: the model's `write_file`
/// and `run_shell_command` really run in the repo, their results reach the model, and the
/// project's `.gemini/settings.json` hooks fire in the trusted folder (the seeded home is
/// right: API-key auth, the pinned model, folder trust).
#[test]
fn gemini_headless_yolo_turn_runs_tools_and_fires_project_hooks() {
    let started = Instant::now();
    let fake = FakeGemini::start();
    let rig = GeminiRig::new();
    // Each hook appends its payload (one line of JSON) to the log; an absolute path keeps the
    // hook independent of its cwd.
    let hook_log = rig.tmp.path().join("hooks.jsonl");
    let hook = |matcher: &str| {
        json!([{"matcher": matcher, "hooks": [{"type": "command", "name": "capture",
            "command": format!("(cat; echo) >> '{}'", hook_log.display()), "timeout": 10000}]}])
    };
    fs::create_dir_all(rig.repo.join(".gemini")).unwrap();
    fs::write(
        rig.repo.join(".gemini/settings.json"),
        json!({"hooks": {"BeforeTool": hook("run_shell_command"), "AfterAgent": hook("")}})
            .to_string(),
    )
    .unwrap();

    let mut cmd = gemini_command(&rig.home, &fake.base_url());
    cmd.arg("--yolo");
    let turn = headless_turn(
        &mut cmd,
        &fake,
        &rig.repo,
        rig.tmp.path(),
        "gemini",
        "SCENARIO:both go",
        TURN_TIMEOUT,
    );
    turn.assert_success();
    let diag = &turn.diag;

    assert_eq!(
        read_or_empty(&rig.repo.join(fake_gemini::WRITE_FILE)),
        fake_gemini::WRITE_CONTENT,
        "write_file did not write\n{diag}"
    );
    assert_eq!(
        read_or_empty(&rig.repo.join("shell_out.txt")),
        fake_gemini::SHELL_OUT,
        "run_shell_command did not run\n{diag}"
    );
    let shell = fake
        .function_response_within("run_shell_command", Duration::ZERO)
        .unwrap_or_else(|| panic!("no functionResponse for the shell reached the model\n{diag}"));
    assert!(
        shell["response"].to_string().contains("shell-ran"),
        "{shell}\n{diag}"
    );
    assert!(
        fake.function_response_within("write_file", Duration::ZERO)
            .is_some(),
        "{diag}"
    );
    // The script ran to its end, on the pinned model, with the test's key.
    let streams = fake.stream_requests();
    let answered: Vec<&Value> = streams.iter().map(|r| &r["answered"]).collect();
    assert_eq!(
        answered,
        ["write_file", "run_shell_command", "text"],
        "{diag}"
    );
    for r in &streams {
        assert!(
            r["path"]
                .as_str()
                .is_some_and(|p| p.contains(&format!("/models/{GEMINI_MODEL}:"))),
            "{r}"
        );
        assert_eq!(r["headers"]["x-goog-api-key"], FAKE_GEMINI_KEY, "{diag}");
    }
    let session = turn
        .session_id
        .clone()
        .unwrap_or_else(|| panic!("no init event\n{diag}"));
    let result = turn.events().into_iter().find(|e| e["type"] == "result");
    assert_eq!(
        result.as_ref().map(|r| &r["status"]),
        Some(&json!("success")),
        "{diag}"
    );

    let fired = hook_payloads(&hook_log);
    let events: Vec<&Value> = fired.iter().map(|p| &p["hook_event_name"]).collect();
    assert_eq!(events, ["BeforeTool", "AfterAgent"], "{diag}");
    assert_eq!(fired[0]["tool_name"], "run_shell_command");
    assert_eq!(fired[0]["tool_input"]["command"], fake_gemini::SHELL_CMD);
    for p in &fired {
        assert_eq!(p["session_id"], Value::from(session.as_str()), "{p}");
    }
    eprintln!("gemini headless smoke: {:?}", started.elapsed());
}

/// Waits for the program in `t` (the leader of process group `pgid`) to exit, and then for
/// every other member of its group (the relaunched CLI is the launcher's child) to be gone.
fn assert_quits(t: &mut Term, pgid: u32, timeout: Duration) -> Result<(), String> {
    if t.exit_within(timeout).is_none() {
        return Err("gemini did not exit".into());
    }
    let end = Instant::now() + timeout;
    let mut left = group_members(pgid);
    while !left.is_empty() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
        left = group_members(pgid);
    }
    if left.is_empty() {
        Ok(())
    } else {
        Err(format!("left running: {left}"))
    }
}

/// The real Gemini TUI in a terminal the test owns reaches its input box with no auth or trust
/// dialog; a bracketed paste and Enter run a turn (a shell command, allowed at its dialog with
/// `1`); `/quit` ends it and nothing of its process group is left.
#[test]
fn gemini_tui_runs_a_pasted_turn_and_quits() {
    const WAIT: Duration = Duration::from_secs(90);
    let started = Instant::now();
    let fake = FakeGemini::start();
    let rig = GeminiRig::new();
    let mut cmd = gemini_command(&rig.home, &fake.base_url());
    cmd.current_dir(&rig.repo);
    let mut t = Term::spawn(&cmd, 45, 130);
    let pgid = t.pid();
    let diag = |t: &Term| format!("{}\nrequests: {:#?}", t.diag(), fake.request_lines());

    wait_tui_ready(&t, WAIT).unwrap_or_else(|e| panic!("{e}\n{}", diag(&t)));

    let prompt = "SCENARIO:shell run it";
    submit_prompt(&t, prompt, WAIT, || {
        fake.prompt_within(prompt, Duration::ZERO).is_some()
    })
    .unwrap_or_else(|e| panic!("the prompt never reached the model: {e}\n{}", diag(&t)));
    t.wait_for("Allow execution", WAIT)
        .unwrap_or_else(|e| panic!("no shell permission dialog: {e}\n{}", diag(&t)));
    t.send(b"1");
    t.wait_for("ok (shell, 1 tool outputs seen)", WAIT)
        .unwrap_or_else(|e| panic!("the turn did not end: {e}\n{}", diag(&t)));
    assert_eq!(
        read_or_empty(&rig.repo.join("shell_out.txt")),
        fake_gemini::SHELL_OUT,
        "{}",
        diag(&t)
    );

    t.wait_for(INPUT_PLACEHOLDER, WAIT)
        .unwrap_or_else(|e| panic!("no input box after the turn: {e}\n{}", diag(&t)));
    type_and_enter(&t, "/quit", WAIT).unwrap_or_else(|e| panic!("{e}\n{}", diag(&t)));
    assert_quits(&mut t, pgid, WAIT).unwrap_or_else(|e| panic!("{e}\n{}", diag(&t)));
    eprintln!("gemini TUI smoke: {:?}", started.elapsed());
}

/// The fake's `fail`, `write`, `edit`, `shellfail` and `shellcmd` scenarios against the real
/// headless CLI: an HTTP 400 is not retried and exits 144; a write then an edit change
/// `hello.txt`; a failing command's exit code reaches the model; a command named in the prompt
/// runs.
#[test]
fn gemini_headless_fake_scenarios_fail_edit_shellfail_and_shellcmd() {
    let fake = FakeGemini::start();
    let rig = GeminiRig::new();
    let run = |tag: &str, prompt: &str| {
        let mut cmd = gemini_command(&rig.home, &fake.base_url());
        cmd.arg("--yolo");
        headless_turn(
            &mut cmd,
            &fake,
            &rig.repo,
            rig.tmp.path(),
            tag,
            prompt,
            TURN_TIMEOUT,
        )
    };

    let failed = run("fail", "SCENARIO:fail now");
    assert_eq!(failed.code(), Some(144), "{}", failed.diag);
    let answered: Vec<Value> = fake
        .stream_requests()
        .iter()
        .map(|r| r["answered"].clone())
        .collect();
    assert_eq!(answered, [json!("fail400")], "{}", failed.diag);

    run("write", "SCENARIO:write it").assert_success();
    let edited = run("edit", "SCENARIO:edit it");
    edited.assert_success();
    assert_eq!(
        read_or_empty(&rig.repo.join(fake_gemini::WRITE_FILE)),
        "bye from fake model\n",
        "{}",
        edited.diag
    );

    let shellfail = run("shellfail", "SCENARIO:shellfail go");
    shellfail.assert_success();
    let out = fake
        .function_response_within("run_shell_command", Duration::ZERO)
        .unwrap_or_else(|| panic!("no shell result reached the model\n{}", shellfail.diag));
    assert!(
        out["response"].to_string().contains("Exit Code: 3"),
        "{out}\n{}",
        shellfail.diag
    );

    let custom = run("shellcmd", "SCENARIO:shellcmd <<echo custom > custom.txt>>");
    custom.assert_success();
    assert_eq!(
        read_or_empty(&rig.repo.join("custom.txt")),
        "custom\n",
        "{}",
        custom.diag
    );
}

/// The fake's `ask`, `hang` and `slowshell` scenarios against the real TUI: `ask_user` opens
/// Gemini's question dialog and the answer reaches the model; a hung stream, and a long shell
/// command, keep the turn busy until Esc cancels it; Ctrl-C twice exits, its process group gone.
#[test]
fn gemini_tui_ask_hang_and_slowshell_scenarios_then_ctrl_c_twice() {
    const WAIT: Duration = Duration::from_secs(90);
    let fake = FakeGemini::start();
    let rig = GeminiRig::new();
    let mut cmd = gemini_command(&rig.home, &fake.base_url());
    cmd.current_dir(&rig.repo);
    let mut t = Term::spawn(&cmd, 45, 130);
    let pgid = t.pid();
    let diag = |t: &Term| format!("{}\nrequests: {:#?}", t.diag(), fake.request_lines());
    wait_tui_ready(&t, WAIT).unwrap_or_else(|e| panic!("{e}\n{}", diag(&t)));

    let ask = "SCENARIO:ask pick one";
    submit_prompt(&t, ask, WAIT, || {
        fake.prompt_within(ask, Duration::ZERO).is_some()
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", diag(&t)));
    t.wait_for(fake_gemini::ASK_QUESTION, WAIT)
        .unwrap_or_else(|e| panic!("no question dialog: {e}\n{}", diag(&t)));
    // Enter takes the highlighted (first) choice.
    t.send(b"\r");
    let answer = fake
        .function_response_within("ask_user", WAIT)
        .unwrap_or_else(|| panic!("the answer never reached the model\n{}", diag(&t)));
    assert!(
        answer["response"]
            .to_string()
            .contains(fake_gemini::ASK_CHOICES[0]),
        "{answer}\n{}",
        diag(&t)
    );
    t.wait_for("LAST_OUTPUT=", WAIT)
        .unwrap_or_else(|e| panic!("the turn did not end: {e}\n{}", diag(&t)));

    let hang = "SCENARIO:hang wait";
    submit_prompt(&t, hang, WAIT, || {
        fake.prompt_within(hang, Duration::ZERO).is_some()
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", diag(&t)));
    t.wait_for(fake_gemini::HANG_TEXT, WAIT)
        .unwrap_or_else(|e| panic!("no streamed chunk: {e}\n{}", diag(&t)));
    t.send(b"\x1b");
    t.wait_for("Request cancelled", WAIT)
        .unwrap_or_else(|e| panic!("Esc did not cancel: {e}\n{}", diag(&t)));

    // A long shell command, allowed at its dialog, runs until Esc cancels the request.
    let slow = "SCENARIO:slowshell go";
    submit_prompt(&t, slow, WAIT, || {
        fake.prompt_within(slow, Duration::ZERO).is_some()
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", diag(&t)));
    t.wait_for("Allow execution", WAIT)
        .unwrap_or_else(|e| panic!("no shell permission dialog: {e}\n{}", diag(&t)));
    let mark = t.mark();
    t.send(b"1");
    t.wait_until(WAIT, |v| {
        !v.text().contains("Allow execution") && v.since(mark).contains("sleep 20")
    })
    .unwrap_or_else(|e| panic!("the slow command did not start: {e}\n{}", diag(&t)));
    let cancelled = t.mark();
    t.send(b"\x1b");
    t.wait_until(WAIT, |v| v.since(cancelled).contains("Request cancelled"))
        .unwrap_or_else(|e| panic!("Esc did not cancel the command: {e}\n{}", diag(&t)));
    // The command is killed (Gemini runs it in a process group of its own).
    let sleeping = || {
        processes_in(&rig.repo)
            .into_iter()
            .filter(|(_, cmd)| cmd.contains("sleep 20"))
            .collect::<Vec<_>>()
    };
    let end = Instant::now() + WAIT;
    while !sleeping().is_empty() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(sleeping().is_empty(), "{:?}\n{}", sleeping(), diag(&t));

    t.send(b"\x03");
    t.wait_for("Press Ctrl+C again", WAIT)
        .unwrap_or_else(|e| panic!("no exit warning: {e}\n{}", diag(&t)));
    t.send(b"\x03");
    assert_quits(&mut t, pgid, WAIT).unwrap_or_else(|e| panic!("{e}\n{}", diag(&t)));
    assert!(!rig.repo.join("slow_out.txt").exists(), "{}", diag(&t));
}
