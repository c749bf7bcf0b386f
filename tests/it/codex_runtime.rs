//! Codex sessions spex starts and steers through one `codex app-server` per project (the REAL
//! pinned Codex, offline: its default provider with no network keeps a turn in progress, the
//! fake Responses API runs whole turns). Needs `scripts/install-peers.sh`; fails, never skips.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::codex_home::write_codex_config;
use crate::support::fake_responses::FakeResponses;
use crate::support::peers::peers_path;
use crate::support::rpc::Rpc;
use crate::support::world::{World, feed, json_result, pretty, read_or_empty, write};

/// How long a record may lag behind what the server did (a hook still running).
const SETTLE: Duration = Duration::from_secs(20);

struct Rig {
    w: World,
    /// `None`: Codex's default provider, which cannot connect here.
    fake: Option<FakeResponses>,
}

impl Rig {
    /// A materialized project selecting Codex; with `fake`, Codex talks to the fake API.
    fn start(fake: bool) -> Rig {
        use std::os::unix::fs::PermissionsExt;
        let w = World::new();
        let run = w.dir.path().join("run");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
        let fake = fake.then(|| FakeResponses::start_with_hang_limit(Duration::from_mins(1)));
        match &fake {
            Some(f) => {
                write_codex_config(&w.codex_home, &f.base_url(), "never", "danger-full-access");
            }
            None => write(&w.codex_home.join("config.toml"), ""),
        }
        write(
            &w.repo.join("spex.jsonc"),
            "{ \"harnesses\": [\"codex\"] }\n",
        );
        crate::support::world::git(&w.repo, &["commit", "-q", "--allow-empty", "-m", "base"]);
        w.ok(&w.repo, &["materialize"]);
        Rig { w, fake }
    }

    fn cmd(&self, cwd: &Path, args: &[&str]) -> Command {
        let mut c = self.w.cmd(cwd, args);
        c.env("PATH", peers_path())
            .env("XDG_RUNTIME_DIR", self.w.dir.path().join("run"))
            .env("FAKE_API_KEY", "dummy")
            .env("OPENAI_API_KEY", "sk-dummy")
            .env("RUST_LOG", "warn");
        c
    }

