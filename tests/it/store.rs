//! The hook path and the store under unlucky input and concurrent commands (issue 19 items 9,
//! 13, 14, 15, 17): payloads that do not parse as they came still record their event; records
//! from a newer spex keep what this one does not know; `prune` never races `dispatch`; no
//! session stays `starting` or comes back half-exited; the store is private.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::claude_home::{claude_command, print_prompt};
use crate::support::fake_anthropic::FakeAnthropic;
use crate::support::payloads;
use crate::support::world::{World, feed, pretty, read, read_or_empty, write};

const TURN_TIMEOUT: Duration = Duration::from_secs(90);

fn fixture(w: &World, harness: &str, stem: &str) -> Value {
    let path = Path::new(payloads::PAYLOADS)
        .join(harness)
        .join(format!("{stem}.json"));
    payloads::localize(
        serde_json::from_str(&read(&path)).expect("fixture is JSON"),
        &w.repo,
        &w.home,
    )
}

/// A captured payload as the harness wrote it (its members in the harness's order, which a
/// JSON value here would sort), moved into the world as [`payloads::localize`] does.
fn fixture_text(w: &World, harness: &str, stem: &str) -> String {
    let path = Path::new(payloads::PAYLOADS)
        .join(harness)
        .join(format!("{stem}.json"));
    let text = read(&path);
    let v: Value = serde_json::from_str(&text).expect("fixture is JSON");
    let cwd = v["cwd"].as_str().expect("a cwd").to_owned();
    text.replace(&cwd, w.repo.to_str().unwrap())
        .replace("/home/dev", w.home.to_str().unwrap())
}

