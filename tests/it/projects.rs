//! Every project at once: `spex sessions --all-projects` (and outside any repository) with its
//! `PROJECT` column, attention first; a session named from anywhere (a handle outside its
//! checkout, `project/handle`, an ambiguous word refused with its candidates); `sessions
//! --watch` redrawing in a PTY the test owns and leaving the terminal as it found it. The real
//! harnesses run against the fake model servers; hook-fed sessions (`spex dispatch`) pin
//! handles the harnesses' random ids cannot.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::runtime::{FakeApi, std_dirs, wait_screen};
use crate::support::claude_home::{DUMMY_API_KEY, SeedOptions, seed_claude_home};
use crate::support::codex_home::write_codex_config;
use crate::support::fake_anthropic::FakeAnthropic;
use crate::support::fake_responses::FakeResponses;
use crate::support::peers::peers_path;
use crate::support::term::{Modes, Term};
use crate::support::world::{World, git, json_result, merged, pretty, read_or_empty, write};

/// A second repository beside the world's (`<tmp>/repo`), its project named `name`.
fn second_repo(w: &World, name: &str) -> PathBuf {
    let path = w.repo.parent().unwrap().join(name);
    std::fs::create_dir_all(&path).unwrap();
    git(&path, &["init", "-q", "-b", "main"]);
    path
}

/// A folder that is in no repository.
fn elsewhere(w: &World) -> PathBuf {
    let path = w.repo.parent().unwrap().join("elsewhere");
    std::fs::create_dir_all(&path).unwrap();
    path
}

/// `spex` in `cwd` with what the real harnesses need (the peers on PATH, the fake API, a short
/// runtime dir for the session sockets).
fn spex_in(w: &World, fake: &FakeAnthropic, cwd: &Path, args: &[&str]) -> Command {
    let mut c = w.cmd(cwd, args);
    c.env("PATH", peers_path())
        .envs(fake.env())
        .env("XDG_RUNTIME_DIR", w.dir.path().join("run"))
        // What Codex needs against the fake Responses server (`write_codex_config`).
        .env("FAKE_API_KEY", "dummy")
        .env("OPENAI_API_KEY", "sk-dummy")
        .env("RUST_LOG", "warn");
    c
}

