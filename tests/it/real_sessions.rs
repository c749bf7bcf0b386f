//! Session records written by spex's REAL hook shims while the REAL pinned harnesses run turns
//! against the fake model APIs: `spex materialize` installs `<spex> dispatch <harness> <Event>`
//! into `.claude/settings.json` and `.codex/hooks.json`, the harness calls it, and the tests read
//! back `session.json` and `events.jsonl` from `$SPEX_HOME`. Needs `scripts/install-peers.sh`;
//! fails, never skips.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::claude_home::claude_command;
use crate::support::codex_home::{codex_command, set_stream_retries, write_codex_config};
use crate::support::fake_anthropic::{FakeAnthropic, WRITE_CONTENT};
use crate::support::fake_responses::FakeResponses;
use crate::support::http::random_hex;
use crate::support::peers::GroupChild;
use crate::support::rpc::AppServer;
use crate::support::world::{World, pretty, read_or_empty, write};

/// One Claude turn (startup, model round trips, hooks) or one Codex turn.
const TURN_TIMEOUT: Duration = Duration::from_secs(45);
/// How long a record may lag behind the harness's own report (a hook still running).
const SETTLE: Duration = Duration::from_secs(10);

/// A fresh random version-4 UUID (for `claude --session-id`).
pub(crate) fn fresh_uuid() -> String {
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

/// `spex.jsonc` selecting both harnesses, then the real `spex materialize` in the repo.
pub(crate) fn materialize(w: &World) {
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\", \"codex\"] }\n",
    );
    w.ok(&w.repo, &["materialize"]);
    let settings = read_or_empty(&w.repo.join(".claude/settings.json"));
    assert!(
        settings.contains(" dispatch claude Stop"),
        "materialize installed no Claude shims:\n{settings}"
    );
    let hooks = read_or_empty(&w.repo.join(".codex/hooks.json"));
    assert!(
        hooks.contains(" dispatch codex Stop"),
        "materialize installed no Codex shims:\n{hooks}"
    );
}

/// Record, events and the dispatch logs of `id` in the world's store, for failure messages.
pub(crate) fn dump(w: &World, id: &str) -> String {
    let events: Vec<String> = w.events(id).iter().map(Value::to_string).collect();
    let log = read_or_empty(&w.project_dir().join("dispatch.log"));
    let tail: Vec<&str> = log.lines().rev().take(30).collect();
    format!(
        "--- session {id}:\n{}\n--- events:\n{}\n--- all sessions: {:?}\n--- dispatch.log (last 30, newest first):\n{}\n--- dispatch-errors.log:\n{}",
        w.record_if_any(id)
            .map_or_else(|| "(no record)".to_owned(), |r| pretty(&r)),
        events.join("\n"),
        w.session_ids(),
        tail.join("\n"),
        w.errors_log(),
    )
}

