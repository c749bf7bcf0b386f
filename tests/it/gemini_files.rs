//! Gemini CLI's files facet with the real `gemini` (offline, against [`FakeGemini`]): spex's
//! hooks in each checkout's own `.gemini/settings.json`, folder trust per checkout, hook
//! fingerprints recorded beforehand, the contract in `GEMINI.md`; and clean giving every byte
//! back.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::fake_gemini::{self, FakeGemini};
use crate::support::gemini_home::{gemini_command, headless_turn, seed_gemini_home};
use crate::support::world::{World, read, read_or_empty, write};

const SPEC_SYSTEM: &str = "---\ntitle: Rules\nsurface: system\n---\nBe careful.\n";
/// What Gemini prints (stderr headless, a banner in the TUI) about project hooks whose
/// fingerprints it has not recorded (facts/gemini.md §4.2).
const HOOK_BANNER: &str = "WARNING: The following project-level hooks";
/// The events a headless `--yolo` shell turn fires, in order (facts/gemini.md §5), of those
/// spex binds.
const SHELL_TURN_EVENTS: [&str; 6] = [
    "SessionStart",
    "BeforeAgent",
    "BeforeTool",
    "AfterTool",
    "AfterAgent",
    "SessionEnd",
];
const TURN_TIMEOUT: Duration = Duration::from_mins(2);

/// A world whose project selects `harnesses` (a JSON list) and has one `surface: system` node.
fn project(harnesses: &str) -> World {
    let w = World::new();
    write(
        &w.repo.join("spex.jsonc"),
        format!("{{ \"harnesses\": {harnesses} }}\n"),
    );
    write(&w.repo.join(".spec/rules/spec.md"), SPEC_SYSTEM);
    w
}

/// [`project`] with Gemini's home seeded for the fake, and the fake.
fn gemini_project(harnesses: &str) -> (World, FakeGemini) {
    let w = project(harnesses);
    seed_gemini_home(&w.home);
    (w, FakeGemini::start())
}

/// The user's own project settings: JSON with comments (Gemini strips them), a setting, and a
/// hook of their own that appends its payload to `log`.
fn user_settings(log: &Path) -> String {
    let command = format!("(cat; echo) >> '{}'", log.display());
    format!(
        "// my Gemini settings\n{{\n  \"ui\": {{ \"hideTips\": true }}, // keep\n  \"hooks\": {{\n    \"AfterAgent\": [\n      {{ \"hooks\": [ {{ \"type\": \"command\", \"name\": \"mine\", \"command\": {}, \"timeout\": 5000 }} ] }}\n    ]\n  }}\n}}\n",
        serde_json::to_string(&command).unwrap()
    )
}

