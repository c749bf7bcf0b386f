//! spex against the REAL pinned harnesses (no mocks): Codex's own `hooks/list` must report every
//! shim spex writes as enabled and trusted (and none after `clean`), a real Claude Code turn must
//! call `spex dispatch` for every bound event (and nothing after `clean`), and `spex doctor` must
//! tell a broken shim apart from a good one. Needs `scripts/install-peers.sh`; fails, never skips.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::claude_home::{claude_command, print_turn};
use crate::support::codex_home::{codex_command, trust_project, write_codex_config};
use crate::support::fake_anthropic::{FakeAnthropic, WRITE_CONTENT};
use crate::support::fake_responses::FakeResponses;
use crate::support::peers::peers_path;
use crate::support::rpc::AppServer;
use crate::support::world::{World, pretty, read, read_or_empty, write};

/// The events spex binds for Codex (`src/adapters/codex/mod.rs`).
const CODEX_EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PermissionRequest",
    "Stop",
    "Interrupt",
    "SessionEnd",
    "PreModelRequest",
    "PostModelRequest",
    "SubagentStart",
    "SubagentStop",
];

/// The events a plain print-mode Claude turn with one Write fires, all bound by spex.
const CLAUDE_TURN_EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "SessionEnd",
];

const USER_HOOK_COMMAND: &str = "echo user-hook";
const USER_HOOKS_JSON: &str = r#"{
  "hooks": {
    "PreToolUse": [
      { "matcher": "Bash", "hooks": [ { "type": "command", "command": "echo user-hook" } ] }
    ]
  }
}
"#;

const TURN_TIMEOUT: Duration = Duration::from_secs(90);

fn output_text(out: &Output) -> String {
    format!(
        "exit {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn seed_project(w: &World) {
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\", \"codex\"] }\n",
    );
}

/// `spex doctor --json` in `cwd` with the real peers on PATH: (exit code, report, raw output).
fn doctor(w: &World, cwd: &Path) -> (Option<i32>, Value, String) {
    let out = w
        .cmd(cwd, &["doctor", "--json"])
        .env("PATH", peers_path())
        .output()
        .expect("spex doctor runs");
    let text = output_text(&out);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("doctor --json printed no JSON ({e})\n{text}"));
    (out.status.code(), report, text)
}

/// The check of `harness` whose name starts with `name`.
fn check<'a>(report: &'a Value, harness: &str, name: &str) -> &'a Value {
    report[harness]["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"].as_str().is_some_and(|n| n.starts_with(name)))
        .unwrap_or_else(|| panic!("no {harness} check `{name}` in\n{}", pretty(report)))
}

/// A real `codex app-server` with the world's `HOME` and `CODEX_HOME`, its socket and log named
/// after `tag`.
fn app_server(w: &World, tag: &str) -> AppServer {
    // Codex refuses a CODEX_HOME that does not exist (before materialize it may not).
    fs::create_dir_all(&w.codex_home).unwrap();
    let mut cmd = codex_command(&w.codex_home, &w.home);
    cmd.current_dir(&w.home);
    // The world's base dir is a short `/tmp/spx*` path: well inside `sun_path`.
    AppServer::start(&mut cmd, w.dir.path(), tag, "spex-real-peers")
}

/// The raw `hooks/list` result for `cwds`.
fn hooks_list(app: &mut AppServer, cwds: &[&Path]) -> Value {
    app.call("hooks/list", &json!({ "cwds": cwds }))
}

/// The hooks `hooks/list` reported for `cwd` (the listing must exist and be error-free).
fn hooks_of<'a>(list: &'a Value, cwd: &Path) -> &'a [Value] {
    let listing = list["data"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|l| l["cwd"].as_str().map(Path::new) == Some(cwd))
        .unwrap_or_else(|| panic!("no listing for {} in\n{}", cwd.display(), pretty(list)));
    let errors = listing["errors"].as_array().map_or(0, Vec::len);
    assert_eq!(
        errors,
        0,
        "hooks/list errors for {}:\n{}",
        cwd.display(),
        pretty(list)
    );
    listing["hooks"].as_array().map_or(&[], Vec::as_slice)
}

fn command_of(hook: &Value) -> &str {
    hook["command"].as_str().unwrap_or_default()
}

fn is_spex_hook(hook: &Value) -> bool {
    command_of(hook).contains(" dispatch codex ")
}

/// `PreToolUse` -> `preToolUse`, the casing of `eventName` in `hooks/list`.
fn camel(event: &str) -> String {
    let mut c = event.chars();
    c.next()
        .map(|f| f.to_ascii_lowercase().to_string() + c.as_str())
        .unwrap_or_default()
}

