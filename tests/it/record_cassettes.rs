//! Records the committed harness cassettes (`tests/fixtures/cassettes/<harness>/<scenario>/`):
//! the REAL pinned Claude Code, Codex and Gemini CLI, each under spex's PTY host (`spex launch
//! --record --detach`) against its fake model server, one session per scenario: a turn with a
//! tool call, a permission dialog answered with `spex approve`, a question answered with `spex
//! answer`, a turn interrupted with `spex interrupt`, a turn whose model request fails.
//! `scripts/record-cassettes.sh` runs them (`--ignored`: they write into the source tree);
//! `cassettes.rs` replays what they wrote, with no harness installed.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::runtime::{FakeApi, claude_world, std_dirs};
use crate::support::claude_home::SeedOptions;
use crate::support::codex_home::write_codex_config;
use crate::support::fake_responses::FakeResponses;
use crate::support::peers::peers_path;
use crate::support::world::{World, feed, json_result, pretty, read_or_empty, write};

/// A turn of the fakes, from a cold harness on a loaded 2-core machine.
const TURN: Duration = Duration::from_mins(2);

/// Where a recording is committed.
fn dest(harness: &str, scenario: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/cassettes")
        .join(harness)
        .join(scenario)
}

/// One harness's project: its world, the harness id and what spex runs with to reach the fake.
struct Rig {
    w: World,
    harness: &'static str,
    env: Vec<(&'static str, OsString)>,
    /// What the fake was asked, for failure messages.
    requests: Box<dyn Fn() -> String>,
}

impl Rig {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = self.w.cmd(&self.w.repo, args);
        c.env("PATH", peers_path())
            .envs(self.env.iter().cloned())
            .env("XDG_RUNTIME_DIR", self.w.dir.path().join("run"));
        c
    }

    fn json(&self, args: &[&str]) -> Value {
        json_result(args, &feed(&mut self.cmd(args), b""))
            .unwrap_or_else(|e| panic!("{e}\n{}", self.diag()))
    }

    fn diag(&self) -> String {
        let mut out = format!(
            "--- server log:\n{}",
            read_or_empty(&self.w.project_dir().join("servers/codex.log"))
        );
        for id in self.w.session_ids() {
            let dir = self.w.session_dir(&id);
            out.push_str(&format!(
                "\n--- {id}:\n{}\n{}\n{}",
                read_or_empty(&dir.join("session.json")),
                read_or_empty(&dir.join("events.jsonl")),
                read_or_empty(&dir.join("host.log"))
            ));
        }
        out.push_str(&format!("\n--- fake:\n{}", (self.requests)()));
        out
    }

