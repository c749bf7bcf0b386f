//! How people name sessions: handles, prefixes of handles, names, full ids; what is refused
//! before it becomes a path; `wait` on several states; the hints spex prints (each one run as
//! printed); session text with control characters shown escaped; completions of session
//! arguments. Sessions here are made by feeding hook payloads through `spex dispatch`.

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::world::{World, merged, write};

/// Two Claude session ids whose handles are `306f` and `cafe` (a handle shaped like a name).
const A: &str = "11111111-2222-4333-8444-55555555306f";
const B: &str = "11111111-2222-4333-8444-66666666cafe";

fn feed(w: &World, id: &str, event: &str, extra: &Value) {
    let base = json!({ "session_id": id, "cwd": w.repo, "hook_event_name": event });
    let out = w.dispatch(&w.repo, "claude", event, &merged(&base, extra));
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
}

/// A live session that ran a turn.
fn working(w: &World, id: &str, prompt: &str) {
    feed(w, id, "UserPromptSubmit", &json!({ "prompt": prompt }));
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs spex and expects exit code `code`; stdout and stderr.
fn expect(w: &World, args: &[&str], code: i32) -> (String, String) {
    let out = w.spex(&w.repo, args);
    let (o, e) = text(&out);
    assert_eq!(out.status.code(), Some(code), "spex {args:?}:\n{o}{e}");
    (o, e)
}

fn is_uuid(word: &str) -> bool {
    word.len() == 36 && word.chars().filter(|c| *c == '-').count() == 4
}

/// No 36-character id in human output (people read handles and names).
fn assert_no_full_id(what: &str, text: &str) {
    let words: Vec<&str> = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| is_uuid(w))
        .collect();
    assert!(words.is_empty(), "{what} names full ids {words:?}:\n{text}");
}

#[test]
fn ids_that_cannot_be_names_are_refused_before_they_become_paths() {
    let w = World::new();
    working(&w, A, "one");
    // A record outside the store, where a path argument would lead.
    let outside = w.dir.path().join("outside");
    let record = w.record(A);
    write(&outside.join("session.json"), record.to_string());
    for arg in [
        "",
        outside.to_str().unwrap(),
        "../outside",
        "a/b",
        "x y",
        &"a".repeat(129),
    ] {
        let out = w.spex(&w.repo, &["show", arg]);
        let (o, e) = text(&out);
        assert_eq!(out.status.code(), Some(2), "show {arg:?} resolved:\n{o}{e}");
        // A `/` names a project (`project/handle`): a path names no project of the store, and
        // the word after it would be checked as any id is.
        let refused = if arg.contains('/') {
            e.contains("has sessions in the store")
                && e.contains("hint: the projects with sessions: repo")
        } else {
            e.contains("is not a session id, handle or name")
                && e.contains("hint: `spex sessions --all`")
        };
        assert!(refused, "show {arg:?}: {e}");
        assert!(o.is_empty(), "{o}");
    }
    // The same rule everywhere an id is taken.
    for cmd in ["wait", "deliver", "stop", "attach", "snapshot", "rename"] {
        let mut args = vec![cmd, ""];
        if matches!(cmd, "deliver" | "rename") {
            args.push("x");
        }
        if cmd == "wait" {
            args.extend(["--until", "idle"]);
        }
        let (_, e) = expect(&w, &args, 2);
        assert!(e.contains("is not a session id"), "{cmd}: {e}");
    }
}

#[test]
fn a_garbled_alias_file_drops_the_event_and_writes_nothing_outside_the_store() {
    let w = World::new();
    working(&w, A, "one");
    let evil = w.dir.path().join("evil");
    for forged in [
        evil.to_str().unwrap().to_owned(),
        "../../../../evil".to_owned(),
    ] {
        write(
            &w.project_dir().join("aliases").join("claude-thread-9"),
            &forged,
        );
        let payload = json!({ "session_id": "thread-9", "cwd": w.repo, "hook_event_name": "UserPromptSubmit", "prompt": "p" });
        let out = w.dispatch(&w.repo, "claude", "UserPromptSubmit", &payload);
        assert!(out.status.success(), "{out:?}");
        assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
        assert!(!evil.exists(), "dispatch wrote outside the store: {forged}");
        assert!(
            w.errors_log().contains("event dropped") && w.errors_log().contains("alias file"),
            "{}",
            w.errors_log()
        );
    }
    // A forged `SPEX_SESSION_ID` in the hook's environment: dropped the same way.
    let payload = json!({ "session_id": B, "cwd": w.repo, "hook_event_name": "UserPromptSubmit", "prompt": "p" });
    let out = crate::support::world::feed(
        w.cmd(&w.repo, &["dispatch", "claude", "UserPromptSubmit"])
            .env("SPEX_SESSION_ID", evil.to_str().unwrap()),
        payload.to_string().as_bytes(),
    );
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "{out:?}"
    );
    assert!(!evil.exists());
    assert!(
        w.errors_log().contains("SPEX_SESSION_ID"),
        "{}",
        w.errors_log()
    );
    // Records stay where they belong.
    assert_eq!(w.session_ids(), [A]);
}