/// Polls until `pred(record, events)` holds for `id`; the record and events at that point.
pub(crate) fn wait_until(
    w: &World,
    id: &str,
    timeout: Duration,
    pred: impl Fn(&Value, &[Value]) -> bool,
) -> Result<(Value, Vec<Value>), String> {
    let end = Instant::now() + timeout;
    loop {
        if let Some(rec) = w.record_if_any(id) {
            let events = w.events(id);
            if pred(&rec, &events) {
                return Ok((rec, events));
            }
        }
        if Instant::now() >= end {
            return Err(dump(w, id));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or("?"))
        .collect()
}

fn turn_state(rec: &Value) -> &str {
    rec["turn"]["state"].as_str().unwrap_or("(no turn)")
}

fn touched(rec: &Value) -> Vec<&str> {
    rec["touched"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// `seq` runs 1..=n without gaps or repeats, and the record's `seq` is the last one.
fn assert_contiguous(rec: &Value, events: &[Value], diag: &dyn Fn() -> String) {
    let seqs: Vec<u64> = events
        .iter()
        .map(|e| e["seq"].as_u64().unwrap_or(0))
        .collect();
    let want: Vec<u64> = (1..=events.len() as u64).collect();
    assert_eq!(seqs, want, "events.jsonl seq is not contiguous\n{}", diag());
    assert_eq!(
        rec["seq"].as_u64(),
        Some(events.len() as u64),
        "record seq disagrees with events.jsonl\n{}",
        diag()
    );
}

// ------------------------------------------------------------------------------------------
// Claude Code: one `claude -p` process per session, kept open on stream-json input so the
// record can be read between the end of the turn (Stop / StopFailure) and the end of the
// session (SessionEnd, when its stdin closes).
// ------------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
pub(crate) enum Perm {
    /// `--permission-mode acceptEdits`: file tools run, Bash would be denied.
    AcceptEdits,
    /// `IS_SANDBOX=1 --dangerously-skip-permissions` (root may bypass only in a "sandbox").
    Bypass,
}

/// One Claude session: its stream-json stdout lines arrive on a channel.
pub(crate) struct ClaudeSession {
    pub(crate) id: String,
    child: GroupChild,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stdout: Vec<String>,
    stderr_path: PathBuf,
}

impl ClaudeSession {
    pub(crate) fn start(w: &World, fake: &FakeAnthropic, perm: Perm) -> ClaudeSession {
        let id = fresh_uuid();
        let stderr_path = w.dir.path().join(format!("claude-{id}.err"));
        let mut cmd = claude_command(&w.home, &fake.base_url());
        cmd.current_dir(&w.repo)
            .env("SPEX_HOME", &w.spex_home)
            .env("XDG_CONFIG_HOME", &w.xdg_config)
            .env("CODEX_HOME", &w.codex_home)
            .args(["-p", "--session-id", &id, "--verbose"])
            .args([
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(File::create(&stderr_path).unwrap());
        match perm {
            Perm::AcceptEdits => {
                cmd.args(["--permission-mode", "acceptEdits"]);
            }
            Perm::Bypass => {
                cmd.env("IS_SANDBOX", "1")
                    .arg("--dangerously-skip-permissions");
            }
        }
        let mut child = GroupChild::spawn(&mut cmd);
        let stdin = child.child_mut().stdin.take();
        let stdout = child.child_mut().stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        ClaudeSession {
            id,
            child,
            stdin,
            lines,
            stdout: Vec::new(),
            stderr_path,
        }
    }

    pub(crate) fn diag(&self, w: &World) -> String {
        format!(
            "claude session {}\n--- claude stdout:\n{}\n--- claude stderr:\n{}\n{}",
            self.id,
            self.stdout.join("\n"),
            read_or_empty(&self.stderr_path),
            dump(w, &self.id)
        )
    }

    /// Sends one user prompt and waits for the turn's `result` line.
    pub(crate) fn turn(&mut self, w: &World, prompt: &str) -> Value {
        let msg = json!({"type": "user", "message": {"role": "user",
            "content": [{"type": "text", "text": prompt}]}});
        let stdin = self.stdin.as_mut().expect("stdin still open");
        writeln!(stdin, "{msg}")
            .and_then(|()| stdin.flush())
            .unwrap_or_else(|e| panic!("write prompt: {e}\n{}", self.diag(w)));
        let end = Instant::now() + TURN_TIMEOUT;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let v: Option<Value> = serde_json::from_str(&line).ok();
                    self.stdout.push(line);
                    if let Some(v) = v.filter(|v| v["type"] == "result") {
                        return v;
                    }
                }
                Err(e) => panic!(
                    "no `result` from claude within {TURN_TIMEOUT:?} ({e})\n{}",
                    self.diag(w)
                ),
            }
        }
    }

    /// Closes stdin (ends the session: `SessionEnd`) and waits for the process to exit; print
    /// mode exits 1 when its last turn failed.
    pub(crate) fn end(&mut self, w: &World, turn_ok: bool) {
        drop(self.stdin.take());
        let status = self.child.exit_within(TURN_TIMEOUT);
        let status = status
            .unwrap_or_else(|| panic!("claude did not exit after stdin closed\n{}", self.diag(w)));
        // Drain what it printed last, for diagnostics.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) {
            self.stdout.push(line);
        }
        assert_eq!(
            status.success(),
            turn_ok,
            "claude exited with {status}\n{}",
            self.diag(w)
        );
    }
}

/// What a check sees right after a turn, before the session ends.
struct Seen<'a> {
    rec: &'a Value,
    events: &'a [Value],
    repo: &'a Path,
    diag: &'a dyn Fn() -> String,
}

/// Case-specific assertions on a settled turn.
type Check = fn(&Seen);

/// One Claude session with one prompt, and what it must leave behind.
struct ClaudeCase {
    name: &'static str,
    prompt: &'static str,
    perm: Perm,
    /// The turn's terminal state: `completed` or `failed`.
    turn: &'static str,
    /// `(tool, repo-relative file)`: an ok `tool.completed` of that tool names exactly the
    /// file, and the file is in `touched`.
    edit: Option<(&'static str, &'static str)>,
    check: Check,
}

/// In order: the Edit case edits the file the Write case created.
const CLAUDE_CASES: &[ClaudeCase] = &[
    ClaudeCase {
        name: "write",
        prompt: "Please create the file.",
        perm: Perm::AcceptEdits,
        turn: "completed",
        edit: Some(("Write", "hello.txt")),
        check: check_write,
    },
    ClaudeCase {
        name: "edit",
        prompt: "Please edit the file. USE_EDIT",
        perm: Perm::AcceptEdits,
        turn: "completed",
        edit: Some(("Edit", "hello.txt")),
        check: check_edit,
    },
    ClaudeCase {
        name: "notebook",
        prompt: "Please edit the notebook. USE_NOTEBOOK",
        perm: Perm::AcceptEdits,
        turn: "completed",
        edit: Some(("NotebookEdit", "nb.ipynb")),
        check: check_notebook,
    },
    ClaudeCase {
        name: "bash",
        prompt: "Please run a command. USE_BASH",
        perm: Perm::Bypass,
        turn: "completed",
        edit: None,
        check: check_bash_ok,
    },
    ClaudeCase {
        name: "bash-fail",
        prompt: "Please run a failing command. USE_BASHFAIL",
        perm: Perm::Bypass,
        turn: "completed",
        edit: None,
        check: check_bash_failed,
    },
    ClaudeCase {
        name: "agent",
        prompt: "Please delegate. USE_AGENT",
        perm: Perm::Bypass,
        turn: "completed",
        edit: None,
        check: check_agent,
    },
    ClaudeCase {
        name: "fail-400",
        prompt: "Please create the file. FAIL=400",
        perm: Perm::AcceptEdits,
        turn: "failed",
        edit: None,
        check: check_failed_turn,
    },
];

