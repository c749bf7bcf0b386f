//! The Claude runtime against the REAL pinned Claude Code TUI (offline, fake Messages API):
//! `spex launch --detach` under spex's PTY host, `snapshot`, `deliver` confirmed by the
//! session's own `UserPromptSubmit` hook, refusal while a dialog is open, and `stop` recording
//! the exit. Needs `scripts/install-peers.sh`; fails, never skips.

use std::ffi::OsString;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::claude_home::{DUMMY_API_KEY, SeedOptions, seed_claude_home};
use crate::support::fake_anthropic::{FAKE_TITLE, FakeAnthropic, PLAIN_ANSWER};
use crate::support::fake_gemini::FakeGemini;
use crate::support::gemini_home::gemini_env;
use crate::support::peers::peers_path;
use crate::support::world::{World, json_result, pretty, read_or_empty, wait_status, write};

/// A fake model API that a real harness runs against offline: the harness, and what spex's
/// environment needs for spex to run that harness against it.
pub trait FakeApi {
    /// The harness's id (`launch --harness`).
    fn harness(&self) -> &'static str;
    /// Variables spex runs with, which the harness it starts inherits.
    fn env(&self) -> Vec<(&'static str, OsString)>;
}

impl FakeApi for FakeAnthropic {
    fn harness(&self) -> &'static str {
        "claude"
    }

    fn env(&self) -> Vec<(&'static str, OsString)> {
        vec![
            ("ANTHROPIC_BASE_URL", self.base_url().into()),
            ("ANTHROPIC_API_KEY", DUMMY_API_KEY.into()),
            ("DISABLE_AUTOUPDATER", "1".into()),
            ("TERM", "xterm-256color".into()),
        ]
    }
}

impl FakeApi for FakeGemini {
    fn harness(&self) -> &'static str {
        "gemini"
    }

    fn env(&self) -> Vec<(&'static str, OsString)> {
        gemini_env(&self.base_url()).into()
    }
}

/// `spex` with the world's env plus what the real harness needs: the pinned peers on PATH, the
/// fake API, and a short runtime dir for the session sockets.
pub fn spex_cmd(w: &World, fake: &impl FakeApi, args: &[&str]) -> Command {
    let mut c = w.cmd(&w.repo, args);
    c.env("PATH", peers_path())
        .envs(fake.env())
        .env("XDG_RUNTIME_DIR", w.dir.path().join("run"));
    c
}

pub fn run_json(w: &World, fake: &impl FakeApi, args: &[&str]) -> Result<Value, String> {
    let out = spex_cmd(w, fake, args).output().expect("spex runs");
    json_result(args, &out)
}

/// The private runtime dir the tests point `XDG_RUNTIME_DIR` at.
pub fn std_dirs(w: &World) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(w.dir.path().join("run")).unwrap();
    std::fs::set_permissions(
        w.dir.path().join("run"),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
}

/// A project selecting Claude, materialized, in a home that starts straight into the prompt.
pub fn claude_world(opts: SeedOptions) -> (World, FakeAnthropic) {
    let w = World::new();
    std_dirs(&w);
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\"] }\n",
    );
    seed_claude_home(&w.home, DUMMY_API_KEY, &[&w.repo], opts);
    w.ok(&w.repo, &["materialize"]);
    (w, FakeAnthropic::start())
}

pub fn host_log(w: &World, id: &str) -> String {
    let dir = w.project_dir().join("sessions").join(id);
    format!(
        "host.log:\n{}\nevents:\n{}",
        read_or_empty(&dir.join("host.log")),
        read_or_empty(&dir.join("events.jsonl"))
    )
}

pub fn screen(w: &World, fake: &impl FakeApi, id: &str) -> String {
    run_json(w, fake, &["snapshot", id, "--json"])
        .map_or_else(|e| e, |s| crate::support::world::screen_text(&s["lines"]))
}

/// Polls the screen of `id` until it contains `needle`.
pub fn wait_screen(
    w: &World,
    fake: &impl FakeApi,
    id: &str,
    needle: &str,
    timeout: Duration,
) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if screen(w, fake, id).contains(needle) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

/// A session's recording (its `cassette` folder), checked.
pub struct Recording(pub std::path::PathBuf);

