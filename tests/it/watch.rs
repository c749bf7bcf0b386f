//! The watcher (issue 29 §1): with only `spex watch` running (no `sessions`, `show` or `wait`),
//! `spex events --follow` hears within 1 s of what no hook reports; one watcher works per user
//! (a second waits in standby and takes over); a watcher killed at any moment loses and
//! duplicates no event; idle, it has no wakeups.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

use crate::support::payloads;
use crate::support::world::{World, read, read_or_empty, write};

/// The issue's bound: a conclusion no hook reports is in the stream within this.
const BOUND: Duration = Duration::from_secs(1);
/// Setting up (hooks, a first fold) on a loaded machine.
const SETUP: Duration = Duration::from_secs(30);

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

pub fn hook(w: &World, event: &str, stem: &str, session: &str) {
    let out = w.dispatch(&w.repo, "claude", event, &payload(w, stem, session));
    assert_eq!(out.status.code(), Some(0), "{event}");
}

/// `spex watch` in the world, its log in a file beside the world's folders.
pub struct Watch {
    pub child: Child,
    pub log: PathBuf,
}

impl Watch {
    pub fn start(w: &World, name: &str) -> Watch {
        let log = w.dir.path().join(format!("{name}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let child = w
            .cmd(&w.repo, &["watch"])
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("spex watch starts");
        Watch { child, log }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> String {
        read_or_empty(&self.log)
    }

    /// Waits until its log says it `watching` (it holds the lock and folded every project).
    pub fn until_logged(&self, needle: &str) {
        let end = Instant::now() + SETUP;
        while !self.log().contains(needle) {
            assert!(
                Instant::now() < end,
                "the watcher never logged {needle:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Its log, and where each of its threads is (for a failure message).
    pub fn diag(&self) -> String {
        let stacks = Command::new("gdb")
            .args([
                "-p",
                &self.pid().to_string(),
                "-batch",
                "-ex",
                "thread apply all bt 12",
            ])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        format!("{}\n--- its threads:\n{stacks}", self.log())
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A `spex events --follow --json` process whose lines arrive on a channel with their time.
pub struct Follower {
    child: Child,
    lines: mpsc::Receiver<(Instant, Value)>,
}

impl Follower {
    pub fn start(w: &World) -> Follower {
        let mut child = w
            .cmd(&w.repo, &["events", "--follow", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spex events starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v = serde_json::from_str(&line).expect("a JSON line");
                if tx.send((Instant::now(), v)).is_err() {
                    break;
                }
            }
        });
        Follower { child, lines: rx }
    }

    /// The first line for `session` that `pred` accepts, and when it arrived.
    pub fn until(
        &self,
        session: &str,
        within: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Result<(Instant, Value), Vec<Value>> {
        let end = Instant::now() + within;
        let mut seen = Vec::new();
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let Ok((at, v)) = self.lines.recv_timeout(left) else {
                return Err(seen);
            };
            if v["session"] == session && pred(&v) {
                return Ok((at, v));
            }
            seen.push(v);
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The follower is reading once a session it did not know of appears in what it prints.
pub fn ready(w: &World, f: &Follower) {
    let probe = uuid();
    hook(w, "SessionStart", "SessionStart.startup", &probe);
    f.until(&probe, SETUP, |v| v["kind"] == "session.started")
        .unwrap_or_else(|seen| panic!("the follower never started: {seen:#?}"));
}

pub fn uuid() -> String {
    let h = crate::support::http::random_hex(32);
    format!(
        "{}-{}-4{}-a{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

/// `/proc/<pid>/stat` field 22, the process's start time (what Claude's registry records).
fn proc_start(pid: u32) -> u64 {
    let stat = read(Path::new(&format!("/proc/{pid}/stat")));
    let rest = &stat[stat.rfind(')').unwrap() + 1..];
    rest.split_whitespace().nth(19).unwrap().parse().unwrap()
}

/// A long-sleeping process standing in for a harness (killed with its guard).
pub struct Sleeper(pub Child);

impl Sleeper {
    pub fn start() -> Sleeper {
        Sleeper(
            Command::new("sleep")
                .arg("3600")
                .stdin(Stdio::null())
                .spawn()
                .expect("sleep starts"),
        )
    }

    /// `kill -9`, reaped.
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A Claude session `sid` whose process is `p`, as Claude's own registry says
/// (docs/harnesses/facts/claude.md, "Live-session registry"), started by its hook.
fn register(w: &World, sid: &str, p: &Sleeper) {
    let pid = p.0.id();
    hook(w, "SessionStart", "SessionStart.startup", sid);
    let entry = json!({
        "pid": pid, "procStart": proc_start(pid).to_string(), "sessionId": sid,
        "cwd": w.repo, "status": "idle",
        "statusUpdatedAt": u64::try_from(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_millis()).unwrap(),
    });
    write(
        &w.home.join(format!(".claude/sessions/{pid}.json")),
        entry.to_string(),
    );
}

/// Waits until the record of `sid` holds `pred` (read from the record file: no reader runs).
fn record_until(w: &World, sid: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let end = Instant::now() + SETUP;
    loop {
        if let Some(r) = w.record_if_any(sid)
            && pred(&r)
        {
            return r;
        }
        assert!(Instant::now() < end, "{what}: {:?}", w.record_if_any(sid));
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Context switches, voluntary and not, of every thread of process `pid`: each wakeup of a
/// blocked thread is one.
pub fn wakeups(pid: u32) -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let status = read_or_empty(&task.unwrap().path().join("status"));
        for line in status.lines() {
            if let Some(n) = line
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                total += n.trim().parse::<u64>().unwrap();
            }
        }
    }
    total
}

/// `spex service status --json`.
fn service_status(w: &World) -> Value {
    serde_json::from_str(&w.ok(&w.repo, &["service", "status", "--json"])).unwrap()
}

/// A killed harness process (`kill -9`: no hook) is `exited` in the stream within 1 s with only
/// the watcher running; a second watcher waits in standby (no wakeups) while the first works,
/// `spex service status` names the one that works, and the second takes over when the first is
/// killed, and hears the next kill as fast.
#[test]
fn a_killed_harness_reaches_the_stream_within_a_second_and_a_standby_watcher_takes_over() {
    let w = World::new();
    let mut first = Watch::start(&w, "first");
    first.until_logged("watcher: watching");
    let f = Follower::start(&w);
    ready(&w, &f);
    assert_eq!(service_status(&w)["pid"], first.pid(), "{}", first.log());
    let mut second = Watch::start(&w, "second");
    second.until_logged("standby");

    let (a, b) = (uuid(), uuid());
    let (mut pa, mut pb) = (Sleeper::start(), Sleeper::start());
    register(&w, &a, &pa);
    register(&w, &b, &pb);
    for sid in [&a, &b] {
        record_until(&w, sid, "the watcher never recorded the process", |r| {
            r["process"]["pid"].is_u64()
        });
    }
    let standby = wakeups(second.pid());
    pa.kill();
    let killed = Instant::now();
    let (at, line) = f
        .until(&a, SETUP, |v| v["kind"] == "session.exited")
        .unwrap_or_else(|seen| panic!("no exit: {seen:#?}\n{}", first.log()));
    eprintln!("kill -9 -> stream: {:?}", at - killed);
    assert!(at - killed < BOUND, "{:?}\n{}", at - killed, first.log());
    assert_eq!(line["reason"], "process gone", "{line}");
    assert_eq!(line["state"]["status"], "exited", "{line}");
    assert_eq!(
        wakeups(second.pid()),
        standby,
        "the standby watcher woke:\n{}",
        second.log()
    );

    first.kill();
    second.until_logged("watcher: watching");
    assert_eq!(service_status(&w)["pid"], second.pid(), "{}", second.log());
    pb.kill();
    let killed = Instant::now();
    let (at, _) = f
        .until(&b, SETUP, |v| v["kind"] == "session.exited")
        .unwrap_or_else(|seen| panic!("no exit after takeover: {seen:#?}\n{}", second.log()));
    eprintln!("after takeover, kill -9 -> stream: {:?}", at - killed);
    assert!(at - killed < BOUND, "{:?}\n{}", at - killed, second.log());
    // Each conclusion once, though two watchers looked at the same store.
    for sid in [&a, &b] {
        let exits = w
            .events(sid)
            .iter()
            .filter(|e| e["kind"] == "session.exited")
            .count();
        assert_eq!(exits, 1, "{sid}: {:#?}", w.events(sid));
    }
    second.kill();
    assert!(service_status(&w)["running"] == false);
}

/// Idle cost: 20 live sessions (long-sleeping processes registered as Claude sessions), the
/// watcher idle for 60 s: not one context switch in any of its threads. Then it still works.
#[test]
fn an_idle_watcher_over_twenty_live_sessions_has_no_wakeups_in_sixty_seconds() {
    let w = World::new();
    let mut sleepers = Vec::new();
    let mut ids = Vec::new();
    for _ in 0..20 {
        let (sid, p) = (uuid(), Sleeper::start());
        register(&w, &sid, &p);
        sleepers.push(p);
        ids.push(sid);
    }
    let watch = Watch::start(&w, "watch");
    watch.until_logged("watcher: watching");
    for sid in &ids {
        record_until(&w, sid, "the watcher never recorded the process", |r| {
            r["process"]["pid"].is_u64()
        });
    }
    // What its first folds wrote has woken it (once each); let that settle.
    std::thread::sleep(Duration::from_secs(2));
    let before = wakeups(watch.pid());
    let idle = Duration::from_mins(1);
    std::thread::sleep(idle);
    let after = wakeups(watch.pid());
    eprintln!(
        "watcher over {} live sessions, idle {idle:?}: {} wakeups",
        ids.len(),
        after - before
    );
    assert_eq!(after, before, "{}", watch.log());
    // Still watching: a kill is concluded.
    sleepers[7].kill();
    let r = record_until(&w, &ids[7], "no exit after the idle time", |r| {
        r["status"] == "exited"
    });
    assert_eq!(r["exit_reason"], "process gone", "{r}");
}

/// Watchers killed (SIGKILL) at random moments, 50 times, while hooks keep arriving and harness
/// processes keep dying: two watchers run at any time (one works, one waits), one of them
/// killed each round and a new one started. At the end, with one watcher left to settle, the
/// stream file it wrote holds every event of every session's log exactly once, at contiguous
/// positions, and each killed harness ended its session exactly once.
#[test]
fn watchers_killed_at_random_moments_lose_and_duplicate_no_event() {
    const ROUNDS: usize = 50;
    let w = World::new();
    let hooked = [uuid(), uuid(), uuid()];
    let mut harnesses: Vec<(String, Sleeper)> = (0..ROUNDS)
        .map(|_| {
            let (sid, p) = (uuid(), Sleeper::start());
            register(&w, &sid, &p);
            (sid, p)
        })
        .collect();
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
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut watchers = vec![Watch::start(&w, "w0"), Watch::start(&w, "w1")];
    std::thread::scope(|scope| {
        // Hooks keep arriving: each session a turn with tool calls, all through the run.
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
        let starts: Vec<String> = hooked
            .iter()
            .map(|s| payload(&w, "SessionStart.startup", s).to_string())
            .collect();
        let turns: Vec<Vec<String>> = hooked
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
                let out = crate::support::world::feed(
                    Command::new(&program)
                        .args(["dispatch", "claude", event])
                        .current_dir(&repo)
                        .env_clear()
                        .envs(envs.iter().map(|(k, v)| (k, v))),
                    input.as_bytes(),
                );
                assert!(out.status.success(), "{event}");
            };
            for s in &starts {
                run("SessionStart", s);
            }
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let k = (i / hooked.len()) % turn.len();
                run(turn[k].0, &turns[i % hooked.len()][k]);
                i += 1;
            }
        });
        for (round, (_, harness)) in harnesses.iter_mut().enumerate() {
            std::thread::sleep(Duration::from_micros(rand(150_000)));
            harness.kill();
            std::thread::sleep(Duration::from_micros(rand(150_000)));
            let k = usize::try_from(rand(2)).unwrap();
            watchers[k].kill();
            watchers[k] = Watch::start(&w, &format!("w{}", round + 2));
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    // One watcher left, nothing else happening: it settles every conclusion.
    watchers.pop();
    for (sid, _) in &harnesses {
        record_until(&w, sid, "a killed harness never ended its session", |r| {
            r["status"] == "exited"
        });
    }
    // The watcher took the last records in when it woke for them: give it its moment.
    let stream_file = w.project_dir().join("stream.jsonl");
    let logs: Vec<(String, u64)> = w
        .all_session_dirs()
        .iter()
        .flat_map(|d| {
            let sid = d.file_name().unwrap().to_string_lossy().into_owned();
            let text = read_or_empty(&d.join("events.jsonl"));
            text.lines()
                .map(|l| {
                    serde_json::from_str::<Value>(l).unwrap()["seq"]
                        .as_u64()
                        .unwrap()
                })
                .map(|seq| (sid.clone(), seq))
                .collect::<Vec<_>>()
        })
        .collect();
    let end = Instant::now() + SETUP;
    let stream = loop {
        let stream: Vec<Value> = read_or_empty(&stream_file)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if stream.len() >= logs.len() || Instant::now() > end {
            break stream;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let diag = || {
        watchers
            .iter()
            .map(Watch::log)
            .collect::<Vec<_>>()
            .join("\n---\n")
    };
    let pos: Vec<u64> = stream.iter().map(|v| v["pos"].as_u64().unwrap()).collect();
    assert_eq!(pos, (1..=stream.len() as u64).collect::<Vec<_>>());
    let mut held: Vec<(String, u64)> = stream
        .iter()
        .map(|v| {
            (
                v["session"].as_str().unwrap().to_owned(),
                v["seq"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut want = logs.clone();
    held.sort();
    want.sort();
    assert_eq!(held, want, "the stream and the logs differ\n{}", diag());
    for (sid, _) in &harnesses {
        let exits = w
            .events(sid)
            .iter()
            .filter(|e| e["kind"] == "session.exited")
            .count();
        assert_eq!(exits, 1, "{sid}: {:#?}", w.events(sid));
    }
}

/// Claude's registry files, by path.
fn claude_registry(w: &World) -> Vec<Value> {
    std::fs::read_dir(w.home.join(".claude/sessions"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| serde_json::from_str(&read_or_empty(&e.path())).ok())
        .collect()
}

/// The real Claude Code TUI the person started in a terminal the test owns (no spex host), with
/// spex's hooks installed, against the fake Messages API; only `spex watch` runs besides `spex
/// events --follow`. Esc at its permission dialog fires no hook: the stream says the turn was
/// interrupted within 1 s of Claude's registry saying so (and within 2 s of the key, Claude's
/// own reaction on a loaded machine included). `kill -9` of the TUI fires none either:
/// `exited` within 1 s.
#[test]
fn a_real_claude_tui_esc_and_kill_reach_the_stream_within_a_second_with_only_the_watcher() {
    use crate::support::claude_home::{
        DUMMY_API_KEY, SeedOptions, claude_command, seed_claude_home,
    };
    use crate::support::fake_anthropic::FakeAnthropic;
    use crate::support::term::Term;
    let w = World::new();
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\"] }\n",
    );
    w.ok(&w.repo, &["materialize"]);
    let fake = FakeAnthropic::start();
    seed_claude_home(&w.home, DUMMY_API_KEY, &[&w.repo], SeedOptions::default());
    let watch = Watch::start(&w, "watch");
    watch.until_logged("watcher: watching");
    let f = Follower::start(&w);
    ready(&w, &f);
    let sid = uuid();
    let mut cmd = claude_command(&w.home, &fake.base_url());
    cmd.env("SPEX_HOME", &w.spex_home)
        .env("XDG_CONFIG_HOME", &w.xdg_config)
        .env("CODEX_HOME", &w.codex_home)
        .env("LANG", "C.UTF-8")
        .args(["--session-id", &sid])
        .current_dir(&w.repo);
    let t = Term::spawn(&cmd, 45, 130);
    let diag = |t: &Term| {
        format!(
            "--- record: {:?}\n--- registry: {:?}\n--- screen:\n{}\n--- watcher:\n{}\n--- errors: {}",
            w.record_if_any(&sid),
            claude_registry(&w),
            t.text(),
            watch.diag(),
            w.errors_log()
        )
    };
    // Up once its registry file says idle.
    let end = Instant::now() + Duration::from_mins(1);
    while !claude_registry(&w)
        .iter()
        .any(|v| v["sessionId"] == sid.as_str() && v["status"] == "idle")
    {
        assert!(Instant::now() < end, "the TUI never came up\n{}", diag(&t));
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    // A permission dialog (its hook says so), then Esc.
    t.send(b"\x1b[200~Please run a command. USE_BASH\x1b[201~");
    std::thread::sleep(Duration::from_millis(300));
    t.send(b"\r");
    f.until(&sid, Duration::from_mins(1), |v| {
        v["kind"] == "attention.opened"
    })
    .unwrap_or_else(|seen| panic!("no permission dialog: {seen:#?}\n{}", diag(&t)));
    std::thread::sleep(Duration::from_millis(300));
    t.send(b"\x1b");
    let escaped = Instant::now();
    let (at, line) = f
        .until(&sid, Duration::from_secs(10), |v| {
            v["kind"] == "turn.interrupted"
        })
        .unwrap_or_else(|seen| panic!("Esc never reached the stream: {seen:#?}\n{}", diag(&t)));
    // Claude's own part: from the key to its registry saying idle (its `statusUpdatedAt`);
    // the watcher's: from there to the stream.
    let arrived = SystemTime::now() - at.elapsed();
    let idle_at = claude_registry(&w)
        .iter()
        .find(|v| v["sessionId"] == sid.as_str())
        .and_then(|v| v["statusUpdatedAt"].as_u64())
        .map_or_else(
            || panic!("no registry entry\n{}", diag(&t)),
            |ms| SystemTime::UNIX_EPOCH + Duration::from_millis(ms),
        );
    let watcher_part = arrived.duration_since(idle_at).unwrap_or_default();
    eprintln!(
        "claude: Esc at the dialog -> stream: {:?} (registry idle -> stream: {watcher_part:?})",
        at - escaped
    );
    assert!(watcher_part < BOUND, "{watcher_part:?}\n{}", diag(&t));
    assert!(at - escaped < 2 * BOUND, "{:?}\n{}", at - escaped, diag(&t));
    assert_eq!(line["by"], "denial", "{line}");
    let r = record_until(&w, &sid, "idle after Esc", |r| r["status"] == "idle");
    assert!(r["attention"].is_null(), "{r}");
    assert!(
        !w.repo.join("bash_out.txt").exists(),
        "the refused command ran"
    );
    // `kill -9` of the TUI.
    let pid = t.pid();
    assert!(
        Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let killed = Instant::now();
    let (at, line) = f
        .until(&sid, Duration::from_secs(10), |v| {
            v["kind"] == "session.exited"
        })
        .unwrap_or_else(|seen| {
            panic!("the kill never reached the stream: {seen:#?}\n{}", diag(&t))
        });
    eprintln!("claude: kill -9 -> stream: {:?}", at - killed);
    assert!(at - killed < BOUND, "{:?}\n{}", at - killed, diag(&t));
    assert_eq!(line["reason"], "process gone", "{line}");
    drop(t);
}

/// The real Gemini CLI TUI the person started in a terminal the test owns, with spex's hooks,
/// against the fake Gemini API; only `spex watch` runs besides `spex events --follow`. Esc at
/// its shell permission dialog cancels the request and fires no hook at all: the stream says the
/// turn was interrupted (by a denial) within 1 s of Gemini writing the cancel.
#[test]
fn a_cancelled_gemini_dialog_reaches_the_stream_within_a_second_with_only_the_watcher() {
    use crate::support::fake_gemini::FakeGemini;
    use crate::support::gemini_home::{
        gemini_command, seed_gemini_home, submit_prompt, wait_tui_ready,
    };
    use crate::support::term::Term;
    const TUI_WAIT: Duration = Duration::from_secs(90);
    let w = World::new();
    seed_gemini_home(&w.home);
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"gemini\"] }\n",
    );
    w.ok(&w.repo, &["materialize"]);
    let fake = FakeGemini::start();
    let watch = Watch::start(&w, "watch");
    watch.until_logged("watcher: watching");
    let f = Follower::start(&w);
    ready(&w, &f);
    let mut cmd = gemini_command(&w.home, &fake.base_url());
    cmd.env("SPEX_HOME", &w.spex_home)
        .env("XDG_CONFIG_HOME", &w.xdg_config)
        .current_dir(&w.repo);
    let t = Term::spawn(&cmd, 45, 130);
    let diag = |t: &Term| {
        format!(
            "{}\n--- requests: {:#?}\n--- watcher:\n{}\n--- errors: {}",
            t.diag(),
            fake.request_lines(),
            watch.diag(),
            w.errors_log()
        )
    };
    wait_tui_ready(&t, TUI_WAIT).unwrap_or_else(|e| panic!("{e}\n{}", diag(&t)));
    let prompt = "SCENARIO:shell run it";
    submit_prompt(&t, prompt, TUI_WAIT, || {
        fake.prompt_within(prompt, Duration::ZERO).is_some()
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", diag(&t)));
    t.wait_for("Allow execution", TUI_WAIT)
        .unwrap_or_else(|e| panic!("no dialog: {e}\n{}", diag(&t)));
    // The one Gemini session (the follower's probe is a Claude one).
    let end = Instant::now() + SETUP;
    let sid = loop {
        let found = w.session_ids().into_iter().find(|id| {
            w.record_if_any(id)
                .is_some_and(|r| r["harness"] == "gemini")
        });
        if let Some(id) = found {
            break id;
        }
        assert!(Instant::now() < end, "no Gemini session\n{}", diag(&t));
        std::thread::sleep(Duration::from_millis(50));
    };
    f.until(&sid, SETUP, |v| v["kind"] == "attention.opened")
        .unwrap_or_else(|seen| panic!("no permission dialog: {seen:#?}\n{}", diag(&t)));
    std::thread::sleep(Duration::from_millis(300));
    t.send(b"\x1b");
    let esc = Instant::now();
    t.wait_for("Request cancelled", TUI_WAIT)
        .unwrap_or_else(|e| panic!("no cancel: {e}\n{}", diag(&t)));
    let cancelled = Instant::now();
    let (at, line) = f
        .until(&sid, Duration::from_secs(10), |v| {
            v["kind"] == "turn.interrupted"
        })
        .unwrap_or_else(|seen| {
            panic!(
                "the cancel never reached the stream: {seen:#?}\n{}",
                diag(&t)
            )
        });
    // Counted from when the screen showed the cancel (Gemini writes its transcript then).
    let late = at.saturating_duration_since(cancelled);
    eprintln!(
        "gemini: cancel on screen -> stream: {late:?} (Esc -> stream: {:?})",
        at - esc
    );
    assert!(late < BOUND, "{late:?}\n{}", diag(&t));
    assert_eq!(line["by"], "denial", "{line}");
    assert!(
        line["source"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Gemini's transcript"),
        "{line}"
    );
    assert!(
        !w.repo.join("shell_out.txt").exists(),
        "the rejected command ran"
    );
}

/// A real Codex thread (an app-server the test started; the fake Responses API fails every
/// request) whose turn fails on its last retry: Codex fires `PostModelRequest` `failed` per
/// attempt and nothing after the last one (docs/harnesses/facts/codex.md §8), so the turn has
/// failed once no new attempt followed within the retry bound. With only `spex watch` running,
/// the stream says so within 1 s of that bound: the watcher wakes for the deadline itself.
#[test]
fn a_codex_final_failed_retry_reaches_the_stream_within_a_second_of_its_bound() {
    use crate::real_sessions::CodexRig;
    /// `RETRY_BOUND` of the Codex adapter (src/adapters/codex/evidence.rs).
    const RETRY_BOUND: Duration = Duration::from_secs(8);
    let mut rig = CodexRig::start_with_retries(1);
    let watch = Watch::start(&rig.w, "watch");
    watch.until_logged("watcher: watching");
    let f = Follower::start(&rig.w);
    ready(&rig.w, &f);
    let thread = rig.cx.start_thread(&json!({"cwd": rig.w.repo}));
    let turn = rig.cx.start_turn(&thread, "SCENARIO:fail");
    let done = rig.cx.completed_within(&turn, Duration::from_mins(2));
    let done = done.unwrap_or_else(|| panic!("no turn/completed\n{}", rig.diag(&thread)));
    assert_eq!(
        done["turn"]["status"],
        "failed",
        "{done}\n{}",
        rig.diag(&thread)
    );
    let id = rig.record_id(&thread);
    let (at, line) = f
        .until(&id, Duration::from_secs(30), |v| v["kind"] == "turn.failed")
        .unwrap_or_else(|seen| {
            panic!(
                "the failure never reached the stream: {seen:#?}\n{}\n{}",
                rig.diag(&id),
                watch.diag()
            )
        });
    let arrived = SystemTime::now() - at.elapsed();
    let events = rig.w.events(&id);
    let attempts: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "model.failed")
        .collect();
    assert_eq!(
        attempts.len(),
        2,
        "one retry, both failed\n{}",
        rig.diag(&id)
    );
    let last = attempts[1]["time"].as_str().unwrap();
    let bound = humantime::parse_rfc3339_weak(last.trim_end_matches('Z')).unwrap() + RETRY_BOUND;
    let late = arrived.duration_since(bound).unwrap_or_else(|e| {
        panic!(
            "concluded {:?} before the bound\n{}",
            e.duration(),
            rig.diag(&id)
        )
    });
    eprintln!("codex: retry bound passed -> stream: {late:?}");
    assert!(late < BOUND, "{late:?}\n{}\n{}", rig.diag(&id), watch.log());
    assert_eq!(line["source"], "hook PostModelRequest", "{line}");
    assert_eq!(line["error_kind"], "model_error", "{line}");
    let r = rig.w.record(&id);
    assert_eq!(r["turn"]["state"], "failed", "{r}");
    assert_eq!(r["attention"]["reason"], "turn_failed", "{r}");
}

/// `spex watch` ends cleanly on SIGTERM and on SIGINT (exit 0, its log says so), working or in
/// standby, and the lock it held is free after.
#[test]
fn spex_watch_exits_cleanly_on_sigterm_and_sigint() {
    let w = World::new();
    let mut first = Watch::start(&w, "first");
    first.until_logged("watcher: watching");
    let mut second = Watch::start(&w, "second");
    second.until_logged("standby");
    for (watch, sig) in [(&mut second, "-TERM"), (&mut first, "-INT")] {
        let pid = watch.pid().to_string();
        assert!(
            Command::new("kill")
                .args([sig, &pid])
                .status()
                .unwrap()
                .success()
        );
        let end = Instant::now() + SETUP;
        let status = loop {
            if let Some(s) = watch.child.try_wait().unwrap() {
                break s;
            }
            assert!(
                Instant::now() < end,
                "still running after {sig}\n{}",
                watch.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(0), "{sig}: {status:?}\n{}", watch.log());
        assert!(watch.log().contains("watcher: stopping"), "{}", watch.log());
    }
    assert!(first.log().contains("watcher: stopped"), "{}", first.log());
    let status = service_status(&w);
    assert_eq!(status["running"], false, "{status}");
}

/// `spex service` where systemd's user manager does not run: `install` writes nothing and
/// prints the command to run at login (this binary's canonical path, `watch`); `status` says no
/// watcher runs and nothing is installed.
#[test]
fn spex_service_without_systemd_prints_the_command_to_run_at_login() {
    let w = World::new();
    let out = w.ok(&w.repo, &["service", "install"]);
    let exe = std::fs::canonicalize(crate::support::world::spex_bin()).unwrap();
    assert!(out.contains(&format!("{} watch", exe.display())), "{out}");
    assert!(out.contains("systemd"), "{out}");
    let unit = w.xdg_config.join("systemd/user/spex-watch.service");
    assert!(!unit.exists());
    let status = service_status(&w);
    assert_eq!(status["running"], false, "{status}");
    assert_eq!(status["installed"], false, "{status}");
    let text = w.ok(&w.repo, &["service", "status"]);
    assert!(text.contains("watcher: not running"), "{text}");
}

/// `spex service` where systemd's user manager runs (a stand-in `systemctl` on `PATH` that logs
/// its arguments): `install` writes the unit (`ExecStart=` this binary's canonical path and
/// `watch`, the store's `SPEX_HOME`) and enables and starts it; a second install changes
/// nothing; `uninstall` disables it and removes the file. A unit spex did not write is never
/// touched: install and uninstall refuse, with a hint.
#[test]
fn spex_service_installs_a_systemd_user_unit_and_never_touches_one_it_did_not_write() {
    let w = World::new();
    let bin = w.dir.path().join("bin");
    let calls = w.dir.path().join("systemctl.log");
    crate::support::world::executable(
        &bin.join("systemctl"),
        &format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\ncase \"$*\" in *is-active*) echo active;; esac\nexit 0\n",
            calls.display()
        ),
    );
    let runtime = w.dir.path().join("run");
    std::fs::create_dir_all(&runtime).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let service = |args: &[&str]| {
        w.cmd(&w.repo, args)
            .env("PATH", &path)
            .env("XDG_RUNTIME_DIR", &runtime)
            .output()
            .unwrap()
    };
    let unit = w.xdg_config.join("systemd/user/spex-watch.service");
    let out = service(&["service", "install"]);
    assert!(out.status.success(), "{out:?}");
    let text = read(&unit);
    let exe = std::fs::canonicalize(crate::support::world::spex_bin()).unwrap();
    assert!(
        text.contains(&format!("\nExecStart={} watch\n", exe.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!("Environment=SPEX_HOME={}", w.spex_home.display())),
        "{text}"
    );
    let log = read(&calls);
    assert!(log.contains("--user daemon-reload"), "{log}");
    assert!(
        log.contains("--user enable --now spex-watch.service"),
        "{log}"
    );
    let status: Value =
        serde_json::from_slice(&service(&["service", "status", "--json"]).stdout).unwrap();
    assert_eq!(status["installed"], true, "{status}");
    assert_eq!(status["active"], "active", "{status}");
    let out = service(&["service", "uninstall"]);
    assert!(out.status.success(), "{out:?}");
    assert!(!unit.exists());
    assert!(read(&calls).contains("--user disable --now spex-watch.service"));
    // A unit of the same name that spex did not write.
    write(&unit, "[Service]\nExecStart=/usr/bin/mine\n");
    for action in ["install", "uninstall"] {
        let out = service(&["service", action]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{action}: {err}");
        assert!(err.contains("spex did not write it"), "{err}");
        assert!(err.contains("hint:"), "{err}");
        assert_eq!(read(&unit), "[Service]\nExecStart=/usr/bin/mine\n");
    }
}
