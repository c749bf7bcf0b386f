//! Honest turn outcomes with the REAL Claude Code against the fake Messages API: how each turn
//! ended (`completed`, `partial_failed`, `failed`), what `spex wait --until turn-end` exits
//! with, and what `show` says. Needs `scripts/install-peers.sh`; fails, never skips.

use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::real_sessions::{ClaudeSession, Perm, materialize, wait_until};
use crate::support::fake_anthropic::{FakeAnthropic, PARTIAL_TEXT};
use crate::support::world::World;

/// Startup and hooks of a real harness on a loaded machine.
const SETTLE: Duration = Duration::from_mins(1);

/// What one prompt left: the wait's exit code and stdout, the record, `show`'s text.
struct Outcome {
    code: Option<i32>,
    wait_out: String,
    rec: Value,
    show: String,
    diag: String,
}

/// Starts a Claude session, starts `spex wait <id> --until turn-end` before the prompt (so it
/// waits for that turn), runs the prompt and collects what each reader says.
fn run(w: &World, fake: &FakeAnthropic, prompt: &str) -> Outcome {
    let mut session = ClaudeSession::start(w, fake, Perm::AcceptEdits);
    let id = session.id.clone();
    wait_until(w, &id, SETTLE, |_, _| true)
        .unwrap_or_else(|d| panic!("no record from SessionStart\n{d}"));
    let waiter: Child = waiter(w, &id);
    let result = session.turn(w, prompt);
    let out = waiter.wait_with_output().expect("spex wait");
    let (rec, _) = wait_until(w, &id, SETTLE, |r, _| r["turn"]["state"] != "running")
        .unwrap_or_else(|d| panic!("turn never ended\n{d}"));
    let show = String::from_utf8_lossy(&w.spex(&w.repo, &["show", &id]).stdout).into_owned();
    let diag = format!(
        "result {result}\nwait stdout {:?} stderr {:?}\nshow:\n{show}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        session.diag(w)
    );
    session.end(w, rec["turn"]["state"] == "completed");
    Outcome {
        code: out.status.code(),
        wait_out: String::from_utf8_lossy(&out.stdout).into_owned(),
        rec,
        show,
        diag,
    }
}

#[test]
fn wait_exits_zero_only_for_a_completed_turn() {
    let w = World::new();
    materialize(&w);
    let fake = FakeAnthropic::start();
    let o = run(&w, &fake, "Please create the file.");
    assert_eq!(o.rec["turn"]["state"], "completed", "{}", o.diag);
    assert_eq!(o.code, Some(0), "{}", o.diag);
    assert!(o.wait_out.contains("turn completed"), "{}", o.diag);
}

#[test]
fn a_model_error_after_text_is_partial_failed_with_the_text_kept_apart() {
    let w = World::new();
    materialize(&w);
    let fake = FakeAnthropic::start();
    let o = run(&w, &fake, "Please create the file. FAIL_AFTER=400");
    let turn = &o.rec["turn"];
    assert_eq!(turn["state"], "partial_failed", "{}", o.diag);
    assert_eq!(turn["partial"], PARTIAL_TEXT, "{}", o.diag);
    assert_eq!(turn["error_kind"], "model_error", "{}", o.diag);
    let error = o.rec["attention"]["text"].as_str().unwrap_or_default();
    assert!(
        error.contains("400") && !error.contains(PARTIAL_TEXT),
        "the error is the harness's, without the partial text: {error:?}\n{}",
        o.diag
    );
    assert_eq!(o.code, Some(4), "{}", o.diag);
    assert!(
        o.wait_out.contains("turn partial_failed (model_error)"),
        "{}",
        o.diag
    );
    assert!(
        o.show.contains("partial text") && o.show.contains("not an answer"),
        "{}",
        o.diag
    );
    // The TURN column names the state, not a collapsed `failed`.
    let table =
        String::from_utf8_lossy(&w.spex(&w.repo, &["sessions", "--all"]).stdout).into_owned();
    assert!(table.contains("partial_failed"), "{table}\n{}", o.diag);
}

