//! The Gemini CLI runtime against the REAL pinned Gemini CLI TUI (offline, fake Gemini API):
//! `spex launch` under spex's PTY host (ready once `SessionStart` is recorded), `deliver`
//! confirmed by the session's own `BeforeAgent` hook (also a prompt queued while busy),
//! `snapshot`, `attach` from a terminal the test owns, `interrupt`, a recording, `stop` leaving
//! nothing of the process group (the CLI's launcher relaunches it as its child and ignores
//! SIGTERM), and `resume` continuing the conversation. Needs `scripts/install-peers.sh`.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::runtime::{
    attach_in_pty, checked_recording, host_log, launch_fails_soon, launch_json, run_json, screen,
    std_dirs, stop, wait_screen,
};
use crate::support::fake_gemini::{self, FakeGemini};
use crate::support::gemini_home::{INPUT_PLACEHOLDER, seed_gemini_home};
use crate::support::peers::{group_members, processes_in};
use crate::support::world::{World, pretty, read_or_empty, wait_status, write};

const TURN: Duration = Duration::from_mins(1);

/// A project selecting Gemini, materialized (its hooks, its folder trust), in a home seeded to
/// start straight into the prompt against the fake.
pub fn gemini_world() -> (World, FakeGemini) {
    let w = World::new();
    std_dirs(&w);
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"gemini\"] }\n",
    );
    seed_gemini_home(&w.home);
    w.ok(&w.repo, &["materialize"]);
    (w, FakeGemini::start())
}

/// A launched Gemini session: its id and the pid of the program the host runs (the CLI's
/// launcher, leader of its process group).
pub fn launch_gemini(w: &World, fake: &FakeGemini, extra: &[&str]) -> (String, u32) {
    let launched = launch_json(w, fake, extra);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let pid = launched["session"]["child_pid"]
        .as_u64()
        .and_then(|p| u32::try_from(p).ok())
        .unwrap_or_else(|| panic!("no child_pid: {}", pretty(&launched)));
    (id, pid)
}

/// Delivers `prompt` and asserts `BeforeAgent` confirmed it; the delivery's result.
pub fn deliver(w: &World, fake: &FakeGemini, id: &str, prompt: &str) -> Value {
    let d = run_json(w, fake, &["deliver", id, prompt, "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}\nscreen:\n{}", host_log(w, id), screen(w, fake, id)));
    assert_eq!(d["confirmed"], true, "{}", pretty(&d));
    d
}