/// `spex dispatch harness event` with the raw bytes `payload`: exit 0 and nothing printed
/// (these events answer nothing).
fn dispatch_raw(w: &World, harness: &str, event: &str, payload: &[u8]) {
    let out = feed(&mut w.cmd(&w.repo, &["dispatch", harness, event]), payload);
    assert_eq!(
        (
            out.status.code(),
            out.stdout.as_slice(),
            out.stderr.as_slice()
        ),
        (Some(0), &b""[..], &b""[..]),
        "{harness} {event}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A session started and working on a turn: `SessionStart` and `UserPromptSubmit` of the
/// harness's captured payloads.
fn working(w: &World, harness: &str) -> String {
    let start = fixture(w, harness, "SessionStart.startup");
    dispatch_raw(w, harness, "SessionStart", start.to_string().as_bytes());
    let prompt = fixture(w, harness, "UserPromptSubmit");
    dispatch_raw(
        w,
        harness,
        "UserPromptSubmit",
        prompt.to_string().as_bytes(),
    );
    let sid = start["session_id"].as_str().unwrap().to_owned();
    let ids = w.session_ids();
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(w.record(&ids[0])["status"], "working", "{sid}");
    ids[0].clone()
}

/// Issue 19 item 9: a Stop whose text holds a lone surrogate escape (JavaScript writes one for
/// half an emoji) did not parse and was dropped: the session stayed `working` forever. It is
/// read with the escape replaced (U+FFFD), and the mending is logged.
#[test]
fn a_stop_with_a_lone_surrogate_escape_ends_the_turn() {
    for harness in ["claude", "codex"] {
        let w = World::new();
        let id = working(&w, harness);
        let stop = fixture(&w, harness, "Stop");
        let text = stop.to_string().replacen(
            "\"last_assistant_message\":\"",
            "\"last_assistant_message\":\"half \\ud83d: ",
            1,
        );
        assert!(text.contains("\\ud83d: "), "{harness}: {text}");
        dispatch_raw(&w, harness, "Stop", text.as_bytes());
        let r = w.record(&id);
        assert_eq!(
            (r["status"].as_str(), r["turn"]["state"].as_str()),
            (Some("idle"), Some("completed")),
            "{harness}: {}",
            pretty(&r)
        );
        let log = w.errors_log();
        assert!(
            log.contains("lone surrogate") && log.contains("\"event\":\"Stop\""),
            "{harness}: the mending is not logged: {log}"
        );
    }
}

/// Issue 19 item 9: a payload over 8 MiB was cut at the limit, did not parse and was dropped.
/// Its event is recorded from the ids before the cut, the cut body marked (`payload_cut`).
#[test]
fn a_payload_over_the_size_limit_still_records_its_event() {
    let big = "x".repeat(9 * 1024 * 1024);
    // Claude: a Write whose content is 9 MiB (the path comes before it): the call is recorded
    // with its file.
    let w = World::new();
    let id = working(&w, "claude");
    let text = fixture_text(&w, "claude", "PreToolUse.Write").replacen(
        "\"hello from fake model\\n\"",
        &json!(big).to_string(),
        1,
    );
    assert!(text.len() > 9 * 1024 * 1024, "{text:.300}");
    dispatch_raw(&w, "claude", "PreToolUse", text.as_bytes());
    let events = w.events(&id);
    let last = events.last().unwrap();
    assert_eq!(
        (&last["kind"], &last["files"], &last["payload_cut"]),
        (&json!("tool.started"), &json!(["hello.txt"]), &json!(true)),
        "{}",
        pretty(last)
    );
    assert!(
        w.errors_log().contains("over the 8388608-byte limit"),
        "the cut is not logged: {}",
        w.errors_log()
    );
    // Codex: a Stop whose last message is 9 MiB ends the turn.
    let w = World::new();
    let id = working(&w, "codex");
    let stop = fixture(&w, "codex", "Stop");
    let text = fixture_text(&w, "codex", "Stop").replacen(
        &stop["last_assistant_message"].to_string(),
        &json!(big).to_string(),
        1,
    );
    assert!(text.len() > 9 * 1024 * 1024);
    dispatch_raw(&w, "codex", "Stop", text.as_bytes());
    let r = w.record(&id);
    assert_eq!(
        (r["status"].as_str(), r["turn"]["state"].as_str()),
        (Some("idle"), Some("completed")),
        "{}",
        pretty(&r)
    );
    let events = w.events(&id);
    let last = events.last().unwrap();
    assert_eq!(
        (&last["kind"], &last["payload_cut"]),
        (&json!("turn.completed"), &json!(true))
    );
}

/// Issue 19 item 9 with the real Claude Code: a model answer holding a lone surrogate escape
/// (a model cut mid-emoji streams one; JavaScript keeps it and writes it back as `\ud800` in
/// the Stop hook's payload). The turn ends `completed`, not `interrupted` by the session's end.
#[test]
fn a_real_claude_turn_whose_answer_holds_a_lone_surrogate_completes() {
    let w = World::new();
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\"] }\n",
    );
    w.ok(&w.repo, &["materialize"]);
    let fake = FakeAnthropic::start();
    let mut cmd = claude_command(&w.home, &fake.base_url());
    cmd.env("SPEX_HOME", &w.spex_home);
    let turn = print_prompt(
        &mut cmd,
        &fake,
        &w.repo,
        w.dir.path(),
        "surrogate",
        "Answer in one line. USE_SURROGATE",
        TURN_TIMEOUT,
    );
    assert!(
        turn.stdout.contains("SURROGATE_OK"),
        "the answer did not come\n{}",
        turn.diag
    );
    let ids = w.session_ids();
    assert_eq!(ids.len(), 1, "{ids:?}\n{}", turn.diag);
    let r = w.record(&ids[0]);
    let kinds: Vec<String> = w
        .events(&ids[0])
        .iter()
        .map(|e| {
            format!(
                "{} ({})",
                e["kind"].as_str().unwrap_or(""),
                e["source"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        r["turn"]["state"],
        "completed",
        "{}\nevents: {kinds:?}\nerrors: {}\n{}",
        pretty(&r),
        read_or_empty(&w.spex_home.join("dispatch-errors.log")),
        turn.diag
    );
    assert!(
        kinds.contains(&"turn.completed (Stop)".to_owned()),
        "{kinds:?}"
    );
}

/// Issue 19 item 13: members of `session.json` this spex does not know (written by a newer
/// one), at the top and inside `turn`, `flags`, `process` and `exit_status`, were dropped when
/// the record was rewritten. They survive hooks and readers, and `sessions --json` /
/// `show --json` print them.
#[test]
fn a_record_from_a_newer_spex_keeps_what_this_one_does_not_know() {
    let w = World::new();
    let id = working(&w, "claude");
    let path = w.session_dir(&id).join("session.json");
    let mut r = w.record(&id);
    r["from_a_newer_spex"] = json!({"kept": [1, "two"]});
    r["turn"]["newer_turn_member"] = json!("kept");
    r["flags"]["newer_flag"] = json!(true);
    // This test's own process (alive, with its start time), so liveness leaves the record be.
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let start: u64 = after_name.split(' ').nth(19).unwrap().parse().unwrap();
    r["process"] = json!({"pid": std::process::id(), "start": start, "newer_process_member": 1});
    r["exit_status"] = json!({"code": null, "signal": null, "newer_exit_member": [2]});
    write(&path, serde_json::to_string_pretty(&r).unwrap());
    for (event, stem) in [("PostToolUse", "PostToolUse.Write"), ("Stop", "Stop")] {
        let payload = fixture(&w, "claude", stem);
        dispatch_raw(&w, "claude", event, payload.to_string().as_bytes());
    }
    let shown = w.ok(&w.repo, &["show", &id, "--json"]);
    let listed = w.ok(&w.repo, &["sessions", "--all", "--json"]);
    let r = w.record(&id);
    assert_eq!(r["turn"]["state"], "completed", "{}", pretty(&r));
    for (what, v) in [
        ("session.json", r),
        (
            "show --json",
            serde_json::from_str::<Value>(&shown).unwrap()["session"].clone(),
        ),
        (
            "sessions --json",
            serde_json::from_str::<Value>(&listed).unwrap()[0].clone(),
        ),
    ] {
        assert_eq!(
            (
                &v["from_a_newer_spex"],
                &v["turn"]["newer_turn_member"],
                &v["flags"]["newer_flag"],
                &v["process"]["newer_process_member"],
                &v["exit_status"]["newer_exit_member"],
            ),
            (
                &json!({"kept": [1, "two"]}),
                &json!("kept"),
                &json!(true),
                &json!(1),
                &json!([2])
            ),
            "{what}: {}",
            pretty(&v)
        );
    }
}

/// Issue 19 item 14: `prune` removed a session's folder, lock included, while hooks of that
/// session waited on the lock; a waiter then worked under a lock no later hook could find, and
/// two hooks appended events with one `seq` (about 1 round in 6). The lock is checked to still
/// be the file at its path once taken. Each round: 30 hooks of an exited session (its
/// `SessionEnd` again, which leaves it exited: prunable throughout), `prune` in their midst;
/// the log that remains is contiguous and the record's `seq` is its last.
#[test]
fn prune_amid_hooks_never_duplicates_an_event_seq() {
    let w = World::new();
    let start = fixture(&w, "claude", "SessionStart.startup");
    let end = fixture(&w, "claude", "SessionEnd.other");
    for round in 0..30 {
        let sid = format!("0000prune-round-{round:02}");
        let with_sid = |p: &Value| {
            let mut p = p.clone();
            p["session_id"] = json!(sid);
            p.to_string().into_bytes()
        };
        dispatch_raw(&w, "claude", "SessionStart", &with_sid(&start));
        dispatch_raw(&w, "claude", "SessionEnd", &with_sid(&end));
        assert_eq!(w.record(&sid)["status"], "exited");
        let hook = with_sid(&end);
        // The hooks all wait on their stdin, then go at once, `prune` among them: they queue
        // on the session's lock while `prune` holds it.
        let mut children: Vec<std::process::Child> = (0..30)
            .map(|_| {
                crate::support::world::spawn_piped(
                    &mut w.cmd(&w.repo, &["dispatch", "claude", "SessionEnd"]),
                )
            })
            .collect();
        let prune = crate::support::world::spawn_piped(
            &mut w.cmd(&w.repo, &["prune", "--older-than", "0s"]),
        );
        for c in &mut children {
            let mut stdin = c.stdin.take().unwrap();
            std::io::Write::write_all(&mut stdin, &hook).unwrap();
        }
        let outs: Vec<_> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let pruned = crate::support::world::finish(prune, Vec::new());
        assert!(
            pruned.status.success(),
            "round {round}: prune failed: {}",
            String::from_utf8_lossy(&pruned.stderr)
        );
        for out in &outs {
            assert_eq!(out.status.code(), Some(0), "round {round}");
        }
        let events = w.events(&sid);
        let seqs: Vec<u64> = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
        let want: Vec<u64> = (1..=seqs.len() as u64).collect();
        assert_eq!(seqs, want, "round {round}: the log's seq");
        if let Some(r) = w.record_if_any(&sid) {
            assert_eq!(r["seq"], json!(seqs.len()), "round {round}: {}", pretty(&r));
        }
    }
}

/// The kinds of a session's events, in order.
fn kinds(w: &World, id: &str) -> Vec<String> {
    w.events(id)
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Issue 19 item 15: hooks after `SessionEnd` revived an exited record half-way (a late Stop
/// made it `idle` with its exit reason still set). One rule now: a late word of a session that
/// is over moves nothing; a new prompt (or start) of its own is the session resumed, recorded
/// as `session.resumed`, its exit forgotten.
#[test]
fn hooks_after_session_end_move_nothing_until_a_new_turn_resumes_it() {
    for harness in ["claude", "codex"] {
        let w = World::new();
        let id = working(&w, harness);
        let end = match harness {
            "claude" => fixture(&w, harness, "SessionEnd.other"),
            _ => fixture(&w, harness, "SessionEnd"),
        };
        dispatch_raw(&w, harness, "SessionEnd", end.to_string().as_bytes());
        let exited = w.record(&id);
        assert_eq!(exited["status"], "exited", "{harness}: {}", pretty(&exited));
        let late = [
            ("Stop", fixture(&w, harness, "Stop")),
            ("PostToolUse", fixture(&w, harness, "PostToolUse.Bash")),
            ("PreToolUse", fixture(&w, harness, "PreToolUse.Bash")),
        ];
        for (event, payload) in &late {
            dispatch_raw(&w, harness, event, payload.to_string().as_bytes());
            let r = w.record(&id);
            assert_eq!(
                (&r["status"], &r["exit_reason"], &r["seq"]),
                (&exited["status"], &exited["exit_reason"], &exited["seq"]),
                "{harness}: a late {event} moved the exited record: {}",
                pretty(&r)
            );
        }
        let prompt = fixture(&w, harness, "UserPromptSubmit");
        dispatch_raw(
            &w,
            harness,
            "UserPromptSubmit",
            prompt.to_string().as_bytes(),
        );
        let r = w.record(&id);
        assert_eq!(
            (
                r["status"].as_str(),
                r["exit_reason"].is_null(),
                r["turn"]["state"].as_str()
            ),
            (Some("working"), true, Some("running")),
            "{harness}: {}",
            pretty(&r)
        );
        let k = kinds(&w, &id);
        assert_eq!(
            k[k.len() - 3..],
            ["session.exited", "session.resumed", "turn.started"],
            "{harness}: {k:?}"
        );
    }
}

/// Issue 19 item 15 with the real Claude Code: a print-mode turn ends its session
/// (`SessionEnd`); `claude --resume` takes the conversation up again. The record says it was
/// resumed, runs the new turn, and exits again: the log's grammar (checked when the world is
/// dropped) holds across the exit and the resume.
#[test]
fn a_real_claude_session_resumed_after_its_end_is_recorded_as_resumed() {
    let w = World::new();
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\"] }\n",
    );
    w.ok(&w.repo, &["materialize"]);
    let fake = FakeAnthropic::start();
    let run = |tag: &str, resume: Option<&str>| {
        let mut cmd = claude_command(&w.home, &fake.base_url());
        cmd.env("SPEX_HOME", &w.spex_home);
        if let Some(sid) = resume {
            cmd.args(["--resume", sid]);
        }
        print_prompt(
            &mut cmd,
            &fake,
            &w.repo,
            w.dir.path(),
            tag,
            "Answer plainly. USE_NONE",
            TURN_TIMEOUT,
        )
    };
    let first = run("first", None);
    let ids = w.session_ids();
    assert_eq!(ids.len(), 1, "{ids:?}\n{}", first.diag);
    let id = ids[0].clone();
    let r = w.record(&id);
    assert_eq!(r["status"], "exited", "{}\n{}", pretty(&r), first.diag);
    let sid = r["harness_session_id"].as_str().unwrap().to_owned();
    let second = run("second", Some(&sid));
    assert_eq!(
        w.session_ids(),
        std::slice::from_ref(&id),
        "{}",
        second.diag
    );
    let r = w.record(&id);
    let k = kinds(&w, &id);
    assert_eq!(
        (r["status"].as_str(), r["turn"]["state"].as_str()),
        (Some("exited"), Some("completed")),
        "{}\n{k:?}\n{}",
        pretty(&r),
        second.diag
    );
    let resumed = k.iter().position(|k| k == "session.resumed");
    let first_exit = k.iter().position(|k| k == "session.exited");
    assert!(
        resumed.is_some() && first_exit < resumed,
        "no session.resumed after the first exit: {k:?}"
    );
    assert_eq!(
        k.iter().filter(|k| *k == "turn.completed").count(),
        2,
        "{k:?}"
    );
    w.assert_grammar(&|| second.diag.clone());
}

/// Issue 19 item 15: a host killed while its session started (with the `launch` that waited
/// for it) left the record `starting` for ever: `stop` failed (exit 2) and `prune` could not
/// clear it. A start whose host is gone ends `exited` (`host gone`, with why) once a reader,
/// `stop` or `prune` looks; then `stop` says so and `prune` removes it.
#[test]
fn a_start_whose_host_was_killed_ends_exited_and_can_be_pruned() {
    use crate::runtime::{claude_world, run_json, spex_cmd};
    let (w, fake) = claude_world(crate::support::claude_home::SeedOptions::default());
    // A stand-in for a harness still starting: it draws nothing and fires no hook.
    let script = w.dir.path().join("slow-start.sh");
    crate::support::world::executable(&script, "#!/bin/sh\nexec sleep 120\n");
    write(
        &w.repo.join("spex.jsonc"),
        format!(
            "{{ \"harnesses\": [\"claude\"], \"harness\": {{ \"claude\": {{ \"command\": \"{}\" }} }} }}\n",
            script.display()
        ),
    );
    w.ok(&w.repo, &["materialize"]);
    let mut launch = spex_cmd(
        &w,
        &fake,
        &["launch", "--harness", "claude", "--detach", "--json"],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    // The host writes `host.json` as it starts the program.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let (id, host) = loop {
        let found = w.session_ids().into_iter().find_map(|id| {
            let rec: Value =
                serde_json::from_str(&read_or_empty(&w.session_dir(&id).join("host.json"))).ok()?;
            Some((id, rec["host"]["pid"].as_u64()?))
        });
        if let Some(f) = found {
            break f;
        }
        assert!(std::time::Instant::now() < deadline, "no host.json");
        std::thread::sleep(Duration::from_millis(50));
    };
    // The machine's worst: the launch and the host die at once, the session still starting.
    launch.kill().unwrap();
    launch.wait().unwrap();
    assert_eq!(w.record(&id)["status"], "starting");
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &host.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let gone = std::time::Instant::now() + Duration::from_secs(10);
    while std::path::Path::new(&format!("/proc/{host}")).exists()
        && !read_or_empty(Path::new(&format!("/proc/{host}/stat"))).contains(") Z")
        && std::time::Instant::now() < gone
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let stopped = run_json(&w, &fake, &["stop", &id, "--json"]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (
            stopped["status"].as_str(),
            stopped["exit_reason"].as_str(),
            stopped["why"].as_str()
        ),
        (
            Some("exited"),
            Some("host gone"),
            Some("its host ended before the session started")
        ),
        "{}",
        pretty(&stopped)
    );
    let pruned = run_json(&w, &fake, &["prune", "--older-than", "0s", "--json"])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(pruned["removed"], json!([id]), "{}", pretty(&pruned));
    assert!(w.session_ids().is_empty(), "{:?}", w.session_ids());
}

/// Every entry under `root` whose mode is not private (files 0600, folders 0700), as
/// `(path, mode)`.
fn not_private(root: &Path) -> Vec<(String, String)> {
    use std::os::unix::fs::PermissionsExt as _;
    walkdir::WalkDir::new(root)
        .into_iter()
        .filter_map(Result::ok)
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            let mode = meta.permissions().mode() & 0o777;
            let want = if meta.is_dir() { 0o700 } else { 0o600 };
            (meta.is_file() || meta.is_dir())
                .then_some(())
                .filter(|()| mode != want)
                .map(|()| (e.path().display().to_string(), format!("{mode:o}")))
        })
        .collect()
}

/// Issue 19 item 17: `events.jsonl` was 0644 and the store's folders 0755 (prompts and tool
/// commands readable by every local user), and a `~/.claude.json` spex created was 0644. Every
/// file spex creates in the store is 0600 and every folder 0700, `~/.claude.json` gets the
/// harness's own 0600, and a store an older spex left open is tightened on the next write.
#[test]
fn the_store_and_a_created_harness_state_file_are_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let w = World::new();
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\", \"codex\"] }\n",
    );
    w.ok(&w.repo, &["materialize"]);
    let claude_json = w.home.join(".claude.json");
    let mode = std::fs::metadata(&claude_json)
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(format!("{mode:o}"), "600", "~/.claude.json");
    let id = working(&w, "claude");
    let post = fixture(&w, "claude", "PostToolUse.Write");
    dispatch_raw(&w, "claude", "PostToolUse", post.to_string().as_bytes());
    // The call itself is recorded (not merely some event): its completion with its tool,
    // call id and file, and the file among what the session touched.
    let events = w.events(&id);
    let last = events.last().expect("an event after the tool call");
    assert_eq!(
        (
            &last["kind"],
            &last["tool"],
            &last["call_id"],
            &last["ok"],
            &last["files"]
        ),
        (
            &json!("tool.completed"),
            &post["tool_name"],
            &post["tool_use_id"],
            &json!(true),
            &json!(["hello.txt"])
        ),
        "{}",
        pretty(last)
    );
    let r = w.record(&id);
    assert_eq!(
        (&r["status"], &r["touched"]),
        (&json!("working"), &json!(["hello.txt"])),
        "{}",
        pretty(&r)
    );
    for (event, stem) in [
        ("SessionStart", "SessionStart.startup"),
        ("PreToolUse", "PreToolUse.Bash"),
    ] {
        let p = fixture(&w, "codex", stem);
        dispatch_raw(&w, "codex", event, p.to_string().as_bytes());
    }
    assert_eq!(w.session_ids().len(), 2, "{:?}", w.session_ids());
    w.ok(&w.repo, &["sessions", "--all"]);
    assert_eq!(not_private(&w.spex_home), [], "a fresh store");
    // A store as an older spex left it: everything readable by others.
    for e in walkdir::WalkDir::new(&w.spex_home)
        .into_iter()
        .filter_map(Result::ok)
    {
        let mode = if e.file_type().is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let prompt = fixture(&w, "claude", "UserPromptSubmit");
    dispatch_raw(
        &w,
        "claude",
        "UserPromptSubmit",
        prompt.to_string().as_bytes(),
    );
    assert_eq!(not_private(&w.spex_home), [], "tightened on the next write");
}
