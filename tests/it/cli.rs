//! The command line as people and scripts see it: help, the `/` menus, cleaning every
//! checkout, and declaring a session's state from inside a harness.

use crate::support::world::{World, merged, write};

#[test]
fn help_lists_every_command() {
    let w = World::new();
    let help = w.ok(&w.repo, &["--help"]);
    insta::assert_snapshot!(help);
}

#[test]
fn slash_lists_builtins_project_commands_and_skills() {
    let w = World::new();
    write(
        &w.repo.join(".claude/commands/deploy.md"),
        "---\ndescription: Ship it\n---\nDeploy $ARGUMENTS\n",
    );
    write(&w.repo.join(".claude/commands/sub/bar.md"), "Body\n");
    write(
        &w.repo.join(".claude/skills/review/SKILL.md"),
        "---\nname: review\ndescription: Review code\n---\n",
    );
    write(
        &w.repo.join(".agents/skills/lint/SKILL.md"),
        "---\nname: lint\ndescription: Lint it\n---\n",
    );
    let json: serde_json::Value =
        serde_json::from_str(&w.ok(&w.repo, &["slash", "--json"])).unwrap();
    let names = |h: &str| -> Vec<(String, String)> {
        json[h]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().unwrap().to_owned(),
                    e["kind"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let claude = names("claude");
    assert_eq!(
        claude
            .iter()
            .filter(|(_, k)| k == "built-in" || k == "bundled skill")
            .count(),
        73,
        "pinned Claude menu"
    );
    for want in [
        ("deploy", "project command"),
        ("sub:bar", "project command"),
        ("review", "project skill"),
        ("compact", "built-in"),
    ] {
        assert!(
            claude.contains(&(want.0.to_owned(), want.1.to_owned())),
            "claude lacks {want:?}: {claude:?}"
        );
    }
    let deploy = json["claude"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "deploy")
        .unwrap();
    assert_eq!(deploy["description"], "Ship it");
    let codex = names("codex");
    assert_eq!(
        codex.iter().filter(|(_, k)| k == "built-in").count(),
        53,
        "pinned Codex menu"
    );
    assert!(
        codex.contains(&("$lint".to_owned(), "project skill".to_owned())),
        "{codex:?}"
    );
    assert!(
        !codex.iter().any(|(n, _)| n == "deploy"),
        "Codex 0.169.0 loads no custom commands"
    );
    let only = w.ok(&w.repo, &["slash", "--harness", "plugin"]);
    assert!(
        only.starts_with("claude:\n") && only.contains("  /sub:bar"),
        "{only}"
    );
    let bad = w.spex(&w.repo, &["slash", "--harness", "vim"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown harness `vim`"));
}

#[test]
fn clean_all_trees_removes_every_checkouts_artifacts() {
    let w = World::new();
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\", \"codex\"] }",
    );
    write(
        &w.repo.join(".spec/rules/spec.md"),
        "---\nsurface: system\n---\nBe kind.\n",
    );
    let wt = w.add_worktree("wt");
    let before = w.snapshot(&[&wt]);
    w.ok(&w.repo, &["materialize"]);
    w.ok(&wt, &["materialize"]);
    w.ok(&wt, &["clean", "--all-trees"]);
    let diff = before.content_diff(&w.snapshot(&[&wt]));
    assert!(
        diff.is_empty(),
        "clean --all-trees left:\n{}",
        diff.join("\n")
    );
}

#[test]
fn an_agent_declares_its_state_through_its_harness_id() {
    let w = World::new();
    let payload = serde_json::json!({ "session_id": "thread-1", "cwd": w.repo, "hook_event_name": "SessionStart" });
    assert!(
        w.dispatch(&w.repo, "codex", "SessionStart", &payload)
            .status
            .success()
    );
    let out = w
        .cmd(
            &w.repo,
            &["session", "ask", "--note", "Which database?", "--json"],
        )
        .env("CODEX_THREAD_ID", "thread-1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["status"], "needs_attention");
    assert_eq!(rec["attention"]["reason"], "question");
    assert_eq!(rec["declared"]["state"], "asking");
    let show: serde_json::Value =
        serde_json::from_str(&w.ok(&w.repo, &["show", "thread", "--json", "--events", "1"]))
            .unwrap();
    assert_eq!(show["events"][0]["kind"], "declared");
    assert_eq!(show["events"][0]["note"], "Which database?");
    let waited = w.ok(
        &w.repo,
        &[
            "wait",
            "thr",
            "--until",
            "needs-attention",
            "--timeout",
            "5",
        ],
    );
    assert!(waited.contains("needs_attention"), "{waited}");
    let timeout = w.spex(
        &w.repo,
        &["wait", "thread-1", "--until", "exited", "--timeout", "0.2"],
    );
    assert_eq!(timeout.status.code(), Some(1), "timeout exits 1");
    let nobody = w.spex(&w.repo, &["session", "done", "--note", "x"]);
    assert_eq!(nobody.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&nobody.stderr).contains("cannot tell which session this is"));
}

#[test]
fn wait_wakes_when_the_state_changes() {
    let w = World::new();
    let feed = |event: &str, extra: serde_json::Value| {
        let base =
            serde_json::json!({ "session_id": "s-1", "cwd": w.repo, "hook_event_name": event });
        let out = w.dispatch(&w.repo, "claude", event, &merged(&base, &extra));
        assert!(out.status.success());
    };
    feed("UserPromptSubmit", serde_json::json!({ "prompt": "go" }));
    let waiter = w
        .cmd(
            &w.repo,
            &["wait", "s-1", "--until", "idle", "--timeout", "20"],
        )
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let started = std::time::Instant::now();
    feed("Stop", serde_json::json!({ "stop_hook_active": false }));
    let out = waiter.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "woke promptly: {:?}",
        started.elapsed()
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "s-1 idle");
    let list = w.ok(&w.repo, &["sessions"]);
    assert!(list.contains("s-1") && list.contains("idle"), "{list}");
}

#[test]
fn quiet_records_hide_turn_end_waits_and_an_exited_session_exits_3() {
    let w = World::new();
    let feed = |id: &str, event: &str, extra: serde_json::Value| {
        let base = serde_json::json!({ "session_id": id, "cwd": w.repo, "hook_event_name": event });
        let out = w.dispatch(&w.repo, "claude", event, &merged(&base, &extra));
        assert!(out.status.success());
    };
    feed("s-quiet", "SessionStart", serde_json::json!({}));
    feed(
        "s-busy",
        "UserPromptSubmit",
        serde_json::json!({ "prompt": "first" }),
    );
    // The ID column shows handles: the tails of the ids.
    let list = w.ok(&w.repo, &["sessions"]);
    assert_eq!(list.lines().count(), 2, "{list}");
    assert!(list.lines().nth(1).unwrap().starts_with("busy "), "{list}");
    let all = w.ok(&w.repo, &["sessions", "--all"]);
    assert_eq!(all.lines().count(), 3, "{all}");
    assert!(all.lines().any(|l| l.starts_with("uiet ")), "{all}");

    // The running turn's end.
    let waiter = w
        .cmd(
            &w.repo,
            &["wait", "s-busy", "--until", "turn-end", "--timeout", "20"],
        )
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    feed(
        "s-busy",
        "Stop",
        serde_json::json!({ "stop_hook_active": false }),
    );
    let out = waiter.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    // No turn running: the next one's end, which never comes here.
    let next = w.spex(
        &w.repo,
        &["wait", "s-busy", "--until", "turn-end", "--timeout", "0.3"],
    );
    assert_eq!(next.status.code(), Some(1), "{next:?}");

    // The newest prompt is the headline; `show` explains the state in one line.
    feed(
        "s-busy",
        "UserPromptSubmit",
        serde_json::json!({ "prompt": "second prompt" }),
    );
    let shown = w.ok(&w.repo, &["show", "s-busy"]);
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with("headline") && l.ends_with(" second prompt")),
        "{shown}"
    );
    assert!(
        shown.contains("working since") && shown.contains("(from hook UserPromptSubmit)"),
        "{shown}"
    );

    feed(
        "s-busy",
        "SessionEnd",
        serde_json::json!({ "reason": "other" }),
    );
    let started = std::time::Instant::now();
    let gone = w.spex(
        &w.repo,
        &["wait", "s-busy", "--until", "idle", "--timeout", "20"],
    );
    assert_eq!(gone.status.code(), Some(3), "{gone:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    assert!(
        String::from_utf8_lossy(&gone.stderr).contains("has exited (session end)"),
        "{gone:?}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&w.ok(&w.repo, &["show", "s-busy", "--json"])).unwrap();
    let s = &json["session"];
    assert_eq!(
        s["turn"]["state"], "interrupted",
        "an exit closes the running turn: {s}"
    );
    assert_eq!(s["source"], "hook SessionEnd", "{s}");
    let kinds: Vec<&str> = json["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert_eq!(
        kinds[kinds.len() - 2..],
        ["turn.interrupted", "session.exited"],
        "{kinds:?}"
    );
}

#[test]
fn prune_removes_old_exited_sessions_and_nothing_live() {
    let w = World::new();
    for thread in ["thread-old", "thread-live"] {
        let start = serde_json::json!({ "session_id": thread, "cwd": w.repo, "hook_event_name": "SessionStart" });
        assert!(
            w.dispatch(&w.repo, "codex", "SessionStart", &start)
                .status
                .success()
        );
    }
    let end = serde_json::json!({ "session_id": "thread-old", "cwd": w.repo, "hook_event_name": "SessionEnd", "reason": "other" });
    assert!(
        w.dispatch(&w.repo, "codex", "SessionEnd", &end)
            .status
            .success()
    );
    // Both records are 40 days old; only one has exited.
    for id in w.session_ids() {
        let path = w.session_dir(&id).join("session.json");
        let mut rec: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        rec["updated_at"] = "2026-10-01T00:00:00.000Z".into();
        write(&path, rec.to_string());
    }
    let dry: serde_json::Value = serde_json::from_str(&w.ok(
        &w.repo,
        &["prune", "--older-than", "30d", "--dry-run", "--json"],
    ))
    .unwrap();
    assert_eq!(dry["removed"], serde_json::json!(["thread-old"]));
    assert_eq!(w.session_ids().len(), 2, "a dry run removed something");
    let text = w.ok(&w.repo, &["prune", "--older-than", "30d"]);
    assert!(
        text.contains("removed 1 exited session") && text.contains("thread-old"),
        "{text}"
    );
    assert_eq!(w.session_ids(), ["thread-live"]);
    assert_eq!(w.alias("codex", "thread-old"), None);
    let bad = w.spex(&w.repo, &["prune", "--older-than", "soon"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("is not a duration"));
}

#[test]
fn the_event_log_stays_bounded_and_readable_across_rotations() {
    let w = World::new();
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"codex\"], \"store\": { \"eventLogBytes\": 4096 } }\n",
    );
    w.ok(&w.repo, &["materialize"]);
    let base = serde_json::json!({ "session_id": "thread-big", "cwd": w.repo, "turn_id": "t1" });
    let start = merged(
        &base,
        &serde_json::json!({"hook_event_name": "SessionStart"}),
    );
    assert!(
        w.dispatch(&w.repo, "codex", "SessionStart", &start)
            .status
            .success()
    );
    for i in 0..120 {
        let call = merged(
            &base,
            &serde_json::json!({"hook_event_name": "PreToolUse", "tool_name": "Bash",
                "tool_input": {"command": format!("echo {i}")}, "tool_use_id": format!("c{i}")}),
        );
        assert!(
            w.dispatch(&w.repo, "codex", "PreToolUse", &call)
                .status
                .success()
        );
    }
    let id = w.session_ids().pop().unwrap();
    let dir = w.session_dir(&id);
    let current = std::fs::metadata(dir.join("events.jsonl")).unwrap().len();
    let previous = std::fs::metadata(dir.join("events.jsonl.1")).unwrap().len();
    assert!(
        current <= 4096 && previous <= 4096,
        "{current} / {previous} bytes"
    );
    let shown: serde_json::Value =
        serde_json::from_str(&w.ok(&w.repo, &["show", &id, "--events", "1000", "--json"])).unwrap();
    let seqs: Vec<u64> = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|p| p[1] == p[0] + 1), "{seqs:?}");
    assert_eq!(
        *seqs.last().unwrap(),
        shown["session"]["seq"].as_u64().unwrap()
    );
    assert!(
        seqs.len() > 10 && seqs[0] > 1,
        "older events rotated out: {seqs:?}"
    );
}