/// The user's own hook in a listing, with the fields that must survive materialize and clean.
fn user_hook(list: &Value, cwd: &Path) -> Value {
    let hooks = hooks_of(list, cwd);
    let found: Vec<&Value> = hooks
        .iter()
        .filter(|h| command_of(h) == USER_HOOK_COMMAND)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "the user's hook `{USER_HOOK_COMMAND}` must be listed once for {}:\n{}",
        cwd.display(),
        pretty(list)
    );
    let h = found[0];
    assert_eq!(h["eventName"], "preToolUse", "{}", pretty(h));
    assert_eq!(h["matcher"], "Bash", "{}", pretty(h));
    // spex trusts only its own hooks; the user's stays as the user left it.
    assert_eq!(h["trustStatus"], "untrusted", "{}", pretty(h));
    // `displayOrder` is the hook's place in Codex's whole listing, which spex's own hooks for
    // events Codex lists earlier (PreModelRequest, PostModelRequest) move; not how Codex sees it.
    let mut h = h.clone();
    h.as_object_mut()
        .expect("a hook object")
        .remove("displayOrder");
    h
}

fn assert_spex_hooks_trusted(list: &Value, cwd: &Path, files: &dyn Fn() -> String) {
    let hooks = hooks_of(list, cwd);
    assert!(
        !hooks.is_empty(),
        "Codex lists no hooks for {}:\n{}\n{}",
        cwd.display(),
        pretty(list),
        files()
    );
    for event in CODEX_EVENTS {
        let suffix = format!(" dispatch codex {event}");
        let ours: Vec<&Value> = hooks
            .iter()
            .filter(|h| command_of(h).ends_with(&suffix))
            .collect();
        assert_eq!(
            ours.len(),
            1,
            "{}: expected exactly one spex `{event}` hook:\n{}\n{}",
            cwd.display(),
            pretty(list),
            files()
        );
        let h = ours[0];
        assert_eq!(
            h["eventName"],
            camel(event),
            "{}: {event}\n{}\n{}",
            cwd.display(),
            pretty(list),
            files()
        );
        assert_eq!(
            h["trustStatus"],
            "trusted",
            "{}: {event} not trusted\n{}\n{}",
            cwd.display(),
            pretty(list),
            files()
        );
        assert_eq!(
            h["enabled"],
            true,
            "{}: {event} not enabled\n{}\n{}",
            cwd.display(),
            pretty(list),
            files()
        );
    }
    let total = hooks.iter().filter(|h| is_spex_hook(h)).count();
    assert_eq!(
        total,
        CODEX_EVENTS.len(),
        "{}: unexpected spex hooks\n{}\n{}",
        cwd.display(),
        pretty(list),
        files()
    );
}

/// The project with the user's own Codex setup: their config trusting the project, their
/// hook in the main checkout's `.codex/hooks.json`, and two linked worktrees. Returns
/// `(wt, wt_tracked, the user's config.toml)`.
fn seed_user_codex(w: &World) -> (PathBuf, PathBuf, String) {
    seed_project(w);
    // The user already trusts the project in Codex (their own config, with a comment), so
    // Codex lists their hook before, during and after spex; spex adds only hook trust.
    trust_project(&w.codex_home, &w.repo);
    let user_config = format!(
        "# the user's own Codex config\n{}",
        read(&w.codex_home.join("config.toml"))
    );
    write(&w.codex_home.join("config.toml"), &user_config);
    // `wt` is checked out before the user's hooks.json is committed: it has no `.codex/` of
    // its own, so Codex loads project hooks there only through the anchor folder spex creates.
    let wt = w.add_worktree("wt");
    write(&w.repo.join(".codex/hooks.json"), USER_HOOKS_JSON);
    // `wt-tracked` checks out the user's (tracked) `.codex/hooks.json`. Both worktrees exist
    // before materialize, so no commit holds spex's output.
    let wt_tracked = w.add_worktree("wt-tracked");
    assert!(!wt.join(".codex").exists() && wt_tracked.join(".codex/hooks.json").is_file());
    (wt, wt_tracked, user_config)
}