fn event_of<'e>(events: &'e [Value], kind: &str, tool: &str) -> Vec<&'e Value> {
    events
        .iter()
        .filter(|e| e["kind"] == kind && e["tool"] == tool)
        .collect()
}

fn check_write(s: &Seen) {
    assert_eq!(
        read_or_empty(&s.repo.join("hello.txt")),
        WRITE_CONTENT,
        "{}",
        (s.diag)()
    );
}

fn check_edit(s: &Seen) {
    assert_eq!(
        read_or_empty(&s.repo.join("hello.txt")),
        WRITE_CONTENT.replace("hello", "goodbye"),
        "{}",
        (s.diag)()
    );
    // The fake reads before it edits: the Read is activity, not an edit.
    let reads = event_of(s.events, "tool.completed", "Read");
    assert!(
        reads.len() == 1 && reads[0].get("files").is_none(),
        "one Read that touches nothing\n{}",
        (s.diag)()
    );
}

fn check_notebook(s: &Seen) {
    assert!(
        read_or_empty(&s.repo.join("nb.ipynb")).contains("print(2)"),
        "the notebook cell was not edited\n{}",
        (s.diag)()
    );
}

fn check_bash_ok(s: &Seen) {
    let done = event_of(s.events, "tool.completed", "Bash");
    assert!(
        done.len() == 1 && done[0]["ok"] == true,
        "one ok tool.completed Bash\n{}",
        (s.diag)()
    );
    assert_eq!(
        read_or_empty(&s.repo.join("bash_out.txt")),
        "hi-from-bash\n",
        "{}",
        (s.diag)()
    );
    assert!(
        touched(s.rec).is_empty(),
        "Bash touches nothing\n{}",
        (s.diag)()
    );
}

fn check_bash_failed(s: &Seen) {
    let done = event_of(s.events, "tool.completed", "Bash");
    assert!(
        done.len() == 1 && done[0]["ok"] == false,
        "one failed tool.completed Bash\n{}",
        (s.diag)()
    );
    let error = done[0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("Exit code 3"),
        "error `{error}`\n{}",
        (s.diag)()
    );
    assert!(
        s.rec["attention"].is_null(),
        "a failed tool is not a failed turn\n{}",
        (s.diag)()
    );
}

/// The Agent call is the parent's; whatever the subagent did is marked `subagent`, sits inside
/// the Agent call and is tool activity only: no turn event and no attention come from it.
fn check_agent(s: &Seen) {
    let position = |kind: &str| {
        s.events
            .iter()
            .position(|e| e["kind"] == kind && e["tool"] == "Agent")
            .unwrap_or_else(|| panic!("no {kind} Agent\n{}", (s.diag)()))
    };
    let (spawn, joined) = (position("tool.started"), position("tool.completed"));
    for i in [spawn, joined] {
        assert!(
            s.events[i].get("subagent").is_none(),
            "the Agent call itself is the parent's\n{}",
            (s.diag)()
        );
    }
    let mut from_subagent = 0;
    for (i, e) in s.events.iter().enumerate() {
        if e.get("subagent").is_some() {
            from_subagent += 1;
            let tool_event = e["kind"].as_str().is_some_and(|k| k.starts_with("tool."));
            assert!(
                e["subagent"] == true && i > spawn && i < joined && tool_event,
                "subagent event outside the Agent call: {e}\n{}",
                (s.diag)()
            );
        }
    }
    let turn_events: Vec<&str> = kinds(s.events)
        .into_iter()
        .filter(|k| k.starts_with("turn.") || *k == "attention.opened")
        .collect();
    assert_eq!(
        turn_events,
        ["turn.started", "turn.completed"],
        "the subagent moved the parent's turn\n{}",
        (s.diag)()
    );
    assert!(s.rec["attention"].is_null(), "{}", (s.diag)());
    // The subagent really ran a tool: its Pre/PostToolUse reached spex marked as the subagent's.
    assert!(
        from_subagent >= 2
            && s.events
                .iter()
                .any(|e| e["subagent"] == true && e["tool"] == "Bash"),
        "expected the subagent's Bash call as subagent tool events\n{}",
        (s.diag)()
    );
}

fn check_failed_turn(s: &Seen) {
    assert_eq!(
        s.rec["attention"]["reason"],
        "turn_failed",
        "attention\n{}",
        (s.diag)()
    );
    let text = s.rec["attention"]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("400"),
        "attention text `{text}`\n{}",
        (s.diag)()
    );
    assert!(s.rec["turn"]["ended_at"].is_string(), "{}", (s.diag)());
    let failed: Vec<&Value> = s
        .events
        .iter()
        .filter(|e| e["kind"] == "turn.failed")
        .collect();
    assert!(
        failed.len() == 1 && failed[0]["source"] == "StopFailure",
        "one turn.failed, from StopFailure\n{}",
        (s.diag)()
    );
}