/// The grammar check a dropped `World` runs is itself a check: a store whose event log opens a
/// second turn while one is open makes the drop panic and say so.
#[test]
fn dropping_a_world_whose_event_log_breaks_the_grammar_panics() {
    let w = World::new();
    let base = serde_json::json!({ "session_id": "thread-bad", "cwd": w.repo, "turn_id": "t1" });
    let start = merged(
        &base,
        &serde_json::json!({"hook_event_name": "SessionStart", "source": "startup"}),
    );
    assert!(
        w.dispatch(&w.repo, "codex", "SessionStart", &start)
            .status
            .success()
    );
    let prompt = merged(
        &base,
        &serde_json::json!({"hook_event_name": "UserPromptSubmit", "prompt": "go"}),
    );
    assert!(
        w.dispatch(&w.repo, "codex", "UserPromptSubmit", &prompt)
            .status
            .success()
    );
    let id = w
        .alias("codex", "thread-bad")
        .expect("the thread has a session");
    let dir = w.session_dir(&id);
    assert!(
        w.all_session_dirs().contains(&dir),
        "{} not among {:?}",
        dir.display(),
        w.all_session_dirs()
    );
    let events = w.events(&id);
    let started = events
        .iter()
        .find(|e| e["kind"] == "turn.started")
        .unwrap_or_else(|| panic!("no turn.started: {events:?}"));
    let mut again = started.clone();
    again["seq"] = (events.last().unwrap()["seq"].as_u64().unwrap() + 1).into();
    let log = dir.join("events.jsonl");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str(&format!("{again}\n"));
    write(&log, text);
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(w)));
    let payload = dropped.expect_err("dropping the world checks the grammar");
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default();
    assert!(
        message.contains("turn.started while a turn is open"),
        "{message}"
    );
}

