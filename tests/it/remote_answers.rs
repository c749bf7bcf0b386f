//! Answering a session on another machine (issue 32) against a real OpenSSH server and the REAL
//! Claude Code there (offline, the fake Messages API; the rig of `remote_cmds`): a remote
//! permission announced once by this machine's board (its sender, an ntfy webhook received by
//! the test), its answer link followed as a phone does (GET shows, POST answers) and confirmed
//! there (`by: link` on the remote's closing event, the tool ran there, the model heard it);
//! `answer`, `deny`, `interrupt`, `resume`, `rename` and `usage --remote` over SSH, each with the
//! output, exit code and `--json` of the same command run there. Fails, never skips.

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::board::Board;
use crate::board_browser::{card, open_board};
use crate::notify::receiver;
use crate::notify_links::{FORM, action, actions, request};
use crate::remote_cmds::{Rig, stdout};
use crate::support::browser::{Browser, PHONE, js_string};
use crate::support::world::{pretty, read_or_empty, write};

const WAIT: Duration = Duration::from_mins(1);

/// The other machine's events of session `handle` (its full id found there).
fn events_there(rig: &Rig, handle: &str) -> Vec<Value> {
    let id = rig.record(handle)["id"].as_str().unwrap().to_owned();
    rig.other.events(&id)
}

fn closed_there(rig: &Rig, handle: &str) -> Vec<Value> {
    events_there(rig, handle)
        .into_iter()
        .filter(|e| e["kind"] == "attention.closed")
        .collect()
}

