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
