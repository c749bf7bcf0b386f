//! `spex diff`, `spex open` and `spex usage` on REAL sessions: Claude Code and Codex against the
//! fake model servers, in one repository. Claude's tool calls edit a committed file and create a
//! new one, a commit lands during the session, and a person changes a third file; the diff
//! shows all of it against the commit the session started from, marks what the session's tools
//! touched, and leaves the repository as it was. `spex usage` sums to what the fakes reported,
//! before and after `spex prune`. Needs `scripts/install-peers.sh`; fails, never skips.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::real_sessions::{ClaudeSession, CodexRig, Perm, wait_until};
use crate::support::fake_anthropic::{self, FakeAnthropic, WRITE_CONTENT};
use crate::support::fake_responses;
use crate::support::world::{World, executable, git, read, read_or_empty, write};

const SETTLE: Duration = Duration::from_mins(1);

fn head(repo: &Path) -> String {
    let out = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(repo)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// What must not change in the repository: the index (bytes and mtime), every object file,
/// `HEAD` and the refs.
fn git_state(repo: &Path) -> Vec<(PathBuf, Vec<u8>, Option<SystemTime>)> {
    let git_dir = repo.join(".git");
    let mut files: Vec<_> = walkdir::WalkDir::new(&git_dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.path().to_owned())
        .filter(|p| {
            let rel = p.strip_prefix(&git_dir).unwrap();
            rel == Path::new("index")
                || rel == Path::new("HEAD")
                || rel.starts_with("objects")
                || rel.starts_with("refs")
        })
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            let mtime = std::fs::metadata(&p).and_then(|m| m.modified()).ok();
            (p, bytes, mtime)
        })
        .collect();
    files.sort();
    files
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// `[input, cached, output, requests]` of a `spex usage --json` sum.
fn sums(v: &Value) -> [u64; 4] {
    let n = |k: &str| v[k].as_u64().unwrap_or(u64::MAX);
    [
        n("input_tokens"),
        n("cached_input_tokens"),
        n("output_tokens"),
        n("requests"),
    ]
}

fn usage(w: &World, args: &[&str]) -> Value {
    let mut all = vec!["usage", "--json"];
    all.extend_from_slice(args);
    json_of(&w.ok(&w.repo, &all))
}

/// Runs `spex diff`, checks what it shows and that the repository did not change.
fn check_diff(w: &World, id: &str, base: &str, diag: &dyn Fn() -> String) {
    let before = git_state(&w.repo);
    let listed = json_of(&w.ok(&w.repo, &["diff", id, "--json"]));
    let diag = || format!("{listed:#}\n{}", diag());
    assert_eq!(listed["base"], base, "{}", diag());
    let files: Vec<Value> = listed["files"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|f| {
            json!([
                f["path"],
                f["status"],
                f["added"],
                f["removed"],
                f["touched_by_session"]
            ])
        })
        .collect();
    assert_eq!(
        files,
        [
            // Created by the session's Write: untracked, shown as added.
            json!(["new.txt", "added", 1, 0, true]),
            // Edited by the session's Edit, then committed during the session.
            json!(["notes.txt", "modified", 1, 1, true]),
            // Changed by a person, not committed.
            json!(["other.txt", "modified", 1, 0, false]),
        ],
        "{}",
        diag()
    );
    let stat = w.ok(&w.repo, &["diff", id, "--stat"]);
    let lines: Vec<&str> = stat.lines().collect();
    assert!(
        lines.len() == 5
            && lines[0].starts_with("*new.txt ")
            && lines[1].starts_with("*notes.txt ")
            && lines[2].starts_with(" other.txt ")
            && lines[3].contains("3 files changed, 3 insertions(+), 1 deletion(-)")
            && lines[4].contains("edited by the session"),
        "{stat}\n{}",
        diag()
    );
    let names = w.ok(&w.repo, &["diff", id, "--name-only"]);
    assert_eq!(names, "* new.txt\n* notes.txt\n  other.txt\n", "{}", diag());
    let only = w.ok(&w.repo, &["diff", id, "--name-only", "--", "other.txt"]);
    assert_eq!(only, "  other.txt\n", "{}", diag());
    let patch = w.ok(&w.repo, &["diff", id]);
    for want in [
        "*notes.txt ",
        "diff --git a/new.txt b/new.txt",
        "new file mode",
        &format!("+{}", WRITE_CONTENT.trim_end()),
        "-hello world",
        "+goodbye world",
        "+changed by a person",
    ] {
        assert!(patch.contains(want), "{want:?} in:\n{patch}\n{}", diag());
    }
    assert!(!patch.contains('\u{1b}'), "no colour into a pipe:\n{patch}");
    let after = git_state(&w.repo);
    assert!(
        before == after,
        "`spex diff` changed the repository: {:?}",
        after
            .iter()
            .filter(|a| !before.contains(a))
            .map(|a| &a.0)
            .collect::<Vec<_>>()
    );
}

