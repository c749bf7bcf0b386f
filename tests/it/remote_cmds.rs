//! Commands on another machine's session (`host:handle`) against a real OpenSSH server and the
//! REAL Claude Code on "the other machine" (a separate spex world the test key logs in to, see
//! support/sshd.rs), with the fake Messages API: `launch --remote`, `deliver`, `approve`,
//! `diff`, `show`, `wait`, `stop` confirmed by what the harness did there, their output, exit
//! codes and `--json` the same as the same command run there; `attach` over `ssh -t` from a PTY
//! the test owns, left with the detach key; `sessions --all-hosts`. Fails, never skips.

use std::ffi::OsString;
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::runtime::{FakeApi, claude_world, spex_cmd};
use crate::support::claude_home::SeedOptions;
use crate::support::fake_anthropic::FakeAnthropic;
use crate::support::peers::peers_path;
use crate::support::sshd::Sshd;
use crate::support::term::Term;
use crate::support::world::{World, git, pretty, read, spex_bin, write};

/// "The other machine" with a real Claude there, reached as remote `dev` from `local`.
pub(crate) struct Rig {
    pub(crate) other: World,
    pub(crate) fake: FakeAnthropic,
    pub(crate) sshd: Sshd,
    pub(crate) local: World,
}

/// Adds `extra` to what the test key's logins get, before the rig's own (sshd keeps the first
/// of two `environment=` options for one variable, so a `PATH` here wins): the fake API's
/// address and key, and a `PATH` with the pinned harnesses.
fn login_env(sshd: &Sshd, extra: &[(&str, OsString)]) {
    let file = sshd.dir.path().join("authorized_keys");
    let line = read(&file);
    let more: String = extra
        .iter()
        .map(|(k, v)| format!("environment=\"{k}={}\",", v.to_string_lossy()))
        .collect::<Vec<_>>()
        .concat();
    write(&file, format!("{more}{line}"));
}

impl Rig {
    pub(crate) fn start() -> Rig {
        let (other, fake) = claude_world(SeedOptions::default());
        write(&other.repo.join("notes.txt"), "hello world\n");
        git(&other.repo, &["add", "-A"]);
        git(&other.repo, &["commit", "-q", "-m", "base"]);
        let sshd = Sshd::start(&other);
        let spex_dir = spex_bin().parent().unwrap().to_owned();
        let mut path = OsString::from(spex_dir);
        path.push(":");
        path.push(peers_path());
        let mut extra = fake.env();
        extra.push(("PATH", path));
        extra.push(("XDG_RUNTIME_DIR", other.dir.path().join("run").into()));
        login_env(&sshd, &extra);
        let local = World::new();
        sshd.ok(&local, &["remote", "add", "dev", Sshd::ALIAS]);
        Rig {
            other,
            fake,
            sshd,
            local,
        }
    }

    /// `spex args` here (a session there named `dev:...`).
    pub(crate) fn here(&self, args: &[&str]) -> Output {
        self.sshd.spex(&self.local, args)
    }

    /// `spex args` run on the other machine itself, from its home as a login would.
    pub(crate) fn there(&self, args: &[&str]) -> Output {
        let mut c = spex_cmd(&self.other, &self.fake, args);
        c.current_dir(&self.other.home);
        c.output().unwrap()
    }

    pub(crate) fn json_here(&self, args: &[&str]) -> Value {
        let out = self.here(args);
        assert!(out.status.success(), "{args:?}: {}", self.said(&out));
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", self.said(&out)))
    }

    pub(crate) fn said(&self, out: &Output) -> String {
        format!(
            "exit {:?}\nstdout:\n{}\nstderr:\n{}\nsshd:\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.sshd.log()
        )
    }

    /// The remote session's record as `show dev:ID --json` gives it here.
    pub(crate) fn record(&self, handle: &str) -> Value {
        self.json_here(&["show", &format!("dev:{handle}"), "--json"])["session"].clone()
    }