fn json_in(w: &World, fake: &FakeAnthropic, cwd: &Path, args: &[&str]) -> Value {
    let out = spex_in(w, fake, cwd, args).output().unwrap();
    json_result(args, &out).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs spex in `cwd`; its exit code, stdout and stderr.
fn said(c: &mut Command) -> (Option<i32>, String, String) {
    let out = c.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The rows of a table as words, header first.
fn rows(table: &str) -> Vec<Vec<&str>> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect()
}

/// A Claude session fed through `spex dispatch` in `repo`, with a turn started.
fn hooked(w: &World, repo: &Path, id: &str, event: &str, extra: &Value) {
    let base = json!({ "session_id": id, "cwd": repo, "hook_event_name": event });
    let out = w.dispatch(repo, "claude", event, &merged(&base, extra));
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
}

/// The folder of session `id`, in whichever project's store it is.
fn session_dir(w: &World, id: &str) -> PathBuf {
    w.all_session_dirs()
        .into_iter()
        .find(|d| d.file_name().is_some_and(|n| n == id))
        .unwrap_or_else(|| panic!("no session {id} in {}", w.spex_home.display()))
}

/// What a failure needs of session `id`: its record, events and host log.
fn diag(w: &World, id: &str) -> String {
    let dir = session_dir(w, id);
    format!(
        "--- record:\n{}\n--- events:\n{}\n--- host.log:\n{}",
        read_or_empty(&dir.join("session.json")),
        read_or_empty(&dir.join("events.jsonl")),
        read_or_empty(&dir.join("host.log"))
    )
}

/// The record of `id` once its status is `status` (checked every 50 ms for `timeout`).
fn until_status(w: &World, id: &str, status: &str, timeout: Duration) -> Value {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let text = read_or_empty(&session_dir(w, id).join("session.json"));
        if let Ok(r) = serde_json::from_str::<Value>(&text)
            && r["status"] == status
        {
            return r;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "session {id} not `{status}` within {timeout:?}\n{}",
            diag(w, id)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn real_sessions_of_three_projects_listed_attention_first_and_named_from_anywhere() {
    let w = World::new();
    std_dirs(&w);
    let lib = second_repo(&w, "lib");
    let svc = second_repo(&w, "svc");
    for repo in [&w.repo, &lib] {
        write(
            &repo.join("spex.jsonc"),
            "{ \"harnesses\": [\"claude\"] }\n",
        );
    }
    write(&svc.join("spex.jsonc"), "{ \"harnesses\": [\"codex\"] }\n");
    git(&svc, &["commit", "-q", "--allow-empty", "-m", "base"]);
    seed_claude_home(
        &w.home,
        DUMMY_API_KEY,
        &[&w.repo, &lib],
        SeedOptions::default(),
    );
    let responses = FakeResponses::start_with_hang_limit(Duration::from_mins(1));
    let url = responses.base_url();
    write_codex_config(&w.codex_home, &url, "on-request", "workspace-write");
    for repo in [&w.repo, &lib, &svc] {
        w.ok(repo, &["materialize"]);
    }
    let fake = FakeAnthropic::start();
    let outside = elsewhere(&w);
    let launch = |repo: &Path, harness: &str, extra: &[&str]| -> String {
        let mut args = vec!["launch", "--harness", harness, "--detach", "--json"];
        args.extend_from_slice(extra);
        json_in(&w, &fake, repo, &args)["session"]["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let app_id = launch(&w.repo, "claude", &[]);
    let lib_id = launch(&lib, "claude", &[]);
    // Each by its full id, from outside any checkout.
    let handle = |id: &str| {
        json_in(&w, &fake, &outside, &["show", id, "--json"])["session"]["handle"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (app, lib_handle) = (handle(&app_id), handle(&lib_id));

    // In `repo`: one finished turn (idle). In `lib`: a Bash call held at Claude's permission
    // dialog (it needs a person).
    let args = [
        "deliver",
        &app_id,
        "USE_NONE say hi",
        "--wait-until",
        "done",
        "--json",
    ];
    json_in(&w, &fake, &w.repo, &args);
    until_status(&w, &app_id, "idle", Duration::from_mins(1));
    json_in(
        &w,
        &fake,
        &lib,
        &["deliver", &lib_id, "USE_BASH run it", "--json"],
    );
    until_status(&w, &lib_id, "needs_attention", Duration::from_mins(1));
    // `wait_screen` runs `spex snapshot` in the world's repo: another project's session.
    let dialog = "Do you want to proceed?";
    assert!(
        wait_screen(&w, &fake, &lib_id, dialog, Duration::from_secs(20)),
        "{}",
        diag(&w, &lib_id)
    );
    // In `svc`, later: a Codex command held for approval by its app server.
    let svc_id = launch(&svc, "codex", &["SCENARIO:escalate"]);
    let svc_handle = handle(&svc_id);
    let r = until_status(&w, &svc_id, "needs_attention", Duration::from_mins(1));
    assert_eq!(r["attention"]["via"]["how"], "server", "{}", pretty(&r));

    // Outside any repository: every project, attention first (the oldest attention first),
    // with the PROJECT column.
    let (code, table, err) = said(&mut spex_in(&w, &fake, &outside, &["sessions"]));
    assert_eq!(code, Some(0), "{table}{err}");
    let r = rows(&table);
    assert_eq!(
        r[0][..5],
        ["PROJECT", "ID", "NAME", "HARNESS", "STATUS"],
        "{table}"
    );
    assert_eq!(r.len(), 4, "{table}");
    let want = [
        ["lib", &lib_handle, "-", "claude", "needs_attention"],
        ["svc", &svc_handle, "-", "codex", "needs_attention"],
        ["repo", &app, "-", "claude", "idle"],
    ];
    for (row, want) in r[1..].iter().zip(&want) {
        assert_eq!(row[..5], want[..], "attention first:\n{table}");
    }
    // Inside a repository the default stays that project; `--all-projects` lists all three.
    let (_, here, _) = said(&mut spex_in(&w, &fake, &w.repo, &["sessions"]));
    assert_eq!(rows(&here).len(), 2, "{here}");
    assert!(!here.contains("PROJECT") && here.contains(&app), "{here}");
    let args = ["sessions", "--all-projects"];
    let (_, both, _) = said(&mut spex_in(&w, &fake, &w.repo, &args));
    let firsts = |t: &str| -> Vec<Vec<String>> {
        rows(t)
            .iter()
            .map(|r| r[..5].iter().map(|c| (*c).to_owned()).collect())
            .collect()
    };
    assert_eq!(
        firsts(&both),
        firsts(&table),
        "the same table from anywhere:\n{both}"
    );
    let args = ["sessions", "--all-projects", "--json"];
    let listed = json_in(&w, &fake, &outside, &args);
    let projects: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["project"].as_str().unwrap())
        .collect();
    let want = [&lib, &svc, &w.repo].map(|p| p.to_str().unwrap());
    assert_eq!(projects, want, "{}", pretty(&listed));

    // A handle used outside its checkout: shown, then its dialog answered; the tool runs in
    // its own repository.
    let shown = json_in(&w, &fake, &outside, &["show", &lib_handle, "--json"]);
    assert_eq!(shown["session"]["id"], lib_id.as_str());
    let (code, o, e) = said(&mut spex_in(&w, &fake, &outside, &["approve", &lib_handle]));
    assert_eq!(code, Some(0), "approve outside its checkout:\n{o}{e}");
    let done = until_status(&w, &lib_id, "idle", Duration::from_mins(1));
    assert_eq!(done["turn"]["state"], "completed", "{}", pretty(&done));
    assert!(
        lib.join("bash_out.txt").exists(),
        "the approved command did not run"
    );
    // The Codex approval too, from the Claude project's checkout.
    let (code, o, e) = said(&mut spex_in(&w, &fake, &w.repo, &["approve", &svc_handle]));
    assert_eq!(
        code,
        Some(0),
        "approve from another project's checkout:\n{o}{e}"
    );
    let ran = read_or_empty(&svc.join("escalated.txt"));
    assert_eq!(ran, "escalated\n", "{}", diag(&w, &svc_id));

    // One name in two projects: refused outside, listing both as `project/handle`; each
    // checkout finds its own first; `project/name` and `project/handle` always work.
    for id in [&app_id, &lib_id] {
        let (code, o, e) = said(&mut spex_in(&w, &fake, &outside, &["rename", id, "twin"]));
        assert_eq!(code, Some(0), "rename {id} outside its checkout:\n{o}{e}");
    }
    let (code, o, e) = said(&mut spex_in(&w, &fake, &outside, &["show", "twin"]));
    assert_eq!(code, Some(2), "{o}{e}");
    assert!(o.is_empty(), "{o}");
    assert!(
        e.contains("`twin` matches sessions of several projects")
            && e.contains(&format!("lib/{lib_handle}"))
            && e.contains(&format!("repo/{app}"))
            && e.contains("hint: name one as `project/handle`"),
        "{e}"
    );
    let id_of = |cwd: &Path, word: &str| {
        json_in(&w, &fake, cwd, &["show", word, "--json"])["session"]["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(id_of(&w.repo, "twin"), app_id, "this project's first");
    assert_eq!(id_of(&lib, "twin"), lib_id, "this project's first");
    assert_eq!(id_of(&outside, "lib/twin"), lib_id);
    assert_eq!(id_of(&w.repo, &format!("lib/{lib_handle}")), lib_id);
    assert_eq!(id_of(&outside, &format!("repo/{app}")), app_id);

    // Each stopped from outside by `project/handle`.
    for word in [
        format!("repo/{app}"),
        format!("lib/{lib_handle}"),
        format!("svc/{svc_handle}"),
    ] {
        let args = ["stop", &word, "--grace", "5"];
        let (code, o, e) = said(&mut spex_in(&w, &fake, &outside, &args));
        assert_eq!(code, Some(0), "stop {word}:\n{o}{e}");
    }
    for id in [&app_id, &lib_id, &svc_id] {
        until_status(&w, id, "exited", Duration::from_secs(30));
    }
    let _ = spex_in(&w, &fake, &svc, &["server", "stop"]).output();
}

/// Two sessions whose ids end alike: each project gives its session the handle `beef`.
const APP_BEEF: &str = "11111111-2222-4333-8444-00000000beef";
const LIB_BEEF: &str = "22222222-2222-4333-8444-00000000beef";

#[test]
fn one_handle_in_two_projects_is_refused_outside_with_candidates_and_project_handle_works() {
    let w = World::new();
    let lib = second_repo(&w, "lib");
    let outside = elsewhere(&w);
    hooked(
        &w,
        &w.repo,
        APP_BEEF,
        "UserPromptSubmit",
        &json!({ "prompt": "one" }),
    );
    hooked(
        &w,
        &lib,
        LIB_BEEF,
        "UserPromptSubmit",
        &json!({ "prompt": "two" }),
    );
    // Listing claims the handles: `beef` in each project.
    let listed = w.ok(&outside, &["sessions"]);
    let r = rows(&listed);
    assert_eq!(r.len(), 3, "{listed}");
    assert!(r[1..].iter().all(|row| row[1] == "beef"), "{listed}");

    let out = w.spex(&outside, &["show", "beef"]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(out.stdout.is_empty());
    assert!(
        e.contains("error: `beef` matches sessions of several projects: lib/beef, repo/beef")
            && e.contains("hint: name one as `project/handle`")
            && e.contains("e.g. `lib/beef`"),
        "{e}"
    );
    // The hint works as printed.
    let shown: Value =
        serde_json::from_str(&w.ok(&outside, &["show", "lib/beef", "--json"])).unwrap();
    assert_eq!(shown["session"]["id"], LIB_BEEF);
    // Inside a checkout its own `beef` comes first; the other by `project/handle`.
    let id = |cwd: &Path, word: &str| -> Value {
        serde_json::from_str::<Value>(&w.ok(cwd, &["show", word, "--json"])).unwrap()["session"]["id"].clone()
    };
    assert_eq!(id(&w.repo, "beef"), APP_BEEF);
    assert_eq!(id(&lib, "beef"), LIB_BEEF);
    assert_eq!(id(&w.repo, "lib/beef"), LIB_BEEF);
    assert_eq!(id(&outside, "repo/beef"), APP_BEEF);
    // By the checkout's path too (what `PROJECT` shows when two checkouts share a name).
    assert_eq!(id(&outside, &format!("{}/beef", lib.display())), LIB_BEEF);
    // A unique prefix of a full id, from anywhere; a project that does not exist.
    assert_eq!(id(&outside, "2222"), LIB_BEEF);
    let out = w.spex(&outside, &["show", "nope/beef"]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(
        e.contains("no project `nope` has sessions in the store")
            && e.contains("hint: the projects with sessions: lib, repo"),
        "{e}"
    );
    // Completion outside any checkout offers every project's live sessions as `project/handle`.
    let out = w
        .cmd(&outside, &["--", "spex", "show", ""])
        .env("COMPLETE", "fish")
        .output()
        .unwrap();
    let offered = String::from_utf8_lossy(&out.stdout);
    let values: Vec<&str> = offered
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .filter(|v| !v.starts_with('-'))
        .collect();
    assert_eq!(values.len(), 2, "{offered}");
    assert!(
        values.contains(&"lib/beef") && values.contains(&"repo/beef"),
        "{offered}"
    );
    // `events SESSION` reads the stream of the session's own project.
    let events = w.ok(&outside, &["events", "lib/beef", "--json"]);
    assert!(
        !events.is_empty() && events.lines().all(|l| l.contains(LIB_BEEF)),
        "{events}"
    );
}

#[test]
fn two_checkouts_with_one_folder_name_are_told_apart_by_path() {
    let w = World::new();
    let a = second_repo(&w, "a");
    let b = second_repo(&w, "b");
    let (app_a, app_b) = (a.join("app"), b.join("app"));
    for p in [&app_a, &app_b] {
        std::fs::create_dir_all(p).unwrap();
        git(p, &["init", "-q", "-b", "main"]);
    }
    hooked(
        &w,
        &app_a,
        APP_BEEF,
        "UserPromptSubmit",
        &json!({ "prompt": "one" }),
    );
    hooked(
        &w,
        &app_b,
        LIB_BEEF,
        "UserPromptSubmit",
        &json!({ "prompt": "two" }),
    );
    let listed = w.ok(&w.repo, &["sessions", "--all-projects"]);
    let firsts: Vec<&str> = rows(&listed)[1..].iter().map(|r| r[0]).collect();
    let mut want = [app_a.to_str().unwrap(), app_b.to_str().unwrap()];
    want.sort_unstable();
    let mut got = firsts.clone();
    got.sort_unstable();
    assert_eq!(got, want, "{listed}");
    let out = w.spex(&w.repo, &["show", "beef"]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains(&format!("{}/beef", app_a.display()))
            && e.contains(&format!("{}/beef", app_b.display())),
        "{e}"
    );
}

/// Waits until the terminal's screen shows `needle`; the diagnostics otherwise.
fn shows(t: &Term, needle: &str) {
    t.wait_for(needle, Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn sessions_watch_redraws_on_a_change_and_ctrl_c_leaves_the_terminal_as_it_was() {
    let w = World::new();
    let lib = second_repo(&w, "lib");
    let outside = elsewhere(&w);
    hooked(
        &w,
        &w.repo,
        APP_BEEF,
        "UserPromptSubmit",
        &json!({ "prompt": "first prompt" }),
    );
    let cmd = w.cmd(&outside, &["sessions", "--watch", "--all-projects"]);
    let mut t = Term::spawn(&cmd, 30, 200);
    shows(&t, "first prompt");
    assert!(
        t.modes().alternate_screen && t.modes().cursor_hidden,
        "{}",
        t.diag()
    );
    let mark = t.mark();
    // A new session in another project, then its turn ending: each redraws the table.
    hooked(
        &w,
        &lib,
        LIB_BEEF,
        "UserPromptSubmit",
        &json!({ "prompt": "second prompt" }),
    );
    shows(&t, "second prompt");
    let screen = t.text();
    let at = |needle: &str| {
        screen
            .find(needle)
            .unwrap_or_else(|| panic!("{needle}:\n{screen}"))
    };
    assert!(
        at("PROJECT") < at("lib") && at("lib") < at("second prompt"),
        "{screen}"
    );
    hooked(&w, &lib, LIB_BEEF, "Stop", &json!({}));
    t.wait_until(Duration::from_secs(10), |v| {
        v.text()
            .lines()
            .any(|l| l.contains("lib") && l.contains("idle"))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    // Redrawn in place: the screen is cleared each time, the old rows are gone.
    assert!(t.since(mark).contains("^[[H^[[2J"), "{}", t.diag());
    assert_eq!(t.text().matches("second prompt").count(), 1, "{}", t.diag());
    // While nothing changes it sleeps: no wakeup in a quiet second (no timer).
    let switches = || {
        std::fs::read_to_string(format!("/proc/{}/status", t.pid()))
            .unwrap()
            .lines()
            .find(|l| l.starts_with("voluntary_ctxt_switches"))
            .map(str::to_owned)
            .unwrap()
    };
    std::thread::sleep(Duration::from_millis(300));
    let before = switches();
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(switches(), before, "it woke while nothing changed");
    // A resized terminal is drawn again.
    let mark = t.mark();
    t.resize(30, 160);
    t.wait_until(Duration::from_secs(10), |v| {
        v.since(mark).contains("^[[H^[[2J") && v.text().contains("second prompt")
    })
    .unwrap_or_else(|e| panic!("{e}"));
    // Ctrl-C: it ends, with the cursor shown and the alternate screen left.
    t.send(&[0x03]);
    let status = t.exit_within(Duration::from_secs(10));
    assert!(
        status
            .as_ref()
            .is_some_and(portable_pty::ExitStatus::success),
        "{status:?}\n{}",
        t.diag()
    );
    assert_eq!(t.modes(), Modes::RESTORED, "{}", t.diag());
}

#[test]
fn sessions_watch_off_a_terminal_prints_one_table_per_change() {
    use std::io::{BufRead, BufReader};
    let w = World::new();
    let outside = elsewhere(&w);
    hooked(
        &w,
        &w.repo,
        APP_BEEF,
        "UserPromptSubmit",
        &json!({ "prompt": "first prompt" }),
    );
    let mut child = w
        .cmd(&outside, &["sessions", "--watch"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let next = || {
        rx.recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("no line: {e}"))
    };
    assert!(next().starts_with("PROJECT"));
    assert!(next().contains("working"));
    hooked(&w, &w.repo, APP_BEEF, "Stop", &json!({}));
    assert_eq!(next(), "", "a blank line between tables");
    assert!(next().starts_with("PROJECT"));
    let row = next();
    assert!(row.contains("idle") && !row.contains('\u{1b}'), "{row}");
    // Ctrl-C ends it with success.
    let pid = child.id().to_string();
    Command::new("kill").args(["-INT", &pid]).status().unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
}
