//! Assertion specs through the real `spex` binary, with no harness on PATH: every committed
//! cassette passes its `assertions.json`; a spec bound to another recording fails whatever it
//! says; a wrong predicate fails with the report a person needs (the predicate, the nearest
//! screen's time and rows, the service events around it); `cassette spec` drafts a spec that
//! passes and never replaces one unasked.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::world::World;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cassettes")
}

/// spex with a PATH that holds no harness.
fn spex(w: &World, args: &[&str]) -> std::process::Output {
    w.cmd(&w.repo, args)
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("spex runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A copy of committed cassette `name` in the world's temp folder.
fn copy(w: &World, name: &str) -> PathBuf {
    let to = w.dir.path().join(name);
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(fixtures().join(name)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
    to
}

fn spec_of(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("assertions.json")).unwrap()).unwrap()
}

fn write_spec(dir: &Path, spec: &Value) {
    std::fs::write(
        dir.join("assertions.json"),
        serde_json::to_string_pretty(spec).unwrap(),
    )
    .unwrap();
}

/// Every cassette folder under the fixtures (a folder with a `manifest.json`).
fn committed() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![fixtures()];
    while let Some(dir) = todo.pop() {
        if dir.join("manifest.json").is_file() {
            out.push(dir);
            continue;
        }
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            }
        }
    }
    out
}

