//! `spex check` against the REAL pinned harnesses: every promise holds for each, offline, with
//! the user's HOME, config and project untouched; and against a harness made to break a
//! promise (Claude Code with its permission hook removed from the settings spex wrote, by a
//! wrapper script installed as `claude`): the failing line names the promise, its fallback and
//! the evidence, the result is kept, and `doctor`, `launch` and `approve` then say so.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::runtime::{FakeApi, claude_world};
use crate::support::claude_home::SeedOptions;
use crate::support::peers::{peers_bin_dir, peers_path};
use crate::support::world::{World, executable, feed, pretty, wait_status, write};

/// `spex` in the world with the pinned peers first on `PATH` (then `extra` before them).
fn spex(w: &World, extra: Option<&Path>, args: &[&str]) -> Command {
    let mut c = w.cmd(&w.repo, args);
    let mut path = std::ffi::OsString::new();
    if let Some(dir) = extra {
        path.push(dir);
        path.push(":");
    }
    path.push(peers_path());
    c.env("PATH", path);
    c
}

/// A user's world: their own harness settings and spex config, which a check must leave alone.
fn users_world() -> World {
    let w = World::new();
    write(&w.home.join(".claude.json"), "{\"theme\": \"light\"}\n");
    write(&w.home.join(".gemini/settings.json"), "{\"ui\": {}}\n");
    write(&w.codex_home.join("config.toml"), "model = \"mine\"\n");
    write(&w.xdg_config.join("spex/config.jsonc"), "{}\n");
    write(&w.repo.join("notes.txt"), "the user's project\n");
    w
}

/// `spex check --harness ID --json` and how long it took; its JSON report of that harness.
fn check(w: &World, extra: Option<&Path>, id: &str) -> (bool, Value, f64) {
    let started = Instant::now();
    let out = feed(
        &mut spex(w, extra, &["check", "--harness", id, "--json"]),
        b"",
    );
    let secs = started.elapsed().as_secs_f64();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let report = v["harnesses"][0].clone();
    assert_eq!(report["harness"], id, "{}", pretty(&v));
    (out.status.success(), report, secs)
}

fn lines(report: &Value) -> &Vec<Value> {
    report["lines"].as_array().expect("lines")
}

fn passes(id: &str) {
    let w = users_world();
    let before = w.snapshot(&[&w.xdg_config]);
    let (ok, report, secs) = check(&w, None, id);
    eprintln!("spex check --harness {id}: {secs:.1} s");
    let failed: Vec<&Value> = lines(&report)
        .iter()
        .filter(|l| l["verdict"] == "fail")
        .collect();
    assert!(
        ok && failed.is_empty(),
        "failed lines:\n{}",
        failed
            .iter()
            .map(|l| pretty(l))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The fixed scenarios each gave their lines: launch, deliver, the tool turn, permission,
    // question (or why not), interrupt, failed turn, resume, the payloads.
    let scenarios: Vec<&str> = lines(&report)
        .iter()
        .filter_map(|l| l["scenario"].as_str())
        .collect();
    for s in [
        "tool",
        "permission",
        "question",
        "interrupt",
        "failed",
        "resume",
        "all",
    ] {
        assert!(scenarios.contains(&s), "no `{s}` line: {}", pretty(&report));
    }
    // Each harness is driven into every scenario (Codex's question too).
    let unchecked: Vec<&Value> = lines(&report)
        .iter()
        .filter(|l| l["verdict"] != "pass")
        .collect();
    assert!(unchecked.is_empty(), "not checked: {unchecked:?}");
    assert!(
        lines(&report)
            .iter()
            .any(|l| l["promise"] == "every hook spex binds fires across the scenarios"),
        "no bound-hooks line: {}",
        pretty(&report)
    );
    assert!(
        lines(&report)
            .iter()
            .filter(|l| l["verdict"] == "pass")
            .count()
            >= 10,
        "{}",
        pretty(&report)
    );
    let version = report["version"].as_str().unwrap();
    // The user's HOME, CODEX_HOME, config and project: not a byte or an mtime changed.
    assert_eq!(
        w.snapshot(&[&w.xdg_config]),
        before,
        "the check touched the user's files"
    );
    // Kept per binary and version.
    let stored: Value = serde_json::from_str(&crate::support::world::read(
        &w.spex_home.join("checks.json"),
    ))
    .unwrap();
    let bin = peers_bin_dir().join(id);
    let key = format!("{}@{version}", bin.display());
    assert_eq!(
        stored["results"][&key]["failed"],
        serde_json::json!([]),
        "{}",
        pretty(&stored)
    );
}

#[test]
fn every_promise_holds_for_the_pinned_claude() {
    passes("claude");
}

#[test]
fn every_promise_holds_for_the_pinned_codex() {
    passes("codex");
}

#[test]
fn every_promise_holds_for_the_pinned_gemini() {
    passes("gemini");
}

/// A `claude` that removes spex's `PermissionRequest` hook from the project's settings before
/// it runs the real one: a version that stopped calling that hook, as far as spex can tell.
fn hookless_claude(dir: &Path) -> PathBuf {
    let real = peers_bin_dir().join("claude");
    let script = format!(
        r#"#!/bin/sh
case "$1" in --version) exec "{real}" "$@" ;; esac
if [ -f .claude/settings.json ]; then
python3 - <<'EOF'
import json
p = ".claude/settings.json"
s = json.load(open(p))
s.get("hooks", {{}}).pop("PermissionRequest", None)
json.dump(s, open(p, "w"), indent=2)
EOF
fi
exec "{real}" "$@"
"#,
        real = real.display()
    );
    let path = dir.join("claude");
    executable(&path, &script);
    path
}

