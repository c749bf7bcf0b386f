//! Watching without disturbing: `spex attach --read-only` from PTYs the test owns, beside a
//! terminal that types, against a real hosted Claude (the fake Anthropic server answers it).
//! The host drops what a watcher sends: its keys never reach the harness, its window sizes
//! never resize the session.

use std::time::Duration;

use crate::runtime::{claude_world, host_log, launch, run_json, screen, spex_cmd, stop};
use crate::support::claude_home::SeedOptions;
use crate::support::term::{Modes, Term};
use crate::support::world::write;

/// The TUI's first screen, from a cold start on a loaded 2-core machine.
const STARTUP: Duration = Duration::from_mins(2);
/// How long an answer, a redraw or leaving may take.
const WAIT: Duration = Duration::from_mins(1);

/// The session's screen size, as its host's model has it.
fn size_of(
    w: &crate::support::world::World,
    fake: &impl crate::runtime::FakeApi,
    id: &str,
) -> (u64, u64) {
    let s = run_json(w, fake, &["snapshot", id, "--json"]).unwrap_or_else(|e| panic!("{e}"));
    (s["rows"].as_u64().unwrap(), s["cols"].as_u64().unwrap())
}

/// Stops session `.0` when dropped, so a failed test leaves no harness running.
struct Stop<'a>(
    &'a crate::support::world::World,
    &'a crate::support::fake_anthropic::FakeAnthropic,
    String,
);

impl Drop for Stop<'_> {
    fn drop(&mut self) {
        let _ = spex_cmd(self.0, self.1, &["stop", &self.2, "--grace", "5"]).output();
    }
}

