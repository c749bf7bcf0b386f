//! One sender per user (issue 31): `spex board` and `spex watch` (what the user service runs)
//! run the sender when a channel is configured; the second one stands by on the lock and takes
//! over when the first dies, and `spex notify --status` names the process that sends. With a
//! REAL Claude Code session (offline against the fake model server): an attention announced by
//! the board's sender is not announced again by the one that takes over, and the next attention
//! is announced once by it. Fails, never skips.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::notify::{Hosts, answer, configure, permission};
use crate::runtime::{claude_world, run_json, spex_cmd};
use crate::support::claude_home::SeedOptions;
use crate::support::fake_anthropic::FakeAnthropic;
use crate::support::world::{World, pretty, read_or_empty, wait_status};

/// A child process killed on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn logged(path: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap()
}

/// The sender `spex notify --status --json` names, once it names `pid`.
fn sending(w: &World, fake: &FakeAnthropic, pid: u32, log: &Path) -> Value {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let st = run_json(w, fake, &["notify", "--status", "--json"]).unwrap();
        if st["sender"] == pid {
            return st;
        }
        assert!(
            Instant::now() < end,
            "pid {pid} does not send\n{}\n{}",
            pretty(&st),
            read_or_empty(log)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The notifications the command channel received (one JSON line each).
fn received(out: &Path) -> Vec<Value> {
    read_or_empty(out)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn wait_received(out: &Path, n: usize, log: &Path) {
    let end = Instant::now() + Duration::from_secs(10);
    while received(out).len() < n {
        assert!(
            Instant::now() < end,
            "{} notification(s), not {n}\n{}",
            received(out).len(),
            read_or_empty(log)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_board_sends_and_the_user_service_takes_over_when_it_dies_sending_nothing_twice() {
    let (w, fake) = claude_world(SeedOptions::default());
    let hosts = Hosts::new(&w, &fake);
    let out = w.dir.path().join("notified.jsonl");
    let log = w.dir.path().join("notify.log");
    configure(
        &w,
        &json!({
            "on": ["needs_attention"],
            "command": ["/bin/sh", "-c", format!("cat >> '{0}' && echo >> '{0}'", out.display())],
            "dwell": "0s",
        }),
    );
    w.ok(&w.repo, &["materialize"]);
    let mut board = spex_cmd(&w, &fake, &["board", "--listen", "127.0.0.1:0", "--json"])
        .stdout(Stdio::piped())
        .stderr(logged(&log))
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(board.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let board_pid = board.id();
    let mut board = Killed(board);
    let st = sending(&w, &fake, board_pid, &log);
    assert_eq!(st["sender_by"], "spex board", "{}", pretty(&st));
    // The user service's process: its sender stands by.
    let watch = Killed(
        spex_cmd(&w, &fake, &["watch"])
            .stdout(Stdio::null())
            .stderr(logged(&log))
            .spawn()
            .unwrap(),
    );
    let watch_pid = watch.0.id();

    let id = hosts.launch();
    let first = permission(&w, &fake, &id, "USE_BASH run it");
    wait_received(&out, 1, &log);
    assert_eq!(received(&out)[0]["attention"], first["id"]);
    let st = run_json(&w, &fake, &["notify", "--status", "--json"]).unwrap();
    assert_eq!(st["sender"], board_pid, "{}", pretty(&st));

    // The board dies: the service's sender takes over and sends nothing already sent.
    board.0.kill().unwrap();
    board.0.wait().unwrap();
    let st = sending(&w, &fake, watch_pid, &log);
    assert_eq!(st["sender_by"], "spex watch", "{}", pretty(&st));
    let human = w.ok(&w.repo, &["notify", "--status"]);
    assert!(
        human.contains(&format!("pid {watch_pid}, `spex watch`")),
        "{human}"
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(received(&out).len(), 1, "{:?}", received(&out));

    // The next attention: announced once, by the sender that took over.
    answer(&w, &fake, &id, first["id"].as_str().unwrap());
    wait_status(&w, &id, "idle", Duration::from_mins(1));
    let second = permission(&w, &fake, &id, "USE_BASH run it");
    assert_ne!(second["id"], first["id"]);
    wait_received(&out, 2, &log);
    std::thread::sleep(Duration::from_secs(1));
    let got = received(&out);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[1]["attention"], second["id"]);
    assert_eq!(got[1]["session"], id.as_str());
    drop(watch);
}
