//! `spex events` (issue 22, "One event stream"): every session's record changes as one stream,
//! followed through inotify, resumed by cursor with no loss and no duplicate.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use crate::support::payloads;
use crate::support::world::{World, read};

const WAIT: Duration = Duration::from_secs(30);

fn payload(w: &World, stem: &str, session: &str) -> Value {
    let path = Path::new(payloads::PAYLOADS)
        .join("claude")
        .join(format!("{stem}.json"));
    let mut v = payloads::localize(
        serde_json::from_str(&read(&path)).expect("fixture is JSON"),
        &w.repo,
        &w.home,
    );
    v["session_id"] = session.into();
    v
}

fn hook(w: &World, event: &str, stem: &str, session: &str) {
    let out = w.dispatch(&w.repo, "claude", event, &payload(w, stem, session));
    assert_eq!(out.status.code(), Some(0), "{event}");
}

/// A `spex events` process whose stdout lines arrive on a channel with the time each came.
struct Follower {
    child: Child,
    lines: mpsc::Receiver<(SystemTime, String)>,
}

impl Follower {
    fn start(w: &World, args: &[&str]) -> Follower {
        let mut child = w
            .cmd(&w.repo, args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spex events starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send((SystemTime::now(), line)).is_err() {
                    break;
                }
            }
        });
        // `--follow` with no cursor starts at the stream's end as it finds it: an event written
        // before the follower got there is not "from now on". It got there once it waits in
        // its poll for the store (the kernel names where a process sleeps).
        let wchan = format!("/proc/{}/wchan", child.id());
        let deadline = std::time::Instant::now() + WAIT;
        while !std::fs::read_to_string(&wchan).is_ok_and(|w| w.contains("poll")) {
            assert!(
                std::time::Instant::now() < deadline,
                "the follower never waited for the store"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Follower { child, lines: rx }
    }

    /// The next JSON line, or a failure after [`WAIT`].
    fn next(&self) -> (SystemTime, Value) {
        let (at, line) = self
            .lines
            .recv_timeout(WAIT)
            .expect("an event line within the wait");
        (at, serde_json::from_str(&line).expect("a JSON line"))
    }

    /// Lines until one of `kind` for `session`.
    fn until(&self, session: &str, kind: &str) -> Vec<Value> {
        let mut got = Vec::new();
        loop {
            let (_, v) = self.next();
            let done = v["session"] == session && v["kind"] == kind;
            got.push(v);
            if done {
                return got;
            }
        }
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The follower is up once it has started watching: a session it did not know of appears.
fn ready(w: &World, f: &Follower, session: &str) {
    hook(w, "SessionStart", "SessionStart.startup", session);
    f.until(session, "session.started");
}

fn key(v: &Value) -> (String, u64) {
    (
        v["session"].as_str().unwrap().to_owned(),
        v["seq"].as_u64().unwrap(),
    )
}

/// A follower sees a turn start, its tool call and its end in order; it is killed mid-stream
/// while sessions keep writing, and a new follower resumed from the last cursor it printed
/// gets every event it missed, each once; a session created while following appears.
#[test]
fn events_follow_resume_after_kill_without_loss_or_duplicate() {
    let w = World::new();
    let a = "aaaaaaaa-1111-4111-8111-000000000001";
    let b = "bbbbbbbb-2222-4222-8222-000000000002";
    let f = Follower::start(&w, &["events", "--follow", "--json"]);
    ready(&w, &f, a);
    hook(&w, "UserPromptSubmit", "UserPromptSubmit", a);
    hook(&w, "PreToolUse", "PreToolUse.Bash", a);
    hook(&w, "PostToolUse", "PostToolUse.Bash", a);
    hook(&w, "Stop", "Stop", a);
    let seen = f.until(a, "turn.completed");
    let kinds: Vec<&str> = seen.iter().map(|v| v["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "turn.started",
            "tool.started",
            "tool.completed",
            "turn.completed"
        ]
    );
    assert_eq!(seen[3]["state"]["status"], "idle", "{}", seen[3]);
    // A session created after the follower started.
    hook(&w, "SessionStart", "SessionStart.startup", b);
    let last = f.until(b, "session.started").pop().unwrap();
    let cursor = last["cursor"].as_str().unwrap().to_owned();
    f.kill();
    // Both sessions keep writing while nobody follows.
    for s in [a, b] {
        hook(&w, "UserPromptSubmit", "UserPromptSubmit", s);
        hook(&w, "PreToolUse", "PreToolUse.Bash", s);
    }
    let f2 = Follower::start(&w, &["events", "--follow", "--json", "--since", &cursor]);
    hook(&w, "Stop", "Stop", b);
    let resumed = f2.until(b, "turn.completed");
    let got: Vec<(String, u64)> = resumed.iter().map(key).collect();
    let want: Vec<(String, u64)> = vec![
        (a.into(), 6),
        (a.into(), 7),
        (b.into(), 2),
        (b.into(), 3),
        (b.into(), 4),
        (b.into(), 5),
    ];
    assert_eq!(got, want, "{resumed:#?}");
    // b's Bash call never completed: its turn's ending closes it first.
    assert_eq!(resumed[4]["kind"], "tool.interrupted", "{resumed:#?}");
    f2.kill();
    // The whole stream read at once holds each event of each session's log exactly once.
    let all = w.ok(&w.repo, &["events", "--json", "--since", "0"]);
    let all: Vec<Value> = all
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let pos: Vec<u64> = all.iter().map(|v| v["pos"].as_u64().unwrap()).collect();
    assert_eq!(pos, (1..=all.len() as u64).collect::<Vec<_>>());
    for s in [a, b] {
        let mine: Vec<u64> = all
            .iter()
            .filter(|v| v["session"] == s)
            .map(|v| v["seq"].as_u64().unwrap())
            .collect();
        let log: Vec<u64> = w
            .events(s)
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(mine, log, "{s}");
    }
    // Human lines name the session by its handle.
    let human = w.ok(&w.repo, &["events", "--since", "0"]);
    assert!(
        human.lines().any(|l| l.contains(" 0001 turn.started ")),
        "{human}"
    );
}

/// A record change reaches a follower within 100 ms (woken by inotify, not a timer): the time
/// from the record's write (its file's modification time) to the line's arrival, over 40 tool
/// calls.
#[test]
fn events_follow_latency_under_100_ms() {
    let w = World::new();
    let a = "cccccccc-3333-4333-8333-000000000003";
    let f = Follower::start(&w, &["events", "--follow", "--json"]);
    ready(&w, &f, a);
    hook(&w, "UserPromptSubmit", "UserPromptSubmit", a);
    f.until(a, "turn.started");
    let mut lat = Vec::new();
    for i in 0..40 {
        let (event, stem, kind) = if i % 2 == 0 {
            ("PreToolUse", "PreToolUse.Bash", "tool.started")
        } else {
            ("PostToolUse", "PostToolUse.Bash", "tool.completed")
        };
        hook(&w, event, stem, a);
        let (at, v) = f.next();
        assert_eq!(v["kind"], kind);
        let written = std::fs::metadata(w.session_dir(a).join("session.json"))
            .and_then(|m| m.modified())
            .unwrap();
        lat.push(at.duration_since(written).unwrap_or_default());
    }
    f.kill();
    lat.sort();
    // Percentile `q` (of 100) by nearest rank.
    let p = |q: usize| lat[((lat.len() - 1) * q).div_ceil(100)];
    eprintln!(
        "events --follow latency over {} record changes: p50 {:?}, p90 {:?}, p99 {:?}, max {:?}",
        lat.len(),
        p(50),
        p(90),
        p(99),
        lat[lat.len() - 1]
    );
    assert!(p(50) <= Duration::from_millis(100), "{lat:?}");
}

/// `spex events | head -1` ends quietly: a closed stdout is no error.
#[test]
fn events_to_a_closed_pipe_exit_quietly() {
    let w = World::new();
    let a = "dddddddd-4444-4444-8444-000000000004";
    hook(&w, "SessionStart", "SessionStart.startup", a);
    hook(&w, "UserPromptSubmit", "UserPromptSubmit", a);
    let mut f = w
        .cmd(&w.repo, &["events", "--follow", "--since", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(f.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("session.started"), "{first}");
    // The reader is gone: the follower notices without any new event.
    let began = Instant::now();
    let status = loop {
        if let Some(s) = f.try_wait().unwrap() {
            break s;
        }
        assert!(began.elapsed() < WAIT, "the follower kept running");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut f.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!((status.code(), err.as_str()), (Some(0), ""));
    // A cursor that is not one is refused with a hint.
    let out = w.spex(&w.repo, &["events", "--since", "nope"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("hint: `spex events --since 0`"), "{err}");
}

/// A real Claude Code session hosted by spex (fake Messages API) runs a turn with a tool call
/// while a follower that started before it watches: the follower sees the session appear, the
/// turn start, the tool call start, and the turn end, in that order, as the log has them.
#[test]
fn events_follow_a_real_hosted_claude_turn_in_order() {
    use crate::runtime::{claude_world, launch_json, stop};
    use crate::support::claude_home::SeedOptions;
    let (w, fake) = claude_world(SeedOptions::default());
    let f = Follower::start(&w, &["events", "--follow", "--json"]);
    // The follower is watching once it has read the (empty) stream: give it a moment to start
    // by waiting for a line a plain dispatch writes first.
    ready(&w, &f, "eeeeeeee-5555-4555-8555-000000000005");
    let launched = launch_json(&w, &fake, &["USE_READ read a file"]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let seen = f.until(&id, "turn.completed");
    let mine: Vec<&Value> = seen
        .iter()
        .filter(|v| v["session"] == id.as_str())
        .collect();
    let kinds: Vec<&str> = mine.iter().map(|v| v["kind"].as_str().unwrap()).collect();
    let at = |k: &str| kinds.iter().position(|x| *x == k);
    let (start, tool, end) = (at("turn.started"), at("tool.started"), at("turn.completed"));
    assert!(
        at("session.started") < start && start < tool && tool < end && start.is_some(),
        "{kinds:?}"
    );
    assert_eq!(
        mine[tool.unwrap()]["tool"],
        "Read",
        "{:#?}",
        mine[tool.unwrap()]
    );
    assert_eq!(mine[end.unwrap()]["state"]["status"], "idle");
    // In the log's order, each once.
    let seqs: Vec<u64> = mine.iter().map(|v| v["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "{kinds:?}"
    );
    stop(&w, &fake, &id);
    f.until(&id, "session.exited");
    f.kill();
}

/// Session logs rotate (`store.eventLogBytes` 4096) under a follower: it still gets every
/// event once, in order. Events that rotate out of a log while no reader runs are not lost
/// silently: a resumed follower gets a `stream.gap` naming them, then the rest.
#[test]
fn events_survive_rotation_and_say_what_rotated_away_unread() {
    let w = World::new();
    crate::support::world::write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\"], \"store\": { \"eventLogBytes\": 4096 } }\n",
    );
    w.ok(&w.repo, &["materialize"]);
    let a = "ffffffff-6666-4666-8666-000000000006";
    let f = Follower::start(&w, &["events", "--follow", "--json"]);
    ready(&w, &f, a);
    hook(&w, "UserPromptSubmit", "UserPromptSubmit", a);
    let mut seqs = vec![1];
    let mut cursor = String::new();
    for i in 0..60 {
        let (event, stem) = if i % 2 == 0 {
            ("PreToolUse", "PreToolUse.Bash")
        } else {
            ("PostToolUse", "PostToolUse.Bash")
        };
        hook(&w, event, stem, a);
        // Read as they come, so the follower keeps up with the rotation.
        loop {
            let (_, v) = f.next();
            seqs.push(v["seq"].as_u64().unwrap());
            cursor = v["cursor"].as_str().unwrap().to_owned();
            if v["seq"] == w.record(a)["seq"] {
                break;
            }
        }
    }
    let log = w.project_dir().join(format!("sessions/{a}/events.jsonl.1"));
    assert!(log.exists(), "the log never rotated");
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    f.kill();
    // Far more than two segments while nobody reads.
    let before = w.record(a)["seq"].as_u64().unwrap();
    for i in 0..120 {
        let (event, stem) = if i % 2 == 0 {
            ("PreToolUse", "PreToolUse.Bash")
        } else {
            ("PostToolUse", "PostToolUse.Bash")
        };
        hook(&w, event, stem, a);
    }
    let last = w.record(a)["seq"].as_u64().unwrap();
    let out = w.ok(&w.repo, &["events", "--json", "--since", &cursor]);
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["kind"], "stream.gap", "{:#?}", lines[0]);
    assert_eq!(lines[0]["from_seq"].as_u64(), Some(before + 1));
    let after_gap: Vec<u64> = lines[1..]
        .iter()
        .map(|v| v["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(
        after_gap,
        (lines[0]["to_seq"].as_u64().unwrap() + 1..=last).collect::<Vec<_>>()
    );
    // The rotation was on purpose: the kept log starts past seq 1.
    w.skip_grammar();
}

/// Readers killed at every moment of their copy while hooks arrive: `spex events` processes
/// killed (SIGKILL) after a random delay, and others that kill themselves at a named moment of
/// the copy (`SPEX_STREAM_FAULT`, test builds: half a batch written, the batch written but not
/// its bookkeeping, the stream renamed aside for rotation but no new file yet), with a stream
/// bound small enough (`SPEX_STREAM_BYTES`) that it rotates every few batches. After each kill
/// a reader resumed from the last cursor gets the positions right after it, each once; at the
/// end every event of every session's log has been in the stream exactly once, at contiguous
/// positions.
#[test]
fn readers_killed_at_any_moment_of_their_copy_never_duplicate_or_lose_an_event() {
    let w = World::new();
    let ids = [
        "dddddddd-4444-4444-8444-000000000001",
        "dddddddd-4444-4444-8444-000000000002",
        "dddddddd-4444-4444-8444-000000000003",
    ];
    let faults = ["", "torn", "appended", "rotated"];
    let stop = std::sync::atomic::AtomicBool::new(false);
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap();
    let mut seed = (now.as_secs() << 30 ^ u64::from(now.subsec_nanos())) | 1;
    eprintln!("seed {seed}");
    let mut rand = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let read = |since: &str| -> Vec<Value> {
        let out = w
            .cmd(&w.repo, &["events", "--json", "--since", since])
            .env("SPEX_STREAM_BYTES", "8192")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let mut seen: Vec<Value> = Vec::new();
    let mut cursor = "0".to_owned();
    let mut killed = std::collections::BTreeMap::new();
    std::thread::scope(|scope| {
        // Hooks keep arriving, each session a turn with tool calls, all through the run.
        // (`World` stays on this thread: the hooks' thread gets what their commands need.)
        let template = w.cmd(&w.repo, &[]);
        let program = template.get_program().to_owned();
        let envs: Vec<(std::ffi::OsString, std::ffi::OsString)> = template
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
            .collect();
        let repo = w.repo.clone();
        let turn = [
            ("UserPromptSubmit", "UserPromptSubmit"),
            ("PreToolUse", "PreToolUse.Bash"),
            ("PostToolUse", "PostToolUse.Bash"),
            ("Stop", "Stop"),
        ];
        let starts: Vec<String> = ids
            .iter()
            .map(|s| payload(&w, "SessionStart.startup", s).to_string())
            .collect();
        let turns: Vec<Vec<String>> = ids
            .iter()
            .map(|s| {
                turn.iter()
                    .map(|t| payload(&w, t.1, s).to_string())
                    .collect()
            })
            .collect();
        let stop = &stop;
        scope.spawn(move || {
            let run = |event: &str, input: &str| {
                use std::io::Write as _;
                let mut child = std::process::Command::new(&program)
                    .args(["dispatch", "claude", event])
                    .current_dir(&repo)
                    .env_clear()
                    .envs(envs.iter().map(|(k, v)| (k, v)))
                    .stdin(Stdio::piped())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
                child
                    .stdin
                    .take()
                    .unwrap()
                    .write_all(input.as_bytes())
                    .unwrap();
                assert!(child.wait().unwrap().success(), "{event}");
            };
            for s in &starts {
                run("SessionStart", s);
            }
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let k = (i / ids.len()) % turn.len();
                run(turn[k].0, &turns[i % ids.len()][k]);
                i += 1;
            }
        });
        for round in 0..120 {
            let fault = faults[round % faults.len()];
            let mut child = w
                .cmd(&w.repo, &["events", "--json", "--since", "0"])
                // The reader that is to die in its rotation makes one whenever it writes.
                .env(
                    "SPEX_STREAM_BYTES",
                    if fault == "rotated" { "1" } else { "8192" },
                )
                .env("SPEX_STREAM_FAULT", fault)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            if fault.is_empty() {
                std::thread::sleep(Duration::from_micros(rand(20_000)));
                let _ = child.kill();
            }
            let status = child.wait().unwrap();
            if std::os::unix::process::ExitStatusExt::signal(&status) == Some(9) {
                *killed.entry(fault).or_insert(0) += 1;
            }
            // A reader resumed from the last cursor: the positions right after it, once each.
            let got = read(&cursor);
            for v in got {
                let want = seen.len() as u64 + 1;
                assert_eq!(v["pos"], want, "round {round} ({fault:?}): {v}");
                cursor = v["cursor"].as_str().unwrap().to_owned();
                seen.push(v);
            }
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    seen.extend(read(&cursor));
    // Every crash window was reached (a fault fires only when the reader has a batch to
    // write, or a rotation to make).
    eprintln!("readers killed, by moment: {killed:?}");
    for fault in faults {
        assert!(
            killed.get(fault).is_some_and(|n| *n > 0),
            "{fault:?}: {killed:?}"
        );
    }
    let rotated = w.project_dir().join("stream.jsonl.1");
    assert!(rotated.exists(), "the stream never rotated");
    for s in ids {
        let mine: Vec<u64> = seen
            .iter()
            .filter(|v| v["session"] == s)
            .map(|v| v["seq"].as_u64().unwrap())
            .collect();
        let last = w.record(s)["seq"].as_u64().unwrap();
        assert_eq!(mine, (1..=last).collect::<Vec<_>>(), "{s}");
    }
    let pos: Vec<u64> = seen.iter().map(|v| v["pos"].as_u64().unwrap()).collect();
    assert_eq!(pos, (1..=seen.len() as u64).collect::<Vec<_>>());
}