/// Everything the fake model was sent, as one text.
fn heard(rig: &Rig) -> String {
    rig.fake
        .requests()
        .iter()
        .map(|r| r["body"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Waits until the model was sent `text`.
fn model_hears(rig: &Rig, text: &str) -> bool {
    let end = Instant::now() + Duration::from_secs(30);
    while !heard(rig).contains(text) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
    heard(rig).contains(text)
}

/// A `spex board` here on a port known before it starts, the notifier (its sender) sending
/// `needs_attention` to an ntfy webhook with links to it, once it follows the other machine:
/// the board, the webhook's receiver, the board's port.
fn board_here(rig: &Rig) -> (Board, crate::support::http::LoggingServer, u16) {
    let local = &rig.local;
    let hook = receiver(200, None);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let public = format!("http://127.0.0.1:{port}");
    let cfg = json!({
        "harnesses": ["claude"],
        "notify": {
            "on": ["needs_attention"],
            "webhook": {"url": format!("http://{}/phone", hook.addr()), "format": "ntfy"},
            "dwell": "0s",
            "publicUrl": public,
        },
    });
    write(&local.repo.join("spex.jsonc"), format!("{cfg}\n"));
    let mut cmd = rig.sshd.cmd(
        local,
        &[
            "board",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--public-url",
            &public,
            "--json",
        ],
    );
    cmd.stdin(Stdio::null());
    let board = crate::board::start(cmd);
    assert_eq!(board.port, port);
    // Its sender runs (its pid in the lock) and its watcher follows the other machine.
    let lock = local.spex_home.join("notify/sender.lock");
    let state = local.spex_home.join("remotes/dev/state.json");
    let end = Instant::now() + WAIT;
    while read_or_empty(&lock).trim() != board.child.id().to_string()
        || !read_or_empty(&state).contains("\"reachable\"")
    {
        assert!(
            Instant::now() < end,
            "the board's sender or follower never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (board, hook, port)
}

/// A real Claude permission on the other machine, announced by this machine's board once, its
/// ntfy answer link followed as a phone does: the GET shows the remote question and answers
/// nothing, the POST (no `Origin`) answers through the spex there, which records `by: link`;
/// the tool runs there and the model hears its result; the same tap again is 200, another 409.
/// The next permission, denied with the board page's button, is recorded there `by: board`.
#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one phone's walk through a remote attention's link, step by step"
)]
fn a_remote_permissions_answer_link_is_answered_there_by_link() {
    let rig = Rig::start();
    let (handle, _) = rig.launch();
    let (board, hook, port) = board_here(&rig);
    let dev = format!("dev:{handle}");
    rig.json_here(&["deliver", &dev, "USE_BASH run it", "--json"]);
    let rec = rig.until(&handle, "asked", |rec| rec["status"] == "needs_attention");
    assert_eq!(rec["attention"]["kind"], "permission", "{}", pretty(&rec));
    let att = rec["attention"]["id"].as_str().unwrap().to_owned();
    let out = rig.other.repo.join("bash_out.txt");

    let msg = hook
        .request_within(|r| r["body"]["actions"].is_array(), WAIT)
        .unwrap_or_else(|| panic!("no ntfy message"));
    // From the attention's opening there (its `since`, the same clock) to the webhook's receipt
    // here: the remote stream over ssh, the follower, the sender.
    let since = humantime::parse_rfc3339(rec["attention"]["since"].as_str().unwrap()).unwrap();
    let since_ms = since
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let took = u128::from(msg["received_ms"].as_u64().unwrap()).saturating_sub(since_ms);
    eprintln!("remote attention announced {took} ms after it opened there (dwell 0)");
    let text = msg["body"]["message"].as_str().unwrap_or_default();
    let title = msg["body"]["title"].as_str().unwrap_or_default();
    assert!(text.contains("bash_out.txt"), "{}", pretty(&msg));
    assert!(
        title.contains(&dev) || text.contains(&dev),
        "the remote session is named `{dev}`: {}",
        pretty(&msg)
    );
    let links = actions(&msg, port);
    let (_, allow) = action(&links, "choice=allow");
    let (_, deny) = action(&links, "choice=deny");

    // GET (the phone's browser, a link preview): the remote question and its choices, nothing
    // answered there.
    let (status, page) = request(port, "GET", allow, &[], "");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("bash_out.txt"), "{page}");
    for choice in ["allow", "deny"] {
        assert!(
            page.contains(&format!("name=\"choice\" value=\"{choice}\"")),
            "{page}"
        );
    }
    assert_eq!(rig.record(&handle)["attention"]["id"], att.as_str());
    assert!(!out.exists() && closed_there(&rig, &handle).is_empty());

    // The action button: a POST with no Origin, answered by the spex there over ssh.
    let tapped = Instant::now();
    let (status, body) = request(port, "POST", allow, &[FORM], "choice=allow");
    eprintln!(
        "the link's POST answered there and confirmed in {:?}",
        tapped.elapsed()
    );
    assert_eq!(status, 200, "{body}");
    let closed = closed_there(&rig, &handle);
    assert_eq!(closed.len(), 1, "{closed:?}");
    assert_eq!(
        (
            closed[0]["attention"].as_str(),
            closed[0]["by"].as_str(),
            closed[0]["choice"].as_str()
        ),
        (Some(att.as_str()), Some("link"), Some("allow")),
        "{}",
        pretty(&closed[0])
    );
    // The tool ran there, and the model heard its output.
    let end = Instant::now() + WAIT;
    while !out.exists() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        read_or_empty(&out),
        "hi-from-bash\n",
        "the tool did not run there"
    );
    assert!(model_hears(&rig, "hi-from-bash"), "{}", heard(&rig));
    rig.until(&handle, "finished the turn", |rec| {
        rec["status"] == "idle" && rec["turn"]["state"] == "completed"
    });

    // The same tap again changes nothing (200); another answer is 409; still one closing.
    let (status, _) = request(port, "POST", allow, &[FORM], "choice=allow");
    assert_eq!(status, 200);
    let (status, _) = request(port, "POST", deny, &[FORM], "choice=deny");
    assert_eq!(status, 409);
    assert_eq!(closed_there(&rig, &handle).len(), 1);
    // Announced once: one ntfy message for that attention, for all the answering.
    let sent: Vec<Value> = hook
        .requests()
        .into_iter()
        .filter(|r| r["body"]["actions"].is_array())
        .collect();
    assert_eq!(sent.len(), 1, "{}", pretty(&json!(sent)));

    // The next one denied from the board's page (its answer button): recorded `by: board`
    // there, and the command does not run there.
    std::fs::remove_file(&out).unwrap();
    let a2 = asks(&rig, &handle, "USE_BASH run it again", "permission");
    let id = rig.record(&handle)["id"].as_str().unwrap().to_owned();
    let mut ws = board.socket(Some(&board.origin()), None).unwrap();
    let end = Instant::now() + WAIT;
    let card = loop {
        let snap = ws.next();
        let card = snap["sessions"].as_array().and_then(|a| {
            a.iter()
                .find(|s| s["id"] == id.as_str() && s["host"] == "dev")
                .cloned()
        });
        if let Some(card) = card.filter(|c| c["attention"]["id"] == a2["id"]) {
            break card;
        }
        assert!(Instant::now() < end, "no card asking: {}", pretty(&snap));
        std::thread::sleep(Duration::from_millis(200));
        ws = board.socket(Some(&board.origin()), None).unwrap();
    };
    // The card offers the remote dialog's own choices (the page draws a button for each).
    let offered: Vec<&str> = card["attention"]["choices"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c["id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        offered,
        ["allow", "allow-session", "deny"],
        "{}",
        pretty(&card)
    );
    let resp = board.act(
        "answer",
        &json!({"session": card["key"], "attention": a2["id"], "choices": ["deny"]}),
    );
    let v: Value = serde_json::from_str(&resp.body).unwrap_or_default();
    assert_eq!((resp.status, &v["ok"]), (200, &json!(true)), "{resp:?}");
    assert_eq!(v["remote"]["choice"], "deny", "{}", pretty(&v));
    let closed = closed_there(&rig, &handle);
    let last = closed.last().unwrap();
    assert_eq!(
        (
            last["attention"].as_str(),
            last["by"].as_str(),
            last["choice"].as_str()
        ),
        (a2["id"].as_str(), Some("board"), Some("deny")),
        "{}",
        pretty(last)
    );
    idle(&rig, &handle);
    assert!(!out.exists(), "the denied command ran there");
}

/// Exit code and stdout.
fn said(out: &Output) -> (Option<i32>, String) {
    (out.status.code(), stdout(out))
}

/// The first line of stderr (the `error:` line).
fn error_line(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// What the spex there printed on stderr, as it reads here: the session named `dev:handle`
/// wherever a code span names it (its error and hints work as printed on this machine).
fn stderr_here(there: &Output, handle: &str) -> String {
    String::from_utf8_lossy(&there.stderr)
        .split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 0 {
                return part.to_owned();
            }
            part.split(' ')
                .map(|w| {
                    if w == handle {
                        format!("dev:{w}")
                    } else {
                        w.to_owned()
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("`")
}

/// `h` (run here on `dev:handle`) was refused as `t` (run there on `handle`): exit code 2,
/// the same stdout, and the same stderr but for the session named as it is typed here.
fn refused_alike(rig: &Rig, h: &Output, t: &Output, handle: &str) {
    assert_eq!(said(h), said(t), "{}", rig.said(h));
    assert_eq!(h.status.code(), Some(2), "{}", rig.said(h));
    assert_eq!(
        String::from_utf8_lossy(&h.stderr),
        stderr_here(t, handle),
        "{}",
        rig.said(h)
    );
}

/// The keys of a JSON object, sorted.
fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    k.sort();
    k
}

/// `spex args` run there, its JSON.
fn json_there(rig: &Rig, args: &[&str]) -> Value {
    let out = rig.there(args);
    assert!(out.status.success(), "{args:?}: {}", rig.said(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", rig.said(&out)))
}

/// Delivers `prompt` (from here) and waits until the session asks: its attention.
fn asks(rig: &Rig, handle: &str, prompt: &str, kind: &str) -> Value {
    rig.json_here(&["deliver", &format!("dev:{handle}"), prompt, "--json"]);
    let rec = rig.until(handle, "asked", |rec| rec["status"] == "needs_attention");
    assert_eq!(rec["attention"]["kind"], kind, "{}", pretty(&rec));
    rec["attention"].clone()
}

fn idle(rig: &Rig, handle: &str) -> Value {
    rig.until(handle, "went idle", |rec| {
        rec["status"] == "idle" && rec["turn"]["state"] != "running"
    })
}

/// `answer` (a question), `deny` (a permission, with a message) on `dev:HANDLE`: confirmed
/// there (`by: cli` on the closing event there, the model hears the choice or the message),
/// with the `--json` of the same command run there and, refused, the same exit code and
/// error.
#[test]
#[expect(
    clippy::too_many_lines,
    reason = "each answer from here, then from there"
)]
fn answer_and_deny_over_ssh_reach_claude_there_as_they_do_there() {
    let rig = Rig::start();
    let (handle, _) = rig.launch();
    let dev = format!("dev:{handle}");

    // A question (AskUserQuestion), answered from here: the model gets Blue.
    let a1 = asks(&rig, &handle, "USE_ASK pick one", "question");
    let here = rig.json_here(&["answer", &dev, "Blue", "--json"]);
    assert_eq!(
        (here["attention"].as_str(), here["choice"].as_str()),
        (a1["id"].as_str(), Some("Blue")),
        "{}",
        pretty(&here)
    );
    assert!(model_hears(&rig, "=\\\"Blue\\\""), "{}", heard(&rig));
    let closed = closed_there(&rig, &handle);
    assert_eq!(
        (closed[0]["by"].as_str(), closed[0]["choice"].as_str()),
        (Some("cli"), Some("Blue")),
        "{}",
        pretty(&closed[0])
    );
    idle(&rig, &handle);
    // The next one answered there: the same JSON fields, the same way.
    asks(&rig, &handle, "USE_ASK pick again", "question");
    let there = json_there(&rig, &["answer", &handle, "Red", "--json"]);
    assert_eq!(
        keys(&here),
        keys(&there),
        "{}\n{}",
        pretty(&here),
        pretty(&there)
    );
    // (`via`: the waiting hook, or keys when the answer comes before the hook waits; both
    // confirmed, whichever machine the command came from.)
    assert!(model_hears(&rig, "=\\\"Red\\\""), "{}", heard(&rig));
    idle(&rig, &handle);
    // An attention that closed is refused alike: exit code, JSON, error line.
    let old = a1["id"].as_str().unwrap();
    let args = |who: &str| {
        vec![
            "answer".to_owned(),
            who.to_owned(),
            "Blue".to_owned(),
            "--attention".to_owned(),
            old.to_owned(),
        ]
    };
    let run = |who: &str, json: bool, here: bool| {
        let mut a = args(who);
        if json {
            a.push("--json".to_owned());
        }
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        if here { rig.here(&a) } else { rig.there(&a) }
    };
    let (h, t) = (run(&dev, true, true), run(&handle, true, false));
    assert_eq!(h.status.code(), t.status.code(), "{}", rig.said(&h));
    assert_ne!(h.status.code(), Some(0), "{}", rig.said(&h));
    let (hj, tj): (Value, Value) = (
        serde_json::from_slice(&h.stdout).unwrap(),
        serde_json::from_slice(&t.stdout).unwrap(),
    );
    assert_eq!(
        (&hj["answered"], &hj["reason"]),
        (&tj["answered"], &tj["reason"]),
        "{}\n{}",
        pretty(&hj),
        pretty(&tj)
    );
    let (h, t) = (run(&dev, false, true), run(&handle, false, false));
    assert_eq!(said(&h), said(&t), "{}", rig.said(&h));
    assert_eq!(
        String::from_utf8_lossy(&h.stderr),
        stderr_here(&t, &handle),
        "{}",
        rig.said(&h)
    );
    assert_eq!(
        error_line(&h).matches("error:").count(),
        1,
        "{}",
        rig.said(&h)
    );

    // A permission denied from here with a message: the command never runs there, the model
    // hears why.
    let a = asks(&rig, &handle, "USE_BASH run it", "permission");
    let here = rig.json_here(&["deny", &dev, "--message", "not this time", "--json"]);
    assert_eq!(
        (here["attention"].as_str(), here["choice"].as_str()),
        (a["id"].as_str(), Some("deny")),
        "{}",
        pretty(&here)
    );
    assert!(model_hears(&rig, "not this time"), "{}", heard(&rig));
    let closed = closed_there(&rig, &handle);
    let last = closed.last().unwrap();
    assert_eq!(
        (last["by"].as_str(), last["choice"].as_str()),
        (Some("cli"), Some("deny")),
        "{}",
        pretty(last)
    );
    idle(&rig, &handle);
    assert!(
        !rig.other.repo.join("bash_out.txt").exists(),
        "the denied command ran"
    );
    // The next one denied there: the same fields.
    asks(&rig, &handle, "USE_BASH run it again", "permission");
    let there = json_there(&rig, &["deny", &handle, "--message", "nor now", "--json"]);
    assert_eq!(
        keys(&here),
        keys(&there),
        "{}\n{}",
        pretty(&here),
        pretty(&there)
    );
    idle(&rig, &handle);
    assert!(
        !rig.other.repo.join("bash_out.txt").exists(),
        "the denied command ran"
    );
    // Nothing is open now: `deny` is refused alike here and there.
    let (h, t) = (rig.here(&["deny", &dev]), rig.there(&["deny", &handle]));
    refused_alike(&rig, &h, &t, &handle);
}

/// `rename`, `interrupt`, `resume` on `dev:HANDLE` and `usage --remote dev`: what they did is
/// seen there (the name, the turn interrupted, the conversation resumed and answering), their
/// output, exit code and `--json` those of the same command run there.
#[test]
#[expect(
    clippy::too_many_lines,
    reason = "four commands, each from here and from there"
)]
fn rename_interrupt_resume_and_usage_over_ssh_as_there() {
    let rig = Rig::start();
    let (handle, pid) = rig.launch();
    let dev = format!("dev:{handle}");

    // A turn to remember (the resume below brings the conversation back); after it the
    // record holds all it will (its process, what was observed).
    rig.json_here(&["deliver", &dev, "USE_NONE remember me", "--json"]);
    rig.until(&handle, "counted the turn's usage", |rec| {
        rec["status"] == "idle" && rec["usage"].is_object() && rec["process"].is_object()
    });

    // rename: the name there, the session found by it from here.
    let here = rig.json_here(&["rename", &dev, "first", "--json"]);
    assert_eq!(here["name"], "first", "{}", pretty(&here));
    assert_eq!(rig.record("first")["id"], here["id"]);
    let there = json_there(&rig, &["rename", &handle, "second", "--json"]);
    assert_eq!(keys(&here), keys(&there));
    let (h, t) = (
        rig.here(&["rename", "dev:second", "third"]),
        rig.there(&["rename", "third", "fourth"]),
    );
    assert_eq!(
        (h.status.code(), stdout(&h).replace("third", "fourth")),
        said(&t),
        "{}",
        rig.said(&h)
    );
    assert_eq!(stdout(&h), format!("{handle} is named third\n"));
    // A name it cannot take: refused alike.
    let (h, t) = (
        rig.here(&["rename", &dev, "9-not-a-name"]),
        rig.there(&["rename", &handle, "9-not-a-name"]),
    );
    refused_alike(&rig, &h, &t, &handle);
    let (h, t) = (
        rig.here(&["rename", &dev, "--clear"]),
        rig.there(&["rename", &handle, "--clear"]),
    );
    assert_eq!(said(&h), said(&t), "{}", rig.said(&h));

    // interrupt: a turn whose model answers after 30 s, ended from here.
    rig.json_here(&[
        "deliver",
        &dev,
        "USE_NONE DELAY=30 take your time",
        "--json",
    ]);
    rig.until(&handle, "worked", |rec| rec["status"] == "working");
    std::thread::sleep(Duration::from_secs(2));
    let after = rig.json_here(&["interrupt", &dev, "--json"]);
    assert_eq!(
        (after["status"].as_str(), after["turn"]["state"].as_str()),
        (Some("idle"), Some("interrupted")),
        "{}",
        pretty(&after)
    );
    let ended: Vec<Value> = events_there(&rig, &handle)
        .into_iter()
        .filter(|e| e["kind"] == "turn.interrupted")
        .collect();
    assert_eq!(ended.len(), 1, "{ended:?}");
    // Nothing runs now: interrupting again reads the same here and there.
    let (h, t) = (
        rig.here(&["interrupt", &dev, "--json"]),
        rig.there(&["interrupt", &handle, "--json"]),
    );
    assert_eq!(said(&h), said(&t), "{}", rig.said(&h));
    let (h, t) = (
        rig.here(&["interrupt", &dev]),
        rig.there(&["interrupt", &handle]),
    );
    assert_eq!(said(&h), said(&t), "{}", rig.said(&h));
    assert_eq!(stdout(&h), format!("{handle}: idle\n"));

    // resume: a live session is refused alike; stopped, it comes back from here with its
    // conversation, and answers there.
    let (h, t) = (
        rig.here(&["resume", &dev, "--detach"]),
        rig.there(&["resume", &handle, "--detach"]),
    );
    refused_alike(&rig, &h, &t, &handle);
    rig.json_here(&["stop", &dev, "--json"]);
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    let here = rig.json_here(&["resume", &dev, "--detach", "--json"]);
    let child = here["session"]["child_pid"]
        .as_u64()
        .or_else(|| here["child_pid"].as_u64())
        .unwrap_or_else(|| panic!("no harness pid: {}", pretty(&here)));
    assert!(std::path::Path::new(&format!("/proc/{child}")).exists());
    let rec = rig.until(&handle, "came back", |rec| {
        rec["status"] == "idle" && rec["live"] == true
    });
    assert_eq!(rec["id"], here["session"]["id"], "{}", pretty(&here));
    let asked = rig.fake.requests().len();
    rig.json_here(&["deliver", &dev, "USE_NONE after the resume", "--json"]);
    rig.until(&handle, "ran a turn after the resume", |rec| {
        rec["turn"]["prompt"] == "USE_NONE after the resume" && rec["turn"]["state"] == "completed"
    });
    // The model got the conversation before the stop with the new prompt.
    let later: Vec<String> = rig.fake.requests()[asked..]
        .iter()
        .map(|r| r["body"].to_string())
        .collect();
    assert!(
        later
            .iter()
            .any(|b| b.contains("after the resume") && b.contains("remember me")),
        "{later:#?}"
    );
    // Stopped and resumed there: the same JSON fields.
    json_there(&rig, &["stop", &handle, "--json"]);
    let there = json_there(&rig, &["resume", &handle, "--detach", "--json"]);
    assert_eq!(
        keys(&here),
        keys(&there),
        "{}\n{}",
        pretty(&here),
        pretty(&there)
    );
    assert_eq!(keys(&here["session"]), keys(&there["session"]));
    idle(&rig, &handle);

    // usage: what the spex there sums, byte for byte.
    for args in [
        vec!["usage"],
        vec!["usage", "--json"],
        vec!["usage", "--by", "session", "--json"],
    ] {
        let mut here = args.clone();
        here.extend(["--remote", "dev"]);
        let (h, t) = (rig.here(&here), rig.there(&args));
        assert_eq!(h.status.code(), Some(0), "{}", rig.said(&h));
        assert_eq!(said(&h), said(&t), "{args:?}");
    }
    let u: Value =
        serde_json::from_slice(&rig.here(&["usage", "--remote", "dev", "--json"]).stdout).unwrap();
    assert!(
        u["total"]["requests"].as_u64().is_some_and(|n| n > 0),
        "{}",
        pretty(&u)
    );
}

/// The board's page in a real Chromium at a phone's size: a remote Claude's permission card
/// has the dialog's own buttons; Deny runs `spex answer` there (recorded `by: board`), the
/// command does not run there and the card says what was answered.
#[test]
fn the_boards_page_denies_a_remote_permission_with_its_own_button() {
    let rig = Rig::start();
    let (handle, _) = rig.launch();
    let mut cmd = rig
        .sshd
        .cmd(&rig.local, &["board", "--listen", "127.0.0.1:0", "--json"]);
    cmd.stdin(Stdio::null());
    let b = crate::board_browser::Board::start(cmd);
    let browser = Browser::start();
    let page = open_board(&browser, &b, PHONE);
    let a = asks(&rig, &handle, "USE_BASH run it", "permission");
    let id = rig.record(&handle)["id"].as_str().unwrap().to_owned();
    let c = card(&id);
    let box_ = format!(
        "{c} .attention[data-attention=\"{}\"]",
        a["id"].as_str().unwrap()
    );
    let buttons = js_string(&format!("{box_} button[data-action=answer]"));
    page.wait_for(
        "the remote card's answer buttons",
        &format!("document.querySelectorAll({buttons}).length > 0"),
        WAIT,
    );
    let ids = page.eval(&format!(
        "[...document.querySelectorAll({buttons})].map(b => b.dataset.choice)"
    ));
    assert_eq!(
        ids,
        json!(["allow", "allow-session", "deny"]),
        "{}",
        page.body_text()
    );
    page.click(&format!(
        "{box_} button[data-action=answer][data-choice=deny]"
    ));
    page.wait_text(&format!("{c} [data-field=result]"), "answered deny", WAIT);
    let closed = closed_there(&rig, &handle);
    assert_eq!(closed.len(), 1, "{closed:?}");
    assert_eq!(
        (closed[0]["by"].as_str(), closed[0]["choice"].as_str()),
        (Some("board"), Some("deny")),
        "{}",
        pretty(&closed[0])
    );
    idle(&rig, &handle);
    assert!(
        !rig.other.repo.join("bash_out.txt").exists(),
        "the denied command ran there"
    );
    assert!(page.errors().is_empty(), "{:?}", page.errors());
}
