//! The federated stream (issue 32, "What it must show" 2): `spex events --all-hosts --follow`
//! follows the other machine's stream over a real OpenSSH connection (`support::sshd`) that the
//! test cuts at random moments while the remote session changes state: every remote event
//! arrives once and in order; a stopped sshd shows the host unreachable within 5 s and its
//! sessions stale.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::payloads;
use crate::support::sshd::Sshd;
use crate::support::world::{World, read};

const WAIT: Duration = Duration::from_mins(1);

fn hook(w: &World, event: &str, stem: &str, session: &str) {
    let path = Path::new(payloads::PAYLOADS)
        .join("claude")
        .join(format!("{stem}.json"));
    let mut v = payloads::localize(
        serde_json::from_str(&read(&path)).expect("fixture is JSON"),
        &w.repo,
        &w.home,
    );
    v["session_id"] = session.into();
    let out = w.dispatch(&w.repo, "claude", event, &v);
    assert_eq!(out.status.code(), Some(0), "{event}");
}

/// One turn of the remote session: prompt, a tool call, its end, the turn's end.
fn turn(w: &World, session: &str) {
    hook(w, "UserPromptSubmit", "UserPromptSubmit", session);
    hook(w, "PreToolUse", "PreToolUse.Bash", session);
    hook(w, "PostToolUse", "PostToolUse.Bash", session);
    hook(w, "Stop", "Stop", session);
}

/// `spex events --all-hosts --follow --json` in `local`, its lines on a channel.
struct Follower {
    child: Child,
    lines: mpsc::Receiver<(Instant, Value)>,
}