#[test]
fn handles_their_prefixes_and_names_name_a_session_everywhere() {
    let w = World::new();
    working(&w, A, "one");
    working(&w, B, "two");
    let list = w.ok(&w.repo, &["sessions"]);
    assert!(list.contains("306f") && list.contains("cafe"), "{list}");
    assert_no_full_id("sessions", &list);
    // A prefix of a handle, as a person types it from the table.
    let shown: Value = serde_json::from_str(&w.ok(&w.repo, &["show", "306", "--json"])).unwrap();
    assert_eq!(shown["session"]["id"], A);
    let waited = w.ok(&w.repo, &["wait", "ca", "--until", "working"]);
    assert_eq!(waited.trim(), "cafe working");
    // Ambiguous: says which sessions, by handle.
    let (_, e) = expect(&w, &["show", "11111111"], 2);
    assert!(e.contains("306f") && e.contains("cafe"), "{e}");
    assert_no_full_id("an ambiguous prefix", &e);

    // Names: given, shown, accepted wherever an id is.
    let (o, _) = expect(&w, &["rename", "306f", "fix-login"], 0);
    assert_eq!(o.trim(), "306f is named fix-login");
    let list = w.ok(&w.repo, &["sessions"]);
    let row = list.lines().find(|l| l.starts_with("306f")).unwrap();
    assert!(row.contains("fix-login"), "{list}");
    assert!(list.lines().next().unwrap().contains("NAME"), "{list}");
    let shown: Value =
        serde_json::from_str(&w.ok(&w.repo, &["show", "fix-login", "--json"])).unwrap();
    assert_eq!(shown["session"]["id"], A);
    assert_eq!(shown["session"]["name"], "fix-login");
    assert_eq!(
        w.ok(&w.repo, &["wait", "fix-login", "--until", "working"])
            .trim(),
        "306f working"
    );
    // Unique among live sessions; a name is no id or handle; its shape is checked.
    let (_, e) = expect(&w, &["rename", "cafe", "fix-login"], 2);
    assert!(
        e.contains("already the name of live session 306f") && e.contains("hint:"),
        "{e}"
    );
    let (_, e) = expect(&w, &["rename", "306f", "cafe"], 2);
    assert!(e.contains("is the handle of session cafe"), "{e}");
    for bad in ["9lives", "has space", "x.y", &"n".repeat(41)] {
        let (_, e) = expect(&w, &["rename", "cafe", bad], 2);
        assert!(e.contains("is not a usable session name"), "{bad:?}: {e}");
    }
    // Once its session has exited, a name can be given again; the new holder has it.
    feed(&w, A, "SessionEnd", &json!({ "reason": "exit" }));
    w.ok(&w.repo, &["rename", "cafe", "fix-login"]);
    let shown: Value =
        serde_json::from_str(&w.ok(&w.repo, &["show", "fix-login", "--json"])).unwrap();
    assert_eq!(shown["session"]["id"], B);
    let (o, _) = expect(&w, &["rename", "cafe", "--clear"], 0);
    assert_eq!(o.trim(), "cafe has no name");
    expect(&w, &["show", "fix-login"], 2);

    // Every command that takes a session says what it takes.
    for cmd in [
        "show",
        "wait",
        "deliver",
        "attach",
        "snapshot",
        "stop",
        "interrupt",
        "resume",
        "record",
        "rename",
    ] {
        let help = w.ok(&w.repo, &[cmd, "--help"]);
        assert!(
            help.contains("handle")
                && help.contains("name")
                && help.contains("unique prefix of a handle or id"),
            "`spex {cmd} --help` does not say what names a session:\n{help}"
        );
    }
}