/// The record right after the turn: identity, a terminal turn, `idle`, the case's edits, one
/// `turn.started` and the terminal turn event last, contiguous events.
fn assert_settled_turn(w: &World, id: &str, case: &ClaudeCase, seen: &Seen) {
    let (rec, events, diag) = (seen.rec, seen.events, seen.diag);
    assert_eq!(rec["id"], id, "{}", diag());
    assert_eq!(rec["harness"], "claude", "{}", diag());
    assert_eq!(rec["harness_session_id"], id, "{}", diag());
    assert_eq!(rec["launched_by"], "self", "{}", diag());
    assert_eq!(
        w.alias("claude", id).as_deref(),
        Some(id),
        "alias claude-<id>\n{}",
        diag()
    );
    assert_eq!(turn_state(rec), case.turn, "turn state\n{}", diag());
    assert_eq!(rec["status"], "idle", "status after the turn\n{}", diag());
    assert_eq!(rec["turn"]["prompt"], case.prompt, "{}", diag());
    if let Some((tool, file)) = case.edit {
        assert!(
            touched(rec).contains(&file),
            "`{file}` missing from touched {:?}\n{}",
            touched(rec),
            diag()
        );
        assert!(
            event_of(events, "tool.completed", tool)
                .iter()
                .any(|e| e["ok"] == true && e["files"] == json!([file])),
            "no ok tool.completed {tool} naming {file}\n{}",
            diag()
        );
    }
    let k = kinds(events);
    assert_eq!(k.first(), Some(&"session.started"), "{}", diag());
    assert_eq!(
        k.iter().filter(|k| **k == "turn.started").count(),
        1,
        "one prompt, one turn.started\n{}",
        diag()
    );
    let terminal = format!("turn.{}", case.turn);
    // A failed turn then opens its attention: the turn's ending is the last turn event.
    let last_turn = k.iter().rev().find(|k| !k.starts_with("attention."));
    assert_eq!(
        last_turn,
        Some(&terminal.as_str()),
        "last event\n{}",
        diag()
    );
    if case.turn != "completed" {
        assert_eq!(k.last(), Some(&"attention.opened"), "{}", diag());
    }
    let other = if case.turn == "completed" {
        "turn.failed"
    } else {
        "turn.completed"
    };
    assert!(
        !k.contains(&other),
        "a turn is completed or failed, never both\n{}",
        diag()
    );
    assert_contiguous(rec, events, diag);
}

/// Runs one Claude session through `case`: the record after the turn, then after the
/// session ended.
fn run_claude_case(w: &World, fake: &FakeAnthropic, case: &ClaudeCase) {
    let started = Instant::now();
    let mut session = ClaudeSession::start(w, fake, case.perm);
    let result = session.turn(w, case.prompt);
    {
        let diag = || format!("case `{}`: result {result}\n{}", case.name, session.diag(w));
        // The turn is terminal and the session no longer busy: Stop (or StopFailure) ran.
        let settled = wait_until(w, &session.id, SETTLE, |rec, _| {
            turn_state(rec) != "running"
                && rec["status"] != "working"
                && rec["status"] != "starting"
        });
        let (rec, events) = settled.unwrap_or_else(|_| panic!("turn never settled\n{}", diag()));
        let seen = Seen {
            rec: &rec,
            events: &events,
            repo: &w.repo,
            diag: &diag,
        };
        assert_settled_turn(w, &session.id, case, &seen);
        (case.check)(&seen);
    }

    session.end(w, case.turn == "completed");
    let diag = || format!("case `{}`: result {result}\n{}", case.name, session.diag(w));
    let ended = wait_until(w, &session.id, SETTLE, |rec, _| rec["status"] == "exited");
    let (fin, events) = ended.unwrap_or_else(|_| panic!("never exited\n{}", diag()));
    assert_eq!(
        kinds(&events).last(),
        Some(&"session.exited"),
        "SessionEnd is the last event\n{}",
        diag()
    );
    assert_eq!(
        turn_state(&fin),
        case.turn,
        "SessionEnd must not rewrite a finished turn\n{}",
        diag()
    );
    if case.turn == "failed" {
        assert_eq!(
            fin["attention"]["reason"],
            "turn_failed",
            "the failure stays visible after the session ends\n{}",
            diag()
        );
    }
    assert_contiguous(&fin, &events, &diag);
    crate::support::world::assert_grammar(&fin, &events, &diag);
    eprintln!("claude {}: {:?}", case.name, started.elapsed());
}