#[test]
fn codex_hooks_list_trusts_every_spex_hook_in_main_and_worktree() {
    let started = Instant::now();
    let w = World::new();
    let (wt, wt_tracked, user_config) = seed_user_codex(&w);
    let trees = [w.repo.as_path(), wt.as_path(), wt_tracked.as_path()];

    let before = hooks_list(&mut app_server(&w, "h0"), &trees);
    // Codex attributes the hook to the main checkout's hooks.json in every tree that sees it.
    let user = user_hook(&before, &w.repo);
    assert_eq!(user_hook(&before, &wt_tracked), user, "{}", pretty(&before));
    for cwd in trees {
        assert!(
            !hooks_of(&before, cwd).iter().any(is_spex_hook),
            "spex hooks before materialize in {}:\n{}",
            cwd.display(),
            pretty(&before)
        );
    }

    // `wt` goes last (and is cleaned first): a materialize or clean in another tree removes
    // its anchor folder, see `codex_worktree_anchor_survives_materialize_in_main`.
    w.ok(&w.repo, &["materialize"]);
    w.ok(&wt_tracked, &["materialize"]);
    w.ok(&wt, &["materialize"]);
    assert!(
        wt.join(".codex").is_dir(),
        "materialize made no `.codex/` anchor in {}",
        wt.display()
    );

    let mut app = app_server(&w, "h1");
    let during = hooks_list(&mut app, &trees);
    let files = || {
        format!(
            "listing before materialize:\n{}\nhooks.json:\n{}\nconfig.toml:\n{}\n{}",
            pretty(&before),
            read_or_empty(&w.repo.join(".codex/hooks.json")),
            read_or_empty(&w.codex_home.join("config.toml")),
            app.log()
        )
    };
    for cwd in trees {
        assert_spex_hooks_trusted(&during, cwd, &files);
        assert_eq!(
            user_hook(&during, cwd),
            user,
            "materialize changed how Codex sees the user's hook in {}\n{}",
            cwd.display(),
            pretty(&during)
        );
    }
    drop(app);

    for cwd in [&w.repo, &wt] {
        let (code, report, text) = doctor(&w, cwd);
        assert_eq!(
            check(&report, "codex", "codex hooks/list")["status"],
            "ok",
            "doctor in {}: {text}",
            cwd.display()
        );
        assert_eq!(code, Some(0), "doctor in {}: {text}", cwd.display());
    }

    w.ok(&wt, &["clean"]);
    w.ok(&wt_tracked, &["clean"]);
    w.ok(&w.repo, &["clean"]);
    assert_eq!(
        read(&w.repo.join(".codex/hooks.json")),
        USER_HOOKS_JSON,
        "clean did not restore the user's hooks.json byte for byte"
    );
    assert_eq!(
        read(&w.codex_home.join("config.toml")),
        user_config,
        "clean did not restore the user's config.toml byte for byte"
    );

    let mut app = app_server(&w, "h2");
    let after = hooks_list(&mut app, &trees);
    for cwd in trees {
        let leftovers: Vec<&Value> = hooks_of(&after, cwd)
            .iter()
            .filter(|h| is_spex_hook(h))
            .collect();
        assert!(
            leftovers.is_empty(),
            "spex hooks remain after clean in {}:\n{}\n{}",
            cwd.display(),
            pretty(&after),
            app.log()
        );
        // Codex sees exactly what it saw before spex: in `wt` that is nothing again (its
        // anchor folder is gone), elsewhere the user's hook, unchanged.
        assert_eq!(
            hooks_of(&after, cwd),
            hooks_of(&before, cwd),
            "after clean Codex sees {} differently than before materialize\nbefore:\n{}\nafter:\n{}",
            cwd.display(),
            pretty(&before),
            pretty(&after)
        );
    }
    assert_eq!(user_hook(&after, &w.repo), user, "{}", pretty(&after));
    assert_eq!(user_hook(&after, &wt_tracked), user, "{}", pretty(&after));
    drop(app);
    eprintln!("codex hooks/list: {:?}", started.elapsed());
}

/// A linked worktree without a `.codex/` of its own sees the main checkout's hooks only
/// through the empty anchor folder spex creates there; materializing another tree of the same
/// repository must not take it away (Codex would then run no spex hook in that worktree).
#[test]
fn codex_worktree_anchor_survives_materialize_in_main() {
    let w = World::new();
    seed_project(&w);
    let wt = w.add_worktree("wt");
    w.ok(&w.repo, &["materialize"]);
    w.ok(&wt, &["materialize"]);
    assert!(
        wt.join(".codex").is_dir(),
        "no anchor after materialize in {}",
        wt.display()
    );

    // Any later materialize elsewhere (here: the main checkout) must leave `wt` as it is.
    let out = w.ok(&w.repo, &["materialize"]);
    let check = w.spex(&wt, &["materialize", "--check"]);
    let mut app = app_server(&w, "a1");
    let list = hooks_list(&mut app, &[&wt]);
    let files = || {
        format!(
            "second materialize in the main checkout:\n{out}\n`materialize --check` in {}:\n{}\n{}",
            wt.display(),
            output_text(&check),
            app.log()
        )
    };
    assert!(
        wt.join(".codex").is_dir(),
        "materialize in the main checkout removed {}/.codex\n{}",
        wt.display(),
        files()
    );
    assert_spex_hooks_trusted(&list, &wt, &files);
    assert!(check.status.success(), "{}", files());
}