/// The Gemini events spex's hook command ran for, in order: from the dispatch trace once
/// Gemini's hook wire decodes them, else from the error each run logs while it does not.
fn spex_hook_runs(w: &World) -> Vec<String> {
    let events_of = |text: String| -> Vec<String> {
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["harness"] == "gemini")
            .filter_map(|v| v["event"].as_str().map(str::to_owned))
            .collect()
    };
    let traced: Vec<String> = std::fs::read_dir(w.spex_home.join("projects"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .flat_map(|p| events_of(read_or_empty(&p.path().join("dispatch.log"))))
        .collect();
    if traced.is_empty() {
        events_of(w.errors_log())
    } else {
        traced
    }
}

/// One headless `--yolo` shell turn of the real Gemini in `tree`, its hooks pointed at the
/// world's spex store (and traced).
fn shell_turn(
    w: &World,
    fake: &FakeGemini,
    tree: &Path,
    tag: &str,
) -> crate::support::gemini_home::HeadlessTurn {
    let mut cmd = gemini_command(&w.home, &fake.base_url());
    cmd.env("SPEX_HOME", &w.spex_home)
        .env("SPEX_TRACE_DISPATCH", "1")
        .arg("--yolo");
    headless_turn(
        &mut cmd,
        fake,
        tree,
        w.dir.path(),
        tag,
        "SCENARIO:shell go",
        TURN_TIMEOUT,
    )
}

fn json_file(path: &Path) -> Value {
    serde_json::from_str(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What Gemini itself keeps under its home and writes into a checkout while it runs (chat
/// logs, project ids, the shell command's output): not spex's to give back.
fn gemini_own(path: &Path, w: &World) -> bool {
    let gemini = w.home.join(".gemini");
    path.starts_with(gemini.join("tmp"))
        || path.starts_with(gemini.join("history"))
        || path == gemini.join("projects.json")
        || path == gemini.join("installation_id")
        || path == gemini.join("state.json")
        || path.file_name().is_some_and(|n| n == "shell_out.txt")
}

#[test]
fn gemini_runs_spex_hooks_in_every_checkout_without_a_banner_and_clean_restores_every_byte() {
    let (w, fake) = gemini_project("[\"gemini\"]");
    let user_log = w.dir.path().join("user-hook.jsonl");
    let settings = user_settings(&user_log);
    write(&w.repo.join(".gemini/settings.json"), &settings);
    write(&w.repo.join("GEMINI.md"), "# My notes\r\n\r\nUse tabs.\r\n");
    let wt = w.add_worktree("wt");
    let trees = [w.repo.clone(), wt.clone()];
    let user_hook = format!("mine:(cat; echo) >> '{}'", user_log.display());
    // The user trusts another folder; Gemini recorded the user's own hook in both checkouts
    // (it warned about it once) and hooks of another project.
    let folders = w.home.join(".gemini/trustedFolders.json");
    write(&folders, "{\n  \"/elsewhere\": \"TRUST_FOLDER\"\n}");
    let hooks_file = w.home.join(".gemini/trusted_hooks.json");
    let mut recorded = serde_json::Map::new();
    recorded.insert("/elsewhere".into(), json!([":other-tool run"]));
    for t in &trees {
        recorded.insert(t.to_string_lossy().into_owned(), json!([user_hook]));
    }
    write(
        &hooks_file,
        serde_json::to_string_pretty(&Value::Object(recorded)).unwrap(),
    );
    let before = w.snapshot(&[&wt]);

    for t in &trees {
        w.ok(t, &["materialize"]);
        let s = read(&t.join(".gemini/settings.json"));
        assert!(s.starts_with("// my Gemini settings\n"), "{s}");
        assert!(s.contains("\"hideTips\": true }, // keep"), "{s}");
        assert!(read(&t.join("GEMINI.md")).contains("Be careful."));
    }
    let trusted = json_file(&folders);
    for t in &trees {
        assert_eq!(trusted[t.to_str().unwrap()], "TRUST_FOLDER", "{trusted}");
    }

    for (t, tag) in trees.iter().zip(["main", "worktree"]) {
        let ran_before = spex_hook_runs(&w).len();
        let logged_before = read_or_empty(&user_log).lines().count();
        let turn = shell_turn(&w, &fake, t, tag);
        turn.assert_success();
        let diag = &turn.diag;
        assert_eq!(
            read_or_empty(&t.join("shell_out.txt")),
            fake_gemini::SHELL_OUT,
            "{diag}"
        );
        assert!(!turn.stderr.contains(HOOK_BANNER), "{tag}: banner\n{diag}");
        let ran = spex_hook_runs(&w);
        assert_eq!(ran[ran_before..], SHELL_TURN_EVENTS, "{tag}\n{diag}");
        // The user's hook in the same file ran beside spex's, in this checkout.
        let user_ran: Vec<Value> = read_or_empty(&user_log)
            .lines()
            .skip(logged_before)
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        assert_eq!(user_ran.len(), 1, "{tag}: {user_ran:?}\n{diag}");
        assert_eq!(user_ran[0]["cwd"], t.to_str().unwrap(), "{diag}");
        assert_eq!(user_ran[0]["hook_event_name"], "AfterAgent", "{diag}");
    }

    for t in trees.iter().rev() {
        w.ok(t, &["clean"]);
    }
    let diff: Vec<String> = before
        .content_diff(&w.snapshot(&[&wt]))
        .into_iter()
        .filter(|d| {
            !d.strip_prefix("new: ")
                .is_some_and(|p| gemini_own(Path::new(p), &w))
        })
        .collect();
    assert!(diff.is_empty(), "clean left:\n{}", diff.join("\n"));
}

const SPEC_REVIEW: &str =
    "---\ntitle: Review\nsurface: [skill, command]\ndesc: Review a change\n---\nReview it.\n";
const SPEC_GREET: &str =
    "---\ntitle: Greet\nsurface: command\ndesc: Greet someone\n---\nGreet them.\n";

/// With Codex and Gemini selected, the real Gemini lists each skill once and warns of no
/// conflict (both read `.agents/skills/`); a command spex wrote expands headless, its
/// arguments where `{{args}}` says, and the model gets the contract from `GEMINI.md`.
#[test]
fn gemini_reads_spex_skills_commands_and_contract() {
    let (w, fake) = gemini_project("[\"codex\", \"gemini\"]");
    write(&w.repo.join(".spec/review/spec.md"), SPEC_REVIEW);
    write(&w.repo.join(".spec/greet/spec.md"), SPEC_GREET);
    w.ok(&w.repo, &["materialize"]);
    assert!(w.repo.join(".gemini/commands/greet.toml").is_file());
    // A node that is a skill is `/review` in Gemini already: no command file beside it.
    assert!(!w.repo.join(".gemini/commands/review.toml").exists());
    assert!(!w.repo.join(".gemini/skills").exists());

    let mut cmd = gemini_command(&w.home, &fake.base_url());
    cmd.env("SPEX_HOME", &w.spex_home)
        .current_dir(&w.repo)
        .args(["skills", "list"]);
    let run = crate::support::peers::run_logged(&mut cmd, w.dir.path(), "skills", TURN_TIMEOUT);
    let out = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.status.and_then(|s| s.code()), Some(0), "{out}");
    let listed: Vec<&str> = out.lines().filter(|l| l.contains("[Enabled]")).collect();
    assert_eq!(listed, ["review [Enabled]"], "{out}");
    assert!(out.contains("Review a change"), "{out}");
    assert!(!out.contains("conflict"), "{out}");

    let mut cmd = gemini_command(&w.home, &fake.base_url());
    cmd.env("SPEX_HOME", &w.spex_home).arg("--yolo");
    let turn = headless_turn(
        &mut cmd,
        &fake,
        &w.repo,
        w.dir.path(),
        "greet",
        "/greet world",
        TURN_TIMEOUT,
    );
    turn.assert_success();
    let request = fake
        .prompt_within("Greet them.\n\nworld", Duration::ZERO)
        .unwrap_or_else(|| {
            panic!(
                "the expanded command did not reach the model\n{}",
                turn.diag
            )
        });
    assert!(
        request["body"].to_string().contains("Be careful."),
        "no contract from GEMINI.md in {request}"
    );
}

/// A skill Codex and Gemini both read (`.agents/skills/`) stays while either one is selected,
/// and goes with the last.
#[test]
fn a_skill_two_harnesses_read_stays_while_either_is_selected() {
    let w = World::new();
    write(&w.repo.join(".spec/review/spec.md"), SPEC_REVIEW);
    let skill = w.repo.join(".agents/skills/review/SKILL.md");
    for harnesses in [
        "[\"codex\", \"gemini\"]",
        "[\"codex\"]",
        "[\"gemini\"]",
        "[\"codex\"]",
    ] {
        write(
            &w.repo.join("spex.jsonc"),
            format!("{{ \"harnesses\": {harnesses} }}\n"),
        );
        w.ok(&w.repo, &["materialize"]);
        assert!(skill.is_file(), "{harnesses}: no skill");
        let check = w.spex(&w.repo, &["materialize", "--check"]);
        assert_eq!(check.status.code(), Some(0), "{harnesses}: not stable");
    }
    w.ok(&w.repo, &["clean"]);
    assert!(!w.repo.join(".agents").exists());
}

/// Runs `spex slash --harness gemini --json` in `tree`: (name, kind) of each entry.
fn spex_menu(w: &World, tree: &Path) -> Vec<(String, String)> {
    let json: Value =
        serde_json::from_str(&w.ok(tree, &["slash", "--harness", "gemini", "--json"])).unwrap();
    json["gemini"]
        .as_array()
        .unwrap_or_else(|| panic!("{json}"))
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_owned(),
                e["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The top-level commands the TUI's `/help` lists, in order (`│  /name - description`).
fn help_commands(screen: &str) -> Vec<String> {
    screen
        .lines()
        .filter_map(|l| l.trim_start_matches('│').strip_prefix("  /"))
        .filter_map(|l| l.split_once(" - ").map(|(name, _)| name.to_owned()))
        .collect()
}

/// spex's Gemini `/` menu is the real TUI's: the built-ins `/help` lists, in its order; the
/// project's skill is one `/review` (no conflict), its command `/greet`, the user's command
/// `/mine`, and the popup offers each.
#[test]
fn the_gemini_slash_menu_is_what_the_real_tui_offers() {
    const WAIT: Duration = Duration::from_secs(90);
    let (w, fake) = gemini_project("[\"gemini\"]");
    write(&w.repo.join(".spec/review/spec.md"), SPEC_REVIEW);
    write(&w.repo.join(".spec/greet/spec.md"), SPEC_GREET);
    write(
        &w.home.join(".gemini/commands/mine.toml"),
        "description = \"My own\"\nprompt = \"do it\"\n",
    );
    w.ok(&w.repo, &["materialize"]);
    let menu = spex_menu(&w, &w.repo);
    let builtins: Vec<String> = menu
        .iter()
        .filter(|(_, k)| k == "built-in")
        .map(|(n, _)| n.clone())
        .collect();
    let custom: Vec<(&str, &str)> = menu
        .iter()
        .filter(|(_, k)| k != "built-in")
        .map(|(n, k)| (n.as_str(), k.as_str()))
        .collect();
    assert_eq!(
        custom,
        [
            ("review", "project skill"),
            ("mine", "user command"),
            ("greet", "project command")
        ]
    );

    let mut cmd = gemini_command(&w.home, &fake.base_url());
    cmd.env("SPEX_HOME", &w.spex_home).current_dir(&w.repo);
    let t = crate::support::term::Term::spawn(&cmd, 200, 200);
    crate::support::gemini_home::wait_tui_ready(&t, WAIT).unwrap();
    crate::support::gemini_home::type_and_enter(&t, "/help", WAIT).unwrap();
    // An Enter the CLI took too early is sent again (a second one in an empty box does nothing).
    // A `/help` entered before the CLI had read its configuration is queued as a prompt (its
    // input box shows before that; it says `Initializing... Prompts will be queued.`): once the
    // model has answered it, it is typed again.
    let end = std::time::Instant::now() + WAIT;
    let mut typed_again = false;
    while t
        .wait_for("Keyboard Shortcuts", Duration::from_secs(5))
        .is_err()
    {
        assert!(std::time::Instant::now() < end, "no help\n{}", t.diag());
        if !typed_again && t.text().contains("Prompts will be queued") {
            typed_again = true;
            t.wait_for("ok (", WAIT)
                .unwrap_or_else(|e| panic!("the queued /help was not answered: {e}"));
            crate::support::gemini_home::type_and_enter(&t, "/help", WAIT).unwrap();
        } else {
            t.send(b"\r");
        }
    }
    let help = t.text();
    // `/help` lists the custom commands after the built-ins; the skill's command (`/review`)
    // only once the CLI has loaded its skills, which may be after the box shows (the popup
    // below offers it either way).
    let mut listed = builtins.clone();
    listed.extend(["mine".to_owned(), "greet".to_owned()]);
    let helped: Vec<String> = help_commands(&help)
        .into_iter()
        .filter(|c| c != "review")
        .collect();
    assert_eq!(helped, listed, "{help}");
    assert!(!help.contains("Conflicts detected"), "{help}");
    // spex's hook fingerprints were recorded: no banner about new project hooks.
    assert!(!help.contains(HOOK_BANNER), "{help}");
    assert!(
        help.contains("Gemini CLI v0.61.0"),
        "the top scrolled away: {help}"
    );
    for (typed, want) in [("/rev", "review "), ("/gre", "greet "), ("/min", "mine ")] {
        // Ctrl-U empties the box first.
        t.send(b"\x15");
        t.send(typed.as_bytes());
        t.wait_until(WAIT, |v| {
            v.text().lines().any(|l| l.trim_start().starts_with(want))
        })
        .unwrap_or_else(|e| panic!("the popup for {typed} lacks {want:?}: {e}\n{}", t.text()));
    }
}

/// `spex doctor --json`'s Gemini checks in `tree`, as (name, status).
fn doctor_checks(w: &World, tree: &Path) -> Vec<(String, String)> {
    let out = w.spex(tree, &["doctor", "--json"]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor printed no JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    json["gemini"]["checks"]
        .as_array()
        .unwrap_or_else(|| panic!("{json}"))
        .iter()
        .filter(|c| c["name"] != "binary")
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Doctor checks this checkout's own shims, its folder trust and spex's hook fingerprints, a
/// worktree as much as the main checkout.
#[test]
fn gemini_doctor_checks_each_checkouts_shims_trust_and_fingerprints() {
    let w = project("[\"gemini\"]");
    let wt = w.add_worktree("wt");
    for t in [&w.repo, &wt] {
        w.ok(t, &["materialize"]);
    }
    let shims = |t: &Path| format!("shims in {}", t.join(".gemini/settings.json").display());
    let ok = |t: &Path| {
        vec![
            (shims(t), "ok".to_owned()),
            ("folder trust".to_owned(), "ok".to_owned()),
            ("hook fingerprints".to_owned(), "ok".to_owned()),
            ("hooks switched on".to_owned(), "ok".to_owned()),
        ]
    };
    assert_eq!(doctor_checks(&w, &w.repo), ok(&w.repo));
    assert_eq!(doctor_checks(&w, &wt), ok(&wt));
    // Gemini's files lose the worktree's entries (the user edited them away).
    let key = wt.to_str().unwrap();
    for file in ["trustedFolders.json", "trusted_hooks.json"] {
        let path = w.home.join(".gemini").join(file);
        let mut v = json_file(&path);
        v.as_object_mut().unwrap().remove(key);
        write(&path, v.to_string());
    }
    std::fs::remove_file(wt.join(".gemini/settings.json")).unwrap();
    assert_eq!(
        doctor_checks(&w, &wt),
        [
            (shims(&wt), "fail".to_owned()),
            ("folder trust".to_owned(), "fail".to_owned()),
            ("hook fingerprints".to_owned(), "warn".to_owned()),
            ("hooks switched on".to_owned(), "ok".to_owned()),
        ]
    );
    assert_eq!(doctor_checks(&w, &w.repo), ok(&w.repo));
    // The user turns spex's hooks off by name in Gemini's settings: doctor says so.
    let user = w.home.join(".gemini/settings.json");
    write(&user, "{\"hooksConfig\": {\"disabled\": [\"spex\"]}}");
    let checks = doctor_checks(&w, &w.repo);
    assert_eq!(
        checks.last(),
        Some(&("hooks switched on".to_owned(), "fail".to_owned())),
        "{checks:?}"
    );
    // The project's `enabled: true` overrules the user's `false`.
    write(&user, "{\"hooksConfig\": {\"enabled\": false}}");
    assert_eq!(doctor_checks(&w, &w.repo).last().unwrap().1, "fail");
    let project = w.repo.join(".gemini/settings.json");
    let mut v = json_file(&project);
    v["hooksConfig"] = json!({"enabled": true});
    write(&project, v.to_string());
    assert_eq!(doctor_checks(&w, &w.repo), ok(&w.repo));
}

/// A worktree removed without `spex clean` leaves no trust or fingerprints of spex's behind:
/// the next run in another checkout takes them back, and only them. The files spex created in
/// Gemini's home are private, as Gemini makes them.
#[test]
fn a_removed_worktrees_gemini_trust_goes_with_the_next_run() {
    use std::os::unix::fs::PermissionsExt;
    let w = project("[\"gemini\"]");
    let wt = w.add_worktree("wt");
    let folders = w.home.join(".gemini/trustedFolders.json");
    let hooks = w.home.join(".gemini/trusted_hooks.json");
    let before = w.snapshot(&[]);
    w.ok(&w.repo, &["materialize"]);
    w.ok(&wt, &["materialize"]);
    for f in [&folders, &hooks] {
        let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", f.display());
        assert!(json_file(f).get(wt.to_str().unwrap()).is_some());
    }
    // Gemini recorded a hook of the user's for the worktree too: it stays.
    let mut v = json_file(&hooks);
    v[wt.to_str().unwrap()]
        .as_array_mut()
        .unwrap()
        .insert(0, json!("mine:echo hi"));
    write(&hooks, serde_json::to_string_pretty(&v).unwrap());
    crate::support::world::git(
        &w.repo,
        &["worktree", "remove", "--force", wt.to_str().unwrap()],
    );
    w.ok(&w.repo, &["materialize"]);
    let key = wt.to_str().unwrap();
    assert!(json_file(&folders).get(key).is_none(), "{}", read(&folders));
    assert_eq!(
        json_file(&hooks)[key],
        json!(["mine:echo hi"]),
        "{}",
        read(&hooks)
    );
    assert!(json_file(&folders).get(w.repo.to_str().unwrap()).is_some());
    // Without the user's entry, clean leaves Gemini's home as it found it.
    let mut v = json_file(&hooks);
    v.as_object_mut().unwrap().remove(key);
    write(&hooks, serde_json::to_string_pretty(&v).unwrap());
    w.ok(&w.repo, &["clean"]);
    let diff = before.content_diff(&w.snapshot(&[]));
    assert!(diff.is_empty(), "clean left:\n{}", diff.join("\n"));
}

/// `spex init` names what it holds in Gemini's home: the checkout's trust and its elements of
/// the checkout's fingerprint array.
#[test]
fn init_names_the_gemini_trust_spex_holds() {
    let w = project("[\"gemini\"]");
    let out = w.ok(&w.repo, &["init"]);
    let repo = w.repo.display();
    for line in [
        format!("~/.gemini/trustedFolders.json: \"{repo}\" = \"TRUST_FOLDER\""),
        format!("~/.gemini/trusted_hooks.json: \"{repo}\" holds 7 elements of spex's"),
    ] {
        assert!(out.contains(&line), "no {line:?} in:\n{out}");
    }
}

/// A worktree inside the main checkout gets its own trust: the main's entry covers it only
/// until the main's clean takes that back.
#[test]
fn a_worktree_inside_the_main_checkout_keeps_its_own_gemini_trust() {
    let w = project("[\"gemini\"]");
    write(&w.repo.join(".gitignore"), "/.wt/\n");
    crate::support::world::git(&w.repo, &["add", "-A"]);
    crate::support::world::git(&w.repo, &["commit", "-q", "-m", "base"]);
    let inner = w.repo.join(".wt/inner");
    crate::support::world::git(
        &w.repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "inner",
            inner.to_str().unwrap(),
        ],
    );
    let inner = std::fs::canonicalize(inner).unwrap();
    let folders = w.home.join(".gemini/trustedFolders.json");
    let before = w.snapshot(&[]);
    w.ok(&w.repo, &["materialize"]);
    w.ok(&inner, &["materialize"]);
    w.ok(&w.repo, &["clean"]);
    assert_eq!(
        json_file(&folders),
        json!({ inner.to_str().unwrap(): "TRUST_FOLDER" }),
        "the worktree lost its trust with the main checkout's clean"
    );
    w.ok(&inner, &["clean"]);
    let diff = before.content_diff(&w.snapshot(&[]));
    assert!(diff.is_empty(), "clean left:\n{}", diff.join("\n"));
}