#[test]
fn wait_takes_the_spelling_sessions_prints_and_several_states() {
    let w = World::new();
    working(&w, A, "one");
    feed(
        &w,
        A,
        "Notification",
        &json!({ "message": "Claude needs your permission to use Bash", "notification_type": "permission_prompt" }),
    );
    let status = w.record(A)["status"].clone();
    assert_eq!(status, "needs_attention");
    for until in [
        "needs_attention",
        "needs-attention",
        "idle,needs-attention",
        "exited,needs_attention",
    ] {
        let (o, _) = expect(&w, &["wait", "306f", "--until", until, "--timeout", "5"], 0);
        assert_eq!(o.trim(), "306f needs_attention", "--until {until}");
    }
    let (_, e) = expect(
        &w,
        &[
            "wait",
            "306f",
            "--until",
            "idle,working",
            "--timeout",
            "0.2",
        ],
        1,
    );
    assert!(e.contains("not `idle` or `working`"), "{e}");
}

/// The `spex ...` commands in backticks on the `hint:` lines (and the hint-like clauses that
/// name a command) of an error text.
fn hinted_commands(stderr: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in stderr
        .lines()
        .filter(|l| l.contains("hint:") || l.contains("`spex "))
    {
        for (i, chunk) in line.split('`').enumerate() {
            let chunk = chunk.trim();
            let cmd = chunk
                .strip_prefix("SPEX_SESSION_ID=")
                .and_then(|r| r.split_once(' ').map(|(_, c)| c))
                .unwrap_or(chunk);
            if i % 2 == 1 && cmd.starts_with("spex ") {
                out.push(chunk.to_owned());
            }
        }
    }
    out
}

