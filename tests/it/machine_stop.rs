//! After the machine stopped (a reboot, a crash): the sessions that were live read `exited`,
//! reason `machine stopped` (never `host gone` or `process gone`), and `spex resume
//! --all-stopped` brings every one of them back in every project, with the real Claude Code
//! against the fake Anthropic API, listing what it could not resume and why. A reboot is
//! simulated by killing the sessions' processes and giving spex another boot id through
//! `SPEX_BOOT_ID_FILE` (a test-only override of `/proc/sys/kernel/random/boot_id`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::runtime::{host_log, spex_cmd, std_dirs};
use crate::support::claude_home::{DUMMY_API_KEY, SeedOptions, seed_claude_home};
use crate::support::fake_anthropic::FakeAnthropic;
use crate::support::world::{World, git, json_result, pretty, read_or_empty, write};

/// spex as after the reboot: this machine's boot id is the one in `boot`.
fn after_reboot(w: &World, fake: &FakeAnthropic, boot: &Path, cwd: &Path, args: &[&str]) -> Output {
    let mut c = spex_cmd(w, fake, args);
    c.current_dir(cwd).env("SPEX_BOOT_ID_FILE", boot);
    c.output().expect("spex runs")
}

fn json_after_reboot(
    w: &World,
    fake: &FakeAnthropic,
    boot: &Path,
    cwd: &Path,
    args: &[&str],
) -> Value {
    let out = after_reboot(w, fake, boot, cwd, args);
    json_result(args, &out).unwrap_or_else(|e| panic!("{e}"))
}

/// A second project beside the world's repo, selecting Claude too.
fn second_project(w: &World) -> PathBuf {
    let other = w.dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let other = std::fs::canonicalize(other).unwrap();
    git(&other, &["init", "-q", "-b", "main"]);
    write(
        &other.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\"] }\n",
    );
    other
}

/// A Claude session launched in `cwd`, with one turn answered and saved in its transcript
/// (`prompt`), unless `prompt` is `None`: its id, host pid and program pid.
fn session(
    w: &World,
    fake: &FakeAnthropic,
    cwd: &Path,
    prompt: Option<&str>,
) -> (String, i64, i64) {
    let mut launch = spex_cmd(w, fake, &["launch", "--detach", "--json"]);
    launch.current_dir(cwd);
    let args = ["launch", "--detach", "--json"];
    let launched = json_result(&args, &launch.output().unwrap()).unwrap_or_else(|e| panic!("{e}"));
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let pids = (
        launched["session"]["host_pid"].as_i64().unwrap(),
        launched["session"]["child_pid"].as_i64().unwrap(),
    );
    if let Some(prompt) = prompt {
        let mut d = spex_cmd(w, fake, &["deliver", &id, prompt, "--json"]);
        d.current_dir(cwd);
        let out = d.output().unwrap();
        json_result(&["deliver"], &out).unwrap_or_else(|e| panic!("{e}\n{}", host_log(w, &id)));
        // Claude writes its transcript behind the screen: a conversation not saved yet
        // cannot be resumed.
        let deadline = Instant::now() + Duration::from_mins(1);
        let saved = || {
            let store = project_of(w, &id);
            let rec: Value = serde_json::from_str(&read_or_empty(
                &store.join("sessions").join(&id).join("session.json"),
            ))
            .unwrap_or_default();
            rec["turn"]["state"] == "completed"
                && rec["transcript"]
                    .as_str()
                    .is_some_and(|t| read_or_empty(Path::new(t)).contains("PLAIN_ANSWER_OK"))
        };
        while !saved() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(saved(), "the turn was never saved:\n{}", host_log(w, &id));
    }
    (id, pids.0, pids.1)
}

