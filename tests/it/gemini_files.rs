//! Gemini CLI's files facet with the real `gemini` (offline, against [`FakeGemini`]): spex's
//! hooks in each checkout's own `.gemini/settings.json`, folder trust per checkout, hook
//! fingerprints recorded beforehand, the contract in `GEMINI.md`; and clean giving every byte
//! back.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{World, read, read_or_empty, write};
use crate::support::fake_gemini::{self, FakeGemini};
use crate::support::gemini_home::{gemini_command, headless_turn, seed_gemini_home};

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
    let w = World::new();
    let fake = FakeGemini::start();
    seed_gemini_home(&w.home);
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"gemini\"] }\n",
    );
    write(&w.repo.join(".spec/rules/spec.md"), SPEC_SYSTEM);
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