/// Waits until the session's running turn has ended in `state`.
pub fn wait_turn(w: &World, id: &str, state: &str) -> Value {
    let deadline = Instant::now() + TURN;
    loop {
        let r = w.record(id);
        if (r["turn"]["state"] == state && r["status"] == "idle") || Instant::now() >= deadline {
            assert_eq!(
                r["turn"]["state"],
                state,
                "{}\n{}",
                pretty(&r),
                host_log(w, id)
            );
            return r;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Delivers a `hang` turn of `secs` and waits until the model's first words are on screen.
fn deliver_hang(w: &World, fake: &FakeGemini, id: &str, secs: u32) {
    deliver(w, fake, id, &format!("SCENARIO:hang HANG={secs}"));
    assert!(
        wait_screen(w, fake, id, fake_gemini::HANG_TEXT, Duration::from_secs(30)),
        "{}",
        screen(w, fake, id)
    );
}

/// Waits until nothing of process group `pgid` runs; panics with what is left.
fn assert_group_gone(pgid: u32, w: &World, id: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut left = group_members(pgid);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        left = group_members(pgid);
    }
    assert!(
        left.is_empty(),
        "left running:\n{left}\n{}",
        host_log(w, id)
    );
}

#[test]
fn launch_deliver_queue_snapshot_stop_a_real_gemini_session() {
    let (w, fake) = gemini_world();
    let (id, pgid) = launch_gemini(&w, &fake, &[]);
    let record = w.record(&id);
    assert_eq!(record["launched_by"], "spex", "{}", pretty(&record));
    assert_eq!(record["status"], "idle", "{}", pretty(&record));
    // Ready once Gemini's own `SessionStart` named spex's id (`--session-id`).
    let events = w.events(&id);
    assert!(
        events.iter().any(|e| e["kind"] == "session.started"),
        "{}",
        host_log(&w, &id)
    );
    let shown = run_json(&w, &fake, &["snapshot", &id, "--json"]).unwrap();
    let text = crate::support::world::screen_text(&shown["lines"]);
    assert!(text.contains(INPUT_PLACEHOLDER), "{text}");
    assert!(
        shown["title"].as_str().unwrap().starts_with("◇  Ready"),
        "{shown}"
    );

    let prompt = "hello gemini\nwith two lines ✓";
    let d = deliver(&w, &fake, &id, prompt);
    assert_eq!(d["mode"], "inject");
    assert_eq!(w.record(&id)["turn"]["prompt"], prompt);
    assert!(
        fake.prompt_within("with two lines ✓", TURN).is_some(),
        "{:?}",
        fake.request_lines()
    );
    wait_turn(&w, &id, "completed");

    // Busy: a prompt is queued by Gemini and confirmed when it takes it up.
    deliver_hang(&w, &fake, &id, 6);
    let queued = run_json(
        &w,
        &fake,
        &[
            "deliver",
            &id,
            "the queued one",
            "--wait",
            "--json",
            "--timeout",
            "90",
        ],
    )
    .unwrap_or_else(|e| panic!("{e}\n{}\n{}", host_log(&w, &id), screen(&w, &fake, &id)));
    assert_eq!(queued["mode"], "queued", "{}", pretty(&queued));
    assert_eq!(queued["confirmed"], true, "{}", pretty(&queued));
    assert!(fake.prompt_within("the queued one", TURN).is_some());
    wait_turn(&w, &id, "completed");

    let stopped = stop(&w, &fake, &id);
    assert_eq!(stopped["status"], "exited", "{}", pretty(&stopped));
    // Idle at its prompt, Gemini exits on its own exit keys: no signal was needed.
    assert_eq!(
        stopped["exit_status"],
        serde_json::json!({"code": 0, "signal": null}),
        "{}",
        host_log(&w, &id)
    );
    let log = host_log(&w, &id);
    assert!(
        log.contains("stop: typing the exit keys") && !log.contains("SIGTERM"),
        "{log}"
    );
    assert_group_gone(pgid, &w, &id);
}

#[test]
fn interrupt_mid_turn_and_stop_a_busy_gemini_leave_nothing_running() {
    let (w, fake) = gemini_world();
    let (id, pgid) = launch_gemini(&w, &fake, &[]);
    deliver_hang(&w, &fake, &id, 60);
    let after = run_json(&w, &fake, &["interrupt", &id, "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    assert_eq!(after["status"], "idle", "{}", pretty(&after));
    assert_eq!(after["turn"]["state"], "interrupted", "{}", pretty(&after));
    assert!(wait_screen(
        &w,
        &fake,
        &id,
        "Request cancelled",
        Duration::from_secs(10)
    ));
    let endings: Vec<Value> = w
        .events(&id)
        .into_iter()
        .filter(|e| e["kind"].as_str().is_some_and(|k| k.starts_with("turn.")))
        .filter(|e| e["kind"] != "turn.started")
        .collect();
    assert_eq!(endings.len(), 1, "{endings:?}\n{}", host_log(&w, &id));

    // At a permission dialog the interrupt key cancels the whole request, with no hook: the
    // host ends the turn and the attention as the title goes back to Ready.
    deliver(&w, &fake, &id, "SCENARIO:shellcmd <<touch never.txt>>");
    assert_eq!(
        wait_status(&w, &id, "needs_attention", TURN)["status"],
        "needs_attention"
    );
    let after = run_json(&w, &fake, &["interrupt", &id, "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    assert_eq!(after["status"], "idle", "{}", pretty(&after));
    assert_eq!(after["turn"]["state"], "interrupted", "{}", pretty(&after));
    assert!(after["attention"].is_null(), "{}", pretty(&after));
    assert!(!w.repo.join("never.txt").exists());

    // A shell command running under a busy session: stop ends the CLI, which ends it too.
    deliver(&w, &fake, &id, "SCENARIO:shellcmd <<sleep 300>>");
    assert_eq!(
        wait_status(&w, &id, "needs_attention", TURN)["status"],
        "needs_attention"
    );
    run_json(&w, &fake, &["approve", &id, "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !processes_in(&w.repo)
        .iter()
        .any(|(_, c)| c.contains("sleep 300"))
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    let stopped = stop(&w, &fake, &id);
    assert_eq!(stopped["status"], "exited", "{}", pretty(&stopped));
    assert_group_gone(pgid, &w, &id);
    let left: Vec<_> = processes_in(&w.repo);
    assert!(left.is_empty(), "{left:?}\n{}", host_log(&w, &id));
}

#[test]
fn attach_from_a_terminal_types_a_prompt_and_detach_leaves_gemini_running() {
    use std::io::Write;
    let (w, fake) = gemini_world();
    let (id, _) = launch_gemini(&w, &fake, &[]);
    let mut a = attach_in_pty(&w, &fake, &id);
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    // The redraw moves the cursor between words: look for one word.
    while !String::from_utf8_lossy(&seen).contains("@path/to/file") && Instant::now() < deadline {
        if let Ok(chunk) = a.rx.recv_timeout(Duration::from_millis(100)) {
            seen.extend(chunk);
        }
    }
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert!(text.contains("@path/to/file"), "no redraw:\n{text}");
    // A person types a prompt at the attached terminal: Gemini takes it as a turn.
    a.writer
        .write_all(b"\x1b[200~typed at the attached terminal\x1b[201~")
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    a.writer.write_all(b"\r").unwrap();
    assert!(
        fake.prompt_within("typed at the attached terminal", TURN)
            .is_some(),
        "{}\n{}",
        host_log(&w, &id),
        screen(&w, &fake, &id)
    );
    let done = wait_turn(&w, &id, "completed");
    assert_eq!(done["turn"]["prompt"], "typed at the attached terminal");
    // Esc at the attached terminal cancels a running turn: Gemini reports the cancel as a
    // completion (`AfterAgent` with the partial answer), the host knows it was interrupted.
    a.writer
        .write_all(b"\x1b[200~SCENARIO:hang HANG=60\x1b[201~")
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    a.writer.write_all(b"\r").unwrap();
    assert!(wait_screen(
        &w,
        &fake,
        &id,
        fake_gemini::HANG_TEXT,
        Duration::from_secs(30)
    ));
    a.writer.write_all(b"\x1b").unwrap();
    let cancelled = wait_turn(&w, &id, "interrupted");
    assert_eq!(
        cancelled["turn"]["by"],
        "terminal",
        "{}",
        pretty(&cancelled)
    );
    // Ctrl-\ detaches; the session runs on and takes prompts.
    a.writer.write_all(&[0x1c]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(st) = a.child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "attach did not detach");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    drop(a);
    assert_ne!(w.record(&id)["status"], "exited");
    deliver(&w, &fake, &id, "after the detach");
    stop(&w, &fake, &id);
}

#[test]
fn a_recorded_gemini_session_checks() {
    let (w, fake) = gemini_world();
    let (id, _) = launch_gemini(&w, &fake, &["--record"]);
    let prompt = "a recorded prompt";
    deliver(&w, &fake, &id, prompt);
    wait_turn(&w, &id, "completed");
    std::thread::sleep(Duration::from_secs(1));
    // As it exits, Gemini prints each hook command it runs with its folder (`Expanding hook
    // command: … (cwd: <tree>)`), a line that wraps the tree's path over two rows: the last
    // frame is scrubbed as the output that drew it.
    stop(&w, &fake, &id);
    let rec = checked_recording(&w, &fake, &id);
    rec.assert_one_paste(prompt);
    let service = rec.lines("service-events.jsonl");
    for kind in ["session.started", "turn.started", "turn.completed"] {
        assert!(
            service.iter().any(|e| e["kind"] == kind),
            "{kind}: {service:?}"
        );
    }
    let reasons: Vec<String> = rec
        .lines("frames.jsonl")
        .iter()
        .filter_map(|f| f["reason"].as_str().map(str::to_owned))
        .collect();
    for reason in ["session.started", "busy", "idle", "end"] {
        assert!(reasons.iter().any(|r| r == reason), "{reason}: {reasons:?}");
    }
}

#[test]
fn a_stopped_gemini_session_resumes_the_same_conversation() {
    let (w, fake) = gemini_world();
    let (id, _) = launch_gemini(&w, &fake, &[]);
    deliver(&w, &fake, &id, "remember PINEAPPLE-42 please");
    wait_turn(&w, &id, "completed");
    // Gemini writes its chat log as it goes: the turn is in it before the session stops.
    let transcript = w.record(&id)["transcript"]
        .as_str()
        .map(std::path::PathBuf::from)
        .expect("the hooks named the transcript");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !read_or_empty(&transcript).contains("PINEAPPLE-42") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    stop(&w, &fake, &id);

    let resumed = run_json(&w, &fake, &["resume", &id, "--detach", "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    assert_eq!(resumed["session"]["id"], id.as_str());
    assert_eq!(w.record(&id)["status"], "idle", "{}", host_log(&w, &id));
    deliver(&w, &fake, &id, "what did I ask you to remember?");
    let request = fake
        .prompt_within("what did I ask you to remember?", TURN)
        .expect("the resumed prompt reached the model");
    // The model gets the earlier turn in the history of the same conversation.
    assert!(
        request["body"]["contents"]
            .to_string()
            .contains("PINEAPPLE-42"),
        "{}",
        pretty(&request["body"]["contents"])
    );
    stop(&w, &fake, &id);
}

/// Gemini CLI stops before its prompt where the home has no authentication chosen, and where
/// the project has agents it has not acknowledged: launch fails at once with the screen and a
/// hint that works; the session waits there for a person.
#[test]
fn launch_stops_at_the_screens_gemini_asks_before_its_prompt() {
    let (w, fake) = gemini_world();
    let settings = crate::support::gemini_home::user_settings(&w.home);
    crate::support::gemini_home::edit_json(&settings, |v| {
        v["security"]["auth"] = serde_json::json!({});
    });
    let err = launch_fails_soon(&w, &fake);
    assert!(
        err.contains("How would you like to authenticate for this project?")
            && err.contains("hint: choose it once")
            && err.contains("selectedType"),
        "{err}"
    );
    // As the hint says: the authentication chosen, the next start reaches the prompt; an
    // agent of the project's own stops it again.
    crate::support::gemini_home::edit_json(&settings, |v| {
        v["security"]["auth"]["selectedType"] = "gemini-api-key".into();
    });
    write(
        &w.repo.join(".gemini/agents/helper.md"),
        "---\nname: helper\ndescription: A helper agent for tests.\n---\nYou help.\n",
    );
    let err = launch_fails_soon(&w, &fake);
    assert!(
        err.contains("New Agents Discovered") && err.contains("Acknowledge and Enable"),
        "{err}"
    );
    assert!(err.contains("acknowledgments/agents.json"), "{err}");
    for id in w.session_ids() {
        stop(&w, &fake, &id);
    }
    std::fs::remove_file(w.repo.join(".gemini/agents/helper.md")).unwrap();
    let (id, _) = launch_gemini(&w, &fake, &[]);
    stop(&w, &fake, &id);
}

/// Regression: Gemini reports a cancel as a completion (`AfterAgent` with the partial answer),
/// and the host once wrote `turn.completed` for it, then corrected it to `interrupted` when the
/// prompt came back, so a `wait --until turn-end` already running could exit 0 for a turn the
/// record then called interrupted. The key is now in the record before Gemini sees it: the
/// turn has one ending, `interrupted`, the waiter exits 4, and no ending is amended after.
#[test]
fn an_esc_cancelled_gemini_turn_has_one_ending_interrupted_and_wait_turn_end_fails() {
    use std::io::Write;
    let (w, fake) = gemini_world();
    let (id, _) = launch_gemini(&w, &fake, &[]);
    let mut a = attach_in_pty(&w, &fake, &id);
    // The turn's endings: those of the events since it was delivered (one turn each time).
    let endings_since = |n: usize| crate::support::world::turn_endings(&w.events(&id)[n..]);

    // With no reader running, the hooks and the host decide alone.
    let before = w.events(&id).len();
    deliver_hang(&w, &fake, &id, 60);
    a.writer.write_all(b"\x1b").unwrap();
    let done = wait_turn(&w, &id, "interrupted");
    assert_eq!(done["turn"]["by"], "terminal", "{}", pretty(&done));
    // The key was in the record before Gemini saw it.
    assert!(
        host_log(&w, &id).contains("interrupt key by terminal: noted on the running turn"),
        "{}",
        host_log(&w, &id)
    );
    // The prompt is back, the hook has come: nothing more is written about the turn.
    assert!(wait_screen(
        &w,
        &fake,
        &id,
        "Request cancelled",
        Duration::from_secs(20)
    ));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        endings_since(before),
        ["turn.interrupted"],
        "{:?}\n{}",
        &w.events(&id)[before..],
        host_log(&w, &id)
    );

    // A waiter already running when the key goes in exits 4 (the turn did not complete).
    let before = w.events(&id).len();
    deliver_hang(&w, &fake, &id, 60);
    let waiter = crate::runtime::spex_cmd(
        &w,
        &fake,
        &[
            "wait",
            &id,
            "--until",
            "turn-end",
            "--json",
            "--timeout",
            "60",
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // The waiter has read the running turn before the key goes in.
    std::thread::sleep(Duration::from_secs(1));
    a.writer.write_all(b"\x1b").unwrap();
    let out = waiter.wait_with_output().unwrap();
    let waited: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        pretty(&waited),
        host_log(&w, &id)
    );
    assert_eq!(
        waited["turn"]["state"],
        "interrupted",
        "{}",
        pretty(&waited)
    );
    wait_turn(&w, &id, "interrupted");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(endings_since(before), ["turn.interrupted"]);

    // A turn that completed stays completed: an Esc typed once its prompt is back changes
    // nothing about it.
    let before = w.events(&id).len();
    deliver(&w, &fake, &id, "a short one");
    wait_turn(&w, &id, "completed");
    a.writer.write_all(b"\x1b").unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(w.record(&id)["turn"]["state"], "completed");
    assert_eq!(endings_since(before), ["turn.completed"]);
    assert!(
        !w.events(&id).iter().any(|e| e["kind"] == "turn.amended"),
        "{:?}",
        w.events(&id)
    );
    a.writer.write_all(&[0x1c]).unwrap();
    drop(a);
    stop(&w, &fake, &id);
}
