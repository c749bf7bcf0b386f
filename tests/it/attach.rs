//! A person at the terminal: `spex attach` and an attached `spex launch` through a PTY the test
//! owns (support/term.rs), reading the screen and the modes left set, for as long as a person
//! would stay.

use std::process::Command;
use std::time::Duration;

use crate::support::term::{Modes, Term};

/// The test terminal itself: it answers a cursor-position query from where the cursor is,
/// types what the test sends, and reads back the modes and the line discipline a program left.
#[test]
fn term_driver_answers_queries_types_and_reads_modes() {
    let script = r#"printf 'abc\033[?25l\033[?2004h\033[?1000h\033=\033[?1h\033[?1049h'
stty raw -echo
printf 'abc\033[6n'
r=$(dd bs=1 count=6 2>/dev/null)
stty sane
printf 'got %s\r\n' "${r#?}"
read line
printf 'read %s\r\n' "$line"
stty raw
sleep 30"#;
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script])
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    let mut t = Term::spawn(&cmd, 10, 40);
    t.wait_for("got [1;4R", Duration::from_secs(10)).unwrap();
    t.send(b"hello\r");
    t.wait_for("read hello", Duration::from_secs(10)).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !t.modes().raw_termios && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        t.modes(),
        Modes {
            cursor_hidden: true,
            bracketed_paste: true,
            alternate_screen: true,
            mouse_reporting: true,
            application_keypad: true,
            application_cursor: true,
            raw_termios: true,
        },
        "{}",
        t.diag()
    );
    assert!(t.running());
    t.resize(20, 60);
    assert!(t.exit_within(Duration::from_millis(100)).is_none());
}

/// The TUI's first screen, from a cold start on a loaded 2-core machine.
const STARTUP: Duration = Duration::from_mins(2);
/// How long a person reads without typing while attached.
const SILENCE: Duration = Duration::from_secs(30);
/// How long leaving may take once asked (a detach key, a stop).
const LEAVE: Duration = Duration::from_secs(30);

/// Every line spex prints when an attached terminal leaves.
const LEAVING_LINES: [&str; 3] = ["[detached from", "[session ", "[disconnected from"];

/// The lines spex printed on leaving in `said` (raw output since a mark).
fn leaving_lines(said: &str) -> usize {
    LEAVING_LINES.iter().map(|l| said.matches(l).count()).sum()
}

/// Waits until the program has exited and its terminal has closed: its last bytes are read.
fn left(t: &mut Term) -> portable_pty::ExitStatus {
    let status = t
        .exit_within(LEAVE)
        .unwrap_or_else(|| panic!("still attached\n{}", t.diag()));
    t.wait_until(LEAVE, |v| v.closed)
        .unwrap_or_else(|e| panic!("the terminal never closed: {e}"));
    status
}

/// The row of the screen that holds `needle`, whole.
fn row_with(t: &Term, needle: &str) -> String {
    t.text()
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no row holds `{needle}`\n{}", t.diag()))
        .trim_end()
        .to_owned()
}

/// An attached `spex launch` of the real Claude stays attached through 30 s in which nothing
/// is typed or drawn (the socket handshake's read timeout once ended it after 10 s, saying the
/// session ended); `Ctrl-\` then detaches with exactly one line, on a clean line, and the
/// terminal is given back as it was (cursor shown, no bracketed paste, mouse, alternate
/// screen or keypad mode, cooked line discipline); the session still runs. A second
/// terminal's `spex attach` then sees the session stopped: exactly one `ended` line, the
/// terminal restored as well.
#[test]
fn attach_stays_through_silence_detaches_with_one_line_and_restores_the_terminal() {
    use crate::runtime::{claude_world, host_log, run_json, screen, spex_cmd, stop};
    use crate::support::claude_home::SeedOptions;

    let (w, fake) = claude_world(SeedOptions::default());
    let mut t = Term::spawn(
        &spex_cmd(&w, &fake, &["launch", "--harness", "claude"]),
        40,
        120,
    );
    t.wait_until(STARTUP, |v| {
        v.text().contains("? for shortcuts") && v.since(0).contains("[attached to")
    })
    .unwrap_or_else(|e| panic!("the attached launch never showed Claude's prompt: {e}"));
    let ids = w.session_ids();
    assert_eq!(ids.len(), 1, "{ids:?}");
    let id = ids[0].clone();
    let _reap = Reap(id.clone());
    let diag = |t: &Term| format!("{}\n{}", t.diag(), host_log(&w, &id));

    // A person reads the screen for 30 s, typing nothing.
    let quiet = t.mark();
    let early = t.wait_until(SILENCE, |v| v.closed || leaving_lines(&v.since(quiet)) > 0);
    assert!(
        early.is_err(),
        "attach left during the silence\n{}",
        diag(&t)
    );
    assert!(t.running(), "attach exited\n{}", diag(&t));
    assert!(t.text().contains("? for shortcuts"), "{}", diag(&t));
    eprintln!(
        "{} bytes drawn during {SILENCE:?} of silence",
        t.mark() - quiet
    );

    let mark = t.mark();
    t.send(&[0x1c]);
    let status = left(&mut t);
    assert!(status.success(), "{status:?}\n{}", diag(&t));
    let said = t.since(mark);
    // People read the handle (the `ID` column), not the full id.
    let handle = w.record(&id)["handle"].as_str().unwrap().to_owned();
    let line = format!("[detached from {handle}; it keeps running]");
    assert_eq!(said.matches(&line).count(), 1, "{said}\n{}", diag(&t));
    assert_eq!(leaving_lines(&said), 1, "one line: {said}");
    assert_eq!(t.modes(), Modes::RESTORED, "{}", diag(&t));
    // On a clean line: the row holds the line alone, and Claude's screen above is intact.
    assert_eq!(row_with(&t, "[detached from"), line, "{}", diag(&t));
    assert!(t.text().contains("? for shortcuts"), "{}", diag(&t));
    // Still running and reachable.
    let shown = run_json(&w, &fake, &["show", &id, "--json"]).unwrap();
    assert_eq!(shown["session"]["live"], true, "{shown}");
    assert_ne!(shown["session"]["status"], "exited", "{shown}");
    assert!(screen(&w, &fake, &id).contains("? for shortcuts"));

    // Attached again from another terminal, the session ends: one `ended` line.
    let mut a = Term::spawn(&spex_cmd(&w, &fake, &["attach", &id]), 40, 120);
    a.wait_for("? for shortcuts", LEAVE)
        .unwrap_or_else(|e| panic!("attach drew no screen: {e}"));
    let mark = a.mark();
    stop(&w, &fake, &id);
    let status = left(&mut a);
    assert!(status.success(), "{status:?}\n{}", diag(&a));
    let said = a.since(mark);
    let line = format!("[session {handle} ended]");
    assert_eq!(said.matches(&line).count(), 1, "{said}\n{}", diag(&a));
    assert_eq!(leaving_lines(&said), 1, "one line: {said}");
    assert_eq!(a.modes(), Modes::RESTORED, "{}", diag(&a));
    assert_eq!(row_with(&a, "[session "), line, "{}", diag(&a));
}