#[test]
fn claude_turns_produce_true_records() {
    let started = Instant::now();
    let w = World::new();
    materialize(&w);
    let fake = FakeAnthropic::start();
    let nb = json!({"cells": [{"cell_type": "code", "execution_count": null, "id": "c0",
        "metadata": {}, "outputs": [], "source": ["print(1)"]}],
        "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5});
    write(&w.repo.join("nb.ipynb"), pretty(&nb));
    for case in CLAUDE_CASES {
        run_claude_case(&w, &fake, case);
    }
    w.assert_grammar(&String::new);
    let ids = w.session_ids();
    assert_eq!(
        ids.len(),
        CLAUDE_CASES.len(),
        "one record per session, keyed by --session-id: {ids:?}"
    );
    eprintln!("claude_turns_produce_true_records: {:?}", started.elapsed());
}

// ------------------------------------------------------------------------------------------
// Codex: one app-server spawned by the test (as spex's runtime would: with SPEX_HOME), driven
// over JSON-RPC on its Unix socket.
// ------------------------------------------------------------------------------------------

/// `codex app-server` for the world: `HOME`, `CODEX_HOME`, `SPEX_HOME` (hooks inherit it), and a
/// stray `SPEX_SESSION_ID` that spex must ignore for Codex (the server is shared).
fn codex_server(w: &World) -> AppServer {
    let mut cmd = codex_command(&w.codex_home, &w.home);
    cmd.current_dir(&w.repo)
        .env("SPEX_HOME", &w.spex_home)
        .env("SPEX_TRACE_DISPATCH", "1")
        .env("XDG_CONFIG_HOME", &w.xdg_config)
        .env("SPEX_SESSION_ID", "not-this");
    AppServer::start(&mut cmd, w.dir.path(), "cx", "spex-real-sessions")
}

/// A world with a fake Responses API, materialized shims and one app-server.
pub(crate) struct CodexRig {
    pub(crate) w: World,
    pub(crate) fake: FakeResponses,
    pub(crate) cx: AppServer,
}

impl CodexRig {
    pub(crate) fn start() -> CodexRig {
        CodexRig::start_with_retries(0)
    }

    /// A rig whose provider lets Codex reconnect `retries` times after a failed request.
    pub(crate) fn start_with_retries(retries: i64) -> CodexRig {
        let w = World::new();
        // The hang scenario ends on its own well after the test's interrupt.
        let fake = FakeResponses::start_with_hang_limit(Duration::from_secs(40));
        write_codex_config(
            &w.codex_home,
            &fake.base_url(),
            "never",
            "danger-full-access",
        );
        set_stream_retries(&w.codex_home, retries);
        materialize(&w);
        let cx = codex_server(&w);
        CodexRig { w, fake, cx }
    }

    /// The record of `id`, the fake's requests and the app-server log.
    pub(crate) fn diag(&self, id: &str) -> String {
        format!(
            "{}\n--- fake requests:\n{}\n{}",
            dump(&self.w, id),
            self.fake.request_lines().join("\n"),
            self.cx.log()
        )
    }

    /// Runs a turn to its end; asserts Codex reports `status`. Returns the turn id.
    pub(crate) fn turn(&mut self, thread: &str, text: &str, status: &str) -> String {
        let turn = self.cx.start_turn(thread, text);
        let done = self.cx.completed_within(&turn, TURN_TIMEOUT);
        let done = done.unwrap_or_else(|| panic!("no turn/completed\n{}", self.diag(thread)));
        assert_eq!(
            done["turn"]["status"],
            status,
            "{done}\n{}",
            self.diag(thread)
        );
        turn
    }

    /// The spex id `aliases/codex-<thread>` names; it must be the thread id itself.
    pub(crate) fn record_id(&self, thread: &str) -> String {
        let id = self.w.alias("codex", thread);
        let id = id.unwrap_or_else(|| panic!("no alias codex-{thread}\n{}", self.diag(thread)));
        assert_eq!(
            id,
            thread,
            "a Codex record is keyed by its thread id\n{}",
            self.diag(&id)
        );
        id
    }

    fn settled(
        &self,
        id: &str,
        what: &str,
        pred: impl Fn(&Value, &[Value]) -> bool,
    ) -> (Value, Vec<Value>) {
        wait_until(&self.w, id, SETTLE, pred)
            .unwrap_or_else(|_| panic!("{what}\n{}", self.diag(id)))
    }
}

/// An edit turn (one `apply_patch` naming two files, then one naming an update and an add)
/// and a shell turn on a `never` / `danger-full-access` thread. Returns the record id.
fn codex_edits_and_shell(rig: &mut CodexRig) -> String {
    let thread = rig.cx.start_thread(&json!({"cwd": rig.w.repo}));
    rig.turn(&thread, "SCENARIO:multipatch", "completed");
    let shell = rig.turn(&thread, "SCENARIO:shell", "completed");
    assert_eq!(
        read_or_empty(&rig.w.repo.join("shell_out.txt")),
        "shell-ran\n"
    );

    let id = rig.record_id(&thread);
    assert!(
        !rig.w.session_ids().iter().any(|s| s == "not-this"),
        "the app-server's SPEX_SESSION_ID must be ignored for Codex\n{}",
        rig.diag(&id)
    );
    let (rec, events) = rig.settled(&id, "the shell turn never completed", |rec, _| {
        rec["turn"]["id"] == shell.as_str() && turn_state(rec) == "completed"
    });
    let diag = || rig.diag(&id);
    assert_eq!(rec["harness"], "codex", "{}", diag());
    assert_eq!(rec["harness_session_id"], thread.as_str(), "{}", diag());
    assert_eq!(rec["status"], "idle", "{}", diag());
    assert!(rec["attention"].is_null(), "{}", diag());
    assert_eq!(rec["launched_by"], "self", "{}", diag());
    for file in ["a.txt", "sub/b.txt", "c.txt"] {
        assert!(
            touched(&rec).contains(&file),
            "`{file}` missing from touched {:?}\n{}",
            touched(&rec),
            diag()
        );
    }
    let patches = event_of(&events, "tool.completed", "apply_patch");
    assert!(
        patches
            .iter()
            .any(|e| e["ok"] == true && e["files"] == json!(["a.txt", "sub/b.txt"])),
        "the first apply_patch names both files\n{}",
        diag()
    );
    let shells = event_of(&events, "tool.completed", "Bash");
    assert!(
        shells.len() == 1 && shells[0]["ok"] == true && shells[0].get("files").is_none(),
        "one ok shell call, touching nothing\n{}",
        diag()
    );
    let all = kinds(&events);
    assert_eq!(all.first(), Some(&"session.started"), "{}", diag());
    let turn_events: Vec<&str> = all
        .iter()
        .copied()
        .filter(|k| k.starts_with("turn."))
        .collect();
    assert_eq!(
        turn_events,
        [
            "turn.started",
            "turn.completed",
            "turn.started",
            "turn.completed"
        ],
        "{}",
        diag()
    );
    assert_eq!(all.last(), Some(&"turn.completed"), "{}", diag());
    assert_contiguous(&rec, &events, &diag);
    id
}

/// An escalated command on a thread with approval `on-request` and `workspace-write`: while
/// the approval request is unanswered the session needs attention, naming the command.
/// Returns the record id.
fn codex_escalation(rig: &mut CodexRig) -> String {
    let thread = rig.cx.start_thread(&json!({"cwd": rig.w.repo,
        "approvalPolicy": "on-request", "sandbox": "workspace-write"}));
    let turn = rig.cx.start_turn(&thread, "SCENARIO:escalate");
    let req = rig.cx.rpc.take(
        "item/commandExecution/requestApproval",
        |p| p["threadId"] == thread.as_str(),
        Instant::now() + TURN_TIMEOUT,
    );
    let req = req.unwrap_or_else(|| panic!("no approval request\n{}", rig.diag(&thread)));
    let id = rig.record_id(&thread);
    let (rec, events) = rig.settled(
        &id,
        "not needs_attention while the approval is pending",
        |rec, _| rec["status"] == "needs_attention",
    );
    let diag = || format!("approval request: {req}\n{}", rig.diag(&id));
    assert_eq!(rec["attention"]["reason"], "permission", "{}", diag());
    let text = rec["attention"]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("echo escalated > escalated.txt"),
        "attention text `{text}`\n{}",
        diag()
    );
    assert_eq!(turn_state(&rec), "running", "{}", diag());
    assert_eq!(
        kinds(&events).last(),
        Some(&"attention.opened"),
        "{}",
        diag()
    );

    rig.cx
        .rpc
        .respond(&req["id"], &json!({"decision": "accept"}));
    let done = rig.cx.completed_within(&turn, TURN_TIMEOUT);
    let done = done.unwrap_or_else(|| panic!("no turn/completed\n{}", rig.diag(&id)));
    assert_eq!(
        done["turn"]["status"],
        "completed",
        "{done}\n{}",
        rig.diag(&id)
    );
    assert_eq!(
        read_or_empty(&rig.w.repo.join("escalated.txt")),
        "escalated\n"
    );
    let (rec, events) = rig.settled(&id, "the escalated turn never completed", |rec, _| {
        turn_state(rec) == "completed"
    });
    let diag = || rig.diag(&id);
    assert_eq!(rec["status"], "idle", "{}", diag());
    assert!(
        rec["attention"].is_null(),
        "answered: no attention left\n{}",
        diag()
    );
    assert_contiguous(&rec, &events, &diag);
    id
}

/// A hanging turn on `thread`, interrupted once it is really in progress.
fn codex_interrupt(rig: &mut CodexRig, thread: &str) {
    let turn = rig.cx.start_turn(thread, "SCENARIO:hang HANG=40");
    let started = rig.cx.rpc.take(
        "turn/started",
        |p| p["turn"]["id"] == turn.as_str(),
        Instant::now() + TURN_TIMEOUT,
    );
    started.unwrap_or_else(|| panic!("no turn/started\n{}", rig.diag(thread)));
    // The model request is out, so the prompt hook has run: the turn is in progress.
    let hang = rig
        .fake
        .request_within(|r| r["scenario"] == "hang", TURN_TIMEOUT);
    hang.unwrap_or_else(|| panic!("the hang request never came\n{}", rig.diag(thread)));
    let (rec, _) = rig.settled(thread, "the hanging turn is not running", |rec, _| {
        rec["turn"]["id"] == turn.as_str() && turn_state(rec) == "running"
    });
    assert_eq!(rec["status"], "working", "{}", rig.diag(thread));

    rig.cx.call(
        "turn/interrupt",
        &json!({"threadId": thread, "turnId": turn}),
    );
    let done = rig.cx.completed_within(&turn, TURN_TIMEOUT);
    let done = done.unwrap_or_else(|| panic!("no turn/completed\n{}", rig.diag(thread)));
    assert_eq!(
        done["turn"]["status"],
        "interrupted",
        "{done}\n{}",
        rig.diag(thread)
    );
    let (rec, events) = rig.settled(thread, "the turn never became interrupted", |rec, _| {
        turn_state(rec) == "interrupted"
    });
    let diag = || rig.diag(thread);
    assert_eq!(rec["turn"]["id"], turn.as_str(), "{}", diag());
    assert_eq!(rec["status"], "idle", "{}", diag());
    let interrupted: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "turn.interrupted")
        .collect();
    assert!(
        interrupted.len() == 1 && interrupted[0]["turn_id"] == turn.as_str(),
        "one turn.interrupted for {turn}\n{}",
        diag()
    );
    assert!(
        !kinds(&events).contains(&"turn.failed"),
        "an interrupt is not a failure\n{}",
        diag()
    );
    assert_contiguous(&rec, &events, &diag);
}