/// An error prints as people read uv's: `error:` first, then its `Caused by:` lines, then its
/// `hint:` last, whether the hint is on an error the command wrote or on a module's error deep
/// in the chain.
#[test]
fn an_error_prints_its_causes_then_its_hint_last() {
    let w = World::new();
    let lines = |args: &[&str]| {
        let out = w.spex(&w.repo, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let prune = lines(&["prune", "--older-than", "soon"]);
    assert_eq!(prune.len(), 3, "{prune:#?}");
    assert_eq!(prune[0], "error: `--older-than soon` is not a duration");
    assert!(prune[1].starts_with("  Caused by: "), "{prune:#?}");
    assert_eq!(prune[2], "hint: e.g. `30d`, `12h`, `90min`");
    let declare = lines(&["session", "done"]);
    assert_eq!(
        declare,
        [
            "error: missing --note",
            "  Caused by: a declaration needs a note",
            "hint: `spex session done --note \"<text>\"`",
        ]
    );
    let cursor = lines(&["events", "--since", "bogus"]);
    assert_eq!(cursor.len(), 2, "{cursor:#?}");
    assert!(
        cursor[0].starts_with("error: `bogus` is not a cursor"),
        "{cursor:#?}"
    );
    assert_eq!(
        cursor[1],
        "hint: `spex events --since 0` starts from the oldest kept"
    );
}
