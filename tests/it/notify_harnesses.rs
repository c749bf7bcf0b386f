//! `spex notify --watch` proven with the REAL harnesses (Claude Code, Codex, Gemini CLI; offline
//! against the fake model servers), each both hosted by `spex launch` and started by the test in
//! a terminal it owns: the command channel and a webhook receiver in the test get exactly one
//! notification per attention within 2 s of the attention opening in the record, naming the
//! session and the question with its real choices; a restarted sender sends nothing again; an
//! attention that closed while no sender ran is never sent; a session with a `spex attach`
//! terminal gets none. A failing webhook (refused, 500, a hang) retries within its bound, never
//! holds up the command channel or the watcher the sender runs, and shows in `--status`.
//! Fails, never skips.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::notify::receiver;
use crate::support::http::LoggingServer;
use crate::support::world::{World, pretty, read_or_empty, write};

/// The bound, from the attention's opening in the record to each channel's receipt.
const WITHIN: Duration = Duration::from_secs(2);
/// Long enough for a harness's turn on a loaded machine.
const TURN: Duration = Duration::from_mins(1);

/// The two channels under test: a command that logs each notification with its receipt time,
/// and a webhook receiver.
pub(crate) struct Channels {
    pub(crate) out: PathBuf,
    pub(crate) hook: LoggingServer,
    pub(crate) log: PathBuf,
}

impl Channels {
    pub(crate) fn new(w: &World, hook: LoggingServer) -> Channels {
        Channels {
            out: w.dir.path().join("notified.log"),
            hook,
            log: w.dir.path().join("notify.log"),
        }
    }

    /// argv of the command channel: each notification one line, `<ms since epoch> <json>`.
    fn command(&self) -> Value {
        json!([
            "/bin/sh",
            "-c",
            format!(
                "t=$(date +%s%3N); m=$(cat); printf '%s %s\\n' \"$t\" \"$m\" >> '{}'",
                self.out.display()
            )
        ])
    }

    /// Adds `notify` (these channels, `dwell`, and `extra`) to the project's config, keeping
    /// what it holds.
    pub(crate) fn configure(&self, w: &World, dwell: &str, extra: &Value) {
        let path = w.repo.join("spex.jsonc");
        let mut cfg: Value = serde_json::from_str(&read_or_empty(&path)).unwrap_or(json!({}));
        let mut notify = json!({
            "on": ["needs_attention"],
            "command": self.command(),
            "webhook": {"url": format!("http://{}/hook", self.hook.addr()), "format": "json"},
            "dwell": dwell,
        });
        for (k, v) in extra.as_object().into_iter().flatten() {
            notify[k] = v.clone();
        }
        cfg["notify"] = notify;
        write(&path, format!("{cfg}\n"));
    }

    /// What the command got: (receipt ms, notification).
    pub(crate) fn by_command(&self) -> Vec<(u128, Value)> {
        read_or_empty(&self.out)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let (t, m) = l.split_once(' ').unwrap_or_else(|| panic!("{l}"));
                (
                    t.parse().unwrap(),
                    serde_json::from_str(m).unwrap_or_else(|e| panic!("{e}: {m}")),
                )
            })
            .collect()
    }

    /// What the webhook got: the request bodies.
    pub(crate) fn by_webhook(&self) -> Vec<Value> {
        self.hook
            .requests()
            .into_iter()
            .map(|r| r["body"].clone())
            .collect()
    }

    /// How many notifications each channel got about attention `att` of session `id`.
    pub(crate) fn count(&self, id: &str, att: &str) -> (usize, usize) {
        let about = |m: &Value| m["session"] == id && m["attention"] == att;
        (
            self.by_command().iter().filter(|(_, m)| about(m)).count(),
            self.by_webhook().iter().filter(|m| about(m)).count(),
        )
    }

    pub(crate) fn diag(&self) -> String {
        format!(
            "--- sender log:\n{}\n--- command got:\n{}\n--- webhook got:\n{}",
            read_or_empty(&self.log),
            read_or_empty(&self.out),
            pretty(&json!(self.by_webhook()))
        )
    }
}

/// A running `spex notify --watch`, killed on drop.
pub(crate) struct Sender(pub(crate) Child);

