//! Desktop notifications (issue 31, "What it must show" 3): a private D-Bus session bus (a
//! `dbus-daemon --session` the test starts) with a notification server written here with the
//! same crate spex uses (`zbus`): it records every `Notify` call and emits the signals a
//! person's click makes. A REAL Claude Code session (offline against the fake model server) at
//! a permission dialog: the notification arrives with its action buttons; an `ActionInvoked`
//! from another client of the bus than the server answers nothing; the server's answers the
//! session (the tool runs, the closing event says `by: "desktop"`); the next attention,
//! answered through the CLI, has its notification closed and its buttons answer nothing; the
//! idle sender wakes for nothing. A server without action buttons gets the question and its
//! choices as text (escaped for one that reads markup). Fails, never skips.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use zbus::zvariant::OwnedValue;

use crate::notify::{Hosts, answer, configure, permission};
use crate::runtime::{claude_world, host_log, spex_cmd};
use crate::support::claude_home::SeedOptions;
use crate::support::fake_anthropic::FakeAnthropic;
use crate::support::world::{World, pretty, read_or_empty, wait_status};

const NAME: &str = "org.freedesktop.Notifications";
const PATH: &str = "/org/freedesktop/Notifications";

/// A child process killed on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A private session bus in `dir`: the daemon and its address.
fn bus(dir: &Path) -> (Killed, String) {
    let mut child = Command::new("dbus-daemon")
        .args(["--session", "--nofork", "--print-address=1"])
        .arg(format!("--address=unix:path={}", dir.join("bus").display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        // It says it cannot raise its fd limit as a user: noise.
        .stderr(Stdio::null())
        .spawn()
        .expect("dbus-daemon runs (scripts/install-test-tools.sh installs it)");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let address = line.trim().to_owned();
    assert!(address.starts_with("unix:"), "{address:?}");
    (Killed(child), address)
}

/// The test's notification server: every `Notify` call as JSON.
#[derive(Clone, Default)]
struct Server {
    calls: Arc<Mutex<Vec<Value>>>,
    closed: Arc<Mutex<Vec<u32>>>,
    /// It shows no action buttons (`GetCapabilities` without `actions`).
    plain: bool,
}

// The specification's methods: zbus deserializes each argument by value.
#[allow(
    clippy::unused_self,
    clippy::needless_pass_by_value,
    reason = "the D-Bus interface's shape and zbus's generated code"
)]
#[zbus::interface(name = "org.freedesktop.Notifications")]
impl Server {
    fn get_capabilities(&self) -> Vec<String> {
        if self.plain {
            vec!["body".into(), "body-markup".into()]
        } else {
            vec!["actions".into(), "body".into()]
        }
    }

    #[expect(clippy::too_many_arguments, reason = "the specification's signature")]
    fn notify(
        &self,
        app_name: String,
        replaces_id: u32,
        app_icon: String,
        summary: String,
        body: String,
        actions: Vec<String>,
        hints: HashMap<String, OwnedValue>,
        expire_timeout: i32,
    ) -> u32 {
        let mut calls = self.calls.lock().unwrap();
        let id = u32::try_from(calls.len()).unwrap() + 1;
        calls.push(json!({
            "id": id, "app_name": app_name, "replaces_id": replaces_id, "app_icon": app_icon,
            "summary": summary,
            "body": body, "actions": actions, "expire_timeout": expire_timeout,
            "urgency": hints.get("urgency").and_then(|v| u8::try_from(v).ok()),
            "received_ms": u64::try_from(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_millis(),
            )
            .unwrap(),
        }));
        id
    }

    fn close_notification(&self, id: u32) {
        self.closed.lock().unwrap().push(id);
    }

    fn get_server_information(&self) -> (String, String, String, String) {
        ("spex-test".into(), "spex".into(), "0".into(), "1.2".into())
    }
}

/// The server on the bus at `address`, owning the notification service's name.
async fn serve(address: &str, server: Server) -> zbus::Connection {
    zbus::connection::Builder::address(address)
        .unwrap()
        .name(NAME)
        .unwrap()
        .serve_at(PATH, server)
        .unwrap()
        .build()
        .await
        .unwrap()
}

/// Another client of the same bus (not the notification server).
async fn client(address: &str) -> zbus::Connection {
    zbus::connection::Builder::address(address)
        .unwrap()
        .build()
        .await
        .unwrap()
}

async fn invoke(conn: &zbus::Connection, id: u32, key: &str) {
    conn.emit_signal(
        Option::<&str>::None,
        PATH,
        NAME,
        "ActionInvoked",
        &(id, key),
    )
    .await
    .unwrap();
}

