//! Gemini CLI sessions recorded truly, with the real `gemini` (offline, against
//! [`FakeGemini`]) and spex's hooks as `materialize` installs them: a headless `--yolo` turn
//! (working while it runs, its tool calls, then exited), an API failure that fires no hook
//! after the prompt (the process gone ends it), and in a TUI the test owns (a session the
//! person started in their own terminal): a permission dialog naming the command, rejected
//! with Esc (no hook fires: the transcript tells), and an API failure (`AfterAgent` with no
//! response text: failed), and a shell command allowed there (no hook fires until it ends: the
//! CLI running it tells).

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::fake_gemini::{self, FakeGemini};
use crate::support::gemini_home::{
    HeadlessTurn, INPUT_PLACEHOLDER, gemini_command, headless_turn, seed_gemini_home,
    submit_prompt, wait_tui_ready,
};
use crate::support::term::Term;
use crate::support::world::{World, read_or_empty, spex_bin, write};

const TURN_TIMEOUT: Duration = Duration::from_mins(2);
/// How long a reader may need to see what the evidence says (a loaded machine).
const SETTLE: Duration = Duration::from_secs(30);

/// A world whose repo spex materialized for Gemini (hooks, trust), with a seeded Gemini home.
fn gemini_world() -> World {
    let w = World::new();
    seed_gemini_home(&w.home);
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"gemini\"] }\n",
    );
    w.ok(&w.repo, &["materialize"]);
    let settings = read_or_empty(&w.repo.join(".gemini/settings.json"));
    assert!(
        settings.contains(" dispatch gemini AfterAgent"),
        "materialize installed no Gemini hooks:\n{settings}"
    );
    w
}

/// The real `gemini` aimed at `fake`, its hooks at the world's store.
fn gemini(w: &World, fake: &FakeGemini) -> std::process::Command {
    let mut cmd = gemini_command(&w.home, &fake.base_url());
    cmd.env("SPEX_HOME", &w.spex_home)
        .env("XDG_CONFIG_HOME", &w.xdg_config)
        .current_dir(&w.repo);
    cmd
}

/// One headless `--yolo` turn in the world's repo.
fn headless(w: &World, fake: &FakeGemini, tag: &str, prompt: &str) -> HeadlessTurn {
    let mut cmd = gemini(w, fake);
    cmd.arg("--yolo");
    headless_turn(
        &mut cmd,
        fake,
        &w.repo,
        w.dir.path(),
        tag,
        prompt,
        TURN_TIMEOUT,
    )
}

