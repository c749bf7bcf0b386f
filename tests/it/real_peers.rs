//! spex against the REAL pinned harnesses (no mocks): Codex's own `hooks/list` must report every
//! shim spex writes as enabled and trusted (and none after `clean`), a real Claude Code turn must
//! call `spex dispatch` for every bound event (and nothing after `clean`), and `spex doctor` must
//! tell a broken shim apart from a good one. Needs `scripts/install-peers.sh`; fails, never skips.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::ErrorKind;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tungstenite::{Message, WebSocket};

use crate::common::{World, read, write};
use crate::support::claude_home::claude_command;
use crate::support::codex_home::codex_command;
use crate::support::fake_anthropic::{FakeAnthropic, WRITE_CONTENT};
use crate::support::peers::{GroupChild, peers_bin_dir};

/// The events spex binds for Codex (`src/adapters/codex.rs`).
const CODEX_EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PermissionRequest",
    "Stop",
    "Interrupt",
    "SessionEnd",
];

/// The events a plain print-mode Claude turn with one Write fires, all bound by spex.
const CLAUDE_TURN_EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "SessionEnd",
];

const USER_HOOK_COMMAND: &str = "echo user-hook";
const USER_HOOKS_JSON: &str = r#"{
  "hooks": {
    "PreToolUse": [
      { "matcher": "Bash", "hooks": [ { "type": "command", "command": "echo user-hook" } ] }
    ]
  }
}
"#;

const RPC_TIMEOUT: Duration = Duration::from_secs(30);
const TURN_TIMEOUT: Duration = Duration::from_secs(90);

fn read_or_empty(p: &Path) -> String {
    fs::read_to_string(p).unwrap_or_default()
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

fn output_text(out: &Output) -> String {
    format!(
        "exit {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `PATH` with the pinned peers first, so `spex doctor` finds the real `claude` and `codex`.
fn peers_path() -> OsString {
    let mut dirs = vec![peers_bin_dir()];
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(dirs).expect("PATH joins")
}

fn seed_project(w: &World) {
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\", \"codex\"] }\n",
    );
}

/// `spex doctor --json` in `cwd` with the real peers on PATH: (exit code, report, raw output).
fn doctor(w: &World, cwd: &Path) -> (Option<i32>, Value, String) {
    let out = w
        .cmd(cwd, &["doctor", "--json"])
        .env("PATH", peers_path())
        .output()
        .expect("spex doctor runs");
    let text = output_text(&out);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("doctor --json printed no JSON ({e})\n{text}"));
    (out.status.code(), report, text)
}

/// The check of `harness` whose name starts with `name`.
fn check<'a>(report: &'a Value, harness: &str, name: &str) -> &'a Value {
    report[harness]["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"].as_str().is_some_and(|n| n.starts_with(name)))
        .unwrap_or_else(|| panic!("no {harness} check `{name}` in\n{}", pretty(report)))
}

/// Just enough JSON-RPC over WebSocket for `initialize` and `hooks/list`.
struct Rpc {
    ws: WebSocket<UnixStream>,
    next_id: u64,
}

impl Rpc {
    fn send(&mut self, msg: &Value) {
        self.ws
            .send(Message::text(msg.to_string()))
            .expect("websocket send");
    }

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

    /// The response to one request; notifications in between are dropped.
    fn call(&mut self, method: &str, params: &Value) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + RPC_TIMEOUT;
        loop {
            let Some(msg) = self.recv(deadline) else {
                return Err(format!("no answer to {method} in {RPC_TIMEOUT:?}"));
            };
            if msg["id"] == id && msg.get("method").is_none() {
                return match msg.get("error") {
                    Some(e) => Err(format!("{method} failed: {e}")),
                    None => Ok(msg["result"].clone()),
                };
            }
        }
    }
}

/// A real `codex app-server` on a Unix socket with the world's HOME and CODEX_HOME, and one
/// initialized client. Stopped (with its whole process group) on Drop.
struct AppServer {
    rpc: Rpc,
    log_path: PathBuf,
    server: GroupChild,
}

