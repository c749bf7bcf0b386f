//! `spex limits`, and a limit's reset on a session: the REAL pinned Codex against the fake
//! Responses API sending Codex's `x-codex-*` rate-limit headers (issue 33, "What it must show"
//! 3). Needs `scripts/install-peers.sh`; fails, never skips.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::support::codex_home::{codex_command, write_codex_config};
use crate::support::fake_responses::{
    FakeResponses, PRIMARY_WINDOW_MINS, SECONDARY_RESET_AFTER, SECONDARY_WINDOW_MINS,
};
use crate::support::peers::peers_path;
use crate::support::rpc::AppServer;
use crate::support::world::{World, feed, json_result, pretty, read_or_empty, write};

const SETTLE: Duration = Duration::from_secs(30);

/// A materialized project selecting Codex, Codex talking to the fake API.
struct Rig {
    w: World,
    fake: FakeResponses,
}

impl Rig {
    fn start() -> Rig {
        Rig::start_with(&json!({}))
    }

    /// With `extra` keys in the project's `spex.jsonc`.
    fn start_with(extra: &Value) -> Rig {
        use std::os::unix::fs::PermissionsExt;
        let w = World::new();
        let run = w.dir.path().join("run");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
        let fake = FakeResponses::start();
        write_codex_config(
            &w.codex_home,
            &fake.base_url(),
            "never",
            "danger-full-access",
        );
        let mut cfg = json!({ "harnesses": ["codex"] });
        cfg.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        write(&w.repo.join("spex.jsonc"), format!("{cfg}\n"));
        crate::support::world::git(&w.repo, &["commit", "-q", "--allow-empty", "-m", "base"]);
        w.ok(&w.repo, &["materialize"]);
        Rig { w, fake }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = self.w.cmd(&self.w.repo, args);
        c.env("PATH", peers_path())
            .env("XDG_RUNTIME_DIR", self.w.dir.path().join("run"))
            .env("FAKE_API_KEY", "dummy")
            .env("OPENAI_API_KEY", "sk-dummy")
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "warn");
        c
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = feed(&mut self.cmd(args), b"");
        json_result(args, &out).unwrap_or_else(|e| panic!("{e}\n{}", self.diag()))
    }

    fn text(&self, args: &[&str]) -> String {
        let out = self.cmd(args).output().unwrap();
        assert!(
            out.status.success(),
            "spex {args:?}: {out:?}\n{}",
            self.diag()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn diag(&self) -> String {
        format!(
            "--- server log:\n{}\n--- limits.json:\n{}\n--- fake requests:\n{}",
            read_or_empty(&self.w.project_dir().join("servers/codex.log")),
            read_or_empty(&self.w.spex_home.join("limits.json")),
            self.fake.request_lines().join("\n")
        )
    }

    /// Delivers `text` to `id` and waits for its turn to end `state`.
    fn turn(&self, id: &str, text: &str, state: &str) -> Value {
        let before = self.ended_turns(id);
        self.json(&["deliver", id, text, "--json"]);
        let deadline = Instant::now() + SETTLE;
        loop {
            let shown = self.json(&["show", id, "--json", "--events", "100"]);
            if self.ended_turns(id) > before && shown["session"]["turn"]["state"] == state {
                return shown;
            }
            assert!(
                Instant::now() < deadline,
                "the turn `{text}` never ended {state}\n{}\n{}",
                pretty(&shown),
                self.diag()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn ended_turns(&self, id: &str) -> usize {
        self.w
            .events(id)
            .iter()
            .filter(|e| {
                e["kind"]
                    .as_str()
                    .is_some_and(|k| k == "turn.completed" || k == "turn.failed")
            })
            .count()
    }

    /// `spex limits --json`'s entry for `harness`, once `pred` holds of it.
    fn limits_until(&self, harness: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + SETTLE;
        loop {
            let all = self.json(&["limits", "--json"]);
            let one = all["harnesses"]
                .as_array()
                .unwrap()
                .iter()
                .find(|h| h["harness"] == harness)
                .cloned()
                .unwrap_or(Value::Null);
            if pred(&one) {
                return all;
            }
            assert!(
                Instant::now() < deadline,
                "{what}\n{}\n{}",
                pretty(&all),
                self.diag()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let running: Value = serde_json::from_str(&read_or_empty(
            &self.w.project_dir().join("servers/codex.json"),
        ))
        .unwrap_or(Value::Null);
        for key in ["server_pid", "supervisor_pid"] {
            if let Some(pid) = running[key].as_u64() {
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &format!("-{pid}"), &pid.to_string()])
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn rfc3339(secs: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs)).to_string()
}

/// The windows a reading should hold for the headers `LIMITS=p,s RESET=reset` makes the fake
/// send.
fn windows(primary: f64, secondary: f64, reset: u64) -> Value {
    json!([
        {"name": "primary", "used_percent": primary, "window_minutes": PRIMARY_WINDOW_MINS,
            "resets_at": rfc3339(reset)},
        {"name": "secondary", "used_percent": secondary, "window_minutes": SECONDARY_WINDOW_MINS,
            "resets_at": rfc3339(reset + SECONDARY_RESET_AFTER)},
    ])
}

/// A Codex session spex launched: `spex limits` shows the windows the provider's headers
/// reported through the project's app-server, updated after a later turn reports new ones; a
/// turn that runs into the limit fails `rate_limit` and its session shows when it resets
/// (`show`, `show --json`, `sessions` with its limits footer). Claude and Gemini say `unknown`
/// with why (an API key / no Google login: the facts in docs/harnesses/).
#[test]
fn codex_limits_follow_its_turns_and_a_reached_limit_shows_its_reset() {
    let rig = Rig::start();
    let before = rig.json(&["limits", "--json"]);
    for h in before["harnesses"].as_array().unwrap() {
        assert_eq!(
            h["known"],
            false,
            "nothing reported yet: {}",
            pretty(&before)
        );
        assert!(
            h["why"].as_str().is_some_and(|w| !w.is_empty()),
            "{}",
            pretty(&before)
        );
    }
    let launched = rig.json(&["launch", "--harness", "codex", "--detach", "--json"]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let reset = unix_now() + 2 * 3600 + 600;

    rig.turn(
        &id,
        &format!("hello LIMITS=42,7 RESET={reset}"),
        "completed",
    );
    let all = rig.limits_until("codex", "the first turn's limits never arrived", |c| {
        c["windows"][0]["used_percent"] == 42.0
    });
    let codex = &all["harnesses"][all["harnesses"]
        .as_array()
        .unwrap()
        .iter()
        .position(|h| h["harness"] == "codex")
        .unwrap()];
    assert_eq!(codex["known"], true);
    assert_eq!(codex["reached"], false);
    assert_eq!(
        codex["windows"],
        windows(42.0, 7.0, reset),
        "{}",
        pretty(&all)
    );
    assert_eq!(
        codex["source"],
        "codex app-server account/rateLimits/updated",
        "{}",
        pretty(&all)
    );
    for other in ["claude", "gemini"] {
        let h = all["harnesses"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["harness"] == other)
            .unwrap();
        assert_eq!(h["known"], false, "{}", pretty(&all));
        assert!(
            h.get("windows").is_none(),
            "never a guess: {}",
            pretty(&all)
        );
    }
    let text = rig.text(&["limits"]);
    assert!(
        text.contains("codex: 5h 42% (resets in 2h 1") && text.contains("7d 7% (resets in 4d 2h)"),
        "{text}"
    );
    assert!(
        text.contains("claude: unknown") && text.contains("gemini: unknown"),
        "{text}"
    );

    // A later turn reports new values: they replace the old ones. (The app-server sends whole
    // percents: `55.5` in a header arrives as 56: docs/harnesses/codex.md, "Rate limits".)
    rig.turn(
        &id,
        &format!("again LIMITS=55,9 RESET={reset}"),
        "completed",
    );
    let all = rig.limits_until("codex", "the later turn's limits never arrived", |c| {
        c["windows"][0]["used_percent"] == 55.0
    });
    assert!(
        all.to_string().contains("\"used_percent\":9.0"),
        "{}",
        pretty(&all)
    );

    // The limit is reached in a turn: it fails `rate_limit`, and the session says when it
    // resets.
    let shown = rig.turn(
        &id,
        &format!("SCENARIO:limit LIMITS=100,30 RESET={reset}"),
        "failed",
    );
    assert_eq!(
        shown["session"]["turn"]["error_kind"],
        "rate_limit",
        "{}",
        pretty(&shown)
    );
    rig.limits_until("codex", "the reached limit never arrived", |c| {
        c["reached"] == true
    });
    let shown = rig.json(&["show", &id, "--json"]);
    assert_eq!(
        shown["limit_resets_at"],
        rfc3339(reset),
        "{}",
        pretty(&shown)
    );
    let text = rig.text(&["show", &id]);
    let limit_row = text
        .lines()
        .find(|l| l.trim_start().starts_with("limit "))
        .unwrap_or_else(|| panic!("no limit row:\n{text}"));
    assert!(
        limit_row.contains("reached; resets") && limit_row.contains("(in 2h 1"),
        "{text}"
    );
    let listed = rig.text(&["sessions"]);
    assert!(listed.contains("limit reached; resets"), "{listed}");
    assert!(
        listed.contains("limits: codex: limit reached, 5h 100%"),
        "the footer: {listed}"
    );
    rig.json(&["stop", &id, "--json"]);
}

/// Two Codex sessions on one app-server: the `account/rateLimits/updated` a turn's model
/// request brought is said on THAT session, even when the other session spoke since (A's
/// answer is out but its completion, which brings the usage and the limits, is held back while
/// B runs a whole turn; docs/harnesses/facts/remote-and-notify.md, "Rate limits").
#[test]
fn codex_limits_go_to_the_session_whose_turn_brought_them() {
    let rig = Rig::start();
    let launch = || {
        rig.json(&["launch", "--harness", "codex", "--detach", "--json"])["session"]["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (a, b) = (launch(), launch());
    let reset = unix_now() + 3 * 3600;
    let said = |id: &str| -> Vec<Value> {
        rig.w
            .events(id)
            .into_iter()
            .filter(|e| e["kind"] == "limits.updated")
            .map(|e| e["windows"][0]["used_percent"].clone())
            .collect()
    };
    rig.turn(&a, &format!("first LIMITS=10,1 RESET={reset}"), "completed");
    rig.limits_until("codex", "A's limits", |c| {
        c["windows"][0]["used_percent"] == 10.0
    });
    rig.turn(&b, &format!("first LIMITS=20,2 RESET={reset}"), "completed");
    rig.limits_until("codex", "B's limits", |c| {
        c["windows"][0]["used_percent"] == 20.0
    });
    assert_eq!(said(&a), vec![json!(10.0)], "{}", rig.diag());
    assert_eq!(said(&b), vec![json!(20.0)], "{}", rig.diag());

    // A's answer is out, its completion waits 8 s; B starts and ends a turn meanwhile.
    let before = rig.ended_turns(&a);
    rig.json(&[
        "deliver",
        &a,
        &format!("later LATE=8 LIMITS=30,3 RESET={reset}"),
        "--json",
    ]);
    let started = Instant::now();
    let deadline = Instant::now() + SETTLE;
    while !rig
        .fake
        .requests()
        .iter()
        .any(|r| r["body"].to_string().contains("LATE=8"))
    {
        assert!(Instant::now() < deadline, "{}", rig.diag());
        std::thread::sleep(Duration::from_millis(50));
    }
    rig.turn(&b, "meanwhile", "completed");
    assert!(
        rig.ended_turns(&a) == before,
        "A's turn ended before B's: the test proves nothing\n{}",
        rig.diag()
    );
    assert!(started.elapsed() < Duration::from_secs(8));
    rig.limits_until("codex", "A's later limits", |c| {
        c["windows"][0]["used_percent"] == 30.0
    });
    let deadline = Instant::now() + SETTLE;
    while rig.ended_turns(&a) == before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        said(&a),
        vec![json!(10.0), json!(30.0)],
        "A: {}\nB: {}\n{}",
        pretty(&json!(rig.w.events(&a))),
        pretty(&json!(rig.w.events(&b))),
        rig.diag()
    );
    assert_eq!(said(&b), vec![json!(20.0)], "{}", rig.diag());

    // A third session refused on its very first request (no usage to follow): the limit is
    // said on it, before its turn ends.
    let c = launch();
    rig.turn(
        &c,
        &format!("SCENARIO:limit LIMITS=100,5 RESET={reset}"),
        "failed",
    );
    assert_eq!(said(&c), vec![json!(100.0)], "{}", rig.diag());
    let kinds: Vec<Value> = rig
        .w
        .events(&c)
        .into_iter()
        .map(|e| e["kind"].clone())
        .filter(|k| k == "limits.updated" || k == "turn.failed")
        .collect();
    assert_eq!(kinds, vec![json!("limits.updated"), json!("turn.failed")]);
    assert_eq!(said(&a), vec![json!(10.0), json!(30.0)]);
    assert_eq!(said(&b), vec![json!(20.0)]);
    for id in [&a, &b, &c] {
        rig.json(&["stop", id, "--json"]);
    }
}

/// A Codex session spex did not start: its rollout log's `token_count` events are the
/// evidence, read by `spex limits` with no server of spex's running.
#[test]
fn codex_limits_of_a_session_spex_did_not_start_come_from_its_rollout() {
    let w = World::new();
    let fake = FakeResponses::start();
    write_codex_config(
        &w.codex_home,
        &fake.base_url(),
        "never",
        "danger-full-access",
    );
    let mut cmd = codex_command(&w.codex_home, &w.home);
    cmd.current_dir(&w.repo);
    let mut app = AppServer::start(&mut cmd, w.dir.path(), "s", "limits-test");
    let thread = app.start_thread(&json!({ "cwd": w.repo }));
    let reset = unix_now() + 3600;
    let turn = app.start_turn(&thread, &format!("hi LIMITS=61,12 RESET={reset}"));
    assert!(
        app.completed_within(&turn, SETTLE).is_some(),
        "{}",
        app.log()
    );
    let out = w
        .cmd(Path::new(&w.repo), &["limits", "--json"])
        .output()
        .unwrap();
    let all = json_result(&["limits", "--json"], &out).unwrap();
    let codex = all["harnesses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["harness"] == "codex")
        .unwrap();
    assert_eq!(
        codex["windows"],
        windows(61.0, 12.0, reset),
        "{}",
        pretty(&all)
    );
    assert_eq!(
        codex["source"],
        "codex rollout token_count",
        "{}",
        pretty(&all)
    );

    // The board shows them above its sessions: its snapshot carries each harness's line.
    let b = crate::board::board(&w);
    let mut ws = b.socket(Some(&b.origin()), None).unwrap();
    let snap = ws.next();
    assert_eq!(snap["type"], "snapshot", "{}", pretty(&snap));
    let lines: Vec<&str> = snap["limits"]
        .as_array()
        .unwrap_or_else(|| panic!("no limits: {}", pretty(&snap)))
        .iter()
        .filter_map(|l| l["line"].as_str())
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("codex: 5h 61% (resets in ")),
        "{lines:?}"
    );
    assert!(lines.contains(&"claude: unknown"), "{lines:?}");
}

/// `notify.limits: [80]`: a window rising past 80% is announced once, through the command
/// channel, naming the window; a turn below it and a later one still past it announce nothing.
#[test]
fn notify_announces_a_window_crossing_its_threshold_once() {
    let out = tempfile::NamedTempFile::new().unwrap();
    let command = json!([
        "/bin/sh",
        "-c",
        format!("cat >> '{0}' && echo >> '{0}'", out.path().display())
    ]);
    let rig = Rig::start_with(
        &json!({"notify": {"command": command, "on": [], "dwell": "0s",
        "limits": [80]}}),
    );
    let log = rig.w.dir.path().join("notify.log");
    let err = std::fs::File::create(&log).unwrap();
    let mut sender = rig
        .cmd(&["notify", "--watch"])
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .unwrap();
    let launched = rig.json(&["launch", "--harness", "codex", "--detach", "--json"]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let reset = unix_now() + 3600;
    let sent = || {
        read_or_empty(out.path())
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .collect::<Vec<_>>()
    };
    rig.turn(&id, &format!("low LIMITS=50,1 RESET={reset}"), "completed");
    rig.turn(&id, &format!("high LIMITS=85,2 RESET={reset}"), "completed");
    let deadline = Instant::now() + Duration::from_secs(10);
    while sent().is_empty() {
        assert!(
            Instant::now() < deadline,
            "no limits notification\n{}\n{}",
            read_or_empty(&log),
            rig.diag()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    rig.turn(
        &id,
        &format!("higher LIMITS=90,3 RESET={reset}"),
        "completed",
    );
    // The sender had time to read the later turn's event (it sent the first within ms).
    std::thread::sleep(Duration::from_secs(3));
    let sent = sent();
    let _ = sender.kill();
    let _ = sender.wait();
    assert_eq!(sent.len(), 1, "{sent:#?}\n{}", read_or_empty(&log));
    assert_eq!(sent[0]["event"], "limits", "{sent:#?}");
    assert_eq!(sent[0]["session"], id.as_str());
    let title = sent[0]["title"].as_str().unwrap();
    assert!(
        title.contains("codex rate limit: 5h window past 80%: 5h 85%"),
        "{title}"
    );
    rig.json(&["stop", &id, "--json"]);
}

/// `limits.statusLine` with a person's own Claude status line: materialize puts spex's in its
/// place (the tree's `.claude/settings.json`), the REAL Claude Code runs it and the person's
/// line still shows (chained, with Claude's own input); with an API key Claude passes no
/// `rate_limits`, so `limits` stays unknown for Claude. A status-line input that carries them
/// (a subscription login's, hand-written) is recorded. `spex clean` gives the file back byte
/// for byte.
#[test]
fn claude_status_line_chains_to_the_persons_own_and_clean_gives_it_back() {
    use crate::runtime::{launch, run_json, spex_cmd, std_dirs, stop, wait_screen};
    use crate::support::claude_home::{DUMMY_API_KEY, SeedOptions, seed_claude_home};
    use crate::support::fake_anthropic::FakeAnthropic;
    let w = World::new();
    std_dirs(&w);
    let seen = w.dir.path().join("status-in.json");
    let own = format!(
        "{{\n  \"statusLine\": {{\n    \"type\": \"command\",\n    \"command\": \"cat > '{}'; echo MY-OWN-STATUS\"\n  }}\n}}\n",
        seen.display()
    );
    write(&w.repo.join(".claude/settings.json"), &own);
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\"], \"limits\": { \"statusLine\": true } }\n",
    );
    crate::support::world::git(&w.repo, &["add", "-A"]);
    crate::support::world::git(&w.repo, &["commit", "-q", "-m", "own status line"]);
    seed_claude_home(&w.home, DUMMY_API_KEY, &[&w.repo], SeedOptions::default());
    w.ok(&w.repo, &["materialize"]);
    let settings: Value =
        serde_json::from_str(&read_or_empty(&w.repo.join(".claude/settings.json"))).unwrap();
    let command = settings["statusLine"]["command"].as_str().unwrap();
    assert!(
        command.ends_with(" statusline claude"),
        "{}",
        pretty(&settings)
    );

    let fake = FakeAnthropic::start();
    let id = launch(&w, &fake);
    assert!(
        wait_screen(&w, &fake, &id, "MY-OWN-STATUS", Duration::from_secs(30)),
        "the person's status line never showed:\n{}",
        crate::runtime::screen(&w, &fake, &id)
    );
    let input: Value = serde_json::from_str(&read_or_empty(&seen)).unwrap();
    assert!(
        input["session_id"].is_string(),
        "Claude's own input: {}",
        pretty(&input)
    );
    assert!(
        input.get("rate_limits").is_none(),
        "an API key: {}",
        pretty(&input)
    );
    let all = run_json(&w, &fake, &["limits", "--json"]).unwrap();
    assert!(
        all["harnesses"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["harness"] == "claude" && h["known"] == false),
        "{}",
        pretty(&all)
    );
    stop(&w, &fake, &id);

    // A subscription login's input (hand-written: no such login here) is recorded.
    let reset = unix_now() + 5400;
    let claude_id = w.record(&id)["harness_session_id"]
        .as_str()
        .map_or_else(|| id.clone(), str::to_owned);
    let payload = json!({"session_id": claude_id, "rate_limits": {
        "five_hour": {"used_percentage": 23, "resets_at": reset},
        "seven_day": {"used_percentage": 41.5, "resets_at": reset + 86_400}}});
    let out = crate::support::world::feed(
        &mut spex_cmd(&w, &fake, &["statusline", "claude"]),
        payload.to_string().as_bytes(),
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "MY-OWN-STATUS\n");
    let all = run_json(&w, &fake, &["limits", "--json"]).unwrap();
    let claude = all["harnesses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["harness"] == "claude")
        .unwrap();
    assert_eq!(
        claude["windows"][0]["name"],
        "five_hour",
        "{}",
        pretty(&all)
    );
    assert_eq!(claude["windows"][0]["used_percent"], 23.0);
    assert_eq!(claude["windows"][0]["window_minutes"], 300);
    assert_eq!(claude["windows"][0]["resets_at"], rfc3339(reset));
    assert_eq!(claude["windows"][1]["used_percent"], 41.5);
    // Said on the session whose status line it was, for the notifier's thresholds.
    let updated: Vec<Value> = w
        .events(&id)
        .into_iter()
        .filter(|e| e["kind"] == "limits.updated")
        .collect();
    assert_eq!(updated.len(), 1, "{}", pretty(&json!(w.events(&id))));
    assert_eq!(updated[0]["source"], "status line");
    assert_eq!(updated[0]["was"], Value::Null);

    w.ok(&w.repo, &["clean"]);
    assert_eq!(read_or_empty(&w.repo.join(".claude/settings.json")), own);
}

/// A subscription login of the REAL Claude Code (`CLAUDE_CODE_OAUTH_TOKEN`, the token
/// `claude setup-token` prints), offline against the fake.
struct Subscription(crate::support::fake_anthropic::FakeAnthropic);

impl crate::runtime::FakeApi for Subscription {
    fn harness(&self) -> &'static str {
        "claude"
    }

    fn env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        vec![
            ("ANTHROPIC_BASE_URL", self.0.base_url().into()),
            ("CLAUDE_CODE_OAUTH_TOKEN", "sk-ant-oat01-spex-tests".into()),
            ("DISABLE_AUTOUPDATER", "1".into()),
            ("TERM", "xterm-256color".into()),
        ]
    }
}

/// Claude's `rate_limits` as the real binary passes them: a subscription login reads the
/// fake's `anthropic-ratelimit-unified-*` headers and passes them to spex's status line, so
/// `spex limits` shows both windows with their resets, the session says `limits.updated`, and
/// a later turn's new numbers replace them (docs/harnesses/facts/claude.md, section 8).
#[test]
fn a_claude_subscription_logins_limits_come_through_its_status_line() {
    use crate::runtime::{launch, run_json, screen, std_dirs, stop, wait_screen};
    use crate::support::claude_home::{SeedOptions, seed_claude_home};
    use crate::support::fake_anthropic::{FakeAnthropic, PLAIN_ANSWER, SEVEN_DAY_RESET_AFTER};
    let w = World::new();
    std_dirs(&w);
    write(
        &w.repo.join("spex.jsonc"),
        "{ \"harnesses\": [\"claude\"], \"limits\": { \"statusLine\": true } }\n",
    );
    crate::support::world::git(&w.repo, &["add", "-A"]);
    crate::support::world::git(&w.repo, &["commit", "-q", "-m", "limits"]);
    let opts = SeedOptions {
        approve_key: false,
        ..SeedOptions::default()
    };
    seed_claude_home(&w.home, "", &[&w.repo], opts);
    w.ok(&w.repo, &["materialize"]);
    let fake = Subscription(FakeAnthropic::start());
    let id = launch(&w, &fake);
    let claude_of = |all: &Value| {
        all["harnesses"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["harness"] == "claude")
            .cloned()
            .unwrap()
    };
    let limits_until = |what: &str, pred: &dyn Fn(&Value) -> bool| {
        let deadline = Instant::now() + SETTLE;
        loop {
            let all = run_json(&w, &fake, &["limits", "--json"]).unwrap();
            if pred(&claude_of(&all)) {
                return claude_of(&all);
            }
            assert!(
                Instant::now() < deadline,
                "{what}\n{}\n{}\nrequests: {:?}",
                pretty(&all),
                screen(&w, &fake, &id),
                fake.0.request_lines()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    };

    let reset = unix_now() + 5400;
    for (five, seven) in [(23.0, 41.5), (61.0, 44.0)] {
        let prompt = format!("USE_NONE LIMITS={five},{seven} RESET={reset}");
        let d = run_json(&w, &fake, &["deliver", &id, &prompt, "--json"]).unwrap();
        assert_eq!(d["confirmed"], true, "{}", pretty(&d));
        let claude = limits_until("the status line never passed the windows", &|c| {
            c["windows"][0]["used_percent"] == five
        });
        assert_eq!(claude["known"], true, "{}", pretty(&claude));
        assert_eq!(
            claude["windows"],
            json!([
                {"name": "five_hour", "used_percent": five, "window_minutes": 300,
                    "resets_at": rfc3339(reset)},
                {"name": "seven_day", "used_percent": seven, "window_minutes": 10_080,
                    "resets_at": rfc3339(reset + SEVEN_DAY_RESET_AFTER)},
            ]),
            "{}",
            pretty(&claude)
        );
        assert_eq!(claude["source"], "claude status line rate_limits");
    }
    assert!(
        wait_screen(&w, &fake, &id, PLAIN_ANSWER, Duration::from_secs(30)),
        "{}",
        screen(&w, &fake, &id)
    );
    // The status line's input said it on the session, once per change.
    let updated: Vec<Value> = w
        .events(&id)
        .into_iter()
        .filter(|e| e["kind"] == "limits.updated")
        .collect();
    assert_eq!(updated.len(), 2, "{}", pretty(&json!(w.events(&id))));
    assert_eq!(updated[0]["source"], "status line");
    assert_eq!(updated[1]["was"][0]["used_percent"], 23.0);
    assert_eq!(updated[1]["windows"][0]["used_percent"], 61.0);
    // The subscription's bearer token reached the fake, no API key.
    let asked = fake.0.requests();
    assert!(
        asked.iter().any(|r| r["headers"]["authorization"]
            .as_str()
            .is_some_and(|a| a == "Bearer sk-ant-oat01-spex-tests")),
        "{}",
        pretty(&json!(
            asked.iter().map(|r| &r["headers"]).collect::<Vec<_>>()
        ))
    );

    // A refusal (429, `status: rejected`): the turn fails `rate_limit` with Claude's own words
    // (the reset as a clock, no time stamp); Claude passes no numbers of a refusal to its status
    // line, so the last answer's stay and no reset is claimed (facts, section 8).
    let prompt = format!("USE_NONE FAIL=429 LIMITS=100,50 RESET={reset}");
    run_json(&w, &fake, &["deliver", &id, &prompt, "--json"]).unwrap();
    let deadline = Instant::now() + SETTLE;
    let shown = loop {
        let shown = run_json(&w, &fake, &["show", &id, "--json"]).unwrap();
        if shown["session"]["turn"]["state"] == "failed" {
            break shown;
        }
        assert!(Instant::now() < deadline, "{}", pretty(&shown));
        std::thread::sleep(Duration::from_millis(200));
    };
    let turn = &shown["session"]["turn"];
    assert_eq!(turn["error_kind"], "rate_limit", "{}", pretty(&shown));
    assert!(
        turn["note"]
            .as_str()
            .is_some_and(|n| n.starts_with("You've hit your session limit")),
        "{}",
        pretty(&shown)
    );
    assert_eq!(shown.get("limit_resets_at"), None, "{}", pretty(&shown));
    let claude = limits_until("the last answer's numbers stay", &|c| {
        c["windows"][0]["used_percent"] == 61.0
    });
    assert_eq!(claude["reached"], false, "{}", pretty(&claude));
    // Claude's own limit menu holds the input: a delivery is refused, and the way out is its
    // terminal, not `spex answer` (the failed turn's attention has no choices).
    assert!(
        wait_screen(&w, &fake, &id, "What do you want to do?", SETTLE),
        "{}",
        screen(&w, &fake, &id)
    );
    let refused = crate::runtime::spex_cmd(&w, &fake, &["deliver", &id, "USE_NONE after"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(said.contains("(`spex attach "), "{said}");
    assert!(!said.contains("spex answer"), "{said}");
    stop(&w, &fake, &id);
}

/// The board in a real browser at phone size shows the limits a later Codex turn reports,
/// without a reload: hidden while nothing is known, then the harness's line, a reached limit
/// marked, and the card of the session whose turn the limit refused says when it resets.
#[test]
fn the_board_shows_limits_as_a_turn_reports_them() {
    use crate::board_browser::{Board, card, open_board};
    use crate::support::browser::{Browser, PHONE, js_string};
    let rig = Rig::start();
    let mut cmd = rig.cmd(&["board", "--listen", "127.0.0.1:0", "--json"]);
    cmd.stdin(Stdio::null());
    let b = Board::start(cmd);
    let browser = Browser::start();
    let page = open_board(&browser, &b, PHONE);
    assert_eq!(
        page.eval(
            "(p => p.hidden && getComputedStyle(p).display === 'none')(document.querySelector('#limits'))"
        ),
        true,
        "nothing known yet: no line on the page"
    );
    let launched = rig.json(&["launch", "--harness", "codex", "--detach", "--json"]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let reset = unix_now() + 3 * 3600;
    rig.turn(&id, &format!("hi LIMITS=70,4 RESET={reset}"), "completed");
    page.wait_for(
        "the limits line",
        "(p => !p.hidden && getComputedStyle(p).display !== 'none' && [...p.querySelectorAll('.limit')].some(s => s.textContent.startsWith('codex: 5h 70% (resets in ')))(document.querySelector('#limits'))",
        Duration::from_secs(10),
    );
    assert_eq!(
        page.eval(&format!(
            "document.querySelector({}).hidden",
            js_string(&format!("{} [data-field=limit]", card(&id)))
        )),
        true,
        "a completed turn's card says no reset"
    );
    rig.turn(
        &id,
        &format!("SCENARIO:limit LIMITS=100,5 RESET={reset}"),
        "failed",
    );
    page.wait_for(
        "the reached limit marked",
        "[...document.querySelectorAll('#limits .limit')].some(s => s.dataset.reached === 'true' && s.textContent.startsWith('codex: limit reached, 5h 100%'))",
        Duration::from_secs(10),
    );
    // The card itself: the reset as `show` reports it, in the page's clock, on screen.
    let shown = rig.json(&["show", &id, "--json"]);
    assert_eq!(
        shown["limit_resets_at"],
        rfc3339(reset),
        "{}",
        pretty(&shown)
    );
    let field = format!(
        "document.querySelector({})",
        js_string(&format!("{} [data-field=limit]", card(&id)))
    );
    page.wait_for(
        "the card's reset",
        &format!(
            "(f => f && !f.hidden && getComputedStyle(f).display !== 'none' && /^limit reached; resets .+ \\(in (2h 5\\d+m|3h)\\)$/.test(f.textContent) && f.textContent.includes(new Date({ms}).toLocaleTimeString()))({field})",
            ms = reset * 1000
        ),
        Duration::from_secs(10),
    );
    assert_eq!(
        page.eval(&format!(
            "(f => {{ const r = f.getBoundingClientRect(); return r.width > 0 && r.left >= 0 && r.right <= innerWidth; }})({field})"
        )),
        true,
        "the reset fits the phone's width: {}",
        page.eval(&format!("{field}.closest('li').outerHTML"))
    );
    assert!(page.errors().is_empty(), "{:?}", page.errors());
    rig.json(&["stop", &id, "--json"]);
}