/// Splits a hinted command as a shell would (double quotes only) and fills its placeholders.
fn words(cmd: &str, handle: &str) -> (Vec<(String, String)>, Vec<String>) {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in cmd.chars() {
        match c {
            '"' => quoted = !quoted,
            ' ' if !quoted => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    words.push(cur);
    let fill = |w: &str| {
        w.replace("<handle>", handle)
            .replace("<id>", handle)
            .replace("<text>", "a note")
            .replace("<prompt>", "a prompt")
    };
    let mut env = Vec::new();
    while let Some((k, v)) = words.first().and_then(|w| w.split_once('=')) {
        env.push((k.to_owned(), fill(v)));
        words.remove(0);
    }
    assert_eq!(words.first().map(String::as_str), Some("spex"), "{cmd}");
    (env, words[1..].iter().map(|w| fill(w)).collect())
}

/// Runs `spex args` with `env`, killed after a minute; (exit code, stdout + stderr).
fn run_hint(w: &World, env: &[(String, String)], args: &[String]) -> (Option<i32>, String) {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = w.cmd(&w.repo, &args);
    cmd.envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_mins(1);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "`spex {args:?}` hangs");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let (o, e) = text(&out);
    (out.status.code(), o + &e)
}

/// Environment variables a command runs with.
type Env<'a> = Vec<(&'a str, &'a str)>;

#[test]
fn every_hint_spex_prints_is_a_command_that_works_as_printed() {
    let w = World::new();
    working(&w, A, "one");
    // An exited session spex did not launch (commands on it say what is true and what to do).
    working(&w, B, "two");
    feed(&w, B, "SessionEnd", &json!({ "reason": "exit" }));
    w.ok(&w.repo, &["sessions", "--all"]);
    let (live, gone) = ("306f", "cafe");
    // Each error path a person meets without a running harness.
    let provoked: Vec<(Vec<&str>, Env)> = vec![
        (vec!["show", "nosuch"], vec![]),
        (vec!["show", ""], vec![]),
        (vec!["show", "11111111"], vec![]),
        (vec!["rename", live, "9bad"], vec![]),
        (vec!["rename", live, gone], vec![]),
        (vec!["session", "ask"], vec![]),
        (vec!["session", "done"], vec![]),
        (vec!["session", "park", "--note", "x"], vec![]),
        (
            vec!["session", "ask", "--note", "x"],
            vec![("SPEX_SESSION_ID", "nosuch")],
        ),
        (vec!["deliver", gone, "hello"], vec![]),
        (vec!["stop", "nosuch"], vec![]),
        (vec!["attach", gone], vec![]),
        (vec!["snapshot", gone], vec![]),
        (vec!["replay", gone], vec![]),
        (vec!["launch", "--detach", "--harness", "claude"], vec![]),
        (vec!["launch", "--detach", "--worktree", "a/b"], vec![]),
        (vec!["doctor"], vec![]),
    ];
    let mut seen = Vec::new();
    for (args, env) in &provoked {
        let out = w
            .cmd(&w.repo, args)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        let (o, e) = text(&out);
        // `doctor` warns (a hint on stdout) and exits 0.
        assert!(
            !out.status.success() || args[0] == "doctor",
            "spex {args:?} did not fail:\n{o}{e}"
        );
        let hints = hinted_commands(&(e.clone() + &o));
        for h in hints {
            seen.push((args.clone(), h));
        }
    }
    assert!(seen.len() >= 12, "too few hints found: {seen:#?}");
    for (from, hint) in &seen {
        assert!(!hint.contains("  "), "{hint}");
        let (mut env, args) = words(hint, live);
        // `spex session ...` is for an agent inside its session, where the launch set this.
        if args[0] == "session" && env.is_empty() {
            env.push(("SPEX_SESSION_ID".into(), A.into()));
        }
        let (code, out) = run_hint(&w, &env, &args);
        // Parsed (no usage error), and whatever it names, it finds.
        for refusal in [
            "Usage:",
            "unrecognized subcommand",
            "unexpected argument",
            "required arguments were not provided",
            "invalid value",
            "no session matches",
            "is not a session id",
        ] {
            assert!(
                !out.contains(refusal),
                "the hint `{hint}` (from `spex {from:?}`) does not work as printed (exit {code:?}):\n{out}"
            );
        }
        assert_no_full_id(&format!("hint `{hint}`"), hint);
        // Those that need no harness do what they say, here and now.
        if matches!(
            args[0].as_str(),
            "sessions" | "materialize" | "init" | "session"
        ) {
            assert_eq!(code, Some(0), "the hint `{hint}` failed:\n{out}");
        }
    }
    // And the ones that can run here do what they say.
    let hints: Vec<&str> = seen.iter().map(|(_, h)| h.as_str()).collect();
    for must in [
        "spex sessions --all",
        "spex session ask --note \"<text>\"",
        "SPEX_SESSION_ID=<handle> spex session park --note \"<text>\"",
        "spex resume cafe",
    ] {
        assert!(hints.contains(&must), "no hint `{must}` in {hints:#?}");
    }
    let (env, args) = words(
        "SPEX_SESSION_ID=<handle> spex session park --note \"<text>\"",
        live,
    );
    let (code, out) = run_hint(&w, &env, &args);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(w.record(A)["declared"]["state"], "parked");
}

#[test]
fn session_text_is_shown_with_control_characters_escaped() {
    let w = World::new();
    // A prompt that would clear the screen, set the clipboard (OSC 52), ring, and a C1 CSI.
    let prompt = "hi\x1b[2J\x1b]52;c;ZXZpbA==\x07 there\u{9b}31m\r\nsecond";
    working(&w, A, prompt);
    let question = "Pick \x1b]0;owned\x07one";
    feed(
        &w,
        A,
        "PreToolUse",
        &json!({ "tool_name": "AskUserQuestion", "tool_input": { "questions": [{ "question": question, "options": [{ "label": "a" }] }] } }),
    );
    let bad = |s: &str| {
        s.chars()
            .any(|c| c == '\x1b' || c == '\x07' || c == '\u{9b}' || c == '\r')
    };
    let outputs = [
        w.ok(&w.repo, &["sessions"]),
        w.ok(&w.repo, &["show", "306f"]),
        w.ok(&w.repo, &["show", "306f", "--events", "50"]),
    ];
    for o in &outputs {
        assert!(!bad(o), "control characters reached the terminal: {o:?}");
    }
    assert!(outputs[1].contains("\\e]0;owned\\x07"), "{}", outputs[1]);
    assert!(outputs[2].contains("\\e[2J"), "{}", outputs[2]);
    // `--json` keeps the exact text.
    let shown: Value = serde_json::from_str(&w.ok(&w.repo, &["show", "306f", "--json"])).unwrap();
    assert_eq!(shown["session"]["turn"]["prompt"], prompt);
    let (_, e) = expect(
        &w,
        &["wait", "306f", "--until", "idle", "--timeout", "0.1"],
        1,
    );
    assert!(!bad(&e), "{e:?}");
}

#[test]
fn completion_offers_the_live_sessions_handles_and_names() {
    let w = World::new();
    working(&w, A, "one");
    working(&w, B, "two");
    w.ok(&w.repo, &["rename", "306f", "fix-login"]);
    feed(&w, B, "SessionEnd", &json!({ "reason": "exit" }));
    let complete = |line: &[&str]| -> String {
        let mut args = vec!["--", "spex"];
        args.extend_from_slice(line);
        let out = w
            .cmd(&w.repo, &args)
            .env("COMPLETE", "fish")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for cmd in ["show", "deliver", "attach", "stop", "wait", "rename"] {
        let offered = complete(&[cmd, ""]);
        let values: Vec<&str> = offered
            .lines()
            .map(|l| l.split('\t').next().unwrap())
            .collect();
        assert!(
            values.contains(&"306f") && values.contains(&"fix-login"),
            "{cmd}: {offered}"
        );
        assert!(
            !values.contains(&"cafe"),
            "an exited session is offered: {offered}"
        );
    }
    let offered = complete(&["show", "fix"]);
    assert_eq!(offered.lines().count(), 1, "{offered}");
    assert!(
        offered.starts_with("fix-login\tclaude working"),
        "{offered}"
    );
    // `spex completions bash` registers the completion that calls spex back: bash, as a
    // person's shell runs it on Tab after `spex show f`.
    let script = w.dir.path().join("spex.bash");
    write(&script, w.ok(&w.repo, &["completions", "bash"]));
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {}; COMP_WORDS=(spex show f); COMP_CWORD=2; _clap_complete_spex spex f show; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display()
        ))
        .current_dir(&w.repo)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &w.home)
        .env("SPEX_HOME", &w.spex_home)
        .env("CODEX_HOME", &w.codex_home)
        .env("XDG_CONFIG_HOME", &w.xdg_config)
        .output()
        .unwrap();
    let (o, e) = text(&out);
    assert_eq!(
        o.trim(),
        "fix-login",
        "bash completed `spex show f` as {o:?} ({e})"
    );
}

