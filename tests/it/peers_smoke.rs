//! Smoke tests: the fakes in `support` drive the REAL pinned harnesses end to end (no mocks).
//! They need `scripts/install-peers.sh` and fail (never skip) without it.

use std::fs::{self, File};
use std::io::ErrorKind;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;
use tungstenite::{Message, WebSocket};

use crate::support::claude_home::claude_command;
use crate::support::codex_home::{codex_command, write_codex_config};
use crate::support::fake_anthropic::{FakeAnthropic, WRITE_CONTENT};
use crate::support::fake_responses::FakeResponses;
use crate::support::peers::GroupChild;

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

fn read_or_empty(p: &Path) -> String {
    fs::read_to_string(p).unwrap_or_default()
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

    let out_path = tmp.path().join("stdout.jsonl");
    let err_path = tmp.path().join("stderr.txt");
    let prompt = format!("Please create the file. TARGET_DIR={}", repo.display());
    let mut cmd = claude_command(&home, &fake.base_url());
    cmd.current_dir(&repo)
        .args(["-p", &prompt, "--output-format", "stream-json", "--verbose"])
        .args(["--permission-mode", "acceptEdits"])
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap());
    let mut child = GroupChild::spawn(&mut cmd);
    let status = child.wait_timeout(TURN_TIMEOUT);
    let diag = || {
        format!(
            "stdout:\n{}\nstderr:\n{}\nrequests answered: {:?}",
            read_or_empty(&out_path),
            read_or_empty(&err_path),
            fake.requests()
                .iter()
                .map(|r| format!("{} {} {}", r["method"], r["path"], r["answered"]))
                .collect::<Vec<_>>()
        )
    };
    let status = status.unwrap_or_else(|| panic!("claude did not finish in time\n{}", diag()));
    assert!(status.success(), "claude exited with {status}\n{}", diag());

    assert_eq!(
        read_or_empty(&repo.join("hello.txt")),
        WRITE_CONTENT,
        "hello.txt not written\n{}",
        diag()
    );
    let hooks = read_or_empty(&hook_log);
    let fired: Vec<&str> = hooks.lines().collect();
    assert!(
        fired.contains(&"PreToolUse"),
        "hooks fired: {fired:?}\n{}",
        diag()
    );
    assert!(
        fired.contains(&"Stop"),
        "hooks fired: {fired:?}\n{}",
        diag()
    );
    let result = read_or_empty(&out_path)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "result")
        .unwrap_or_else(|| panic!("no result line\n{}", diag()));
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
        "answers: {answered:?}\n{}",
        diag()
    );
    eprintln!("claude smoke: {:?}", started.elapsed());
}

/// Just enough JSON-RPC over WebSocket to drive one turn; the crate has the real client.
struct Rpc {
    ws: WebSocket<UnixStream>,
    next_id: u64,
    notifications: Vec<Value>,
}

impl Rpc {
    fn send(&mut self, msg: &Value) {
        self.ws
            .send(Message::text(msg.to_string()))
            .expect("websocket send");
    }

    /// The next JSON message, or `None` at `deadline`.
    fn recv(&mut self, deadline: Instant) -> Option<Value> {
        while Instant::now() < deadline {
            match self.ws.read() {
                Ok(Message::Text(t)) => return Some(serde_json::from_str(t.as_str()).unwrap()),
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => panic!("websocket read: {e}"),
            }
        }
        None
    }

    fn call(&mut self, method: &str, params: &Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let msg = self
                .recv(deadline)
                .unwrap_or_else(|| panic!("no answer to {method}"));
            if msg["id"] == id && msg.get("method").is_none() {
                assert!(msg.get("error").is_none(), "{method} failed: {msg}");
                return msg["result"].clone();
            }
            self.notifications.push(msg);
        }
    }

    /// The first notification `method` (already received or arriving before `deadline`).
    fn wait_notification(&mut self, method: &str, deadline: Instant) -> Option<Value> {
        let mut seen = 0;
        loop {
            if let Some(n) = self.notifications[seen..]
                .iter()
                .find(|n| n["method"] == method)
            {
                return Some(n.clone());
            }
            seen = self.notifications.len();
            let msg = self.recv(deadline)?;
            self.notifications.push(msg);
        }
    }
}

