//! Answered from the notification (issue 31): a REAL Claude Code session (offline against the
//! fake model server) at a permission dialog, its ntfy notification received by a webhook in
//! the test, its action buttons' answer links followed as a phone would against `spex board`:
//! a GET only shows, a POST with no `Origin` answers (recorded `by: "link"`), the same POST
//! again changes nothing, another answer is 409, a link whose attention closed another way 410,
//! a foreign `Origin` 403, a link named against another session refused. Fails, never skips.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::notify::{Hosts, configure, permission, receiver};
use crate::runtime::{claude_world, host_log, run_json, spex_cmd};
use crate::support::claude_home::SeedOptions;
use crate::support::world::{pretty, read_or_empty, wait_status};

/// A running `spex board`, killed on drop.
pub(crate) struct Board(pub(crate) Child);

impl Drop for Board {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One request to the board at `port`, as a phone sends it: only the headers given.
pub(crate) fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut text =
        format!("{method} {path} HTTP/1.1\r\nConnection: close\r\nHost: 127.0.0.1:{port}\r\n");
    for (k, v) in headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    text.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_mins(1))).unwrap();
    s.write_all(text.as_bytes()).unwrap();
    let mut bytes = Vec::new();
    let _ = s.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, body.to_owned())
}

pub(crate) const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

/// The ntfy message's `http` actions for attention `att`: (choice body, path on the board).
pub(crate) fn actions(msg: &Value, port: u16) -> Vec<(String, String)> {
    let base = format!("http://127.0.0.1:{port}");
    msg["body"]["actions"]
        .as_array()
        .unwrap_or_else(|| panic!("no actions: {}", pretty(msg)))
        .iter()
        .filter(|a| a["action"] == "http" && a["method"] == "POST")
        .map(|a| {
            let url = a["url"].as_str().unwrap();
            let path = url
                .strip_prefix(&base)
                .unwrap_or_else(|| panic!("{url} is not on the board {base}"));
            (a["body"].as_str().unwrap().to_owned(), path.to_owned())
        })
        .collect()
}

pub(crate) fn action<'a>(all: &'a [(String, String)], body: &str) -> &'a (String, String) {
    all.iter()
        .find(|(b, _)| b == body)
        .unwrap_or_else(|| panic!("no {body} in {all:?}"))
}