#[test]
fn a_model_error_with_no_text_is_failed_with_its_kind_and_next() {
    let w = World::new();
    materialize(&w);
    let fake = FakeAnthropic::start();
    let o = run(&w, &fake, "Please create the file. FAIL=400");
    let turn = &o.rec["turn"];
    assert_eq!(turn["state"], "failed", "{}", o.diag);
    assert_eq!(turn["error_kind"], "model_error", "{}", o.diag);
    assert!(turn["partial"].is_null(), "{}", o.diag);
    assert!(
        turn["next"].as_str().is_some_and(|n| !n.is_empty()),
        "{}",
        o.diag
    );
    assert_eq!(o.code, Some(4), "{}", o.diag);
    assert!(
        o.wait_out.contains("turn failed (model_error)"),
        "{}",
        o.diag
    );
    assert!(o.show.contains("next"), "{}", o.diag);
}

/// A Claude session hosted by spex (`spex launch`, bypass mode so Bash runs unasked), with
/// `config` as the project's `spex.jsonc`, whose first prompt is `prompt`; its id.
fn launch_hosted(config: &str, prompt: &str) -> (World, FakeAnthropic, String) {
    use crate::runtime::{claude_world, spex_cmd};
    use crate::support::claude_home::SeedOptions;
    let (w, fake) = claude_world(SeedOptions {
        bypass: true,
        ..SeedOptions::default()
    });
    crate::support::world::write(&w.repo.join("spex.jsonc"), config);
    // Skips 2.1.197's bypass-mode question at start (see steering.rs).
    crate::support::world::write(
        &w.home.join(".claude/settings.json"),
        "{\"skipDangerousModePermissionPrompt\": true}\n",
    );
    let args = [
        "launch",
        "--harness",
        "claude",
        "--detach",
        "--json",
        "--ready-timeout",
        "60",
        prompt,
        "--",
        "--permission-mode",
        "bypassPermissions",
    ];
    let mut cmd = spex_cmd(&w, &fake, &args);
    cmd.env("IS_SANDBOX", "1");
    let out = cmd.output().unwrap();
    let launched =
        crate::support::world::json_result(&args, &out).unwrap_or_else(|e| panic!("{e}"));
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    (w, fake, id)
}