/// `spex` with the world's env plus what the real Claude needs (see runtime.rs).
fn claude_cmd(
    w: &World,
    fake: &crate::support::fake_anthropic::FakeAnthropic,
    cwd: &std::path::Path,
    args: &[&str],
) -> std::process::Command {
    use crate::support::claude_home::DUMMY_API_KEY;
    let mut c = w.cmd(cwd, args);
    c.env("PATH", crate::support::peers::peers_path())
        .env("ANTHROPIC_BASE_URL", fake.base_url())
        .env("ANTHROPIC_API_KEY", DUMMY_API_KEY)
        .env("DISABLE_AUTOUPDATER", "1")
        .env("TERM", "xterm-256color")
        .env("XDG_RUNTIME_DIR", w.dir.path().join("run"));
    c
}

/// With the real Claude Code: `launch`, `deliver` and `stop` print the handle (and the name),
/// never the full id; `launch --json` carries the handle; a `launch --worktree` after an
/// uncommitted `init` gives the worktree its contract; a session whose worktree is removed
/// stays listed, marked.
#[test]
fn launch_deliver_stop_print_handles_and_a_removed_worktree_stays_listed() {
    use std::os::unix::fs::PermissionsExt;

    use crate::support::claude_home::{DUMMY_API_KEY, SeedOptions, seed_claude_home};
    use crate::support::fake_anthropic::FakeAnthropic;
    let w = World::new();
    let run = w.dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    crate::support::world::git(&w.repo, &["commit", "-q", "--allow-empty", "-m", "base"]);
    // Set up but not committed: the worktree's branch has no spex.jsonc and no .spec.
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\"] }\n",
    );
    write(
        &w.repo.join(".spec/contract/spec.md"),
        "---\ntitle: Contract\nsurface: system\n---\nWORKTREE_CONTRACT_LINE\n",
    );
    seed_claude_home(&w.home, DUMMY_API_KEY, &[&w.repo], SeedOptions::default());
    w.ok(&w.repo, &["materialize"]);
    let fake = FakeAnthropic::start();
    let spex = |cwd: &std::path::Path, args: &[&str]| -> (String, String) {
        let out = claude_cmd(&w, &fake, cwd, args).output().unwrap();
        let (o, e) = text(&out);
        assert!(out.status.success(), "spex {args:?}:\n{o}{e}");
        (o, e)
    };

    let (o, _) = spex(
        &w.repo,
        &[
            "launch",
            "--harness",
            "claude",
            "--worktree",
            "feat1",
            "--name",
            "wt-one",
            "--detach",
        ],
    );
    assert_no_full_id("launch", &o);
    let first = o.lines().next().unwrap();
    let handle = first
        .strip_suffix(" (wt-one)")
        .unwrap_or_else(|| panic!("{o}"));
    assert!((4..36).contains(&handle.len()), "{o}");
    assert!(
        o.contains(&format!("spex attach {handle}"))
            && o.contains(&format!("spex deliver {handle} ")),
        "{o}"
    );
    let wt = w.dir.path().join("repo-feat1");
    let contract = std::fs::read_to_string(wt.join("CLAUDE.md")).unwrap_or_default();
    assert!(
        contract.contains("WORKTREE_CONTRACT_LINE"),
        "the worktree got no contract: {contract:?}"
    );
    assert!(!wt.join("spex.jsonc").exists());

    // `--json`: what the README says, with the handle and the name.
    let (o, _) = spex(
        &w.repo,
        &["launch", "--harness", "claude", "--detach", "--json"],
    );
    let launched: Value = serde_json::from_str(&o).unwrap();
    let id = launched["session"]["id"].as_str().unwrap();
    assert!(is_uuid(id), "{launched}");
    assert_eq!(
        launched["session"]["handle"],
        w.record(id)["handle"],
        "{launched}"
    );
    assert!(launched["session"]["name"].is_null() && launched["session"]["socket"].is_string());
    assert!(id.ends_with(launched["session"]["handle"].as_str().unwrap()));

    let (o, _) = spex(&w.repo, &["deliver", "wt-one", "USE_NONE say hi"]);
    assert!(o.starts_with(&format!("delivered to {handle} (")), "{o}");
    assert_no_full_id("deliver", &o);

    // The worktree goes while its session runs: the session stays listed, marked.
    crate::support::world::git(
        &w.repo,
        &["worktree", "remove", "--force", wt.to_str().unwrap()],
    );
    let (list, _) = spex(&w.repo, &["sessions"]);
    let row = list
        .lines()
        .find(|l| l.starts_with(handle))
        .unwrap_or_else(|| panic!("the session vanished:\n{list}"));
    assert!(row.contains("feat1 (worktree gone)"), "{list}");
    // A delivery there could not be confirmed (the hooks start in the folder that is gone):
    // refused, saying why, instead of typed and left "queued".
    let out = w.spex(
        &w.repo,
        &["deliver", handle, "USE_NONE after the worktree went"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("which is gone (a removed worktree)"), "{err}");
    assert!(err.contains(&format!("`spex stop {handle}`")), "{err}");

    let prefix = &handle[..3];
    let (o, _) = spex(&w.repo, &["stop", prefix]);
    assert!(o.starts_with(&format!("{handle}: exited")), "{o}");
    let (o, _) = spex(
        &w.repo,
        &["stop", launched["session"]["handle"].as_str().unwrap()],
    );
    assert_no_full_id("stop", &o);
    // Exited, still listed with `--all`, still marked.
    let (list, _) = spex(&w.repo, &["sessions", "--all"]);
    assert!(
        list.lines()
            .any(|l| l.starts_with(handle) && l.contains("(worktree gone)")),
        "{list}"
    );
}

