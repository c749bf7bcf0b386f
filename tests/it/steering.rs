//! Steering a session as a person and a script do: `launch` in every permission mode and with
//! harness arguments after `--`, Ctrl-C during an attached launch, prompts piped with a trailing
//! newline, a prompt that carries a paste's end, the answer to a question the agent declared,
//! and what spex says (and refuses) for a session the person started in their own terminal.
//! Against the REAL pinned Claude Code TUI (offline, fake Messages API); the notification rules
//! through the real `spex dispatch`. Needs `scripts/install-peers.sh`; fails, never skips.

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::runtime::{
    claude_world, host_log, launch, run_json, screen, spex_cmd, stop, wait_screen,
};
use crate::support::claude_home::{SeedOptions, claude_command};
use crate::support::fake_anthropic::FakeAnthropic;
use crate::support::http::random_hex;
use crate::support::term::Term;
use crate::support::world::{
    World, feed, json_result, pretty, read_or_empty, status_within, wait_status, write,
};

fn text(out: &Output) -> String {
    format!(
        "{}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `spex args` with `input` on stdin.
fn piped(w: &World, fake: &FakeAnthropic, args: &[&str], input: &str) -> Result<Value, String> {
    let out = feed(&mut spex_cmd(w, fake, args), input.as_bytes());
    json_result(args, &out)
}

/// Waits until the session's turn has ended (the record is idle again).
fn settled(w: &World, id: &str) -> Value {
    let r = wait_status(w, id, "idle", Duration::from_mins(1));
    assert_eq!(r["status"], "idle", "{}", pretty(&r));
    r
}

/// The prompts of the session's turns, in order.
fn prompts(w: &World, id: &str) -> Vec<Value> {
    w.events(id)
        .into_iter()
        .filter(|e| e["kind"] == "turn.started")
        .map(|e| e["prompt"].clone())
        .collect()
}

/// Claude's idle notification (about a minute after the prompt came back) changes no state,
/// so it changes no record: a failed turn's alert stays (an attention closes only by an answer,
/// a new turn, an interrupt or an exit), and `updated` does not move, so the table does not
/// reorder.
#[test]
fn an_idle_notification_keeps_a_failed_turns_alert_and_writes_nothing() {
    let w = World::new();
    let sid = "5f0c2a9e-1b2c-4d3e-8f40-000000000016";
    let hook = |event: &str, extra: Value| {
        let mut p = json!({ "session_id": sid, "cwd": w.repo, "hook_event_name": event });
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let out = w.dispatch(&w.repo, "claude", event, &p);
        assert!(out.status.success(), "{event}: {}", text(&out));
    };
    let files = || {
        let dir = w.project_dir().join("sessions").join(sid);
        (
            read_or_empty(&dir.join("session.json")),
            read_or_empty(&dir.join("events.jsonl")),
        )
    };
    let idle = json!({ "notification_type": "idle_prompt", "message": "Claude is waiting for your input" });
    hook("SessionStart", json!({ "source": "startup" }));
    hook(
        "UserPromptSubmit",
        json!({ "prompt": "go", "prompt_id": "p1" }),
    );
    hook(
        "StopFailure",
        json!({ "error": "unknown", "last_assistant_message": "API Error: 400 fake error 400", "prompt_id": "p1" }),
    );
    let failed = w.record(sid);
    assert_eq!(failed["turn"]["state"], "failed", "{}", pretty(&failed));
    assert_eq!(failed["attention"]["reason"], "turn_failed");
    let before = files();
    hook("Notification", idle.clone());
    assert_eq!(files(), before, "the idle notification changed the record");
    assert_eq!(w.record(sid)["attention"]["reason"], "turn_failed");

    // At an idle prompt after a completed turn, the same: nothing written, `updated` kept.
    hook(
        "UserPromptSubmit",
        json!({ "prompt": "again", "prompt_id": "p2" }),
    );
    hook(
        "Stop",
        json!({ "stop_hook_active": false, "prompt_id": "p2" }),
    );
    let done = w.record(sid);
    assert_eq!(done["status"], "idle", "{}", pretty(&done));
    assert!(done["attention"].is_null(), "a new turn closes the alert");
    let before = files();
    hook("Notification", idle);
    assert_eq!(files(), before, "the idle notification changed the record");
}

/// `--permission-mode` after `--` reaches Claude, and in every mode Claude's prompt is taken
/// for ready (its footer differs in each: only the default mode shows `? for shortcuts`) and
/// the first prompt is confirmed.
#[test]
fn launch_is_ready_and_takes_its_first_prompt_in_every_permission_mode() {
    let (w, fake) = claude_world(SeedOptions {
        bypass: true,
        ..SeedOptions::default()
    });
    // 2.1.197 asks about bypass mode at start despite `bypassPermissionsModeAccepted`; this
    // user setting skips the question (seen live).
    write(
        &w.home.join(".claude/settings.json"),
        "{\"skipDangerousModePermissionPrompt\": true}\n",
    );
    for (mode, footer) in [
        ("default", "? for shortcuts"),
        ("acceptEdits", "accept edits on"),
        ("plan", "plan mode on"),
        ("bypassPermissions", "bypass permissions on"),
    ] {
        let prompt = format!("USE_NONE first prompt in {mode}");
        let args = [
            "launch",
            "--harness",
            "claude",
            "--detach",
            "--json",
            "--ready-timeout",
            "40",
            &prompt,
            "--",
            "--permission-mode",
            mode,
        ];
        let mut cmd = spex_cmd(&w, &fake, &args);
        // As root, Claude allows bypass mode only in a sandbox.
        cmd.env("IS_SANDBOX", "1");
        let out = cmd.output().unwrap();
        let launched = json_result(&args, &out).unwrap_or_else(|e| panic!("{mode}: {e}"));
        let id = launched["session"]["id"].as_str().unwrap().to_owned();
        let d = &launched["delivery"];
        assert_eq!(d["confirmed"], true, "{mode}: {}", pretty(&launched));
        assert_eq!(prompts(&w, &id), [prompt.as_str()], "{}", host_log(&w, &id));
        settled(&w, &id);
        assert!(
            wait_screen(&w, &fake, &id, footer, Duration::from_secs(20)),
            "{mode}: the footer `{footer}` never showed:\n{}",
            screen(&w, &fake, &id)
        );
        stop(&w, &fake, &id);
    }
}

/// `echo … | spex launch --detach -` and `echo … | spex deliver <id> -`: Claude reports the
/// prompt without its trailing newline (and a tab as four spaces); the confirmation compares
/// the prompt as Claude normalises it, so both are confirmed at once, and a trailing space
/// leaves an idle session's delivery an injection, not "queued".
#[test]
fn a_piped_prompt_with_a_trailing_newline_is_confirmed() {
    let (w, fake) = claude_world(SeedOptions::default());
    let started = Instant::now();
    let launched = piped(
        &w,
        &fake,
        &["launch", "--harness", "claude", "--detach", "--json", "-"],
        "USE_NONE piped into launch\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        launched["delivery"]["confirmed"],
        true,
        "{}",
        pretty(&launched)
    );
    assert!(started.elapsed() < Duration::from_secs(45));
    settled(&w, &id);
    for (input, mode) in [
        ("USE_NONE piped into deliver\t \n", "inject"),
        ("USE_NONE trailing space ", "inject"),
        // Long enough for Claude to keep it as a pasted block, trailing blanks and all.
        ("USE_NONE one\ntwo\nthree \n\n", "inject"),
    ] {
        let started = Instant::now();
        let d = piped(
            &w,
            &fake,
            &["deliver", &id, "-", "--json", "--timeout", "20"],
            input,
        )
        .unwrap_or_else(|e| panic!("{input:?}: {e}\n{}", host_log(&w, &id)));
        assert_eq!(d["confirmed"], true, "{input:?}: {}", pretty(&d));
        assert_eq!(d["mode"], mode, "{input:?}: {}", pretty(&d));
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{input:?} took {:?}",
            started.elapsed()
        );
        settled(&w, &id);
    }
    assert_eq!(
        prompts(&w, &id),
        [
            "USE_NONE piped into launch",
            "USE_NONE piped into deliver",
            "USE_NONE trailing space",
            "USE_NONE one\ntwo\nthree \n\n"
        ],
        "{}",
        host_log(&w, &id)
    );
    stop(&w, &fake, &id);
}

/// A prompt carrying the paste's end (`ESC[201~`) and Shift+Tab (`ESC[Z`, which cycles Claude's
/// permission mode) arrives as ONE paste: the escapes are made visible, the whole text is the
/// prompt, `--json` says `sanitized: true`, and the session's mode is unchanged.
#[test]
fn a_prompt_carrying_a_paste_end_arrives_whole_and_changes_no_mode() {
    let (w, fake) = claude_world(SeedOptions::default());
    let id = launch(&w, &fake);
    let sent = "USE_NONE head\x1b[201~middle\x1b[Z tail";
    let d = run_json(&w, &fake, &["deliver", &id, sent, "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    assert_eq!(d["confirmed"], true, "{}", pretty(&d));
    assert_eq!(d["sanitized"], true, "{}", pretty(&d));
    assert_eq!(
        prompts(&w, &id),
        ["USE_NONE head\u{241b}[201~middle\u{241b}[Z tail"],
        "{}",
        host_log(&w, &id)
    );
    settled(&w, &id);
    assert!(
        wait_screen(&w, &fake, &id, "? for shortcuts", Duration::from_secs(20)),
        "{}",
        screen(&w, &fake, &id)
    );
    assert!(
        !screen(&w, &fake, &id).contains("accept edits on"),
        "the text switched the permission mode:\n{}",
        screen(&w, &fake, &id)
    );
    // A plain prompt is not marked.
    let d = run_json(&w, &fake, &["deliver", &id, "USE_NONE plain", "--json"]).unwrap();
    assert_eq!(d["sanitized"], false, "{}", pretty(&d));
    stop(&w, &fake, &id);
}

/// A question the agent declared in text (`spex session ask`) shows no dialog: its answer is a
/// prompt, delivered as any other, and the new turn closes the attention.
#[test]
fn the_answer_to_a_declared_question_is_delivered_and_closes_it() {
    let (w, fake) = claude_world(SeedOptions::default());
    let id = launch(&w, &fake);
    run_json(
        &w,
        &fake,
        &["deliver", &id, "USE_NONE look around", "--json"],
    )
    .unwrap();
    settled(&w, &id);
    let mut ask = spex_cmd(&w, &fake, &["session", "ask", "--note", "Red or blue?"]);
    ask.env("SPEX_SESSION_ID", &id);
    let out = ask.output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let asking = w.record(&id);
    assert_eq!(asking["status"], "needs_attention", "{}", pretty(&asking));
    assert_eq!(asking["attention"]["reason"], "question");
    let d = run_json(&w, &fake, &["deliver", &id, "USE_NONE blue", "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    assert_eq!(d["confirmed"], true, "{}", pretty(&d));
    assert_eq!(d["mode"], "inject");
    let answered = w.record(&id);
    assert!(answered["attention"].is_null(), "{}", pretty(&answered));
    assert_eq!(answered["turn"]["prompt"], "USE_NONE blue");
    assert!(
        w.events(&id)
            .iter()
            .any(|e| e["kind"] == "attention.closed" && e["reason"] == "question"),
        "{}",
        host_log(&w, &id)
    );
    settled(&w, &id);
    stop(&w, &fake, &id);
}

/// A fresh random version-4 UUID (for `claude --session-id`).
fn fresh_uuid() -> String {
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

/// `spex args`: its output, with the exit code it must have and what it must say.
fn refused(w: &World, fake: &FakeAnthropic, args: &[&str], code: i32, says: &[&str]) -> String {
    let out = spex_cmd(w, fake, args).output().unwrap();
    let all = text(&out);
    assert_eq!(out.status.code(), Some(code), "spex {args:?}: {all}");
    for s in says {
        assert!(all.contains(s), "spex {args:?} does not say `{s}`: {all}");
    }
    assert!(
        !all.contains("killed or crashed"),
        "spex {args:?} blames a crash: {all}"
    );
    all
}

/// A Claude the person started in their own terminal (here a PTY the test owns), which spex
/// knows from its hooks: `resume` refuses it while it lives (no second `claude --resume` on the
/// conversation); `deliver`, `stop` and `snapshot` say it runs in a terminal of its own and
/// what to do instead, exit 2 (not 3: it has not exited) and never say the host crashed;
/// reading it appends nothing. Once it has ended, `deliver` says how and when, exit 3.
#[test]
fn resume_of_a_live_session_started_in_its_own_terminal_is_refused() {
    let (w, fake) = claude_world(SeedOptions::default());
    let sid = fresh_uuid();
    let mut cmd = claude_command(&w.home, &fake.base_url());
    cmd.current_dir(&w.repo)
        .env("PATH", crate::support::peers::peers_path())
        .env("SPEX_HOME", &w.spex_home)
        .env("XDG_CONFIG_HOME", &w.xdg_config)
        .env("CODEX_HOME", &w.codex_home)
        .args(["--session-id", &sid]);
    let mut t = Term::spawn(&cmd, 40, 120);
    t.wait_for("? for shortcuts", Duration::from_mins(1))
        .unwrap_or_else(|e| panic!("{e}"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while w.record_if_any(&sid).is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let record = w.record(&sid);
    assert_eq!(record["launched_by"], "self", "{}", pretty(&record));
    let seq = record["seq"].clone();
    let dir = w.project_dir().join("sessions").join(&sid);

    let own = "runs in a terminal of its own that spex does not host";
    refused(
        &w,
        &fake,
        &["resume", &sid, "--detach"],
        2,
        &[own, "spex cannot resume it", "it is still running"],
    );
    assert!(
        !dir.join("host.log").exists(),
        "resume started a host:\n{}",
        read_or_empty(&dir.join("host.log"))
    );
    refused(
        &w,
        &fake,
        &["deliver", &sid, "USE_NONE from outside", "--json"],
        2,
        &[
            own,
            "cannot deliver a prompt to it",
            "type the prompt in that terminal",
        ],
    );
    refused(&w, &fake, &["stop", &sid], 2, &[own, "cannot stop it"]);
    refused(&w, &fake, &["snapshot", &sid], 2, &[own, "`spex show`"]);
    for _ in 0..2 {
        run_json(&w, &fake, &["sessions", "--all", "--json"]).unwrap();
        run_json(&w, &fake, &["show", &sid, "--json"]).unwrap();
    }
    let now = w.record(&sid);
    assert_eq!(
        now["seq"],
        seq,
        "reading the session changed it: {}",
        pretty(&now)
    );
    assert_ne!(now["status"], "exited", "{}", pretty(&now));
    assert!(t.running(), "the person's Claude ended:\n{}", t.diag());
    assert!(
        t.text().contains("? for shortcuts"),
        "nothing was typed into it:\n{}",
        t.diag()
    );

    // The person gives it a long turn in their terminal: `interrupt` cannot reach it either.
    t.send(b"\x1b[200~USE_NONE DELAY=60 a long turn\x1b[201~");
    // Enter as a person presses it: again when the first did not submit (a first prompt
    // right after start can stay in the box, facts/claude.md §7.4).
    let mut working = w.record(&sid);
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(300));
        t.send(b"\r");
        match status_within(&w, &sid, "working", Duration::from_secs(8)) {
            Ok(r) => {
                working = r;
                break;
            }
            Err(last) => working = last,
        }
    }
    assert_eq!(
        working["status"],
        "working",
        "{}\n{}\ndispatch errors:\n{}\nevents:\n{}",
        pretty(&working),
        t.diag(),
        read_or_empty(&w.spex_home.join("dispatch-errors.log")),
        read_or_empty(&dir.join("events.jsonl"))
    );
    refused(
        &w,
        &fake,
        &["interrupt", &sid],
        2,
        &[own, "cannot interrupt it", "its interrupt key"],
    );
    // The person interrupts it (Esc) and empties the box the prompt came back into.
    t.send(b"\x1b");
    std::thread::sleep(Duration::from_secs(1));
    t.wait_until(Duration::from_secs(20), |v| {
        !v.text().contains("esc to interrupt")
    })
    .unwrap_or_else(|e| panic!("{e}"));
    for _ in 0..5 {
        t.send(&[0x15; 8]);
        if t.wait_for("? for shortcuts", Duration::from_secs(3))
            .is_ok()
        {
            break;
        }
    }
    t.wait_for("? for shortcuts", Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("{e}"));

    // The person quits it (Ctrl-D twice): now it has exited, and `deliver` says so.
    // The second Ctrl-D must come while Claude still shows "again to exit"; under load a
    // person would press the pair again.
    let mut ended = w.record(&sid);
    for _ in 0..3 {
        t.send(b"\x04");
        let _ = t.wait_for("again to exit", Duration::from_secs(5));
        t.send(b"\x04");
        match status_within(&w, &sid, "exited", Duration::from_secs(15)) {
            Ok(r) => {
                ended = r;
                break;
            }
            Err(last) => ended = last,
        }
    }
    assert_eq!(
        ended["status"],
        "exited",
        "{}\n{}",
        pretty(&ended),
        t.diag()
    );
    let said = refused(
        &w,
        &fake,
        &["deliver", &sid, "USE_NONE too late"],
        3,
        &["has exited (session end", " at "],
    );
    assert!(!said.contains(own), "{said}");
}

/// Ctrl-C typed into the person's terminal while an attached `spex launch "prompt"` waits for
/// Claude to start: the launch stops the session it started and says so, with the session's
/// handle and that the prompt was not sent; it exits 130. Nothing keeps running.
#[test]
fn ctrl_c_during_an_attached_launch_stops_the_session_and_says_so() {
    let (w, fake) = claude_world(SeedOptions::default());
    let cmd = spex_cmd(
        &w,
        &fake,
        &["launch", "--harness", "claude", "USE_NONE never sent"],
    );
    let mut t = Term::spawn(&cmd, 40, 120);
    let deadline = Instant::now() + Duration::from_secs(30);
    while w.session_ids().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let ids = w.session_ids();
    assert_eq!(ids.len(), 1, "{}", t.diag());
    let id = ids[0].clone();
    // Once its host answers, Claude is starting and the launch waits for its prompt.
    let socket = w.dir.path().join("run/spex").join(format!("{id}.sock"));
    while !socket.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        w.record(&id)["status"] == "starting" && t.running(),
        "{}",
        t.diag()
    );
    t.send(b"\x03");
    let status = t
        .exit_within(Duration::from_secs(30))
        .unwrap_or_else(|| panic!("the launch did not end:\n{}", t.diag()));
    let diag = || {
        format!(
            "{}\n{}\n{}",
            t.diag(),
            pretty(&w.record(&id)),
            host_log(&w, &id)
        )
    };
    assert_eq!(status.exit_code(), 130, "{}", diag());
    // The whole line: the screen is read as the bytes arrive, and the line can come in pieces.
    t.wait_for("its first prompt was not sent", Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("{e}\n{}", diag()));
    let said = t.text();
    // A reader gives the session its handle (the one the launch printed).
    run_json(&w, &fake, &["show", &id, "--json"]).unwrap_or_else(|e| panic!("{e}"));
    let record = w.record(&id);
    let handle = record["handle"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", diag()));
    assert!(
        said.contains(&format!("session {handle} stopped")),
        "{}",
        diag()
    );
    assert!(said.contains("its first prompt was not sent"), "{}", diag());
    assert_eq!(record["status"], "exited", "{}", diag());
    assert!(
        !record["exit_status"].is_null(),
        "the host did not see Claude end: {}",
        diag()
    );
    assert!(prompts(&w, &id).is_empty(), "{}", diag());
    assert!(!socket.exists(), "the host still runs:\n{}", diag());
    // A session that was stopped has ended, and says how and when, not that its host crashed.
    for (args, code) in [
        (vec!["snapshot", id.as_str()], 2),
        (vec!["deliver", id.as_str(), "USE_NONE late"], 3),
        (vec!["attach", id.as_str()], 2),
    ] {
        // How Claude ends on the SIGTERM varies (the signal, or an exit code once it handles
        // it); what matters is that the error says how and when, never a crash.
        refused(&w, &fake, &args, code, &["has exited (", ") at "]);
    }
}