#[test]
fn codex_turns_produce_true_records_keyed_by_thread_id() {
    let started = Instant::now();
    let mut rig = CodexRig::start();
    let first = codex_edits_and_shell(&mut rig);
    let second = codex_escalation(&mut rig);
    codex_interrupt(&mut rig, &first);

    // Server shutdown ends every loaded thread (SessionEnd).
    rig.cx.stop(Duration::from_secs(10));
    for id in [&first, &second] {
        let (rec, events) = rig.settled(id, "not exited after the server stopped", |rec, _| {
            rec["status"] == "exited"
        });
        let diag = || rig.diag(id);
        assert_eq!(kinds(&events).last(), Some(&"session.exited"), "{}", diag());
        assert_contiguous(&rec, &events, &diag);
        crate::support::world::assert_grammar(&rec, &events, &diag);
    }
    let mut want = vec![first.clone(), second];
    want.sort();
    assert_eq!(
        rig.w.session_ids(),
        want,
        "one record per thread, nothing else\n{}",
        rig.diag(&first)
    );
    eprintln!(
        "codex_turns_produce_true_records_keyed_by_thread_id: {:?}",
        started.elapsed()
    );
}

/// A turn whose model requests all fail (HTTP 500): Codex fires `PostModelRequest` `failed`
/// and no Stop; the reader concludes the turn failed, with the error text, once no new
/// attempt followed. Another thread started within a second gets a different handle.
#[test]
fn codex_model_failure_is_a_failed_turn_and_handles_differ() {
    let mut rig = CodexRig::start();
    let thread = rig.cx.start_thread(&json!({"cwd": rig.w.repo}));
    let twin = rig.cx.start_thread(&json!({"cwd": rig.w.repo}));
    let turn = rig.cx.start_turn(&thread, "SCENARIO:fail");
    let done = rig.cx.completed_within(&turn, TURN_TIMEOUT);
    let done = done.unwrap_or_else(|| panic!("no turn/completed\n{}", rig.diag(&thread)));
    assert_eq!(
        done["turn"]["status"],
        "failed",
        "{done}\n{}",
        rig.diag(&thread)
    );
    rig.turn(&twin, "SCENARIO:shell", "completed");
    let id = rig.record_id(&thread);
    let end = Instant::now() + TURN_TIMEOUT;
    let show = |id: &str| -> Value {
        let out = rig.w.ok(&rig.w.repo, &["show", id, "--json"]);
        serde_json::from_str::<Value>(&out).unwrap()["session"].clone()
    };
    let s = loop {
        let s = show(&id);
        if s["turn"]["state"] == "failed" {
            break s;
        }
        assert!(Instant::now() < end, "never failed: {s}\n{}", rig.diag(&id));
        std::thread::sleep(Duration::from_millis(500));
    };
    let diag = || rig.diag(&id);
    assert_eq!(s["status"], "idle", "{}", diag());
    assert_eq!(s["attention"]["reason"], "turn_failed", "{}", diag());
    let text = s["attention"]["text"].as_str().unwrap_or_default();
    let events = rig.w.events(&id);
    // Codex's own words for the 500 (it does not print the status code).
    let reported = events.iter().find(|e| e["kind"] == "model.failed");
    let reported = reported.unwrap_or_else(|| panic!("no model.failed\n{}", diag()));
    assert!(
        !text.is_empty() && reported["error"] == text && s["turn"]["note"] == text,
        "the turn failed with Codex's error text: `{text}`\n{}",
        diag()
    );
    crate::support::world::assert_grammar(&rig.w.record_if_any(&id).unwrap(), &events, &diag);
    let other = show(&twin);
    let (h1, h2) = (
        s["handle"].as_str().unwrap(),
        other["handle"].as_str().unwrap(),
    );
    assert_ne!(h1, h2, "{}", diag());
    assert_eq!(show(h1)["id"], thread.as_str(), "{}", diag());
    assert_eq!(show(h2)["id"], twin.as_str(), "{}", diag());
    let list = rig.w.ok(&rig.w.repo, &["sessions"]);
    assert!(list.contains(h1) && list.contains(h2), "{list}");
}

