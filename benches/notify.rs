//! Benchmark of `spex notify --watch` (issue 31, "what it must show" 5), against one live Claude
//! session (a `sleep` process standing in for Claude with its registry file, its state made by
//! real `spex dispatch` calls, as the `board` bench makes them) and a webhook receiver in this
//! process (a plain HTTP server on 127.0.0.1 that notes when each body arrived):
//!
//! - `delay`: a permission's `Notification` hook opens the attention in the record; from the
//!   attention's `since` (the record's change, on the machine's clock) to the receiver's
//!   receipt of the webhook naming it, with `"dwell": "0s"`, 30 attentions (each closed by
//!   the turn's `Stop` before the next opens).
//! - `idle wakeups`: the context switches of every thread of the sender's process (the
//!   watcher it runs included), voluntary and not, from `/proc/<pid>/task/*/status`, over 5 s
//!   with nothing happening.
//!
//! Goals: delay p50 <= 300 ms; idle wakeups 0. Run: `cargo bench --bench notify`.

#![expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::too_many_lines,
    reason = "benchmark rigging, not product code: a failed setup call panics on the spot, so fs_err's path adds little, and a scenario reads best as one function"
)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

#[path = "rig/live.rs"]
mod live;
use live::{ClaudeEnv, dispatch, ms, percentile, repo_in};

const ATTENTIONS: usize = 30;
const QUIET: Duration = Duration::from_secs(5);

/// The record of the one session in `store`.
fn record(store: &Path) -> Value {
    for p in std::fs::read_dir(store.join("projects")).unwrap().flatten() {
        for s in std::fs::read_dir(p.path().join("sessions"))
            .into_iter()
            .flatten()
            .flatten()
        {
            if let Ok(text) = std::fs::read_to_string(s.path().join("session.json")) {
                return serde_json::from_str(&text).unwrap();
            }
        }
    }
    panic!("no record")
}

/// A webhook receiver: each body that arrives, with the time it arrived.
type Received = Arc<Mutex<Vec<(SystemTime, Value)>>>;

fn receiver() -> (u16, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let got: Received = Arc::default();
    let keep = got.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let keep = keep.clone();
            std::thread::spawn(move || serve(conn, &keep));
        }
    });
    (port, got)
}

/// Reads one request (headers, then `Content-Length` bytes), notes it, answers 200.
fn serve(conn: TcpStream, got: &Received) {
    let mut reader = BufReader::new(conn);
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let at = SystemTime::now();
    got.lock()
        .unwrap()
        .push((at, serde_json::from_slice(&body).unwrap_or(Value::Null)));
    let _ = reader
        .get_mut()
        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
}

/// Context switches of every thread of `pid`, voluntary and not.
fn switches(pid: u32) -> u64 {
    let mut n = 0;
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        for l in status.lines().filter(|l| l.contains("ctxt_switches")) {
            n += l
                .split_whitespace()
                .last()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    n
}

fn main() {
    let spex = PathBuf::from(env!("CARGO_BIN_EXE_spex"));
    let dir = tempfile::Builder::new()
        .prefix("spx-bench-notify")
        .tempdir_in("/tmp")
        .unwrap();
    let repo = repo_in(dir.path());
    let store = dir.path().join("store");
    let home = dir.path().join("home");
    let config = home.join(".claude");
    std::fs::create_dir_all(config.join("sessions")).unwrap();
    let env: Vec<(&str, &Path)> = vec![("SPEX_HOME", &store), ("HOME", &home)];
    let (port, got) = receiver();
    std::fs::write(
        repo.join("spex.jsonc"),
        json!({"notify": {"on": ["needs_attention"], "dwell": "0s",
               "webhook": {"url": format!("http://127.0.0.1:{port}/hook")}}})
        .to_string(),
    )
    .unwrap();

    // One live session, idle.
    let sid = "00000000-0000-4000-8000-000000000001";
    let live = ClaudeEnv {
        spex: &spex,
        env: &env,
        repo: &repo,
        config: &config,
    };
    let (mut claude, base) = live.start(sid);
    live.register(claude.id(), sid, true);

    let mut sender = Command::new(&spex)
        .args(["notify", "--watch"])
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .current_dir(&repo)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spex notify --watch");
    let lock = store.join("notify/sender.lock");
    let end = Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(&lock).unwrap_or_default().trim() != sender.id().to_string() {
        assert!(Instant::now() < end, "the sender did not start");
        std::thread::sleep(Duration::from_millis(20));
    }

    let mut delays = Vec::new();
    for i in 0..ATTENTIONS {
        let mut ups = base.clone();
        ups["prompt"] = format!("prompt {i}").into();
        ups["prompt_id"] = format!("p-{i}").into();
        dispatch(&spex, &env, &repo, "claude", "UserPromptSubmit", &ups);
        let mut note = base.clone();
        note["hook_event_name"] = "Notification".into();
        note["message"] = "Claude needs your permission to use Bash".into();
        note["notification_type"] = "permission_prompt".into();
        dispatch(&spex, &env, &repo, "claude", "Notification", &note);
        let a = record(&store)["attention"].clone();
        let att = a["id"].as_str().expect("an open attention").to_owned();
        let since = humantime::parse_rfc3339_weak(a["since"].as_str().unwrap()).unwrap();
        let end = Instant::now() + Duration::from_secs(10);
        let at = loop {
            let found = got
                .lock()
                .unwrap()
                .iter()
                .find(|(_, b)| b["attention"] == att.as_str())
                .map(|(t, _)| *t);
            if let Some(t) = found {
                break t;
            }
            assert!(Instant::now() < end, "no webhook for {att}");
            std::thread::sleep(Duration::from_millis(2));
        };
        delays.push(at.duration_since(since).unwrap_or_default());
        dispatch(&spex, &env, &repo, "claude", "Stop", &base);
    }
    delays.sort();
    let sent = got.lock().unwrap().len();

    // Quiet: nothing changes; the sender should not wake at all.
    std::thread::sleep(Duration::from_secs(1));
    let before = switches(sender.id());
    std::thread::sleep(QUIET);
    let woke = switches(sender.id()) - before;

    println!("notify, one live Claude session, webhook (json) on 127.0.0.1, dwell 0");
    println!(
        "  delay, attention's record change to the webhook's receipt ({ATTENTIONS} attentions, {sent} sent): p50 {:.0} ms, p90 {:.0} ms, max {:.0} ms (goal p50 <= 300 ms)",
        ms(percentile(&delays, 500)),
        ms(percentile(&delays, 900)),
        ms(*delays.last().unwrap()),
    );
    println!(
        "  sender idle wakeups over {} s (context switches of all its threads, /proc): {woke} (goal 0)",
        QUIET.as_secs()
    );

    let _ = sender.kill();
    let _ = sender.wait();
    let _ = claude.kill();
    let _ = claude.wait();
}