    /// Runs spex in the repo and asserts it succeeded; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.cmd(&self.w.repo, args).output().unwrap();
        assert!(
            out.status.success(),
            "spex {args:?} failed ({}):\n{}{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.diag()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs spex; its stdout as JSON, or a message with everything it printed.
    fn json(&self, cwd: &Path, args: &[&str]) -> Result<Value, String> {
        self.json_with_input(cwd, args, None)
    }

    fn json_with_input(
        &self,
        cwd: &Path,
        args: &[&str],
        input: Option<&str>,
    ) -> Result<Value, String> {
        let out = feed(
            &mut self.cmd(cwd, args),
            input.unwrap_or_default().as_bytes(),
        );
        json_result(args, &out).map_err(|e| format!("{e}\n{}", self.diag()))
    }

    fn server_log(&self) -> String {
        read_or_empty(&self.w.project_dir().join("servers/codex.log"))
    }

    fn diag(&self) -> String {
        let mut out = format!("--- server log:\n{}", self.server_log());
        for id in self.w.session_ids() {
            out.push_str(&format!(
                "\n--- {id}:\n{}\n{}",
                read_or_empty(
                    &self
                        .w
                        .project_dir()
                        .join("sessions")
                        .join(&id)
                        .join("session.json")
                ),
                read_or_empty(
                    &self
                        .w
                        .project_dir()
                        .join("sessions")
                        .join(&id)
                        .join("events.jsonl")
                )
            ));
        }
        if let Some(f) = &self.fake {
            out.push_str(&format!(
                "\n--- fake requests:\n{}",
                f.request_lines().join("\n")
            ));
        }
        out
    }

    /// `spex launch --harness codex --detach --json` in `cwd` plus `extra`.
    fn launch(&self, cwd: &Path, extra: &[&str]) -> Value {
        let mut args = vec!["launch", "--harness", "codex", "--detach", "--json"];
        args.extend_from_slice(extra);
        self.json(cwd, &args).unwrap_or_else(|e| panic!("{e}"))
    }

    fn show(&self, id: &str) -> Value {
        self.json(&self.w.repo, &["show", id, "--json", "--events", "50"])
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Waits until `show` satisfies `pred`; the last `show` either way.
    fn until(
        &self,
        id: &str,
        what: &str,
        within: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let shown = self.show(id);
            if pred(&shown) {
                return shown;
            }
            assert!(
                Instant::now() < deadline,
                "{what}\n{}\n{}",
                pretty(&shown),
                self.diag()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn deliver(&self, id: &str, text: &str) -> Value {
        self.json(&self.w.repo, &["deliver", id, text, "--json"])
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The server's record of what spex's supervisor started.
    fn running(&self) -> Value {
        serde_json::from_str(&read_or_empty(
            &self.w.project_dir().join("servers/codex.json"),
        ))
        .unwrap_or(Value::Null)
    }

    /// The socket the project's server listens on.
    fn server_socket(&self) -> String {
        self.running()["socket"]
            .as_str()
            .unwrap_or_else(|| panic!("no server runs\n{}", self.diag()))
            .to_owned()
    }

    /// A JSON-RPC client of the project's server (initialized).
    fn rpc(socket: &str) -> Rpc {
        let real = std::fs::canonicalize(socket).unwrap();
        let stream = std::os::unix::net::UnixStream::connect(real).unwrap();
        let mut rpc = Rpc::connect(stream).unwrap();
        rpc.call(
            "initialize",
            &json!({"clientInfo": {"name": "spex-test", "version": "0"}, "capabilities": {"experimentalApi": true}}),
        )
        .unwrap();
        rpc.send(&json!({"jsonrpc": "2.0", "method": "initialized"}));
        rpc
    }
}

impl Drop for Rig {
    /// Whatever a failed test left running: the supervisor and the server's process group.
    fn drop(&mut self) {
        let running = self.running();
        for key in ["server_pid", "supervisor_pid"] {
            if let Some(pid) = running[key].as_u64() {
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &format!("-{pid}"), &pid.to_string()])
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}

fn events(shown: &Value) -> Vec<Value> {
    shown["events"].as_array().cloned().unwrap_or_default()
}

fn kinds(shown: &Value) -> Vec<String> {
    events(shown)
        .iter()
        .filter_map(|e| e["kind"].as_str().map(str::to_owned))
        .collect()
}

/// The real Codex process serving `socket` (the npm launcher's child, not the launcher).
fn server_process(socket: &str) -> Option<u32> {
    for entry in std::fs::read_dir("/proc").ok()?.filter_map(Result::ok) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let serves =
            args.iter().any(|a| a == "app-server") && args.iter().any(|a| a.contains(socket));
        let launcher = args
            .first()
            .is_some_and(|a| a.ends_with("node") || a == "node");
        if serves && !launcher {
            return Some(pid);
        }
    }
    None
}

/// Issue 8, cases 1-3: launch with a prompt on the default provider (no network: the turn stays
/// in progress), steer into that turn, interrupt it, start a new turn; stop ends the session and
/// the server with it.
#[test]
fn launch_steer_interrupt_then_start_on_the_default_provider() {
    let rig = Rig::start(false);
    let launched = rig.launch(&rig.w.repo, &["first prompt"]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let socket = rig.server_socket();
    let first_turn = launched["delivery"]["turn_id"].as_str().unwrap().to_owned();
    assert_eq!(
        launched["delivery"]["mode"],
        "start",
        "{}",
        pretty(&launched)
    );
    let shown = rig.until(
        &id,
        "the hooks never moved the record to working",
        SETTLE,
        |s| s["session"]["status"] == "working",
    );
    let record = &shown["session"];
    assert_eq!(
        record["harness_session_id"], id,
        "the record is keyed by the thread id"
    );
    assert_eq!(record["launched_by"], "spex");
    assert_eq!(record["live"], true, "{}", pretty(record));
    assert_eq!(rig.w.alias("codex", &id).as_deref(), Some(id.as_str()));
    let mut rpc = Rig::rpc(&socket);
    let loaded = rpc.call("thread/loaded/list", &json!({})).unwrap();
    assert!(
        loaded["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == id.as_str()),
        "{loaded}"
    );

    // 2: a steer into the running turn.
    let steered = rig.deliver(&id, "steered while it runs");
    assert_eq!(steered["mode"], "steer", "{}", pretty(&steered));
    assert_eq!(steered["turn_id"], first_turn.as_str());
    assert_eq!(steered["confirmed"], true);
    let shown = rig.until(&id, "the steer never reached the record", SETTLE, |s| {
        s["session"]["turn"]["prompt"] == "steered while it runs"
    });
    assert!(
        kinds(&shown).contains(&"turn.steered".to_owned()),
        "{}",
        pretty(&shown)
    );
    let steer_event = events(&shown)
        .into_iter()
        .find(|e| e["kind"] == "turn.steered")
        .unwrap();
    assert_eq!(steer_event["turn_id"], first_turn.as_str());
    assert_eq!(steer_event["prompt"], "steered while it runs");

    // 3: interrupt, then a new turn.
    let after = rig
        .json(&rig.w.repo, &["interrupt", &id, "--json"])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(after["status"], "idle", "{}", pretty(&after));
    assert_eq!(after["turn"]["state"], "interrupted", "{}", pretty(&after));
    assert_eq!(after["turn"]["by"], "spex interrupt", "{}", pretty(&after));
    let started = rig.deliver(&id, "a new turn");
    assert_eq!(started["mode"], "start", "{}", pretty(&started));
    assert_ne!(started["turn_id"], first_turn.as_str());

    let stopped = rig
        .json(&rig.w.repo, &["stop", &id, "--json"])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stopped["status"], "exited", "{}", pretty(&stopped));
    let deadline = Instant::now() + Duration::from_secs(10);
    while server_process(&socket).is_some() {
        assert!(
            Instant::now() < deadline,
            "the server outlived the project's last thread\n{}",
            rig.diag()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let shown = rig.show(&id);
    assert_eq!(shown["session"]["live"], false);
    crate::support::world::assert_grammar(&shown["session"], &events(&shown), &|| rig.diag());
}

/// Issue 8, case 4: launched with no prompt, a delivered turn runs a tool and completes; a
/// failing shell command's `tool.completed` says `ok: false` (the server saw its exit code).
#[test]
fn delivered_turns_run_tools_and_a_failed_command_is_not_ok() {
    let rig = Rig::start(true);
    let launched = rig.launch(&rig.w.repo, &[]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    assert!(launched["delivery"].is_null());
    assert_eq!(rig.show(&id)["session"]["status"], "idle");
    let d = rig.deliver(&id, "SCENARIO:patch");
    assert_eq!(d["mode"], "start");
    let shown = rig.until(&id, "the patch turn never completed", SETTLE, |s| {
        s["session"]["status"] == "idle" && s["session"]["turn"]["state"] == "completed"
    });
    assert_eq!(
        shown["session"]["touched"],
        json!(["hello.txt"]),
        "{}",
        pretty(&shown)
    );
    rig.deliver(&id, "SCENARIO:failcmd");
    let shown = rig.until(
        &id,
        "the failing command's turn never completed",
        SETTLE,
        |s| {
            s["session"]["turn"]["state"] == "completed"
                && kinds(s).iter().filter(|k| *k == "turn.completed").count() == 2
        },
    );
    let tools: Vec<Value> = events(&shown)
        .into_iter()
        .filter(|e| e["kind"] == "tool.completed")
        .collect();
    assert_eq!(tools.len(), 2, "{}", pretty(&shown));
    assert_eq!(tools[0]["ok"], true, "the patch: {}", pretty(&tools[0]));
    assert_eq!(
        tools[1]["ok"],
        false,
        "the failing command: {}",
        pretty(&tools[1])
    );
    assert_eq!(tools[1]["error"], "exit code 3", "{}", pretty(&tools[1]));
    rig.json(&rig.w.repo, &["stop", &id, "--json"])
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Issue 8, case 5: sessions in two worktrees share one server; each hook lands on its own
/// record.
#[test]
fn two_worktrees_share_one_server_and_keep_their_own_records() {
    let rig = Rig::start(true);
    let a = rig.launch(&rig.w.repo, &["SCENARIO:plain in main"]);
    let b = rig.launch(
        &rig.w.repo,
        &["--worktree", "feat", "SCENARIO:plain in feat"],
    );
    // One server; each session its own host (the Codex TUI on its thread).
    assert_ne!(
        a["session"]["host_pid"], b["session"]["host_pid"],
        "{a} {b}"
    );
    let socket = rig.server_socket();
    assert!(server_process(&socket).is_some());
    assert_eq!(
        std::fs::read_dir(rig.w.project_dir().join("servers"))
            .unwrap()
            .filter(|e| e
                .as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "json"))
            .count(),
        1,
        "one server"
    );
    let (ia, ib) = (
        a["session"]["id"].as_str().unwrap().to_owned(),
        b["session"]["id"].as_str().unwrap().to_owned(),
    );
    assert_ne!(ia, ib);
    for (id, prompt, tree) in [
        (&ia, "SCENARIO:plain in main", rig.w.repo.clone()),
        (
            &ib,
            "SCENARIO:plain in feat",
            PathBuf::from(format!("{}-feat", rig.w.repo.display())),
        ),
    ] {
        let shown = rig.until(id, "the turn never completed", SETTLE, |s| {
            s["session"]["turn"]["state"] == "completed"
        });
        assert_eq!(
            shown["session"]["tree"],
            tree.to_str().unwrap(),
            "{}",
            pretty(&shown)
        );
        let prompts: Vec<Value> = events(&shown)
            .into_iter()
            .filter(|e| e["kind"] == "turn.started")
            .map(|e| e["prompt"].clone())
            .collect();
        assert_eq!(prompts, vec![json!(prompt)], "{}", pretty(&shown));
    }
    rig.json(&rig.w.repo, &["stop", &ia, "--json"])
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        server_process(&socket).is_some(),
        "the server stopped while a thread was still open"
    );
    rig.json(&rig.w.repo, &["stop", &ib, "--json"])
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Issue 8, case 6: a killed server: within 1 s its sessions read `exited` (server gone),
/// `deliver` says so and what to run, `resume` brings the same thread back.
#[test]
fn killed_server_exits_its_sessions_and_resume_brings_the_thread_back() {
    let rig = Rig::start(true);
    let launched = rig.launch(&rig.w.repo, &["SCENARIO:hang"]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let socket = rig.server_socket();
    rig.until(&id, "the turn never started", SETTLE, |s| {
        s["session"]["status"] == "working"
    });
    let pid = server_process(&socket).expect("the server runs");
    let killed = Instant::now();
    Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    let shown = rig.until(
        &id,
        "the session did not read exited within 1 s",
        Duration::from_secs(1),
        |s| s["session"]["status"] == "exited",
    );
    eprintln!("exited {:?} after the kill", killed.elapsed());
    assert_eq!(
        shown["session"]["exit_reason"],
        "server gone",
        "{}",
        pretty(&shown)
    );
    let refused = rig
        .json(&rig.w.repo, &["deliver", &id, "hello?", "--json"])
        .unwrap_err();
    assert!(
        refused.contains("has exited") && refused.contains(&format!("spex resume {id}")),
        "{refused}"
    );
    // As for a hosted session: gone is exit 3, and the JSON answer says why.
    assert!(
        refused.contains("exit status: 3") && refused.contains("\"reason\": \"exited\""),
        "{refused}"
    );
    let resumed = rig
        .json(&rig.w.repo, &["resume", &id, "--detach", "--json"])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(resumed["session"]["id"], id.as_str());
    let d = rig.deliver(&id, "SCENARIO:plain after resume");
    assert_eq!(d["mode"], "start", "{}", pretty(&d));
    let shown = rig.until(
        &id,
        "the resumed thread's turn never completed",
        SETTLE,
        |s| s["session"]["turn"]["state"] == "completed",
    );
    assert_eq!(shown["session"]["live"], true);
    rig.json(&rig.w.repo, &["stop", &id, "--json"])
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Issue 8, case 7: a 64 KiB multi-line prompt with unicode arrives byte-identical (what the
/// `UserPromptSubmit` hook reported); an empty prompt is refused and changes nothing.
#[test]
fn a_64_kib_unicode_prompt_arrives_byte_identical() {
    let rig = Rig::start(true);
    let launched = rig.launch(&rig.w.repo, &[]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let mut text = String::from("SCENARIO:plain\n");
    let mut i = 0;
    while text.len() < 64 * 1024 {
        text.push_str(&format!(
            "line {i}: naïve café — 日本語 ✓ 🦀 \"quoted\" \\ back\ttab\n"
        ));
        i += 1;
    }
    let d = rig
        .json_with_input(&rig.w.repo, &["deliver", &id, "-", "--json"], Some(&text))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(d["confirmed"], true);
    let shown = rig.until(&id, "the prompt never reached the record", SETTLE, |s| {
        kinds(s).contains(&"turn.started".to_owned())
    });
    let reported = events(&shown)
        .into_iter()
        .find(|e| e["kind"] == "turn.started")
        .unwrap();
    assert_eq!(
        reported["prompt"].as_str(),
        Some(text.as_str()),
        "prompt differs"
    );
    let empty = rig
        .json(&rig.w.repo, &["deliver", &id, "  ", "--json"])
        .unwrap_err();
    assert!(empty.contains("the prompt is empty"), "{empty}");
    rig.json(&rig.w.repo, &["stop", &id, "--json"])
        .unwrap_or_else(|e| panic!("{e}"));
}

/// `spex launch` without `--detach` (and with no prompt) runs the real Codex TUI on the new
/// thread in this terminal: a prompt typed there lands on the launched record; quitting the
/// TUI leaves the thread running on the server, and `spex attach` opens it again.
#[test]
fn launch_runs_the_codex_tui_on_its_thread_and_quitting_leaves_it_running() {
    use crate::real_tui::CodexTui;
    let rig = Rig::start(true);
    CodexTui::prepare(&rig.w, &rig.fake.as_ref().unwrap().base_url());
    let path = peers_path().to_string_lossy().into_owned();
    let env = [
        ("PATH", path),
        (
            "XDG_RUNTIME_DIR",
            rig.w.dir.path().join("run").display().to_string(),
        ),
    ];
    let mut tui = CodexTui::spawn(
        &rig.w,
        &crate::support::world::spex_bin(),
        &["launch", "--harness", "codex"],
        &env,
    );
    let id = tui.turn(&rig.w, "SCENARIO:plain typed in the TUI");
    let shown = rig.show(&id);
    assert_eq!(
        shown["session"]["launched_by"],
        "spex",
        "{}",
        pretty(&shown)
    );
    assert_eq!(
        rig.w.session_ids(),
        vec![id.clone()],
        "one record: the launched one"
    );
    assert_eq!(
        events(&shown)
            .iter()
            .find(|e| e["kind"] == "turn.started")
            .map(|e| e["prompt"].clone()),
        Some(json!("SCENARIO:plain typed in the TUI"))
    );
    // Ctrl-C twice quits the Codex TUI; `spex launch` returns with it.
    tui.send(b"\x03");
    std::thread::sleep(Duration::from_millis(300));
    tui.send(b"\x03");
    assert!(
        tui.exit_within(Duration::from_secs(15)).is_some(),
        "the TUI did not quit:\n{}",
        tui.text()
    );
    // Its host says what is true: the terminal closed, the session did not end.
    let said = tui.text();
    assert!(
        said.contains("session keeps running") && !said.contains("ended]"),
        "{said}"
    );
    let shown = rig.show(&id);
    assert_eq!(
        shown["session"]["live"],
        true,
        "{}\n{}",
        pretty(&shown),
        rig.diag()
    );
    assert_ne!(shown["session"]["status"], "exited");
    // No terminal is open on it now: `snapshot` says so, and what opens one.
    let out = rig.cmd(&rig.w.repo, &["snapshot", &id]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no terminal is open on it") && err.contains("hint: `spex attach "),
        "{err}"
    );
    let again = CodexTui::spawn(
        &rig.w,
        &crate::support::world::spex_bin(),
        &["attach", &id],
        &env,
    );
    let snap = rig
        .json(&rig.w.repo, &["snapshot", &id, "--json"])
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        snap["lines"].as_array().is_some_and(|l| l
            .iter()
            .any(|l| l.as_str().is_some_and(|l| l.contains("typed in the TUI")))),
        "{}",
        pretty(&snap)
    );
    assert!(
        again.text().contains("typed in the TUI"),
        "{}",
        again.text()
    );
    let stopped = rig
        .json(&rig.w.repo, &["stop", &id, "--json"])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stopped["status"], "exited");
    drop(again);
}

/// A Codex session the person started in their own terminal lives in its own server: spex
/// refuses to steer, interrupt, stop or attach it through the project's server (which would
/// load its thread a second time) and says what to do; nothing changes.
#[test]
fn a_session_started_outside_spex_is_not_steered_through_spex_server() {
    let rig = Rig::start(true);
    let payload: Value = serde_json::from_str(&read_or_empty(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/payloads/codex/SessionStart.startup.json"),
    ))
    .unwrap();
    let mut payload = payload;
    payload["cwd"] = json!(rig.w.repo);
    let id = payload["session_id"].as_str().unwrap().to_owned();
    let out = rig
        .w
        .dispatch(&rig.w.repo, "codex", "SessionStart", &payload);
    assert!(out.status.success());
    let before = rig.show(&id);
    assert_eq!(before["session"]["launched_by"], "self");
    for (args, why) in [
        (
            vec!["deliver", id.as_str(), "hello"],
            "started outside spex",
        ),
        (vec!["interrupt", id.as_str()], "started outside spex"),
        (vec!["stop", id.as_str()], "started outside spex"),
        (vec!["attach", id.as_str()], "started outside spex"),
        // Not exited: its own process may still hold the thread.
        (vec!["resume", id.as_str(), "--detach"], "it is running"),
    ] {
        let out = rig.cmd(&rig.w.repo, &args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
    assert_eq!(rig.show(&id)["session"], before["session"]);
    assert!(
        !rig.w.project_dir().join("servers/codex.json").exists(),
        "no server was started"
    );
}

/// `spex launch` (attached, as a person runs it) in a terminal the test owns, with Codex's
/// environment for a TUI.
fn attached(rig: &Rig, args: &[&str]) -> crate::support::term::Term {
    let mut cmd = rig.cmd(&rig.w.repo, args);
    cmd.env("TERM", "xterm-256color").env("LANG", "C.UTF-8");
    crate::support::term::Term::spawn(&cmd, 40, 120)
}

/// The one session the world holds, once there is one.
fn only_session(rig: &Rig, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        if let [id] = rig.w.session_ids().as_slice() {
            return id.clone();
        }
        assert!(Instant::now() < deadline, "no session\n{}", rig.diag());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Issue 20 item 4: the Codex TUI that `spex launch` opens runs under spex's PTY host, exactly
/// as Claude's does: the launching terminal is attached to it and stays attached through 30 s
/// of silence; `Ctrl-\` detaches with exactly one true line (Codex's own resume hint never
/// reaches the terminal) and gives the terminal back restored; `snapshot` reads the host's
/// screen, `--record` writes a cassette that checks; the app-server stays the control plane
/// (the prompt went in as a turn, `deliver` starts one).
#[test]
fn codex_launch_is_hosted_detaches_with_the_key_and_records() {
    use crate::support::term::Modes;
    let rig = Rig::start(true);
    crate::real_tui::CodexTui::prepare(&rig.w, &rig.fake.as_ref().unwrap().base_url());
    let mut t = attached(
        &rig,
        &[
            "launch",
            "--harness",
            "codex",
            "--record",
            "SCENARIO:plain first words",
        ],
    );
    let id = only_session(&rig, SETTLE);
    rig.until(&id, "the first turn never completed", SETTLE, |s| {
        s["session"]["turn"]["state"] == "completed"
    });
    t.wait_until(SETTLE, |v| v.text().contains("first words"))
        .unwrap_or_else(|e| panic!("{e}\n{}", rig.diag()));
    // A person reads for half a minute; nothing happens, and the terminal stays attached.
    let quiet = t.mark();
    std::thread::sleep(Duration::from_secs(30));
    assert!(t.running(), "attach left during silence:\n{}", t.diag());
    assert!(
        !t.since(quiet).contains("ended"),
        "attach said the session ended:\n{}",
        t.diag()
    );
    let mark = t.mark();
    t.send(b"\x1c");
    assert!(
        t.exit_within(Duration::from_secs(10)).is_some(),
        "Ctrl-\\ did not detach:\n{}",
        t.diag()
    );
    let said = t.since(mark);
    assert_eq!(
        said.matches("detached").count(),
        1,
        "one detach line:\n{said}"
    );
    assert!(!said.contains("ended"), "{said}");
    assert!(
        !said.contains("codex resume") && !said.contains("--remote"),
        "Codex's own resume hint reached the terminal:\n{said}"
    );
    assert_eq!(t.modes(), Modes::RESTORED, "{}", t.diag());
    // Detached, the session runs on, under its host.
    let shown = rig.show(&id);
    assert_eq!(shown["session"]["live"], true, "{}", pretty(&shown));
    assert_ne!(shown["session"]["status"], "exited");
    let snap = rig
        .json(&rig.w.repo, &["snapshot", &id, "--json"])
        .unwrap_or_else(|e| panic!("{e}"));
    let screen = snap["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        screen.contains("first words") && screen.contains("? for shortcuts"),
        "{screen}"
    );
    // The control plane is the app-server: a delivery starts a turn the TUI shows.
    let d = rig.deliver(&id, "SCENARIO:plain second words");
    assert_eq!(d["mode"], "start", "{}", pretty(&d));
    rig.until(&id, "the second turn never completed", SETTLE, |s| {
        s["session"]["turn"]["state"] == "completed"
            && s["session"]["turn"]["prompt"] == "SCENARIO:plain second words"
    });
    let stopped = rig
        .json(&rig.w.repo, &["stop", &id, "--json"])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stopped["status"], "exited");
    // The recording holds the TUI's screens, checks out, and says which harness it is.
    let cassette = rig
        .w
        .project_dir()
        .join("sessions")
        .join(&id)
        .join("cassette");
    let deadline = Instant::now() + SETTLE;
    while !cassette.join("final.json").is_file() {
        assert!(Instant::now() < deadline, "the recording never ended");
        std::thread::sleep(Duration::from_millis(100));
    }
    rig.ok(&["cassette", "check", &id]);
    let manifest: Value =
        serde_json::from_str(&read_or_empty(&cassette.join("manifest.json"))).unwrap();
    assert_eq!(manifest["harness"]["id"], "codex", "{}", pretty(&manifest));
    let raw = std::fs::read(cassette.join("output.raw")).unwrap();
    assert!(
        String::from_utf8_lossy(&raw).contains("shortcuts"),
        "the recording holds no TUI output"
    );
    // The host read the TUI's screen as it went: a frame when a turn ran, one when it idled.
    let reasons: Vec<String> = read_or_empty(&cassette.join("frames.jsonl"))
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|f| f["reason"].as_str().map(str::to_owned))
        .collect();
    assert!(
        reasons.iter().any(|r| r == "busy") && reasons.iter().any(|r| r == "idle"),
        "{reasons:?}"
    );
}

/// Issue 20 item 12: two Codex sessions launched at the same moment both stay live (for
/// several seconds of `sessions --json` after their turns), and `spex record` starts and stops
/// a recording of a live Codex session.
#[test]
fn two_codex_launches_at_once_stay_live() {
    let rig = Rig::start(true);
    crate::real_tui::CodexTui::prepare(&rig.w, &rig.fake.as_ref().unwrap().base_url());
    // Both at the same moment: two processes started together.
    let children: Vec<_> = ["one", "two"]
        .map(|n| {
            let prompt = format!("SCENARIO:plain launch {n}");
            rig.cmd(
                &rig.w.repo,
                &[
                    "launch",
                    "--harness",
                    "codex",
                    "--detach",
                    "--json",
                    &prompt,
                ],
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
        })
        .into_iter()
        .collect();
    let ids: Vec<String> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            let v =
                json_result(&["launch"], &out).unwrap_or_else(|e| panic!("{e}\n{}", rig.diag()));
            v["session"]["id"].as_str().unwrap().to_owned()
        })
        .collect();
    for id in &ids {
        rig.until(id, "a turn never completed", SETTLE, |s| {
            s["session"]["turn"]["state"] == "completed"
        });
    }
    let until = Instant::now() + Duration::from_secs(8);
    while Instant::now() < until {
        let rows = rig
            .json(&rig.w.repo, &["sessions", "--json"])
            .unwrap_or_else(|e| panic!("{e}"));
        for id in &ids {
            let row = rows
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["id"] == id.as_str())
                .unwrap_or_else(|| {
                    panic!("{id} is not listed:\n{}\n{}", pretty(&rows), rig.diag())
                });
            assert!(
                row["live"] == true && row["status"] != "exited",
                "{id} reads gone:\n{}\n{}",
                pretty(row),
                rig.diag()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    // Each is hosted: a recording starts mid-session and ends on request.
    let out = rig.ok(&["record", &ids[0]]);
    assert!(out.contains("recording"), "{out}");
    rig.ok(&["record", &ids[0], "--stop"]);
    rig.ok(&["cassette", "check", &ids[0]]);
    for id in &ids {
        rig.json(&rig.w.repo, &["stop", id, "--json"])
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Whether any process other than the launcher runs the server on `socket`, within `within`
/// after the call: waits for it to be gone.
fn server_gone_within(socket: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while server_process(socket).is_some() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    true
}

/// The row of `id` in `sessions --json`.
fn row(rig: &Rig, id: &str) -> Value {
    let rows = rig
        .json(&rig.w.repo, &["sessions", "--all", "--json"])
        .unwrap_or_else(|e| panic!("{e}"));
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("{id} is not listed:\n{}", pretty(&rows)))
}

/// Issue 20 item 12: a process that has nothing to do with the session holds the thread's
/// rollout log open (a pager, a backup, `tail -f`), started before the server so a walk over
/// `/proc` meets it first, and then ends: the session stays live, because spex knows its
/// server by the pid and start time it recorded when it started it, not by who holds a file.
#[test]
fn an_unrelated_process_holding_the_rollout_does_not_end_the_session() {
    use std::io::{BufRead, Write};
    let rig = Rig::start(true);
    crate::real_tui::CodexTui::prepare(&rig.w, &rig.fake.as_ref().unwrap().base_url());
    let mut holder = Command::new("sh")
        .args(["-c", "read p; exec 3<\"$p\"; echo held; read x"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let launched = rig.launch(&rig.w.repo, &["SCENARIO:plain a thread with a log"]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    // The log's path from the record as the hooks wrote it (no reader has run yet).
    let deadline = Instant::now() + SETTLE;
    let log = loop {
        if let Some(t) = rig
            .w
            .record_if_any(&id)
            .and_then(|r| r["transcript"].as_str().map(str::to_owned))
            .filter(|t| Path::new(t).is_file())
        {
            break t;
        }
        assert!(Instant::now() < deadline, "no rollout log\n{}", rig.diag());
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stdin = holder.stdin.take().unwrap();
    writeln!(stdin, "{log}").unwrap();
    let mut held = String::new();
    std::io::BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut held)
        .unwrap();
    assert_eq!(held.trim(), "held");
    let before = row(&rig, &id);
    assert_eq!(before["live"], true, "{}", pretty(&before));
    assert_ne!(
        before["process"]["pid"].as_u64(),
        Some(u64::from(holder.id())),
        "the session was bound to the process holding its log"
    );
    holder.kill().unwrap();
    holder.wait().unwrap();
    drop(stdin);
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        let r = row(&rig, &id);
        assert!(
            r["status"] != "exited" && r["live"] == true,
            "the session reads gone after an unrelated process closed its log:\n{}\n{}",
            pretty(&r),
            rig.diag()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    rig.json(&rig.w.repo, &["stop", &id, "--json"])
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Issue 20 item 13: `spex server status` says what the project's server is doing (its pid,
/// uptime, whether its supervisor runs, the threads it holds and whose sessions they are), as
/// text and as JSON, `spex doctor` shows it, and `spex server stop` stops it: the server is
/// gone, its sessions read `exited`, and the status says it is not running.
#[test]
fn server_status_and_stop() {
    let rig = Rig::start(true);
    crate::real_tui::CodexTui::prepare(&rig.w, &rig.fake.as_ref().unwrap().base_url());
    let ids: Vec<String> = ["one", "two"]
        .iter()
        .map(|n| {
            rig.launch(&rig.w.repo, &[&format!("SCENARIO:plain {n}")])["session"]["id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let handles: Vec<String> = ids
        .iter()
        .map(|id| row(&rig, id)["handle"].as_str().unwrap().to_owned())
        .collect();
    let running = rig.running();
    let pid = running["server_pid"].as_u64().unwrap();
    let status = rig
        .json(&rig.w.repo, &["server", "status", "--json"])
        .unwrap_or_else(|e| panic!("{e}"));
    let st = &status[0];
    assert_eq!(st["harness"], "codex", "{}", pretty(&status));
    assert_eq!(st["running"], true, "{}", pretty(&status));
    assert_eq!(st["answers"], true, "{}", pretty(&status));
    assert_eq!(st["supervised"], true, "{}", pretty(&status));
    assert_eq!(st["pid"].as_u64(), Some(pid));
    assert!(st["uptime_s"].as_u64().is_some(), "{}", pretty(&status));
    let mut held: Vec<String> = st["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["session"].as_str().unwrap_or_default().to_owned())
        .collect();
    held.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(held, want, "{}", pretty(&status));
    let text = rig.ok(&["server"]);
    assert!(
        text.contains(&format!("running, pid {pid}, up "))
            && handles
                .iter()
                .all(|h| text.contains(&format!("session {h} (")))
            && text.contains("holds 2 thread(s)"),
        "{text}"
    );
    let doctor = rig
        .json(&rig.w.repo, &["doctor", "--json"])
        .or_else(|e| {
            // doctor exits 1 on an unrelated failed check; its JSON is what counts here.
            e.lines()
                .skip_while(|l| !l.starts_with('{'))
                .collect::<Vec<_>>()
                .join("\n")
                .parse::<Value>()
                .map_err(|_| e.clone())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    let check = doctor["project"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "codex server")
        .cloned()
        .unwrap_or_else(|| panic!("no server check:\n{}", pretty(&doctor)));
    assert_eq!(check["status"], "ok", "{}", pretty(&check));
    assert!(
        check["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("running (pid {pid}")),
        "{}",
        pretty(&check)
    );
    let socket = rig.server_socket();
    let stopped = rig.ok(&["server", "stop"]);
    assert!(
        stopped.contains(&format!("stopped (pid {pid})"))
            && handles.iter().all(|h| stopped.contains(h.as_str())),
        "{stopped}"
    );
    assert!(
        server_gone_within(&socket, Duration::from_secs(10)),
        "the server still runs after `spex server stop`"
    );
    for id in &ids {
        let r = row(&rig, id);
        assert_eq!(r["status"], "exited", "{}", pretty(&r));
        // Codex fires SessionEnd for each thread as a stopped server lets it go; where the
        // hook is late, the server's end says it.
        assert!(
            r["exit_reason"] == "server gone" || r["exit_reason"] == "session end",
            "{}",
            pretty(&r)
        );
    }
    let status = rig
        .json(&rig.w.repo, &["server", "status", "--json"])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(status[0]["running"], false, "{}", pretty(&status));
    assert!(rig.ok(&["server"]).contains("not running"));
    assert!(rig.ok(&["server", "stop"]).contains("was not running"));
}

/// Issue 20 item 13: `kill -9` of the supervisor (`spex serve`) does not leave the project's
/// server orphaned: its guard stops the server within seconds, and the sessions on it read
/// `exited`.
#[test]
fn killing_the_supervisor_does_not_orphan_the_server() {
    let rig = Rig::start(true);
    crate::real_tui::CodexTui::prepare(&rig.w, &rig.fake.as_ref().unwrap().base_url());
    let launched = rig.launch(&rig.w.repo, &["SCENARIO:plain supervised"]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let socket = rig.server_socket();
    let supervisor = rig.running()["supervisor_pid"].as_u64().unwrap();
    assert!(server_process(&socket).is_some());
    Command::new("kill")
        .args(["-KILL", &supervisor.to_string()])
        .status()
        .unwrap();
    assert!(
        server_gone_within(&socket, Duration::from_secs(15)),
        "the server outlived its supervisor\n{}",
        rig.diag()
    );
    let shown = rig.until(&id, "the session never read exited", SETTLE, |s| {
        s["session"]["status"] == "exited"
    });
    assert!(
        shown["session"]["exit_reason"] == "server gone"
            || shown["session"]["exit_reason"] == "session end",
        "{}",
        pretty(&shown)
    );
    // The server's launcher process (the one spex recorded) ends a moment after the server.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = rig
            .json(&rig.w.repo, &["server", "status", "--json"])
            .unwrap_or_else(|e| panic!("{e}"));
        if status[0]["running"] == false {
            break;
        }
        assert!(Instant::now() < deadline, "{}", pretty(&status));
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Issue 20 item 13: a thread on the project's server that no live session of spex's names (a
/// record pruned while the server kept its thread; here one another client started) shows in
/// `spex server` as such and does not keep the server running once the last session stops.
#[test]
fn an_orphaned_thread_does_not_keep_the_server_running() {
    let rig = Rig::start(true);
    crate::real_tui::CodexTui::prepare(&rig.w, &rig.fake.as_ref().unwrap().base_url());
    let launched = rig.launch(&rig.w.repo, &["SCENARIO:plain the only session"]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let socket = rig.server_socket();
    let mut rpc = Rig::rpc(&socket);
    let orphan = rpc
        .call("thread/start", &json!({"cwd": rig.w.repo}))
        .unwrap()["thread"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    rpc.call(
        "thread/name/set",
        &json!({"threadId": orphan, "name": "no record"}),
    )
    .unwrap();
    drop(rpc);
    let text = rig.ok(&["server"]);
    assert!(
        text.contains("holds 2 thread(s)")
            && text.contains(&format!("thread {orphan} (no session record)")),
        "{text}"
    );
    rig.json(&rig.w.repo, &["stop", &id, "--json"])
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        server_gone_within(&socket, Duration::from_secs(10)),
        "a thread no session names kept the server running\n{}",
        rig.ok(&["server"])
    );
}

/// Issue 20 item 5, the server path: Ctrl-C typed while an attached `spex launch "prompt"`
/// starts Codex's server stops the thread the launch started and says so, with the session's
/// handle and that the prompt was not sent; it exits 130, and the model never got the prompt.
#[test]
fn ctrl_c_during_a_codex_launch_stops_the_thread_and_says_so() {
    let rig = Rig::start(true);
    crate::real_tui::CodexTui::prepare(&rig.w, &rig.fake.as_ref().unwrap().base_url());
    let mut t = attached(
        &rig,
        &["launch", "--harness", "codex", "SCENARIO:plain never sent"],
    );
    // The server takes a second or more to answer: the key lands while the launch starts it.
    std::thread::sleep(Duration::from_millis(300));
    assert!(t.running(), "{}", t.diag());
    t.send(b"\x03");
    let status = t
        .exit_within(SETTLE)
        .unwrap_or_else(|| panic!("the launch did not end:\n{}\n{}", t.diag(), rig.diag()));
    assert_eq!(status.exit_code(), 130, "{}\n{}", t.diag(), rig.diag());
    t.wait_for(
        "launch interrupted (Ctrl-C): session",
        Duration::from_secs(5),
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", rig.diag()));
    let id = only_session(&rig, SETTLE);
    let shown = rig.show(&id);
    let handle = shown["session"]["handle"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let said = t.text();
    assert!(
        !handle.is_empty() && said.contains(&format!("session {handle} stopped")),
        "{said}\n{}",
        rig.diag()
    );
    assert!(said.contains("its first prompt was not sent"), "{said}");
    assert_eq!(shown["session"]["status"], "exited", "{}", rig.diag());
    let asked = rig.fake.as_ref().unwrap().request_lines();
    assert!(
        !asked.iter().any(|l| l.contains("\"plain\"")),
        "the model got the prompt: {asked:?}"
    );
}

/// `spex deliver --wait-until done` into a Codex thread on spex's server: the stages with
/// their times and the turn's outcome; exit 0 for a completed turn (the command ran), 4 for a
/// failed one (the model API failed for good), with its state and why.
#[test]
fn deliver_wait_until_done_on_a_codex_thread_reports_the_outcome() {
    let rig = Rig::start(true);
    let launched = rig.launch(&rig.w.repo, &[]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let deliver = |text: &str| deliver_until_done(&rig, &id, text, "120", true);
    let out = deliver("SCENARIO:patch");
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {out:?}\n{}", rig.diag()));
    assert_eq!(out.status.code(), Some(0), "{}\n{}", pretty(&v), rig.diag());
    assert_eq!(v["reached"], "done", "{}", pretty(&v));
    assert_eq!(v["outcome"]["state"], "completed", "{}", pretty(&v));
    assert_eq!(v["outcome"]["id"], v["turn_id"], "{}", pretty(&v));
    let stages: Vec<&str> = v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert_eq!(stages, ["accepted", "started", "done"], "{}", pretty(&v));
    // The harness did the work: the patch's file is there.
    assert!(rig.w.repo.join("hello.txt").is_file(), "{}", rig.diag());
    let out = deliver("SCENARIO:fail");
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {out:?}\n{}", rig.diag()));
    assert_eq!(out.status.code(), Some(4), "{}\n{}", pretty(&v), rig.diag());
    assert_eq!(v["reached"], "done", "{}", pretty(&v));
    assert_eq!(v["outcome"]["state"], "failed", "{}", pretty(&v));
    assert!(v["outcome"]["next"].is_string(), "{}", pretty(&v));
    let shown = rig.show(&id);
    crate::support::world::assert_grammar(&shown["session"], &events(&shown), &|| rig.diag());
    rig.json(&rig.w.repo, &["stop", &id, "--json"])
        .unwrap_or_else(|e| panic!("{e}"));
}

/// `spex deliver <id> <text> --wait-until done --timeout <secs> [--json]`, run to its end.
fn deliver_until_done(
    rig: &Rig,
    id: &str,
    text: &str,
    secs: &str,
    json: bool,
) -> std::process::Output {
    let mut args = vec![
        "deliver",
        id,
        text,
        "--wait-until",
        "done",
        "--timeout",
        secs,
    ];
    if json {
        args.push("--json");
    }
    rig.cmd(&rig.w.repo, &args).output().unwrap()
}

/// A thread on spex's server whose model request hangs: the supervisor judges its budget,
/// ends the turn `timed_out` and interrupts it (`turn/interrupt`); the server's own word that
/// the turn was interrupted adds no second ending, and the session is idle again.
#[test]
fn a_codex_turn_past_its_budget_is_timed_out_and_interrupted_by_the_supervisor() {
    let rig = Rig::start(true);
    write(
        &rig.w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"codex\"], \"turnTimeout\": \"4s\", \"onTimeout\": \"interrupt\" }\n",
    );
    let launched = rig.launch(&rig.w.repo, &[]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let out = deliver_until_done(&rig, &id, "SCENARIO:hang HANG=50", "60", false);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(4), "{text}\n{}", rig.diag());
    assert!(text.contains("turn timed_out"), "{text}\n{}", rig.diag());
    let shown = rig.until(&id, "the turn was never stopped", SETTLE, |s| {
        s["session"]["status"] == "idle"
            && s["session"]["turn"]["timeout"]["interrupt_sent_at"].is_string()
    });
    let turn = &shown["session"]["turn"];
    assert_eq!(turn["state"], "timed_out", "{}", pretty(&shown));
    assert_eq!(turn["timeout"]["action"], "interrupt", "{}", pretty(&shown));
    assert_eq!(
        crate::support::world::turn_endings(&events(&shown)),
        ["turn.timed_out"],
        "{}",
        pretty(&shown)
    );
    // The harness stopped: the server reported the turn interrupted.
    let stopped = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        rig.server_log().contains("end: Interrupted")
    });
    assert!(stopped, "{}", rig.diag());
    crate::support::world::assert_grammar(&shown["session"], &events(&shown), &|| rig.diag());
    rig.json(&rig.w.repo, &["stop", &id, "--json"])
        .unwrap_or_else(|e| panic!("{e}"));
}

/// A model request that hangs past the stall budget (no hook, no server notification), then
/// answers: `turn.stalled`, then `turn.resumed` when the server streams again, then
/// `turn.completed`; the session stayed `working` through the stall.
#[test]
fn a_stalled_codex_turn_is_marked_then_resumes_and_completes() {
    let rig = Rig::start(true);
    write(
        &rig.w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"codex\"], \"stallTimeout\": \"3s\" }\n",
    );
    let launched = rig.launch(&rig.w.repo, &[]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    // A wait shorter than the turn: exit 1, saying how far the delivery got.
    let out = deliver_until_done(&rig, &id, "SCENARIO:hang HANG=9", "2", false);
    assert_eq!(out.status.code(), Some(1), "{out:?}\n{}", rig.diag());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("reached `started`, not `done`"),
        "{out:?}"
    );
    let stalled = rig.until(&id, "the turn was never marked stalled", SETTLE, |s| {
        kinds(s).contains(&"turn.stalled".to_owned())
    });
    assert_eq!(
        stalled["session"]["status"],
        "working",
        "{}",
        pretty(&stalled)
    );
    assert_eq!(
        stalled["session"]["turn"]["state"],
        "running",
        "{}",
        pretty(&stalled)
    );
    assert!(
        stalled["session"]["turn"]["stalled_at"].is_string(),
        "{}",
        pretty(&stalled)
    );
    let human = rig.ok(&["show", &id]);
    assert!(human.contains("running, stalled since"), "{human}");
    let done = rig.until(
        &id,
        "the turn never completed",
        Duration::from_mins(1),
        |s| s["session"]["turn"]["state"] == "completed",
    );
    let k = kinds(&done);
    let at = |kind: &str| k.iter().position(|x| x == kind);
    assert!(
        at("turn.stalled") < at("turn.resumed") && at("turn.resumed") < at("turn.completed"),
        "{}",
        pretty(&done)
    );
    assert!(
        done["session"]["turn"]["stalled_at"].is_null(),
        "{}",
        pretty(&done)
    );
    assert_eq!(
        crate::support::world::turn_endings(&events(&done)),
        ["turn.completed"],
        "{}",
        pretty(&done)
    );
    crate::support::world::assert_grammar(&done["session"], &events(&done), &|| rig.diag());
    rig.json(&rig.w.repo, &["stop", &id, "--json"])
        .unwrap_or_else(|e| panic!("{e}"));
}

/// After the machine stopped (simulated: the supervisor, the server and any host killed at
/// once, then another boot id through the test-only `SPEX_BOOT_ID_FILE`), a Codex session
/// reads `exited`, `machine stopped` (never `server gone`), and `spex resume --all-stopped`
/// brings its thread back on a new server, where it takes a prompt.
#[test]
fn a_codex_session_live_before_a_reboot_reads_machine_stopped_and_resume_all_stopped_brings_it_back()
 {
    let rig = Rig::start(true);
    let launched = rig.launch(&rig.w.repo, &["SCENARIO:plain before the reboot"]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    rig.until(&id, "the first turn never completed", SETTLE, |s| {
        s["session"]["turn"]["state"] == "completed"
    });
    let booted = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    assert_eq!(rig.show(&id)["session"]["boot_id"], booted.trim());

    // The machine stops: every process at once, so none records the others' end: the
    // supervisor's guard (it would stop the server and record `server gone`), the
    // supervisor, the server's process group and any host.
    let running = rig.running();
    let mut pids: Vec<String> = Vec::new();
    if let Some(pid) = running["server_pid"].as_u64() {
        pids.extend(guards_of(pid).iter().map(u32::to_string));
    }
    if let Some(pid) = running["supervisor_pid"].as_u64() {
        pids.push(pid.to_string());
    }
    if let Some(pid) = running["server_pid"].as_u64() {
        pids.extend([format!("-{pid}"), pid.to_string()]);
    }
    for key in ["host_pid", "child_pid"] {
        if let Some(pid) = launched["session"][key].as_u64() {
            pids.push(pid.to_string());
        }
    }
    let mut kill = Command::new("kill");
    kill.args(["-KILL", "--"]).args(&pids).stderr(Stdio::null());
    let socket = rig.server_socket();
    let _ = kill.status();
    let deadline = Instant::now() + Duration::from_secs(5);
    while server_process(&socket).is_some() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(server_process(&socket), None, "the server still runs");
    let boot = rig.w.dir.path().join("boot_id");
    write(&boot, "5a1d6c2e-7f3b-4e8a-9c0d-1e2f3a4b5c6d\n");
    let after = |args: &[&str]| -> Value {
        let mut c = rig.cmd(&rig.w.repo, args);
        c.env("SPEX_BOOT_ID_FILE", &boot);
        json_result(args, &c.output().unwrap()).unwrap_or_else(|e| panic!("{e}\n{}", rig.diag()))
    };

    let shown = after(&["show", &id, "--json"]);
    assert_eq!(
        (
            &shown["session"]["status"],
            &shown["session"]["exit_reason"]
        ),
        (&Value::from("exited"), &Value::from("machine stopped")),
        "{}",
        pretty(&shown)
    );
    let listed = after(&["resume", "--all-stopped", "--json"]);
    assert_eq!(
        listed["resumed"][0]["id"],
        id.as_str(),
        "{}",
        pretty(&listed)
    );
    assert_eq!(listed["resumed"].as_array().map(Vec::len), Some(1));
    assert_eq!(listed["failed"], json!([]), "{}", pretty(&listed));

    let d = after(&["deliver", &id, "SCENARIO:plain after the reboot", "--json"]);
    assert_eq!(d["mode"], "start", "{}", pretty(&d));
    let deadline = Instant::now() + SETTLE;
    let done = loop {
        let shown = after(&["show", &id, "--json"]);
        let s = &shown["session"];
        if s["turn"]["state"] == "completed"
            && s["turn"]["prompt"] == "SCENARIO:plain after the reboot"
        {
            break shown;
        }
        assert!(
            Instant::now() < deadline,
            "{}\n{}",
            pretty(&shown),
            rig.diag()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(done["session"]["live"], true, "{}", pretty(&done));
    assert_eq!(
        done["session"]["boot_id"],
        "5a1d6c2e-7f3b-4e8a-9c0d-1e2f3a4b5c6d"
    );
    let stopped = after(&["stop", &id, "--json"]);
    assert_eq!(stopped["status"], "exited", "{}", pretty(&stopped));
}

/// The `spex serve --guard` processes watching server `pid` (their argument `pid:start`).
fn guards_of(pid: u64) -> Vec<u32> {
    let watched = format!("{pid}:");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            let args: Vec<String> = cmdline
                .split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            args.iter().any(|a| a == "--guard") && args.iter().any(|a| a.starts_with(&watched))
        })
        .collect()
}