    /// Polls the record (here, over SSH) until `pred` holds.
    pub(crate) fn until(&self, handle: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_mins(1);
        loop {
            let rec = self.record(handle);
            if pred(&rec) {
                return rec;
            }
            assert!(Instant::now() < deadline, "never {what}:\n{}", pretty(&rec));
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Launches a Claude session there (`launch --remote`), detached: its handle and the
    /// harness's pid.
    pub(crate) fn launch(&self) -> (String, u64) {
        let repo = self.other.repo.display().to_string();
        let l = self.json_here(&[
            "launch",
            "--remote",
            "dev",
            "--repo",
            &repo,
            "--harness",
            "claude",
            "--detach",
            "--json",
        ]);
        let handle = l["session"]["handle"].as_str().unwrap().to_owned();
        // Started there: the other machine's store holds it, this one's holds nothing.
        assert_eq!(self.other.session_ids().len(), 1, "{}", pretty(&l));
        assert!(self.local.session_ids().is_empty());
        (
            handle,
            l["session"]["child_pid"]
                .as_u64()
                .expect("the harness's pid"),
        )
    }
}

/// Stops the remote sessions a failed test left running.
impl Drop for Rig {
    fn drop(&mut self) {
        for id in self.other.session_ids() {
            let _ = self.there(&["stop", &id, "--grace", "1"]);
        }
    }
}

pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn deliver_approve_diff_and_stop_a_real_claude_on_the_other_machine() {
    let rig = Rig::start();
    let (handle, pid) = rig.launch();
    let dev = format!("dev:{handle}");
    let rec = rig.record(&handle);
    assert_eq!(
        (rec["status"].as_str(), rec["launched_by"].as_str()),
        (Some("idle"), Some("spex"))
    );

    // deliver: confirmed by Claude's own prompt hook there; the same JSON keys as here.
    let delivered = rig.json_here(&["deliver", &dev, "USE_NONE hello from afar", "--json"]);
    assert_eq!(
        (delivered["confirmed"].as_bool(), delivered["mode"].as_str()),
        (Some(true), Some("inject")),
        "{}",
        pretty(&delivered)
    );
    let rec = rig.until(&handle, "ran the delivered turn", |rec| {
        rec["turn"]["prompt"] == "USE_NONE hello from afar" && rec["turn"]["state"] == "completed"
    });
    assert_eq!(rec["turn"]["id"], delivered["turn_id"], "{}", pretty(&rec));
    // The human line, as `deliver` prints it there.
    let out = rig.here(&["deliver", &dev, "USE_NONE again"]);
    assert!(
        out.status.success()
            && stdout(&out).starts_with(&format!("delivered to {handle} (inject, confirmed in ")),
        "{}",
        rig.said(&out)
    );
    rig.until(&handle, "ran the second turn", |rec| {
        rec["turn"]["prompt"] == "USE_NONE again" && rec["turn"]["state"] == "completed"
    });

    // approve: Claude asks to edit, the answer from here lets the edit happen there.
    rig.json_here(&[
        "deliver",
        &dev,
        "Please edit the file. USE_EDIT FILE=notes.txt",
        "--json",
    ]);
    let rec = rig.until(&handle, "asked", |rec| rec["status"] == "needs_attention");
    assert_eq!(
        read(&rig.other.repo.join("notes.txt")),
        "hello world\n",
        "{}",
        pretty(&rec)
    );
    let a = rig.json_here(&["approve", &dev, "--json"]);
    assert_eq!(
        (a["attention"].as_str(), a["choice"].as_str()),
        (Some("a1"), Some("allow")),
        "{}",
        pretty(&a)
    );
    assert!(
        a["confirmed"].as_str().is_some_and(|c| !c.is_empty()),
        "{}",
        pretty(&a)
    );
    rig.until(&handle, "finished the edit", |rec| {
        rec["turn"]["state"] == "completed" && rec["status"] == "idle"
    });
    assert_eq!(read(&rig.other.repo.join("notes.txt")), "goodbye world\n");

    // diff: the session's change, byte for byte what `diff` says there.
    for args in [vec!["diff"], vec!["diff", "--json"], vec!["diff", "--stat"]] {
        let mut here = args.clone();
        here.insert(1, &dev);
        let mut there = args.clone();
        there.insert(1, &handle);
        let (a, b) = (rig.here(&here), rig.there(&there));
        assert_eq!(a.status.code(), Some(0), "{}", rig.said(&a));
        assert_eq!(stdout(&a), stdout(&b), "{args:?}");
    }
    assert!(stdout(&rig.here(&["diff", &dev])).contains("+goodbye world"));

    // stop: the harness ends there, and says so in the same JSON.
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    let s = rig.json_here(&["stop", &dev, "--json"]);
    assert_eq!(s["status"], "exited", "{}", pretty(&s));
    assert_eq!(rig.record(&handle)["status"], "exited");
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "Claude ({pid}) still runs there"
    );
    // `show` of the ended session reads the same here as there.
    let (a, b) = (rig.here(&["show", &dev]), rig.there(&["show", &handle]));
    assert_eq!(stdout(&a), stdout(&b));
    // `events` of the one session: the same log, the approval's closing in it.
    let (a, b) = (
        rig.here(&["events", &dev, "--json"]),
        rig.there(&["events", &handle, "--json"]),
    );
    assert_eq!(a.status.code(), Some(0), "{}", rig.said(&a));
    assert_eq!(stdout(&a), stdout(&b));
    assert!(stdout(&a).contains("attention.closed"), "{}", stdout(&a));
    // The exit codes are the remote's: `wait` on an exited session is 3, an unknown one 2
    // (its error said once, as there).
    let out = rig.here(&["wait", &dev, "--until", "idle", "--timeout", "5"]);
    let there = rig.there(&["wait", &handle, "--until", "idle", "--timeout", "5"]);
    assert_eq!(
        (out.status.code(), there.status.code()),
        (Some(3), Some(3)),
        "{}",
        rig.said(&out)
    );
    let out = rig.here(&["show", "dev:nosuch"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", rig.said(&out));
    assert_eq!(err.matches("error:").count(), 1, "{err}");
}

#[test]
fn attach_over_ssh_from_a_terminal_and_detach_with_the_key() {
    let rig = Rig::start();
    let (handle, _) = rig.launch();
    let mut cmd = rig
        .sshd
        .cmd(&rig.local, &["attach", &format!("dev:{handle}")]);
    cmd.env("TERM", "xterm-256color");
    let mut t = Term::spawn(&cmd, 40, 120);
    t.wait_until(Duration::from_mins(1), |v| {
        v.text().contains("? for shortcuts") && v.since(0).contains("[attached to")
    })
    .unwrap_or_else(|e| panic!("never attached over ssh: {e}\n{}", rig.sshd.log()));
    // Typed here, it reaches Claude's input box there.
    t.send(b"typed from afar");
    t.wait_for("typed from afar", Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("{e}\n{}", t.diag()));
    let mark = t.mark();
    t.send(b"\x1c");
    let status = t
        .exit_within(Duration::from_secs(20))
        .unwrap_or_else(|| panic!("still attached after the detach key\n{}", t.diag()));
    assert!(status.success(), "{status:?}\n{}", t.diag());
    assert!(t.since(mark).contains("[detached from"), "{}", t.diag());
    // Detached, not ended: the session runs on there.
    let rec = rig.record(&handle);
    assert_ne!(rec["status"], "exited", "{}", pretty(&rec));
    assert_eq!(rec["live"], true, "{}", pretty(&rec));
}

/// `sessions --all-hosts`: this machine's sessions beside the other's, a `HOST` column, the
/// session that needs a person first whichever machine it is on; a remote that does not answer
/// is named on stderr and the rest still listed.
#[test]
fn sessions_of_every_host_attention_first() {
    let rig = Rig::start();
    let (handle, _) = rig.launch();
    // A session here that ran a turn (hand-written hooks: this machine has no harness to run).
    let local = &rig.local;
    write(
        &local.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\"] }\n",
    );
    local.ok(&local.repo, &["materialize"]);
    let payload = |event: &str| {
        serde_json::json!({"session_id": "11111111-2222-3333-4444-555555555555", "cwd": local.repo,
            "hook_event_name": event, "prompt": "hi"})
    };
    local.dispatch(
        &local.repo,
        "claude",
        "UserPromptSubmit",
        &payload("UserPromptSubmit"),
    );
    local.dispatch(&local.repo, "claude", "Stop", &payload("Stop"));
    // The remote one needs a person.
    rig.json_here(&[
        "deliver",
        &format!("dev:{handle}"),
        "Please edit the file. USE_EDIT FILE=notes.txt",
        "--json",
    ]);
    rig.until(&handle, "asked", |rec| rec["status"] == "needs_attention");

    let all = rig.json_here(&["sessions", "--all-hosts", "--json"]);
    let rows = all.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{}", pretty(&all));
    assert_eq!(
        (rows[0]["host"].as_str(), rows[0]["status"].as_str()),
        (Some("dev"), Some("needs_attention")),
        "{}",
        pretty(&all)
    );
    assert_eq!(rows[1]["host"], Value::Null, "{}", pretty(&all));
    let text = stdout(&rig.here(&["sessions", "--all-hosts"]));
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("HOST") && lines[0].contains("PROJECT"),
        "{text}"
    );
    assert!(
        lines[1].starts_with("dev ") && lines[1].contains(&handle),
        "{text}"
    );
    assert!(lines[2].starts_with("local "), "{text}");

    // A second remote that refuses connections: named on stderr, the others still listed.
    let out = rig.here(&["remote", "add", "gone", "ssh://nobody@127.0.0.1:1"]);
    assert!(out.status.success(), "{}", rig.said(&out));
    let out = rig.here(&["sessions", "--all-hosts", "--json"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}", rig.said(&out));
    assert!(err.contains("remote `gone` left out"), "{err}");
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 2, "{}", pretty(&rows));
}