#[test]
fn every_committed_cassette_passes_its_spec_without_a_harness() {
    let w = World::new();
    let cassettes = committed();
    for dir in &cassettes {
        assert!(
            dir.join("assertions.json").is_file(),
            "{} has no assertions.json",
            dir.display()
        );
    }
    let out = spex(&w, &["cassette", "test", fixtures().to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    for dir in &cassettes {
        assert!(
            stdout.contains(&format!("ok {}: ", dir.display())),
            "{} did not pass: {stdout}",
            dir.display()
        );
    }
    assert!(stdout.contains(&format!("{0} of {0} cassettes passed", cassettes.len())));
    // As JSON, for tools: one report per cassette, none failed.
    let json = spex(
        &w,
        &["cassette", "test", fixtures().to_str().unwrap(), "--json"],
    );
    assert!(json.status.success());
    let reports: Vec<Value> = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(reports.len(), cassettes.len());
    for r in &reports {
        assert!(
            r["binding"].is_null() && r["failures"] == serde_json::json!([]),
            "{r}"
        );
        assert!(r["assertions"].as_u64().unwrap() > 0, "{r}");
    }
}

#[test]
fn a_spec_bound_to_another_recording_fails_naming_both() {
    let w = World::new();
    let turn = copy(&w, "turn");
    let permission = spec_of(&fixtures().join("permission"));
    let own = spec_of(&turn);
    // The permission cassette's spec, id and digest, put beside the turn cassette; and the
    // turn's own spec with only its digest changed.
    let mut digest_only = own.clone();
    digest_only["cassette"]["content_digest"] = "sha256:0000".into();
    for (spec, bound_id, bound_digest) in [
        (
            permission.clone(),
            permission["cassette"]["id"].as_str().unwrap(),
            permission["cassette"]["content_digest"].as_str().unwrap(),
        ),
        (
            digest_only.clone(),
            own["cassette"]["id"].as_str().unwrap(),
            "sha256:0000",
        ),
    ] {
        write_spec(&turn, &spec);
        let out = spex(&w, &["cassette", "test", turn.to_str().unwrap()]);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
        assert!(stdout.starts_with("FAIL "), "{stdout}");
        for named in [
            bound_id,
            bound_digest,
            own["cassette"]["id"].as_str().unwrap(),
            own["cassette"]["content_digest"].as_str().unwrap(),
        ] {
            assert!(stdout.contains(named), "{stdout} does not name {named}");
        }
    }
}

#[test]
fn a_wrong_predicate_fails_with_the_predicate_the_screen_and_the_events_near_it() {
    let w = World::new();
    let turn = copy(&w, "turn");
    let mut spec = spec_of(&turn);
    let wrong = serde_json::json!({"assert": "screen_contains", "text": "WRONG_ANSWER", "at": {"event": "turn.completed"}});
    spec["assertions"].as_array_mut().unwrap().push(wrong);
    let index = spec["assertions"].as_array().unwrap().len() - 1;
    write_spec(&turn, &spec);
    let out = spex(&w, &["cassette", "test", turn.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    for expected in [
        format!("1 of {} assertions failed", index + 1),
        format!(
            "assertion {index}: {{\"assert\":\"screen_contains\",\"text\":\"WRONG_ANSWER\",\"at\":{{\"event\":\"turn.completed\"}}}}"
        ),
        // turn.completed is record 22 at 1000 ms; the screen then is the one output 21 drew.
        "the screen at t_ms 1000 (seq 22) does not show `WRONG_ANSWER`".to_owned(),
        "screen at t_ms 1000 (seq 21):".to_owned(),
        "5: ❯ USE_NONE hello".to_owned(),
        "nearest recorded frame: `busy` at t_ms 1000 (seq 19)".to_owned(),
        "t_ms 900 seq 17 turn.started".to_owned(),
        "t_ms 1000 seq 22 turn.completed".to_owned(),
    ] {
        assert!(stdout.contains(&expected), "no `{expected}` in:\n{stdout}");
    }
    // The other predicates still pass: only the wrong one is reported.
    assert_eq!(stdout.matches("  assertion ").count(), 1, "{stdout}");
    let json = spex(&w, &["cassette", "test", turn.to_str().unwrap(), "--json"]);
    assert_eq!(json.status.code(), Some(1));
    let reports: Vec<Value> = serde_json::from_slice(&json.stdout).unwrap();
    let f = &reports[0]["failures"][0];
    assert_eq!(f["index"], index);
    assert_eq!(
        (f["seq"].as_u64(), f["t_ms"].as_u64()),
        (Some(21), Some(1000))
    );
    assert!(
        f["excerpt"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().contains("Claude Code v2.1.197")),
        "{f}"
    );
    let kinds: Vec<&str> = f["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"turn.completed"), "{kinds:?}");
}

#[test]
fn a_spec_that_does_not_parse_names_the_file_and_the_assertion() {
    let w = World::new();
    let turn = copy(&w, "turn");
    let mut spec = spec_of(&turn);
    spec["assertions"][2] = serde_json::json!({"assert": "screen_glows", "text": "x"});
    write_spec(&turn, &spec);
    let out = spex(&w, &["cassette", "test", turn.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let file = turn.join("assertions.json");
    assert!(
        stderr.contains(&format!(
            "`{}` assertion 2: unknown variant `screen_glows`",
            file.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("hint: "), "{stderr}");
}

#[test]
fn a_starter_spec_passes_and_is_never_replaced_unasked() {
    let w = World::new();
    let interrupt = copy(&w, "interrupt");
    let hand_written = std::fs::read(interrupt.join("assertions.json")).unwrap();
    let refused = spex(&w, &["cassette", "spec", interrupt.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        text(&refused.stderr).contains("--force"),
        "{}",
        text(&refused.stderr)
    );
    assert_eq!(
        std::fs::read(interrupt.join("assertions.json")).unwrap(),
        hand_written
    );
    let drafted = spex(
        &w,
        &["cassette", "spec", interrupt.to_str().unwrap(), "--force"],
    );
    assert!(drafted.status.success(), "{}", text(&drafted.stderr));
    let spec = spec_of(&interrupt);
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(interrupt.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(spec["cassette"]["id"], manifest["id"]);
    assert_eq!(
        spec["cassette"]["content_digest"],
        manifest["content_digest"]
    );
    assert_eq!(
        spec["marks"]["turn.interrupted"]["event"],
        "turn.interrupted"
    );
    let asserts: Vec<&str> = spec["assertions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["assert"].as_str())
        .collect();
    for family in [
        "screen_contains",
        "screen_state",
        "service_events",
        "status",
        "outcome",
        "exit",
    ] {
        assert!(asserts.contains(&family), "{family} missing: {asserts:?}");
    }
    let test = spex(&w, &["cassette", "test", interrupt.to_str().unwrap()]);
    assert!(test.status.success(), "{}", text(&test.stdout));
}

/// The terminal conformance set (`scripts/record-cassettes.sh`): every case is committed with
/// a spec of its own, and all of them pass with nothing on PATH (no `top`, `less`, `vim`, no
/// `python3`).
#[test]
fn the_terminal_conformance_set_passes_with_nothing_installed() {
    let w = World::new();
    let set = fixtures().join("terminal");
    let cases = [
        "split-escapes",
        "one-byte",
        "alternate-screen",
        "osc-links",
        "wide-combining",
        "bell",
        "bracketed-paste",
        "mouse",
        "resize-redraw",
        "resize-escape",
        "large-output",
        "exit-burst",
        "eof-redraw",
        "top",
        "less",
        "vim",
    ];
    for case in cases {
        let spec = spec_of(&set.join(case));
        assert!(
            spec["assertions"].as_array().unwrap().len() >= 4,
            "{case}: a spec of a few predicates at least"
        );
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/terminal-programs")
            .join(format!("{case}.steps.json"));
        assert!(script.is_file(), "{case} has no script to record it again");
    }
    let out = w
        .cmd(&w.repo, &["cassette", "test", set.to_str().unwrap()])
        .env("PATH", "")
        .output()
        .expect("spex runs");
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains(&format!("{0} of {0} cassettes passed", cases.len())),
        "{stdout}"
    );
}

/// `spex cassette record` runs a program under the PTY host, driven by its script (a wait, keys,
/// a resize, a frame), into a cassette that checks, and whose starter spec passes.
#[test]
fn a_program_recorded_by_script_checks_and_passes_its_starter_spec() {
    let w = World::new();
    let script = w.dir.path().join("steps.json");
    std::fs::write(
        &script,
        r#"[{"wait": "name?"}, {"frame": "asked"}, {"keys": "spex\r"}, {"resize": [30, 100]}, {"wait": "hello spex"}]"#,
    )
    .unwrap();
    let out_dir = w.dir.path().join("recorded");
    let record = spex(
        &w,
        &[
            "cassette",
            "record",
            "--out",
            out_dir.to_str().unwrap(),
            "--script",
            script.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "printf 'name? '; read n; printf 'hello %s\\n' \"$n\"",
        ],
    );
    assert!(record.status.success(), "{}", text(&record.stderr));
    let check = spex(&w, &["cassette", "check", out_dir.to_str().unwrap()]);
    assert!(check.status.success(), "{}", text(&check.stderr));
    let input = std::fs::read_to_string(out_dir.join("input.jsonl")).unwrap();
    assert!(input.contains(r#""text":"spex\r""#), "{input}");
    assert!(input.contains(r#""kind":"resize""#), "{input}");
    let frames = std::fs::read_to_string(out_dir.join("frames.jsonl")).unwrap();
    assert!(frames.contains(r#""reason":"asked""#), "{frames}");
    // The checkout (the command's folder) is scrubbed from what was recorded.
    let manifest = std::fs::read_to_string(out_dir.join("manifest.json")).unwrap();
    assert!(!manifest.contains(w.repo.to_str().unwrap()), "{manifest}");
    let drafted = spex(&w, &["cassette", "spec", out_dir.to_str().unwrap()]);
    assert!(drafted.status.success(), "{}", text(&drafted.stderr));
    let spec = std::fs::read_to_string(out_dir.join("assertions.json")).unwrap();
    assert!(spec.contains("hello spex"), "{spec}");
    let test = spex(&w, &["cassette", "test", out_dir.to_str().unwrap()]);
    assert!(test.status.success(), "{}", text(&test.stdout));
}

/// `cassette spec --rebind`: a spec follows its recording to a new digest (a rescrub, a new
/// recording) only when every predicate holds for the new one.
#[test]
fn rebinding_a_spec_needs_every_predicate_to_hold() {
    let w = World::new();
    let turn = copy(&w, "turn");
    let own = spec_of(&turn);
    let mut stale = own.clone();
    stale["cassette"]["content_digest"] = "sha256:0000".into();
    write_spec(&turn, &stale);
    let rebound = spex(
        &w,
        &["cassette", "spec", "--rebind", turn.to_str().unwrap()],
    );
    assert!(rebound.status.success(), "{}", text(&rebound.stdout));
    assert_eq!(spec_of(&turn), own);
    // With a predicate the recording breaks, nothing changes and the failure is shown.
    let mut wrong = stale.clone();
    wrong["assertions"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"assert": "exit", "code": 0}));
    write_spec(&turn, &wrong);
    let refused = spex(
        &w,
        &["cassette", "spec", "--rebind", turn.to_str().unwrap()],
    );
    let stdout = text(&refused.stdout);
    assert_eq!(refused.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("final.json says exit code 143, expected 0"),
        "{stdout}"
    );
    assert!(stdout.contains("stays bound to"), "{stdout}");
    assert_eq!(spec_of(&turn), wrong);
}