/// `spex show <id> --json`'s record: with its evidence folded in, as a reader sees it.
fn show(w: &World, id: &str) -> Value {
    let out = w.ok(&w.repo, &["show", id, "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("show --json: {e}\n{out}"));
    v["session"].clone()
}

/// The kinds of `id`'s events, with the tool of tool events (`tool.started run_shell_command`).
fn kinds(w: &World, id: &str) -> Vec<String> {
    w.events(id)
        .iter()
        .map(|e| {
            let kind = e["kind"].as_str().unwrap_or_default();
            match e["tool"].as_str() {
                Some(tool) => format!("{kind} {tool}"),
                None => kind.to_owned(),
            }
        })
        .collect()
}

/// Reads `id` through `spex show` until `pred` holds; the record then, or a panic with `diag`.
fn show_until(w: &World, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let end = Instant::now() + SETTLE;
    loop {
        let r = show(w, id);
        if pred(&r) {
            return r;
        }
        assert!(
            Instant::now() < end,
            "{what}: the record never got there\n{}\nevents: {:#?}\nerrors: {}",
            crate::support::world::pretty(&r),
            kinds(w, id),
            w.errors_log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_headless_gemini_turn_is_recorded_working_with_its_tools_then_exited() {
    let w = gemini_world();
    let fake = FakeGemini::start();
    // The model's shell command asks spex about the session while the turn runs, and says
    // which process runs it.
    let during = w.dir.path().join("during.json");
    let command = format!(
        "SPEX_HOME='{}' XDG_CONFIG_HOME='{}' '{}' sessions --json > '{}'; echo $PPID > ppid.txt",
        w.spex_home.display(),
        w.xdg_config.display(),
        spex_bin().display(),
        during.display()
    );
    let turn = headless(
        &w,
        &fake,
        "shell",
        &format!("SCENARIO:shellcmd <<{command}>>"),
    );
    turn.assert_success();
    let diag = &turn.diag;
    let sid = turn.session_id.clone().expect("a session id");
    let id = w
        .alias("gemini", &sid)
        .unwrap_or_else(|| panic!("no record\n{diag}"));

    let seen: Vec<Value> = serde_json::from_str(&read_or_empty(&during))
        .unwrap_or_else(|e| panic!("during.json: {e}\n{diag}"));
    let me = seen
        .iter()
        .find(|s| s["id"] == id.as_str())
        .unwrap_or_else(|| panic!("no session in {seen:?}\n{diag}"));
    assert_eq!(me["status"], "working", "{me}\n{diag}");
    assert_eq!(me["turn"]["state"], "running", "{me}");
    assert_eq!(me["harness_session_id"], sid.as_str());
    // The process recorded is the one that ran the command: the CLI, not its launcher.
    let ppid: u32 = read_or_empty(&w.repo.join("ppid.txt"))
        .trim()
        .parse()
        .unwrap();
    assert_eq!(me["process"]["pid"], ppid, "{me}");

    let r = show(&w, &id);
    assert_eq!(r["status"], "exited", "{r}");
    assert_eq!(r["exit_reason"], "session end", "{r}");
    assert_eq!(r["turn"]["state"], "completed", "{r}");
    assert_eq!(
        r["turn"]["prompt"],
        format!("SCENARIO:shellcmd <<{command}>>")
    );
    assert_eq!(
        kinds(&w, &id),
        [
            "session.started",
            "turn.started",
            "tool.started run_shell_command",
            "tool.completed run_shell_command",
            "turn.completed",
            "session.exited",
        ],
        "{diag}"
    );
    let started = w.events(&id)[2].clone();
    assert_eq!(started["tool"], "run_shell_command");
    // What the transcript says the model used (the fake's numbers, once per request).
    let usage = &r["usage"];
    assert_eq!(usage["requests"], 2, "{r}");
    assert_eq!(usage["input_tokens"], 2 * fake_gemini::USAGE.prompt, "{r}");
    assert_eq!(
        usage["output_tokens"],
        2 * fake_gemini::USAGE.candidates,
        "{r}"
    );
}

#[test]
fn a_headless_write_and_a_failed_command_are_recorded_with_their_file_and_exit_code() {
    let w = gemini_world();
    let fake = FakeGemini::start();
    let both = headless(&w, &fake, "both", "SCENARIO:both go");
    both.assert_success();
    let id = w
        .alias("gemini", both.session_id.as_deref().unwrap())
        .unwrap();
    let r = show(&w, &id);
    assert_eq!(
        r["touched"],
        serde_json::json!([fake_gemini::WRITE_FILE]),
        "{r}"
    );
    let writes: Vec<Value> = w
        .events(&id)
        .into_iter()
        .filter(|e| e["tool"] == "write_file")
        .collect();
    assert_eq!(writes.len(), 2, "{writes:?}");
    assert_eq!(
        writes[0]["files"],
        serde_json::json!([fake_gemini::WRITE_FILE])
    );

    let failed = headless(&w, &fake, "shellfail", "SCENARIO:shellfail go");
    failed.assert_success();
    let id = w
        .alias("gemini", failed.session_id.as_deref().unwrap())
        .unwrap();
    let done: Vec<Value> = w
        .events(&id)
        .into_iter()
        .filter(|e| e["kind"] == "tool.completed")
        .collect();
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(done[0]["ok"], false, "{}", done[0]);
    assert_eq!(done[0]["error"], "exit code 3", "{}", done[0]);
}

#[test]
fn a_headless_api_failure_fires_no_hook_and_the_gone_process_ends_the_turn() {
    let w = gemini_world();
    let fake = FakeGemini::start();
    let turn = headless(&w, &fake, "fail", "SCENARIO:fail now");
    assert_eq!(turn.code(), Some(144), "{}", turn.diag);
    let id = w
        .alias("gemini", turn.session_id.as_deref().unwrap())
        .unwrap();
    // The hooks said as much as Gemini fires: started, then the prompt; nothing after.
    assert_eq!(kinds(&w, &id), ["session.started", "turn.started"]);
    let r = show_until(&w, &id, "exited", |r| r["status"] == "exited");
    assert_eq!(r["exit_reason"], "process gone", "{r}");
    assert_eq!(r["turn"]["state"], "interrupted", "{r}");
    assert_eq!(r["source"], "liveness check", "{r}");
    assert!(
        r["why"]
            .as_str()
            .unwrap_or_default()
            .contains("no SessionEnd"),
        "{r}"
    );
    let text = w.ok(&w.repo, &["show", &id]);
    assert!(!text.contains("working"), "{text}");
}

/// The TUI's screen and the fake's requests, for a failure message.
fn tui_diag(t: &Term, fake: &FakeGemini, w: &World) -> String {
    let last = fake
        .stream_requests()
        .last()
        .map(|r| r["body"]["contents"].to_string())
        .unwrap_or_default();
    format!(
        "{}\nrequests: {:#?}\nthe last one's contents: {last}\nerrors: {}",
        t.diag(),
        fake.request_lines(),
        w.errors_log()
    )
}

/// The one Gemini session in the store.
fn only_session(w: &World) -> String {
    let ids = w.session_ids();
    assert_eq!(ids.len(), 1, "{ids:?}");
    ids[0].clone()
}

/// How long the TUI tests wait on the screen.
const TUI_WAIT: Duration = Duration::from_secs(90);

/// A TUI the test owns in `w`'s repo (a session the person started in their own terminal),
/// whose `prompt` opened a shell call's permission dialog; the session's id and its record
/// once it needs the person.
fn tui_at_shell_dialog(w: &World, fake: &FakeGemini, prompt: &str) -> (Term, String, Value) {
    let t = Term::spawn(&gemini(w, fake), 45, 130);
    wait_tui_ready(&t, TUI_WAIT).unwrap_or_else(|e| panic!("{e}\n{}", tui_diag(&t, fake, w)));
    submit_prompt(&t, prompt, TUI_WAIT, || {
        fake.prompt_within(prompt, Duration::ZERO).is_some()
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", tui_diag(&t, fake, w)));
    t.wait_for("Allow execution", TUI_WAIT)
        .unwrap_or_else(|e| panic!("no dialog: {e}\n{}", tui_diag(&t, fake, w)));
    let id = only_session(w);
    let r = show_until(w, &id, "needs attention", |r| {
        r["status"] == "needs_attention"
    });
    assert_eq!(r["attention"]["reason"], "permission", "{r}");
    (t, id, r)
}

#[test]
fn a_gemini_tui_permission_rejected_with_esc_and_an_api_failure_are_recorded_truly() {
    const WAIT: Duration = TUI_WAIT;
    let w = gemini_world();
    let fake = FakeGemini::start();
    // A shell call waits on its dialog: the session needs the person, naming the command.
    let (mut t, id, r) = tui_at_shell_dialog(&w, &fake, "SCENARIO:shell run it");
    assert_eq!(r["attention"]["text"], fake_gemini::SHELL_CMD, "{r}");
    let text = w.ok(&w.repo, &["show", &id]);
    assert!(
        text.contains("shell_out.txt"),
        "show names the command:\n{text}"
    );

    // Esc rejects it and cancels the request: Gemini fires no hook at all.
    t.send(b"\x1b");
    t.wait_for("Request cancelled", WAIT)
        .unwrap_or_else(|e| panic!("no cancel: {e}\n{}", tui_diag(&t, &fake, &w)));
    // A script waiting on the session hears it, though no hook came.
    let waited = w.spex(
        &w.repo,
        &["wait", &id, "--until", "idle", "--timeout", "30"],
    );
    assert_eq!(
        waited.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&waited.stdout),
        String::from_utf8_lossy(&waited.stderr)
    );
    let r = show_until(&w, &id, "idle after Esc", |r| r["status"] == "idle");
    assert_eq!(r["turn"]["state"], "interrupted", "{r}");
    assert_eq!(r["turn"]["by"], "denial", "{r}");
    assert!(r["attention"].is_null(), "{r}");
    assert!(
        r["source"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Gemini's transcript"),
        "{r}"
    );
    assert!(
        !w.repo.join("shell_out.txt").exists(),
        "the rejected command ran"
    );

    // The model request fails: AfterAgent with no response text.
    t.wait_for(INPUT_PLACEHOLDER, WAIT)
        .unwrap_or_else(|e| panic!("{e}\n{}", tui_diag(&t, &fake, &w)));
    let prompt = "SCENARIO:fail now";
    submit_prompt(&t, prompt, WAIT, || {
        fake.prompt_within(prompt, Duration::ZERO).is_some()
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", tui_diag(&t, &fake, &w)));
    t.wait_for("API Error", WAIT)
        .unwrap_or_else(|e| panic!("no API error: {e}\n{}", tui_diag(&t, &fake, &w)));
    let r = show_until(&w, &id, "failed", |r| r["turn"]["state"] == "failed");
    assert_eq!(r["turn"]["prompt"], prompt, "{r}");
    assert_eq!(r["attention"]["reason"], "turn_failed", "{r}");

    // Esc while the model streams: AfterAgent fires with the partial text as the response;
    // the transcript says the request was cancelled.
    t.wait_for(INPUT_PLACEHOLDER, WAIT)
        .unwrap_or_else(|e| panic!("{e}\n{}", tui_diag(&t, &fake, &w)));
    let prompt = "SCENARIO:hang";
    submit_prompt(&t, prompt, WAIT, || {
        fake.prompt_within(prompt, Duration::ZERO).is_some()
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", tui_diag(&t, &fake, &w)));
    t.wait_for(fake_gemini::HANG_TEXT, WAIT)
        .unwrap_or_else(|e| panic!("no streamed text: {e}\n{}", tui_diag(&t, &fake, &w)));
    t.send(b"\x1b");
    let r = show_until(&w, &id, "interrupted", |r| {
        r["turn"]["prompt"] == prompt && r["turn"]["state"] != "running"
    });
    assert_eq!(r["turn"]["state"], "interrupted", "{r}");
    assert_eq!(r["turn"]["by"], "terminal", "{r}");
    // Gemini writes the cancel into its transcript just before it runs the AfterAgent hook, so
    // a reader that runs in between concludes the same ending from the transcript first (seen
    // on a loaded machine); either is the truth, told by its own evidence.
    let source = r["source"].as_str().unwrap_or_default();
    assert!(
        source == "hook AfterAgent" || source.starts_with("Gemini's transcript"),
        "{r}"
    );
    assert_eq!(r["status"], "idle", "{r}");

    // Ctrl-C twice: SessionEnd fires three times, the session exits once.
    t.send(b"\x03");
    t.wait_for("again to exit", WAIT)
        .unwrap_or_else(|e| panic!("{e}\n{}", tui_diag(&t, &fake, &w)));
    t.send(b"\x03");
    assert!(t.exit_within(WAIT).is_some(), "{}", tui_diag(&t, &fake, &w));
    let r = show_until(&w, &id, "exited", |r| r["status"] == "exited");
    assert_eq!(r["exit_reason"], "session end", "{r}");
    let k = kinds(&w, &id);
    assert_eq!(
        k.iter().filter(|k| *k == "session.exited").count(),
        1,
        "{k:?}"
    );
    assert_eq!(
        k,
        [
            "session.started",
            "turn.started",
            "tool.started run_shell_command",
            "attention.opened run_shell_command",
            "tool.interrupted run_shell_command",
            "turn.interrupted",
            "attention.closed",
            "turn.started",
            "turn.failed",
            "attention.opened",
            // The next prompt closes the failed turn's alert.
            "attention.closed",
            "turn.started",
            "turn.interrupted",
            "session.exited",
        ],
        "{}",
        tui_diag(&t, &fake, &w)
    );
}

/// `spex.jsonc` asking undeclared stops to declare (`stopGate: ask`), materialized again.
fn ask_to_declare(w: &World) {
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"gemini\"], \"policies\": { \"stopGate\": \"ask\" } }\n",
    );
    w.ok(&w.repo, &["materialize"]);
}

#[test]
fn the_stop_gate_continues_a_gemini_turn_once_and_the_turn_stays_one() {
    let w = gemini_world();
    ask_to_declare(&w);
    let fake = FakeGemini::start();
    let prompt = "SCENARIO:default stop when done";
    let turn = headless(&w, &fake, "gate", prompt);
    turn.assert_success();
    let diag = &turn.diag;
    // Gemini sent the gate's text to the model as the next prompt, and stopped after it.
    assert!(
        fake.prompt_within("Before you stop, declare", Duration::ZERO)
            .is_some(),
        "the model never got the gate's text\n{diag}"
    );
    let id = w
        .alias("gemini", turn.session_id.as_deref().unwrap())
        .unwrap();
    assert_eq!(
        kinds(&w, &id),
        [
            "session.started",
            "turn.started",
            "turn.completed",
            "session.exited"
        ],
        "{diag}"
    );
    let r = show(&w, &id);
    assert_eq!(r["turn"]["prompt"], prompt, "{r}");
    assert_eq!(r["headline"], prompt, "{r}");
}

#[test]
fn a_gemini_agent_declares_done_from_its_shell_and_its_shell_has_no_session_id() {
    let w = gemini_world();
    ask_to_declare(&w);
    let fake = FakeGemini::start();
    let command = format!(
        "env > env.txt; '{}' session done --note 'all done' > declared.txt 2>&1",
        spex_bin().display()
    );
    let turn = headless(
        &w,
        &fake,
        "declare",
        &format!("SCENARIO:shellcmd <<{command}>>"),
    );
    turn.assert_success();
    let diag = &turn.diag;
    let env = read_or_empty(&w.repo.join("env.txt"));
    // The shell's environment is Gemini's (`GEMINI_CLI=1`), with no id of the session: so the
    // adapter names no session variable, and `spex session` finds it by its process.
    assert!(env.lines().any(|l| l == "GEMINI_CLI=1"), "{env}");
    assert!(!env.contains("GEMINI_SESSION_ID"), "{env}");
    let declared = read_or_empty(&w.repo.join("declared.txt"));
    let id = w
        .alias("gemini", turn.session_id.as_deref().unwrap())
        .unwrap();
    let r = show(&w, &id);
    assert_eq!(r["declared"]["state"], "done", "{declared}\n{r}\n{diag}");
    assert_eq!(r["declared"]["note"], "all done", "{r}");
    // Declared before it stopped: the gate let the turn end at once.
    assert!(
        fake.prompt_within("Before you stop, declare", Duration::ZERO)
            .is_none(),
        "{diag}"
    );
    assert_eq!(r["turn"]["state"], "completed", "{r}");
}

#[test]
fn a_governed_files_spec_reaches_gemini_with_its_write_s_result() {
    let w = gemini_world();
    write(
        &w.repo.join(".spec/greeting/spec.md"),
        "---\ntitle: Greeting\nsurface: system\ncode: [\"hello.txt\"]\n---\nThe greeting.\n",
    );
    w.ok(&w.repo, &["materialize"]);
    let fake = FakeGemini::start();
    let turn = headless(&w, &fake, "write", "SCENARIO:write it");
    turn.assert_success();
    let diag = &turn.diag;
    // Gemini reads no context at a tool's start: spex's word about the spec comes with the
    // write's result, which the model reads next.
    let result = fake
        .function_response_within("write_file", Duration::ZERO)
        .unwrap_or_else(|| panic!("no write result reached the model\n{diag}"));
    let text = result.to_string();
    assert!(
        text.contains("`hello.txt` is governed by `.spec/greeting/spec.md`"),
        "{text}\n{diag}"
    );
    let id = w
        .alias("gemini", turn.session_id.as_deref().unwrap())
        .unwrap();
    let r = show(&w, &id);
    assert!(r["flags"]["pending_context"].is_null(), "{r}");
}

#[test]
fn a_resumed_headless_gemini_session_is_the_same_record_with_its_new_process() {
    let w = gemini_world();
    let fake = FakeGemini::start();
    let first = headless(&w, &fake, "first", "SCENARIO:default first");
    first.assert_success();
    let sid = first.session_id.clone().unwrap();
    let id = w.alias("gemini", &sid).unwrap();
    let before = show(&w, &id);
    let mut cmd = gemini(&w, &fake);
    cmd.args(["--yolo", "--resume", &sid]);
    let second = headless_turn(
        &mut cmd,
        &fake,
        &w.repo,
        w.dir.path(),
        "second",
        "SCENARIO:default second",
        TURN_TIMEOUT,
    );
    second.assert_success();
    assert_eq!(
        second.session_id.as_deref(),
        Some(sid.as_str()),
        "{}",
        second.diag
    );
    let r = show(&w, &id);
    assert_eq!(w.session_ids(), std::slice::from_ref(&id));
    assert_eq!(r["status"], "exited", "{r}");
    assert_eq!(r["turn"]["prompt"], "SCENARIO:default second", "{r}");
    assert_ne!(r["process"], before["process"], "{r}");
    assert_eq!(
        kinds(&w, &id),
        [
            "session.started",
            "turn.started",
            "turn.completed",
            "session.exited",
            "session.resumed",
            "session.started",
            "turn.started",
            "turn.completed",
            "session.exited",
        ],
        "{}",
        second.diag
    );
}

/// The processes whose cwd is `dir` and whose command line holds `needle`: (pid, parent, the
/// command line with its NULs as spaces).
fn running_in(dir: &std::path::Path, needle: &str) -> Vec<(u32, String, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if std::fs::read_link(format!("/proc/{pid}/cwd"))
            .ok()
            .as_deref()
            != Some(dir)
        {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            out.push((pid, stat, cmdline));
        }
    }
    out
}

#[test]
fn a_gemini_tui_permission_allowed_in_the_terminal_is_working_while_its_command_runs() {
    const WAIT: Duration = TUI_WAIT;
    let w = gemini_world();
    let fake = FakeGemini::start();
    let (mut t, id, r) = tui_at_shell_dialog(&w, &fake, "SCENARIO:slowshell run it");
    assert_eq!(r["attention"]["text"], fake_gemini::SLOW_CMD, "{r}");
    // The dialog is still open: nothing runs, and the session still waits on the person.
    assert!(running_in(&w.repo, "sleep 20").is_empty());
    let r = show(&w, &id);
    assert_eq!(r["status"], "needs_attention", "{r}");

    // "Allow once" in the person's terminal: Gemini fires no hook until the command ends.
    t.send(b"1");
    let end = Instant::now() + WAIT;
    while running_in(&w.repo, "sleep 20").is_empty() {
        assert!(
            Instant::now() < end,
            "the command never started\n{}",
            tui_diag(&t, &fake, &w)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let r = show_until(&w, &id, "working while the command runs", |r| {
        r["status"] == "working"
    });
    assert!(r["attention"].is_null(), "{r}");
    assert_eq!(r["turn"]["state"], "running", "{r}");
    assert_eq!(r["source"], "process table", "{r}");
    assert!(
        !running_in(&w.repo, "sleep 20").is_empty() && !w.repo.join("slow_out.txt").exists(),
        "the command ended before spex saw it run: {r}"
    );

    // The command ends, then the turn.
    let end = Instant::now() + WAIT;
    let r = loop {
        let r = show(&w, &id);
        if r["turn"]["state"] == "completed" {
            break r;
        }
        assert!(
            Instant::now() < end,
            "the turn never completed\n{}\n{}",
            crate::support::world::pretty(&r),
            tui_diag(&t, &fake, &w)
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(r["status"], "idle", "{r}");
    assert!(
        w.repo.join("slow_out.txt").exists(),
        "the command did not run"
    );
    assert_eq!(
        kinds(&w, &id),
        [
            "session.started",
            "turn.started",
            "tool.started run_shell_command",
            "attention.opened run_shell_command",
            "attention.closed",
            "tool.completed run_shell_command",
            "turn.completed",
        ],
        "{}",
        tui_diag(&t, &fake, &w)
    );
    drop(t.exit_within(Duration::ZERO));
}