/// `init` says what it wrote, what to commit and the trust it holds in the home, and
/// git-excludes `spex.local.jsonc`; a worktree made after an uncommitted `init` reads the main
/// checkout's setup, `doctor` flags it until it is materialized, and `init` there points at the
/// main checkout instead of writing a second `spex.jsonc`.
#[test]
fn init_says_what_it_did_and_a_worktree_gets_the_projects_contract() {
    let w = World::new();
    crate::support::world::git(&w.repo, &["commit", "-q", "--allow-empty", "-m", "base"]);
    // `init` selects the harnesses it finds on PATH: the pinned ones, all three, whatever the
    // machine running the tests has installed of its own.
    let mut path = std::ffi::OsString::from(crate::support::peers::peers_bin_dir());
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let out = w
        .cmd(&w.repo, &["init"])
        .env("PATH", path)
        .output()
        .expect("spex runs");
    let (o, e) = text(&out);
    assert_eq!(out.status.code(), Some(0), "spex init:\n{o}{e}");
    for want in [
        "wrote   spex.jsonc",
        "wrote   .spec/contract/spec.md",
        "/spex.local.jsonc",
        "create  CLAUDE.md",
        "create  AGENTS.md",
        "trust spex holds in your home",
        "~/.claude.json: projects.",
        ".hasTrustDialogAccepted = true",
        "trust_level = \"trusted\"",
        "git add spex.jsonc .spec && git commit",
    ] {
        assert!(o.contains(want), "`spex init` does not say {want:?}:\n{o}");
    }
    write(&w.repo.join("spex.local.jsonc"), "{}\n");
    let status = std::process::Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(&w.repo)
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(!status.contains("spex.local.jsonc"), "{status}");
    assert!(
        status.contains("spex.jsonc") && status.contains(".spec/"),
        "{status}"
    );
    // Twice: nothing new, and it says so.
    let (o, _) = expect(&w, &["init"], 0);
    assert!(
        o.contains("kept    spex.jsonc") && !o.contains("/spex.local.jsonc to"),
        "{o}"
    );

    // A worktree of the uncommitted setup.
    let wt = w.dir.path().join("wt");
    crate::support::world::git(
        &w.repo,
        &["worktree", "add", "-q", "-b", "feat1", wt.to_str().unwrap()],
    );
    let out = w.spex(&wt, &["doctor"]);
    let (o, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "doctor says all is well:\n{o}");
    assert!(
        o.contains("FAIL") && o.contains("spex is not materialized in"),
        "{o}"
    );
    let out = w.spex(&wt, &["init"]);
    let (o, e) = text(&out);
    assert!(out.status.success(), "{o}{e}");
    assert!(
        e.contains("reads spex.jsonc and .spec/ from the main checkout"),
        "{e}"
    );
    assert!(!wt.join("spex.jsonc").exists() && !wt.join(".spec").exists());
    for f in ["CLAUDE.md", "AGENTS.md", ".claude/settings.json"] {
        assert!(wt.join(f).is_file(), "the worktree has no {f}");
    }
    assert!(crate::support::world::read(&wt.join("CLAUDE.md")).contains("spex:begin"));
    w.ok(&wt, &["doctor"]);
    // Where the main checkout has no setup either, init in a worktree says where to run it.
    let w2 = World::new();
    crate::support::world::git(&w2.repo, &["commit", "-q", "--allow-empty", "-m", "base"]);
    let wt2 = w2.dir.path().join("wt");
    crate::support::world::git(
        &w2.repo,
        &["worktree", "add", "-q", "-b", "x", wt2.to_str().unwrap()],
    );
    let out = w2.spex(&wt2, &["init"]);
    let (_, e) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(
        e.contains("is a linked worktree of") && e.contains("&& spex init`"),
        "{e}"
    );
    assert!(!wt2.join("spex.jsonc").exists());
}