/// The store folder of the project holding session `id`.
fn project_of(w: &World, id: &str) -> PathBuf {
    std::fs::read_dir(w.spex_home.join("projects"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.join("sessions").join(id).is_dir())
        .unwrap_or_else(|| panic!("no project holds {id}"))
}

fn record_of(w: &World, id: &str) -> Value {
    let path = project_of(w, id)
        .join("sessions")
        .join(id)
        .join("session.json");
    serde_json::from_str(&read_or_empty(&path)).unwrap()
}

fn events_of(w: &World, id: &str) -> Vec<Value> {
    let path = project_of(w, id)
        .join("sessions")
        .join(id)
        .join("events.jsonl");
    read_or_empty(&path)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Every one of `pids` gone at once, as in a machine's stop: all stopped first, then killed in
/// the order given (harnesses before their hosts), then waited for until none runs. On a
/// loaded machine, a harness whose host died first had its terminal hung up, which sends it
/// SIGHUP and SIGCONT even when stopped, and it exited through its own end hook before its
/// SIGKILL came (recorded on this boot: not `machine stopped`, so not resumed, or still
/// exiting when `resume` looked and rightly refused as a harness that still runs the
/// conversation). No machine's stop allows either.
fn kill_at_once(pids: &[i64]) {
    for signal in ["-STOP", "-KILL"] {
        let status = Command::new("kill")
            .arg(signal)
            .args(pids.iter().map(ToString::to_string))
            .status()
            .unwrap();
        assert!(status.success(), "kill {signal} {pids:?}");
    }
    // Gone: no process, or a zombie (dead, its parent gone too, waiting for init).
    let runs = |pid: &i64| {
        let stat = read_or_empty(Path::new(&format!("/proc/{pid}/stat")));
        stat.rfind(')')
            .is_some_and(|i| !stat[i + 1..].trim_start().starts_with('Z'))
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while pids.iter().any(runs) {
        assert!(Instant::now() < deadline, "still running: {pids:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sessions_live_before_a_reboot_read_machine_stopped_and_resume_all_stopped_brings_them_back() {
    let w = World::new();
    std_dirs(&w);
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\"] }\n",
    );
    let other = second_project(&w);
    seed_claude_home(
        &w.home,
        DUMMY_API_KEY,
        &[&w.repo, &other],
        SeedOptions::default(),
    );
    w.ok(&w.repo, &["materialize"]);
    w.ok(&other, &["materialize"]);
    let fake = FakeAnthropic::start();
    let booted = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();

    let (first, first_host, first_child) =
        session(&w, &fake, &w.repo, Some("USE_NONE remember me"));
    let (second, second_host, second_child) =
        session(&w, &fake, &other, Some("USE_NONE remember me too"));
    // Killed before any prompt: Claude saved no conversation, so it cannot be resumed.
    let (unsaved, unsaved_host, unsaved_child) = session(&w, &fake, &w.repo, None);
    for id in [&first, &second, &unsaved] {
        assert_eq!(
            record_of(&w, id)["boot_id"],
            booted.trim(),
            "{}",
            pretty(&record_of(&w, id))
        );
    }

    // The machine stops: every process is gone at once, nothing recorded it, and the
    // machine comes back with another boot id.
    kill_at_once(&[
        first_child,
        second_child,
        unsaved_child,
        first_host,
        second_host,
        unsaved_host,
    ]);
    let boot = w.dir.path().join("boot_id");
    write(&boot, "0f3e5d1c-2b4a-4c6e-8f7a-9b1c3d5e7f90\n");

    let shown = json_after_reboot(&w, &fake, &boot, &w.repo, &["show", &first, "--json"]);
    let s = &shown["session"];
    assert_eq!(
        (&s["status"], &s["exit_reason"]),
        (&Value::from("exited"), &Value::from("machine stopped")),
        "{}",
        pretty(&shown)
    );
    assert!(
        s["why"]
            .as_str()
            .is_some_and(|w| w.contains("machine restarted")),
        "{}",
        pretty(&shown)
    );
    let exited: Vec<Value> = events_of(&w, &first)
        .into_iter()
        .filter(|e| e["kind"] == "session.exited")
        .collect();
    assert_eq!(exited.len(), 1, "{exited:?}");
    assert_eq!(exited[0]["reason"], "machine stopped");

    // A command that reaches for a stopped session's host says how it ended, not that its
    // host was killed or crashed.
    let out = after_reboot(&w, &fake, &boot, &other, &["snapshot", &second]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("machine stopped") && !said.contains("crashed"),
        "{said}"
    );

    // From outside any project: every project's stopped sessions, the one that cannot come
    // back listed with why, and a non-zero exit for it.
    let args = ["resume", "--all-stopped", "--json"];
    let out = after_reboot(&w, &fake, &boot, w.dir.path(), &args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{text}\n{stderr}");
    // Each failure's reason is in the listing (stdout), not in stderr.
    assert!(stderr.contains("1 of 3 sessions"), "{stderr}\n{text}");
    let listed: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let ids = |k: &str| -> Vec<String> {
        let mut v: Vec<String> = listed[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect();
        v.sort();
        v
    };
    let mut both = vec![first.clone(), second.clone()];
    both.sort();
    assert_eq!(ids("resumed"), both, "{}", pretty(&listed));
    assert_eq!(
        ids("failed"),
        std::slice::from_ref(&unsaved),
        "{}",
        pretty(&listed)
    );
    let failed = &listed["failed"][0];
    assert!(
        failed["error"]
            .as_str()
            .is_some_and(|e| e.contains("No conversation found"))
            && failed["harness"] == "claude",
        "{}",
        pretty(&listed)
    );
    let projects: Vec<&str> = listed["resumed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["project"].as_str().unwrap())
        .collect();
    assert!(
        projects.contains(&"repo") && projects.contains(&"other"),
        "{projects:?}"
    );

    // Each came back with its conversation, on this boot, and takes a prompt.
    for (id, cwd, said) in [
        (&first, &w.repo, "remember me"),
        (&second, &other, "remember me too"),
    ] {
        let rec = record_of(&w, id);
        assert_eq!(
            rec["status"],
            "idle",
            "{}\n{}",
            pretty(&rec),
            host_log(&w, id)
        );
        assert_eq!(rec["boot_id"], "0f3e5d1c-2b4a-4c6e-8f7a-9b1c3d5e7f90");
        let snap = json_after_reboot(&w, &fake, &boot, cwd, &["snapshot", id, "--json"]);
        let screen = crate::support::world::screen_text(&snap["lines"]);
        assert!(
            screen.contains(said),
            "the conversation came back:\n{screen}"
        );
        let d = json_after_reboot(
            &w,
            &fake,
            &boot,
            cwd,
            &["deliver", id, "USE_NONE and again", "--json"],
        );
        assert_eq!(d["confirmed"], true, "{}", pretty(&d));
        let stopped = json_after_reboot(
            &w,
            &fake,
            &boot,
            cwd,
            &["stop", id, "--json", "--grace", "5"],
        );
        assert_eq!(stopped["status"], "exited", "{}", pretty(&stopped));
        let events = events_of(&w, id);
        crate::support::world::assert_grammar(&record_of(&w, id), &events, &|| host_log(&w, id));
        assert!(
            !events
                .iter()
                .any(|e| e["reason"] == "host gone" || e["reason"] == "process gone"),
            "{events:?}"
        );
    }

    // Nothing is left for a second run to resume.
    let out = after_reboot(&w, &fake, &boot, w.dir.path(), &["resume", "--all-stopped"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "no session was ended by the machine's stop\n"
    );
}