/// With one reconnect allowed: a first attempt that fails and a retry that succeeds is a
/// completed turn (the error was only its note while retrying); two failed attempts are a
/// failed turn. Also prints the gap between attempts (what [`RETRY_BOUND`] must exceed).
#[test]
fn codex_failed_attempt_then_success_is_completed() {
    let mut rig = CodexRig::start_with_retries(1);
    let thread = rig.cx.start_thread(&json!({"cwd": rig.w.repo}));
    rig.turn(&thread, "SCENARIO:failonce", "completed");
    let id = rig.record_id(&thread);
    let (rec, events) = rig.settled(&id, "the retried turn never completed", |rec, _| {
        turn_state(rec) == "completed"
    });
    let diag = || {
        format!(
            "{}\n--- dispatch.log:\n{}",
            rig.diag(&id),
            read_or_empty(&rig.w.project_dir().join("dispatch.log"))
        )
    };
    eprintln!("{}", diag());
    assert!(kinds(&events).contains(&"model.failed"), "{}", diag());
    assert_eq!(rec["status"], "idle", "{}", diag());
    assert!(rec["attention"].is_null(), "{}", diag());
    assert!(
        rec["turn"]["note"].is_null(),
        "a recovered attempt leaves no error\n{}",
        diag()
    );
    // A reader long after: still completed (the failed attempt was followed by a new one).
    let out = rig.w.ok(&rig.w.repo, &["show", &id, "--json"]);
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["session"]["turn"]["state"], "completed", "{}", diag());
    crate::support::world::assert_grammar(&rec, &events, &diag);
}