fn closed(w: &crate::support::world::World, id: &str) -> Vec<Value> {
    w.events(id)
        .into_iter()
        .filter(|e| e["kind"] == "attention.closed")
        .collect()
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one phone's walk through the links, step by step"
)]
fn an_ntfy_answer_link_is_shown_on_get_answers_once_on_post_and_refuses_the_rest() {
    let (w, fake) = claude_world(SeedOptions::default());
    let hosts = Hosts::new(&w, &fake);
    let hook = receiver(200, None);
    // The board's port, known before the notifier's config names it as `publicUrl`.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let public = format!("http://127.0.0.1:{port}");
    configure(
        &w,
        &json!({
            "on": ["needs_attention"],
            "webhook": {"url": format!("http://{}/phone", hook.addr()), "format": "ntfy"},
            "dwell": "0s",
            "publicUrl": public,
        }),
    );
    w.ok(&w.repo, &["materialize"]);
    let log = w.dir.path().join("notify.log");
    let mut child = spex_cmd(
        &w,
        &fake,
        &[
            "board",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--public-url",
            &public,
            "--json",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(std::fs::File::create(&log).unwrap())
    .spawn()
    .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let board_pid = child.id();
    let _board = Board(child);
    assert!(line.contains(&port.to_string()), "{line}");
    // The board's process runs the sender (a channel is configured): its pid in the lock.
    let lock = w.spex_home.join("notify/sender.lock");
    let end = Instant::now() + Duration::from_secs(20);
    while read_or_empty(&lock).trim() != board_pid.to_string() {
        assert!(Instant::now() < end, "no sender\n{}", read_or_empty(&log));
        std::thread::sleep(Duration::from_millis(20));
    }
    let id = hosts.launch();

    let a = permission(&w, &fake, &id, "USE_BASH run it");
    let att = a["id"].as_str().unwrap().to_owned();
    let msg = hook
        .request_within(|r| r["body"]["actions"].is_array(), Duration::from_secs(10))
        .unwrap_or_else(|| panic!("no ntfy message\n{}", read_or_empty(&log)));
    let links = actions(&msg, port);
    assert_eq!(links.len(), 3, "{}", pretty(&msg));
    let (_, allow) = action(&links, "choice=allow");
    let (_, deny) = action(&links, "choice=deny");
    assert_eq!(
        allow, deny,
        "one link per attention, the choice in the body"
    );

    // GET (a link preview, a scanner, the phone's browser): the confirmation page, no answer.
    let (status, page) = request(port, "GET", allow, &[], "");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("bash_out.txt"), "{page}");
    for choice in ["allow", "allow-session", "deny"] {
        assert!(
            page.contains(&format!("name=\"choice\" value=\"{choice}\"")),
            "{page}"
        );
    }
    assert!(!page.contains("<script"), "{page}");
    // A cross-site form (a foreign Origin) is refused; so is the link named against another
    // session.
    let (status, _) = request(
        port,
        "POST",
        allow,
        &[FORM, ("Origin", "http://evil.example")],
        "choice=allow",
    );
    assert_eq!(status, 403);
    let (status, _) = request(
        port,
        "POST",
        allow,
        &[FORM],
        &format!("choice=allow&session=other-session&attention={att}"),
    );
    assert_eq!(status, 403);
    let (status, _) = request(port, "POST", "/a/f00d", &[FORM], "choice=allow");
    assert_eq!(status, 404, "an unknown link says nothing more");
    let rec = w.record(&id);
    assert_eq!(rec["attention"]["id"], att.as_str(), "{}", pretty(&rec));
    let out = w.repo.join("bash_out.txt");
    assert!(!out.exists() && closed(&w, &id).is_empty());

    // The notification's action button: a POST with no Origin answers.
    let (status, body) = request(port, "POST", allow, &[FORM], "choice=allow");
    assert_eq!(status, 200, "{body}\n{}", host_log(&w, &id));
    let end = Instant::now() + Duration::from_secs(20);
    while !out.exists() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(out.exists(), "the tool did not run\n{}", host_log(&w, &id));
    let c = closed(&w, &id);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0]["by"], "link", "{}", pretty(&c[0]));
    assert_eq!(c[0]["choice"], "allow");
    // The same tap again: 200, nothing changes; another answer: 409.
    let (status, _) = request(port, "POST", allow, &[FORM], "choice=allow");
    assert_eq!(status, 200);
    let (status, _) = request(port, "POST", deny, &[FORM], "choice=deny");
    assert_eq!(status, 409);
    assert_eq!(closed(&w, &id).len(), 1);
    let (status, page) = request(port, "GET", allow, &[], "");
    assert_eq!(status, 200);
    assert!(page.contains("allow"), "{page}");

    // The next attention, answered another way (the CLI): its link is gone.
    wait_status(&w, &id, "idle", Duration::from_mins(1));
    let _ = std::fs::remove_file(&out);
    let second = permission(&w, &fake, &id, "USE_BASH run it");
    let att2 = second["id"].as_str().unwrap().to_owned();
    assert_ne!(att, att2);
    let msg2 = hook
        .request_within(
            |r| r["body"]["actions"].is_array() && actions(r, port)[0].1 != *allow,
            Duration::from_secs(10),
        )
        .unwrap_or_else(|| panic!("no second ntfy message\n{}", read_or_empty(&log)));
    let links2 = actions(&msg2, port);
    let (_, allow2) = action(&links2, "choice=allow");
    // The first link names the first attention: it never answers the second.
    let (status, _) = request(
        port,
        "POST",
        allow,
        &[FORM],
        &format!("choice=allow&session={id}&attention={att2}"),
    );
    assert_eq!(status, 403);
    assert_eq!(w.record(&id)["attention"]["id"], att2.as_str());
    run_json(
        &w,
        &fake,
        &["answer", &id, "deny", "--attention", &att2, "--json"],
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    let (status, _) = request(port, "POST", allow2, &[FORM], "choice=allow");
    assert_eq!(status, 410);
    let (status, _) = request(port, "GET", allow2, &[], "");
    assert_eq!(status, 410);
    let c = closed(&w, &id);
    assert_eq!(c.len(), 2, "{c:?}");
    assert_eq!(c[1]["by"], "cli", "{}", pretty(&c[1]));
}