/// `spex wait <id> --until turn-end`, started now.
fn waiter(w: &World, id: &str) -> Child {
    w.cmd(
        &w.repo,
        &["wait", id, "--until", "turn-end", "--timeout", "120"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn spex wait")
}

/// Waits until the session's slow Bash call (`USE_SLOWBASH`) has started.
fn bash_started(w: &World, id: &str, diag: &dyn Fn() -> String) {
    wait_until(w, id, SETTLE, |_, ev| {
        ev.iter()
            .any(|e| e["kind"] == "tool.started" && e["tool"] == "Bash")
    })
    .unwrap_or_else(|d| panic!("the slow Bash call never started\n{d}\n{}", diag()));
}

/// Whether the slow Bash call's `sleep 20` is gone within 10 s (the harness killed it).
fn command_gone(w: &World) -> bool {
    (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        processes_in(&w.repo, "sleep 20").is_empty()
    })
}

/// Processes whose working folder is `dir` and whose command line contains `needle`.
fn processes_in(dir: &std::path::Path, needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let p = e.path();
        let cwd = std::fs::read_link(p.join("cwd")).ok();
        let cmd = std::fs::read(p.join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cwd.as_deref() == Some(dir) && cmd.contains(needle) {
            out.push(format!("{}: {cmd}", p.display()));
        }
    }
    out
}

/// A session started in the person's own terminal (no spex process owns it): the readers
/// judge its budget, `wait` wakes at the deadline, not at the turn's end, and the turn's own
/// Stop later adds no second ending.
#[test]
fn a_self_started_turn_past_its_budget_is_timed_out_by_the_readers_once() {
    let w = World::new();
    materialize(&w);
    crate::support::world::write(&w.repo.join("spex.jsonc"), "{ \"turnTimeout\": \"3s\" }\n");
    let fake = FakeAnthropic::start();
    let mut session = ClaudeSession::start(&w, &fake, Perm::AcceptEdits);
    let id = session.id.clone();
    wait_until(&w, &id, SETTLE, |_, _| true)
        .unwrap_or_else(|d| panic!("no record from SessionStart\n{d}"));
    let wait = waiter(&w, &id);
    let began = std::time::Instant::now();
    // The model answers after 12 s: the turn runs past its 3 s budget.
    let result = session.turn(&w, "USE_NONE DELAY=12 a slow answer");
    let turn_took = began.elapsed();
    let out = wait.wait_with_output().expect("spex wait");
    let (rec, events) = wait_until(&w, &id, SETTLE, |r, _| r["status"] == "idle")
        .unwrap_or_else(|d| panic!("the turn's own end never came\n{d}"));
    let show = String::from_utf8_lossy(&w.spex(&w.repo, &["show", &id]).stdout).into_owned();
    let diag = || {
        format!(
            "result {result}\nwait {:?} {:?}\nshow:\n{show}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            session.diag(&w)
        )
    };
    assert_eq!(out.status.code(), Some(4), "{}", diag());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("turn timed_out, marked only"),
        "{}",
        diag()
    );
    let turn = &rec["turn"];
    assert_eq!(turn["state"], "timed_out", "{}", diag());
    assert_eq!(turn["timeout"]["budget_ms"], 3000, "{}", diag());
    assert_eq!(turn["timeout"]["action"], "mark", "{}", diag());
    assert!(
        turn["next"].as_str().is_some_and(|n| !n.is_empty()),
        "{}",
        diag()
    );
    assert_eq!(
        crate::support::world::turn_endings(&events),
        ["turn.timed_out"],
        "one ending\n{}",
        diag()
    );
    let ending = events
        .iter()
        .find(|e| e["kind"] == "turn.timed_out")
        .unwrap();
    assert!(
        ending["elapsed_ms"].as_u64().is_some_and(|e| e >= 3000),
        "{}",
        diag()
    );
    assert!(
        turn_took > Duration::from_secs(10),
        "the model's delay held the turn\n{}",
        diag()
    );
    assert!(
        show.contains("timed_out, marked only") && show.contains("ran past its turn budget of 3s"),
        "{}",
        diag()
    );
    crate::support::world::assert_grammar(&rec, &events, &diag);
    session.end(&w, true);
}

/// Hosted: the host judges the budget at its deadline and, with `onTimeout: interrupt`,
/// types the interrupt key: the Bash `sleep 20` is killed, the session is idle again, and the
/// interrupt's own evidence adds no second ending.
#[test]
fn a_hosted_turn_past_its_budget_is_timed_out_and_interrupted() {
    use crate::runtime::{host_log, screen, stop};
    let (w, fake, id) = launch_hosted(
        "{ \"harnesses\": [\"claude\"], \"turnTimeout\": \"6s\", \"onTimeout\": \"interrupt\" }\n",
        "Please run a slow command. USE_SLOWBASH",
    );
    let diag = || format!("{}\nscreen:\n{}", host_log(&w, &id), screen(&w, &fake, &id));
    let wait = waiter(&w, &id);
    bash_started(&w, &id, &diag);
    let runs = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        !processes_in(&w.repo, "sleep 20").is_empty()
    });
    assert!(runs, "the command runs\n{}", diag());
    let out = wait.wait_with_output().expect("spex wait");
    let (rec, events) = wait_until(&w, &id, SETTLE, |r, _| {
        r["status"] == "idle" && r["turn"]["timeout"]["interrupt_sent_at"].is_string()
    })
    .unwrap_or_else(|d| panic!("the session never stopped\n{d}\n{}", diag()));
    let show = String::from_utf8_lossy(&w.spex(&w.repo, &["show", &id]).stdout).into_owned();
    let diag = || {
        format!(
            "wait {:?} {:?}\nshow:\n{show}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            diag()
        )
    };
    assert_eq!(out.status.code(), Some(4), "{}", diag());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("turn timed_out"),
        "{}",
        diag()
    );
    assert_eq!(rec["turn"]["state"], "timed_out", "{}", diag());
    assert_eq!(rec["turn"]["timeout"]["action"], "interrupt", "{}", diag());
    assert_eq!(
        crate::support::world::turn_endings(&events),
        ["turn.timed_out"],
        "one ending\n{}",
        diag()
    );
    // The harness really stopped: its command is gone and never wrote its file.
    let gone = command_gone(&w);
    assert!(gone, "{:?}\n{}", processes_in(&w.repo, "sleep 20"), diag());
    assert!(!w.repo.join("slow_out.txt").exists(), "{}", diag());
    assert!(
        show.contains("timed_out, interrupted by spex"),
        "{}",
        diag()
    );
    crate::support::world::assert_grammar(&rec, &events, &diag);
    stop(&w, &fake, &id);
}