impl Drop for Sender {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `cmd` (`spex notify --watch` with the harness's environment) and waits until its
/// lock names it.
pub(crate) fn sender(w: &World, mut cmd: Command, ch: &Channels) -> Sender {
    let err = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&ch.log)
        .unwrap();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .unwrap();
    let lock = w.spex_home.join("notify/sender.lock");
    let end = Instant::now() + Duration::from_secs(20);
    while read_or_empty(&lock).trim() != child.id().to_string() {
        assert!(
            Instant::now() < end,
            "the sender did not start\n{}",
            ch.diag()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Sender(child)
}

fn ms(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis()
}

/// When attention `a` (as the record holds it) opened.
fn opened_ms(a: &Value) -> u128 {
    let since = a["since"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", pretty(a)));
    ms(humantime::parse_rfc3339(since).unwrap())
}

/// Waits until session `id`'s record holds an open attention that `ready` accepts: it.
pub(crate) fn open_attention(
    w: &World,
    id: &str,
    ready: impl Fn(&Value) -> bool,
    diag: &dyn Fn() -> String,
) -> Value {
    let end = Instant::now() + TURN;
    loop {
        let r = w.record_if_any(id).unwrap_or(Value::Null);
        if r["status"] == "needs_attention" && ready(&r["attention"]) {
            return r["attention"].clone();
        }
        assert!(
            Instant::now() < end,
            "no attention: {}\n{}",
            pretty(&r),
            diag()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The choice ids and labels a record's attention offers: its choices, else its first
/// question's options (never empty: every attention these tests open asks something).
fn offered(a: &Value) -> Vec<String> {
    let mut out: Vec<String> = a["choices"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["label"].as_str().map(str::to_owned))
        .collect();
    for q in a["questions"].as_array().into_iter().flatten() {
        out.extend(
            q["options"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|o| o.as_str().map(str::to_owned)),
        );
    }
    assert!(
        !out.is_empty(),
        "the attention offers no choice: {}",
        pretty(a)
    );
    out
}

/// Attention `a` of session `id` reached the command and the webhook, each within [`WITHIN`] of
/// the attention's opening in the record, naming the session (id and handle) and carrying the
/// question (`asks` in it) with the choices the record offers. The webhook's body.
pub(crate) fn announced(ch: &Channels, w: &World, id: &str, a: &Value, asks: &str) -> Value {
    announced_within(ch, w, id, a, asks, WITHIN)
}

/// [`announced`], each channel within `bound` of the attention's opening.
fn announced_within(
    ch: &Channels,
    w: &World,
    id: &str,
    a: &Value,
    asks: &str,
    bound: Duration,
) -> Value {
    let att = a["id"].as_str().unwrap();
    let about = |m: &Value| m["session"] == id && m["attention"] == att;
    let got = ch
        .hook
        .request_within(|r| about(&r["body"]), Duration::from_secs(10))
        .unwrap_or_else(|| panic!("no webhook for {id}/{att}\n{}", ch.diag()));
    let opened = opened_ms(a);
    let hook_took = got["received_ms"]
        .as_u64()
        .unwrap()
        .saturating_sub(u64::try_from(opened).unwrap());
    let end = Instant::now() + Duration::from_secs(10);
    let by_command = loop {
        if let Some((t, m)) = ch.by_command().into_iter().find(|(_, m)| about(m)) {
            break (t, m);
        }
        assert!(
            Instant::now() < end,
            "no command for {id}/{att}\n{}",
            ch.diag()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let command_took = by_command.0.saturating_sub(opened);
    eprintln!(
        "{}: attention {att} -> webhook {hook_took} ms, command {command_took} ms",
        w.record(id)["harness"]
    );
    assert!(
        u128::from(hook_took) < bound.as_millis() && command_took < bound.as_millis(),
        "webhook {hook_took} ms, command {command_took} ms after the attention opened\n{}",
        ch.diag()
    );
    let handle = w.record(id)["handle"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let body = got["body"].clone();
    for m in [&body, &by_command.1] {
        assert_eq!(m["event"], "needs_attention", "{}", pretty(m));
        assert!(
            !handle.is_empty() && m["handle"] == handle.as_str(),
            "{}",
            pretty(m)
        );
        assert!(
            m["title"].as_str().unwrap().contains(&handle),
            "the title names the session: {}",
            pretty(m)
        );
        let question = m["question"].as_str().unwrap_or_default();
        assert!(question.contains(asks), "`{asks}` not asked: {}", pretty(m));
        let text = m["message"].as_str().unwrap();
        for label in offered(a) {
            assert!(
                text.contains(&label),
                "choice `{label}` not in the message: {}\nrecord: {}",
                pretty(m),
                pretty(a)
            );
        }
        let ids: Vec<&Value> = m["choices"].as_array().into_iter().flatten().collect();
        let want: Vec<&Value> = a["choices"].as_array().into_iter().flatten().collect();
        assert_eq!(
            ids.iter().map(|c| &c["id"]).collect::<Vec<_>>(),
            want.iter().map(|c| &c["id"]).collect::<Vec<_>>(),
            "{}",
            pretty(m)
        );
    }
    body
}

/// Nothing more comes about attention `att` of `id` over `quiet`: each channel holds `want`.
pub(crate) fn stays(ch: &Channels, id: &str, att: &str, want: usize, quiet: Duration) {
    std::thread::sleep(quiet);
    assert_eq!(
        ch.count(id, att),
        (want, want),
        "{id}/{att}: (command, webhook) notifications\n{}",
        ch.diag()
    );
}

/// Kills the sender and starts another: it sends nothing again for attention `att` of `id`,
/// still open.
pub(crate) fn restarted(
    w: &World,
    s: Sender,
    cmd: Command,
    ch: &Channels,
    id: &str,
    att: &str,
) -> Sender {
    drop(s);
    let s = sender(w, cmd, ch);
    stays(ch, id, att, 1, Duration::from_secs(2));
    s
}

/// Runs each command on drop (stops what a test started, passing or not).
pub(crate) struct Cleanup(pub(crate) Vec<Command>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.stdin(Stdio::null()).output();
        }
    }
}

fn approve(w: &World, mut cmd: Command, id: &str) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "approve {id}: {}{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        crate::runtime::host_log(w, id)
    );
}

/// Claude Code hosted by `spex launch` and in the person's own terminal: each permission
/// announced once within 2 s with its choices, not again by a restarted sender; a dialog
/// cancelled (Esc, no hook fires) while no sender ran is never sent once one runs again.
#[test]
fn claude_hosted_and_in_its_own_terminal_is_announced_once_with_its_choices() {
    use crate::answering::{own_terminal_claude, type_prompt};
    use crate::runtime::{claude_world, launch, run_json, spex_cmd};
    use crate::support::claude_home::SeedOptions;

    let (w, fake) = claude_world(SeedOptions::default());
    let ch = Channels::new(&w, receiver(200, None));
    ch.configure(&w, "0s", &json!({}));
    let watch = || spex_cmd(&w, &fake, &["notify", "--watch"]);
    let mut sending = sender(&w, watch(), &ch);

    let id = launch(&w, &fake);
    let _stop = Cleanup(vec![spex_cmd(&w, &fake, &["stop", &id, "--grace", "2"])]);
    run_json(&w, &fake, &["deliver", &id, "USE_BASH run it", "--json"]).unwrap();
    let first = open_attention(&w, &id, |x| x["kind"] == "permission", &|| ch.diag());
    announced(&ch, &w, &id, &first, "bash_out.txt");
    let att = first["id"].as_str().unwrap();
    sending = restarted(&w, sending, watch(), &ch, &id, att);
    approve(
        &w,
        spex_cmd(&w, &fake, &["approve", &id, "--attention", att]),
        &id,
    );
    crate::support::world::wait_status(&w, &id, "idle", TURN);
    // A question with its options.
    run_json(&w, &fake, &["deliver", &id, "USE_ASK pick one", "--json"]).unwrap();
    let question = open_attention(&w, &id, |x| x["kind"] == "question", &|| ch.diag());
    announced(&ch, &w, &id, &question, "Which color");
    approve(&w, spex_cmd(&w, &fake, &["answer", &id, "Blue"]), &id);
    crate::support::world::wait_status(&w, &id, "idle", TURN);

    let (term, sid) = own_terminal_claude(&w, &fake);
    type_prompt(&term, "USE_BASH in my own terminal");
    let second = open_attention(&w, &sid, |x| x["kind"] == "permission", &|| term.text());
    announced(&ch, &w, &sid, &second, "bash_out.txt");
    let b_id = second["id"].as_str().unwrap();
    sending = restarted(&w, sending, watch(), &ch, &sid, b_id);
    approve(
        &w,
        spex_cmd(&w, &fake, &["approve", &sid, "--attention", b_id]),
        &sid,
    );
    crate::support::world::wait_status(&w, &sid, "idle", TURN);

    // No sender runs while the next dialog opens and is cancelled at the terminal (no hook
    // says so: only a watcher or a reader finds it closed).
    drop(sending);
    type_prompt(&term, "USE_BASH while nobody sends");
    let third = open_attention(&w, &sid, |x| x["id"] != b_id, &|| term.text());
    term.wait_for("Do you want to proceed?", TURN).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    term.send(b"\x1b");
    std::thread::sleep(Duration::from_secs(1));
    let _s = sender(&w, watch(), &ch);
    stays(
        &ch,
        &sid,
        third["id"].as_str().unwrap(),
        0,
        Duration::from_secs(3),
    );
    stays(&ch, &id, att, 1, Duration::ZERO);
    stays(
        &ch,
        &id,
        question["id"].as_str().unwrap(),
        1,
        Duration::ZERO,
    );
    stays(&ch, &sid, b_id, 1, Duration::ZERO);
}

/// Gemini CLI hosted by `spex launch` (a question with options and a permission) and in the
/// person's own terminal: each announced once within 2 s with its choices; nothing for the
/// hosted session while a `spex attach` terminal shows it.
#[test]
fn gemini_hosted_and_in_its_own_terminal_is_announced_once_with_its_choices() {
    use crate::gemini_runtime::{deliver, gemini_world, launch_gemini, wait_turn};
    use crate::runtime::spex_cmd;
    use crate::support::fake_gemini::ASK_QUESTION;
    use crate::support::gemini_home::{gemini_command, submit_prompt, wait_tui_ready};
    use crate::support::term::Term;

    let (w, fake) = gemini_world();
    let ch = Channels::new(&w, receiver(200, None));
    ch.configure(&w, "0s", &json!({}));
    let watch = || spex_cmd(&w, &fake, &["notify", "--watch"]);
    let mut sending = sender(&w, watch(), &ch);

    let (id, _) = launch_gemini(&w, &fake, &[]);
    let _stop = Cleanup(vec![spex_cmd(&w, &fake, &["stop", &id, "--grace", "2"])]);
    deliver(&w, &fake, &id, "SCENARIO:ask one");
    let first = open_attention(&w, &id, |x| !x["questions"].is_null(), &|| ch.diag());
    announced(&ch, &w, &id, &first, ASK_QUESTION);
    let att = first["id"].as_str().unwrap().to_owned();
    sending = restarted(&w, sending, watch(), &ch, &id, &att);
    approve(&w, spex_cmd(&w, &fake, &["answer", &id, "2"]), &id);
    wait_turn(&w, &id, "completed");

    deliver(&w, &fake, &id, "SCENARIO:shellcmd <<touch approved.txt>>");
    let second = open_attention(&w, &id, |x| x["id"] != att.as_str(), &|| ch.diag());
    announced(&ch, &w, &id, &second, "touch approved.txt");
    approve(&w, spex_cmd(&w, &fake, &["approve", &id]), &id);
    wait_turn(&w, &id, "completed");

    // A `spex attach` terminal on it: nothing is sent for it.
    let attached = Term::spawn(&spex_cmd(&w, &fake, &["attach", &id]), 40, 120);
    let marker = w.session_dir(&id).join("attached");
    let end = Instant::now() + Duration::from_secs(20);
    while !marker.exists() {
        assert!(
            Instant::now() < end,
            "no attached marker\n{}",
            attached.diag()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    deliver(&w, &fake, &id, "SCENARIO:shellcmd <<touch watched.txt>>");
    let third = open_attention(
        &w,
        &id,
        |x| x["text"].to_string().contains("watched"),
        &|| attached.diag(),
    );
    stays(&ch, &id, third["id"].as_str().unwrap(), 0, WITHIN);
    approve(&w, spex_cmd(&w, &fake, &["approve", &id]), &id);
    wait_turn(&w, &id, "completed");
    attached.send(b"\x1c");
    drop(attached);

    // Answered within the dwell: never sent.
    drop(sending);
    ch.configure(&w, "3s", &json!({}));
    sending = sender(&w, watch(), &ch);
    deliver(&w, &fake, &id, "SCENARIO:shellcmd <<touch quick.txt>>");
    let quick = open_attention(
        &w,
        &id,
        |x| x["text"].to_string().contains("quick"),
        &|| ch.diag(),
    );
    approve(&w, spex_cmd(&w, &fake, &["approve", &id]), &id);
    stays(
        &ch,
        &id,
        quick["id"].as_str().unwrap(),
        0,
        Duration::from_secs(4),
    );
    wait_turn(&w, &id, "completed");
    drop(sending);
    ch.configure(&w, "0s", &json!({}));
    sending = sender(&w, watch(), &ch);

    // The person's own terminal.
    let mut cmd = gemini_command(&w.home, &fake.base_url());
    cmd.current_dir(&w.repo).env("SPEX_HOME", &w.spex_home);
    let term = Term::spawn(&cmd, 40, 120);
    wait_tui_ready(&term, TURN).unwrap();
    submit_prompt(&term, "SCENARIO:shellcmd <<touch mine.txt>>", TURN, || {
        fake.prompt_within("touch mine.txt", Duration::ZERO)
            .is_some()
    })
    .unwrap();
    let end = Instant::now() + TURN;
    let sid = loop {
        let own = w.session_ids().into_iter().find(|other| {
            other != &id
                && w.record_if_any(other)
                    .is_some_and(|r| r["status"] == "needs_attention")
        });
        if let Some(sid) = own {
            break sid;
        }
        assert!(
            Instant::now() < end,
            "no attention\n{}\n{}",
            term.diag(),
            ch.diag()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let fourth = open_attention(&w, &sid, |_| true, &|| term.diag());
    announced(&ch, &w, &sid, &fourth, "touch mine.txt");
    let _s = restarted(
        &w,
        sending,
        watch(),
        &ch,
        &sid,
        fourth["id"].as_str().unwrap(),
    );
    stays(&ch, &id, &att, 1, Duration::ZERO);
    stays(&ch, &id, second["id"].as_str().unwrap(), 1, Duration::ZERO);
}

/// Codex hosted by `spex launch`: its escalation announced once within 2 s with its four
/// choices, not again by a restarted sender; nothing while a `spex attach` terminal shows it.
#[test]
fn hosted_codex_is_announced_once_with_its_choices_and_not_while_attached() {
    use crate::answering::{codex, codex_diag, codex_rig, codex_waits};
    use crate::support::term::Term;

    let (w, fake) = codex_rig();
    let ch = Channels::new(&w, receiver(200, None));
    ch.configure(&w, "0s", &json!({}));
    let watch = || codex(&w, &["notify", "--watch"]);
    let mut sending = sender(&w, watch(), &ch);
    let out = codex(
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
    .output()
    .unwrap();
    let launched = crate::support::world::json_result(&["launch"], &out)
        .unwrap_or_else(|e| panic!("{e}\n{}", codex_diag(&w, &fake)));
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let _stop = Cleanup(vec![
        codex(&w, &["stop", &id]),
        codex(&w, &["server", "stop"]),
    ]);
    let first = codex_waits(&w, &fake, &id);
    announced(&ch, &w, &id, &first, "escalated");
    let att = first["id"].as_str().unwrap().to_owned();
    sending = restarted(&w, sending, watch(), &ch, &id, &att);
    approve(&w, codex(&w, &["approve", &id]), &id);
    crate::support::world::wait_status(&w, &id, "idle", TURN);

    let mut cmd = codex(&w, &["attach", &id]);
    cmd.env("TERM", "xterm-256color").env("LANG", "C.UTF-8");
    let attached = Term::spawn(&cmd, 40, 120);
    let marker = w.session_dir(&id).join("attached");
    let end = Instant::now() + Duration::from_secs(20);
    while !marker.exists() {
        assert!(
            Instant::now() < end,
            "no attached marker\n{}",
            attached.diag()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = codex(&w, &["deliver", &id, "SCENARIO:escalate", "--json"])
        .output()
        .unwrap();
    crate::support::world::json_result(&["deliver"], &out).unwrap();
    let second = open_attention(&w, &id, |x| x["id"] != att.as_str(), &|| {
        codex_diag(&w, &fake)
    });
    stays(&ch, &id, second["id"].as_str().unwrap(), 0, WITHIN);
    approve(&w, codex(&w, &["approve", &id]), &id);
    attached.send(b"\x1c");
    drop(attached);
    crate::support::world::wait_status(&w, &id, "idle", TURN);

    // Answered within the dwell: never sent.
    drop(sending);
    ch.configure(&w, "3s", &json!({}));
    let sending = sender(&w, watch(), &ch);
    let out = codex(&w, &["deliver", &id, "SCENARIO:escalate", "--json"])
        .output()
        .unwrap();
    crate::support::world::json_result(&["deliver"], &out).unwrap();
    let third = open_attention(&w, &id, |x| x["id"] != second["id"], &|| {
        codex_diag(&w, &fake)
    });
    approve(&w, codex(&w, &["approve", &id]), &id);
    stays(
        &ch,
        &id,
        third["id"].as_str().unwrap(),
        0,
        Duration::from_secs(4),
    );
    crate::support::world::wait_status(&w, &id, "idle", TURN);

    // The sender killed while an attention waits out its dwell: the next one sends it, once.
    let out = codex(&w, &["deliver", &id, "SCENARIO:escalate", "--json"])
        .output()
        .unwrap();
    crate::support::world::json_result(&["deliver"], &out).unwrap();
    let fourth = open_attention(&w, &id, |x| x["id"] != third["id"], &|| {
        codex_diag(&w, &fake)
    });
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        ch.count(&id, fourth["id"].as_str().unwrap()),
        (0, 0),
        "{}",
        ch.diag()
    );
    drop(sending);
    let _s = sender(&w, watch(), &ch);
    announced_within(
        &ch,
        &w,
        &id,
        &fourth,
        "escalated",
        Duration::from_secs(3) + WITHIN,
    );
    stays(
        &ch,
        &id,
        fourth["id"].as_str().unwrap(),
        1,
        Duration::from_secs(4),
    );
    approve(&w, codex(&w, &["approve", &id]), &id);
    stays(&ch, &id, &att, 1, Duration::ZERO);
}

/// The Codex TUI the person started in their own terminal (its default mode: the thread in
/// Codex's app-server daemon, the TUI its client): its escalation announced once within 2 s
/// with its choices, not again by a restarted sender; one cancelled while no sender ran is
/// never sent.
#[test]
fn codex_in_its_own_terminal_is_announced_once_with_its_choices() {
    use crate::real_tui::CodexTui;

    let w = World::new();
    let fake = crate::support::fake_responses::FakeResponses::start();
    let tui = CodexTui::start(&w, &fake.base_url(), &[]);
    let ch = Channels::new(&w, receiver(200, None));
    ch.configure(&w, "0s", &json!({}));
    let watch = || w.cmd(&w.repo, &["notify", "--watch"]);
    let sending = sender(&w, watch(), &ch);
    let id = tui.turn(&w, "SCENARIO:shell");
    tui.prompt("SCENARIO:escalate");
    let first = open_attention(&w, &id, |_| true, &|| tui.text());
    announced(&ch, &w, &id, &first, "escalated");
    let att = first["id"].as_str().unwrap().to_owned();
    let sending = restarted(&w, sending, watch(), &ch, &id, &att);
    tui.send(b"\x1b");
    let end = Instant::now() + TURN;
    while w.record(&id)["status"] != "idle" {
        assert!(Instant::now() < end, "{}", tui.text());
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(sending);
    tui.prompt("SCENARIO:escalate");
    let second = open_attention(&w, &id, |x| x["id"] != att.as_str(), &|| tui.text());
    let end = Instant::now() + TURN;
    while !tui.text().contains("Yes") {
        assert!(Instant::now() < end, "no dialog\n{}", tui.text());
        std::thread::sleep(Duration::from_millis(100));
    }
    tui.send(b"\x1b");
    std::thread::sleep(Duration::from_secs(1));
    let _s = sender(&w, watch(), &ch);
    stays(
        &ch,
        &id,
        second["id"].as_str().unwrap(),
        0,
        Duration::from_secs(3),
    );
    stays(&ch, &id, &att, 1, Duration::ZERO);
}

/// What `spex notify --status --json` says of the webhook once `done` accepts it.
fn webhook_status(w: &World, done: impl Fn(&Value) -> bool, within: Duration) -> Value {
    let end = Instant::now() + within;
    loop {
        let out = w.spex(&w.repo, &["notify", "--status", "--json"]);
        let st = crate::support::world::json_result(&["notify", "--status"], &out).unwrap();
        let fourth = st["deliveries"]["webhook"].clone();
        if done(&fourth) || Instant::now() > end {
            return fourth;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The command's notification about attention `a` of `id`, within [`WITHIN`] of its opening.
fn command_within(ch: &Channels, id: &str, first: &Value) {
    let opened = opened_ms(first);
    let end = Instant::now() + Duration::from_secs(10);
    let term = loop {
        let got = ch
            .by_command()
            .into_iter()
            .find(|(_, m)| m["session"] == id && m["attention"] == first["id"]);
        if let Some((term, _)) = got {
            break term;
        }
        assert!(
            Instant::now() < end,
            "the command got nothing\n{}",
            ch.diag()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = term.saturating_sub(opened);
    eprintln!(
        "command got {} {took} ms after it opened (the webhook failing)",
        first["id"]
    );
    assert!(took < WITHIN.as_millis(), "{took} ms\n{}", ch.diag());
}

/// A failing webhook while the sender runs, with real Claude sessions: a hang (30 s), a 500 and
/// a refused connection are each tried 3 times within the bound (5 s a request, 0.25 s then
/// 0.5 s between attempts) and recorded in `spex notify --status`; meanwhile the command channel
/// gets each notification within 2 s, and the watcher in the sender's process still takes a
/// `kill -9` of a Claude TUI (no hook fires) into the stream and its exit to the command.
#[test]
fn a_failing_webhook_never_holds_up_the_command_or_the_watcher_and_shows_in_status() {
    use crate::answering::{own_terminal_claude, type_prompt};
    use crate::runtime::{claude_world, launch, run_json, spex_cmd};
    use crate::support::claude_home::SeedOptions;

    let (w, fake) = claude_world(SeedOptions::default());
    let ch = Channels::new(&w, receiver(200, Some(Duration::from_secs(30))));
    ch.configure(&w, "0s", &json!({"on": ["needs_attention", "exited"]}));
    let watch = || spex_cmd(&w, &fake, &["notify", "--watch"]);
    let sending = sender(&w, watch(), &ch);
    let id = launch(&w, &fake);
    let _stop = Cleanup(vec![spex_cmd(&w, &fake, &["stop", &id, "--grace", "2"])]);

    // A hang: the command gets the attention, then the TUI's kill, while the webhook waits.
    let (term, sid) = own_terminal_claude(&w, &fake);
    type_prompt(&term, "USE_BASH run it");
    let first = open_attention(&w, &sid, |x| x["kind"] == "permission", &|| term.text());
    let started = Instant::now();
    command_within(&ch, &sid, &first);
    let pid = term.pid();
    let killed = Instant::now();
    assert!(
        Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let end = killed + Duration::from_secs(10);
    while !w
        .events(&sid)
        .iter()
        .any(|quick| quick["kind"] == "session.exited")
    {
        assert!(
            Instant::now() < end,
            "the kill never reached the stream\n{}",
            ch.diag()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let in_stream = killed.elapsed();
    let end = Instant::now() + Duration::from_secs(10);
    while !ch
        .by_command()
        .iter()
        .any(|(_, m)| m["session"] == sid.as_str() && m["event"] == "exited")
    {
        assert!(
            Instant::now() < end,
            "the exit never reached the command\n{}",
            ch.diag()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let to_command = killed.elapsed();
    eprintln!("kill -9 -> stream {in_stream:?}, -> command {to_command:?} (the webhook hanging)");
    assert!(
        in_stream < WITHIN && to_command < WITHIN,
        "{in_stream:?} {to_command:?}"
    );
    assert!(ch.hook.requests().len() <= 1, "{}", ch.diag());
    drop(term);
    // While the next attempt waits, `--status` says so.
    let delivery = webhook_status(&w, |d| d["outcome"] == "retrying", Duration::from_secs(10));
    let seen = started.elapsed();
    eprintln!("hanging webhook: retrying shown after {seen:?}: {delivery}");
    assert_eq!(delivery["outcome"], "retrying", "{}", ch.diag());
    assert!(
        delivery["detail"].as_str().unwrap().contains("of 3 failed"),
        "{delivery}"
    );
    assert!(seen < Duration::from_secs(8), "{seen:?}");
    let human = w.ok(&w.repo, &["notify", "--status"]);
    assert!(human.contains("retrying"), "{human}");
    let delivery = webhook_status(&w, |d| d["outcome"] == "failed", Duration::from_secs(30));
    let took = started.elapsed();
    eprintln!("hanging webhook: failed after {took:?}: {delivery}");
    assert_eq!(delivery["outcome"], "failed", "{}", ch.diag());
    assert_eq!(delivery["attempts"], 3, "{delivery}");
    // 3 requests of at most 5 s, 0.75 s of backoff: the first notification's delivery is over
    // within 16 s (plus this test's polling); its 3 requests were all the receiver got then.
    assert!(took < Duration::from_secs(20), "{took:?}");
    let hung = ch.hook.requests();
    assert!(
        hung.len() >= 3
            && hung[..3]
                .iter()
                .all(|r| r["body"]["attention"] == first["id"]),
        "{}",
        ch.diag()
    );
    let human = w.ok(&w.repo, &["notify", "--status"]);
    assert!(
        human.contains("webhook") && human.contains("failed"),
        "{human}"
    );
    drop(sending);

    // A 500: 3 attempts within a second or so, the command on time.
    let failing = Channels::new(&w, receiver(500, None));
    failing.configure(&w, "0s", &json!({}));
    let sending = sender(&w, watch(), &failing);
    run_json(&w, &fake, &["deliver", &id, "USE_BASH run it", "--json"]).unwrap();
    let second = open_attention(&w, &id, |x| x["kind"] == "permission", &|| failing.diag());
    command_within(&failing, &id, &second);
    let delivery = webhook_status(
        &w,
        |delivery| {
            delivery["outcome"] == "failed" && delivery["detail"].to_string().contains("500")
        },
        Duration::from_secs(10),
    );
    assert_eq!(delivery["outcome"], "failed", "{delivery}");
    assert_eq!(delivery["attempts"], 3, "{delivery}");
    let tries: Vec<u64> = failing
        .hook
        .requests()
        .iter()
        .map(|r| r["received_ms"].as_u64().unwrap())
        .collect();
    assert_eq!(tries.len(), 3, "{}", failing.diag());
    let spread = tries[2] - tries[0];
    eprintln!("500: 3 attempts over {spread} ms");
    assert!((700..2000).contains(&spread), "{spread} ms: {tries:?}");
    let b_id = second["id"].as_str().unwrap();
    approve(
        &w,
        spex_cmd(&w, &fake, &["approve", &id, "--attention", b_id]),
        &id,
    );
    crate::support::world::wait_status(&w, &id, "idle", TURN);
    drop(sending);

    // Nothing listens: refused, 3 attempts, recorded; the command on time.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    failing.configure(
        &w,
        "0s",
        &json!({"webhook": {"url": format!("http://127.0.0.1:{port}/hook")}}),
    );
    let _s = sender(&w, watch(), &failing);
    run_json(&w, &fake, &["deliver", &id, "USE_BASH once more", "--json"]).unwrap();
    let third = open_attention(&w, &id, |x| x["id"] != b_id, &|| failing.diag());
    command_within(&failing, &id, &third);
    let delivery = webhook_status(
        &w,
        |delivery| {
            delivery["outcome"] == "failed"
                && delivery["detail"]
                    .to_string()
                    .contains(&format!(":{port}/"))
        },
        Duration::from_secs(10),
    );
    assert_eq!(delivery["outcome"], "failed", "{delivery}");
    assert_eq!(delivery["attempts"], 3, "{delivery}");
    assert!(
        delivery["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("127.0.0.1:{port}")),
        "{delivery}"
    );
    let human = w.ok(&w.repo, &["notify", "--status"]);
    assert!(
        human.contains("failed") && human.contains("after 3 attempts"),
        "{human}"
    );
    approve(&w, spex_cmd(&w, &fake, &["approve", &id]), &id);
}