/// `spex open` with an editor command that records its argv.
fn check_open(w: &World, id: &str) {
    let argv_file = w.dir.path().join("editor-argv");
    let editor = w.dir.path().join("editor.sh");
    executable(
        &editor,
        &format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > '{}'\n",
            argv_file.display()
        ),
    );
    write(
        &w.xdg_config.join("spex/config.jsonc"),
        json!({"editor": format!("'{}' --line={{line}} {{path}}", editor.display())}).to_string(),
    );
    let opened = |args: &[&str]| {
        let _ = std::fs::remove_file(&argv_file);
        let mut all = vec!["open", id];
        all.extend_from_slice(args);
        w.ok(&w.repo, &all);
        read(&argv_file)
    };
    let repo = w.repo.display();
    assert_eq!(opened(&[]), format!("--line=1\n{repo}\n"));
    assert_eq!(
        opened(&["notes.txt:1"]),
        format!("--line=1\n{repo}/notes.txt\n")
    );
    assert_eq!(
        opened(&["sub/../new.txt:12"]),
        format!("--line=12\n{repo}/new.txt\n")
    );
    // Outside the worktree, by `..`, by an absolute path, or through a symlink: refused, and
    // the editor never runs.
    let outside = w.dir.path().join("outside.txt");
    write(&outside, "secret\n");
    std::os::unix::fs::symlink(&outside, w.repo.join("link.txt")).unwrap();
    for arg in [
        "../outside.txt".to_owned(),
        outside.display().to_string(),
        "link.txt:3".to_owned(),
    ] {
        let _ = std::fs::remove_file(&argv_file);
        let out = w.spex(&w.repo, &["open", id, &arg]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success()
                && err.contains("is outside the worktree")
                && err.contains("hint:"),
            "{arg}: {out:?}"
        );
        assert!(!argv_file.exists(), "{arg}: the editor ran");
    }
    std::fs::remove_file(w.repo.join("link.txt")).unwrap();
    std::fs::remove_file(w.xdg_config.join("spex/config.jsonc")).unwrap();

    // No `editor`: `$VISUAL`, else `$EDITOR` (an editor spex knows no line syntax of gets the
    // path alone); neither: refused with a hint.
    for var in ["VISUAL", "EDITOR"] {
        let _ = std::fs::remove_file(&argv_file);
        let out = w
            .cmd(&w.repo, &["open", id, "notes.txt:1"])
            .env(var, format!("{} --from-{var}", editor.display()))
            .output()
            .unwrap();
        assert!(out.status.success(), "{var}: {out:?}");
        assert_eq!(
            read(&argv_file),
            format!("--from-{var}\n{repo}/notes.txt\n"),
            "{var}"
        );
    }
    let out = w.spex(&w.repo, &["open", id]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("no editor is set") && err.contains("hint:"),
        "{out:?}"
    );
}