impl Recording {
    /// The JSON lines of one of its files (`input.jsonl`, `service-events.jsonl`,
    /// `frames.jsonl`).
    pub fn lines(&self, name: &str) -> Vec<Value> {
        read_or_empty(&self.0.join(name))
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Asserts it holds one paste, `prompt` in a bracketed paste.
    pub fn assert_one_paste(&self, prompt: &str) {
        let pastes: Vec<Value> = self
            .lines("input.jsonl")
            .into_iter()
            .filter(|r| r["kind"] == "paste")
            .collect();
        assert_eq!(pastes.len(), 1, "{pastes:?}");
        assert_eq!(pastes[0]["text"], format!("\x1b[200~{prompt}\x1b[201~"));
    }
}

/// `spex cassette check` of session `id`'s recording, asserted to pass.
pub fn checked_recording(w: &World, fake: &impl FakeApi, id: &str) -> Recording {
    let check = spex_cmd(w, fake, &["cassette", "check", id])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    Recording(w.project_dir().join("sessions").join(id).join("cassette"))
}

/// Stops the session, then checks its whole event log against the grammar.
/// `spex launch --harness <the fake's> --detach --json` plus `extra`: the printed result.
pub fn launch_json(w: &World, fake: &impl FakeApi, extra: &[&str]) -> Value {
    let mut args = vec!["launch", "--harness", fake.harness(), "--detach", "--json"];
    args.extend_from_slice(extra);
    run_json(w, fake, &args).unwrap_or_else(|e| panic!("{e}"))
}

/// A launched session's id.
pub fn launch(w: &World, fake: &impl FakeApi) -> String {
    launch_json(w, fake, &[])["session"]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

pub fn stop(w: &World, fake: &impl FakeApi, id: &str) -> Value {
    let stopped = run_json(w, fake, &["stop", id, "--json", "--grace", "5"])
        .unwrap_or_else(|e| panic!("{e}\n{}", host_log(w, id)));
    crate::support::world::assert_grammar(&w.record(id), &w.events(id), &|| host_log(w, id));
    stopped
}

#[test]
fn launch_deliver_stop_a_real_claude_session() {
    let (w, fake) = claude_world(SeedOptions::default());
    let launched = launch_json(&w, &fake, &[]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let record = w.record(&id);
    assert_eq!(record["launched_by"], "spex", "{}", pretty(&record));
    assert_eq!(record["status"], "idle", "{}", pretty(&record));
    assert!(screen(&w, &fake, &id).contains("? for shortcuts"));

    let prompt = "USE_NONE please answer\nwith two lines ✓";
    let d = run_json(&w, &fake, &["deliver", &id, prompt, "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    assert_eq!(d["confirmed"], true, "{}", pretty(&d));
    assert_eq!(d["mode"], "inject");
    // A reader right after the confirmation sees the delivered turn in the record.
    let now = w.record(&id);
    assert_eq!(now["turn"]["prompt"], prompt, "{}", pretty(&now));
    assert_eq!(now["turn"]["id"], d["turn_id"], "{}", pretty(&now));
    let events = w.events(&id);
    let started: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "turn.started")
        .collect();
    assert_eq!(started.len(), 1, "{}", host_log(&w, &id));
    assert_eq!(started[0]["prompt"], prompt);
    assert!(
        wait_screen(&w, &fake, &id, "PLAIN_ANSWER_OK", Duration::from_mins(1)),
        "the model's answer `{PLAIN_ANSWER}` never showed:\n{}",
        screen(&w, &fake, &id)
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while w.record(&id)["turn"]["state"] != "completed" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let record = w.record(&id);
    assert_eq!(record["status"], "idle", "{}", pretty(&record));
    assert_eq!(record["turn"]["state"], "completed", "{}", pretty(&record));

    let stopped = stop(&w, &fake, &id);
    assert_eq!(stopped["status"], "exited", "{}", pretty(&stopped));
    // Idle at its prompt, Claude exits on its own exit keys: no signal was needed.
    assert_eq!(
        stopped["exit_status"],
        serde_json::json!({"code": 0, "signal": null}),
        "{}\n{}",
        pretty(&stopped),
        host_log(&w, &id)
    );
    let log = host_log(&w, &id);
    assert!(
        log.contains("stop: typing the exit keys") && !log.contains("stop: SIGTERM"),
        "{log}"
    );
    let socket = w.dir.path().join("run/spex").join(format!("{id}.sock"));
    assert!(!socket.exists(), "the host left its socket behind");
    let gone = run_json(&w, &fake, &["deliver", &id, "hello?", "--json"]).unwrap_err();
    assert!(gone.contains("has exited"), "{gone}");
    // Stopping it again is no error: it says how the session ended and changes nothing.
    let seq = w.record(&id)["seq"].clone();
    let again = spex_cmd(&w, &fake, &["stop", &id]).output().unwrap();
    let said = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success(), "{again:?}");
    assert!(said.contains("had already exited (exit code 0)"), "{said}");
    assert_eq!(w.record(&id)["seq"], seq);
}

/// A checkout where spex's hooks are not installed for the harness: the harness would never
/// report its start or a turn, so launch refuses before it starts anything, saying what to do.
#[test]
fn launch_where_the_harness_hooks_are_not_installed_is_refused() {
    let (w, fake) = claude_world(SeedOptions::default());
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"codex\"] }\n",
    );
    w.ok(&w.repo, &["materialize"]);
    let err = run_json(
        &w,
        &fake,
        &["launch", "--harness", "claude", "--detach", "--json"],
    )
    .unwrap_err();
    assert!(err.contains("exit status: 2"), "{err}");
    assert!(
        err.contains("`claude` is not materialized") && err.contains("run `spex materialize`"),
        "{err}"
    );
    assert!(w.session_ids().is_empty(), "a session was started: {err}");
}

/// A harness that draws its prompt but whose start hook never reports (here a script that
/// shows Claude's prompt footer and waits): launch fails soon, saying so and naming
/// `spex doctor`, instead of waiting out `--ready-timeout`.
#[test]
fn launch_at_a_prompt_whose_start_hook_never_reports_fails_soon() {
    let (w, fake) = scripted_claude_world("printf '> \\n  ? for shortcuts\\n'");
    // 10 s at the prompt, with room for a loaded machine (the ready timeout is 60 s).
    let err = launch_fails_within(&w, &fake, Duration::from_secs(30));
    assert!(
        err.contains("its start hook has not reported in 10 s") && err.contains("spex doctor"),
        "{err}"
    );
    let ids = w.session_ids();
    assert_eq!(ids.len(), 1, "{err}");
    stop(&w, &fake, &ids[0]);
}

/// `launch PROMPT` (here from stdin, `-`): the prompt is the first turn, confirmed; Claude runs
/// in the checkout with this session's `SPEX_SESSION_ID` and without the identity variables of
/// the session the launcher itself ran in.
#[test]
fn launch_with_a_prompt_runs_it_as_the_first_turn_in_a_clean_identity() {
    let (w, fake) = claude_world(SeedOptions::default());
    let mut cmd = spex_cmd(
        &w,
        &fake,
        &["launch", "--harness", "claude", "--detach", "--json", "-"],
    );
    cmd.env("SPEX_SESSION_ID", "the-launchers-own-session")
        .env("CLAUDE_CODE_SESSION_ID", "the-launchers-claude-session");
    let out = crate::support::world::feed(&mut cmd, "USE_NONE the first prompt ✓".as_bytes());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let launched: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        launched["delivery"]["confirmed"],
        true,
        "{}",
        pretty(&launched)
    );
    assert_eq!(launched["delivery"]["mode"], "inject");
    let started: Vec<Value> = w
        .events(&id)
        .into_iter()
        .filter(|e| e["kind"] == "turn.started")
        .collect();
    assert_eq!(started.len(), 1, "{}", host_log(&w, &id));
    assert_eq!(started[0]["prompt"], "USE_NONE the first prompt ✓");
    let pid = launched["session"]["child_pid"].as_u64().unwrap();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let vars: Vec<String> = environ
        .split(|b| *b == 0)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    assert!(vars.contains(&format!("SPEX_SESSION_ID={id}")), "{vars:?}");
    assert!(
        !vars
            .iter()
            .any(|v| v.starts_with("CLAUDE_CODE_SESSION_ID=")),
        "{vars:?}"
    );
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap();
    assert_eq!(cwd, w.repo);
    stop(&w, &fake, &id);
}

#[test]
fn killed_claude_is_exited_within_a_second() {
    let (w, fake) = claude_world(SeedOptions::default());
    let launched = launch_json(&w, &fake, &[]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let child = launched["session"]["child_pid"].as_i64().unwrap();
    let killed = Instant::now();
    Command::new("kill")
        .args(["-9", &child.to_string()])
        .status()
        .unwrap();
    while w.record(&id)["status"] != "exited" && killed.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = killed.elapsed();
    let record = w.record(&id);
    assert_eq!(
        record["status"],
        "exited",
        "{}\n{}",
        pretty(&record),
        host_log(&w, &id)
    );
    assert_eq!(record["exit_status"]["signal"], 9, "{}", pretty(&record));
    assert!(took < Duration::from_secs(1), "exited after {took:?}");
    let exited: Vec<Value> = w
        .events(&id)
        .into_iter()
        .filter(|e| e["kind"] == "session.exited")
        .collect();
    assert_eq!(exited.len(), 1, "{}", host_log(&w, &id));
}

/// A Claude world whose configured `claude` command is a script that runs `draw` (shell) and
/// then waits, firing no hook: a stand-in for a harness stopped at some screen.
fn scripted_claude_world(draw: &str) -> (World, FakeAnthropic) {
    let (w, fake) = claude_world(SeedOptions::default());
    let script = w.dir.path().join("scripted.sh");
    // It answers `--version` as Claude does (launch asks it, for `spex check`'s standing).
    crate::support::world::executable(
        &script,
        &format!(
            "#!/bin/sh\n[ \"$1\" = --version ] && {{ echo '2.1.197 (Claude Code)'; exit 0; }}\n{draw}\nexec sleep 120\n"
        ),
    );
    write(
        &w.repo.join("spex.jsonc"),
        format!(
            "{{ \"harnesses\": [\"claude\"], \"harness\": {{ \"claude\": {{ \"command\": \"{}\" }} }} }}\n",
            script.display()
        ),
    );
    w.ok(&w.repo, &["materialize"]);
    (w, fake)
}

/// `launch` in `w`, which must fail with exit 2 within 15 s (not when `--ready-timeout`, 60 s,
/// runs out): what it said.
pub fn launch_fails_soon(w: &World, fake: &impl FakeApi) -> String {
    launch_fails_within(w, fake, Duration::from_secs(15))
}

/// `launch` in `w`, which must fail with exit 2 within `bound`: what it said.
fn launch_fails_within(w: &World, fake: &impl FakeApi, bound: Duration) -> String {
    let started = Instant::now();
    let err = run_json(
        w,
        fake,
        &["launch", "--harness", fake.harness(), "--detach", "--json"],
    )
    .unwrap_err();
    let took = started.elapsed();
    assert!(err.contains("exit status: 2"), "{err}");
    assert!(took < bound, "failed after {took:?}:\n{err}");
    err
}

/// A home that lacks the API-key approval: Claude 2.1.197 stops at "Do you want to use this API
/// key?" (default No). Launch fails at once (not when `--ready-timeout`, 60 s, runs out) with
/// the dialog's text and what to do.
#[test]
fn launch_stops_at_a_screen_it_cannot_answer() {
    let (w, fake) = claude_world(SeedOptions {
        approve_key: false,
        ..SeedOptions::default()
    });
    let err = launch_fails_soon(&w, &fake);
    assert!(err.contains("cannot start"), "{err}");
    assert!(
        err.contains("Do you want to use this API key?")
            && err.contains("Detected a custom API key in your environment"),
        "the dialog's text is shown:\n{err}"
    );
    assert!(
        err.contains("hint: approve the key once")
            && err.contains("customApiKeyResponses.approved")
            && err.contains("ANTHROPIC_AUTH_TOKEN"),
        "the hint says what to do:\n{err}"
    );
    // The session stays for a person to answer the dialog; this test ends it.
    let ids = w.session_ids();
    assert_eq!(ids.len(), 1);
    // People read handles: the hint names the session by its handle.
    let handle = w.record(&ids[0])["handle"].as_str().unwrap().to_owned();
    assert!(err.contains(&format!("spex attach {handle}")), "{err}");
    stop(&w, &fake, &ids[0]);
}

/// A screen no adapter knows (here a "harness" that asks a question and waits): once it has sat
/// unchanged with no prompt and no session start for a few seconds, launch fails with its text.
#[test]
fn launch_fails_soon_at_an_unknown_screen_that_does_not_change() {
    let (w, fake) =
        scripted_claude_world("printf 'Pick a colour for the widget\\n  1. Red\\n  2. Blue\\n'");
    let err = launch_fails_soon(&w, &fake);
    assert!(
        err.contains("a screen spex does not know") && err.contains("unchanged for 8 s"),
        "{err}"
    );
    assert!(
        err.contains("Pick a colour for the widget\n  1. Red\n  2. Blue"),
        "the screen's text is shown:\n{err}"
    );
    let ids = w.session_ids();
    assert_eq!(ids.len(), 1);
    let handle = w.record(&ids[0])["handle"].as_str().unwrap().to_owned();
    assert!(
        err.contains(&format!("hint: answer it with `spex attach {handle}`")),
        "{err}"
    );
    let stopped = run_json(&w, &fake, &["stop", &ids[0], "--json", "--grace", "2"])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stopped["status"], "exited", "{}", pretty(&stopped));
}

/// Refuses `deliver` at the dialog that `prompt` opens, with and without `--force`; the
/// dialog stays exactly as it was (the part of the screen from `dialog_from` on).
fn deliver_refused_at_dialog(
    w: &World,
    fake: &impl FakeApi,
    id: &str,
    prompt: &str,
    reason: &str,
    dialog_from: &str,
) {
    run_json(w, fake, &["deliver", id, prompt, "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", host_log(w, id)));
    let record = wait_status(w, id, "needs_attention", Duration::from_mins(1));
    assert_eq!(
        record["status"],
        "needs_attention",
        "{}\n{}",
        pretty(&record),
        screen(w, fake, id)
    );
    assert_eq!(record["attention"]["reason"], reason, "{}", pretty(&record));
    // The hook can come before the dialog is drawn.
    assert!(
        wait_screen(w, fake, id, dialog_from, Duration::from_secs(20)),
        "{}",
        screen(w, fake, id)
    );
    let before = screen(w, fake, id);
    let dialog = |screen: &str| screen.split(dialog_from).nth(1).map(str::to_owned);
    // "3" would mean the dialog's third option, "2" its second: typed, Enter would pick the
    // default instead. A delivery never types into a dialog, whatever its flags.
    for args in [
        vec!["deliver", id, "3", "--json"],
        vec!["deliver", id, "2", "--force", "--json"],
        vec![
            "deliver",
            id,
            "USE_NONE TYPED_INTO_DIALOG",
            "--json",
            "--wait",
        ],
    ] {
        let out = spex_cmd(w, fake, &args).output().unwrap();
        let said = format!(
            "{}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
        if args.contains(&"--force") {
            assert!(said.contains("`--force` is retired"), "{said}");
        } else {
            assert!(
                said.contains(&format!("has a {reason} dialog open")),
                "{args:?}: {said}"
            );
            assert!(said.contains("spex types nothing into a dialog"), "{said}");
        }
        assert!(!said.contains("would pick an option"), "{said}");
    }
    std::thread::sleep(Duration::from_millis(500));
    let after = screen(w, fake, id);
    assert!(!after.contains("TYPED_INTO_DIALOG"), "{after}");
    assert!(dialog(&before).is_some(), "{before}");
    assert_eq!(
        dialog(&before),
        dialog(&after),
        "the refused delivery changed the dialog"
    );
    assert_eq!(w.record(id)["attention"]["reason"], reason);
}

#[test]
fn deliver_is_refused_at_a_dialog_whatever_its_flags() {
    let (w, fake) = claude_world(SeedOptions::default());
    let id = launch(&w, &fake);
    // A question asked through Claude's ask tool is a dialog: keys typed there answer it.
    deliver_refused_at_dialog(
        &w,
        &fake,
        &id,
        "USE_ASK pick one",
        "question",
        "Which color",
    );
    assert!(
        !w.events(&id)
            .iter()
            .any(|e| e["kind"] == "tool.completed" && e["tool"] == "AskUserQuestion"),
        "the question was answered:\n{}",
        host_log(&w, &id)
    );
    stop(&w, &fake, &id);
    // A permission dialog, in a new session (the fake model scripts one tool per prompt).
    let id = launch(&w, &fake);
    deliver_refused_at_dialog(
        &w,
        &fake,
        &id,
        "USE_BASH run it",
        "permission",
        "Bash command",
    );
    assert!(
        screen(&w, &fake, &id).contains("echo hi-from-bash"),
        "{}",
        screen(&w, &fake, &id)
    );
    assert!(
        !w.repo.join("bash_out.txt").exists(),
        "the dialog was answered"
    );
    stop(&w, &fake, &id);
}

/// `spex attach <id>` running in a test PTY of its own, as a person's terminal.
pub struct Attached {
    pub pair: portable_pty::PtyPair,
    pub child: Box<dyn portable_pty::Child + Send + Sync>,
    pub writer: Box<dyn std::io::Write + Send>,
    pub rx: std::sync::mpsc::Receiver<Vec<u8>>,
}

pub fn attach_in_pty(w: &World, fake: &impl FakeApi, id: &str) -> Attached {
    use portable_pty::{CommandBuilder, PtySize, native_pty_system};
    use std::io::Read;
    let pair = native_pty_system()
        .openpty(PtySize {
            rows: 40,
            cols: 120,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    let cmd = spex_cmd(w, fake, &["attach", id]);
    let mut builder = CommandBuilder::new(cmd.get_program());
    builder.args(cmd.get_args());
    builder.env_clear();
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            builder.env(k, v);
        }
    }
    builder.cwd(&w.repo);
    let child = pair.slave.spawn_command(builder).unwrap();
    let mut reader = pair.master.try_clone_reader().unwrap();
    let writer = pair.master.take_writer().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    Attached {
        pair,
        child,
        writer,
        rx,
    }
}

#[test]
fn approving_a_dialog_in_an_attached_terminal_clears_the_attention() {
    use std::io::Write;
    let (w, fake) = claude_world(SeedOptions::default());
    let id = launch(&w, &fake);
    // The command takes 5 s: no hook reports the approval before it ends.
    run_json(
        &w,
        &fake,
        &["deliver", &id, "USE_SLOWBASH run it", "--json"],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        wait_status(&w, &id, "needs_attention", Duration::from_mins(1))["status"],
        "needs_attention"
    );
    assert!(wait_screen(
        &w,
        &fake,
        &id,
        "Do you want to proceed?",
        Duration::from_secs(20)
    ));
    let mut a = attach_in_pty(&w, &fake, &id);
    // Let the attach redraw arrive, then press Enter on "1. Yes".
    let _ = a.rx.recv_timeout(Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(300));
    let pressed = Instant::now();
    a.writer.write_all(b"\r").unwrap();
    let deadline = pressed + Duration::from_secs(10);
    let record = loop {
        let r = w.record(&id);
        if r["attention"].is_null() || Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(record["attention"].is_null(), "{}", pretty(&record));
    assert_eq!(record["status"], "working", "{}", pretty(&record));
    assert!(
        pressed.elapsed() < Duration::from_secs(2),
        "took {:?}",
        pressed.elapsed()
    );
    let cleared: Vec<Value> = w
        .events(&id)
        .into_iter()
        .filter(|e| e["kind"] == "attention.closed")
        .collect();
    assert_eq!(cleared.len(), 1, "{}", host_log(&w, &id));
    assert_eq!(cleared[0]["source"], "host");
    let done = wait_status(&w, &id, "idle", Duration::from_mins(1));
    assert_eq!(done["turn"]["state"], "completed", "{}", pretty(&done));
    a.writer.write_all(&[0x1c]).unwrap();
    let _ = a.child.wait();
    drop(a.pair);
    stop(&w, &fake, &id);
}

#[test]
fn attach_from_a_second_terminal_and_detach_leaves_it_running() {
    use portable_pty::PtySize;
    use std::io::Write;

    let (w, fake) = claude_world(SeedOptions::default());
    // This project detaches on Ctrl-] instead of Ctrl-\.
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\"], \"detachKey\": \"ctrl-]\" }\n",
    );
    let id = launch(&w, &fake);
    let Attached {
        pair,
        mut child,
        mut writer,
        rx,
    } = attach_in_pty(&w, &fake, &id);
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    // The redraw moves the cursor between words: look for one word.
    while !String::from_utf8_lossy(&seen).contains("shortcuts") && Instant::now() < deadline {
        if let Ok(chunk) = rx.recv_timeout(Duration::from_millis(100)) {
            seen.extend(chunk);
        }
    }
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert!(text.contains("Ctrl-] detaches"), "{text}");
    assert!(
        text.contains("shortcuts"),
        "the screen was not redrawn:\n{text}"
    );
    // A window change of the attached terminal reaches the session.
    pair.master
        .resize(PtySize {
            rows: 30,
            cols: 100,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let resized = loop {
        let s = run_json(&w, &fake, &["snapshot", &id, "--json"]).unwrap();
        if (s["rows"] == 30 && s["cols"] == 100) || Instant::now() > deadline {
            break s;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        (resized["rows"].clone(), resized["cols"].clone()),
        (30.into(), 100.into())
    );
    writer.write_all(&[0x1d]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "attach did not detach");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    // Still running, still answering.
    assert!(screen(&w, &fake, &id).contains("? for shortcuts"));
    assert_ne!(w.record(&id)["status"], "exited");
    stop(&w, &fake, &id);
}

#[test]
fn interrupt_ends_the_turn_and_the_title_becomes_the_headline() {
    let (w, fake) = claude_world(SeedOptions::default());
    let id = launch(&w, &fake);
    // The model answers after 30 s: the turn is still running when it is interrupted.
    run_json(
        &w,
        &fake,
        &["deliver", &id, "USE_NONE DELAY=30 take your time", "--json"],
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    let record = wait_status(&w, &id, "working", Duration::from_secs(10));
    assert_eq!(record["status"], "working", "{}", pretty(&record));
    std::thread::sleep(Duration::from_secs(2));
    let sent = Instant::now();
    let after = run_json(&w, &fake, &["interrupt", &id, "--json"]).unwrap_or_else(|e| {
        panic!(
            "{e}\n{}\nscreen:\n{}",
            host_log(&w, &id),
            screen(&w, &fake, &id)
        )
    });
    assert!(
        sent.elapsed() < Duration::from_secs(2),
        "took {:?}",
        sent.elapsed()
    );
    assert_eq!(after["status"], "idle", "{}", pretty(&after));
    assert_eq!(after["turn"]["state"], "interrupted", "{}", pretty(&after));
    let endings: Vec<Value> = w
        .events(&id)
        .into_iter()
        .filter(|e| e["kind"] == "turn.interrupted")
        .collect();
    assert_eq!(endings.len(), 1, "{}", host_log(&w, &id));
    assert_eq!(endings[0]["source"], "host");
    // Claude's self-summary title (the fake model names it) is the headline.
    let deadline = Instant::now() + Duration::from_secs(20);
    while w.record(&id)["headline"] != FAKE_TITLE && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(w.record(&id)["headline"], FAKE_TITLE);
    stop(&w, &fake, &id);
}

/// A hosted Claude session given `prompt`, whose Claude is killed (`kill -9`) once `turn_over`
/// holds and its transcript holds `saved`: Claude writes the transcript behind the screen, and
/// a session ended before that cannot be resumed ("No conversation found"), so the test waits
/// for it as a person would see it saved. Its id and its record once exited.
fn killed_after(
    w: &World,
    fake: &impl FakeApi,
    prompt: &str,
    turn_over: impl Fn(&str) -> bool,
    saved: &str,
) -> (String, Value) {
    let launched = launch_json(w, fake, &[]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let child = launched["session"]["child_pid"].as_i64().unwrap();
    run_json(w, fake, &["deliver", &id, prompt, "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", host_log(w, &id)));
    let deadline = Instant::now() + Duration::from_mins(1);
    while !turn_over(&id) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        turn_over(&id),
        "the turn never ended:\n{}",
        host_log(w, &id)
    );
    let transcript = w.record(&id)["transcript"]
        .as_str()
        .map(std::path::PathBuf::from)
        .expect("the hooks named the transcript");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !read_or_empty(&transcript).contains(saved) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    Command::new("kill")
        .args(["-9", &child.to_string()])
        .status()
        .unwrap();
    let killed = wait_status(w, &id, "exited", Duration::from_secs(10));
    assert_eq!(killed["exit_status"]["signal"], 9, "{}", pretty(&killed));
    (id, killed)
}

#[test]
fn killed_session_resumes_and_takes_a_prompt() {
    let (w, fake) = claude_world(SeedOptions::default());
    let (id, _) = killed_after(
        &w,
        &fake,
        "USE_NONE remember me",
        |id| screen(&w, &fake, id).contains("PLAIN_ANSWER_OK"),
        "PLAIN_ANSWER_OK",
    );

    let resumed = run_json(&w, &fake, &["resume", &id, "--detach", "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    assert_eq!(resumed["session"]["id"], id.as_str());
    assert_eq!(w.record(&id)["status"], "idle", "{}", host_log(&w, &id));
    assert!(
        screen(&w, &fake, &id).contains("remember me"),
        "the conversation came back:\n{}",
        screen(&w, &fake, &id)
    );
    let d = run_json(&w, &fake, &["deliver", &id, "USE_NONE and again", "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    assert_eq!(d["confirmed"], true);
    stop(&w, &fake, &id);
}

/// A failed turn's attention stays open after the session exits; `resume` cleared it without
/// an event, so the log held an `attention.opened` that never closed. It closes now, with
/// `attention.closed` (`how: unanswered`, from `resume`) before `session.resumed`.
#[test]
fn resume_closes_a_failed_turns_attention_with_its_event() {
    let (w, fake) = claude_world(SeedOptions::default());
    let (id, killed) = killed_after(
        &w,
        &fake,
        "USE_NONE remember me FAIL=400",
        |id| w.record(id)["attention"]["reason"] == "turn_failed",
        "remember me",
    );
    // The exit leaves a failed turn's attention open.
    assert_eq!(
        killed["attention"]["reason"],
        "turn_failed",
        "{}",
        pretty(&killed)
    );
    let attention = killed["attention"]["id"].clone();

    run_json(&w, &fake, &["resume", &id, "--detach", "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    assert!(w.record(&id)["attention"].is_null());
    let events = w.events(&id);
    let at = |kind: &str| events.iter().rposition(|e| e["kind"] == kind);
    let closed = at("attention.closed").expect("attention.closed");
    let e = &events[closed];
    assert_eq!(
        (&e["attention"], &e["how"], &e["source"]),
        (
            &attention,
            &Value::from("unanswered"),
            &Value::from("resume")
        ),
        "{}",
        pretty(e)
    );
    assert!(closed < at("session.resumed").expect("session.resumed"));
    stop(&w, &fake, &id);
}

#[test]
fn a_64k_multiline_unicode_prompt_arrives_exactly() {
    let (w, fake) = claude_world(SeedOptions::default());
    let id = launch(&w, &fake);
    let mut prompt = String::from("USE_NONE long prompt\n");
    let mut i = 0;
    while prompt.len() < 64 * 1024 {
        prompt.push_str(&format!(
            "line {i}: ünïcödé ✓ 日本語 — the quick brown fox\n"
        ));
        i += 1;
    }
    prompt.push_str("the end");
    let mut cmd = spex_cmd(
        &w,
        &fake,
        &["deliver", &id, "-", "--json", "--timeout", "60"],
    );
    let out = crate::support::world::feed(&mut cmd, prompt.as_bytes());
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        host_log(&w, &id)
    );
    let started: Vec<Value> = w
        .events(&id)
        .into_iter()
        .filter(|e| e["kind"] == "turn.started")
        .collect();
    assert_eq!(started.len(), 1);
    assert!(
        started[0]["prompt"] == prompt.as_str(),
        "the prompt differs"
    );
    stop(&w, &fake, &id);
}

#[test]
fn a_killed_host_reads_exited_and_not_live() {
    let (w, fake) = claude_world(SeedOptions::default());
    let launched = launch_json(&w, &fake, &[]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let host = launched["session"]["host_pid"].as_i64().unwrap();
    let child = launched["session"]["child_pid"].as_i64().unwrap();
    let live = run_json(&w, &fake, &["sessions", "--json"]).unwrap();
    assert_eq!(live.as_array().unwrap().len(), 1, "{}", pretty(&live));
    Command::new("kill")
        .args(["-9", &host.to_string()])
        .status()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let live = run_json(&w, &fake, &["sessions", "--json"]).unwrap();
    assert!(live.as_array().unwrap().is_empty(), "{}", pretty(&live));
    let shown = run_json(&w, &fake, &["show", &id, "--json"]).unwrap();
    assert_eq!(shown["session"]["status"], "exited", "{}", pretty(&shown));
    let kinds: Vec<Value> = w
        .events(&id)
        .into_iter()
        .filter(|e| e["kind"] == "session.exited")
        .collect();
    assert_eq!(kinds.len(), 1, "{}", pretty(&Value::Array(kinds.clone())));
    // Claude lost its terminal with the host; make sure nothing is left running.
    let _ = Command::new("kill")
        .args(["-9", &child.to_string()])
        .status();
}

#[test]
fn launch_in_a_new_worktree_materializes_it_and_runs_there() {
    let (w, fake) = claude_world(SeedOptions::default());
    crate::support::world::git(&w.repo, &["add", "-A"]);
    crate::support::world::git(&w.repo, &["commit", "-q", "-m", "base"]);
    let wt = w.repo.parent().unwrap().join("repo-feature");
    // Claude trusts the new folder through the main checkout's trust, which materialize grants.
    let launched = launch_json(&w, &fake, &["--worktree", "feature"]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let record = w.record(&id);
    assert_eq!(record["tree"], wt.to_str().unwrap(), "{}", pretty(&record));
    assert_eq!(record["branch"], "feature", "{}", pretty(&record));
    assert!(
        wt.join(".claude/settings.json").is_file(),
        "not materialized"
    );
    let d = run_json(
        &w,
        &fake,
        &["deliver", &id, "USE_NONE in the worktree", "--json"],
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    assert_eq!(d["confirmed"], true);
    stop(&w, &fake, &id);
    // A second launch reuses the worktree.
    let again = launch_json(&w, &fake, &["--worktree", "feature"]);
    let id2 = again["session"]["id"].as_str().unwrap().to_owned();
    assert_eq!(w.record(&id2)["tree"], wt.to_str().unwrap());
    stop(&w, &fake, &id2);
}

#[test]
fn a_prompt_delivered_while_busy_is_queued_and_confirmed_when_taken_up() {
    let (w, fake) = claude_world(SeedOptions::default());
    let id = launch(&w, &fake);
    run_json(
        &w,
        &fake,
        &["deliver", &id, "USE_NONE DELAY=4 first", "--json"],
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    assert_eq!(
        wait_status(&w, &id, "working", Duration::from_secs(10))["status"],
        "working"
    );
    let queued = run_json(&w, &fake, &["deliver", &id, "USE_NONE second", "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    assert_eq!(queued["mode"], "queued", "{}", pretty(&queued));
    assert_eq!(queued["confirmed"], false);
    let waited = run_json(
        &w,
        &fake,
        &[
            "deliver",
            &id,
            "USE_NONE third",
            "--wait",
            "--json",
            "--timeout",
            "60",
        ],
    )
    .unwrap_or_else(|e| {
        panic!(
            "{e}\n{}\nscreen:\n{}",
            host_log(&w, &id),
            screen(&w, &fake, &id)
        )
    });
    assert_eq!(waited["mode"], "queued", "{}", pretty(&waited));
    assert_eq!(waited["confirmed"], true, "{}", pretty(&waited));
    let events = w.events(&id);
    let prompts: Vec<Value> = events
        .iter()
        .filter(|e| e["kind"] == "turn.started" || e["kind"] == "turn.steered")
        .map(|e| e["prompt"].clone())
        .collect();
    assert!(
        prompts
            .iter()
            .any(|p| p.as_str().is_some_and(|p| p.contains("third"))),
        "{prompts:?}"
    );
    // Claude may take both queued prompts up as one turn (a prompt hook for each, ms apart):
    // that turn is not interrupted by its second prompt.
    assert!(
        !events.iter().any(|e| e["kind"] == "turn.interrupted"),
        "{}",
        host_log(&w, &id)
    );
    stop(&w, &fake, &id);
}

#[test]
fn a_recorded_session_checks_replays_and_exports() {
    let (w, fake) = claude_world(SeedOptions::default());
    // The project adds a rule: the fake model's answer is scrubbed from the recording.
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\"], \"scrub\": [\"PLAIN_ANSWER\"] }\n",
    );
    let launched = launch_json(&w, &fake, &["--record"]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let prompt = "USE_NONE a recorded prompt";
    run_json(&w, &fake, &["deliver", &id, prompt, "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    assert!(wait_screen(
        &w,
        &fake,
        &id,
        "PLAIN_ANSWER_OK",
        Duration::from_mins(1)
    ));
    // A moment with nothing on the screen changing: the recording notes the screen.
    std::thread::sleep(Duration::from_secs(1));
    stop(&w, &fake, &id);
    let rec = checked_recording(&w, &fake, &id);
    let dir = rec.0.clone();
    let lines = |name: &str| rec.lines(name);
    rec.assert_one_paste(prompt);
    let service = lines("service-events.jsonl");
    assert!(
        service
            .iter()
            .any(|e| e["kind"] == "turn.started" && e["prompt"] == prompt),
        "{service:?}"
    );
    // The record's own state goes in with the events: a replay reads it instead of deriving
    // it from the event kinds.
    let completed = service
        .iter()
        .position(|e| e["kind"] == "turn.completed")
        .unwrap_or_else(|| panic!("no turn.completed: {service:?}"));
    let with_state = service[completed..]
        .iter()
        .find(|e| e["record"]["status"].is_string())
        .unwrap_or_else(|| panic!("no record state after turn.completed: {service:?}"));
    assert_eq!(with_state["record"]["status"], "idle", "{service:?}");
    let t = with_state["t_ms"].as_u64().unwrap().to_string();
    let replayed = run_json(&w, &fake, &["replay", &id, "--at", &t]).unwrap();
    assert_eq!(replayed["status"], "idle", "{}", pretty(&replayed));
    let frames = lines("frames.jsonl");
    let reasons: Vec<&str> = frames.iter().filter_map(|f| f["reason"].as_str()).collect();
    for reason in ["session.started", "turn.started", "turn.completed", "end"] {
        assert!(
            reasons.contains(&reason),
            "no `{reason}` frame: {reasons:?}"
        );
    }
    // The quiet second after the answer is noted only when the screen changed since the last
    // frame: when Claude's last redraw came before the turn's `idle` frame, that frame already
    // holds the final screen. Either way the recording holds the answer before the exit.
    let exited = frames
        .iter()
        .position(|f| f["reason"] == "session.exited")
        .unwrap_or(frames.len());
    let last_before_exit = frames[..exited]
        .last()
        .unwrap_or_else(|| panic!("no frame before the exit: {reasons:?}"));
    assert!(
        reasons.contains(&"quiet")
            || last_before_exit["screen"]["lines"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|l| l.as_str().is_some_and(|l| l.contains("<scrubbed>  _OK"))),
        "no `quiet` frame and the last frame before the exit lacks the answer: {reasons:?}"
    );
    let manifest: Value = serde_json::from_str(&read_or_empty(&dir.join("manifest.json"))).unwrap();
    assert_eq!(
        manifest["harness"]["version"],
        "2.1.197",
        "{}",
        pretty(&manifest)
    );
    let last: Value = serde_json::from_str(&read_or_empty(&dir.join("final.json"))).unwrap();
    assert!(
        last["screen"]
            .as_str()
            // The placeholder keeps the width of the scrubbed text on the screen.
            .is_some_and(|s| s.contains("<scrubbed>  _OK")),
        "{}",
        pretty(&last)
    );
    let report = read_or_empty(&dir.join("scrub-report.json"));
    assert!(report.contains("config scrub[0]"), "{report}");
    // Nothing private anywhere in the cassette.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        for secret in [
            DUMMY_API_KEY,
            w.home.to_str().unwrap(),
            w.repo.to_str().unwrap(),
            "PLAIN_ANSWER",
        ] {
            assert!(
                !text.contains(secret),
                "{} holds `{secret}`",
                path.display()
            );
        }
    }

    let raw = std::fs::read(dir.join("output.raw")).unwrap();
    let replay = spex_cmd(&w, &fake, &["replay", &id, "--collapsed"])
        .output()
        .unwrap();
    assert!(replay.status.success());
    assert!(
        replay.stdout == raw,
        "collapsed replay differs from output.raw"
    );
    let last_ms = lines("output.jsonl")
        .last()
        .and_then(|r| r["t_ms"].as_u64())
        .unwrap();
    let started = Instant::now();
    let scaled = spex_cmd(&w, &fake, &["replay", &id, "--speed", "4"])
        .output()
        .unwrap();
    let took = started.elapsed().as_millis();
    assert!(scaled.stdout == raw);
    let want = u128::from(last_ms / 4);
    assert!(
        took >= want && took <= want + 1500,
        "replay took {took} ms, want {want} ms"
    );

    let cast = w.dir.path().join("session.cast");
    let cast_arg = cast.to_str().unwrap().to_owned();
    let export = spex_cmd(&w, &fake, &["cassette", "export", &id, "--cast", &cast_arg])
        .output()
        .unwrap();
    assert!(
        export.status.success(),
        "{}",
        String::from_utf8_lossy(&export.stderr)
    );
    let text = std::fs::read_to_string(&cast).unwrap();
    let mut rows = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap());
    let header = rows.next().unwrap();
    assert_eq!(header["version"], 2);
    assert!(header["width"].as_u64().unwrap() > 0 && header["height"].as_u64().unwrap() > 0);
    let events: Vec<Value> = rows.collect();
    assert!(!events.is_empty());
    assert!(
        events
            .iter()
            .all(|e| e[0].is_f64() && e[1] == "o" && e[2].is_string())
    );
}

#[test]
fn recording_a_running_session_starts_with_its_screen_and_stops_on_demand() {
    let (w, fake) = claude_world(SeedOptions::default());
    let id = launch(&w, &fake);
    run_json(
        &w,
        &fake,
        &["deliver", &id, "USE_NONE before recording", "--json"],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(wait_screen(
        &w,
        &fake,
        &id,
        "PLAIN_ANSWER_OK",
        Duration::from_mins(1)
    ));
    let start = spex_cmd(&w, &fake, &["record", &id]).output().unwrap();
    assert!(
        start.status.success(),
        "{}",
        String::from_utf8_lossy(&start.stderr)
    );
    let again = spex_cmd(&w, &fake, &["record", &id]).output().unwrap();
    assert!(!again.status.success(), "a second recording was started");
    run_json(
        &w,
        &fake,
        &["deliver", &id, "USE_NONE while recording", "--json"],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::thread::sleep(Duration::from_secs(1));
    let stop_rec = spex_cmd(&w, &fake, &["record", &id, "--stop"])
        .output()
        .unwrap();
    assert!(
        stop_rec.status.success(),
        "{}",
        String::from_utf8_lossy(&stop_rec.stderr)
    );
    let check = spex_cmd(&w, &fake, &["cassette", "check", &id])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let dir = w.project_dir().join("sessions").join(&id).join("cassette");
    let manifest: Value = serde_json::from_str(&read_or_empty(&dir.join("manifest.json"))).unwrap();
    assert_eq!(manifest["capture"], "partial");
    let raw = String::from_utf8_lossy(&std::fs::read(dir.join("output.raw")).unwrap()).into_owned();
    assert!(
        raw.contains("before"),
        "the recording opens with the screen as it was"
    );
    let inputs = read_or_empty(&dir.join("input.jsonl"));
    assert!(inputs.contains("while recording") && !inputs.contains("before recording"));
    // The session goes on after the recording stopped: its next turn, once this one ended.
    wait_status(&w, &id, "idle", Duration::from_mins(1));
    let d = run_json(&w, &fake, &["deliver", &id, "USE_NONE after", "--json"]).unwrap();
    assert_eq!(d["confirmed"], true, "{d}\n{}", host_log(&w, &id));
    stop(&w, &fake, &id);
}

/// The host's silence alone ends a hosted session: here no harness evidence exists at all (no
/// process, no registry file, no hook), only a record whose host log says spex hosted it.
#[test]
fn a_hosted_record_whose_host_never_answers_reads_host_gone() {
    let w = World::new();
    std_dirs(&w);
    let start = serde_json::json!({ "session_id": "hosted-1", "cwd": w.repo, "hook_event_name": "SessionStart" });
    assert!(
        w.dispatch(&w.repo, "claude", "SessionStart", &start)
            .status
            .success()
    );
    let prompt = serde_json::json!({ "session_id": "hosted-1", "cwd": w.repo, "hook_event_name": "UserPromptSubmit", "prompt": "hi" });
    assert!(
        w.dispatch(&w.repo, "claude", "UserPromptSubmit", &prompt)
            .status
            .success()
    );
    write(&w.session_dir("hosted-1").join("host.log"), "");
    let out = w
        .cmd(&w.repo, &["show", "hosted-1", "--json"])
        .env("XDG_RUNTIME_DIR", w.dir.path().join("run"))
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["session"]["status"], "exited", "{}", pretty(&shown));
    assert_eq!(
        shown["session"]["exit_reason"],
        "host gone",
        "{}",
        pretty(&shown)
    );
    assert_eq!(
        shown["session"]["turn"]["state"],
        "interrupted",
        "{}",
        pretty(&shown)
    );
}

/// `deliver` to a session whose host was killed (`kill -9`): it fails at once with exit code 3
/// (the session is gone), saying the host no longer answers, and `--json` prints the same
/// verdict on stdout; the record reads `exited`.
#[test]
fn deliver_to_a_session_whose_host_was_killed_says_why() {
    let (w, fake) = claude_world(SeedOptions::default());
    let launched = launch_json(&w, &fake, &[]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let host = launched["session"]["host_pid"].as_i64().unwrap();
    let child = launched["session"]["child_pid"].as_i64().unwrap();
    Command::new("kill")
        .args(["-9", &host.to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::path::Path::new(&format!("/proc/{host}")).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let started = Instant::now();
    let out = spex_cmd(
        &w,
        &fake,
        &["deliver", &id, "USE_NONE anyone there?", "--json"],
    )
    .output()
    .unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let diag = format!("{}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    assert_eq!(out.status.code(), Some(3), "{diag}");
    assert!(took < Duration::from_secs(5), "took {took:?}\n{diag}");
    // stderr names the session by its handle; the JSON keeps the full id.
    let handle = w.record(&id)["handle"].as_str().unwrap().to_owned();
    assert!(
        stderr.contains(&format!("error: session `{handle}` has no running host")),
        "{diag}"
    );
    assert!(
        stderr.contains(&format!("hint: `spex resume {handle}`")),
        "{diag}"
    );
    let verdict: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}\n{diag}"));
    assert_eq!(verdict["delivered"], false, "{diag}");
    assert_eq!(verdict["confirmed"], false, "{diag}");
    assert_eq!(verdict["reason"], "host_gone", "{diag}");
    assert!(
        verdict["error"]
            .as_str()
            .is_some_and(|e| e.contains("has no running host")),
        "{diag}"
    );
    let record = w.record(&id);
    assert_eq!(record["status"], "exited", "{}", pretty(&record));
    // Claude, which lost its terminal, may have reported its end meanwhile; the answer still
    // names the dead host (no exit status was recorded).
    let again = spex_cmd(&w, &fake, &["deliver", &id, "USE_NONE still?", "--json"])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(3));
    let verdict: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(verdict["reason"], "host_gone", "{}", pretty(&verdict));
    assert!(
        !w.events(&id).iter().any(|e| e["kind"] == "turn.started"),
        "nothing was delivered"
    );
    let _ = Command::new("kill")
        .args(["-9", &child.to_string()])
        .stderr(std::process::Stdio::null())
        .status();
}

/// Ctrl-C typed by a person in an attached terminal during a turn: Claude interrupts the turn
/// and fires no hook for it; the host sees the key and the prompt come back, and ends the turn
/// `interrupted` with the session `idle`.
#[test]
fn ctrl_c_in_an_attached_terminal_interrupts_the_turn() {
    use std::io::Write;
    let (w, fake) = claude_world(SeedOptions::default());
    let id = launch(&w, &fake);
    // The model answers after 30 s: the turn is still running when Ctrl-C comes. Three lines:
    // all of them come back into the input box after the interrupt.
    let first = "USE_NONE DELAY=30 take your time\nsecond line\nthird line";
    run_json(&w, &fake, &["deliver", &id, first, "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    let record = wait_status(&w, &id, "working", Duration::from_secs(10));
    assert_eq!(record["status"], "working", "{}", pretty(&record));
    let mut a = attach_in_pty(&w, &fake, &id);
    // Let the attach redraw arrive and the spinner run.
    let _ = a.rx.recv_timeout(Duration::from_secs(5));
    std::thread::sleep(Duration::from_secs(2));
    let pressed = Instant::now();
    a.writer.write_all(&[0x03]).unwrap();
    let deadline = pressed + Duration::from_secs(10);
    let record = loop {
        let r = w.record(&id);
        if r["turn"]["state"] != "running" || Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = pressed.elapsed();
    let diag = || {
        format!(
            "{}\n{}\nscreen:\n{}",
            pretty(&w.record(&id)),
            host_log(&w, &id),
            screen(&w, &fake, &id)
        )
    };
    assert_eq!(record["turn"]["state"], "interrupted", "{}", diag());
    assert_eq!(record["status"], "idle", "{}", diag());
    assert!(took < Duration::from_secs(3), "took {took:?}");
    let endings: Vec<Value> = w
        .events(&id)
        .into_iter()
        .filter(|e| e["kind"] == "turn.interrupted")
        .collect();
    assert_eq!(endings.len(), 1, "{}", diag());
    assert_eq!(endings[0]["source"], "host", "{}", diag());
    // One Ctrl-C interrupts; the session goes on.
    a.writer.write_all(&[0x1c]).unwrap();
    let _ = a.child.wait();
    drop(a.pair);
    // Claude puts the interrupted prompt back into the input box.
    assert!(
        screen(&w, &fake, &id).contains("USE_NONE DELAY=30 take your time"),
        "{}",
        diag()
    );
    let d = run_json(
        &w,
        &fake,
        &["deliver", &id, "USE_NONE after the interrupt", "--json"],
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", diag()));
    assert_eq!(d["confirmed"], true);
    // The prompt left in the box was cleared first: the model got exactly the delivered text.
    let prompts: Vec<Value> = w
        .events(&id)
        .into_iter()
        .filter(|e| e["kind"] == "turn.started")
        .map(|e| e["prompt"].clone())
        .collect();
    assert_eq!(
        prompts,
        [first, "USE_NONE after the interrupt"],
        "{}",
        diag()
    );
    assert!(
        host_log(&w, &id).contains("cleared the input box"),
        "{}",
        diag()
    );
    stop(&w, &fake, &id);
}