/// `install.sh` says what it does before the long build and lets cargo show its progress (it
/// printed nothing for minutes): run with a stand-in `cargo` that reports how it was called.
#[test]
fn install_sh_shows_progress_while_it_builds() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    let log = dir.path().join("cargo.args");
    crate::support::world::executable(
        &bin.join("cargo"),
        &format!(
            "#!/bin/sh\necho \"$@\" > {log}\necho '   Compiling spex v0.1.0' >&2\nroot=$(echo \"$@\" | sed 's/.*--root \\([^ ]*\\).*/\\1/')\nmkdir -p \"$root/bin\"\nprintf '#!/bin/sh\\necho spex 0.1.0\\n' > \"$root/bin/spex\"\nchmod +x \"$root/bin/spex\"\n",
            log = log.display()
        ),
    );
    let prefix = dir.path().join("prefix");
    let out = std::process::Command::new(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh"),
    )
    .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
    .env("PREFIX", &prefix)
    .env("HOME", dir.path())
    .output()
    .unwrap();
    let (o, e) = text(&out);
    assert!(out.status.success(), "{o}{e}");
    let args = crate::support::world::read(&log);
    assert!(!args.contains("--quiet"), "cargo runs quiet: {args}");
    let lines: Vec<&str> = e.lines().collect();
    assert!(lines[0].starts_with("building spex"), "{e}");
    assert!(
        lines[1].contains("Compiling"),
        "cargo's progress is not shown: {e}"
    );
    assert!(
        lines[2].starts_with("installed ") && lines[2].contains("spex 0.1.0"),
        "{e}"
    );
}
