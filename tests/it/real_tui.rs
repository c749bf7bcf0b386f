//! The REAL Claude Code TUI started as a user starts it (under a PTY, not through spex), with
//! spex's shims installed: what `spex show` and `spex wait` say where Claude fires no hook
//! (Esc at a permission dialog, an approval, `kill -9`), and the same for the real Codex TUI.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, PtySize, native_pty_system};
use serde_json::Value;

use crate::support::claude_home::{DUMMY_API_KEY, SeedOptions, seed_claude_home};
use crate::support::fake_anthropic::FakeAnthropic;
use crate::support::http::random_hex;
use crate::support::peers::claude_bin;
use crate::support::term::Answerer;
use crate::support::world::{World, assert_grammar, read_or_empty, write};

/// The TUI's first screen, from a cold start on a loaded 2-core machine.
const STARTUP: Duration = Duration::from_mins(1);
/// A hook-driven state (the prompt's hooks ran).
const HOOKED: Duration = Duration::from_secs(30);
/// The issue's bound for a state reached with no hook.
const NO_HOOK: Duration = Duration::from_secs(2);

/// The TUI under a PTY; its output accumulates for failure messages.
struct Tui {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    screen: Arc<Mutex<Vec<u8>>>,
    session: String,
}

impl Tui {
    fn start(w: &World, fake: &FakeAnthropic) -> Tui {
        seed_claude_home(&w.home, DUMMY_API_KEY, &[&w.repo], SeedOptions::default());
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 45,
                cols: 130,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let session = uuid();
        let mut cmd = CommandBuilder::new(claude_bin());
        cmd.env_clear();
        for (k, v) in [
            ("PATH", std::env::var("PATH").unwrap_or_default()),
            ("HOME", w.home.display().to_string()),
            ("LANG", "C.UTF-8".into()),
            ("TERM", "xterm-256color".into()),
            ("ANTHROPIC_BASE_URL", fake.base_url()),
            ("ANTHROPIC_API_KEY", DUMMY_API_KEY.into()),
            ("DISABLE_AUTOUPDATER", "1".into()),
            ("SPEX_HOME", w.spex_home.display().to_string()),
            ("XDG_CONFIG_HOME", w.xdg_config.display().to_string()),
            ("CODEX_HOME", w.codex_home.display().to_string()),
            ("SPEX_TRACE_DISPATCH", "1".into()),
        ] {
            cmd.env(k, v);
        }
        cmd.args(["--session-id", &session]);
        cmd.cwd(&w.repo);
        let child = pair.slave.spawn_command(cmd).expect("spawn claude");
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().expect("pty reader");
        let writer = pair.master.take_writer().expect("pty writer");
        let screen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&screen);
        std::thread::spawn(move || {
            let _keep = pair.master;
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Tui {
            child,
            writer,
            screen,
            session,
        }
    }

    fn pid(&self) -> u32 {
        self.child.process_id().expect("claude has a pid")
    }

    fn send(&mut self, bytes: &[u8]) {
        self.writer
            .write_all(bytes)
            .and_then(|()| self.writer.flush())
            .expect("write to the TUI");
    }

    /// Pastes a prompt and submits it (facts/claude.md §7.4: Enter as a separate write).
    fn prompt(&mut self, text: &str) {
        self.send(format!("\x1b[200~{text}\x1b[201~").as_bytes());
        std::thread::sleep(Duration::from_millis(300));
        self.send(b"\r");
    }

    fn tail(&self) -> String {
        let raw = self.screen.lock().unwrap();
        let text = String::from_utf8_lossy(&raw[raw.len().saturating_sub(3000)..]).into_owned();
        text.replace('\x1b', "^[")
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn uuid() -> String {
    let h = random_hex(32);
    format!(
        "{}-{}-4{}-a{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

fn registry(w: &World) -> Vec<(PathBuf, Value)> {
    std::fs::read_dir(w.home.join(".claude/sessions"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| {
            let v = serde_json::from_str(&read_or_empty(&e.path())).ok()?;
            Some((e.path(), v))
        })
        .collect()
}

/// Whether hook `event` of session `sid` reached `spex dispatch` (its trace log).
fn hook_fired(w: &World, sid: &str, event: &str) -> bool {
    read_or_empty(&w.project_dir().join("dispatch.log"))
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .any(|l| l["session_id"] == sid && l["event"] == event)
}

/// `spex show <id> --json`'s session.
fn show(w: &World, id: &str) -> Value {
    let out = w.ok(&w.repo, &["show", id, "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    v["session"].clone()
}

/// Polls `spex show` (the reader folds evidence in) until `pred` or `within`.
fn show_until(
    w: &World,
    id: &str,
    within: Duration,
    pred: impl Fn(&Value) -> bool,
) -> Result<Value, Value> {
    let end = Instant::now() + within;
    loop {
        let s = show(w, id);
        if pred(&s) {
            return Ok(s);
        }
        if Instant::now() >= end {
            return Err(s);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn claude_tui_esc_approve_kill_and_headline_are_true_without_hooks() {
    let w = World::new();
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\"] }\n",
    );
    w.ok(&w.repo, &["materialize"]);
    let fake = FakeAnthropic::start();
    let mut tui = Tui::start(&w, &fake);
    let mut other = Tui::start(&w, &fake);
    let mut asker = Tui::start(&w, &fake);
    let id = tui.session.clone();
    let diag = |tui: &Tui| {
        format!(
            "--- record: {:?}\n--- events:\n{}\n--- registry: {:?}\n--- screen tail:\n{}\n--- errors: {}",
            w.record_if_any(&tui.session),
            w.events(&tui.session)
                .iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join("\n"),
            registry(&w),
            tui.tail(),
            w.errors_log()
        )
    };
    // The TUIs are up when their registry files say idle.
    let end = Instant::now() + STARTUP;
    while registry(&w)
        .iter()
        .filter(|(_, v)| v["status"] == "idle")
        .count()
        < 3
    {
        assert!(
            Instant::now() < end,
            "the TUIs never came up\n{}",
            diag(&tui)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));

    // 1. A permission dialog, then Esc: no hook fires; the reader says idle + interrupted.
    let oid = other.session.clone();
    other.prompt("Please run a command. USE_BASH");
    show_until(&w, &oid, HOOKED, |s| s["status"] == "needs_attention")
        .unwrap_or_else(|s| panic!("no permission dialog: {s}\n{}", diag(&other)));
    // A waiter started before the Esc wakes from Claude's registry alone (no hook, no reader).
    let waiter = w
        .cmd(
            &w.repo,
            &["wait", &oid, "--until", "idle", "--timeout", "30"],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn spex wait");
    std::thread::sleep(Duration::from_millis(300));
    other.send(b"\x1b");
    let escaped = Instant::now();
    let woke = waiter.wait_with_output().expect("spex wait");
    eprintln!(
        "esc at the dialog -> wait woke after {:?}",
        escaped.elapsed()
    );
    assert!(woke.status.success(), "{woke:?}\n{}", diag(&other));
    assert!(
        escaped.elapsed() < NO_HOOK,
        "wait woke after {:?}\n{}",
        escaped.elapsed(),
        diag(&other)
    );
    let s = show_until(&w, &oid, NO_HOOK, |s| {
        s["status"] == "idle" && s["turn"]["state"] == "interrupted"
    })
    .unwrap_or_else(|s| panic!("Esc not seen within {NO_HOOK:?}: {s}\n{}", diag(&other)));
    eprintln!(
        "esc at the dialog -> idle/interrupted after {:?}",
        escaped.elapsed()
    );
    assert!(
        s["attention"].is_null(),
        "a denied request leaves no attention\n{}",
        diag(&other)
    );
    assert!(
        s["source"]
            .as_str()
            .unwrap_or_default()
            .contains("registry"),
        "{s}"
    );
    assert!(s["since"].is_string(), "{s}");
    let human = w.ok(&w.repo, &["show", &oid]);
    assert!(
        human.contains("turn interrupted: Claude's registry went waiting -> idle"),
        "{human}"
    );
    assert_grammar(&show(&w, &oid), &w.events(&oid), &|| diag(&other));

    // One AskUserQuestion opens one `attention.opened`, however many hooks report it
    // (PreToolUse, PermissionRequest, and the Notification about 6 s later).
    let aid = asker.session.clone();
    asker.prompt("Please ask me. USE_ASK");
    show_until(&w, &aid, HOOKED, |s| s["attention"]["reason"] == "question")
        .unwrap_or_else(|s| panic!("no question: {s}\n{}", diag(&asker)));
    let end = Instant::now() + HOOKED;
    while !hook_fired(&w, &aid, "Notification") {
        assert!(
            Instant::now() < end,
            "no Notification for the question\n{}",
            diag(&asker)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let raised = w
        .events(&aid)
        .iter()
        .filter(|e| e["kind"] == "attention.opened")
        .count();
    assert_eq!(
        raised,
        1,
        "one question, one attention.opened\n{}",
        diag(&asker)
    );
    asker.send(b"\x1b");
    let s = show_until(&w, &aid, NO_HOOK, |s| s["turn"]["state"] == "interrupted")
        .unwrap_or_else(|s| panic!("Esc at the question not seen: {s}\n{}", diag(&asker)));
    assert!(s["attention"].is_null(), "{}", diag(&asker));
    assert_grammar(&show(&w, &aid), &w.events(&aid), &|| diag(&asker));

    // 2. Approving a slow command: working with no attention long before its PostToolUse;
    // Esc while it runs: idle, interrupted (busy -> idle with no Stop).
    tui.prompt("Please run a slow one. USE_SLOWBASH");
    show_until(&w, &id, HOOKED, |s| s["status"] == "needs_attention")
        .unwrap_or_else(|s| panic!("no dialog: {s}\n{}", diag(&tui)));
    tui.send(b"\r");
    let approved = Instant::now();
    let s = show_until(&w, &id, NO_HOOK, |s| {
        s["status"] == "working" && s["attention"].is_null()
    })
    .unwrap_or_else(|s| panic!("approval not seen within {NO_HOOK:?}: {s}\n{}", diag(&tui)));
    eprintln!("approve -> working after {:?}", approved.elapsed());
    assert_eq!(s["turn"]["state"], "running", "{}", diag(&tui));
    // Claude's permission notification comes about 6 s after a dialog opens (none came for
    // this one, answered at once, with 2.1.197): nothing may raise the answered attention
    // again while the command runs.
    std::thread::sleep(Duration::from_secs(8));
    let s = show(&w, &id);
    assert!(
        s["status"] == "working" && s["attention"].is_null(),
        "a late notification raised answered attention again: {s}\n{}",
        diag(&tui)
    );
    tui.send(b"\x1b");
    let escaped = Instant::now();
    show_until(&w, &id, NO_HOOK, |s| {
        s["status"] == "idle" && s["turn"]["state"] == "interrupted"
    })
    .unwrap_or_else(|s| {
        panic!(
            "Esc during the command not seen within {NO_HOOK:?}: {s}\n{}",
            diag(&tui)
        )
    });
    eprintln!(
        "esc while busy -> idle/interrupted after {:?}",
        escaped.elapsed()
    );

    // A second prompt: the headline follows it.
    let second = "And now just answer. USE_NONE";
    tui.prompt(second);
    let s = show_until(&w, &id, HOOKED, |s| s["turn"]["state"] == "completed")
        .unwrap_or_else(|s| panic!("the second turn never completed: {s}\n{}", diag(&tui)));
    assert_eq!(s["headline"], second, "{}", diag(&tui));
    let list = w.ok(&w.repo, &["sessions"]);
    let handle = s["handle"].as_str().expect("a handle").to_owned();
    assert!(
        list.contains(&handle) && list.contains("And now just answer"),
        "{list}"
    );

    // 3. kill -9: the registry file stays; the next reader says exited (process gone), and
    // `wait` returns at once with exit code 3.
    let pid = tui.pid();
    assert!(
        std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let _ = tui.child.wait();
    assert!(
        !registry(&w).is_empty(),
        "kill -9 leaves Claude's registry file behind"
    );
    let s = show(&w, &handle);
    assert_eq!(s["status"], "exited", "{}", diag(&tui));
    assert_eq!(s["exit_reason"], "process gone", "{}", diag(&tui));
    let t = Instant::now();
    let waited = w.spex(
        &w.repo,
        &["wait", &handle, "--until", "idle", "--timeout", "30"],
    );
    assert_eq!(waited.status.code(), Some(3), "{waited:?}");
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "wait took {:?}",
        t.elapsed()
    );
    assert!(
        String::from_utf8_lossy(&waited.stderr).contains("process gone"),
        "{waited:?}"
    );
    let events = w.events(&id);
    let rec = w.record_if_any(&id).expect("record");
    assert_grammar(&rec, &events, &|| diag(&tui));
}

/// A Codex TUI under a PTY, answering its terminal queries. Its process group is killed on
/// Drop, and so is every process whose command line names the world's folder (the managed
/// app-server daemon default mode starts from `$CODEX_HOME/packages` outlives the TUI).
pub struct CodexTui {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    screen: Arc<Mutex<Vec<u8>>>,
    world: PathBuf,
}

impl CodexTui {
    /// The TUI a user runs with Codex's default approvals (on request, the workspace-write
    /// sandbox) and one reconnect after a failed model request.
    pub(crate) fn start(w: &World, fake_base_url: &str, args: &[&str]) -> CodexTui {
        use crate::support::codex_home::{set_stream_retries, write_codex_config};

        CodexTui::prepare(w, fake_base_url);
        write_codex_config(
            &w.codex_home,
            fake_base_url,
            "on-request",
            "workspace-write",
        );
        set_stream_retries(&w.codex_home, 1);
        CodexTui::spawn(w, &crate::support::peers::codex_bin(), args, &[])
    }

    /// A Codex home that talks to the fake API and opens no first-run dialog, and the project
    /// materialized for Codex.
    pub fn prepare(w: &World, fake_base_url: &str) {
        use crate::support::codex_home::write_codex_config;

        write_codex_config(&w.codex_home, fake_base_url, "never", "danger-full-access");
        // First-run dialogs (facts/codex.md §8).
        let cfg = w.codex_home.join("config.toml");
        let mut text = read_or_empty(&cfg);
        text.push_str("\n[notice.model_migrations]\n\"gpt-5.5\" = \"gpt-6-sol\"\n\n[tui.model_availability_nux]\n\"gpt-6.1-sol\" = 1\n\n[tui]\nscreen_reader_detection_done = true\n");
        write(&cfg, text);
        write(
            &w.repo.join("spex.jsonc"),
            "{ \"harnesses\": [\"codex\"] }\n",
        );
        w.ok(&w.repo, &["materialize"]);
    }

    /// `program args` in the repo under a PTY (Codex's environment, plus `env`), once it has
    /// drawn the Codex composer.
    pub fn spawn(w: &World, program: &Path, args: &[&str], env: &[(&str, String)]) -> CodexTui {
        use crate::support::codex_home::FAKE_API_KEY_ENV;

        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 40,
                cols: 120,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let mut cmd = CommandBuilder::new(program);
        cmd.env_clear();
        for (k, v) in [
            ("PATH", std::env::var("PATH").unwrap_or_default()),
            ("HOME", w.home.display().to_string()),
            ("LANG", "C.UTF-8".into()),
            ("TERM", "xterm-256color".into()),
            ("CODEX_HOME", w.codex_home.display().to_string()),
            (FAKE_API_KEY_ENV, "dummy".into()),
            ("SPEX_HOME", w.spex_home.display().to_string()),
            ("XDG_CONFIG_HOME", w.xdg_config.display().to_string()),
            ("RUST_LOG", "warn".into()),
        ] {
            cmd.env(k, v);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.args(args);
        cmd.cwd(&w.repo);
        let child = pair.slave.spawn_command(cmd).expect("spawn codex");
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().expect("pty reader");
        let writer = Arc::new(Mutex::new(pair.master.take_writer().expect("pty writer")));
        let screen = Arc::new(Mutex::new(Vec::new()));
        let (sink, replies) = (Arc::clone(&screen), Arc::clone(&writer));
        std::thread::spawn(move || {
            let _keep = pair.master;
            let mut answers = Answerer::new(40, 120);
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let reply = answers.feed(&buf[..n]);
                if !reply.is_empty() {
                    let mut wr = replies.lock().unwrap();
                    let _ = wr.write_all(&reply).and_then(|()| wr.flush());
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        let tui = CodexTui {
            child,
            writer,
            screen,
            world: w.dir.path().to_path_buf(),
        };
        // The TUI is ready once it drew its composer.
        let end = Instant::now() + STARTUP;
        while !tui.text().contains("? for shortcuts") {
            assert!(
                Instant::now() < end,
                "the Codex TUI never came up:\n{}",
                tui.text()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        std::thread::sleep(Duration::from_millis(500));
        tui
    }

    pub fn send(&self, bytes: &[u8]) {
        let mut wr = self.writer.lock().unwrap();
        wr.write_all(bytes)
            .and_then(|()| wr.flush())
            .expect("write to the TUI");
    }

    /// The rendered screen.
    pub fn text(&self) -> String {
        let mut parser = vt100::Parser::new(40, 120, 0);
        parser.process(&self.screen.lock().unwrap());
        parser.screen().contents()
    }

    /// Pastes a prompt and submits it.
    pub fn prompt(&self, text: &str) {
        self.send(format!("\x1b[200~{text}\x1b[201~").as_bytes());
        std::thread::sleep(Duration::from_millis(300));
        self.send(b"\r");
    }

    /// Pastes a prompt, submits it, and waits for a record whose turn completed: its id.
    pub fn turn(&self, w: &World, text: &str) -> String {
        self.prompt(text);
        let end = Instant::now() + HOOKED;
        loop {
            let done = w.session_ids().into_iter().find(|id| {
                w.record_if_any(id)
                    .is_some_and(|r| r["turn"]["state"] == "completed")
            });
            if let Some(id) = done {
                return id;
            }
            assert!(
                Instant::now() < end,
                "no completed Codex turn:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The program's exit, once it has ended within `timeout`.
    pub fn exit_within(&mut self, timeout: Duration) -> Option<portable_pty::ExitStatus> {
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// `kill -9` of the TUI's whole process group (the launcher and the native TUI: what a
    /// closed terminal or a killed job does).
    pub fn kill(&mut self) {
        let pid = self.child.process_id().expect("codex pid");
        let _ = std::process::Command::new("kill")
            .args(["-9", "--", &format!("-{pid}")])
            .status();
        let _ = self.child.wait();
    }
}

/// Pids of the processes whose command line names `dir`.
fn processes_under(dir: &Path) -> Vec<u32> {
    let needle = dir.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|p| {
            let pid: u32 = p.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(p.path().join("cmdline")).ok()?;
            String::from_utf8_lossy(&cmdline)
                .contains(&needle)
                .then_some(pid)
        })
        .collect()
}

impl Drop for CodexTui {
    fn drop(&mut self) {
        self.kill();
        for pid in processes_under(&self.world) {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
        }
    }
}

/// The turns of a Codex TUI where Codex fires no closing hook, in session `id`: a turn whose
/// model request fails with HTTP 500 on both attempts (no Stop: `failed`, with Codex's error
/// text), a turn whose first attempt fails and whose reconnect succeeds (`completed`, no error
/// left), and an escalation the person cancels with Esc (Interrupt, not Stop: `interrupted`,
/// no attention once the turn ended).
/// `via` is how the escalation's attention can be answered here (`server` in the default
/// mode; with `--no-daemon` `terminal only`, and `spex approve` is refused, sending nothing).
fn codex_tui_turns_without_closing_hooks(w: &World, tui: &CodexTui, id: &str, via: &str) {
    let diag = || format!("{}\n{}", tui.text(), w.ok(&w.repo, &["show", id, "--json"]));
    let prompted = |s: &Value, word: &str| {
        s["turn"]["prompt"]
            .as_str()
            .is_some_and(|p| p.contains(word))
    };

    tui.prompt("SCENARIO:fail");
    // Two failed attempts, then no hook: the reader says failed once no new attempt followed.
    let failed = show_until(w, id, HOOKED, |s| {
        prompted(s, "SCENARIO:fail") && s["turn"]["state"] == "failed"
    })
    .unwrap_or_else(|s| panic!("the failing turn never read failed: {s}\n{}", diag()));
    assert_eq!(failed["status"], "idle", "{failed}");
    assert_eq!(failed["attention"]["reason"], "turn_failed", "{failed}");
    let events = w.events(id);
    let reported = events.iter().rev().find(|e| e["kind"] == "model.failed");
    let reported = reported.unwrap_or_else(|| panic!("no model.failed\n{}", diag()));
    let text = failed["turn"]["note"].as_str().unwrap_or_default();
    assert!(
        !text.is_empty() && reported["error"] == text && failed["attention"]["text"] == text,
        "failed with Codex's error text `{text}`: {failed}\n{}",
        diag()
    );

    tui.prompt("SCENARIO:failonce");
    let recovered = show_until(w, id, HOOKED, |s| {
        prompted(s, "SCENARIO:failonce") && s["turn"]["state"] == "completed"
    })
    .unwrap_or_else(|s| panic!("the retried turn never completed: {s}\n{}", diag()));
    assert!(recovered["turn"]["note"].is_null(), "{recovered}");
    assert!(recovered["attention"].is_null(), "{recovered}");
    assert!(
        w.events(id)[events.len()..]
            .iter()
            .any(|e| e["kind"] == "model.failed"),
        "the first attempt failed\n{}",
        diag()
    );
    // Long after: still completed (a failed attempt followed by a new one ended nothing).
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(show(w, id)["turn"]["state"], "completed", "{}", diag());

    tui.prompt("SCENARIO:escalate");
    show_until(w, id, HOOKED, |s| {
        prompted(s, "SCENARIO:escalate") && s["status"] == "needs_attention"
    })
    .unwrap_or_else(|s| panic!("the escalation raised no attention: {s}\n{}", diag()));
    let end = Instant::now() + HOOKED;
    while !tui.text().contains("Yes") {
        assert!(Instant::now() < end, "no approval dialog:\n{}", diag());
        std::thread::sleep(Duration::from_millis(100));
    }
    let asked = show(w, id);
    assert_eq!(asked["attention"]["via"]["how"], via, "{asked}");
    if via == "terminal only" {
        let refused = w.spex(&w.repo, &["approve", id]);
        let text = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{text}");
        assert!(text.contains("no other client can join"), "{text}");
        assert!(
            tui.text().contains("Yes"),
            "the dialog went away\n{}",
            diag()
        );
    }
    tui.send(b"\x1b");
    let denied = show_until(w, id, HOOKED, |s| s["turn"]["state"] == "interrupted")
        .unwrap_or_else(|s| panic!("the cancelled escalation never ended: {s}\n{}", diag()));
    assert_eq!(denied["status"], "idle", "{denied}");
    assert!(denied["attention"].is_null(), "attention left: {denied}");
    assert!(
        !w.repo.join("escalated.txt").exists(),
        "the cancelled command ran"
    );
    assert_grammar(&denied, &w.events(id), &diag);
}

/// The real Codex TUI with `--no-daemon` (its app-server inside the TUI process), started as a
/// user starts it: a failing turn, a recovered one and a cancelled escalation read true
/// ([`codex_tui_turns_without_closing_hooks`]); a reader records the TUI's process as the
/// thread's holder; `kill -9` of the TUI fires no hook, and the next reader says `exited`
/// (server gone).
#[test]
fn codex_tui_no_daemon_failures_denial_and_kill_are_true() {
    let w = World::new();
    let fake = crate::support::fake_responses::FakeResponses::start();
    let mut tui = CodexTui::start(&w, &fake.base_url(), &["--no-daemon"]);
    let id = tui.turn(&w, "SCENARIO:shell");
    codex_tui_turns_without_closing_hooks(&w, &tui, &id, "terminal only");
    let before = show(&w, &id);
    assert!(
        before["process"]["pid"].is_u64(),
        "no process recorded: {before}\n{}",
        tui.text()
    );
    tui.kill();
    let after = show_until(&w, &id, NO_HOOK, |s| s["status"] == "exited")
        .unwrap_or_else(|s| panic!("not exited after kill -9: {s}\n{}", tui.text()));
    assert_eq!(after["exit_reason"], "server gone", "{after}");
    assert_grammar(&after, &w.events(&id), &|| tui.text());
}

/// The real Codex TUI in its default mode: the thread lives in the managed app-server daemon
/// (`$CODEX_HOME/app-server-daemon/daemon.pid`), which a reader records as its holder and
/// which outlives the TUI. A failing turn, a recovered one and a cancelled escalation read
/// true ([`codex_tui_turns_without_closing_hooks`]). The TUI killed: idle, no client. Its server killed too: `exited`
/// (server gone).
#[test]
fn codex_tui_default_mode_failures_denial_and_kills_are_true() {
    let w = World::new();
    let fake = crate::support::fake_responses::FakeResponses::start();
    let mut tui = CodexTui::start(&w, &fake.base_url(), &[]);
    let id = tui.turn(&w, "SCENARIO:shell");
    codex_tui_turns_without_closing_hooks(&w, &tui, &id, "server");
    let before = show(&w, &id);
    let daemon: Value = serde_json::from_str(&read_or_empty(
        &w.codex_home.join("app-server-daemon/daemon.pid"),
    ))
    .unwrap_or_else(|e| panic!("daemon.pid: {e}\n{}", tui.text()));
    assert_eq!(
        before["process"]["pid"], daemon["pid"],
        "the daemon holds the thread: {before}\n{daemon}"
    );
    assert_eq!(
        before["process"]["start"], daemon["processIdentity"]["startTicks"],
        "{before}\n{daemon}"
    );
    assert_eq!(before["attended"], true, "its TUI runs: {before}");
    // The TUI killed, its daemon alive: the thread stays loaded and no hook fires. The record
    // says so: idle, no client (not live and attended).
    tui.kill();
    let orphan = show_until(&w, &id, NO_HOOK, |s| s["attended"] == false)
        .unwrap_or_else(|s| panic!("still attended after the TUI died: {s}\n{}", tui.text()));
    assert_eq!(orphan["status"], "idle", "{orphan}");
    let human = w.ok(&w.repo, &["show", &id]);
    assert!(
        human.contains("idle since") && human.contains(", no client"),
        "{human}"
    );
    let list = w.ok(&w.repo, &["sessions"]);
    assert!(list.contains("no client: SCENARIO:escalate"), "{list}");
    for pid in processes_under(w.dir.path()) {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    let after = show_until(&w, &id, NO_HOOK, |s| s["status"] == "exited")
        .unwrap_or_else(|s| panic!("not exited after the server died: {s}\n{}", tui.text()));
    assert_eq!(after["exit_reason"], "server gone", "{after}");
    assert_grammar(&after, &w.events(&id), &|| tui.text());
}

/// The session of this world whose record waits on an attention that `pred` accepts: its id
/// and that attention.
fn waiting(w: &World, tui: &CodexTui, pred: impl Fn(&Value) -> bool) -> (String, Value) {
    let end = Instant::now() + HOOKED;
    loop {
        let found = w.session_ids().into_iter().find_map(|id| {
            let r = w.record_if_any(&id)?;
            (r["status"] == "needs_attention" && pred(&r["attention"]))
                .then(|| (id, r["attention"].clone()))
        });
        if let Some(found) = found {
            return found;
        }
        let records: Vec<String> = w
            .session_ids()
            .iter()
            .filter_map(|id| w.record_if_any(id).map(|r| r.to_string()))
            .collect();
        assert!(
            Instant::now() < end,
            "no session waits as wanted:\n{}\n{}",
            records.join("\n"),
            tui.text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `spex <args> --json` (exit 0): its JSON.
fn answered(w: &World, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let out = w.ok(&w.repo, &args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Whether the model was sent a tool output containing `needle`.
fn model_got(fake: &crate::support::fake_responses::FakeResponses, needle: &str) -> bool {
    fake.requests().iter().any(|r| {
        r["body"]["input"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|i| i["type"].as_str().is_some_and(|t| t.ends_with("_output")))
            .any(|i| i["output"].to_string().contains(needle))
    })
}

fn until(what: &str, tui: &CodexTui, within: Duration, cond: impl Fn() -> bool) {
    let end = Instant::now() + within;
    while !cond() {
        assert!(Instant::now() < end, "{what}:\n{}", tui.text());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The real Codex TUI in its default mode (its thread on the per-user background server):
/// `spex approve` answers its escalation through that server's control socket (the command
/// ran, the TUI's dialog went away), `spex deny` declines the next one (not run, the model
/// was told), and in Plan mode `spex answer` answers its `request_user_input` question with an
/// option and with free text (the model got each answer). Away mode on changes none of it.
#[test]
fn codex_tui_default_mode_is_answered_by_spex_through_its_background_server() {
    let w = World::new();
    let fake = crate::support::fake_responses::FakeResponses::start();
    let tui = CodexTui::start(&w, &fake.base_url(), &[]);
    let out = w.repo.join("escalated.txt");
    // Away mode holds no prompt of a thread the background server holds.
    w.ok(&w.repo, &["away", "on"]);

    tui.prompt("SCENARIO:escalate");
    let (id, a) = waiting(&w, &tui, |a| a["kind"] == "permission");
    assert_eq!(a["via"]["how"], "server", "{a}");
    until("no approval dialog", &tui, HOOKED, || {
        tui.text().contains("Yes, proceed")
    });
    assert!(!out.exists());
    let done = answered(&w, &["approve", &id]);
    assert_eq!(done["via"], "server", "{done}");
    assert!(
        done["confirmed"].as_str().unwrap().contains("ran"),
        "{done}"
    );
    assert_eq!(read_or_empty(&out), "escalated\n", "{}", tui.text());
    until("the TUI still shows the dialog", &tui, HOOKED, || {
        !tui.text().contains("Yes, proceed")
    });
    let rec = show_until(&w, &id, HOOKED, |s| s["status"] == "idle")
        .unwrap_or_else(|s| panic!("never idle: {s}\n{}", tui.text()));
    assert!(rec["attention"].is_null(), "{rec}");

    std::fs::remove_file(&out).unwrap();
    tui.prompt("SCENARIO:escalate");
    let (_, b) = waiting(&w, &tui, |b| {
        b["kind"] == "permission" && b["id"] != a["id"]
    });
    assert_eq!(b["via"]["how"], "server", "{b}");
    let done = answered(&w, &["deny", &id]);
    assert!(
        done["confirmed"].as_str().unwrap().contains("decline"),
        "{done}"
    );
    until(
        "the model was not told of the decline",
        &tui,
        HOOKED,
        || model_got(&fake, "rejected by user"),
    );
    assert!(!out.exists(), "the declined command ran");
    show_until(&w, &id, HOOKED, |s| s["status"] == "idle")
        .unwrap_or_else(|s| panic!("never idle: {s}\n{}", tui.text()));

    // Plan mode (Shift+Tab): request_user_input asks, answered with an option, then free text.
    // A TUI still drawing the end of the declined turn may drop the key (seen under load):
    // it is sent again once, if no mode changed after 10 s.
    let planned = || tui.text().to_lowercase().contains("plan");
    tui.send(b"\x1b[Z");
    let end = Instant::now() + Duration::from_secs(10);
    while !planned() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
    if !planned() {
        tui.send(b"\x1b[Z");
    }
    until("no Plan mode", &tui, HOOKED, planned);
    for (scenario, given, heard) in [
        ("ask", &["Blue"][..], &[r#"[\"Blue\"]"#][..]),
        (
            "ask",
            &["green, please"],
            &[r#"[\"None of the above\",\"user_note: green, please\"]"#],
        ),
        (
            "ask2",
            &["1", "huge, please"],
            &[
                r#"\"color\":{\"answers\":[\"Red\"]}"#,
                r#"\"size\":{\"answers\":[\"None of the above\",\"user_note: huge, please\"]}"#,
            ],
        ),
    ] {
        tui.prompt(&format!("SCENARIO:{scenario}"));
        let (_, q) = waiting(&w, &tui, |q| q["kind"] == "question");
        assert_eq!(q["via"]["how"], "server", "{q}");
        assert_eq!(q["questions"][0]["options"][1], "Blue", "{q}");
        let mut args = vec!["answer", id.as_str()];
        args.extend(given);
        let done = answered(&w, &args);
        assert_eq!(done["via"], "server", "{done}");
        until("the model did not get the answers", &tui, HOOKED, || {
            heard.iter().all(|h| model_got(&fake, h))
        });
        show_until(&w, &id, HOOKED, |s| s["status"] == "idle")
            .unwrap_or_else(|s| panic!("never idle: {s}\n{}", tui.text()));
    }
    let rec = w.record(&id);
    assert_grammar(&rec, &w.events(&id), &|| tui.text());
}

/// Away mode with the real Codex TUI started with `--no-daemon` (its server inside the TUI,
/// which no other client can join): `spex away on`, and its permission hook waits for `spex
/// approve` (the command ran, with no prompt drawn meanwhile) and `spex deny --message` (not
/// run, the model got the message); unanswered, the wait ends at `answering.hookWaitSecs` and
/// the TUI shows its own prompt. `spex away off`: the hook does not wait, the prompt shows at
/// once.
#[test]
fn codex_tui_no_daemon_in_away_mode_waits_for_spex_answer() {
    use crate::support::codex_home::{set_stream_retries, write_codex_config};
    const WAIT: u64 = 15;
    let w = World::new();
    let fake = crate::support::fake_responses::FakeResponses::start();
    CodexTui::prepare(&w, &fake.base_url());
    write(
        &w.repo.join("spex.jsonc"),
        format!(
            "{{ \"harnesses\": [\"codex\"], \"answering\": {{ \"hookWaitSecs\": {WAIT} }} }}\n"
        ),
    );
    w.ok(&w.repo, &["materialize"]);
    write_codex_config(
        &w.codex_home,
        &fake.base_url(),
        "on-request",
        "workspace-write",
    );
    set_stream_retries(&w.codex_home, 1);
    let status: Value = serde_json::from_str(&w.ok(&w.repo, &["away", "on", "--json"])).unwrap();
    assert_eq!(status["away"], true, "{status}");
    assert_eq!(status["wait_secs"], WAIT, "{status}");
    let tui = CodexTui::spawn(
        &w,
        &crate::support::peers::codex_bin(),
        &["--no-daemon"],
        &[],
    );
    let out = w.repo.join("escalated.txt");

    tui.prompt("SCENARIO:escalate");
    let (id, a) = waiting(&w, &tui, |a| a["via"]["how"] == "hook");
    assert_eq!(a["kind"], "permission", "{a}");
    assert!(!tui.text().contains("Yes, proceed"), "{}", tui.text());
    let done = answered(&w, &["approve", &id]);
    assert_eq!(done["via"], "hook", "{done}");
    assert!(
        done["confirmed"].as_str().unwrap().ends_with("ran"),
        "{done}"
    );
    until("the approved command never ran", &tui, HOOKED, || {
        read_or_empty(&out) == "escalated\n"
    });
    assert!(!tui.text().contains("Yes, proceed"), "{}", tui.text());
    show_until(&w, &id, HOOKED, |s| s["status"] == "idle")
        .unwrap_or_else(|s| panic!("never idle: {s}\n{}", tui.text()));

    std::fs::remove_file(&out).unwrap();
    tui.prompt("SCENARIO:escalate");
    let (_, b) = waiting(&w, &tui, |b| {
        b["via"]["how"] == "hook" && b["id"] != a["id"]
    });
    let done = answered(&w, &["deny", &id, "--message", "not from here, please"]);
    assert_eq!(done["via"], "hook", "{done}");
    assert_eq!(
        done["confirmed"], "Codex sent the model the denial and its message",
        "{done}"
    );
    until("the model was not told the message", &tui, HOOKED, || {
        model_got(&fake, "not from here, please")
    });
    assert!(!out.exists(), "the denied command ran");
    show_until(&w, &id, HOOKED, |s| s["status"] == "idle")
        .unwrap_or_else(|s| panic!("never idle: {s}\n{}", tui.text()));

    // Unanswered: the wait ends at its bound and the TUI's own prompt appears.
    tui.prompt("SCENARIO:escalate");
    let asked = Instant::now();
    let (_, unanswered) = waiting(&w, &tui, |c| {
        c["via"]["how"] == "hook" && c["id"] != b["id"]
    });
    until(
        "the prompt never came after the wait",
        &tui,
        Duration::from_secs(WAIT + 30),
        || tui.text().contains("Yes, proceed"),
    );
    assert!(
        asked.elapsed() >= Duration::from_secs(WAIT - 2),
        "the prompt came after {:?}, before the wait's end",
        asked.elapsed()
    );
    let released = show_until(&w, &id, HOOKED, |s| {
        s["attention"]["via"]["how"] == "terminal only"
    })
    .unwrap_or_else(|s| panic!("still via hook: {s}\n{}", tui.text()));
    assert_eq!(released["attention"]["id"], unanswered["id"], "{released}");
    tui.send(b"\x1b");
    show_until(&w, &id, HOOKED, |s| s["turn"]["state"] == "interrupted")
        .unwrap_or_else(|s| panic!("never interrupted: {s}\n{}", tui.text()));

    // Away mode off: the hook waits for nothing, the prompt shows at once.
    let status: Value = serde_json::from_str(&w.ok(&w.repo, &["away", "off", "--json"])).unwrap();
    assert_eq!(status["away"], false, "{status}");
    tui.prompt("SCENARIO:escalate");
    let (_, again) = waiting(&w, &tui, |d| {
        d["id"] != unanswered["id"] && d["kind"] == "permission"
    });
    assert_eq!(again["via"]["how"], "terminal only", "{again}");
    until(
        "no prompt with away mode off",
        &tui,
        Duration::from_secs(10),
        || tui.text().contains("Yes, proceed"),
    );
    tui.send(b"\x1b");
    assert!(!out.exists(), "a cancelled command ran");
    let rec = w.record(&id);
    assert_grammar(&rec, &w.events(&id), &|| tui.text());
}
