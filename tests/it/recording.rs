//! What a recording of a real Claude session says of itself: the manifest's clock, replay
//! default, permission mode, project commit and environment allowlist; `final.json`'s last turn;
//! no id or time left but the cassette's own; and a recorded launch that failed at a screen
//! spex cannot answer marked `partial`, with why.

use std::time::Duration;

use serde_json::Value;

use crate::runtime::{
    checked_recording, claude_world, host_log, launch_json, run_json, stop, wait_screen,
};
use crate::support::claude_home::SeedOptions;
use crate::support::world::{pretty, read_or_empty};

#[test]
fn a_recorded_claude_session_says_its_clock_mode_commit_and_last_turn() {
    let (w, fake) = claude_world(SeedOptions::default());
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args([
                "-C",
                w.repo.to_str().unwrap(),
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
            ])
            .args(args)
            .output()
            .unwrap()
    };
    assert!(
        git(&["commit", "--allow-empty", "-qm", "base"])
            .status
            .success()
    );
    let launched = launch_json(
        &w,
        &fake,
        &["--record", "--", "--permission-mode", "acceptEdits"],
    );
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    run_json(&w, &fake, &["deliver", &id, "USE_NONE recorded", "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    assert!(wait_screen(
        &w,
        &fake,
        &id,
        "PLAIN_ANSWER_OK",
        Duration::from_mins(1)
    ));
    std::thread::sleep(Duration::from_secs(1));
    stop(&w, &fake, &id);
    let rec = checked_recording(&w, &fake, &id);
    let dir = rec.0.clone();
    let json =
        |name: &str| -> Value { serde_json::from_str(&read_or_empty(&dir.join(name))).unwrap() };
    let manifest = json("manifest.json");
    assert_eq!(
        manifest["permission_mode"],
        "acceptEdits",
        "{}",
        pretty(&manifest)
    );
    assert_eq!(manifest["replay_default"], "real-time");
    assert_eq!(manifest["clock"]["source"], "monotonic");
    assert_eq!(manifest["capture"], "full");
    let head = git(&["rev-parse", "HEAD"]);
    assert_eq!(
        manifest["project"]["commit"],
        String::from_utf8_lossy(&head.stdout).trim(),
        "{}",
        pretty(&manifest)
    );
    let env = manifest["command"]["env"].as_object().unwrap();
    assert!(
        !env.contains_key("ANTHROPIC_API_KEY") && !env.contains_key("SPEX_SESSION_ID"),
        "{env:?}"
    );
    assert!(env.contains_key("HOME") && env["HOME"].is_null(), "{env:?}");
    let last = json("final.json");
    assert_eq!(last["turn"]["state"], "completed", "{}", pretty(&last));
    assert!(
        last["turn"]["id"]
            .as_str()
            .is_some_and(|t| t.starts_with("$UUID")),
        "{}",
        pretty(&last)
    );
    // No UUID, time or clock time in any file but the cassette's own id.
    let volatile = regex::Regex::new(
        r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}|\b\d{1,2}:\d{2}:\d{2}\b",
    )
    .unwrap();
    let own = manifest["id"].as_str().unwrap();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).replace(own, "");
        let found: Vec<&str> = volatile.find_iter(&text).map(|m| m.as_str()).collect();
        assert!(found.is_empty(), "{} keeps {found:?}", path.display());
    }
}

/// A recorded launch that stops at Claude's API-key approval (a screen spex cannot answer)
/// fails, and its cassette says `partial` and why, instead of looking like a full recording.
#[test]
fn a_recorded_launch_that_fails_at_a_blocking_screen_is_partial() {
    let (w, fake) = claude_world(SeedOptions {
        approve_key: false,
        ..SeedOptions::default()
    });
    let out = crate::runtime::spex_cmd(
        &w,
        &fake,
        &[
            "launch",
            "--harness",
            "claude",
            "--detach",
            "--json",
            "--record",
        ],
    )
    .output()
    .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let ids = w.session_ids();
    assert_eq!(ids.len(), 1);
    let id = ids[0].clone();
    stop(&w, &fake, &id);
    let dir = w.project_dir().join("sessions").join(&id).join("cassette");
    let manifest: Value = serde_json::from_str(&read_or_empty(&dir.join("manifest.json"))).unwrap();
    assert_eq!(manifest["capture"], "partial", "{}", pretty(&manifest));
    let reason = manifest["capture_reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("the launch failed at a screen"),
        "{}\n{}",
        pretty(&manifest),
        host_log(&w, &id)
    );
}