/// An escalation the person cancels (Esc in the TUI; `cancel` over RPC): Codex interrupts the
/// turn and fires Interrupt, not Stop. The record is idle, the turn interrupted, and the
/// attention the request raised is cleared.
#[test]
fn codex_cancelled_escalation_leaves_no_attention() {
    let mut rig = CodexRig::start();
    let thread = rig.cx.start_thread(&json!({"cwd": rig.w.repo,
        "approvalPolicy": "on-request", "sandbox": "workspace-write"}));
    let turn = rig.cx.start_turn(&thread, "SCENARIO:escalate");
    let req = rig.cx.rpc.take(
        "item/commandExecution/requestApproval",
        |p| p["threadId"] == thread.as_str(),
        Instant::now() + TURN_TIMEOUT,
    );
    let req = req.unwrap_or_else(|| panic!("no approval request\n{}", rig.diag(&thread)));
    let id = rig.record_id(&thread);
    rig.settled(
        &id,
        "no attention while the approval is pending",
        |rec, _| rec["status"] == "needs_attention",
    );
    rig.cx
        .rpc
        .respond(&req["id"], &json!({"decision": "cancel"}));
    let done = rig.cx.completed_within(&turn, TURN_TIMEOUT);
    let done = done.unwrap_or_else(|| panic!("no turn/completed\n{}", rig.diag(&id)));
    assert_eq!(
        done["turn"]["status"],
        "interrupted",
        "{done}\n{}",
        rig.diag(&id)
    );
    let (rec, events) = rig.settled(&id, "the turn never became interrupted", |rec, _| {
        turn_state(rec) == "interrupted"
    });
    let diag = || rig.diag(&id);
    assert_eq!(rec["status"], "idle", "{}", diag());
    assert!(
        rec["attention"].is_null(),
        "attention left on an interrupted turn\n{}",
        diag()
    );
    assert!(kinds(&events).contains(&"attention.closed"), "{}", diag());
    crate::support::world::assert_grammar(&rec, &events, &diag);
}

/// `kill -9` of the Codex process that holds a thread fires no hook: the next reader finds the
/// process (recorded by an earlier reader) gone: `exited`, `server gone`; `wait` exits 3 at once.
#[test]
fn codex_server_killed_is_exited_server_gone() {
    let mut rig = CodexRig::start();
    let thread = rig.cx.start_thread(&json!({"cwd": rig.w.repo}));
    rig.turn(&thread, "SCENARIO:shell", "completed");
    let id = rig.record_id(&thread);
    rig.settled(&id, "the turn never completed", |rec, _| {
        turn_state(rec) == "completed"
    });
    let show = |id: &str| -> Value {
        let out = rig.w.ok(&rig.w.repo, &["show", id, "--json"]);
        serde_json::from_str::<Value>(&out).unwrap()["session"].clone()
    };
    let before = show(&id);
    assert!(
        before["process"]["pid"].is_u64(),
        "the reader recorded the process holding the thread: {before}\n{}",
        rig.diag(&id)
    );
    rig.cx.kill();
    // The group leader is reaped; the Codex process holding the thread (its child) may take a
    // moment longer to die.
    let pid = before["process"]["pid"].as_u64().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline
        && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    let after = show(&id);
    let diag = || rig.diag(&id);
    assert_eq!(after["status"], "exited", "{after}\n{}", diag());
    assert_eq!(after["exit_reason"], "server gone", "{}", diag());
    let t = Instant::now();
    let waited = rig
        .w
        .spex(&rig.w.repo, &["wait", &id, "--until", "working"]);
    assert_eq!(waited.status.code(), Some(3), "{waited:?}");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let events = rig.w.events(&id);
    assert_eq!(kinds(&events).last(), Some(&"session.exited"), "{}", diag());
    crate::support::world::assert_grammar(&rig.w.record_if_any(&id).unwrap(), &events, &diag);
}