#[test]
fn a_harness_that_breaks_a_promise_fails_its_line_and_spex_says_so() {
    let (w, fake) = claude_world(SeedOptions::default());
    let bin_dir = w.dir.path().join("wrapped");
    let wrapper = hookless_claude(&bin_dir);
    let (ok, report, secs) = check(&w, Some(&bin_dir), "claude");
    eprintln!("spex check --harness claude (hook removed): {secs:.1} s");
    assert!(!ok, "the check passed: {}", pretty(&report));
    assert_eq!(report["binary"], wrapper.to_str().unwrap());
    let failed: Vec<&Value> = lines(&report)
        .iter()
        .filter(|l| l["verdict"] == "fail")
        .collect();
    let hook = failed
        .iter()
        .find(|l| {
            l["promise"]
                .as_str()
                .is_some_and(|p| p.contains("through the permission hook (`PermissionRequest`)"))
        })
        .unwrap_or_else(|| panic!("no failing permission-hook line: {}", pretty(&report)));
    assert_eq!(hook["capability"], "answer_permission", "{}", pretty(hook));
    assert!(
        hook["fallback"]
            .as_str()
            .is_some_and(|f| f.contains("answer the dialog in the terminal")),
        "{}",
        pretty(hook)
    );
    // The evidence: the events spex saw around the dialog instead of the hook's.
    let evidence = hook["evidence"].to_string();
    assert!(evidence.contains("attention.opened"), "{}", pretty(hook));
    // The hook spex bound never fired: named, with the file that binds it.
    let bound = failed
        .iter()
        .find(|l| l["promise"] == "every hook spex binds fires across the scenarios")
        .unwrap_or_else(|| panic!("no failing bound-hooks line: {}", pretty(&report)));
    let evidence = bound["evidence"][0].as_str().unwrap_or_default();
    assert!(
        evidence.starts_with("never fired: `PermissionRequest` (bound in .claude/settings.json)"),
        "{}",
        pretty(bound)
    );
    assert!(
        !evidence.contains("`PreToolUse`") && !evidence.contains("`SubagentStart`"),
        "{}",
        pretty(bound)
    );
    // What does not depend on that hook still holds.
    for scenario in ["tool", "interrupt", "failed"] {
        assert!(
            lines(&report)
                .iter()
                .any(|l| l["scenario"] == scenario && l["verdict"] == "pass"),
            "no `{scenario}` line passed: {}",
            pretty(&report)
        );
    }

    // `doctor` names the version's failure and its fallback.
    let out = feed(&mut spex(&w, Some(&bin_dir), &["doctor"]), b"");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("failed `spex check`")
            && text.contains("through the permission hook")
            && text.contains("answer the dialog in the terminal"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // `launch` says so before it starts the session ...
    let run = |args: &[&str]| {
        let mut c = spex(&w, Some(&bin_dir), args);
        c.envs(fake.env())
            .env("XDG_RUNTIME_DIR", w.dir.path().join("run"));
        feed(&mut c, b"")
    };
    let out = run(&["launch", "--harness", "claude", "--detach", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.contains("failed `spex check`"),
        "{out:?}"
    );
    let launched: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let label = launched["session"]["handle"].as_str().unwrap().to_owned();
    // The events promise failed (a bound hook never fired): `show` marks the state unverified
    // and points at the screen, `sessions` lists it below the table.
    let out = run(&["show", &id]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("unverified")
            && text.contains("\"every hook spex binds fires across the scenarios\" does not hold")
            && text.contains(&format!("`spex attach {label}`")),
        "{text}"
    );
    let out = run(&["show", &id, "--json"]);
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        shown["state_unverified"]
            .as_str()
            .is_some_and(|w| w.contains("every hook spex binds fires")),
        "{}",
        pretty(&shown)
    );
    let out = run(&["sessions"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "state unverified (the harness version failed `spex check`): {label};"
        )),
        "{text}"
    );
    // ... `sessions --json` and the board's card carry it too.
    let out = run(&["sessions", "--json"]);
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = listed
        .as_array()
        .and_then(|a| a.iter().find(|s| s["id"] == id.as_str()))
        .unwrap_or_else(|| panic!("{}", pretty(&listed)));
    assert!(
        row["state_unverified"]
            .as_str()
            .is_some_and(|w| w.contains("every hook spex binds fires")),
        "{}",
        pretty(row)
    );
    let mut board = spex(
        &w,
        Some(&bin_dir),
        &["board", "--listen", "127.0.0.1:0", "--json"],
    );
    board.env("XDG_RUNTIME_DIR", w.dir.path().join("run"));
    let board = crate::board::start(board);
    let snap = board.socket(Some(&board.origin()), None).unwrap().next();
    let card = snap["sessions"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["id"] == id.as_str()))
        .unwrap_or_else(|| panic!("{}", pretty(&snap)));
    assert!(
        card["state_unverified"]
            .as_str()
            .is_some_and(|w| w.contains(&format!("`spex attach {label}`"))),
        "{}",
        pretty(card)
    );
    drop(board);
    // ... and its permission dialog is not answered through spex: the reason, and the terminal.
    let out = run(&["deliver", &id, "USE_BASH run it", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let r = wait_status(&w, &id, "needs_attention", Duration::from_mins(1));
    assert_eq!(r["attention"]["kind"], "permission", "{}", pretty(&r));
    let out = run(&["approve", &id, "--json"]);
    let refused: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let _ = run(&["stop", &id, "--json"]);
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(refused["reason"], "not_answered", "{}", pretty(&refused));
    let error = refused["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("switched off")
            && error.contains("through the permission hook")
            && error.contains("spex attach"),
        "{error}"
    );
    assert!(
        !w.repo.join("bash_out.txt").exists(),
        "the command ran though the answer was refused"
    );

    // An interrupt and a resume whose promises failed for this version are refused with the
    // reason, and a delivery warns. Their scenarios passed against this wrapper, so their
    // failures are added to the stored result here: what is proven is that spex reads it.
    let file = w.spex_home.join("checks.json");
    let mut stored: Value = serde_json::from_str(&crate::support::world::read(&file)).unwrap();
    for (capability, promise) in [
        (
            "interrupt",
            "`spex interrupt` stops the turn and it reads interrupted",
        ),
        (
            "resume",
            "`spex resume` brings an exited session back and a turn runs in it",
        ),
        (
            "deliver",
            "deliver is confirmed by the harness's prompt hook",
        ),
    ] {
        for r in stored["results"].as_object_mut().unwrap().values_mut() {
            r["failed"].as_array_mut().unwrap().push(serde_json::json!({
                "capability": capability, "promise": promise, "fallback": "the terminal (`spex attach`)",
            }));
        }
    }
    write(&file, stored.to_string());
    // A delivery is still tried (here to a stopped session), after the warning.
    let out = run(&["deliver", &id, "hello"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("warning: confirming a delivery is switched off for claude")
            && stderr
                .contains("\"deliver is confirmed by the harness's prompt hook\" does not hold"),
        "{stderr}"
    );
    // `--detach`: were it not refused, resume would not attach this test's stdin.
    for (verb, extra, word) in [
        (
            "interrupt",
            "--json",
            "error: `spex interrupt` is switched off for claude",
        ),
        (
            "resume",
            "--detach",
            "error: `spex resume` is switched off for claude",
        ),
    ] {
        let out = run(&[verb, &id, extra]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{verb}: {out:?}");
        assert!(
            stderr.starts_with(word)
                && stderr.contains("does not hold")
                && stderr.contains(&format!("hint: the terminal (`spex attach {label}`)")),
            "{verb}: {stderr}"
        );
    }
}
