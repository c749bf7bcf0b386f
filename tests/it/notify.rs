//! `spex notify` against REAL harness sessions (Claude Code, offline against the fake model
//! server): a permission dialog is announced exactly once through the command channel and a
//! webhook (a receiver in the test), not again after the sender restarts, not at all when it
//! was answered within the dwell; a failing webhook retries within its bound, never holds up
//! the command channel, and shows in `spex notify --status`. Fails, never skips.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::runtime::{claude_world, host_log, launch, run_json, spex_cmd};
use crate::support::claude_home::SeedOptions;
use crate::support::fake_anthropic::FakeAnthropic;
use crate::support::http::LoggingServer;
use crate::support::term::Term;
use crate::support::world::{World, pretty, read_or_empty, wait_status, write};

/// A webhook receiver: answers 200 (or `status`, or hangs for `hang`) and logs each body.
pub(crate) fn receiver(status: u16, hang: Option<Duration>) -> LoggingServer {
    LoggingServer::start(move |req, conn, log| {
        let mut entry = req.log_entry();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        entry.insert("received_ms".into(), json!(now.as_millis()));
        log.push(Value::Object(entry));
        if let Some(d) = hang {
            conn.sleep(d);
            return Ok(());
        }
        conn.json(status, &json!({"ok": status == 200}))
    })
}

/// The project's config: Claude only, dialogs answered with keys, and `notify`.
pub(crate) fn configure(w: &World, notify: &Value) {
    let cfg = json!({
        "harnesses": ["claude"],
        "answering": {"hookWaitSecs": 0},
        "notify": notify,
    });
    write(&w.repo.join("spex.jsonc"), format!("{cfg}\n"));
}

/// A command channel that appends each notification (one JSON line) to `out`.
fn command(out: &Path) -> Value {
    json!([
        "/bin/sh",
        "-c",
        format!("cat >> '{0}' && echo >> '{0}'", out.display())
    ])
}

/// A running `spex notify --watch`, killed on drop.
pub(crate) struct Sender(Child);

impl Drop for Sender {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn sender(w: &World, fake: &FakeAnthropic, log: &Path) -> Sender {
    let err = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let child = spex_cmd(w, fake, &["notify", "--watch"])
        .env("SPEX_TEST_NOTIFY_TOKEN", "tok-123")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .unwrap();
    // Started once its lock names it.
    let lock = w.spex_home.join("notify/sender.lock");
    let end = Instant::now() + Duration::from_secs(20);
    while read_or_empty(&lock).trim() != child.id().to_string() {
        assert!(
            Instant::now() < end,
            "the sender did not start\n{}",
            read_or_empty(log)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Sender(child)
}

/// The sessions a test launched, stopped when it ends (passing or not): a host left running
/// outlives the test's temp folder and holds its inotify instances.
pub(crate) struct Hosts<'a> {
    w: &'a World,
    fake: &'a FakeAnthropic,
    ids: std::cell::RefCell<Vec<String>>,
}

impl<'a> Hosts<'a> {
    pub(crate) fn new(w: &'a World, fake: &'a FakeAnthropic) -> Self {
        Hosts {
            w,
            fake,
            ids: std::cell::RefCell::new(Vec::new()),
        }
    }

