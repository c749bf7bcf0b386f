//! `spex answer` / `approve` / `deny` against the REAL harnesses (offline, fake model servers):
//! each test checks what the harness did (the command ran or not, the model got the message,
//! the mode changed), not only spex's record. Fails, never skips.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::runtime::{
    claude_world, host_log, launch, launch_json, run_json, screen, spex_cmd, stop, wait_screen,
};
use crate::support::claude_home::DUMMY_API_KEY;
use crate::support::claude_home::SeedOptions;
use crate::support::codex_home::write_codex_config;
use crate::support::fake_anthropic::FakeAnthropic;
use crate::support::fake_responses::FakeResponses;
use crate::support::http::random_hex;
use crate::support::peers::{claude_bin, peers_path};
use crate::support::term::Term;
use crate::support::world::{
    World, feed, json_result, pretty, read_or_empty, spex_bin, wait_status, write,
};

/// `spex <args>` and its exit code, stdout and stderr together.
fn said(
    w: &World,
    fake: &FakeAnthropic,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Option<i32>, String) {
    let mut c = spex_cmd(w, fake, args);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Delivers `prompt` and waits until its dialog is open and drawn: the open attention.
fn at_dialog(w: &World, fake: &FakeAnthropic, id: &str, prompt: &str, drawn: &str) -> Value {
    run_json(w, fake, &["deliver", id, prompt, "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", host_log(w, id)));
    let r = wait_status(w, id, "needs_attention", Duration::from_mins(1));
    assert_eq!(
        r["status"],
        "needs_attention",
        "{}\n{}",
        pretty(&r),
        host_log(w, id)
    );
    assert!(
        wait_screen(w, fake, id, drawn, Duration::from_secs(20)),
        "{}",
        screen(w, fake, id)
    );
    r["attention"].clone()
}

/// [`at_dialog`], once the dialog's `PermissionRequest` hook waits for the answer (a question
/// opens at its call's start, a moment before that hook runs).
fn at_hooked_dialog(w: &World, fake: &FakeAnthropic, id: &str, prompt: &str, drawn: &str) -> Value {
    let a = at_dialog(w, fake, id, prompt, drawn);
    hooked(w, id, a["id"].as_str().unwrap(), &|| host_log(w, id))
}

/// The model's requests so far, as text (what it was told).
fn model_heard(fake: &FakeAnthropic) -> String {
    fake.requests()
        .iter()
        .map(|r| r["body"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn answered(w: &World, fake: &FakeAnthropic, args: &[&str]) -> Value {
    run_json(w, fake, args).unwrap_or_else(|e| panic!("{e}\n{}", host_log(w, args[1])))
}

/// A Claude world whose `PermissionRequest` hook does not wait (`answering.hookWaitSecs: 0`):
/// a hosted session's dialogs are answered with keys.
fn claude_world_without_waiting_hook() -> (World, FakeAnthropic) {
    let (w, fake) = claude_world(SeedOptions::default());
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\"], \"answering\": { \"hookWaitSecs\": 0 } }\n",
    );
    w.ok(&w.repo, &["materialize"]);
    (w, fake)
}

/// Waits until `path` exists.
fn appears(path: &std::path::Path, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while !path.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    path.exists()
}

/// Waits until the model was told `text`.
fn model_hears(fake: &FakeAnthropic, text: &str, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while !model_heard(fake).contains(text) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    model_heard(fake).contains(text)
}

/// The last `attention.closed` event of session `id`.
fn last_closed(w: &World, id: &str) -> Value {
    w.events(id)
        .into_iter()
        .rfind(|e| e["kind"] == "attention.closed")
        .unwrap_or(Value::Null)
}

#[test]
fn hosted_claude_permission_answered_through_the_waiting_hook() {
    let (w, fake) = claude_world(SeedOptions::default());
    // The shim's timeout outlasts the wait (600 s by default) plus the usual 30 s.
    let settings: Value =
        serde_json::from_str(&read_or_empty(&w.repo.join(".claude/settings.json"))).unwrap();
    assert_eq!(
        settings["hooks"]["PermissionRequest"][0]["hooks"][0]["timeout"],
        630,
        "{}",
        pretty(&settings)
    );
    assert_eq!(
        settings["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"],
        30
    );
    let id = launch(&w, &fake);
    let out = w.repo.join("bash_out.txt");

    // allow: the hook gives Claude the decision, the command runs.
    let a = at_hooked_dialog(&w, &fake, &id, "USE_BASH run it", "Do you want to proceed?");
    assert_eq!(a["id"], "a1", "{}", pretty(&a));
    assert_eq!(a["via"]["how"], "hook", "{}", pretty(&a));
    assert!(
        a["call_id"]
            .as_str()
            .is_some_and(|c| c.starts_with("toolu_")),
        "{}",
        pretty(&a)
    );
    let done = answered(&w, &fake, &["approve", &id, "--attention", "a1", "--json"]);
    eprintln!(
        "approve (hook) confirmed in {} ms: {}",
        done["elapsed_ms"], done["confirmed"]
    );
    assert_eq!(done["via"], "hook", "{}", pretty(&done));
    assert!(
        appears(&out, Duration::from_secs(20)),
        "the command did not run\n{}",
        host_log(&w, &id)
    );
    assert!(
        wait_screen(
            &w,
            &fake,
            &id,
            "Allowed by PermissionRequest hook",
            Duration::from_secs(10)
        ),
        "{}",
        screen(&w, &fake, &id)
    );
    let closed = last_closed(&w, &id);
    assert_eq!(closed["how"], "spex answer", "{}", host_log(&w, &id));
    assert_eq!(closed["choice"], "allow");
    wait_status(&w, &id, "idle", Duration::from_mins(1));
    // The hook left no answer file and the answered attention names no waiting hook.
    let dir = w.project_dir().join("sessions").join(&id);
    assert!(!dir.join("answer-a1.json").exists());

    // deny with a message: the command does not run, the model gets exactly the message and
    // the turn goes on (Claude's final answer comes).
    std::fs::remove_file(&out).unwrap();
    let a = at_hooked_dialog(
        &w,
        &fake,
        &id,
        "USE_BASH once more",
        "Do you want to proceed?",
    );
    assert_eq!(a["id"], "a2");
    assert_eq!(a["via"]["how"], "hook");
    // The stale a1 is refused while a2 is open, and a2 stays open, its answer file unwritten.
    let (code, text) = said(&w, &fake, &["approve", &id, "--attention", "a1"], &[]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("is not open") && text.contains("a2"),
        "{text}"
    );
    assert!(!dir.join("answer-a1.json").exists() && !dir.join("answer-a2.json").exists());
    let done = answered(
        &w,
        &fake,
        &[
            "deny",
            &id,
            "--message",
            "use make instead of echo",
            "--json",
        ],
    );
    assert_eq!(done["via"], "hook", "{}", pretty(&done));
    assert!(
        model_hears(&fake, "use make instead of echo", Duration::from_secs(30)),
        "the model never got the message\n{}",
        host_log(&w, &id)
    );
    assert!(!out.exists(), "the denied command ran");
    let r = wait_status(&w, &id, "idle", Duration::from_mins(1));
    assert_eq!(r["turn"]["state"], "completed", "{}", pretty(&r));
    stop(&w, &fake, &id);
}

/// A Claude TUI a person started in their own terminal (a PTY the test owns, not `spex
/// launch`), in the world's repo, with its own session id (which is its record's id).
pub(crate) fn own_terminal_claude(w: &World, fake: &FakeAnthropic) -> (Term, String) {
    let sid = format!(
        "{}-{}-4{}-a{}-{}",
        &random_hex(8),
        &random_hex(4),
        &random_hex(3),
        &random_hex(3),
        &random_hex(12)
    );
    let mut c = std::process::Command::new(claude_bin());
    c.args(["--session-id", &sid])
        .current_dir(&w.repo)
        .env_clear()
        .env("PATH", peers_path())
        .env("HOME", &w.home)
        .env("LANG", "C.UTF-8")
        .env("TERM", "xterm-256color")
        .env("ANTHROPIC_BASE_URL", fake.base_url())
        .env("ANTHROPIC_API_KEY", DUMMY_API_KEY)
        .env("DISABLE_AUTOUPDATER", "1")
        .env("SPEX_HOME", &w.spex_home)
        .env("XDG_CONFIG_HOME", &w.xdg_config)
        .env("CODEX_HOME", &w.codex_home);
    let t = Term::spawn(&c, 45, 130);
    t.wait_for("? for shortcuts", Duration::from_mins(1))
        .unwrap_or_else(|e| panic!("{e}"));
    (t, sid)
}

/// Types a prompt as a person does: a paste, then Enter on its own; Enter again while the
/// prompt still sits in the input box (a fresh TUI can drop the first one, facts/claude.md
/// §7.4), never once it has left it (an Enter at a dialog would answer it).
pub(crate) fn type_prompt(t: &Term, text: &str) {
    t.send(format!("\x1b[200~{text}\x1b[201~").as_bytes());
    let head: String = text.chars().take(40).collect();
    // The input box: a `❯` line right under a horizontal rule (the conversation above shows
    // submitted prompts with `❯` too).
    let in_box = |screen: &str| {
        let lines: Vec<&str> = screen.lines().collect();
        lines.windows(2).any(|w| {
            w[0].trim_start().starts_with("────")
                && w[1].starts_with('❯')
                && w[1].contains(head.as_str())
        })
    };
    t.wait_until(Duration::from_secs(20), |v| in_box(&v.text()))
        .unwrap_or_else(|e| panic!("{e}"));
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(300));
        t.send(b"\r");
        if t.wait_until(Duration::from_secs(3), |v| !in_box(&v.text()))
            .is_ok()
        {
            return;
        }
    }
    panic!("the prompt was never submitted\n{}", t.text());
}

/// Waits until session `id`'s record holds attention `att` answered `via: hook`; `diag` says
/// what went on when it never does.
fn hooked(w: &World, id: &str, att: &str, diag: &dyn Fn() -> String) -> Value {
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        let a = w.record(id)["attention"].clone();
        if a["id"] == att && a["via"]["how"] == "hook" {
            return a;
        }
        assert!(
            Instant::now() < deadline,
            "no hook waits for {att}: {}\n{}",
            pretty(&a),
            diag()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until process `pid` has ended.
fn ends(pid: u64, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while std::path::Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn claude_in_its_own_terminal_answered_by_spex_approve_and_at_the_terminal_first() {
    let (w, fake) = claude_world(SeedOptions::default());
    let (t, id) = own_terminal_claude(&w, &fake);
    let out = w.repo.join("bash_out.txt");

    // a1: answered by `spex approve` from outside; the command runs.
    type_prompt(&t, "USE_BASH run it");
    t.wait_for("Do you want to proceed?", Duration::from_mins(1))
        .unwrap_or_else(|e| panic!("{e}"));
    let a = hooked(&w, &id, "a1", &|| t.text());
    assert_eq!(w.record(&id)["launched_by"], "self");
    let hook = a["hook"]["pid"].as_u64().unwrap();
    let done = answered(&w, &fake, &["approve", &id, "--attention", "a1", "--json"]);
    assert_eq!(done["via"], "hook", "{}", pretty(&done));
    assert!(
        appears(&out, Duration::from_secs(20)),
        "the command did not run\n{}",
        t.text()
    );
    t.wait_for("Allowed by PermissionRequest hook", Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(ends(hook, Duration::from_secs(10)), "the hook still runs");
    wait_status(&w, &id, "idle", Duration::from_mins(1));
    // A stale `--attention`: refused.
    let (code, text) = said(&w, &fake, &["approve", &id, "--attention", "a1"], &[]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("a1"), "{text}");

    // a2: answered at the terminal first (`1`, a digit alone). The hook is not killed for an
    // allow; it sees the call end in the record and exits, printing nothing.
    std::fs::remove_file(&out).unwrap();
    type_prompt(&t, "USE_BASH again");
    let a = hooked(&w, &id, "a2", &|| t.text());
    t.wait_for("Do you want to proceed?", Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{e}"));
    let hook = a["hook"]["pid"].as_u64().unwrap();
    t.send(b"1");
    assert!(
        appears(&out, Duration::from_secs(20)),
        "the command did not run\n{}",
        t.text()
    );
    assert!(
        ends(hook, Duration::from_secs(20)),
        "the hook still waits after the terminal's allow"
    );
    wait_status(&w, &id, "idle", Duration::from_mins(1));
    let closed = last_closed(&w, &id);
    assert_eq!(closed["attention"], "a2", "{}", pretty(&closed));
    assert_eq!(closed["how"], "terminal", "{}", pretty(&closed));
    // The later `spex approve` is refused (a2 closed), and writes no answer anyone could take.
    let (code, text) = said(&w, &fake, &["approve", &id, "--attention", "a2"], &[]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("a2"), "{text}");
    let (code, text) = said(&w, &fake, &["approve", &id], &[]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("no attention is open"), "{text}");
    let dir = w.project_dir().join("sessions").join(&id);
    assert!(
        std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .all(|e| !e.file_name().to_string_lossy().starts_with("answer-")),
        "an answer file was left behind"
    );

    // a3, the next dialog, is unaffected: denied with a message by spex, heard by the model.
    std::fs::remove_file(&out).unwrap();
    type_prompt(&t, "USE_BASH a third time");
    hooked(&w, &id, "a3", &|| t.text());
    let done = answered(
        &w,
        &fake,
        &["deny", &id, "--message", "not this time", "--json"],
    );
    assert_eq!(done["attention"], "a3");
    assert!(
        model_hears(&fake, "not this time", Duration::from_secs(30)),
        "{}",
        t.text()
    );
    assert!(!out.exists(), "the denied command ran");
    wait_status(&w, &id, "idle", Duration::from_mins(1));

    // a4: the session answering itself (a command its own Bash tool runs, inside its process
    // tree) is refused.
    let me = w.repo.join("self_answer.txt");
    type_prompt(
        &t,
        &format!(
            "USE_BASHCMD <<{} approve {id} > {} 2>&1; echo ran>>",
            spex_bin().display(),
            me.display()
        ),
    );
    hooked(&w, &id, "a4", &|| t.text());
    answered(&w, &fake, &["approve", &id, "--json"]);
    assert!(appears(&me, Duration::from_secs(20)), "{}", t.text());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !read_or_empty(&me).contains("ran") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        read_or_empty(&me).contains("cannot answer its own attention"),
        "{}",
        read_or_empty(&me)
    );
    wait_status(&w, &id, "idle", Duration::from_mins(1));

    // a5: `No` at the terminal aborts the turn and Claude signals the hook, which exits
    // quietly (and so its wait is over).
    type_prompt(&t, "USE_BASH a last time");
    let a = hooked(&w, &id, "a5", &|| t.text());
    t.wait_for("Do you want to proceed?", Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{e}"));
    let hook = a["hook"]["pid"].as_u64().unwrap();
    t.send(b"3");
    assert!(
        ends(hook, Duration::from_secs(10)),
        "the hook outlived its dialog's `No`"
    );
    assert!(!out.exists(), "the refused command ran");
    let a = w.record(&id)["attention"].clone();
    assert!(a.is_null() || a["hook"].is_null(), "{}", pretty(&a));
}

#[test]
fn a_hosted_dialog_whose_hook_stopped_waiting_is_answered_with_keys() {
    let (w, fake) = claude_world(SeedOptions::default());
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\"], \"answering\": { \"hookWaitSecs\": 3 } }\n",
    );
    w.ok(&w.repo, &["materialize"]);
    let settings: Value =
        serde_json::from_str(&read_or_empty(&w.repo.join(".claude/settings.json"))).unwrap();
    assert_eq!(
        settings["hooks"]["PermissionRequest"][0]["hooks"][0]["timeout"],
        33,
        "{}",
        pretty(&settings)
    );
    let id = launch(&w, &fake);
    let a = at_hooked_dialog(&w, &fake, &id, "USE_BASH run it", "Do you want to proceed?");
    let hook = a["hook"]["pid"].as_u64().unwrap();
    // Its budget spent, the hook exits printing nothing: the dialog stays for the person, and
    // the attention is answered with keys from then on.
    assert!(
        ends(hook, Duration::from_secs(20)),
        "the hook outlived its budget"
    );
    let a = w.record(&id)["attention"].clone();
    assert_eq!(a["via"]["how"], "keys", "{}", pretty(&a));
    assert!(a["hook"].is_null(), "{}", pretty(&a));
    assert!(screen(&w, &fake, &id).contains("Do you want to proceed?"));
    let done = answered(&w, &fake, &["approve", &id, "--json"]);
    assert_eq!(done["via"], "keys", "{}", pretty(&done));
    assert!(
        appears(&w.repo.join("bash_out.txt"), Duration::from_secs(20)),
        "the command did not run\n{}",
        host_log(&w, &id)
    );
    wait_status(&w, &id, "idle", Duration::from_mins(1));
    stop(&w, &fake, &id);
}

#[test]
fn hosted_claude_permission_answered_allow_deny_with_message_and_for_the_session() {
    let (w, fake) = claude_world_without_waiting_hook();
    let id = launch(&w, &fake);
    let out = w.repo.join("bash_out.txt");

    // allow: the command runs.
    let a = at_dialog(&w, &fake, &id, "USE_BASH run it", "Do you want to proceed?");
    assert_eq!(a["id"], "a1", "{}", pretty(&a));
    assert_eq!(a["kind"], "permission");
    assert_eq!(a["via"]["how"], "keys", "{}", pretty(&a));
    let ids: Vec<&str> = a["choices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["id"].as_str())
        .collect();
    assert_eq!(ids, ["allow", "allow-session", "deny"], "{}", pretty(&a));
    // From inside the session (its own id in the env): refused, nothing typed.
    let (code, text) = said(&w, &fake, &["approve", &id], &[("SPEX_SESSION_ID", &id)]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("cannot answer its own attention"), "{text}");
    let started = Instant::now();
    let done = answered(
        &w,
        &fake,
        &["answer", &id, "allow", "--attention", "a1", "--json"],
    );
    eprintln!(
        "answer allow (keys) confirmed in {:?} ({} ms by spex)",
        started.elapsed(),
        done["elapsed_ms"]
    );
    assert_eq!(done["attention"], "a1");
    assert_eq!(done["via"], "keys");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !out.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        out.exists(),
        "the command did not run\n{}",
        host_log(&w, &id)
    );
    let closed: Vec<Value> = w
        .events(&id)
        .into_iter()
        .filter(|e| e["kind"] == "attention.closed")
        .collect();
    assert_eq!(
        closed.last().unwrap()["how"],
        "spex answer",
        "{}",
        host_log(&w, &id)
    );
    assert_eq!(closed.last().unwrap()["choice"], "allow");
    wait_status(&w, &id, "idle", Duration::from_mins(1));

    // A stale answer (a1 closed): refused, and nothing changes.
    let (code, text) = said(
        &w,
        &fake,
        &["answer", &id, "allow", "--attention", "a1"],
        &[],
    );
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("a1"), "{text}");

    // deny with a message: the command does not run, the model gets the message.
    std::fs::remove_file(&out).unwrap();
    let a = at_dialog(
        &w,
        &fake,
        &id,
        "USE_BASH once more",
        "Do you want to proceed?",
    );
    assert_eq!(a["id"], "a2", "{}", pretty(&a));
    // The stale id of the last one is refused while a2 is open, and a2 stays open.
    let (code, text) = said(&w, &fake, &["approve", &id, "--attention", "a1"], &[]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("is not open") && text.contains("a2"),
        "{text}"
    );
    assert_eq!(w.record(&id)["attention"]["id"], "a2");
    let done = answered(
        &w,
        &fake,
        &[
            "deny",
            &id,
            "--message",
            "use make instead of echo",
            "--json",
        ],
    );
    assert_eq!(done["choice"], "deny");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !model_heard(&fake).contains("use make instead of echo") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        model_heard(&fake).contains("use make instead of echo"),
        "the model never got the message\n{}",
        host_log(&w, &id)
    );
    assert!(!out.exists(), "the denied command ran");
    wait_status(&w, &id, "idle", Duration::from_mins(1));

    // allow for the session: the dialog's option 2, which switches the session to accept edits.
    let a = at_dialog(
        &w,
        &fake,
        &id,
        "USE_BASH a third time",
        "Do you want to proceed?",
    );
    assert_eq!(a["id"], "a3");
    let dialog = screen(&w, &fake, &id);
    answered(&w, &fake, &["approve", &id, "--always", "--json"]);
    // Option 2 (`Yes, and always allow access to repo/ from this project`) is the one typed:
    // the dialog showed it, the command ran, and the close names the choice.
    assert!(dialog.contains("2. Yes, and"), "{dialog}");
    let closed = w
        .events(&id)
        .into_iter()
        .rfind(|e| e["kind"] == "attention.closed")
        .unwrap();
    assert_eq!(closed["choice"], "allow-session", "{}", host_log(&w, &id));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !out.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        out.exists(),
        "the command did not run\n{}",
        host_log(&w, &id)
    );
    wait_status(&w, &id, "idle", Duration::from_mins(1));
    stop(&w, &fake, &id);
}

/// The model was told `question`="`answer`" (as Claude words the answers in the tool result).
fn heard_answer(fake: &FakeAnthropic, question: &str, answer: &str) -> bool {
    model_hears(
        fake,
        &format!("\\\"{question}\\\"=\\\"{answer}\\\""),
        Duration::from_secs(30),
    )
}

#[test]
fn hosted_claude_questions_answered_through_the_hook_option_multi_select_free_text_and_several() {
    let (w, fake) = claude_world(SeedOptions::default());
    let id = launch(&w, &fake);
    let color = "Which color do you prefer?";
    let toppings = "Which toppings do you want?";

    // Two questions in one call: a single choice by label, a multi-select by labels.
    let a = at_hooked_dialog(&w, &fake, &id, "USE_ASK2 two questions", "Which color");
    assert_eq!(a["kind"], "question", "{}", pretty(&a));
    assert_eq!(a["via"]["how"], "hook", "{}", pretty(&a));
    assert_eq!(a["questions"][1]["multi_select"], true, "{}", pretty(&a));
    // One answer per question: a missing one, an option that does not exist, are refused and
    // the dialog stays open.
    let (code, text) = said(&w, &fake, &["answer", &id, "Blue"], &[]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("2 question(s)"), "{text}");
    let (code, text) = said(&w, &fake, &["answer", &id, "Blue", "Cheese,Ham"], &[]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("Cheese,Ham") && text.contains("Olives"),
        "{text}"
    );
    assert_eq!(w.record(&id)["attention"]["id"], a["id"]);
    let done = answered(
        &w,
        &fake,
        &["answer", &id, "blue", "Cheese,Basil", "--json"],
    );
    assert_eq!(done["via"], "hook", "{}", pretty(&done));
    assert!(heard_answer(&fake, color, "Blue"), "{}", host_log(&w, &id));
    assert!(
        heard_answer(&fake, toppings, "Cheese, Basil"),
        "{}",
        host_log(&w, &id)
    );
    wait_status(&w, &id, "idle", Duration::from_mins(1));

    // A multi-select alone, by option numbers.
    at_hooked_dialog(&w, &fake, &id, "USE_ASKMULTI toppings", "Which toppings");
    answered(&w, &fake, &["answer", &id, "2,3", "--json"]);
    assert!(
        heard_answer(&fake, toppings, "Olives, Basil"),
        "{}",
        host_log(&w, &id)
    );
    wait_status(&w, &id, "idle", Duration::from_mins(1));

    // Free text, where the question takes it (Claude offers "Type something").
    at_hooked_dialog(&w, &fake, &id, "USE_ASK a color", "Which color");
    let done = answered(&w, &fake, &["answer", &id, "Green, like grass", "--json"]);
    assert_eq!(done["via"], "hook");
    assert!(
        heard_answer(&fake, color, "Green, like grass"),
        "{}",
        host_log(&w, &id)
    );
    wait_status(&w, &id, "idle", Duration::from_mins(1));

    // Denied with a message: the model gets it, and the turn goes on.
    at_hooked_dialog(&w, &fake, &id, "USE_ASK once more", "Which color");
    answered(
        &w,
        &fake,
        &["deny", &id, "--message", "no colors today", "--json"],
    );
    assert!(
        model_hears(&fake, "no colors today", Duration::from_secs(30)),
        "{}",
        host_log(&w, &id)
    );
    let r = wait_status(&w, &id, "idle", Duration::from_mins(1));
    assert_eq!(r["turn"]["state"], "completed", "{}", pretty(&r));
    stop(&w, &fake, &id);
}

#[test]
fn hosted_claude_plan_approved_and_denied_with_a_message_through_the_hook() {
    let (w, fake) = claude_world(SeedOptions::default());
    let id = launch_json(&w, &fake, &["--", "--permission-mode", "plan"])["session"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let a = at_hooked_dialog(
        &w,
        &fake,
        &id,
        "USE_PLAN make a plan",
        "Would you like to proceed?",
    );
    assert_eq!(a["kind"], "plan", "{}", pretty(&a));
    assert_eq!(a["via"]["how"], "hook", "{}", pretty(&a));
    answered(
        &w,
        &fake,
        &["deny", &id, "--message", "add a test step first", "--json"],
    );
    assert!(
        model_hears(&fake, "add a test step first", Duration::from_secs(30)),
        "the model never got the message\n{}",
        host_log(&w, &id)
    );
    assert!(!model_heard(&fake).contains("User has approved your plan"));
    wait_status(&w, &id, "idle", Duration::from_mins(1));

    at_hooked_dialog(
        &w,
        &fake,
        &id,
        "USE_PLAN plan again",
        "Would you like to proceed?",
    );
    let done = answered(&w, &fake, &["approve", &id, "--json"]);
    assert_eq!(done["via"], "hook", "{}", pretty(&done));
    assert!(
        model_hears(
            &fake,
            "User has approved your plan",
            Duration::from_secs(30)
        ),
        "the plan was not approved\n{}",
        host_log(&w, &id)
    );
    // Approved, the session left plan mode (the prompt's footer no longer says it).
    wait_status(&w, &id, "idle", Duration::from_mins(1));
    assert!(
        !screen(&w, &fake, &id).contains("plan mode on"),
        "{}",
        screen(&w, &fake, &id)
    );
    stop(&w, &fake, &id);
}

#[test]
fn hosted_claude_question_answered_with_an_option() {
    let (w, fake) = claude_world_without_waiting_hook();
    let id = launch(&w, &fake);
    let a = at_dialog(&w, &fake, &id, "USE_ASK pick one", "Which color");
    assert_eq!(a["kind"], "question", "{}", pretty(&a));
    assert_eq!(
        a["questions"][0]["options"],
        serde_json::json!(["Red", "Blue"]),
        "{}",
        pretty(&a)
    );
    // `deliver` at the dialog names the attention and the command that answers it.
    let (code, text) = said(&w, &fake, &["deliver", &id, "hello"], &[]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("attention `a1`") && text.contains("spex answer"),
        "{text}"
    );
    let done = answered(&w, &fake, &["answer", &id, "Blue", "--json"]);
    assert_eq!(done["attention"], "a1", "{}", pretty(&done));
    let deadline = Instant::now() + Duration::from_secs(30);
    let want = "=\\\"Blue\\\"";
    while !model_heard(&fake).contains(want) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        model_heard(&fake).contains(want),
        "the model never got the answer\n{}",
        host_log(&w, &id)
    );
    wait_status(&w, &id, "idle", Duration::from_mins(1));
    stop(&w, &fake, &id);
}

/// A project on Codex with approvals on request in a workspace-write sandbox, so an escalated
/// command asks.
pub fn codex_rig() -> (World, FakeResponses) {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    let run = w.dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    let fake = FakeResponses::start_with_hang_limit(Duration::from_mins(1));
    write_codex_config(
        &w.codex_home,
        &fake.base_url(),
        "on-request",
        "workspace-write",
    );
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"codex\"] }\n",
    );
    crate::support::world::git(&w.repo, &["commit", "-q", "--allow-empty", "-m", "base"]);
    w.ok(&w.repo, &["materialize"]);
    (w, fake)
}

pub fn codex(w: &World, args: &[&str]) -> std::process::Command {
    let mut c = w.cmd(&w.repo, args);
    c.env("PATH", peers_path())
        .env("XDG_RUNTIME_DIR", w.dir.path().join("run"))
        .env("FAKE_API_KEY", "dummy")
        .env("OPENAI_API_KEY", "sk-dummy")
        .env("RUST_LOG", "warn");
    c
}

fn codex_json(w: &World, args: &[&str]) -> Result<Value, String> {
    json_result(args, &feed(&mut codex(w, args), b""))
}

pub fn codex_diag(w: &World, fake: &FakeResponses) -> String {
    let mut out = format!(
        "--- server log:\n{}",
        read_or_empty(&w.project_dir().join("servers/codex.log"))
    );
    for id in w.session_ids() {
        let dir = w.project_dir().join("sessions").join(&id);
        out.push_str(&format!(
            "\n--- {id}:\n{}\n{}",
            read_or_empty(&dir.join("session.json")),
            read_or_empty(&dir.join("events.jsonl"))
        ));
    }
    out.push_str(&format!("\n--- fake:\n{}", fake.request_lines().join("\n")));
    out
}

pub fn codex_waits(w: &World, fake: &FakeResponses, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        let r = w.record(id);
        if r["status"] == "needs_attention" && r["attention"]["via"]["how"] == "server" {
            return r["attention"].clone();
        }
        assert!(
            Instant::now() < deadline,
            "never waited for approval\n{}",
            codex_diag(w, fake)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn hosted_codex_escalation_answered_accept_and_decline() {
    let (w, fake) = codex_rig();
    let out = w.repo.join("escalated.txt");
    let launched = codex_json(
        &w,
        &[
            "launch",
            "--harness",
            "codex",
            "--detach",
            "--json",
            "SCENARIO:escalate",
        ],
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", codex_diag(&w, &fake)));
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let a = codex_waits(&w, &fake, &id);
    let ids: Vec<&str> = a["choices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["id"].as_str())
        .collect();
    assert_eq!(
        ids,
        ["allow", "allow-session", "deny", "cancel"],
        "{}",
        pretty(&a)
    );
    assert!(!out.exists());
    let started = Instant::now();
    let done = codex_json(&w, &["approve", &id, "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", codex_diag(&w, &fake)));
    eprintln!(
        "approve (server) confirmed in {:?} ({} ms by spex)",
        started.elapsed(),
        done["elapsed_ms"]
    );
    assert_eq!(done["via"], "server", "{}", pretty(&done));
    assert!(
        done["taken_ms"].as_u64().unwrap() <= done["elapsed_ms"].as_u64().unwrap(),
        "{}",
        pretty(&done)
    );
    assert!(
        done["confirmed"].as_str().unwrap().contains("ran"),
        "{}",
        pretty(&done)
    );
    assert_eq!(
        read_or_empty(&out),
        "escalated\n",
        "{}",
        codex_diag(&w, &fake)
    );
    let rec = w.record(&id);
    assert!(
        rec["attention"].is_null() || rec["attention"]["id"] != a["id"],
        "{}",
        pretty(&rec)
    );

    // decline, in the next turn: the command does not run and the model is told so.
    std::fs::remove_file(&out).unwrap();
    let deadline = Instant::now() + Duration::from_mins(1);
    while w.record(&id)["status"] != "idle" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    codex_json(&w, &["deliver", &id, "SCENARIO:escalate", "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", codex_diag(&w, &fake)));
    let b = codex_waits(&w, &fake, &id);
    assert_ne!(b["id"], a["id"]);
    // The closed one is refused while the new one waits.
    let (code, text) = {
        let out = codex(
            &w,
            &["approve", &id, "--attention", a["id"].as_str().unwrap()],
        )
        .output()
        .unwrap();
        (
            out.status.code(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    assert_eq!(code, Some(2), "{text}");
    let done = codex_json(&w, &["deny", &id, "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", codex_diag(&w, &fake)));
    assert!(
        done["confirmed"].as_str().unwrap().contains("decline"),
        "{}",
        pretty(&done)
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let heard = || {
        fake.requests()
            .iter()
            .any(|r| r["body"].to_string().contains("rejected by user"))
    };
    while !heard() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(heard(), "the model was not told\n{}", codex_diag(&w, &fake));
    assert!(!out.exists(), "the declined command ran");
    let _ = codex(&w, &["stop", &id]).output();
    let _ = codex(&w, &["server", "stop"]).output();
}

/// The hosted Codex TUI's screen (`spex snapshot`).
fn codex_screen(w: &World, id: &str) -> String {
    let out = codex(w, &["snapshot", id]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn codex_screen_until(
    w: &World,
    fake: &FakeResponses,
    id: &str,
    what: &str,
    pred: impl Fn(&str) -> bool,
) {
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        let now = codex_screen(w, id);
        if pred(&now) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}:\n{now}\n{}",
            codex_diag(w, fake)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A hosted Codex session with its TUI attached under spex's host, at an escalation: the first
/// answer wins. Answered by `spex approve` while the TUI shows the dialog: the command runs and
/// the TUI's dialog goes away. Answered in the TUI first (a person attached presses `y`): the
/// command runs, and the later `spex approve` of that attention is refused, sending nothing.
/// Away mode on changes none of it.
#[test]
fn hosted_codex_escalation_first_answer_wins_with_the_tui_attached() {
    let (w, fake) = codex_rig();
    crate::real_tui::CodexTui::prepare(&w, &fake.base_url());
    write_codex_config(
        &w.codex_home,
        &fake.base_url(),
        "on-request",
        "workspace-write",
    );
    let out = w.repo.join("escalated.txt");
    // Away mode holds no prompt of spex's own server (its environment says so to the hook).
    codex_json(&w, &["away", "on", "--json"]).unwrap();
    let launched = codex_json(
        &w,
        &[
            "launch",
            "--harness",
            "codex",
            "--detach",
            "--json",
            "SCENARIO:escalate",
        ],
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", codex_diag(&w, &fake)));
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let dialog = |s: &str| s.contains("Yes, proceed");

    // spex first, while the TUI shows the dialog.
    codex_waits(&w, &fake, &id);
    codex_screen_until(&w, &fake, &id, "the TUI never showed the dialog", dialog);
    let done = codex_json(&w, &["approve", &id, "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", codex_diag(&w, &fake)));
    assert!(
        done["confirmed"].as_str().unwrap().contains("ran"),
        "{}",
        pretty(&done)
    );
    assert_eq!(read_or_empty(&out), "escalated\n");
    codex_screen_until(&w, &fake, &id, "the TUI kept the answered dialog", |s| {
        !dialog(s)
    });

    // The TUI first: a person attached answers `y`; spex's later answer is refused.
    std::fs::remove_file(&out).unwrap();
    let deadline = Instant::now() + Duration::from_mins(1);
    while w.record(&id)["status"] != "idle" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    codex_json(&w, &["deliver", &id, "SCENARIO:escalate", "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", codex_diag(&w, &fake)));
    let b = codex_waits(&w, &fake, &id);
    let b_id = b["id"].as_str().unwrap().to_owned();
    let mut cmd = codex(&w, &["attach", &id]);
    cmd.env("TERM", "xterm-256color").env("LANG", "C.UTF-8");
    let t = crate::support::term::Term::spawn(&cmd, 40, 120);
    t.wait_for("Yes, proceed", Duration::from_mins(1))
        .unwrap_or_else(|e| panic!("{e}\n{}", t.diag()));
    t.send(b"y");
    let deadline = Instant::now() + Duration::from_mins(1);
    let mut pressed = Instant::now();
    while read_or_empty(&out) != "escalated\n" {
        // A key the TUI took before it was ready for it: the dialog is still there, press again.
        if pressed.elapsed() > Duration::from_secs(5) && t.text().contains("Yes, proceed") {
            t.send(b"y");
            pressed = Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "the command approved in the TUI never ran\n{}\n{}",
            t.diag(),
            codex_diag(&w, &fake)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let refused = codex(&w, &["approve", &id, "--attention", &b_id, "--json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&refused.stdout).into_owned()
        + &String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{text}");
    let said: Value =
        serde_json::from_slice(&refused.stdout).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(said["answered"], false, "{text}");
    assert!(text.contains(&b_id), "{text}");
    let closed = w
        .events(&id)
        .into_iter()
        .find(|e| e["kind"] == "attention.closed" && e["attention"] == b_id.as_str());
    let closed = closed.unwrap_or_else(|| panic!("b never closed\n{}", codex_diag(&w, &fake)));
    assert_eq!(closed["how"], "terminal", "{closed}");
    t.send(b"\x1c");
    let _ = codex(&w, &["stop", &id]).output();
    let _ = codex(&w, &["server", "stop"]).output();
}

/// A plain deny stops the turn (Claude's `No`): the turn ends `interrupted`, `by: denial`,
/// and the denied command never ran.
#[test]
fn a_deny_that_stops_the_turn_is_an_interrupt_by_denial() {
    let (w, fake) = claude_world(SeedOptions::default());
    let id = launch(&w, &fake);
    let a = at_dialog(&w, &fake, &id, "USE_BASH run it", "Do you want to proceed?");
    assert_eq!(a["id"], "a1", "{}", pretty(&a));
    answered(&w, &fake, &["deny", &id, "--json"]);
    let deadline = Instant::now() + Duration::from_mins(1);
    let rec = loop {
        // A reader folds in the evidence that the turn ended with no hook.
        let shown = run_json(&w, &fake, &["show", &id, "--json"]).unwrap();
        if shown["session"]["turn"]["state"] != "running" || Instant::now() > deadline {
            break shown["session"].clone();
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        rec["turn"]["state"],
        "interrupted",
        "{}\n{}",
        pretty(&rec),
        host_log(&w, &id)
    );
    assert_eq!(
        rec["turn"]["by"],
        "denial",
        "{}\n{}",
        pretty(&rec),
        host_log(&w, &id)
    );
    assert!(
        !w.repo.join("bash_out.txt").exists(),
        "the denied command ran"
    );
    let (_, show) = said(&w, &fake, &["show", &id], &[]);
    assert!(show.contains("interrupted by denial"), "{show}");
    run_json(&w, &fake, &["stop", &id, "--json"]).unwrap();
}