fn sender(w: &World, fake: &FakeAnthropic, address: &str, log: &Path) -> Killed {
    let err = std::fs::File::create(log).unwrap();
    let child = spex_cmd(w, fake, &["notify", "--watch"])
        .env("DBUS_SESSION_BUS_ADDRESS", address)
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .unwrap();
    let lock = w.spex_home.join("notify/sender.lock");
    let end = Instant::now() + Duration::from_secs(20);
    while read_or_empty(&lock).trim() != child.id().to_string() {
        assert!(Instant::now() < end, "no sender\n{}", read_or_empty(log));
        std::thread::sleep(Duration::from_millis(20));
    }
    Killed(child)
}

fn closed(w: &World, id: &str) -> Vec<Value> {
    w.events(id)
        .into_iter()
        .filter(|e| e["kind"] == "attention.closed")
        .collect()
}

#[test]
fn a_desktop_notification_carries_the_choices_and_its_allow_button_answers_the_session() {
    let (w, fake) = claude_world(SeedOptions::default());
    let hosts = Hosts::new(&w, &fake);
    let (_daemon, address) = bus(w.dir.path());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = Server::default();
    let conn = rt.block_on(serve(&address, server.clone()));
    let stranger = rt.block_on(client(&address));
    configure(
        &w,
        &json!({"on": ["needs_attention"], "desktop": true, "dwell": "0s"}),
    );
    w.ok(&w.repo, &["materialize"]);

    // `--test` goes through the same channel: shown, no buttons (no attention to answer).
    let said = spex_cmd(&w, &fake, &["notify", "--test"])
        .env("DBUS_SESSION_BUS_ADDRESS", &address)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&said.stdout);
    assert!(
        said.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&said.stderr)
    );
    assert!(text.contains("desktop: accepted (shown"), "{text}");
    assert_eq!(server.calls.lock().unwrap().len(), 1);
    assert_eq!(server.calls.lock().unwrap()[0]["actions"], json!([]));

    let log = w.dir.path().join("notify.log");
    let sending = sender(&w, &fake, &address, &log);
    let id = hosts.launch();
    let handle = w.record(&id)["handle"].as_str().unwrap().to_owned();
    let a = permission(&w, &fake, &id, "USE_BASH run it");
    let att = a["id"].as_str().unwrap().to_owned();
    let end = Instant::now() + Duration::from_secs(10);
    let shown = loop {
        if let Some(c) = server.calls.lock().unwrap().get(1).cloned() {
            break c;
        }
        assert!(
            Instant::now() < end,
            "no notification\n{}",
            read_or_empty(&log)
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // From the record's change (the attention's `since`) to the server's `Notify` (dwell 0).
    let since = humantime::parse_rfc3339(a["since"].as_str().unwrap())
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let took = Duration::from_millis(shown["received_ms"].as_u64().unwrap()).saturating_sub(since);
    eprintln!("desktop notification shown {took:?} after the attention opened in the record");
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(shown["app_name"], "spex", "{}", pretty(&shown));
    assert!(
        shown["summary"].as_str().unwrap().contains(&handle),
        "{}",
        pretty(&shown)
    );
    assert!(
        shown["body"].as_str().unwrap().contains("bash_out.txt"),
        "{}",
        pretty(&shown)
    );
    assert_eq!(shown["urgency"], 2, "{}", pretty(&shown));
    // Pairs of (action key, label): one per choice, the key what `spex answer` takes.
    let actions: Vec<&str> = shown["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let keys: Vec<&str> = actions.iter().step_by(2).copied().collect();
    assert_eq!(
        keys,
        ["allow", "allow-session", "deny"],
        "{}",
        pretty(&shown)
    );
    assert!(actions.iter().skip(1).step_by(2).all(|l| !l.is_empty()));
    let nid = u32::try_from(shown["id"].as_u64().unwrap()).unwrap();

    // Any client of the bus can emit the signal: only the server's counts.
    rt.block_on(invoke(&stranger, nid, "deny"));
    std::thread::sleep(Duration::from_secs(1));
    assert!(closed(&w, &id).is_empty(), "{}", host_log(&w, &id));
    assert_eq!(w.record(&id)["attention"]["id"], att.as_str());

    // The person clicks "allow": the session is answered and the tool runs.
    rt.block_on(invoke(&conn, nid, "allow"));
    let out = w.repo.join("bash_out.txt");
    let end = Instant::now() + Duration::from_secs(30);
    while !out.exists() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        out.exists(),
        "the tool did not run\n{}\n{}",
        read_or_empty(&log),
        host_log(&w, &id)
    );
    let c = closed(&w, &id);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0]["by"], "desktop", "{}", pretty(&c[0]));
    assert_eq!(c[0]["choice"], "allow", "{}", pretty(&c[0]));
    assert_eq!(c[0]["attention"], att.as_str());
    // A second click on the same notification answers nothing more.
    rt.block_on(invoke(&conn, nid, "deny"));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(closed(&w, &id).len(), 1);
    assert_eq!(server.calls.lock().unwrap().len(), 2, "one notification");

    // The next attention, answered another way (the CLI): its notification is closed, and its
    // buttons answer nothing.
    wait_status(&w, &id, "idle", Duration::from_mins(1));
    let second = permission(&w, &fake, &id, "USE_BASH run it");
    let att2 = second["id"].as_str().unwrap().to_owned();
    let end = Instant::now() + Duration::from_secs(10);
    let nid2 = loop {
        if let Some(c) = server.calls.lock().unwrap().get(2) {
            break u32::try_from(c["id"].as_u64().unwrap()).unwrap();
        }
        assert!(
            Instant::now() < end,
            "no second notification\n{}",
            read_or_empty(&log)
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    answer(&w, &fake, &id, &att2);
    let end = Instant::now() + Duration::from_secs(10);
    while !server.closed.lock().unwrap().contains(&nid2) {
        assert!(
            Instant::now() < end,
            "notification {nid2} not closed\n{}",
            read_or_empty(&log)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    rt.block_on(invoke(&conn, nid2, "deny"));
    std::thread::sleep(Duration::from_millis(500));
    let c = closed(&w, &id);
    assert_eq!(c.len(), 2, "{c:?}");
    assert_eq!(c[1]["by"], "cli", "{}", pretty(&c[1]));
    assert_eq!(c[1]["choice"], "allow", "{}", pretty(&c[1]));
    // Idle (the turn over), the sender wakes for nothing, its D-Bus runtime included: its
    // threads' context switches over 3 s of no change (a thread that ended counts nothing).
    wait_status(&w, &id, "idle", Duration::from_mins(1));
    let switches = || -> HashMap<String, (String, u64)> {
        let mut all = HashMap::new();
        for t in std::fs::read_dir(format!("/proc/{}/task", sending.0.id())).unwrap() {
            let dir = t.unwrap().path();
            let status = read_or_empty(&dir.join("status"));
            let n = status
                .lines()
                .filter(|l| l.contains("ctxt_switches"))
                .map(|l| l.split_whitespace().last().unwrap().parse::<u64>().unwrap())
                .sum();
            let name = read_or_empty(&dir.join("comm")).trim().to_owned();
            all.insert(dir.display().to_string(), (name, n));
        }
        all
    };
    std::thread::sleep(Duration::from_millis(500));
    let before = switches();
    std::thread::sleep(Duration::from_secs(3));
    let woke: Vec<(String, u64)> = switches()
        .into_iter()
        .map(|(tid, (name, n))| (name, n - before.get(&tid).map_or(0, |b| b.1)))
        .filter(|(_, n)| *n > 0)
        .collect();
    eprintln!("desktop sender idle wakeups over 3 s: {woke:?}");
    assert!(
        woke.is_empty(),
        "the idle sender woke up: {woke:?}\n{}",
        read_or_empty(&log)
    );
    drop(conn);
    drop(stranger);
}

#[test]
fn a_server_without_action_buttons_gets_the_question_and_its_choices_as_text() {
    let (w, fake) = claude_world(SeedOptions::default());
    let hosts = Hosts::new(&w, &fake);
    let (_daemon, address) = bus(w.dir.path());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = Server {
        plain: true,
        ..Server::default()
    };
    let _conn = rt.block_on(serve(&address, server.clone()));
    configure(
        &w,
        &json!({"on": ["needs_attention"], "desktop": true, "dwell": "0s"}),
    );
    w.ok(&w.repo, &["materialize"]);
    let log = w.dir.path().join("notify.log");
    let _sending = sender(&w, &fake, &address, &log);
    let id = hosts.launch();
    permission(&w, &fake, &id, "USE_BASH run it");
    let end = Instant::now() + Duration::from_secs(10);
    let shown = loop {
        if let Some(c) = server.calls.lock().unwrap().first().cloned() {
            break c;
        }
        assert!(
            Instant::now() < end,
            "no notification\n{}",
            read_or_empty(&log)
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(shown["actions"], json!([]), "{}", pretty(&shown));
    let body = shown["body"].as_str().unwrap();
    // The server reads markup: the command's `>` is escaped, the choices are in the text.
    assert!(
        body.contains("echo hi-from-bash &gt; bash_out.txt"),
        "{body}"
    );
    assert!(body.contains("[Yes | "), "{body}");
    assert!(closed(&w, &id).is_empty());
}