#[test]
fn diff_open_and_usage_of_real_claude_and_codex_sessions() {
    let mut rig = CodexRig::start();
    write(&rig.w.repo.join("notes.txt"), "hello world\n");
    write(&rig.w.repo.join("other.txt"), "keep\n");
    git(&rig.w.repo, &["add", "-A"]);
    git(&rig.w.repo, &["commit", "-q", "-m", "base"]);
    let base = head(&rig.w.repo);
    // Codex: one plain turn on a thread of the app-server (it stays live), first: its
    // server answers nothing it did not start.
    let thread = rig.cx.start_thread(&json!({"cwd": rig.w.repo}));
    rig.turn(&thread, "Say hello.", "completed");
    let codex_requests = rig
        .fake
        .requests()
        .iter()
        .filter(|r| r["method"] == "POST" && r["title"] != true)
        .count() as u64;
    let cu = fake_responses::USAGE;
    let codex_want = [
        cu.input * codex_requests,
        cu.cached * codex_requests,
        cu.output * codex_requests,
        codex_requests,
    ];
    let fake = FakeAnthropic::start();

    // Claude: an Edit of a committed file; a commit during the session; a Write of a new file.
    let mut session = ClaudeSession::start(&rig.w, &fake, Perm::AcceptEdits);
    let id = session.id.clone();
    session.turn(&rig.w, "Please edit the file. USE_EDIT FILE=notes.txt");
    assert_eq!(read(&rig.w.repo.join("notes.txt")), "goodbye world\n");
    git(&rig.w.repo, &["commit", "-q", "-am", "during the session"]);
    session.turn(&rig.w, "Please create the file. FILE=new.txt");
    assert_eq!(read(&rig.w.repo.join("new.txt")), WRITE_CONTENT);
    write(&rig.w.repo.join("other.txt"), "keep\nchanged by a person\n");
    session.end(&rig.w, true);
    let (rec, _) = wait_until(&rig.w, &id, SETTLE, |r, _| r["status"] == "exited")
        .unwrap_or_else(|d| panic!("never exited\n{d}\n{}", session.diag(&rig.w)));
    let diag = || session.diag(&rig.w);
    assert_eq!(rec["base_commit"], base.as_str(), "{}", diag());
    check_diff(&rig.w, &id, &base, &diag);
    check_open(&rig.w, &id);

    let w = &rig.w;
    let codex_id = rig.record_id(&thread);
    wait_until(w, &codex_id, SETTLE, |r, _| {
        r["usage"]["requests"].as_u64() == Some(codex_requests)
    })
    .unwrap_or_else(|d| panic!("Codex's usage never counted\n{d}\n{}", rig.diag(&codex_id)));

    // What the fake Anthropic answered the main loop (side requests are not the session's).
    let claude_requests = fake
        .requests()
        .iter()
        .filter(|r| {
            ["Read", "Edit", "Write", "final"].contains(&r["answered"].as_str().unwrap_or(""))
        })
        .count() as u64;
    let au = fake_anthropic::USAGE;
    let claude_want = [
        (au.input + au.cache_read + au.cache_write) * claude_requests,
        au.cache_read * claude_requests,
        au.output * claude_requests,
        claude_requests,
    ];
    assert!(
        claude_requests >= 3 && codex_requests >= 1,
        "{claude_requests} {codex_requests}"
    );
    let total_want: Vec<u64> = (0..4).map(|i| claude_want[i] + codex_want[i]).collect();
    let udiag = |v: &Value| {
        format!(
            "{v:#}\nfake anthropic: {:?}\nfake responses: {:?}\n{}",
            fake.request_lines(),
            rig.fake.request_lines(),
            diag()
        )
    };
    let check_totals = |when: &str| {
        let by_harness = usage(w, &["--by", "harness"]);
        assert_eq!(
            sums(&by_harness["total"]),
            total_want[..],
            "{when}: {}",
            udiag(&by_harness)
        );
        let groups = by_harness["groups"].as_array().cloned().unwrap_or_default();
        let of = |h: &str| groups.iter().find(|g| g["key"] == h).map_or([0; 4], sums);
        assert_eq!(of("claude"), claude_want, "{when}: {}", udiag(&by_harness));
        assert_eq!(of("codex"), codex_want, "{when}: {}", udiag(&by_harness));
        for by in ["project", "session", "day"] {
            let v = usage(w, &["--by", by]);
            assert_eq!(
                sums(&v["total"]),
                total_want[..],
                "{when} --by {by}: {}",
                udiag(&v)
            );
        }
        let recent = usage(w, &["--since", "1h", "--all-projects"]);
        assert_eq!(
            sums(&recent["total"]),
            total_want[..],
            "{when}: {}",
            udiag(&recent)
        );
        let table = w.ok(w.dir.path(), &["usage", "--by", "harness"]);
        assert!(
            table.contains("HARNESS") && table.contains("claude") && table.contains("codex"),
            "{when}, outside the repository: {table}"
        );
    };
    check_totals("before prune");

    // Prices: a cost per model, and `+?` where a model has none.
    let model = |sid: &str| {
        let shown = json_of(&w.ok(&w.repo, &["show", sid, "--json"]));
        shown["session"]["usage"]["model"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let (claude_model, codex_model) = (model(&id), model(&codex_id));
    assert!(!claude_model.is_empty() && !codex_model.is_empty());
    #[expect(clippy::cast_precision_loss, reason = "token counts of a few hundred")]
    let cost = |w: [u64; 4], input: f64, cached: f64, output: f64| {
        ((w[0] - w[1]) as f64 * input + w[1] as f64 * cached + w[2] as f64 * output) / 1e6
    };
    let user_config = w.xdg_config.join("spex/config.jsonc");
    write(
        &user_config,
        json!({"usage": {"prices": {&claude_model: {"input": 3, "cached": 0.3, "output": 15}}}})
            .to_string(),
    );
    let v = usage(w, &["--by", "harness"]);
    let want = cost(claude_want, 3.0, 0.3, 15.0);
    assert!(
        (v["total"]["cost"].as_f64().unwrap_or(-1.0) - want).abs() < 1e-9
            && v["total"]["unpriced"] == true,
        "{want}: {v:#}"
    );
    let table = w.ok(&w.repo, &["usage", "--by", "harness"]);
    assert!(
        table.contains("COST") && table.contains("+?") && table.contains(&codex_model),
        "{table}"
    );
    write(
        &user_config,
        json!({"usage": {"prices": {
            &claude_model: {"input": 3, "cached": 0.3, "output": 15},
            &codex_model: {"input": 1.25, "output": 10}}}})
        .to_string(),
    );
    let v = usage(w, &["--by", "harness"]);
    let want = want + cost(codex_want, 1.25, 1.25, 10.0);
    assert!(
        (v["total"]["cost"].as_f64().unwrap_or(-1.0) - want).abs() < 1e-9
            && v["total"]["unpriced"] == false,
        "{want}: {v:#}"
    );
    std::fs::remove_file(&user_config).unwrap();

    // Prune removes the exited Claude session; its usage stays, as its day's totals.
    std::thread::sleep(Duration::from_millis(20));
    let pruned = json_of(&w.ok(&w.repo, &["prune", "--older-than", "1ms", "--json"]));
    assert_eq!(pruned["removed"], json!([id]), "{pruned}");
    assert!(w.record_if_any(&id).is_none());
    check_totals("after prune");
    let by_session = usage(w, &["--by", "session"]);
    let keys: Vec<&str> = by_session["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| g["key"].as_str())
        .collect();
    assert!(
        keys.iter().any(|k| k.starts_with("pruned on ")) && keys.len() == 2,
        "{by_session:#}"
    );
    let daily = read_or_empty(&w.project_dir().join("usage-daily.json"));
    assert!(daily.contains(&id) && daily.contains("claude"), "{daily}");
}

/// A session `spex launch` started records its base at launch: a commit made after it shows
/// in its diff, beside the file its Write created; a record without a base (one an older spex
/// wrote) is refused with a hint.
#[test]
fn a_launched_session_diffs_against_the_commit_it_was_launched_on() {
    use crate::runtime::{claude_world, host_log, launch_json, run_json, stop};
    use crate::support::claude_home::SeedOptions;

    let (w, fake) = claude_world(SeedOptions::default());
    git(&w.repo, &["add", "-A"]);
    git(&w.repo, &["commit", "-q", "-m", "base"]);
    let base = head(&w.repo);
    let launched = launch_json(&w, &fake, &["--", "--permission-mode", "acceptEdits"]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let diag = || host_log(&w, &id);
    assert_eq!(w.record(&id)["base_commit"], base.as_str(), "{}", diag());
    write(&w.repo.join("after.txt"), "committed after the launch\n");
    git(&w.repo, &["add", "after.txt"]);
    git(&w.repo, &["commit", "-q", "-m", "after the launch"]);
    let d = run_json(
        &w,
        &fake,
        &[
            "deliver",
            &id,
            "Please create the file. FILE=made.txt",
            "--json",
        ],
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", diag()));
    assert_eq!(d["confirmed"], true, "{d}\n{}", diag());
    wait_until(&w, &id, SETTLE, |r, _| r["turn"]["state"] == "completed")
        .unwrap_or_else(|e| panic!("the turn never completed\n{e}\n{}", diag()));
    let listed = json_of(&w.ok(&w.repo, &["diff", &id, "--json"]));
    let files: Vec<Value> = listed["files"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|f| json!([f["path"], f["status"], f["touched_by_session"]]))
        .collect();
    assert_eq!(
        files,
        [
            json!(["after.txt", "added", false]),
            json!(["made.txt", "added", true])
        ],
        "{listed:#}\n{}",
        diag()
    );
    stop(&w, &fake, &id);

    // A record an older spex wrote has no base: refused, saying what to do instead.
    let file = w.session_dir(&id).join("session.json");
    let mut rec: Value = json_of(&read(&file));
    rec.as_object_mut().unwrap().remove("base_commit");
    write(&file, rec.to_string());
    let out = w.spex(&w.repo, &["diff", &id]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(2)
            && err.contains("has no base commit recorded")
            && err.contains("hint: "),
        "{out:?}"
    );
}
