//! The PTY host (`spex host`) with an ordinary program instead of a harness: its socket's
//! permissions, the versioned protocol (ping, snapshot, inject, resize, attach by several
//! clients), and `stop` escalating to SIGKILL of a program that ignores SIGTERM. No harness
//! binary is needed; the host reads the screen through the Claude adapter, which finds nothing
//! to say about a shell loop.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::world::{World, pretty, read_or_empty};

const ID: &str = "host-test-1";

/// One request line, one response line.
fn call(socket: &Path, request: &str) -> Value {
    let mut s = UnixStream::connect(socket).expect("the host answers");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    s.write_all(b"\n").unwrap();
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
}

fn screen(socket: &Path) -> String {
    let r = call(socket, r#"{"v":1,"op":"snapshot"}"#);
    crate::support::world::screen_text(&r["snapshot"]["lines"])
}

fn wait_screen(socket: &Path, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = screen(socket);
        if s.contains(needle) || Instant::now() > deadline {
            return s;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An attached client: the response line, then raw bytes.
struct Attached {
    stream: UnixStream,
    seen: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

fn attach(socket: &Path) -> Attached {
    let mut stream = UnixStream::connect(socket).unwrap();
    stream
        .write_all(b"{\"v\":1,\"op\":\"attach\",\"rows\":0,\"cols\":0}\n")
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let answer: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(answer["ok"], true, "{line}");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = seen.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    Attached { stream, seen }
}

impl Attached {
    fn wait_for(&self, needle: &str) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if String::from_utf8_lossy(&self.seen.lock().unwrap()).contains(needle) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

/// A record for `ID`, as a harness's first hook makes it.
fn record(w: &World) {
    let start = json!({ "session_id": ID, "cwd": w.repo, "hook_event_name": "SessionStart" });
    assert!(
        w.dispatch(&w.repo, "claude", "SessionStart", &start)
            .status
            .success()
    );
}

/// The host of `ID` running `script`, once it serves its socket.
/// A host process a test started; killed on drop if it still runs, so a failed test leaves no
/// host (nor, through its closed terminal, its program) behind.
struct Host(Child);

impl Drop for Host {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn host(w: &World, socket: &Path, script: &str) -> Host {
    host_with(w, socket, script, &[])
}

/// [`host`] with `extra` options for `spex host` (before the program).
fn host_with(w: &World, socket: &Path, script: &str, extra: &[&str]) -> Host {
    let log = std::fs::File::create(w.dir.path().join("host.log")).unwrap();
    let repo = w.repo.to_str().unwrap().to_owned();
    let sock = socket.to_str().unwrap().to_owned();
    let mut args = vec![
        "host",
        "--session",
        ID,
        "--harness",
        "claude",
        "--tree",
        &repo,
        "--socket",
        &sock,
        "--rows",
        "24",
        "--cols",
        "80",
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    let child = w
        .cmd(&w.repo, &args)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while UnixStream::connect(socket).is_err() {
        assert!(
            Instant::now() < deadline,
            "the host never served its socket"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Host(child)
}

#[test]
fn the_host_serves_a_private_versioned_socket_and_kills_what_ignores_term() {
    let w = World::new();
    let run: PathBuf = w.dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    record(&w);
    // Any command that needs the runtime folder makes it private first.
    let out = w
        .cmd(&w.repo, &["snapshot", ID])
        .env("XDG_RUNTIME_DIR", &run)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // The record is a session a hook reported, which no spex host runs: spex says so.
    assert!(err.contains("runs in a terminal of its own"), "{err}");
    let dir = run.join("spex");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    let socket = dir.join(format!("{ID}.sock"));
    let mut child = host(
        &w,
        &socket,
        "trap '' TERM; echo ready; while read -r l; do echo \"got:$l\"; done",
    );
    assert_eq!(mode(&socket), 0o600);

    let pong = call(&socket, r#"{"v":1,"op":"ping"}"#);
    assert_eq!(pong["ok"], true, "{pong}");
    assert!(pong["host_pid"].as_u64().is_some() && pong["child_pid"].as_u64().is_some());
    let newer = call(&socket, r#"{"v":2,"op":"ping"}"#);
    assert_eq!(newer["ok"], false);
    assert!(
        newer["error"]
            .as_str()
            .unwrap()
            .contains("protocol version 2 is not served"),
        "{newer}"
    );
    let bad = call(&socket, r#"{"v":1,"op":"dance"}"#);
    assert_eq!(bad["ok"], false);
    assert!(
        bad["error"].as_str().unwrap().contains("bad request"),
        "{bad}"
    );

    assert!(wait_screen(&socket, "ready").contains("ready"));
    // Two terminals attached at once both see what the program writes; what one types
    // reaches the program.
    let mut a = attach(&socket);
    let b = attach(&socket);
    assert!(a.wait_for("ready") && b.wait_for("ready"), "no redraw");
    a.stream.write_all(b"typed-by-a\r").unwrap();
    assert!(a.wait_for("got:typed-by-a") && b.wait_for("got:typed-by-a"));
    let injected = call(
        &socket,
        r#"{"v":1,"op":"inject","text":"pasted","submit":true}"#,
    );
    assert_eq!(injected["ok"], true, "{injected}");
    // Submitted: the program read the line (the echo alone would show "pasted").
    let shown = wait_screen(&socket, "got:pasted");
    assert!(shown.contains("got:pasted"), "{shown}");
    assert!(b.wait_for("pasted"));
    let resized = call(&socket, r#"{"v":1,"op":"resize","rows":30,"cols":100}"#);
    assert_eq!(resized["ok"], true);
    let snap = call(&socket, r#"{"v":1,"op":"snapshot"}"#)["snapshot"].clone();
    assert_eq!(
        (snap["rows"].as_u64(), snap["cols"].as_u64()),
        (Some(30), Some(100))
    );
    for key in ["cursor", "title", "lines"] {
        assert!(snap.get(key).is_some(), "{snap}");
    }

    // SIGTERM is ignored: SIGKILL of the group follows the grace period.
    let asked = Instant::now();
    let stopped = call(&socket, r#"{"v":1,"op":"stop","grace_ms":300}"#);
    assert_eq!(stopped["ok"], true, "{stopped}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let record = loop {
        let r = w.record(ID);
        if r["status"] == "exited" || Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let log = || read_or_empty(&w.dir.path().join("host.log"));
    assert_eq!(record["status"], "exited", "{}\n{}", pretty(&record), log());
    assert_eq!(record["exit_status"]["signal"], 9, "{}", pretty(&record));
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the host outlived its program");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}\n{}", log());
    assert!(!socket.exists(), "the socket was left behind");
}

#[test]
fn a_runtime_folder_others_can_enter_is_refused() {
    let w = World::new();
    let run = w.dir.path().join("run");
    std::fs::create_dir_all(run.join("spex")).unwrap();
    std::fs::set_permissions(run.join("spex"), std::fs::Permissions::from_mode(0o755)).unwrap();
    record(&w);
    let out = w
        .cmd(&w.repo, &["snapshot", ID])
        .env("XDG_RUNTIME_DIR", &run)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("is not a private folder of this user"),
        "{err}"
    );
}

/// A recording from the start holds the program's first byte: a program that draws at once
/// (before the host has set anything else up) is in `output.raw`, and the cassette checks
/// clean. The recorder used to attach after the spawn and lose such output while its frames
/// showed it.
#[test]
fn a_recording_from_the_start_holds_the_first_byte() {
    let w = World::new();
    let run: PathBuf = w.dir.path().join("run");
    std::fs::create_dir_all(run.join("spex")).unwrap();
    std::fs::set_permissions(run.join("spex"), std::fs::Permissions::from_mode(0o700)).unwrap();
    record(&w);
    let socket = run.join("spex").join(format!("{ID}.sock"));
    let cassette = w.dir.path().join("cassette");
    let _host = host_with(
        &w,
        &socket,
        "printf 'first-bytes drawn at once'; exec sleep 60",
        &["--record", cassette.to_str().unwrap()],
    );
    assert!(wait_screen(&socket, "first-bytes").contains("first-bytes"));
    let stopped = call(&socket, r#"{"v":1,"op":"record","dir":null}"#);
    assert_eq!(stopped["ok"], true, "{stopped}");
    let raw = std::fs::read(cassette.join("output.raw")).unwrap();
    assert!(
        String::from_utf8_lossy(&raw).starts_with("first-bytes drawn at once"),
        "output.raw: {:?}\n{}",
        String::from_utf8_lossy(&raw),
        read_or_empty(&w.dir.path().join("host.log"))
    );
    let checked = w.spex(&w.repo, &["cassette", "check", cassette.to_str().unwrap()]);
    assert!(checked.status.success(), "{checked:?}");
    let manifest: Value =
        serde_json::from_str(&read_or_empty(&cassette.join("manifest.json"))).unwrap();
    assert_eq!(manifest["capture"], "full", "{manifest}");
}

/// `spex snapshot --scrollback N`: the host keeps the rows that scrolled off its screen (the
/// last 1,000) and gives the last N above the screen; without the option, the screen alone.
#[test]
fn snapshot_scrollback_gives_what_scrolled_off_bounded() {
    let w = World::new();
    let run: PathBuf = w.dir.path().join("run");
    std::fs::create_dir_all(run.join("spex")).unwrap();
    std::fs::set_permissions(run.join("spex"), std::fs::Permissions::from_mode(0o700)).unwrap();
    record(&w);
    let socket = run.join("spex").join(format!("{ID}.sock"));
    let _host = host(
        &w,
        &socket,
        "i=1; while [ $i -le 1500 ]; do echo \"row $i\"; i=$((i+1)); done; echo done; exec sleep 60",
    );
    assert!(wait_screen(&socket, "done").contains("done"));
    let snapshot = |extra: &[&str]| -> Value {
        let mut args = vec!["snapshot", ID, "--json"];
        args.extend_from_slice(extra);
        let out = w
            .cmd(&w.repo, &args)
            .env("XDG_RUNTIME_DIR", &run)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // 24 rows: rows 1479..1500, `done` and the cursor's row; 1478 rows scrolled off.
    let plain = snapshot(&[]);
    assert_eq!(plain["lines"][0], "row 1479", "{plain}");
    assert!(plain.get("scrollback").is_none(), "{plain}");
    let some = snapshot(&["--scrollback", "30"]);
    let back: Vec<&str> = some["scrollback"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let want: Vec<String> = (1449..=1478).map(|i| format!("row {i}")).collect();
    assert_eq!(back, want, "{some}");
    assert_eq!(some["lines"], plain["lines"]);
    let all = snapshot(&["--scrollback", "100000"]);
    let kept = all["scrollback"].as_array().unwrap();
    assert_eq!(kept.len(), 1000, "bounded");
    assert_eq!(kept[0], "row 479");
    assert_eq!(kept[999], "row 1478");
    // The text form: what scrolled off, then the screen.
    let out = w
        .cmd(&w.repo, &["snapshot", ID, "--scrollback", "2"])
        .env("XDG_RUNTIME_DIR", &run)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("row 1477\nrow 1478\nrow 1479\n"), "{text}");
}

/// A program whose process group outlives it (a launcher that relaunched the real program as
/// its child, a helper that ignores SIGTERM and SIGHUP and holds the terminal): `stop` ends the
/// whole group, so the session reads exited and nothing of it runs on.
#[test]
fn stop_ends_what_the_program_left_in_its_process_group() {
    let w = World::new();
    let run: PathBuf = w.dir.path().join("run");
    std::fs::create_dir_all(run.join("spex")).unwrap();
    for dir in [&run, &run.join("spex")] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    record(&w);
    let socket = run.join("spex").join(format!("{ID}.sock"));
    // The leader dies of SIGTERM; its child ignores it (and the SIGHUP of its leader's end)
    // and keeps the terminal open.
    let _host = host(
        &w,
        &socket,
        "sh -c \"trap '' TERM HUP; echo leftover \\$\\$; exec sleep 600\" & wait",
    );
    let shown = wait_screen(&socket, "leftover ");
    let pid: u32 = shown
        .split("leftover ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid on screen: {shown}"));
    let _reap = Reap(pid);
    // As `spex stop` does: the host may close the socket before it answers.
    let mut s = UnixStream::connect(&socket).unwrap();
    s.write_all(b"{\"v\":1,\"op\":\"stop\",\"grace_ms\":300}\n")
        .unwrap();
    let log = || read_or_empty(&w.dir.path().join("host.log"));
    let running = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            !s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while (running(pid) || w.record(ID)["status"] != "exited") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !running(pid),
        "the group's process {pid} survived stop\n{}",
        log()
    );
    let record = w.record(ID);
    assert_eq!(record["status"], "exited", "{}\n{}", pretty(&record), log());
}

/// SIGKILL to a process on drop, so a failed test leaves nothing running.
struct Reap(u32);

impl Drop for Reap {
    fn drop(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(i32::try_from(self.0).unwrap_or(0)) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

/// A recording scrubs what changes from one run to the next and what names the machine: a
/// program whose argv and screen show a UUID (in two cases), a timestamp, its own pid and its
/// host's, a socket path and the home path leaves none of them in any file of the cassette;
/// one id is one placeholder everywhere, and `scrub-report.json` lists each rule with its
/// hits and the volatile fields kept on purpose. The cassette checks clean.
#[test]
fn a_recording_keeps_no_id_time_pid_socket_or_home_path() {
    let w = World::new();
    let run: PathBuf = w.dir.path().join("run");
    std::fs::create_dir_all(run.join("spex")).unwrap();
    std::fs::set_permissions(run.join("spex"), std::fs::Permissions::from_mode(0o700)).unwrap();
    record(&w);
    let socket = run.join("spex").join(format!("{ID}.sock"));
    let cassette = w.dir.path().join("cassette");
    let uuid = "6f1c1e0a-3b2d-4c5e-8f9a-0b1c2d3e4f5a";
    let other = "0b6a2f3c-8d1e-4f5a-9b7c-1d2e3f4a5b6c";
    let home = w.home.to_str().unwrap().to_owned();
    let script = format!(
        "printf 'id={uuid} other={other}\\r\\n'; printf 'ID=%s\\r\\n' {upper}; \
         printf 'at=%s argv-at=2026-11-27T12:34:56.789Z\\r\\n' \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\"; \
         printf 'pid=%s host=%s\\r\\n' $$ $PPID; printf 'sock={sock}\\r\\n'; \
         printf 'home=%s\\r\\n' \"$HOME\"; printf 'done-drawing\\r\\n'; exec sleep 60",
        upper = uuid.to_uppercase(),
        sock = socket.display(),
    );
    let host = host_with(
        &w,
        &socket,
        &script,
        &["--record", cassette.to_str().unwrap()],
    );
    assert!(wait_screen(&socket, "done-drawing").contains("done-drawing"));
    let pids = call(&socket, r#"{"v":1,"op":"ping"}"#);
    let (host_pid, child_pid) = (
        pids["host_pid"].as_u64().unwrap(),
        pids["child_pid"].as_u64().unwrap(),
    );
    assert_eq!(u64::from(host.0.id()), host_pid);
    let stopped = call(&socket, r#"{"v":1,"op":"record","dir":null}"#);
    assert_eq!(stopped["ok"], true, "{stopped}");

    let checked = w.spex(&w.repo, &["cassette", "check", cassette.to_str().unwrap()]);
    assert!(checked.status.success(), "{checked:?}");
    let files: Vec<(String, String)> = std::fs::read_dir(&cassette)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let text = String::from_utf8_lossy(&std::fs::read(e.path()).unwrap()).into_owned();
            (e.file_name().to_string_lossy().into_owned(), text)
        })
        .collect();
    assert_eq!(files.len(), 8, "{files:?}");
    let time = regex::Regex::new(r"\d{2}:\d{2}:\d{2}").unwrap();
    for (name, text) in &files {
        for leak in [
            uuid,
            &uuid.to_uppercase(),
            other,
            home.as_str(),
            socket.to_str().unwrap(),
            ".sock",
        ] {
            assert!(!text.contains(leak), "`{leak}` in {name}:\n{text}");
        }
        assert!(!time.is_match(text), "a time in {name}:\n{text}");
        for pid in [host_pid, child_pid] {
            assert!(
                !text.contains(&format!("={pid}")),
                "pid {pid} in {name}:\n{text}"
            );
        }
    }
    let file = |name: &str| &files.iter().find(|(n, _)| n == name).unwrap().1;
    let raw = file("output.raw");
    // The screen keeps its columns: a placeholder longer than what it replaces is cut to its
    // width (a 3-digit pid reads `$PI`).
    let placeholder = |pid: u64| &"$PID"[..pid.to_string().len().min(4)];
    for shown in [
        "id=$UUID1",
        "other=$UUID2",
        "ID=$UUID1",
        "at=$TIME",
        "argv-at=$TIME",
        &format!("pid={}", placeholder(child_pid)),
        &format!("host={}", placeholder(host_pid)),
        "sock=$SOCKET",
        "home=$HOME",
    ] {
        assert!(raw.contains(shown), "`{shown}` not in output.raw:\n{raw}");
    }
    // The argv shows the same ids as the screen, under the same placeholders.
    let manifest: Value = serde_json::from_str(file("manifest.json")).unwrap();
    let argv = manifest["command"]["argv"].to_string();
    assert!(argv.contains("id=$UUID1 other=$UUID2"), "{argv}");
    assert!(argv.contains("argv-at=$TIME"), "{argv}");
    // The environment: an allowlist of names, values only where safe.
    let env = manifest["command"]["env"].as_object().unwrap();
    assert!(env.keys().all(|k| spex_env_allowlisted(k)), "{env:?}");
    assert!(manifest.get("env_names").is_none());
    assert_eq!(manifest["terminal"]["model"], "vt100", "{manifest}");
    assert_eq!(manifest["clock"]["source"], "monotonic", "{manifest}");
    assert_eq!(manifest["replay_default"], "real-time", "{manifest}");
    let report: Value = serde_json::from_str(file("scrub-report.json")).unwrap();
    let hits = |rule: &str| -> u64 {
        report["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["rule"] == rule)
            .and_then(|r| r["hits"].as_u64())
            .unwrap_or_else(|| panic!("no rule `{rule}`: {report}"))
    };
    for rule in [
        "uuid",
        "rfc3339 timestamp",
        "process id",
        "socket path",
        "home path",
    ] {
        assert!(hits(rule) > 0, "{rule}: {report}");
    }
    assert_eq!(
        report["distinct_ids"],
        json!([{"rule": "uuid", "count": 2}]),
        "{report}"
    );
    let kept: Vec<&str> = report["kept"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|k| k["field"].as_str())
        .collect();
    assert!(kept.contains(&"manifest.id"), "{report}");
}

/// Whether a recording may name environment variable `name` (its allowlist).
fn spex_env_allowlisted(name: &str) -> bool {
    [
        "TERM",
        "COLORTERM",
        "TERM_PROGRAM",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "LC_MESSAGES",
        "TZ",
        "NO_COLOR",
        "FORCE_COLOR",
        "CLICOLOR",
        "CI",
        "COLUMNS",
        "LINES",
        "SHELL",
        "EDITOR",
        "VISUAL",
        "PAGER",
        "HOME",
        "PATH",
        "TMPDIR",
        "XDG_RUNTIME_DIR",
    ]
    .contains(&name)
}