    pub(crate) fn launch(&self) -> String {
        let id = launch(self.w, self.fake);
        self.ids.borrow_mut().push(id.clone());
        id
    }
}

impl Drop for Hosts<'_> {
    fn drop(&mut self) {
        for id in self.ids.borrow().iter() {
            let _ = spex_cmd(self.w, self.fake, &["stop", id, "--grace", "2"]).output();
        }
    }
}

fn lines(out: &Path) -> Vec<Value> {
    read_or_empty(out)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Delivers `prompt` and waits until the permission dialog is open: the attention.
pub(crate) fn permission(w: &World, fake: &FakeAnthropic, id: &str, prompt: &str) -> Value {
    run_json(w, fake, &["deliver", id, prompt, "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", host_log(w, id)));
    let r = wait_status(w, id, "needs_attention", Duration::from_mins(1));
    assert_eq!(r["attention"]["kind"], "permission", "{}", pretty(&r));
    r["attention"].clone()
}

pub(crate) fn answer(w: &World, fake: &FakeAnthropic, id: &str, att: &str) {
    run_json(
        w,
        fake,
        &["answer", id, "allow", "--attention", att, "--json"],
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", host_log(w, id)));
}

#[test]
fn a_permission_is_announced_once_through_the_command_and_the_webhook_and_not_again() {
    let (w, fake) = claude_world(SeedOptions::default());
    let hosts = Hosts::new(&w, &fake);
    let hook = receiver(200, None);
    let out = w.dir.path().join("notified.jsonl");
    let log = w.dir.path().join("notify.log");
    configure(
        &w,
        &json!({
            "on": ["needs_attention"],
            "command": command(&out),
            "webhook": {"url": format!("http://{}/hook", hook.addr()), "format": "json",
                        "headers": {"X-Token": {"env": "SPEX_TEST_NOTIFY_TOKEN"}}},
            "dwell": "0s",
            "publicUrl": "http://127.0.0.1:7878/",
        }),
    );
    w.ok(&w.repo, &["materialize"]);
    let mut running = sender(&w, &fake, &log);
    let id = hosts.launch();
    let handle = w.record(&id)["handle"].as_str().unwrap().to_owned();

    let a = permission(&w, &fake, &id, "USE_BASH run it");
    let got = hook
        .request_within(
            |r| r["body"]["attention"] == a["id"],
            Duration::from_secs(10),
        )
        .unwrap_or_else(|| panic!("no webhook\n{}", read_or_empty(&log)));
    // From the record's change (the attention's `since`) to the receiver's receipt.
    let since = humantime::parse_rfc3339(a["since"].as_str().unwrap()).unwrap();
    let since_ms = since
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let took = Duration::from_millis(
        u64::try_from(u128::from(got["received_ms"].as_u64().unwrap()) - since_ms).unwrap(),
    );
    eprintln!("webhook received {took:?} after the attention opened in the record (dwell 0)");
    assert!(took < Duration::from_secs(2), "{took:?}");
    let body = &got["body"];
    assert_eq!(got["headers"]["x-token"], "tok-123", "{}", pretty(&got));
    assert_eq!(body["session"], id.as_str(), "{}", pretty(body));
    assert_eq!(body["handle"], handle.as_str());
    assert_eq!(body["event"], "needs_attention");
    assert!(
        body["question"].as_str().unwrap().contains("bash_out.txt"),
        "{}",
        pretty(body)
    );
    let choices: Vec<&str> = body["choices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["id"].as_str())
        .collect();
    assert_eq!(
        choices,
        ["allow", "allow-session", "deny"],
        "{}",
        pretty(body)
    );
    // One answer link for the attention, one entry per choice; only its hash is stored.
    let links = body["links"].as_array().unwrap();
    assert_eq!(links.len(), 3, "{}", pretty(body));
    let url = links[0]["url"].as_str().unwrap();
    let token = url.strip_prefix("http://127.0.0.1:7878/a/").unwrap();
    assert_eq!(token.len(), 64, "{url}");
    let stored = read_or_empty(&w.spex_home.join("notify/links.json"));
    assert!(!stored.contains(token) && stored.contains(&id), "{stored}");
    assert!(
        body["title"].as_str().unwrap().contains(&handle),
        "{}",
        pretty(body)
    );
    let end = Instant::now() + Duration::from_secs(2);
    while lines(&out).is_empty() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    let by_command = lines(&out);
    assert_eq!(by_command.len(), 1, "{by_command:?}");
    assert_eq!(by_command[0]["attention"], a["id"]);

    // Each channel's delivery is recorded (`--status`) once it is done.
    let end = Instant::now() + Duration::from_secs(5);
    let status = loop {
        let st = run_json(&w, &fake, &["notify", "--status", "--json"]).unwrap();
        let done = ["webhook", "command"]
            .iter()
            .all(|c| st["deliveries"][c]["outcome"] == "accepted");
        if done || Instant::now() > end {
            break st;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        status["deliveries"]["webhook"]["outcome"],
        "accepted",
        "{}\n{}\n{}",
        pretty(&status),
        read_or_empty(&log),
        read_or_empty(&w.spex_home.join("notify/status.json"))
    );
    assert_eq!(
        status["deliveries"]["command"]["outcome"],
        "accepted",
        "{}\n{}",
        pretty(&status),
        read_or_empty(&log)
    );

    // A restarted sender sends nothing again.
    drop(running);
    running = sender(&w, &fake, &log);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(hook.requests().len(), 1, "{:?}", hook.requests());
    assert_eq!(lines(&out).len(), 1);
    answer(&w, &fake, &id, a["id"].as_str().unwrap());
    wait_status(&w, &id, "idle", Duration::from_mins(1));

    // An attention answered within the dwell is never announced.
    drop(running);
    configure(
        &w,
        &json!({"command": command(&out), "dwell": "4s",
                "webhook": {"url": format!("http://{}/hook", hook.addr())}}),
    );
    running = sender(&w, &fake, &log);
    let again = permission(&w, &fake, &id, "USE_BASH again");
    answer(&w, &fake, &id, again["id"].as_str().unwrap());
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(hook.requests().len(), 1, "{:?}", hook.requests());
    assert_eq!(lines(&out).len(), 1, "{}", read_or_empty(&log));

    // A session with a `spex attach` terminal: nothing is sent for it.
    drop(running);
    configure(
        &w,
        &json!({"command": command(&out), "dwell": "0s", "terminal": true,
                "webhook": {"url": format!("http://{}/hook", hook.addr())}}),
    );
    let _running = sender(&w, &fake, &log);
    let attached = Term::spawn(&spex_cmd(&w, &fake, &["attach", &id]), 40, 120);
    let marker = w.session_dir(&id).join("attached");
    let end = Instant::now() + Duration::from_secs(20);
    while !marker.exists() {
        assert!(Instant::now() < end, "no attached marker");
        std::thread::sleep(Duration::from_millis(20));
    }
    let third = permission(&w, &fake, &id, "USE_BASH attached");
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        w.record(&id)["attention"]["id"] == third["id"],
        "still open"
    );
    assert_eq!(hook.requests().len(), 1, "{:?}", hook.requests());
    assert_eq!(lines(&out).len(), 1, "{}", read_or_empty(&log));

    // Another session's attention: announced, and shown in the attached terminal (OSC 9 and
    // OSC 777), which is about the other session.
    let other = hosts.launch();
    let other_handle = w.record(&other)["handle"].as_str().unwrap().to_owned();
    let mark = attached.mark();
    let d = permission(&w, &fake, &other, "USE_BASH other");
    assert!(
        hook.request_within(
            |r| r["body"]["session"] == other.as_str(),
            Duration::from_secs(5)
        )
        .is_some(),
        "{}",
        read_or_empty(&log)
    );
    let end = Instant::now() + Duration::from_secs(5);
    let raw = loop {
        let raw = String::from_utf8_lossy(&attached.raw_since(mark)).into_owned();
        if (raw.contains("\x1b]9;") && raw.contains("\x1b]777;notify;")) || Instant::now() > end {
            break raw;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let osc9 = raw
        .split("\x1b]9;")
        .nth(1)
        .unwrap_or_else(|| panic!("no OSC 9: {raw:?}"));
    assert!(osc9.contains(&other_handle), "{osc9:?}");
    assert!(raw.contains("\x1b]777;notify;"), "{raw:?}");
    assert_eq!(hook.requests().len(), 2, "{:?}", hook.requests());
    answer(&w, &fake, &other, d["id"].as_str().unwrap());
}

#[test]
fn a_hanging_webhook_retries_within_its_bound_and_never_holds_up_the_command() {
    let (w, fake) = claude_world(SeedOptions::default());
    let hosts = Hosts::new(&w, &fake);
    let hook = receiver(200, Some(Duration::from_secs(30)));
    let out = w.dir.path().join("notified.jsonl");
    let log = w.dir.path().join("notify.log");
    configure(
        &w,
        &json!({"command": command(&out), "dwell": "0s",
                "webhook": {"url": format!("http://{}/hook", hook.addr())}}),
    );
    w.ok(&w.repo, &["materialize"]);
    let running = sender(&w, &fake, &log);
    // One sender per user: a second one exits, naming the pid that sends.
    let second = spex_cmd(&w, &fake, &["notify", "--watch"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{said}");
    assert!(said.contains(&format!("pid {}", running.0.id())), "{said}");
    let id = hosts.launch();
    let a = permission(&w, &fake, &id, "USE_BASH run it");
    let opened = Instant::now();
    let end = opened + Duration::from_secs(2);
    while lines(&out).is_empty() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        lines(&out).len(),
        1,
        "the command waited on the webhook\n{}",
        read_or_empty(&log)
    );
    assert_eq!(lines(&out)[0]["attention"], a["id"]);
    // 3 attempts of at most 5 s each, with 0.25 s and 0.5 s between them.
    let end = Instant::now() + Duration::from_secs(30);
    let status = loop {
        let s = run_json(&w, &fake, &["notify", "--status", "--json"]).unwrap();
        if s["deliveries"]["webhook"]["outcome"] == "failed" || Instant::now() > end {
            break s;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let d = &status["deliveries"]["webhook"];
    assert_eq!(d["outcome"], "failed", "{}", pretty(&status));
    assert_eq!(d["attempts"], 3);
    assert!(
        opened.elapsed() < Duration::from_secs(20),
        "{:?}",
        opened.elapsed()
    );
    assert_eq!(hook.requests().len(), 3, "{:?}", hook.requests());
    let human = w.ok(&w.repo, &["notify", "--status"]);
    assert!(
        human.contains("webhook") && human.contains("failed"),
        "{human}"
    );
}

/// `spex notify --test` says per channel whether it accepted: a refused connection and a 500
/// are retried within the bound (3 attempts) and reported; the command still gets it.
#[test]
fn notify_test_reports_each_channel_and_a_failing_webhook_is_retried_within_its_bound() {
    let w = World::new();
    let out = w.dir.path().join("notified.jsonl");
    let failing = receiver(500, None);
    write(
        &w.repo.join("spex.jsonc"),
        format!(
            "{}\n",
            json!({"notify": {"command": command(&out),
                  "webhook": {"url": format!("http://{}/hook", failing.addr()), "format": "ntfy"}}})
        ),
    );
    let o = w.spex(&w.repo, &["notify", "--test"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("command: accepted"), "{text}");
    assert!(text.contains("webhook: failed: HTTP 500"), "{text}");
    assert_eq!(failing.requests().len(), 3);
    // ntfy's JSON publish goes to the server's root with the topic inside.
    let r = &failing.requests()[0];
    assert_eq!(r["path"], "/");
    assert_eq!(r["body"]["topic"], "hook");
    assert_eq!(lines(&out).len(), 1);
    assert_eq!(lines(&out)[0]["event"], "test");

    // Nothing listens there any more: refused, retried, reported.
    let port = failing.addr().port();
    drop(failing);
    write(
        &w.repo.join("spex.jsonc"),
        format!(
            "{}\n",
            json!({"notify": {"webhook": {"url": format!("http://127.0.0.1:{port}/x")}}})
        ),
    );
    let o = w.spex(&w.repo, &["notify", "--test"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("webhook: failed") && text.contains("after 3 attempts"),
        "{text}"
    );
    let status = w.ok(&w.repo, &["notify", "--status"]);
    assert!(status.contains("failed"), "{status}");

    // A wrong key names the file, line and key.
    write(
        &w.repo.join("spex.jsonc"),
        "{\n  \"notify\": {\"dwel\": \"5s\"}\n}\n",
    );
    let o = w.spex(&w.repo, &["notify", "--status"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("spex.jsonc") && err.contains("line 2") && err.contains("notify.dwel"),
        "{err}"
    );
}

/// Turn ends of several sessions within the dwell are one summary, not one message each.
#[test]
fn turn_ends_within_the_dwell_are_one_summary() {
    let (w, fake) = claude_world(SeedOptions::default());
    let hosts = Hosts::new(&w, &fake);
    let hook = receiver(200, None);
    let log = w.dir.path().join("notify.log");
    configure(
        &w,
        &json!({"on": ["turn_end"], "dwell": "3s",
                "webhook": {"url": format!("http://{}/hook", hook.addr())}}),
    );
    w.ok(&w.repo, &["materialize"]);
    let running = sender(&w, &fake, &log);
    let ids: Vec<String> = (0..3).map(|_| hosts.launch()).collect();
    for id in &ids {
        run_json(&w, &fake, &["deliver", id, "USE_NONE say hi", "--json"])
            .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, id)));
    }
    for id in &ids {
        wait_status(&w, id, "idle", Duration::from_mins(1));
    }
    let got = hook
        .request_within(|_| true, Duration::from_secs(10))
        .unwrap_or_else(|| panic!("nothing sent\n{}", read_or_empty(&log)));
    std::thread::sleep(Duration::from_secs(4));
    let all = hook.requests();
    assert_eq!(all.len(), 1, "{}", pretty(&json!(all)));
    let body = &got["body"];
    assert_eq!(body["event"], "summary", "{}", pretty(body));
    let mut named: Vec<String> = body["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    named.sort();
    // Idle, the sender (and the watcher in it) wakes for nothing: its threads' context
    // switches over 3 s of no change.
    let switches = || -> u64 {
        let mut n = 0;
        for t in std::fs::read_dir(format!("/proc/{}/task", running.0.id())).unwrap() {
            let status = read_or_empty(&t.unwrap().path().join("status"));
            for l in status.lines().filter(|l| l.contains("ctxt_switches")) {
                n += l.split_whitespace().last().unwrap().parse::<u64>().unwrap();
            }
        }
        n
    };
    let before = switches();
    std::thread::sleep(Duration::from_secs(3));
    let woke = switches() - before;
    eprintln!("sender idle wakeups over 3 s: {woke}");
    assert_eq!(woke, 0, "the idle sender woke up");
    let mut want = ids.clone();
    want.sort();
    assert_eq!(named, want, "{}", pretty(body));
}

#[test]
fn an_attention_open_before_the_senders_first_start_is_announced_once() {
    let (w, fake) = claude_world(SeedOptions::default());
    let hosts = Hosts::new(&w, &fake);
    let hook = receiver(200, None);
    let log = w.dir.path().join("notify.log");
    configure(
        &w,
        &json!({"on": ["needs_attention"], "dwell": "1s",
                "webhook": {"url": format!("http://{}/hook", hook.addr())}}),
    );
    w.ok(&w.repo, &["materialize"]);
    let id = hosts.launch();
    let a = permission(&w, &fake, &id, "USE_BASH run it");
    // The sender has never run: no cursor, so it starts at the stream's end.
    assert!(!w.spex_home.join("notify/cursor.txt").exists());
    let first = sender(&w, &fake, &log);
    let got = hook
        .request_within(
            |r| r["body"]["attention"] == a["id"],
            Duration::from_secs(10),
        )
        .unwrap_or_else(|| {
            panic!(
                "the open attention was not announced\n{}",
                read_or_empty(&log)
            )
        });
    assert_eq!(got["body"]["session"], id.as_str(), "{}", pretty(&got));
    assert_eq!(got["body"]["event"], "needs_attention", "{}", pretty(&got));
    // Once: not again by a restarted sender (its cursor saved now), nor by the first one.
    drop(first);
    let _second = sender(&w, &fake, &log);
    std::thread::sleep(Duration::from_secs(3));
    let all = hook.requests();
    assert_eq!(all.len(), 1, "{}", pretty(&json!(all)));
    assert!(
        read_or_empty(&w.spex_home.join("notify/cursor.txt")).contains(':'),
        "{}",
        read_or_empty(&log)
    );
}