/// Runs the real `claude -p` once in `w.repo` against `fake`, with `SPEX_HOME` set so the hook
/// commands (which inherit claude's env) log into the test's store. Returns diagnostics.
fn claude_turn(w: &World, fake: &FakeAnthropic, tag: &str) -> String {
    let mut cmd = claude_command(&w.home, &fake.base_url());
    cmd.env("SPEX_HOME", &w.spex_home)
        // The invocation log is opt-in (it costs the hot path a file open).
        .env("SPEX_TRACE_DISPATCH", "1");
    let diag = print_turn(&mut cmd, fake, &w.repo, w.dir.path(), tag, TURN_TIMEOUT).diag;
    w.assert_grammar(&|| diag.clone());
    diag
}

/// The dispatch log's lines (every line must be a JSON object).
fn dispatch_lines(log: &Path) -> Vec<Value> {
    read_or_empty(log)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(Value::is_object)
                .unwrap_or_else(|| panic!("dispatch log line is not a JSON object: {l:?}"))
        })
        .collect()
}

#[test]
fn claude_turn_invokes_spex_dispatch_for_bound_events() {
    let started = Instant::now();
    let w = World::new();
    seed_project(&w);
    w.ok(&w.repo, &["materialize"]);
    let settings = w.repo.join(".claude/settings.json");
    assert!(
        settings.is_file(),
        "materialize wrote no {}",
        settings.display()
    );

    let fake = FakeAnthropic::start();
    let diag = claude_turn(&w, &fake, "c1");
    assert_eq!(
        read_or_empty(&w.repo.join("hello.txt")),
        WRITE_CONTENT,
        "hello.txt not written\n{diag}"
    );
    let log = w.project_dir().join("dispatch.log");
    let lines = dispatch_lines(&log);
    let ctx = || {
        format!(
            "dispatch log {}:\n{}\nsettings.json:\n{}\n{diag}",
            log.display(),
            read_or_empty(&log),
            read_or_empty(&settings)
        )
    };
    let claude: Vec<&Value> = lines.iter().filter(|l| l["harness"] == "claude").collect();
    assert_eq!(
        claude.len(),
        lines.len(),
        "dispatch lines from another harness\n{}",
        ctx()
    );
    let mut session: Option<&str> = None;
    for event in CLAUDE_TURN_EVENTS {
        let hits: Vec<&&Value> = claude.iter().filter(|l| l["event"] == *event).collect();
        assert!(!hits.is_empty(), "no dispatch of {event}\n{}", ctx());
        for l in hits {
            let id = l["session_id"].as_str().unwrap_or_default();
            assert!(!id.is_empty(), "{event} without session_id: {l}\n{}", ctx());
            let first = *session.get_or_insert(id);
            assert_eq!(id, first, "{event}: session ids differ\n{}", ctx());
        }
    }
    // Every line of the turn belongs to that one session.
    for l in &claude {
        assert_eq!(
            l["session_id"].as_str(),
            session,
            "a dispatch from another session: {l}\n{}",
            ctx()
        );
    }

    // Claude rewrote `~/.claude.json`, which spex created for its trust entry: its own keys
    // go after the members it found (2.1.197 appends them), and clean takes back only spex's.
    let state_path = w.home.join(".claude.json");
    let by_claude = read(&state_path);
    let parsed = |text: &str| -> serde_json::Map<String, Value> {
        serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("~/.claude.json does not parse ({e}):\n{text}"))
    };
    let claude_keys: Vec<String> = parsed(&by_claude)
        .keys()
        .filter(|k| *k != "projects")
        .cloned()
        .collect();
    assert!(
        !claude_keys.is_empty(),
        "Claude wrote nothing into ~/.claude.json:\n{by_claude}"
    );
    let spex_at = by_claude.find("\"projects\"").expect("spex's entry");
    for k in &claude_keys {
        assert!(
            by_claude.find(&format!("\n  \"{k}\"")) > Some(spex_at),
            "Claude put `{k}` before the member it found:\n{by_claude}"
        );
    }

    w.ok(&w.repo, &["clean"]);
    let cleaned = parsed(&read(&state_path));
    let before = parsed(&by_claude);
    for k in &claude_keys {
        assert_eq!(
            cleaned.get(k),
            before.get(k),
            "clean changed Claude's `{k}`:\n{cleaned:?}"
        );
    }
    assert!(
        cleaned
            .get("projects")
            .and_then(|p| p.get(w.repo.to_str().unwrap()))
            .and_then(|p| p.get("hasTrustDialogAccepted"))
            .is_none(),
        "clean left spex's trust entry:\n{cleaned:?}"
    );
    assert!(
        !settings.exists(),
        "clean left {} (spex created it):\n{}",
        settings.display(),
        read_or_empty(&settings)
    );
    match fs::remove_file(&log) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => panic!("remove {}: {e}", log.display()),
    }
    fs::remove_file(w.repo.join("hello.txt")).unwrap();

    let diag = claude_turn(&w, &fake, "c2");
    assert_eq!(
        read_or_empty(&w.repo.join("hello.txt")),
        WRITE_CONTENT,
        "the second turn did not run\n{diag}"
    );
    assert_eq!(
        read_or_empty(&log),
        "",
        "spex dispatch ran after clean\n{diag}"
    );
    eprintln!("claude dispatch: {:?}", started.elapsed());
}