/// Hosted by spex (`spex launch`), so `spex interrupt` types the interrupt key into the TUI
/// while the slow Bash command (`sleep 20`) runs.
#[test]
fn an_interrupt_mid_tool_closes_the_call_as_interrupted_and_wait_exits_4() {
    use crate::runtime::{host_log, run_json, screen, stop};
    let (w, fake, id) = launch_hosted(
        "{ \"harnesses\": [\"claude\"] }\n",
        "Please run a slow command. USE_SLOWBASH",
    );
    let diag = || format!("{}\nscreen:\n{}", host_log(&w, &id), screen(&w, &fake, &id));
    bash_started(&w, &id, &diag);
    let waiter: Child = waiter(&w, &id);
    run_json(&w, &fake, &["interrupt", &id, "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", diag()));
    let out = waiter.wait_with_output().expect("spex wait");
    let (rec, events) = wait_until(&w, &id, SETTLE, |r, _| r["turn"]["state"] != "running")
        .unwrap_or_else(|d| panic!("turn never ended\n{d}"));
    let diag = || {
        format!(
            "wait stdout {:?} stderr {:?}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            crate::real_sessions::dump(&w, &id)
        )
    };
    assert_eq!(rec["turn"]["state"], "interrupted", "{}", diag());
    assert_eq!(rec["turn"]["by"], "spex interrupt", "{}", diag());
    let ending = events
        .iter()
        .find(|e| e["kind"] == "turn.interrupted")
        .unwrap();
    assert_eq!(ending["by"], "spex interrupt", "{}", diag());
    let bash: Vec<&Value> = events
        .iter()
        .filter(|e| e["tool"] == "Bash" && e["kind"] != "tool.started")
        .collect();
    assert!(
        !bash.is_empty() && bash[0]["kind"] == "tool.interrupted",
        "the Bash call is closed by the turn's ending, as interrupted\n{}",
        diag()
    );
    assert_eq!(out.status.code(), Some(4), "{}", diag());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("turn interrupted by spex interrupt"),
        "{}",
        diag()
    );
    crate::support::world::assert_grammar(&rec, &events, &diag);
    stop(&w, &fake, &id);
}