impl AppServer {
    fn start(w: &World, tag: &str) -> AppServer {
        // The world's base dir is a short `/tmp/spx*` path: well inside `sun_path`.
        let sock = w.dir.path().join(format!("{tag}.sock"));
        let log_path = w.dir.path().join(format!("{tag}.log"));
        let log_file = File::create(&log_path).unwrap();
        let mut cmd = codex_command(&w.codex_home, &w.home);
        cmd.arg("app-server")
            .arg("--listen")
            .arg(format!("unix://{}", sock.display()))
            .current_dir(&w.home)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file);
        let mut server = GroupChild::spawn(&mut cmd);
        let deadline = Instant::now() + RPC_TIMEOUT;
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
                "codex app-server never listened on {}\n{}",
                sock.display(),
                read_or_empty(&log_path)
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let (ws, _) = tungstenite::client("ws://localhost/rpc", stream)
            .unwrap_or_else(|e| panic!("websocket handshake: {e}\n{}", read_or_empty(&log_path)));
        let mut app = AppServer {
            rpc: Rpc { ws, next_id: 0 },
            log_path,
            server,
        };
        let init = app.rpc.call(
            "initialize",
            &json!({"clientInfo": {"name": "spex-real-peers", "version": "0"},
                "capabilities": {"experimentalApi": true}}),
        );
        if let Err(e) = init {
            panic!("{e}\n{}", app.log());
        }
        app.rpc
            .send(&json!({"jsonrpc": "2.0", "method": "initialized"}));
        app
    }

    fn log(&self) -> String {
        format!("app-server log:\n{}", read_or_empty(&self.log_path))
    }

    /// The raw `hooks/list` result for `cwds`.
    fn hooks_list(&mut self, cwds: &[&Path]) -> Value {
        match self.rpc.call("hooks/list", &json!({ "cwds": cwds })) {
            Ok(v) => v,
            Err(e) => panic!("{e}\n{}", self.log()),
        }
    }
}

impl Drop for AppServer {
    fn drop(&mut self) {
        self.server.stop(Duration::from_secs(5));
    }
}

/// The hooks `hooks/list` reported for `cwd` (the listing must exist and be error-free).
fn hooks_of<'a>(list: &'a Value, cwd: &Path) -> &'a [Value] {
    let listing = list["data"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|l| l["cwd"].as_str().map(Path::new) == Some(cwd))
        .unwrap_or_else(|| panic!("no listing for {} in\n{}", cwd.display(), pretty(list)));
    let errors = listing["errors"].as_array().map_or(0, Vec::len);
    assert_eq!(
        errors,
        0,
        "hooks/list errors for {}:\n{}",
        cwd.display(),
        pretty(list)
    );
    listing["hooks"]
        .as_array()
        .map_or(&[], Vec::as_slice)
        .as_ref()
}

fn command_of(hook: &Value) -> &str {
    hook["command"].as_str().unwrap_or_default()
}

fn is_spex_hook(hook: &Value) -> bool {
    command_of(hook).contains(" dispatch codex ")
}

/// `PreToolUse` -> `preToolUse`, the casing of `eventName` in `hooks/list`.
fn camel(event: &str) -> String {
    let mut c = event.chars();
    c.next()
        .map(|f| f.to_ascii_lowercase().to_string() + c.as_str())
        .unwrap_or_default()
}

/// The user's own hook in a listing, with the fields that must survive materialize and clean.
fn user_hook(list: &Value, cwd: &Path) -> Value {
    let hooks = hooks_of(list, cwd);
    let found: Vec<&Value> = hooks
        .iter()
        .filter(|h| command_of(h) == USER_HOOK_COMMAND)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "the user's hook `{USER_HOOK_COMMAND}` must be listed once for {}:\n{}",
        cwd.display(),
        pretty(list)
    );
    let h = found[0];
    assert_eq!(h["eventName"], "preToolUse", "{}", pretty(h));
    assert_eq!(h["matcher"], "Bash", "{}", pretty(h));
    h.clone()
}

