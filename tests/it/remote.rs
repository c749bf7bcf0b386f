//! Other machines over SSH (issue 32), against a real OpenSSH server on a loopback port whose
//! test key logs in to a second spex world (`support::sshd`).

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::sshd::Sshd;
use crate::support::world::World;

#[test]
fn a_call_reaches_the_spex_on_the_other_machine_over_real_ssh() {
    let local = World::new();
    let other = World::new();
    let sshd = Sshd::start(&other);
    sshd.ok(&local, &["remote", "add", "other", Sshd::ALIAS]);
    sshd.ok(&local, &["remote", "add", "byuri", &sshd.uri()]);
    let config = std::fs::read_to_string(local.xdg_config.join("spex/config.jsonc")).unwrap();
    assert!(config.contains("\"other\""), "{config}");
    // The shell completes the remotes' names.
    let out = local
        .cmd(&local.repo, &["--", "spex", "remote", "check", "o"])
        .env("COMPLETE", "fish")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "other\tother\n",
        "{out:?}"
    );

    let out = sshd.ok(&local, &["remote", "check", "other"]);
    assert!(
        out.contains(&format!("spex {}, protocol 1", env!("CARGO_PKG_VERSION"))),
        "{out}"
    );
    let list: Value =
        serde_json::from_str(&sshd.ok(&local, &["remote", "list", "--json"])).unwrap();
    let rows = list.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{list}");
    for row in rows {
        assert_eq!(row["reachable"], true, "{row}");
        assert_eq!(row["live_sessions"], 0, "{row}");
        assert_eq!(row["spex"], env!("CARGO_PKG_VERSION"), "{row}");
        assert!(
            row["features"]
                .as_array()
                .unwrap()
                .contains(&"hello".into()),
            "{row}"
        );
    }
    // The call ran in the other world (the key's `environment=`): a session there is a live
    // session of that machine, and none of this one.
    let base = serde_json::json!({
        "session_id": "0b6f1f9e-2d4c-4c1e-9a57-5f0d6f0e1a01",
        "cwd": other.repo,
        "hook_event_name": "UserPromptSubmit",
        "prompt": "hello from the other machine",
    });
    let out = other.dispatch(&other.repo, "claude", "UserPromptSubmit", &base);
    assert!(out.status.success(), "{out:?}");
    let list: Value =
        serde_json::from_str(&sshd.ok(&local, &["remote", "list", "--json"])).unwrap();
    assert_eq!(list[0]["live_sessions"], 1, "{list}");
    let here = local.ok(&local.repo, &["sessions", "--all-projects", "--json"]);
    assert_eq!(
        serde_json::from_str::<Value>(&here).unwrap(),
        serde_json::json!([])
    );

    // Through the real server, with the test's key.
    assert!(sshd.log().contains("Accepted publickey"), "{}", sshd.log());
}