/// A board on a port known before it starts, the notifier configured to link to it, with
/// `notify` fields added: the board (whose process runs the sender: a channel is configured),
/// the webhook's receiver, the board's port.
fn linked_board(
    w: &crate::support::world::World,
    fake: &crate::support::fake_anthropic::FakeAnthropic,
    extra: &Value,
) -> (Board, crate::support::http::LoggingServer, u16) {
    let hook = receiver(200, None);
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let public = format!("http://127.0.0.1:{port}");
    let mut notify = json!({
        "on": ["needs_attention"],
        "webhook": {"url": format!("http://{}/phone", hook.addr()), "format": "ntfy"},
        "dwell": "0s",
        "publicUrl": public,
    });
    for (k, v) in extra.as_object().unwrap() {
        notify[k] = v.clone();
    }
    configure(w, &notify);
    w.ok(&w.repo, &["materialize"]);
    let mut child = spex_cmd(
        w,
        fake,
        &[
            "board",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--public-url",
            &public,
            "--json",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let board_pid = child.id();
    let board = Board(child);
    assert!(line.contains(&port.to_string()), "{line}");
    let lock = w.spex_home.join("notify/sender.lock");
    let end = Instant::now() + Duration::from_secs(20);
    while read_or_empty(&lock).trim() != board_pid.to_string() {
        assert!(Instant::now() < end, "the board's sender did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    (board, hook, port)
}

/// An expired link answers nothing (410, GET and POST alike) while its attention stays open,
/// and the attention is still answered another way.
#[test]
fn an_expired_answer_link_is_gone_and_its_attention_stays_open() {
    let (w, fake) = claude_world(SeedOptions::default());
    let hosts = Hosts::new(&w, &fake);
    let (_board, hook, port) = linked_board(&w, &fake, &json!({"linkTtl": "4s"}));
    let id = hosts.launch();
    let a = permission(&w, &fake, &id, "USE_BASH run it");
    let att = a["id"].as_str().unwrap().to_owned();
    let msg = hook
        .request_within(|r| r["body"]["actions"].is_array(), Duration::from_secs(10))
        .unwrap_or_else(|| panic!("no ntfy message"));
    let received = Instant::now();
    let links = actions(&msg, port);
    let (_, allow) = action(&links, "choice=allow");
    let (status, page) = request(port, "GET", allow, &[], "");
    assert_eq!(status, 200, "fresh: {page}");
    // Past its 4 s (counted from its minting, before the receipt).
    std::thread::sleep(Duration::from_secs(5).saturating_sub(received.elapsed()));
    let (status, page) = request(port, "GET", allow, &[], "");
    assert_eq!(status, 410, "{page}");
    assert!(page.contains("expired"), "{page}");
    let (status, page) = request(port, "POST", allow, &[FORM], "choice=allow");
    assert_eq!(status, 410, "{page}");
    let rec = w.record(&id);
    assert_eq!(rec["attention"]["id"], att.as_str(), "{}", pretty(&rec));
    assert!(closed(&w, &id).is_empty());
    assert!(!w.repo.join("bash_out.txt").exists(), "the tool ran");
    run_json(
        &w,
        &fake,
        &["answer", &id, "deny", "--attention", &att, "--json"],
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    assert_eq!(closed(&w, &id)[0]["by"], "cli");
    let (status, _) = request(port, "POST", allow, &[FORM], "choice=allow");
    assert_eq!(status, 410);
}

/// A question with free text (Claude's `AskUserQuestion` offers "Other"): one button per
/// option, and a `view` action opening the board at the session; a tap on an option answers
/// it and the model receives it. Two questions: the board only (one answer answers both).
#[test]
fn a_question_gets_one_button_per_option_and_a_view_of_the_session_on_the_board() {
    let (w, fake) = claude_world(SeedOptions::default());
    let hosts = Hosts::new(&w, &fake);
    let (_board, hook, port) = linked_board(&w, &fake, &json!({}));
    let id = hosts.launch();
    let key = format!(
        "{}/{id}",
        w.project_dir()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .rsplit('-')
            .next()
            .unwrap()
    );
    let view = format!("http://127.0.0.1:{port}/#session={key}");

    run_json(&w, &fake, &["deliver", &id, "USE_ASK pick one", "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    let r = wait_status(&w, &id, "needs_attention", Duration::from_mins(1));
    assert_eq!(r["attention"]["kind"], "question", "{}", pretty(&r));
    let msg = hook
        .request_within(|r| r["body"]["actions"].is_array(), Duration::from_secs(10))
        .unwrap_or_else(|| panic!("no ntfy message"));
    let all = msg["body"]["actions"].as_array().unwrap();
    let kinds: Vec<String> = all
        .iter()
        .map(|a| {
            format!(
                "{} {}",
                a["action"].as_str().unwrap(),
                a["label"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        kinds,
        ["http Red", "http Blue", "view Open on the board"],
        "{}",
        pretty(&msg)
    );
    assert_eq!(all[2]["url"], view.as_str(), "{}", pretty(&msg));
    assert_eq!(msg["body"]["click"], view.as_str());
    // The dialog drawn, the phone taps Blue.
    assert!(
        crate::runtime::wait_screen(&w, &fake, &id, "Which color", Duration::from_secs(20)),
        "{}",
        host_log(&w, &id)
    );
    let links = actions(&msg, port);
    let (_, blue) = action(&links, "choice=Blue");
    let (status, body) = request(port, "POST", blue, &[FORM], "choice=Blue");
    assert_eq!(status, 200, "{body}\n{}", host_log(&w, &id));
    let c = closed(&w, &id);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0]["by"], "link", "{}", pretty(&c[0]));
    let end = Instant::now() + Duration::from_secs(30);
    let heard = || {
        fake.requests()
            .iter()
            .any(|r| r["body"].to_string().contains("=\\\"Blue\\\""))
    };
    while !heard() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(heard(), "the model never got Blue\n{}", host_log(&w, &id));
    wait_status(&w, &id, "idle", Duration::from_mins(1));

    // Two questions: no option answers both, so the board only.
    run_json(
        &w,
        &fake,
        &["deliver", &id, "USE_ASK2 two questions", "--json"],
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    let r = wait_status(&w, &id, "needs_attention", Duration::from_mins(1));
    let att2 = r["attention"]["id"].clone();
    let msg = hook
        .request_within(
            |r| r["body"]["actions"].is_array() && r["body"]["actions"][0]["action"] == "view",
            Duration::from_secs(10),
        )
        .unwrap_or_else(|| {
            panic!(
                "no second ntfy message\n{}",
                pretty(&json!(hook.requests()))
            )
        });
    assert_eq!(
        msg["body"]["actions"],
        json!([{"action": "view", "label": "Open on the board", "url": view}]),
        "{}",
        pretty(&msg)
    );
    let text = msg["body"]["message"].as_str().unwrap();
    assert!(
        text.contains("Which color") && text.contains("Which toppings") && text.contains("Cheese"),
        "{text}"
    );
    assert_eq!(w.record(&id)["attention"]["id"], att2);
}