/// Two terminals watch a recorded Claude session at sizes other than its own and type a prompt
/// and keys into it, and are resized: the harness gets none of it (no turn, no text in its
/// input box) and the session keeps its size. A terminal that attaches normally beside them
/// types a prompt that Claude answers, and both watchers see the answer, drawn at the
/// session's size (the narrower one cropped). Each detaches with one line and its terminal
/// back as it was. The recording notes both watchers joining and leaving as service events,
/// and none of their keys or sizes as input.
#[test]
fn read_only_watchers_cannot_type_or_resize_beside_a_typing_terminal() {
    let (w, fake) = claude_world(SeedOptions::default());
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\"], \"record\": true }\n",
    );
    let id = launch(&w, &fake);
    let _stop = Stop(&w, &fake, id.clone());
    let diag = || host_log(&w, &id);
    let before = size_of(&w, &fake, &id);

    // Wider and taller than the session, and narrower.
    let wide = Term::spawn(
        &spex_cmd(&w, &fake, &["attach", "--read-only", &id]),
        50,
        160,
    );
    let narrow = Term::spawn(
        &spex_cmd(&w, &fake, &["attach", "--read-only", &id]),
        30,
        60,
    );
    for t in [&wide, &narrow] {
        t.wait_until(STARTUP, |v| {
            v.since(0).contains("[watching") && v.text().contains("Claude Code")
        })
        .unwrap_or_else(|e| panic!("a watcher drew no screen: {e}\n{}", diag()));
    }

    // What a person at a watching terminal types: a prompt, a paste, Enter, Ctrl-C.
    for t in [&wide, &narrow] {
        t.send(b"USE_NONE READONLY_TYPED");
        t.send(b"\x1b[200~READONLY_PASTED\x1b[201~");
        t.send(b"\r");
        t.send(&[0x03]);
    }
    wide.resize(20, 50);
    narrow.resize(45, 140);
    std::thread::sleep(Duration::from_secs(3));
    let shown = screen(&w, &fake, &id);
    assert!(
        !shown.contains("READONLY_"),
        "a watcher typed into the session:\n{shown}"
    );
    assert_eq!(
        size_of(&w, &fake, &id),
        before,
        "a watcher resized the session"
    );
    let events = w.events(&id);
    assert!(
        !events.iter().any(|e| e["kind"] == "turn.started"),
        "a watcher's prompt started a turn\n{}",
        diag()
    );
    assert_eq!(w.record(&id)["status"], "idle", "{}", diag());

    // A terminal that types, beside them: its size becomes the session's, its prompt a turn.
    let typing = Term::spawn(&spex_cmd(&w, &fake, &["attach", &id]), 30, 100);
    typing
        .wait_for("? for shortcuts", WAIT)
        .unwrap_or_else(|e| panic!("attach drew no screen: {e}\n{}", diag()));
    let deadline = std::time::Instant::now() + WAIT;
    while size_of(&w, &fake, &id) != (30, 100) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(size_of(&w, &fake, &id), (30, 100));
    typing.send(b"USE_NONE typed at the terminal");
    std::thread::sleep(Duration::from_millis(300));
    typing.send(b"\r");
    typing
        .wait_for("PLAIN_ANSWER_OK", WAIT)
        .unwrap_or_else(|e| panic!("the typed prompt got no answer: {e}\n{}", diag()));
    for t in [&wide, &narrow] {
        t.wait_for("PLAIN_ANSWER_OK", WAIT)
            .unwrap_or_else(|e| panic!("a watcher never saw the answer: {e}\n{}", diag()));
    }
    assert!(!screen(&w, &fake, &id).contains("READONLY_"));
    // Drawn at the session's size (100 columns): the first watcher, resized to 50 columns,
    // shows the session's rows cut at 50; the second, resized to 140, shows them whole.
    let session = screen(&w, &fake, &id);
    let row = session
        .lines()
        .find(|l| l.contains("PLAIN_ANSWER_OK"))
        .unwrap()
        .trim_end()
        .to_owned();
    let cut: String = row.chars().take(50).collect();
    let wide_rows = wide.text();
    assert!(
        wide_rows.lines().any(|l| l.trim_end() == cut.trim_end()),
        "`{cut}` not a row of the 50-column watcher:\n{wide_rows}"
    );
    assert!(
        narrow.text().lines().any(|l| l.trim_end() == row),
        "`{row}` not a row of the 140-column watcher:\n{}",
        narrow.text()
    );

    let handle = w.record(&id)["handle"].as_str().unwrap().to_owned();
    for mut t in [wide, narrow] {
        let mark = t.mark();
        t.send(&[0x1c]);
        let status = t
            .exit_within(WAIT)
            .unwrap_or_else(|| panic!("still watching\n{}", t.diag()));
        assert!(status.success(), "{status:?}");
        t.wait_until(WAIT, |v| v.closed).unwrap();
        let said = t.since(mark);
        let line = format!("[detached from {handle}; it keeps running]");
        assert_eq!(said.matches(&line).count(), 1, "{said}");
        assert_eq!(t.modes(), Modes::RESTORED, "{}", t.diag());
    }
    // The typing terminal is still the session's.
    typing.send(b"USE_NONE still here");
    std::thread::sleep(Duration::from_millis(300));
    typing.send(b"\r");
    let deadline = std::time::Instant::now() + WAIT;
    while w
        .events(&id)
        .iter()
        .filter(|e| e["kind"] == "turn.started")
        .count()
        < 2
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        w.events(&id)
            .iter()
            .filter(|e| e["kind"] == "turn.started")
            .count(),
        2,
        "{}",
        diag()
    );
    let mut typing = typing;
    typing.send(&[0x1c]);
    typing.exit_within(WAIT);
    stop(&w, &fake, &id);

    // The recording: two watchers joined and left, as service events; none of their keys,
    // pastes or sizes are input.
    let cassette = w.project_dir().join("sessions").join(&id).join("cassette");
    let read = |name: &str| std::fs::read_to_string(cassette.join(name)).unwrap();
    let service = read("service-events.jsonl");
    assert_eq!(
        service.matches("\"observer.joined\"").count(),
        2,
        "{service}"
    );
    assert_eq!(service.matches("\"observer.left\"").count(), 2, "{service}");
    let input = read("input.jsonl");
    assert!(!input.contains("READONLY_"), "{input}");
    for (rows, cols) in [(50, 160), (30, 60), (20, 50), (45, 140)] {
        assert!(
            !input.contains(&format!("\"rows\":{rows},\"cols\":{cols}")),
            "a watcher's size is in the recording: {input}"
        );
    }
    assert!(input.contains("typed at the terminal"), "{input}");
    let checked = w.spex(&w.repo, &["cassette", "check", cassette.to_str().unwrap()]);
    assert!(checked.status.success(), "{checked:?}");
}