/// A real `codex app-server` on a Unix socket, configured for a [`FakeResponses`], with one
/// initialized WebSocket client.
struct CodexRig {
    fake: FakeResponses,
    repo: PathBuf,
    log_path: PathBuf,
    rpc: Rpc,
    server: GroupChild,
    // Last: removed after the server is stopped.
    _tmp: TempDir,
}

impl CodexRig {
    fn start(approval: &str, sandbox: &str) -> CodexRig {
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
        write_codex_config(&codex_home, &fake.base_url(), approval, sandbox);

        let sock = tmp.path().join("s.sock");
        let log_path = tmp.path().join("server.log");
        // One file for both streams (a clone shares the offset, so they interleave, not overwrite).
        let log_file = File::create(&log_path).unwrap();
        let mut cmd = codex_command(&codex_home, &home);
        cmd.arg("app-server")
            .arg("--listen")
            .arg(format!("unix://{}", sock.display()))
            .current_dir(&repo)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file);
        let mut server = GroupChild::spawn(&mut cmd);

        // The socket file appears before the server accepts; only a connect proves it is up.
        let deadline = Instant::now() + Duration::from_secs(30);
        let stream = loop {
            if let Ok(s) = UnixStream::connect(&sock) {
                break s;
            }
            if let Some(st) = server.try_wait() {
                panic!(
                    "codex app-server exited early ({st})\n{}",
                    read_or_empty(&log_path)
                );
            }
            assert!(
                Instant::now() < deadline,
                "app-server never listened\n{}",
                read_or_empty(&log_path)
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        // Short read timeouts let `recv` enforce deadlines instead of blocking forever.
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let (ws, _) =
            tungstenite::client("ws://localhost/rpc", stream).expect("websocket handshake");
        let mut rpc = Rpc {
            ws,
            next_id: 0,
            notifications: Vec::new(),
        };
        rpc.call(
            "initialize",
            &json!({"clientInfo": {"name": "spex-smoke", "version": "0"},
                "capabilities": {"experimentalApi": true}}),
        );
        rpc.send(&json!({"jsonrpc": "2.0", "method": "initialized"}));
        CodexRig {
            fake,
            repo,
            log_path,
            rpc,
            server,
            _tmp: tmp,
        }
    }

    fn diag(&self) -> String {
        format!(
            "server log:\n{}\nrequests: {:?}",
            read_or_empty(&self.log_path),
            self.fake
                .requests()
                .iter()
                .map(|r| format!(
                    "{} {} {} {}",
                    r["method"], r["path"], r["scenario"], r["n_tool_outputs"]
                ))
                .collect::<Vec<_>>()
        )
    }

    fn start_thread(&mut self) -> String {
        let thread = self.rpc.call("thread/start", &json!({"cwd": self.repo}));
        thread["thread"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no thread id in {thread}"))
            .to_owned()
    }

    /// Runs one turn with `text` and returns its `turn/completed` params.
    fn run_turn(&mut self, thread_id: &str, text: &str) -> Value {
        self.rpc.notifications.clear();
        self.rpc.call(
            "turn/start",
            &json!({"threadId": thread_id, "input": [{"type": "text", "text": text}]}),
        );
        let completed = self
            .rpc
            .wait_notification("turn/completed", Instant::now() + TURN_TIMEOUT);
        completed.unwrap_or_else(|| panic!("no turn/completed\n{}", self.diag()))["params"].clone()
    }
}

impl Drop for CodexRig {
    fn drop(&mut self) {
        self.server.stop(Duration::from_secs(5));
    }
}

#[test]
fn codex_app_server_turn_applies_patch_from_fake() {
    let started = Instant::now();
    let mut rig = CodexRig::start("never", "danger-full-access");
    let thread_id = rig.start_thread();
    let completed = rig.run_turn(&thread_id, "SCENARIO:patch");
    assert_eq!(
        completed["turn"]["status"],
        "completed",
        "{completed}\n{}",
        rig.diag()
    );
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
    let mut rig = CodexRig::start("never", "danger-full-access");
    let thread_id = rig.start_thread();
    let completed = rig.run_turn(&thread_id, "SCENARIO:multipatch");
    assert_eq!(
        completed["turn"]["status"],
        "completed",
        "{completed}\n{}",
        rig.diag()
    );
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