fn assert_spex_hooks_trusted(list: &Value, cwd: &Path) {
    let hooks = hooks_of(list, cwd);
    for event in CODEX_EVENTS {
        let suffix = format!(" dispatch codex {event}");
        let ours: Vec<&Value> = hooks
            .iter()
            .filter(|h| command_of(h).ends_with(&suffix))
            .collect();
        assert_eq!(
            ours.len(),
            1,
            "{}: expected exactly one spex `{event}` hook:\n{}",
            cwd.display(),
            pretty(list)
        );
        let h = ours[0];
        assert_eq!(
            h["eventName"],
            camel(event),
            "{}: {event}\n{}",
            cwd.display(),
            pretty(list)
        );
        assert_eq!(
            h["trustStatus"],
            "trusted",
            "{}: {event} not trusted\n{}",
            cwd.display(),
            pretty(list)
        );
        assert_eq!(
            h["enabled"],
            true,
            "{}: {event} not enabled\n{}",
            cwd.display(),
            pretty(list)
        );
    }
    let total = hooks.iter().filter(|h| is_spex_hook(h)).count();
    assert_eq!(
        total,
        CODEX_EVENTS.len(),
        "{}: unexpected spex hooks\n{}",
        cwd.display(),
        pretty(list)
    );
}

#[test]
fn codex_hooks_list_trusts_every_spex_hook_in_main_and_worktree() {
    let started = Instant::now();
    let w = World::new();
    seed_project(&w);
    write(&w.repo.join(".codex/hooks.json"), USER_HOOKS_JSON);
    // The worktree is added before materialize: its checkout holds the user's own (tracked)
    // `.codex/hooks.json`, not a commit of spex's output.
    let wt = w.add_worktree("wt");

    // Baseline: what Codex makes of the user's hook before spex touches anything. The project
    // is not trusted yet, so the listing may be empty; it is recorded for the diagnostics.
    let before = AppServer::start(&w, "h0").hooks_list(&[&w.repo, &wt]);

    w.ok(&w.repo, &["materialize"]);
    w.ok(&wt, &["materialize"]);

    let mut app = AppServer::start(&w, "h1");
    let list = app.hooks_list(&[&w.repo, &wt]);
    eprintln!("BEFORE {}\nDURING {}", pretty(&before), pretty(&list));
    let ctx = || {
        format!(
            "before materialize:\n{}\nhooks.json:\n{}\nconfig.toml:\n{}",
            pretty(&before),
            read_or_empty(&w.repo.join(".codex/hooks.json")),
            read_or_empty(&w.codex_home.join("config.toml"))
        )
    };
    for cwd in [&w.repo, &wt] {
        let hooks = hooks_of(&list, cwd);
        assert!(
            !hooks.is_empty(),
            "Codex lists no hooks for {}:\n{}\n{}\n{}",
            cwd.display(),
            pretty(&list),
            ctx(),
            app.log()
        );
        assert_spex_hooks_trusted(&list, cwd);
    }
    let user_main = user_hook(&list, &w.repo);
    let user_wt = user_hook(&list, &wt);
    drop(app);

    let (code, report, text) = doctor(&w, &w.repo);
    assert_eq!(
        check(&report, "codex", "codex hooks/list")["status"],
        "ok",
        "{text}"
    );
    assert_eq!(code, Some(0), "doctor in the main checkout: {text}");

    w.ok(&wt, &["clean"]);
    w.ok(&w.repo, &["clean"]);
    assert_eq!(
        read(&w.repo.join(".codex/hooks.json")),
        USER_HOOKS_JSON,
        "clean did not restore the user's hooks.json byte for byte"
    );

    let mut app = AppServer::start(&w, "h2");
    let after = app.hooks_list(&[&w.repo, &wt]);
    eprintln!("AFTER {}", pretty(&after));
    for cwd in [&w.repo, &wt] {
        let listing = after["data"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|l| l["cwd"].as_str().map(Path::new) == Some(cwd.as_path()))
            .unwrap_or_else(|| panic!("no listing for {}:\n{}", cwd.display(), pretty(&after)));
        let leftovers: Vec<&Value> = listing["hooks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|h| is_spex_hook(h))
            .collect();
        assert!(
            leftovers.is_empty(),
            "spex hooks remain after clean in {}:\n{}\n{}",
            cwd.display(),
            pretty(&after),
            app.log()
        );
    }
    // The user's hook is exactly as it was while spex's hooks were installed, except that its
    // position among the handlers no longer counts spex's groups (none were before it).
    assert_eq!(user_hook(&after, &w.repo), user_main, "{}", pretty(&after));
    assert_eq!(user_hook(&after, &wt), user_wt, "{}", pretty(&after));
    drop(app);
    eprintln!("codex hooks/list: {:?}", started.elapsed());
}