#[test]
fn doctor_reports_claude_shims_and_trust() {
    let started = Instant::now();
    let w = World::new();
    seed_project(&w);
    w.ok(&w.repo, &["materialize"]);

    let (code, report, text) = doctor(&w, &w.repo);
    assert_eq!(check(&report, "claude", "shims")["status"], "ok", "{text}");
    assert_eq!(
        check(&report, "claude", "workspace trust")["status"],
        "ok",
        "{text}"
    );
    assert_eq!(code, Some(0), "doctor after materialize: {text}");

    // The user deletes spex's Stop entry by hand.
    let settings = w.repo.join(".claude/settings.json");
    let mut doc: Value = serde_json::from_str(&read(&settings)).unwrap();
    let removed = doc["hooks"]
        .as_object_mut()
        .and_then(|h| h.remove("Stop"))
        .unwrap_or_else(|| panic!("no Stop entry in {}", read(&settings)));
    assert!(
        removed.to_string().contains(" dispatch claude Stop"),
        "{removed}"
    );
    write(&settings, serde_json::to_string_pretty(&doc).unwrap());

    let (code, report, text) = doctor(&w, &w.repo);
    let shims = check(&report, "claude", "shims");
    assert_eq!(shims["status"], "fail", "{text}");
    let detail = shims["detail"].as_str().unwrap_or_default();
    let missing: Vec<&str> = detail
        .split_once("missing: ")
        .map(|(_, rest)| rest.split([';', '\n']).next().unwrap_or_default())
        .unwrap_or_default()
        .split(", ")
        .collect();
    assert_eq!(missing, ["Stop"], "{text}");
    assert_eq!(code, Some(1), "doctor with a missing shim: {text}");
    eprintln!("doctor: {:?}", started.elapsed());
}