/// `spex replay` of a real Claude session, stopped with Ctrl-C halfway as a person stops it:
/// the terminal is given back as it was (Claude had hidden the cursor and asked for bracketed
/// paste); played to the end, the same.
#[test]
fn replay_gives_the_terminal_back_when_stopped_or_done() {
    let w = crate::support::world::World::new();
    let cassette = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/cassettes/turn")
        .display()
        .to_string();
    // 2.2 s of recording played ten times slower.
    let mut t = Term::spawn(
        &w.cmd(&w.repo, &["replay", &cassette, "--speed", "0.1"]),
        40,
        120,
    );
    t.wait_until(LEAVE, |v| {
        v.screen.hide_cursor() && v.screen.bracketed_paste() && !v.text().trim().is_empty()
    })
    .unwrap_or_else(|e| panic!("the replay drew nothing: {e}"));
    t.send(&[0x03]);
    left(&mut t);
    assert_eq!(t.modes(), Modes::RESTORED, "{}", t.diag());

    let mut t = Term::spawn(
        &w.cmd(&w.repo, &["replay", &cassette, "--collapsed"]),
        40,
        120,
    );
    assert!(left(&mut t).success(), "{}", t.diag());
    assert_eq!(t.modes(), Modes::RESTORED, "{}", t.diag());
}

/// Kills the hosts of session `.0` when dropped (a failed test leaves none running; the
/// harness dies with its terminal).
struct Reap(String);

impl Drop for Reap {
    fn drop(&mut self) {
        for pid in processes_with(&["host", "--session", &self.0]) {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
}

/// The pids of the processes whose command line holds every word of `words`.
fn processes_with(words: &[&str]) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|p| {
            let pid: u32 = p.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(p.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            words.iter().all(|w| cmdline.contains(w)).then_some(pid)
        })
        .collect()
}

/// `$XDG_RUNTIME_DIR` removed while a hosted session runs (as at logout): the session is
/// judged by its host's and harness's processes, not by the socket file. `resume` refuses
/// (with `--force` too) and starts no second harness; `sessions` and `show` say it runs; the
/// host, asked to, listens again, and the session is reached as before.
#[test]
fn a_session_whose_runtime_dir_was_removed_stays_live_and_is_reached_again() {
    use crate::runtime::{claude_world, host_log, launch, run_json, screen, spex_cmd, stop};
    use crate::support::claude_home::SeedOptions;

    let (w, fake) = claude_world(SeedOptions::default());
    let id = launch(&w, &fake);
    let _reap = Reap(id.clone());
    let run = w.dir.path().join("run");
    let socket = run.join("spex").join(format!("{id}.sock"));
    assert!(socket.exists());
    let hosts = || processes_with(&["host", "--session", &id]);
    assert_eq!(hosts().len(), 1, "{}", host_log(&w, &id));
    std::fs::remove_dir_all(&run).unwrap();

    let resumed = spex_cmd(&w, &fake, &["resume", &id, "--detach", "--force"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&resumed.stderr);
    assert!(!resumed.status.success(), "resume ran: {resumed:?}");
    assert!(said.contains("it is running"), "{said}");
    assert_eq!(
        hosts().len(),
        1,
        "a second host started\n{}",
        host_log(&w, &id)
    );

    let list = run_json(&w, &fake, &["sessions", "--json"]).unwrap();
    let row = list
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["id"] == id.as_str()))
        .unwrap_or_else(|| panic!("not listed: {list}"));
    assert_ne!(row["status"], "exited", "{row}");
    let shown = run_json(&w, &fake, &["show", &id, "--json"]).unwrap();
    assert_ne!(shown["session"]["status"], "exited", "{shown}");
    assert_eq!(shown["session"]["live"], true, "{shown}");
    assert!(
        !w.events(&id).iter().any(|e| e["kind"] == "session.exited"),
        "{}",
        host_log(&w, &id)
    );