impl Follower {
    fn start(sshd: &Sshd, local: &World) -> Follower {
        let mut child = sshd
            .cmd(local, &["events", "--all-hosts", "--follow", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spex events starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line).expect("a JSON line");
                if tx.send((Instant::now(), v)).is_err() {
                    break;
                }
            }
        });
        Follower { child, lines: rx }
    }

    /// Lines until one that `done` accepts (it included), or a failure after `wait`.
    fn until(&self, wait: Duration, done: impl Fn(&Value) -> bool) -> Vec<(Instant, Value)> {
        let end = Instant::now() + wait;
        let mut got = Vec::new();
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let Ok((at, v)) = self.lines.recv_timeout(left) else {
                panic!(
                    "no line within {wait:?}; got {:#?}",
                    got.iter().map(|(_, v)| v).collect::<Vec<_>>()
                );
            };
            let stop = done(&v);
            got.push((at, v));
            if stop {
                return got;
            }
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The other machine's whole stream, as its own spex prints it: (project, pos) in order.
fn remote_stream(other: &World) -> Vec<(String, u64)> {
    other
        .ok(
            &other.repo,
            &["events", "--json", "--all-projects", "--since", "0"],
        )
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| {
            (
                v["project"].as_str().unwrap().to_owned(),
                v["pos"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Every live process under the sshd listener (the connections, their sessions and the
/// commands they run), with its command line.
fn tree(sshd: &Sshd) -> Vec<(i32, String)> {
    let Some(root) = sshd.pid() else {
        return Vec::new();
    };
    let mut procs: Vec<(i32, i32, String)> = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let mut f = rest.split(' ');
        let (state, ppid) = (
            f.next().unwrap_or("Z"),
            f.next().and_then(|p| p.parse().ok()),
        );
        // A killed process stays a zombie until it is reaped: no longer a connection.
        if state == "Z" {
            continue;
        }
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        procs.push((pid, ppid.unwrap_or(0), cmd));
    }
    let mut under = vec![root.cast_signed()];
    let mut out = Vec::new();
    while let Some(p) = under.pop() {
        for (pid, ppid, cmd) in &procs {
            if *ppid == p {
                under.push(*pid);
                out.push((*pid, cmd.clone()));
            }
        }
    }
    out
}

/// Kills every process under the listener at once (SIGKILL): the connection dies as a cut
/// network or a crashed server would end it. Whether a connection was up to be cut (one
/// being made again is waited for, a little).
fn cut(sshd: &Sshd) -> bool {
    let end = Instant::now() + Duration::from_secs(2);
    let mut procs = tree(sshd);
    while procs.is_empty() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(5));
        procs = tree(sshd);
    }
    for (pid, _) in &procs {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    !procs.is_empty()
}

/// A small deterministic generator (the seed is printed, so a failing run can be replayed).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

#[test]
fn remote_events_arrive_once_and_in_order_across_killed_connections() {
    let local = World::new();
    let other = World::new();
    let sshd = Sshd::start(&other);
    sshd.ok(&local, &["remote", "add", "other", Sshd::ALIAS]);
    let session = "aaaaaaaa-1111-4111-8111-0000000000a1";
    hook(&other, "SessionStart", "SessionStart.startup", session);
    let f = Follower::start(&sshd, &local);
    f.until(WAIT, |v| {
        v["session"] == session && v["kind"] == "session.started"
    });
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let seed = now.as_secs() ^ u64::from(now.subsec_nanos()) << 20;
    eprintln!("seed {seed}");
    let mut rng = Lcg(seed);
    let mut kills = 0;
    for run in 0..20 {
        // The follower is connected (its remote `spex events --follow` runs) before the cut.
        let end = Instant::now() + WAIT;
        while !tree(&sshd).iter().any(|(_, cmd)| cmd.contains("--follow")) {
            assert!(Instant::now() < end, "the follower never reconnected");
            std::thread::sleep(Duration::from_millis(10));
        }
        // The remote session changes state while the connection is cut at a random moment.
        let delay = Duration::from_millis(rng.below(400));
        let cut = std::thread::scope(|scope| {
            let cutter = scope.spawn(|| {
                std::thread::sleep(delay);
                cut(&sshd)
            });
            turn(&other, session);
            cutter.join().unwrap()
        });
        kills += usize::from(cut);
        // Every event of this run arrives, through the reconnection.
        f.until(WAIT, |v| {
            v["session"] == session && v["kind"] == "turn.completed"
        });
        eprintln!("run {run}: cut after {delay:?}");
    }
    assert_eq!(
        kills, 20,
        "the connection was up to be cut in only {kills} of 20 runs"
    );
    let want = remote_stream(&other);
    // What the follower printed, from its start (the journal from the beginning, read again).
    let all = sshd.ok(&local, &["events", "--all-hosts", "--json", "--since", "0"]);
    let got: Vec<(String, u64)> = all
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["host"] == "other" && v["remote_pos"].is_u64())
        .map(|v| {
            (
                v["project"].as_str().unwrap().to_owned(),
                v["remote_pos"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, want, "every remote event once, in order");
    // Each remote session's events in its own order too.
    let mut per: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for l in all
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
    {
        if let (Some(s), Some(seq)) = (l["session"].as_str(), l["seq"].as_u64()) {
            per.entry(s.to_owned()).or_default().push(seq);
        }
    }
    let seqs = &per[session];
    assert_eq!(seqs, &(1..=seqs.len() as u64).collect::<Vec<_>>());
    assert_eq!(seqs.len(), other.events(session).len());
    // With no follower running, a plain `--all-hosts` first asks the host for what its journal
    // lacks: the turn that happened meanwhile, after the last cursor printed.
    let cursor = all
        .lines()
        .last()
        .and_then(|l| serde_json::from_str::<Value>(l).ok())
        .and_then(|v| v["cursor"].as_str().map(str::to_owned))
        .unwrap();
    drop(f);
    turn(&other, session);
    let more = sshd.ok(
        &local,
        &["events", "--all-hosts", "--json", "--since", &cursor],
    );
    let kinds: Vec<String> = more
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["session"] == session)
        .map(|v| v["kind"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        kinds,
        [
            "turn.started",
            "tool.started",
            "tool.completed",
            "turn.completed"
        ],
        "{more}"
    );
}

#[test]
fn a_stopped_sshd_shows_the_host_unreachable_within_5_s_and_its_sessions_stale() {
    let local = World::new();
    let other = World::new();
    let mut sshd = Sshd::start(&other);
    sshd.ok(&local, &["remote", "add", "other", Sshd::ALIAS]);
    let session = "bbbbbbbb-2222-4222-8222-0000000000b2";
    hook(&other, "SessionStart", "SessionStart.startup", session);
    hook(&other, "UserPromptSubmit", "UserPromptSubmit", session);
    let f = Follower::start(&sshd, &local);
    f.until(WAIT, |v| {
        v["session"] == session && v["kind"] == "turn.started"
    });
    let stopped = Instant::now();
    sshd.stop();
    let lines = f.until(WAIT, |v| v["kind"] == "host.unreachable");
    let (at, line) = lines.last().unwrap();
    let took = at.duration_since(stopped);
    eprintln!("unreachable after {took:?}: {line}");
    assert!(took <= Duration::from_secs(5), "took {took:?}");
    assert_eq!(line["host"], "other");
    assert!(
        line["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{line}"
    );
    assert!(line["since"].is_string(), "{line}");
    assert_eq!(line["stale"], 1, "{line}");
    // The session keeps its last known state (never dropped, never live) in the store's view
    // of the host, which the board reads.
    // (The journal is written first, then the state beside it.)
    let file = local.spex_home.join("remotes/other/state.json");
    let end = Instant::now() + Duration::from_secs(2);
    let state: Value = loop {
        let state: Value = serde_json::from_str(&read(&file)).unwrap();
        if state["reach"] == "unreachable" || Instant::now() > end {
            break state;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(state["reach"], "unreachable", "{state}");
    let known: Vec<&Value> = state["sessions"].as_object().unwrap().values().collect();
    assert_eq!(known.len(), 1, "{state}");
    assert_eq!(known[0]["session"], session);
    assert_eq!(known[0]["status"], "working", "{state}");
}

/// A hung machine (its sshd and every connection stopped, sockets open, nothing answering) is
/// shown unreachable within 10 s: ssh's keepalives end the connection.
#[test]
fn a_hung_host_is_shown_unreachable_within_10_s() {
    let local = World::new();
    let other = World::new();
    let sshd = Sshd::start(&other);
    sshd.ok(&local, &["remote", "add", "other", Sshd::ALIAS]);
    let session = "dddddddd-4444-4444-8444-0000000000d4";
    hook(&other, "SessionStart", "SessionStart.startup", session);
    let f = Follower::start(&sshd, &local);
    f.until(WAIT, |v| {
        v["session"] == session && v["kind"] == "session.started"
    });
    let hung = Instant::now();
    sshd.hang();
    let lines = f.until(WAIT, |v| v["kind"] == "host.unreachable");
    let (at, line) = lines.last().unwrap();
    let took = at.duration_since(hung);
    eprintln!("unreachable after {took:?}: {line}");
    assert!(took <= Duration::from_secs(10), "took {took:?}");
    assert_eq!(line["stale"], 1, "{line}");
    sshd.resume();
}

/// A remote session's attention is announced by this machine's sender once (its session named
/// `host:handle`), and not again after the sender restarts.
#[test]
fn a_remote_attention_is_announced_once_by_this_machines_sender() {
    let local = World::new();
    let other = World::new();
    let sshd = Sshd::start(&other);
    sshd.ok(&local, &["remote", "add", "other", Sshd::ALIAS]);
    let out = local.home.join("notified.jsonl");
    let cfg = serde_json::json!({
        "harnesses": ["claude"],
        "notify": {
            "dwell": "0s",
            "command": ["/bin/sh", "-c", format!("cat >> '{0}' && echo >> '{0}'", out.display())],
        },
    });
    crate::support::world::write(&local.repo.join("spex.jsonc"), format!("{cfg}\n"));
    let session = "cccccccc-3333-4333-8333-0000000000c3";
    let start = |tag: &str| {
        let child = sshd
            .cmd(&local, &["notify", "--watch"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(local.home.join(format!("notify-{tag}.log"))).unwrap())
            .spawn()
            .unwrap();
        // Up once the host's follower has taken the host in (reachable).
        let state = local.spex_home.join("remotes/other/state.json");
        let end = Instant::now() + WAIT;
        while !crate::support::world::read_or_empty(&state).contains("\"reachable\"") {
            assert!(Instant::now() < end, "the host was never followed");
            std::thread::sleep(Duration::from_millis(50));
        }
        child
    };
    let mut sender = start("1");
    hook(&other, "SessionStart", "SessionStart.startup", session);
    hook(&other, "UserPromptSubmit", "UserPromptSubmit", session);
    hook(
        &other,
        "PermissionRequest",
        "PermissionRequest.Write",
        session,
    );
    let end = Instant::now() + WAIT;
    let sent = loop {
        let text = crate::support::world::read_or_empty(&out);
        let lines: Vec<Value> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if !lines.is_empty() {
            break lines;
        }
        assert!(Instant::now() < end, "nothing was announced");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(sent[0]["event"], "needs_attention", "{sent:#?}");
    assert_eq!(sent[0]["session"], session);
    assert!(
        sent[0]["handle"].as_str().unwrap().starts_with("other:"),
        "{sent:#?}"
    );
    assert_eq!(sent[0]["attention"], "a1");
    // A restarted sender sends nothing again.
    let _ = sender.kill();
    let _ = sender.wait();
    let mut sender = start("2");
    std::thread::sleep(Duration::from_secs(3));
    let _ = sender.kill();
    let _ = sender.wait();
    let text = crate::support::world::read_or_empty(&out);
    assert_eq!(
        text.lines().filter(|l| !l.trim().is_empty()).count(),
        1,
        "{text}"
    );
}

/// A remote attention's notification carries answer links that this machine's board resolves
/// to the remote session: a GET shows the remote question and its choices, a POST runs `spex
/// answer` on the other machine. Here the remote session is one no spex hosts and no hook waits
/// on (a hand-fed hook, not a harness: the hook waits only under the harness's own process), so
/// the spex there refuses and the link says the session did not take it, and stays unanswered.
/// (A confirmed answer through a real Claude there: `remote_answers.rs`.)
#[test]
fn a_remote_attentions_answer_link_reaches_the_remote_session() {
    let local = World::new();
    let other = World::new();
    let sshd = Sshd::start(&other);
    sshd.ok(&local, &["remote", "add", "other", Sshd::ALIAS]);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = local.home.join("notified.jsonl");
    let cfg = serde_json::json!({
        "harnesses": ["claude"],
        "notify": {
            "dwell": "0s",
            "publicUrl": format!("http://127.0.0.1:{port}"),
            "command": ["/bin/sh", "-c", format!("cat >> '{0}' && echo >> '{0}'", out.display())],
        },
    });
    crate::support::world::write(&local.repo.join("spex.jsonc"), format!("{cfg}\n"));
    let spawn = |args: &[&str]| {
        sshd.cmd(&local, args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let listen = format!("127.0.0.1:{port}");
    let mut board = spawn(&["board", "--listen", &listen]);
    let mut sender = spawn(&["notify", "--watch"]);
    let state = local.spex_home.join("remotes/other/state.json");
    let end = Instant::now() + WAIT;
    while !crate::support::world::read_or_empty(&state).contains("\"reachable\"")
        || std::net::TcpStream::connect(("127.0.0.1", port)).is_err()
    {
        assert!(Instant::now() < end, "the host was never followed");
        std::thread::sleep(Duration::from_millis(50));
    }
    let session = "ffffffff-6666-4666-8666-0000000000f6";
    hook(&other, "SessionStart", "SessionStart.startup", session);
    hook(&other, "UserPromptSubmit", "UserPromptSubmit", session);
    std::thread::scope(|scope| {
        // The permission hook waits for an answer (away mode).
        let path = Path::new(payloads::PAYLOADS).join("claude/PermissionRequest.Write.json");
        let mut v = payloads::localize(
            serde_json::from_str(&read(&path)).unwrap(),
            &other.repo,
            &other.home,
        );
        v["session_id"] = session.into();
        let mut cmd = other.cmd(&other.repo, &["dispatch", "claude", "PermissionRequest"]);
        let input = serde_json::to_vec(&v).unwrap();
        let waiting = scope.spawn(move || crate::support::world::feed(&mut cmd, &input));
        let end = Instant::now() + WAIT;
        let sent: Value = loop {
            let text = crate::support::world::read_or_empty(&out);
            if let Some(l) = text.lines().find(|l| !l.trim().is_empty()) {
                break serde_json::from_str(l).unwrap();
            }
            assert!(Instant::now() < end, "nothing was announced");
            std::thread::sleep(Duration::from_millis(50));
        };
        let link = sent["links"]
            .as_array()
            .and_then(|a| a.iter().find(|l| l["choice"] == "allow"))
            .unwrap_or_else(|| panic!("no allow link: {sent:#}"));
        let url = link["url"].as_str().unwrap();
        let path = url.split_once(&format!(":{port}")).unwrap().1;
        // As the phone's action button sends it: a POST, no Origin.
        let body = "choice=allow";
        let req = format!(
            "POST {path} HTTP/1.1\r\nConnection: close\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        std::io::Write::write_all(&mut s, req.as_bytes()).unwrap();
        let mut resp = String::new();
        let _ = std::io::Read::read_to_string(&mut s, &mut resp);
        assert!(resp.starts_with("HTTP/1.1 409"), "{resp}");
        assert!(resp.contains("did not take the answer"), "{resp}");
        // The GET shows the remote attention's question and choices (the link is not spent).
        let req =
            format!("GET {path} HTTP/1.1\r\nConnection: close\r\nHost: 127.0.0.1:{port}\r\n\r\n");
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        std::io::Write::write_all(&mut s, req.as_bytes()).unwrap();
        let mut page = String::new();
        let _ = std::io::Read::read_to_string(&mut s, &mut page);
        assert!(page.starts_with("HTTP/1.1 200"), "{page}");
        assert!(page.contains("hello.txt"), "{page}");
        let _ = waiting.join().unwrap();
    });
    for c in [&mut board, &mut sender] {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// The pids of the `ssh` processes `pid` started.
fn ssh_children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: the command name may hold spaces, the rest does not.
        let Some((head, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let ppid = rest.split(' ').nth(1).and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) && head.ends_with("(ssh") {
            out.push(child);
        }
    }
    out
}

#[test]
fn a_remote_added_or_removed_while_the_watcher_runs_is_followed_or_dropped() {
    let local = World::new();
    let other = World::new();
    let sshd = Sshd::start(&other);
    let mut watcher = sshd
        .cmd(&local, &["watch"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spex watch starts");
    let pid = watcher.id();
    let journal = local.spex_home.join("remotes/other/stream.jsonl");
    let session = "5a1c0de0-0000-4000-8000-00000000ad01";
    // Added after the watcher started (no config file existed then): followed without a
    // restart, the remote's events taken in.
    std::thread::sleep(Duration::from_millis(300));
    sshd.ok(&local, &["remote", "add", "other", Sshd::ALIAS]);
    turn(&other, session);
    let taken = || {
        crate::support::world::read_or_empty(&journal)
            .lines()
            .filter(|l| l.contains(session))
            .count()
    };
    let end = Instant::now() + WAIT;
    while taken() == 0 {
        assert!(Instant::now() < end, "not followed");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!ssh_children(pid).is_empty(), "no follower's ssh runs");

    // Removed: its follower ends (its ssh with it), and later events are not taken in.
    sshd.ok(&local, &["remote", "remove", "other"]);
    let end = Instant::now() + Duration::from_secs(10);
    while !ssh_children(pid).is_empty() {
        assert!(Instant::now() < end, "the removed remote is still followed");
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = crate::support::world::read_or_empty(&journal);
    turn(&other, session);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(crate::support::world::read_or_empty(&journal), before);

    // Added again: followed again, from where it left off.
    sshd.ok(&local, &["remote", "add", "other", Sshd::ALIAS]);
    let had = taken();
    let end = Instant::now() + WAIT;
    while taken() <= had {
        assert!(Instant::now() < end, "not followed again");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(watcher.try_wait().unwrap().is_none(), "the watcher ended");
    let _ = watcher.kill();
    let _ = watcher.wait();
}

/// `spex watch` in `local`, its log in `log`.
fn watcher(sshd: &Sshd, local: &World, log: &Path) -> Child {
    sshd.cmd(local, &["watch"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("spex watch starts")
}

/// Waits until `what` holds of the host's journal lines.
fn journal_until(journal: &Path, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let end = Instant::now() + WAIT;
    loop {
        let lines: Vec<Value> = crate::support::world::read_or_empty(journal)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        if done(&lines) {
            return lines;
        }
        assert!(Instant::now() < end, "{what}: {lines:#?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_remote_stream_rotated_past_the_cursor_is_said_resynchronized_and_followed_on() {
    let local = World::new();
    let other = World::new();
    let sshd = Sshd::start(&other);
    // The other machine's stream keeps little: a few turns rotate it past any cursor.
    let keys = sshd.dir.path().join("authorized_keys");
    let line = read(&keys);
    crate::support::world::write(
        &keys,
        format!("environment=\"SPEX_STREAM_BYTES=3000\",{line}"),
    );
    sshd.ok(&local, &["remote", "add", "other", Sshd::ALIAS]);
    let journal = local.spex_home.join("remotes/other/stream.jsonl");
    let first = "5a1c0de0-0000-4000-8000-00000000ca01";
    let later = "5a1c0de0-0000-4000-8000-00000000ca02";
    let log = local.dir.path().join("watch.log");
    let mut w = watcher(&sshd, &local, &log);
    turn(&other, first);
    journal_until(&journal, "the first turn taken in", |l| {
        l.iter()
            .any(|v| v["session"] == first && v["kind"] == "turn.completed")
    });
    let _ = w.kill();
    let _ = w.wait();

    // While no one follows: many turns, each taken into the other machine's (small) stream,
    // and a session that starts and asks for permission, all of whose events rotate away.
    let take_in = || {
        let _ = other
            .cmd(&other.repo, &["events", "--json", "--all-projects"])
            .env("SPEX_STREAM_BYTES", "3000")
            .output();
    };
    hook(&other, "SessionStart", "SessionStart.startup", later);
    hook(&other, "UserPromptSubmit", "UserPromptSubmit", later);
    hook(
        &other,
        "PermissionRequest",
        "PermissionRequest.Write",
        later,
    );
    take_in();
    for _ in 0..12 {
        turn(&other, first);
        take_in();
    }
    let there: Value =
        serde_json::from_str::<Value>(&other.ok(&other.repo, &["show", later, "--json"])).unwrap()
            ["session"]
            .clone();
    assert!(there["attention"].is_object(), "{there}");

    // The follower says so, puts the sessions as they are there, and goes on.
    let mut w = watcher(&sshd, &local, &log);
    let lines = journal_until(&journal, "a stream.gap line", |l| {
        l.iter().any(|v| v["kind"] == "stream.gap")
    });
    let gap = lines.iter().find(|v| v["kind"] == "stream.gap").unwrap();
    assert!(
        gap["why"]
            .as_str()
            .unwrap()
            .contains("older than the events kept"),
        "{gap}"
    );
    let state: Value =
        serde_json::from_str(&read(&local.spex_home.join("remotes/other/state.json"))).unwrap();
    let known = state["sessions"]
        .as_object()
        .unwrap()
        .values()
        .find(|k| k["session"] == later)
        .unwrap_or_else(|| panic!("{state:#}"));
    assert_eq!(known["attention"], "permission", "{known}");
    assert_eq!(known["attention_id"], there["attention"]["id"], "{known}");
    assert_eq!(known["status"], there["status"], "{known}");
    let said = read(&log);
    assert!(said.contains("rotated past"), "{said}");
    // Followed on from there: a new turn arrives.
    std::thread::sleep(Duration::from_millis(500));
    turn(&other, first);
    take_in();
    journal_until(&journal, "a turn after the gap", |l| {
        let at = l.iter().position(|v| v["kind"] == "stream.gap").unwrap();
        l[at..]
            .iter()
            .any(|v| v["session"] == first && v["kind"] == "turn.completed")
    });
    // Said once, not once per reconnection.
    let gaps = crate::support::world::read_or_empty(&journal)
        .lines()
        .filter(|l| l.contains("\"stream.gap\""))
        .count();
    assert_eq!(gaps, 1);
    let _ = w.kill();
    let _ = w.wait();
}