/// `spex <args>` in `cwd` with `$PWD` spelling `cwd` as the user typed it (as a shell sets it;
/// the process's own working folder is always the resolved path). Asserts success.
fn spex_in_spelling(w: &World, cwd: &Path, args: &[&str]) -> String {
    let out = w
        .cmd(cwd, args)
        .env("PWD", cwd)
        .output()
        .expect("spex runs");
    assert!(
        out.status.success(),
        "spex {args:?} in {}: {}",
        cwd.display(),
        output_text(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The spex record Codex thread `thread`'s hooks wrote, once its turn shows `state`.
fn codex_record_when(w: &World, thread: &str, state: &str, diag: &dyn Fn() -> String) -> Value {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let rec = w.alias("codex", thread).and_then(|id| w.record_if_any(&id));
        if let Some(rec) = rec.as_ref().filter(|r| r["turn"]["state"] == state) {
            return rec.clone();
        }
        assert!(
            Instant::now() < end,
            "no record of thread {thread} with a {state} turn: {}\n{}",
            rec.as_ref().map_or_else(|| "(none)".to_owned(), pretty),
            diag()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A checkout reached through a symlink (`<tmp>/link -> <tmp>/repo`), materialized from inside
/// the link. Codex keys hook trust by the hooks file's path as the thread's working folder
/// spells it, so a thread started in `link` looks up `<tmp>/link/.codex/hooks.json:<event>:0:0`
/// and one in the canonical path `<tmp>/repo/.codex/hooks.json:<event>:0:0`: spex must trust
/// both. Turns in either spelling land in the one project store; a materialize from the
/// canonical path keeps the link's trust; `clean` takes back every entry it added.
#[test]
fn codex_trusts_spex_hooks_in_both_spellings_of_a_symlinked_checkout() {
    let w = World::new();
    let fake = FakeResponses::start();
    write_codex_config(
        &w.codex_home,
        &fake.base_url(),
        "never",
        "danger-full-access",
    );
    let config_path = w.codex_home.join("config.toml");
    let user_config = read(&config_path);
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"codex\"] }\n",
    );
    fs::create_dir_all(w.repo.join("sub")).unwrap();
    let base = w.repo.parent().expect("the repo has a parent");
    let link = base.join("link");
    std::os::unix::fs::symlink(&w.repo, &link).unwrap();
    let link_sub = link.join("sub");

    spex_in_spelling(&w, &link_sub, &["materialize"]);

    // Each cwd, and the spelling of the main checkout Codex puts into its trust keys there.
    let spellings = [
        (w.repo.as_path(), w.repo.as_path()),
        (link.as_path(), link.as_path()),
        (link_sub.as_path(), link.as_path()),
    ];
    let cwds: Vec<&Path> = spellings.iter().map(|(cwd, _)| *cwd).collect();
    let mut app = app_server(&w, "l1");
    let during = hooks_list(&mut app, &cwds);
    let files = || {
        format!(
            "config.toml:\n{}\n{}",
            read_or_empty(&config_path),
            app.log()
        )
    };
    for (cwd, main) in spellings {
        assert_spex_hooks_trusted(&during, cwd, &files);
        let prefix = format!("{}/.codex/hooks.json:", main.display());
        for h in hooks_of(&during, cwd).iter().filter(|h| is_spex_hook(h)) {
            let key = h["key"].as_str().unwrap_or_default();
            assert!(
                key.starts_with(&prefix),
                "{}: Codex keys trust as `{key}`, expected `{prefix}...`\n{}",
                cwd.display(),
                files()
            );
        }
    }
    drop(app);

    // From the canonical spelling nothing changes: the link's spelling is on record.
    let unchanged = w
        .cmd(&w.repo, &["materialize", "--check"])
        .env("PWD", &w.repo)
        .output()
        .expect("spex runs");
    assert_eq!(
        unchanged.status.code(),
        Some(0),
        "materialize --check in the canonical spelling: {}\n{}",
        output_text(&unchanged),
        read_or_empty(&config_path)
    );
    let out = w
        .cmd(&link, &["doctor", "--json"])
        .env("PATH", peers_path())
        .env("PWD", &link)
        .output()
        .expect("spex doctor runs");
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("doctor --json printed no JSON ({e})\n{}", output_text(&out)));
    let listed = check(&report, "codex", "codex hooks/list");
    assert_eq!(listed["status"], "ok", "{}", output_text(&out));
    let detail = listed["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains(&link.display().to_string()),
        "doctor did not check the link's spelling: {}",
        output_text(&out)
    );

    // Real turns in both spellings: the hooks run (so Codex trusts them) and every record
    // lands in the one project store, naming the canonical tree.
    let mut cmd = codex_command(&w.codex_home, &w.home);
    cmd.current_dir(&w.repo)
        .env("SPEX_HOME", &w.spex_home)
        .env("XDG_CONFIG_HOME", &w.xdg_config);
    let mut cx = AppServer::start(&mut cmd, w.dir.path(), "l2", "spex-real-peers");
    for (cwd, prompt, touched) in [
        (&link, "SCENARIO:patch", json!(["hello.txt"])),
        (&w.repo, "hello", json!([])),
    ] {
        let thread = cx.start_thread(&json!({ "cwd": cwd }));
        let turn = cx.start_turn(&thread, prompt);
        let done = cx.completed_within(&turn, TURN_TIMEOUT);
        let log = cx.log();
        let diag = || {
            format!(
                "thread in {}\n--- dispatch-errors.log:\n{}\n--- fake requests:\n{}\n{log}",
                cwd.display(),
                w.errors_log(),
                fake.request_lines().join("\n"),
            )
        };
        let done = done.unwrap_or_else(|| panic!("no turn/completed\n{}", diag()));
        assert_eq!(done["turn"]["status"], "completed", "{done}\n{}", diag());
        let rec = codex_record_when(&w, &thread, "completed", &diag);
        assert_eq!(rec["tree"], json!(w.repo), "{}", pretty(&rec));
        assert_eq!(rec["touched"], touched, "{}", pretty(&rec));
    }
    drop(cx);
    // `project_dir` insists on exactly one project folder.
    let project = w.project_dir();
    let sessions = fs::read_dir(project.join("sessions")).map_or(0, Iterator::count);
    assert_eq!(
        sessions,
        2,
        "both threads' records in {}",
        project.display()
    );

    // Clean from the canonical spelling takes back the link's entries too.
    spex_in_spelling(&w, &w.repo, &["clean"]);
    assert_eq!(
        read(&config_path),
        user_config,
        "clean did not restore the user's config.toml byte for byte"
    );
    let mut app = app_server(&w, "l3");
    let after = hooks_list(&mut app, &cwds);
    for cwd in &cwds {
        assert!(
            !hooks_of(&after, cwd).iter().any(is_spex_hook),
            "spex hooks remain after clean in {}:\n{}",
            cwd.display(),
            pretty(&after)
        );
    }
}

/// What Codex's own writer puts into `config.toml` (`config/batchWrite`, the path its dialogs
/// and toggles take): new tables, another project's trust, a top-level key.
const CODEX_WRITES: &str = r#"{"edits": [
    {"keyPath": "tui.show_tooltips", "value": false, "mergeStrategy": "upsert"},
    {"keyPath": "notice.hide_full_access_warning", "value": true, "mergeStrategy": "upsert"},
    {"keyPath": "projects", "value": {"/some/other/repo": {"trust_level": "trusted"}}, "mergeStrategy": "upsert"},
    {"keyPath": "hide_agent_reasoning", "value": true, "mergeStrategy": "replace"}
], "reloadUserConfig": true}"#;

/// Codex's values from [`CODEX_WRITES`] and the user's own, read back with a TOML parser.
fn assert_codex_values_kept(config: &str, when: &str) {
    let doc: toml_edit::DocumentMut = config
        .parse()
        .unwrap_or_else(|e| panic!("{when}: config.toml does not parse ({e}):\n{config}"));
    let found = [
        doc.get("tui")
            .and_then(|t| t.get("show_tooltips"))
            .and_then(toml_edit::Item::as_bool)
            == Some(false),
        doc.get("notice")
            .and_then(|t| t.get("hide_full_access_warning"))
            .and_then(toml_edit::Item::as_bool)
            == Some(true),
        doc.get("projects")
            .and_then(|t| t.get("/some/other/repo"))
            .and_then(|t| t.get("trust_level"))
            .and_then(toml_edit::Item::as_str)
            == Some("trusted"),
        doc.get("hide_agent_reasoning")
            .and_then(toml_edit::Item::as_bool)
            == Some(true),
        doc.get("model").and_then(toml_edit::Item::as_str) == Some("gpt-5.5"),
    ];
    assert!(
        found.iter().all(|f| *f),
        "{when}: a value Codex or the user wrote is gone {found:?}:\n{config}"
    );
}

/// Where Codex's writer put [`CODEX_WRITES`] in a file spex had materialized, as the README
/// ("What materialize writes") records it: the top-level key after the last top-level key, the
/// other project's table right after spex's project table (its last sibling), the new tables
/// after the last table and before the trailing comment.
fn assert_codex_placement(written: &str, repo: &Path) {
    let lines: Vec<&str> = written.lines().collect();
    let at = |line: &str| {
        lines
            .iter()
            .position(|l| *l == line)
            .unwrap_or_else(|| panic!("no line `{line}` in config.toml:\n{written}"))
    };
    let headers: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with('['))
        .collect();
    let key = at("hide_agent_reasoning = true");
    assert!(
        at("model = \"gpt-5.5\"") < key && key < headers[0],
        "a new top-level key goes after the last top-level key:\n{written}"
    );
    let ours = at(&format!("[projects.\"{}\"]", repo.display()));
    let next = headers.iter().find(|&&h| h > ours).copied();
    assert_eq!(
        next,
        Some(at("[projects.\"/some/other/repo\"]")),
        "a new sub-table goes right after its last sibling:\n{written}"
    );
    let last_state = headers
        .iter()
        .copied()
        .filter(|&h| lines[h].starts_with("[hooks.state."))
        .max()
        .unwrap_or_else(|| panic!("no spex hook trust:\n{written}"));
    for table in ["[tui]", "[notice]"] {
        assert!(
            at(table) > last_state,
            "a new top-level table goes after the last table:\n{written}"
        );
    }
    assert_eq!(
        lines.last(),
        Some(&"# the user's last words"),
        "and before the trailing comment:\n{written}"
    );
    // Upserting `projects` itself gives it a header of its own (an empty `[projects]` line
    // before the first project); the parents of the tables it added stay implicit.
    assert_eq!(
        headers.first().map(|&h| lines[h]),
        Some("[projects]"),
        "{written}"
    );
    for parent in ["[hooks]", "[hooks.state]"] {
        assert!(
            !lines.contains(&parent),
            "a parent table stays implicit:\n{written}"
        );
    }
}