    /// `spex launch --harness H --record --detach --json [extra]`: the session's id.
    fn launch(&self, extra: &[&str]) -> String {
        let mut args = vec!["launch", "--harness", self.harness, "--record", "--detach"];
        args.push("--json");
        args.extend_from_slice(extra);
        self.json(&args)["session"]["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn deliver(&self, id: &str, prompt: &str) {
        let d = self.json(&["deliver", id, prompt, "--json"]);
        assert_eq!(d["confirmed"], true, "{}\n{}", pretty(&d), self.diag());
    }

    fn screen(&self, id: &str) -> String {
        let s = self.json(&["snapshot", id, "--json"]);
        crate::support::world::screen_text(&s["lines"])
    }

    /// Waits until the session's record satisfies `pred`; the record.
    fn until(&self, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + TURN;
        loop {
            let r = self.w.record(id);
            if pred(&r) {
                return r;
            }
            assert!(
                Instant::now() < deadline,
                "{what}\n{}\nscreen:\n{}\n{}",
                pretty(&r),
                self.screen(id),
                self.diag()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn turn_ended(&self, id: &str, state: &str) -> Value {
        self.until(id, &format!("the turn never ended {state}"), |r| {
            r["turn"]["state"] == state && r["status"] == "idle"
        })
    }

    fn waits(&self, id: &str) -> Value {
        self.until(id, "the session never asked", |r| {
            r["status"] == "needs_attention"
        })["attention"]
            .clone()
    }

    fn screen_shows(&self, id: &str, needle: &str) {
        let deadline = Instant::now() + TURN;
        while !self.screen(id).contains(needle) {
            assert!(
                Instant::now() < deadline,
                "the screen never showed `{needle}`:\n{}\n{}",
                self.screen(id),
                self.diag()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Lets the screen settle (the recorder notes an idle frame), stops the session, waits for
    /// the recording to end and copies it to `tests/fixtures/cassettes/<harness>/<scenario>`.
    fn keep(&self, id: &str, scenario: &str) {
        std::thread::sleep(Duration::from_secs(1));
        self.json(&["stop", id, "--json", "--grace", "5"]);
        let cassette = self.w.session_dir(id).join("cassette");
        let deadline = Instant::now() + TURN;
        while !cassette.join("final.json").is_file() {
            assert!(Instant::now() < deadline, "the recording never ended");
            std::thread::sleep(Duration::from_millis(100));
        }
        let check = feed(&mut self.cmd(&["cassette", "check", id]), b"");
        if !check.status.success() {
            // Kept for a look: the world's folder goes with the test.
            let kept = Path::new(env!("CARGO_TARGET_TMPDIR"))
                .join("failed-cassettes")
                .join(self.harness)
                .join(scenario);
            let _ = std::fs::remove_dir_all(&kept);
            std::fs::create_dir_all(&kept).unwrap();
            for entry in std::fs::read_dir(&cassette).unwrap() {
                let entry = entry.unwrap();
                std::fs::copy(entry.path(), kept.join(entry.file_name())).unwrap();
            }
            panic!("{check:?}\nthe recording: {}", kept.display());
        }
        let to = dest(self.harness, scenario);
        let spec = to.join("assertions.json");
        let kept = spec.is_file().then(|| std::fs::read(&spec).unwrap());
        if to.exists() {
            std::fs::remove_dir_all(&to).unwrap();
        }
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(&cassette).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
        // The spec beside the cassette stays; the script binds it to the new recording.
        if let Some(bytes) = kept {
            std::fs::write(&spec, bytes).unwrap();
        }
        eprintln!("recorded {}", to.display());
    }
}

fn claude_rig() -> Rig {
    let (w, fake) = claude_world(SeedOptions::default());
    write(&w.repo.join("hello.txt"), "hello from the repo\n");
    let env = fake.env();
    Rig {
        w,
        harness: "claude",
        env,
        requests: Box::new(move || fake.request_lines().join("\n")),
    }
}

fn gemini_rig() -> Rig {
    let (w, fake) = crate::gemini_runtime::gemini_world();
    let env = fake.env();
    Rig {
        w,
        harness: "gemini",
        env,
        requests: Box::new(move || fake.request_lines().join("\n")),
    }
}

/// Codex with approvals on request in a workspace-write sandbox (an escalated command asks), its
/// first-run notices seen.
fn codex_rig() -> Rig {
    let w = World::new();
    std_dirs(&w);
    let fake = FakeResponses::start_with_hang_limit(Duration::from_mins(1));
    write_codex_config(
        &w.codex_home,
        &fake.base_url(),
        "on-request",
        "workspace-write",
    );
    let cfg = w.codex_home.join("config.toml");
    let mut text = read_or_empty(&cfg);
    text.push_str("\n[notice.model_migrations]\n\"gpt-5.5\" = \"gpt-6-sol\"\n\n[tui.model_availability_nux]\n\"gpt-6.1-sol\" = 1\n\n[tui]\nscreen_reader_detection_done = true\n");
    write(&cfg, text);
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"codex\"] }\n",
    );
    crate::support::world::git(&w.repo, &["commit", "-q", "--allow-empty", "-m", "base"]);
    w.ok(&w.repo, &["materialize"]);
    Rig {
        w,
        harness: "codex",
        env: vec![
            ("FAKE_API_KEY", "dummy".into()),
            ("OPENAI_API_KEY", "sk-dummy".into()),
            ("RUST_LOG", "warn".into()),
            ("TERM", "xterm-256color".into()),
        ],
        requests: Box::new(move || fake.request_lines().join("\n")),
    }
}

/// The prompts of one harness's scenarios.
struct Script {
    /// A turn that runs a tool without asking.
    tool: &'static str,
    /// A turn whose tool asks for permission.
    permission: &'static str,
    /// A turn that asks the user a question, and the answer given.
    question: Option<(&'static str, &'static str)>,
    /// A turn long enough to interrupt, and the text on screen once it runs.
    slow: (&'static str, &'static str),
    /// A turn whose model request fails.
    fail: &'static str,
    /// Sets up (`true`) and takes back (`false`) what lets the tool turn's tool run unasked.
    unasked: fn(&Rig, bool),
}

fn nothing(_: &Rig, _: bool) {}

/// Gemini: `echo` allowed without asking (`tools.allowed`) for the tool turn only: with it set,
/// Gemini refuses every other command instead of asking.
fn gemini_echo_allowed(rig: &Rig, on: bool) {
    use crate::support::gemini_home::{edit_json, user_settings};
    edit_json(&user_settings(&rig.w.home), |v| {
        if on {
            v["tools"]["allowed"] = serde_json::json!(["run_shell_command(echo)"]);
        } else if let Some(tools) = v["tools"].as_object_mut() {
            tools.remove("allowed");
        }
    });
}

fn record_all(rig: &Rig, s: &Script) {
    // A turn with a tool call.
    (s.unasked)(rig, true);
    let id = rig.launch(&[]);
    rig.deliver(&id, s.tool);
    rig.turn_ended(&id, "completed");
    rig.keep(&id, "tool");
    (s.unasked)(rig, false);

    // A permission dialog, approved from outside; the turn completes.
    let id = rig.launch(&[]);
    rig.deliver(&id, s.permission);
    let a = rig.waits(&id);
    assert_eq!(a["kind"], "permission", "{}", pretty(&a));
    rig.json(&["approve", &id, "--json"]);
    rig.turn_ended(&id, "completed");
    rig.keep(&id, "permission");

    // A question, answered with an option.
    if let Some((prompt, answer)) = s.question {
        let id = rig.launch(&[]);
        rig.deliver(&id, prompt);
        let a = rig.waits(&id);
        assert_eq!(a["kind"], "question", "{}", pretty(&a));
        rig.json(&["answer", &id, answer, "--json"]);
        rig.turn_ended(&id, "completed");
        rig.keep(&id, "question");
    }

    // A turn interrupted while the model is still answering.
    let id = rig.launch(&[]);
    rig.deliver(&id, s.slow.0);
    rig.until(&id, "the turn never started", |r| r["status"] == "working");
    rig.screen_shows(&id, s.slow.1);
    // Well into the turn: an interrupt key right as the turn starts can be taken for typing.
    std::thread::sleep(Duration::from_secs(2));
    rig.json(&["interrupt", &id, "--json"]);
    rig.turn_ended(&id, "interrupted");
    rig.keep(&id, "interrupt");

    // A turn whose model request fails.
    let id = rig.launch(&[]);
    rig.deliver(&id, s.fail);
    rig.turn_ended(&id, "failed");
    rig.keep(&id, "failed");
}

#[test]
#[ignore = "writes tests/fixtures/cassettes/claude: run by scripts/record-cassettes.sh"]
fn record_claude() {
    record_all(
        &claude_rig(),
        &Script {
            tool: "USE_READ read hello.txt",
            permission: "USE_BASH run it",
            question: Some(("USE_ASK pick a color", "Blue")),
            slow: ("USE_NONE DELAY=30 slow", "DELAY=30 slow"),
            fail: "USE_NONE FAIL=400 broken",
            unasked: nothing,
        },
    );
}

#[test]
#[ignore = "writes tests/fixtures/cassettes/gemini: run by scripts/record-cassettes.sh"]
fn record_gemini() {
    record_all(
        &gemini_rig(),
        &Script {
            tool: "SCENARIO:shellcmd <<echo tool-ran>>",
            permission: "SCENARIO:shellcmd <<touch approved.txt>>",
            question: Some(("SCENARIO:ask pick one", "2")),
            slow: (
                "SCENARIO:hang HANG=60",
                crate::support::fake_gemini::HANG_TEXT,
            ),
            fail: "SCENARIO:fail now",
            unasked: gemini_echo_allowed,
        },
    );
}

#[test]
#[ignore = "writes tests/fixtures/cassettes/codex: run by scripts/record-cassettes.sh"]
fn record_codex() {
    let rig = codex_rig();
    codex_question(&rig);
    record_all(
        &rig,
        &Script {
            tool: "SCENARIO:shell run it",
            permission: "SCENARIO:escalate",
            // Codex asks its questions (`request_user_input`) in Plan mode only, which a
            // delivery cannot choose: `codex_question` types it in an attached terminal.
            question: None,
            slow: ("SCENARIO:hang HANG=60", "Working"),
            fail: "SCENARIO:fail",
            unasked: nothing,
        },
    );
}

/// Codex's question: Plan mode (`Shift+Tab`) and the prompt typed in a terminal attached to the
/// hosted session (as a person does), the question answered from outside with `spex answer`.
fn codex_question(rig: &Rig) {
    use crate::support::term::Term;
    let id = rig.launch(&[]);
    let t = Term::spawn(&rig.cmd(&["attach", &id]), 40, 120);
    t.wait_for("shortcuts", TURN)
        .unwrap_or_else(|e| panic!("{e}\n{}", rig.diag()));
    // A TUI still settling after its resume drops a key: Shift+Tab again until the mode shows.
    let mut planned = false;
    for _ in 0..10 {
        std::thread::sleep(Duration::from_secs(1));
        t.send(b"\x1b[Z");
        if t.wait_until(Duration::from_secs(3), |v| {
            v.text().to_lowercase().contains("plan")
        })
        .is_ok()
        {
            planned = true;
            break;
        }
    }
    assert!(planned, "no Plan mode\n{}", t.diag());
    t.send(b"\x1b[200~SCENARIO:ask pick a color\x1b[201~");
    std::thread::sleep(Duration::from_millis(500));
    t.send(b"\r");
    let a = rig.waits(&id);
    assert_eq!(a["kind"], "question", "{}", pretty(&a));
    t.send(b"\x1c");
    rig.json(&["answer", &id, "Blue", "--json"]);
    rig.turn_ended(&id, "completed");
    rig.keep(&id, "question");
}
