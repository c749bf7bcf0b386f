//! The committed cassettes (`tests/fixtures/cassettes/`, recorded from the real Claude Code
//! 2.1.197 against the fake Messages API with `spex launch --record`) replay with no harness
//! binary anywhere: `cassette check` passes, a collapsed replay is `output.raw` exactly, and the
//! screen and session state at chosen moments of the recording are what happened.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::world::World;

fn cassette(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/cassettes")
        .join(name)
}

/// spex with a PATH that holds no harness.
fn spex(w: &World, args: &[&str]) -> std::process::Output {
    w.cmd(&w.repo, args)
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("spex runs")
}

fn service_events(name: &str) -> Vec<Value> {
    std::fs::read_to_string(cassette(name).join("service-events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The time of the first event of `kind` in cassette `name`.
fn t_of(name: &str, kind: &str) -> u64 {
    service_events(name)
        .iter()
        .find(|e| e["kind"] == kind)
        .and_then(|e| e["t_ms"].as_u64())
        .unwrap_or_else(|| panic!("no {kind} in {name}"))
}

/// `spex replay <cassette> --at <t>`: `(status, screen text)`, the text with its volatile parts
/// (clocks, durations, spinners, token counts) normalized, as assertions should see it.
fn at(w: &World, name: &str, t: u64) -> (String, String) {
    let (status, _, normalized) = at_raw(w, name, t);
    (status, normalized)
}

/// `spex replay <cassette> --at <t>`: `(status, screen text as drawn, normalized text)`.
fn at_raw(w: &World, name: &str, t: u64) -> (String, String, String) {
    let dir = cassette(name);
    let out = spex(
        w,
        &["replay", dir.to_str().unwrap(), "--at", &t.to_string()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    (
        v["status"].as_str().unwrap().to_owned(),
        crate::support::world::screen_text(&v["screen"]["lines"]),
        crate::support::world::screen_text(&v["normalized"]),
    )
}

#[test]
fn committed_cassettes_check_and_replay_byte_exact_without_a_harness() {
    let w = World::new();
    for name in ["turn", "permission", "interrupt"] {
        let dir = cassette(name);
        let path = dir.to_str().unwrap();
        let check = spex(&w, &["cassette", "check", path]);
        assert!(
            check.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&check.stderr)
        );
        let replay = spex(&w, &["replay", path, "--collapsed"]);
        assert!(replay.status.success());
        assert!(
            replay.stdout == std::fs::read(dir.join("output.raw")).unwrap(),
            "{name}: collapsed replay is not output.raw"
        );
    }
}

/// The asciicast `cassette export` writes of each committed cassette is one the real asciinema
/// (the pinned one in `.peers/`) reads: `asciinema cat` writes back exactly the recorded output.
#[test]
fn exported_asciicasts_play_in_asciinema() {
    let w = World::new();
    let asciinema = crate::support::peers::asciinema_bin();
    for name in ["turn", "permission", "interrupt"] {
        let dir = cassette(name);
        let cast = w.dir.path().join(format!("{name}.cast"));
        let export = spex(
            &w,
            &[
                "cassette",
                "export",
                dir.to_str().unwrap(),
                "--cast",
                cast.to_str().unwrap(),
            ],
        );
        assert!(
            export.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&export.stderr)
        );
        let played = std::process::Command::new(&asciinema)
            .arg("cat")
            .arg(&cast)
            .env("HOME", &w.home)
            .output()
            .expect("asciinema runs");
        assert!(
            played.status.success(),
            "{name}: asciinema cat failed: {}",
            String::from_utf8_lossy(&played.stderr)
        );
        assert!(
            played.stdout == std::fs::read(dir.join("output.raw")).unwrap(),
            "{name}: asciinema's output is not the recorded output"
        );
    }
}

#[test]
fn replay_frames_prints_the_recorded_screens() {
    let w = World::new();
    let dir = cassette("permission");
    let out = spex(&w, &["replay", dir.to_str().unwrap(), "--frames"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let frames: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let recorded: Vec<Value> = std::fs::read_to_string(dir.join("frames.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(frames, recorded, "the frames as recorded, in order");
    let last = frames.last().unwrap();
    assert_eq!(last["reason"], "end");
    let lines = last["screen"]["lines"].as_array().unwrap();
    assert!(
        lines
            .iter()
            .any(|l| l.as_str().unwrap().contains("Do you want to proceed?")),
        "{last}"
    );
    assert!(
        frames
            .iter()
            .all(|f| f["seq"].is_u64() && f["t_ms"].is_u64())
    );
}

#[test]
fn a_completed_turn_replays_through_the_terminal_model() {
    let w = World::new();
    let (status, screen) = at(&w, "turn", t_of("turn", "turn.started"));
    assert_eq!(status, "working", "{screen}");
    assert!(!screen.contains("PLAIN_ANSWER_OK"), "{screen}");
    let before_exit = t_of("turn", "session.exited") - 1;
    let (status, screen) = at(&w, "turn", before_exit);
    assert_eq!(status, "idle");
    assert!(screen.contains("❯ USE_NONE hello"), "{screen}");
    assert!(screen.contains("PLAIN_ANSWER_OK"), "{screen}");
}

#[test]
fn replay_at_normalizes_volatile_screen_text_but_not_the_recording() {
    let w = World::new();
    let before_exit = t_of("turn", "session.exited") - 1;
    let (_, drawn, normalized) = at_raw(&w, "turn", before_exit);
    // The turn's summary line: its spinner glyph and its duration vary between recordings.
    assert!(drawn.contains("✻ Crunched for 0s"), "{drawn}");
    assert!(
        normalized.contains("<spin> Crunched for <duration>"),
        "{normalized}"
    );
    assert!(!normalized.contains("for 0s"), "{normalized}");
}

#[test]
fn a_permission_dialog_replays_as_needing_attention() {
    let w = World::new();
    let (status, _) = at(&w, "permission", t_of("permission", "input.required"));
    assert_eq!(status, "needs_attention");
    let (status, screen) = at(&w, "permission", t_of("permission", "session.exited") - 1);
    assert_eq!(status, "needs_attention");
    assert!(screen.contains("Do you want to proceed?"), "{screen}");
}

#[test]
fn an_interrupted_turn_replays_as_idle() {
    let w = World::new();
    let (status, _) = at(&w, "interrupt", t_of("interrupt", "turn.started"));
    assert_eq!(status, "working");
    let (status, screen) = at(&w, "interrupt", t_of("interrupt", "turn.interrupted"));
    assert_eq!(status, "idle", "{screen}");
}

#[test]
fn real_time_replay_keeps_the_recorded_timing() {
    let w = World::new();
    let dir = cassette("turn");
    let last_ms = std::fs::read_to_string(dir.join("output.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok()?["t_ms"].as_u64())
        .max()
        .unwrap();
    let started = std::time::Instant::now();
    let out = spex(&w, &["replay", dir.to_str().unwrap()]);
    let took = started.elapsed().as_millis();
    assert!(out.status.success());
    // The last chunk is due at `last_ms`; starting spex and writing take a few ms more.
    let want = u128::from(last_ms);
    assert!(
        took >= want && took < want + 300,
        "replay took {took} ms, the recording {want} ms"
    );
}

/// The harnesses and scenarios `scripts/record-cassettes.sh` records (`record_cassettes.rs`).
const RECORDED: &[&str] = &["claude", "codex", "gemini"];
const SCENARIOS: &[&str] = &["tool", "permission", "question", "interrupt", "failed"];

/// Every recorded harness cassette is committed, checks, replays collapsed as `output.raw`
/// exactly and names its harness, with no harness on PATH.
#[test]
fn every_harness_is_recorded_in_every_scenario_and_replays_without_a_harness() {
    let w = World::new();
    for harness in RECORDED {
        for scenario in SCENARIOS {
            let name = format!("{harness}/{scenario}");
            let dir = cassette(&name);
            let path = dir.to_str().unwrap();
            assert!(dir.join("assertions.json").is_file(), "{name}: no spec");
            let check = spex(&w, &["cassette", "check", path]);
            assert!(
                check.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&check.stderr)
            );
            let replay = spex(&w, &["replay", path, "--collapsed"]);
            assert!(replay.status.success(), "{name}");
            assert!(
                replay.stdout == std::fs::read(dir.join("output.raw")).unwrap(),
                "{name}: collapsed replay is not output.raw"
            );
            let manifest: Value =
                serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
            assert_eq!(manifest["harness"]["id"], *harness, "{name}");
            assert_eq!(manifest["capture"], "full", "{name}");
        }
    }
}

/// Every file of every committed cassette, as text.
fn committed_files() -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut todo = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cassettes")];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else {
                let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
                out.push((path, text));
            }
        }
    }
    out
}

/// No committed cassette keeps what identifies the machine or the moment it was recorded on:
/// the home or temp folder of this machine, a path under `/tmp/`, `/home/` or `/root/`, a UUID
/// other than a cassette's own `manifest.id` (which specs bind to), an RFC 3339 timestamp.
#[test]
fn no_committed_cassette_keeps_a_machine_path_a_uuid_or_a_timestamp() {
    let uuid =
        regex::Regex::new(r"(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
            .unwrap();
    let rfc3339 = regex::Regex::new(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}").unwrap();
    // A process id as a JSON field (a hook's `pid`), left as the number it was.
    let pid = regex::Regex::new(r#""pid":\s*\d+"#).unwrap();
    // The temp folder as a folder (`/tmp/...`): Codex names `/tmp` itself in a warning.
    let machine: Vec<String> = [
        std::env::var("HOME").ok(),
        Some(format!(
            "{}/",
            std::env::temp_dir()
                .display()
                .to_string()
                .trim_end_matches('/')
        )),
    ]
    .into_iter()
    .flatten()
    .filter(|p| p.len() > 2)
    .chain(["/tmp/".to_owned(), "/home/".to_owned(), "/root/".to_owned()])
    .chain([env!("CARGO_MANIFEST_DIR").to_owned()])
    .collect();
    let files = committed_files();
    assert!(files.len() > 100, "{} files", files.len());
    let mut found = Vec::new();
    for (path, text) in &files {
        let own_id = (path.file_name().unwrap() == "manifest.json")
            .then(|| serde_json::from_str::<Value>(text).unwrap()["id"].clone());
        // A spec names its cassette's id too.
        let spec_id = (path.file_name().unwrap() == "assertions.json")
            .then(|| serde_json::from_str::<Value>(text).unwrap()["cassette"]["id"].clone());
        for m in uuid.find_iter(text) {
            let allowed = [&own_id, &spec_id]
                .iter()
                .any(|id| id.as_ref().and_then(Value::as_str) == Some(m.as_str()));
            if !allowed {
                found.push(format!("{}: uuid {}", path.display(), m.as_str()));
            }
        }
        for m in pid.find_iter(text) {
            found.push(format!("{}: {}", path.display(), m.as_str()));
        }
        for m in rfc3339.find_iter(text) {
            found.push(format!("{}: time {}", path.display(), m.as_str()));
        }
        // A spec may name `/tmp/` in a predicate that it is never drawn.
        let spec = path.file_name().unwrap() == "assertions.json";
        for p in &machine {
            let generic = ["/tmp/", "/home/", "/root/"].contains(&p.as_str());
            if !(spec && generic) && text.contains(p.as_str()) {
                found.push(format!("{}: path {p}", path.display()));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}