/// A stand-in for an older spex on the other machine: it answers `hello` as `version` speaking
/// `protocol` with only the features given, and refuses every other method as unknown, as an
/// older spex does; `rpc` with arguments (`--protocol ...`) it refuses as clap does, with a
/// usage error and exit 2.
fn stand_in(other: &World, file: &str, version: &str, protocol: u32, features: &[&str]) -> String {
    let path = other.home.join(file);
    let hello = serde_json::json!({
        "protocol": protocol, "spex": version,
        "result": {"protocol": protocol, "spex": version, "features": features},
    });
    let unknown = serde_json::json!({
        "protocol": protocol, "spex": version,
        "error": {"kind": "unknown_method", "message": "this spex does not offer it"},
    });
    crate::support::world::executable(
        &path,
        &format!(
            "#!/bin/sh\n[ \"$1\" = rpc ] && [ $# = 1 ] || {{ echo \"error: unexpected argument '$2' found\" >&2; exit 2; }}\nreq=$(cat)\ncase \"$req\" in\n  *'\"hello\"'*) echo '{hello}' ;;\n  *) echo '{unknown}' ;;\nesac\n"
        ),
    );
    path.display().to_string()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn an_older_spex_there_is_refused_by_feature_and_version_never_crashed_on() {
    let local = World::new();
    let other = World::new();
    let sshd = Sshd::start(&other);
    let old = stand_in(&other, "old-spex", "0.0.9", 1, &["hello"]);
    sshd.ok(
        &local,
        &["remote", "add", "old", Sshd::ALIAS, "--spex", &old],
    );

    // `check` names the missing feature and the version there, and says what to do.
    let out = sshd.spex(&local, &["remote", "check", "old"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("the spex on `old` (version 0.0.9, protocol 1) does not offer `run`"),
        "{err}"
    );
    assert!(err.contains("hint: upgrade spex on `old`"), "{err}");

    // A command on one of its sessions is refused the same way, and the older spex's own
    // complaint about the flags it does not know is not shown.
    let out = sshd.spex(&local, &["show", "old:k1"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the spex on `old` (version 0.0.9, protocol 1) does not offer `exec`"),
        "{err}"
    );
    assert!(err.contains("hint: upgrade spex on `old`"), "{err}");
    assert!(!err.contains("unexpected argument"), "{err}");

    // `list` still lists it, reachable, with the refusal where its live sessions would be.
    let list: Value =
        serde_json::from_str(&sshd.ok(&local, &["remote", "list", "--json"])).unwrap();
    let row = &list[0];
    assert_eq!(
        (row["reachable"].as_bool(), row["spex"].as_str()),
        (Some(true), Some("0.0.9"))
    );
    assert!(
        row["live_error"]
            .as_str()
            .unwrap()
            .contains("does not offer `run`"),
        "{row}"
    );
    let table = sshd.ok(&local, &["remote", "list"]);
    eprintln!("{table}");
    assert!(
        table.contains("0.0.9") && table.contains("does not offer `run`"),
        "{table}"
    );

    // A spex speaking an older protocol than this one: refused with both versions named.
    let older = stand_in(&other, "older-spex", "0.0.1", 0, &["hello"]);
    sshd.ok(
        &local,
        &["remote", "add", "older", Sshd::ALIAS, "--spex", &older],
    );
    let out = sshd.spex(&local, &["remote", "check", "older"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the spex on `older` (version 0.0.1) speaks protocol 0; this spex"),
        "{err}"
    );
    assert!(err.contains("hint: upgrade spex on `older`"), "{err}");
}

#[test]
fn a_missing_spex_or_host_says_what_to_do() {
    let local = World::new();
    let other = World::new();
    let mut sshd = Sshd::start(&other);
    sshd.ok(
        &local,
        &[
            "remote",
            "add",
            "nospex",
            Sshd::ALIAS,
            "--spex",
            "/nowhere/spex",
        ],
    );
    let out = sshd.spex(&local, &["remote", "check", "nospex"]);
    let err = stderr(&out);
    assert!(
        err.contains("`nospex` has no spex program `/nowhere/spex`"),
        "{err}"
    );
    assert!(err.contains("hint: install spex on `nospex`"), "{err}");

    sshd.ok(&local, &["remote", "add", "gone", &sshd.uri()]);
    sshd.stop();
    let out = sshd.spex(&local, &["remote", "check", "gone"]);
    let err = stderr(&out);
    assert!(err.contains("cannot reach `gone`"), "{err}");
    assert!(err.contains("Connection refused"), "{err}");
    assert!(err.contains("BatchMode=yes"), "{err}");

    // `remove` forgets a machine; a session name on an unknown machine says so.
    sshd.ok(&local, &["remote", "remove", "gone"]);
    let out = sshd.spex(&local, &["remote", "check", "gone"]);
    assert!(
        stderr(&out).contains("no remote named `gone` (known: `nospex`)"),
        "{}",
        stderr(&out)
    );
    let out = sshd.spex(&local, &["show", "gone:k1"]);
    assert!(
        stderr(&out).contains("no session `gone:k1` here, and no remote named `gone`"),
        "{}",
        stderr(&out)
    );
    // A known machine's session is asked of that machine: stopped, it says it cannot be reached.
    let out = sshd.spex(&local, &["show", "nospex:k1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot reach `nospex`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn one_connection_per_machine_is_shared_and_a_hung_machine_is_given_up_on_within_10_s() {
    let local = World::new();
    let other = World::new();
    let sshd = Sshd::start(&other);
    sshd.ok(&local, &["remote", "add", "other", Sshd::ALIAS]);
    let timed = |args: &[&str]| {
        let start = Instant::now();
        let out = sshd.spex(&local, args);
        (out, start.elapsed())
    };
    let (cold, cold_time) = timed(&["remote", "check", "other"]);
    assert!(cold.status.success(), "{}", stderr(&cold));
    let (warm, warm_time) = timed(&["remote", "check", "other"]);
    assert!(warm.status.success(), "{}", stderr(&warm));
    eprintln!("remote check: cold {cold_time:?}, warm {warm_time:?}");
    // Both calls went through one connection, which outlives the spex that opened it: one
    // sshd session process pair, not two.
    let sessions = sshd.connection_pids().len();
    sshd.ok(&local, &["remote", "list"]);
    assert_eq!(
        sshd.connection_pids().len(),
        sessions,
        "a new connection was opened"
    );

    sshd.hang();
    let (out, hung_time) = timed(&["remote", "check", "other"]);
    sshd.resume();
    eprintln!("remote check of a hung machine: failed after {hung_time:?}");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot reach `other`"), "{err}");
    assert!(hung_time < Duration::from_secs(10), "{hung_time:?}: {err}");
}

/// The first session of `w` (a hook fed by hand) and its handle.
fn a_session(w: &World) -> String {
    let payload = serde_json::json!({
        "session_id": "0b6f1f9e-2d4c-4c1e-9a57-5f0d6f0e1a02",
        "cwd": w.repo,
        "hook_event_name": "UserPromptSubmit",
        "prompt": "hello",
    });
    let out = w.dispatch(&w.repo, "claude", "UserPromptSubmit", &payload);
    assert!(out.status.success(), "{out:?}");
    let list: Value = serde_json::from_str(&w.ok(&w.repo, &["sessions", "--json"])).unwrap();
    list[0]["handle"].as_str().expect("a handle").to_owned()
}

#[test]
fn a_command_on_host_handle_runs_one_spex_there_and_its_hints_name_host_handle() {
    let local = World::new();
    let other = World::new();
    let sshd = Sshd::start(&other);
    let handle = a_session(&other);
    // The spex there, behind a wrapper that notes each time it is started.
    let starts = other.home.join("starts.log");
    let wrapper = other.home.join("spex-counted");
    crate::support::world::executable(
        &wrapper,
        &format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
            starts.display(),
            crate::support::world::spex_bin().display()
        ),
    );
    sshd.ok(
        &local,
        &[
            "remote",
            "add",
            "other",
            Sshd::ALIAS,
            "--spex",
            &wrapper.display().to_string(),
        ],
    );
    let _ = std::fs::remove_file(&starts);

    // As it prints there, byte for byte, with one spex started there.
    let remote = format!("other:{handle}");
    let here = sshd.spex(&local, &["show", &remote, "--json"]);
    let starts_text = std::fs::read_to_string(&starts).unwrap();
    let there = other.spex(&other.repo, &["show", &handle, "--json"]);
    assert_eq!(here.status.code(), Some(0), "{}", stderr(&here));
    assert_eq!(here.stdout, there.stdout);
    assert_eq!(starts_text.lines().count(), 1, "{starts_text}");
    assert!(
        starts_text
            .starts_with("rpc --protocol 1 --require exec --as other --stderr-fd 3 -- show "),
        "{starts_text}"
    );

    // An error's hints name the session as this machine does; the exit code is the one there.
    let here = sshd.spex(&local, &["approve", &remote]);
    let there = other.spex(&other.repo, &["approve", &handle]);
    let (err_here, err_there) = (stderr(&here), stderr(&there));
    eprintln!("here:\n{err_here}there:\n{err_there}");
    assert_eq!(here.status.code(), there.status.code(), "{err_here}");
    assert_ne!(here.status.code(), Some(0), "{err_here}");
    assert!(
        err_there.contains(&format!("`spex show {handle}`")),
        "{err_there}"
    );
    assert!(
        err_here.contains(&format!("`spex show {remote}`")),
        "{err_here}"
    );
    assert_eq!(
        err_here,
        err_there.replace(&format!("{handle}`"), &format!("{remote}`"))
    );
    // A usage error there is said as there, and its exit code is 2, not a refusal.
    let here = sshd.spex(&local, &["show", &remote, "--no-such-flag"]);
    assert_eq!(here.status.code(), Some(2), "{}", stderr(&here));
    assert!(
        stderr(&here).contains("--no-such-flag"),
        "{}",
        stderr(&here)
    );
}