/// spex's own tables in `config.toml`, as Codex's writer would add them: no header for a
/// parent table (`[projects]`, `[hooks]`, `[hooks.state]`).
fn assert_parents_implicit(text: &str) {
    for parent in ["[projects]", "[hooks]", "[hooks.state]"] {
        assert!(
            !text.lines().any(|l| l == parent),
            "spex wrote a header for the parent table {parent}:\n{text}"
        );
    }
}

#[test]
fn codex_config_writes_survive_materialize_and_clean() {
    let w = World::new();
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"codex\"] }\n",
    );
    let config_path = w.codex_home.join("config.toml");
    // A trailing comment: where the fence of an older spex ended, and where Codex's new tables
    // then landed inside it.
    let user = "# the user's own\nmodel = \"gpt-5.5\"\n\n# the user's last words\n";
    write(&config_path, user);
    w.ok(&w.repo, &["materialize"]);
    let materialized = read(&config_path);
    assert_parents_implicit(&materialized);

    let mut app = app_server(&w, "cfg");
    let params: Value = serde_json::from_str(CODEX_WRITES).unwrap();
    app.call("config/batchWrite", &params);
    let written = read(&config_path);
    assert_ne!(written, materialized, "Codex wrote nothing");
    assert_codex_values_kept(&written, "after Codex's write");
    assert_codex_placement(&written, &w.repo);

    let check = w.spex(&w.repo, &["materialize", "--check"]);
    assert_eq!(
        check.status.code(),
        Some(0),
        "--check after Codex wrote its own settings: {}\n{written}",
        output_text(&check)
    );
    w.ok(&w.repo, &["materialize"]);
    assert_eq!(
        read(&config_path),
        written,
        "materialize rewrote Codex's file"
    );
    w.ok(&w.repo, &["clean"]);
    let cleaned = read(&config_path);
    assert_codex_values_kept(&cleaned, "after clean");
    let repo = w.repo.to_string_lossy().into_owned();
    assert!(
        !cleaned.contains(&repo) && !cleaned.contains("trusted_hash"),
        "clean left spex entries:\n{cleaned}"
    );
    assert!(
        cleaned.starts_with("# the user's own\nmodel = \"gpt-5.5\"\n")
            && cleaned.ends_with("\n# the user's last words\n"),
        "{cleaned}"
    );
    drop(app);

    w.ok(&w.repo, &["materialize"]);
    let again = read(&config_path);
    assert_codex_values_kept(&again, "after materialize again");
    let check = w.spex(&w.repo, &["materialize", "--check"]);
    assert_eq!(
        check.status.code(),
        Some(0),
        "--check after materialize again: {}\n{again}",
        output_text(&check)
    );
    // A server started now reads the file the last materialize wrote (one started before
    // clean might still hold the trust it loaded then).
    let mut app = app_server(&w, "cfg2");
    let list = hooks_list(&mut app, &[w.repo.as_path()]);
    assert_spex_hooks_trusted(&list, &w.repo, &|| {
        format!("config.toml:\n{again}\n{}", app.log())
    });
}

