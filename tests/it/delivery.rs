//! A prompt delivered into a hosted REAL Claude Code (offline against the fake Anthropic API)
//! is typed once, even when the harness takes its keys late: a just-resumed Claude that read
//! no keys for a while (busy, on a loaded machine) still showed its box empty 2 s later, spex
//! typed the prompt again, and Claude then took both copies at once, into one prompt never
//! confirmed. Fails, never skips.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::runtime::{claude_world, host_log, run_json, screen, spex_cmd, stop};
use crate::support::claude_home::SeedOptions;
use crate::support::world::{json_result, pretty, read_or_empty, wait_status};

#[test]
fn a_prompt_to_a_just_resumed_claude_that_takes_keys_late_is_typed_once() {
    let (w, fake) = claude_world(SeedOptions::default());
    let id = crate::runtime::launch(&w, &fake);
    run_json(
        &w,
        &fake,
        &["deliver", &id, "USE_NONE remember me", "--json"],
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    wait_status(&w, &id, "idle", Duration::from_mins(1));
    // Claude writes its transcript behind the screen: a conversation not saved yet cannot be
    // resumed.
    let transcript = w.record(&id)["transcript"]
        .as_str()
        .map(std::path::PathBuf::from)
        .expect("the hooks named the transcript");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !read_or_empty(&transcript).contains("PLAIN_ANSWER_OK") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    stop(&w, &fake, &id);

    let resumed = run_json(&w, &fake, &["resume", &id, "--detach", "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    let claude = resumed["session"]["child_pid"]
        .as_i64()
        .unwrap()
        .to_string();
    // Claude busy elsewhere (loading what it resumed, on a loaded machine) reads no keys for a
    // while: stopped, it takes what was typed meanwhile all at once when it goes on.
    let signal = |sig: &str| {
        assert!(
            Command::new("kill")
                .args([sig, &claude])
                .status()
                .unwrap()
                .success()
        );
    };
    // Shorter than the host waits to see a paste drawn before its Enter, then longer.
    for (secs, prompt) in [
        (3, "USE_NONE say it only once"),
        (7, "USE_NONE and this one once too"),
    ] {
        signal("-STOP");
        let deliver = spex_cmd(&w, &fake, &["deliver", &id, prompt, "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_secs(secs));
        signal("-CONT");
        let out = deliver.wait_with_output().unwrap();
        let d = json_result(&["deliver"], &out)
            .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
        assert_eq!(d["confirmed"], true, "{}", pretty(&d));
        wait_status(&w, &id, "idle", Duration::from_mins(1));
        // Long enough for a second copy, had one been typed, to be taken up and sent on.
        std::thread::sleep(Duration::from_secs(3));

        let started: Vec<Value> = w
            .events(&id)
            .into_iter()
            .filter(|e| e["kind"] == "turn.started" && e["prompt"] == prompt)
            .collect();
        assert_eq!(
            started.len(),
            1,
            "stopped {secs} s: {}\n{}",
            pretty(&Value::from(started.clone())),
            host_log(&w, &id)
        );
        // What the model received: in no request does the conversation hold it twice.
        let most = fake
            .requests()
            .iter()
            .filter(|r| r["answered"] != "title" && r["answered"] != "side")
            .map(|r| r["body"].to_string().matches(&prompt[9..]).count())
            .max()
            .unwrap_or_default();
        assert_eq!(
            most,
            1,
            "stopped {secs} s:\n{}\n{}\n{}",
            fake.request_lines().join("\n"),
            screen(&w, &fake, &id),
            host_log(&w, &id)
        );
    }
    // The first typed once (seen in the box before its Enter); the second, never drawn before
    // spex looked again, asked to be typed again: typed only over a box cleared whatever it
    // showed, or not at all when the screen by then showed Claude took the first copy (the log
    // starts at the resume). Beyond that at most an Enter (no text) went.
    let log = host_log(&w, &id);
    let asked = log.matches("+ submit").count() - log.matches("inject 0 bytes").count();
    let again = log.matches("cleared the input box blindly").count()
        + log.matches("not typed again").count();
    assert!((2..=3).contains(&asked) && again == asked - 2, "{log}");
    stop(&w, &fake, &id);
}