/// `spex deliver --wait-until done` into a hosted Claude session: the stages with their
/// times, exit 0 for a completed turn and 4 (with the state and why) for a failed one.
#[test]
fn deliver_wait_until_done_reports_the_stages_and_the_turns_outcome() {
    use crate::runtime::{host_log, screen, stop};
    let (w, fake, id) = launch_hosted("{ \"harnesses\": [\"claude\"] }\n", "USE_NONE first");
    let diag = || format!("{}\nscreen:\n{}", host_log(&w, &id), screen(&w, &fake, &id));
    wait_until(&w, &id, SETTLE, |r, _| {
        r["status"] == "idle" && r["turn"]["state"] == "completed"
    })
    .unwrap_or_else(|d| panic!("the first turn never ended\n{d}\n{}", diag()));
    let deliver = |prompt: &str, json: bool| {
        let mut args = vec![
            "deliver",
            &id,
            prompt,
            "--wait-until",
            "done",
            "--timeout",
            "120",
        ];
        if json {
            args.push("--json");
        }
        crate::runtime::spex_cmd(&w, &fake, &args).output().unwrap()
    };
    let out = deliver("USE_NONE second", true);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {:?}\n{}", out, diag()));
    assert_eq!(out.status.code(), Some(0), "{v}\n{}", diag());
    assert_eq!(v["reached"], "done", "{v}");
    assert_eq!(v["outcome"]["state"], "completed", "{v}");
    let stages: Vec<&str> = v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert_eq!(stages, ["accepted", "started", "done"], "{v}");
    let ms: Vec<u64> = v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["elapsed_ms"].as_u64().unwrap())
        .collect();
    assert!(ms.windows(2).all(|p| p[0] <= p[1]), "{v}");
    assert!(v["stages"][0]["at"].is_string(), "{v}");
    // The model got the text and answered it.
    assert!(
        fake.requests()
            .iter()
            .any(|r| r["body"].to_string().contains("USE_NONE second")),
        "{}",
        diag()
    );
    let out = deliver("FAIL=400 third", false);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(4), "{text}\n{}", diag());
    assert!(
        text.contains("done, turn failed (model_error)"),
        "{text}\n{}",
        diag()
    );
    let (rec, events) = wait_until(&w, &id, SETTLE, |r, _| r["turn"]["state"] == "failed")
        .unwrap_or_else(|d| panic!("{d}"));
    crate::support::world::assert_grammar(&rec, &events, &diag);
    stop(&w, &fake, &id);
}

/// Hosted: a Bash call (`sleep 20`) longer than the stall budget, with no hook and nothing new
/// on the screen but its spinner, clock and blinking mark, is marked `turn.stalled` by the
/// host; progress resumes it (`turn.resumed`: the screen adding the call's running time, then
/// the call's end) and the turn completes: one ending, the call paired.
#[test]
fn a_stalled_tool_call_is_marked_then_resumes_and_the_turn_completes() {
    use crate::runtime::{host_log, screen, stop};
    let (w, fake, id) = launch_hosted(
        "{ \"harnesses\": [\"claude\"], \"stallTimeout\": \"5s\" }\n",
        "Please run a slow command. USE_SLOWBASH",
    );
    let diag = || format!("{}\nscreen:\n{}", host_log(&w, &id), screen(&w, &fake, &id));
    // The screen may still change now and then (Claude adds the call's running time): `show`
    // is asked while the record says stalled, and asked again at a later stall.
    loop {
        let (rec, _) = wait_until(&w, &id, SETTLE, |r, _| {
            r["turn"]["stalled_at"].is_string() || r["turn"]["state"] != "running"
        })
        .unwrap_or_else(|d| panic!("the turn was never marked stalled\n{d}\n{}", diag()));
        assert_eq!(rec["turn"]["state"], "running", "never stalled\n{}", diag());
        assert_eq!(rec["status"], "working", "a stall is no ending\n{}", diag());
        let show = String::from_utf8_lossy(&w.spex(&w.repo, &["show", &id]).stdout).into_owned();
        if show.contains("running, stalled since") {
            break;
        }
        // Only progress since (a `turn.resumed`) excuses `show`.
        assert_ne!(
            w.record(&id)["seq"],
            rec["seq"],
            "stalled, but `show` does not say so:\n{show}\n{}",
            diag()
        );
        wait_until(&w, &id, SETTLE, |r, _| !r["turn"]["stalled_at"].is_string())
            .unwrap_or_else(|d| panic!("{d}"));
    }
    let (rec, events) = wait_until(&w, &id, Duration::from_mins(2), |r, _| {
        r["turn"]["state"] == "completed"
    })
    .unwrap_or_else(|d| panic!("the turn never completed\n{d}\n{}", diag()));
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
    let at = |k: &str| kinds.iter().position(|x| *x == k);
    assert!(
        at("turn.stalled") < at("turn.resumed") && at("turn.resumed") < at("turn.completed"),
        "{kinds:?}\n{}",
        diag()
    );
    assert_eq!(
        crate::support::world::turn_endings(&events),
        ["turn.completed"],
        "{}",
        diag()
    );
    assert!(
        w.repo.join("slow_out.txt").is_file(),
        "the command ran to its end\n{}",
        diag()
    );
    crate::support::world::assert_grammar(&rec, &events, &diag);
    stop(&w, &fake, &id);
}