/// A dotfile manager's `$CODEX_HOME/config.toml -> dotfiles/config.toml`: spex edits the
/// target, the link stays a link through materialize and clean, and the real Codex reads spex's
/// trust through it.
#[test]
fn codex_trusts_spex_hooks_through_a_symlinked_config_toml() {
    let w = World::new();
    seed_project(&w);
    trust_project(&w.codex_home, &w.repo);
    let dots = w.dir.path().join("dotfiles");
    fs::create_dir_all(&dots).unwrap();
    let target = dots.join("config.toml");
    let link = w.codex_home.join("config.toml");
    let user_config = format!("# from my dotfiles\n{}", read(&link));
    write(&target, &user_config);
    fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let is_link = || {
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink(),
            "{} is no longer a link",
            link.display()
        );
        assert_eq!(fs::read_link(&link).unwrap(), target);
    };

    w.ok(&w.repo, &["materialize"]);
    is_link();
    assert!(read(&target).contains("trusted_hash"), "{}", read(&target));
    let mut app = app_server(&w, "l1");
    let during = hooks_list(&mut app, &[&w.repo]);
    let files = || format!("config.toml:\n{}\n{}", read_or_empty(&target), app.log());
    assert_spex_hooks_trusted(&during, &w.repo, &files);
    drop(app);
    let check = w.spex(&w.repo, &["materialize", "--check"]);
    assert_eq!(check.status.code(), Some(0), "{}", output_text(&check));

    w.ok(&w.repo, &["clean"]);
    is_link();
    assert_eq!(
        read(&target),
        user_config,
        "clean restores the target byte for byte"
    );
    let mut app = app_server(&w, "l2");
    let after = hooks_list(&mut app, &[&w.repo]);
    assert!(
        !hooks_of(&after, &w.repo).iter().any(is_spex_hook),
        "spex hooks after clean:\n{}",
        pretty(&after)
    );
}