    // Reached again: the host listens on its socket anew.
    assert!(socket.exists(), "{}", host_log(&w, &id));
    assert!(
        screen(&w, &fake, &id).contains("? for shortcuts"),
        "{}",
        host_log(&w, &id)
    );
    let mut t = Term::spawn(&spex_cmd(&w, &fake, &["attach", &id]), 40, 120);
    t.wait_for("? for shortcuts", LEAVE)
        .unwrap_or_else(|e| panic!("attach after the removal: {e}"));
    t.send(&[0x1c]);
    assert!(left(&mut t).success(), "{}", t.diag());
    stop(&w, &fake, &id);
}

/// With `"record": true`, a session and its resumption are two recordings, each in its own
/// folder: the resume records beside the first cassette (`cassette-2`), which stays byte for
/// byte as it was; both check clean, and `replay <id>` plays the latest.
#[test]
fn a_resumed_recorded_session_never_overwrites_its_first_recording() {
    use crate::runtime::{claude_world, host_log, launch, run_json, stop, wait_screen};
    use crate::support::claude_home::SeedOptions;
    use crate::support::world::{wait_status, write};

    let (w, fake) = claude_world(SeedOptions::default());
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\"], \"record\": true }\n",
    );
    let id = launch(&w, &fake);
    let _reap = Reap(id.clone());
    run_json(
        &w,
        &fake,
        &["deliver", &id, "USE_NONE remember me", "--json"],
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    assert!(wait_screen(&w, &fake, &id, "PLAIN_ANSWER_OK", LEAVE));
    // Claude saves its transcript behind the screen; a conversation resumes once it is saved.
    let transcript = w.record(&id)["transcript"]
        .as_str()
        .map(std::path::PathBuf::from)
        .expect("the hooks named the transcript");
    let saved = std::time::Instant::now() + LEAVE;
    while !crate::support::world::read_or_empty(&transcript).contains("PLAIN_ANSWER_OK")
        && std::time::Instant::now() < saved
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    stop(&w, &fake, &id);
    let session_dir = w.project_dir().join("sessions").join(&id);
    let first = session_dir.join("cassette");
    let files = |dir: &std::path::Path| -> Vec<(String, Vec<u8>)> {
        let mut all: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                (name, std::fs::read(e.path()).unwrap())
            })
            .collect();
        all.sort();
        all
    };
    let before = files(&first);
    let shown =
        |dir: &std::path::Path| crate::support::world::read_or_empty(&dir.join("frames.jsonl"));
    assert!(
        shown(&first).contains("PLAIN_ANSWER_OK"),
        "the turn is in the first recording\n{}",
        host_log(&w, &id)
    );

    run_json(&w, &fake, &["resume", &id, "--detach", "--json"])
        .unwrap_or_else(|e| panic!("{e}\n{}", host_log(&w, &id)));
    wait_status(&w, &id, "idle", LEAVE);
    // The resumed conversation is drawn after the session reports idle; once the screen shows
    // it and stays, the recorder writes that screen as a frame (output paused 500 ms).
    assert!(
        wait_screen(&w, &fake, &id, "remember me", LEAVE),
        "the resumed screen never showed the conversation\n{}",
        host_log(&w, &id)
    );
    let second = session_dir.join("cassette-2");
    let framed = std::time::Instant::now() + LEAVE;
    while !shown(&second).contains("remember me") && std::time::Instant::now() < framed {
        std::thread::sleep(Duration::from_millis(100));
    }
    stop(&w, &fake, &id);
    assert!(files(&first) == before, "the first recording changed");
    let manifest = |dir: &std::path::Path| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
    };
    assert_ne!(manifest(&first)["id"], manifest(&second)["id"]);
    assert!(
        shown(&second).contains("remember me"),
        "the resumed conversation is in the second recording\n{}",
        host_log(&w, &id)
    );
    for dir in [&first, &second] {
        let checked = w.spex(&w.repo, &["cassette", "check", dir.to_str().unwrap()]);
        assert!(checked.status.success(), "{checked:?}");
    }
    let frames = run_json(&w, &fake, &["replay", &id, "--frames"]).unwrap();
    let recorded: Vec<serde_json::Value> = std::fs::read_to_string(second.join("frames.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(frames.as_array().map(Vec::len), Some(recorded.len()));
}