/// Esc typed by a person at the hosted session's terminal (`spex attach`, a terminal the test
/// owns) mid-Bash: the turn ends `interrupted`, `by: terminal`; the command is killed.
#[test]
fn esc_at_the_terminal_is_an_interrupt_by_the_terminal() {
    use crate::runtime::{host_log, screen, spex_cmd, stop};
    let (w, fake, id) = launch_hosted(
        "{ \"harnesses\": [\"claude\"] }\n",
        "Please run a slow command. USE_SLOWBASH",
    );
    let diag = || format!("{}\nscreen:\n{}", host_log(&w, &id), screen(&w, &fake, &id));
    bash_started(&w, &id, &diag);
    let wait = waiter(&w, &id);
    let mut cmd = spex_cmd(&w, &fake, &["attach", &id]);
    cmd.env("LANG", "C.UTF-8");
    let t = crate::support::term::Term::spawn(&cmd, 40, 120);
    t.wait_for("Bash(sleep 20", Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{e}\n{}", diag()));
    t.send(b"\x1b");
    let out = wait.wait_with_output().expect("spex wait");
    let (rec, events) = wait_until(&w, &id, SETTLE, |r, _| r["turn"]["state"] != "running")
        .unwrap_or_else(|d| panic!("turn never ended\n{d}"));
    let diag = || {
        format!(
            "wait {:?} {:?}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            diag()
        )
    };
    assert_eq!(rec["turn"]["state"], "interrupted", "{}", diag());
    assert_eq!(rec["turn"]["by"], "terminal", "{}", diag());
    assert_eq!(out.status.code(), Some(4), "{}", diag());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("turn interrupted by terminal"),
        "{}",
        diag()
    );
    let gone = command_gone(&w);
    assert!(gone, "the command still runs\n{}", diag());
    crate::support::world::assert_grammar(&rec, &events, &diag);
    drop(t);
    stop(&w, &fake, &id);
}

/// `spex events --follow` is a reader too: with no other spex process running, it judges a
/// self-started session's turn at its budget's deadline (woken then, with no file event) and
/// prints the `turn.timed_out` while the harness still works on the turn.
#[test]
fn events_follow_judges_a_turn_past_its_budget_at_the_deadline() {
    use std::io::BufRead as _;
    let w = World::new();
    materialize(&w);
    crate::support::world::write(&w.repo.join("spex.jsonc"), "{ \"turnTimeout\": \"3s\" }\n");
    let fake = FakeAnthropic::start();
    let mut session = ClaudeSession::start(&w, &fake, Perm::AcceptEdits);
    let id = session.id.clone();
    wait_until(&w, &id, SETTLE, |_, _| true)
        .unwrap_or_else(|d| panic!("no record from SessionStart\n{d}"));
    let mut follower = w
        .cmd(&w.repo, &["events", "--follow", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn spex events");
    let stdout = follower.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if line.contains("\"turn.timed_out\"") {
                let _ = tx.send(std::time::Instant::now());
            }
        }
    });
    let began = std::time::Instant::now();
    let result = session.turn(&w, "USE_NONE DELAY=12 a slow answer");
    let ended = std::time::Instant::now();
    let seen = rx.recv_timeout(Duration::from_secs(5));
    let _ = follower.kill();
    let _ = follower.wait();
    let seen = seen.unwrap_or_else(|e| {
        panic!(
            "no turn.timed_out line ({e})\n{result}\n{}",
            session.diag(&w)
        )
    });
    assert!(
        seen < ended && seen.duration_since(began) < Duration::from_secs(9),
        "seen after {:?}, the turn ended after {:?}\n{}",
        seen.duration_since(began),
        ended.duration_since(began),
        session.diag(&w)
    );
    session.end(&w, true);
}
