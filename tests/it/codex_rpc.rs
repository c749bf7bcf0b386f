//! spex's Codex app-server client (`src/adapters/codex/rpc/`, built here from its own files)
//! against the REAL pinned Codex, offline: the fake Responses API runs the turn. It starts the
//! server, initializes, lists hooks and sees their trust change, starts a thread and a turn
//! that completes, and stops the server. Needs `scripts/install-peers.sh`; fails, never skips.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use crate::support::codex_home::{FAKE_API_KEY_ENV, trust_project, write_codex_config};
use crate::support::fake_responses::FakeResponses;
use crate::support::peers::codex_bin;
use crate::support::world::{git, write};

/// The client's files exactly as the binary builds them: they import nothing outside their
/// folder, so the test drives the code spex runs, not a copy.
#[path = "../../src/adapters/codex/rpc"]
#[allow(
    dead_code,
    reason = "the test calls the part of the client it checks; spex calls the rest"
)]
mod rpc {
    pub mod hooks;
    pub mod methods;
    pub mod process;
    pub mod transport;
}

use rpc::hooks::TrustStatus;
use rpc::process::{AppServer, AppServerConfig, probe};
use rpc::transport::Client;

const TIMEOUT: Duration = Duration::from_secs(20);

/// How long a whole turn against the fake API may take (the real Codex starting its session).
const TURN_TIMEOUT: Duration = Duration::from_secs(90);

#[test]
fn the_client_initializes_lists_hooks_and_runs_a_turn_on_the_real_app_server() {
    let fake = FakeResponses::start();
    // Under /tmp: the socket path must fit in `sun_path`.
    let tmp = tempfile::Builder::new()
        .prefix("spex-rpc-")
        .tempdir_in("/tmp")
        .unwrap();
    let repo = tmp.path().join("repo");
    let home = tmp.path().join("home");
    let codex_home = tmp.path().join("codex");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    git(&repo, &["init", "-q"]);
    let hooks_json = repo.join(".codex/hooks.json");
    write(
        &hooks_json,
        r#"{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"echo x"}]}],
           "Stop":[{"hooks":[{"type":"command","command":"echo x"}]}]}}"#,
    );
    write_codex_config(&codex_home, &fake.base_url(), "never", "danger-full-access");
    trust_project(&codex_home, &repo);

    let sock = tmp.path().join("s.sock");
    let log = tmp.path().join("server.log");
    let mut config = AppServerConfig::new(codex_bin(), &sock, &codex_home, &log);
    config.cwd = Some(home.clone());
    config.env = [
        ("HOME", home.as_os_str()),
        (FAKE_API_KEY_ENV, "dummy".as_ref()),
        ("RUST_LOG", "warn".as_ref()),
    ]
    .into_iter()
    .map(|(k, v)| (OsString::from(k), v.to_owned()))
    .collect();
    let server = AppServer::spawn(&config).unwrap_or_else(|e| panic!("{e}"));
    let server_log = || std::fs::read_to_string(&log).unwrap_or_default();

    // Before `initialize` the server refuses every request; after it, it answers.
    let mut client = Client::connect(&sock, TIMEOUT).unwrap();
    let refused = client
        .call("thread/loaded/list", serde_json::json!({}), TIMEOUT)
        .unwrap_err();
    assert!(
        refused
            .server_message()
            .is_some_and(|m| m.contains("Not initialized")),
        "{refused:?}"
    );
    let init = client.initialize("spex-test").unwrap();
    assert_eq!(
        init["codexHome"].as_str().map(Path::new),
        Some(codex_home.as_path()),
        "{init}"
    );
    // The first client (`AppServer::spawn`'s probe) named the server's user agent.
    assert!(
        init["userAgent"]
            .as_str()
            .is_some_and(|a| a.starts_with("spex/")),
        "{init}"
    );

    // hooks/list: both hooks, untrusted; a trusted hash written to config.toml is read at once.
    let hooks = client.hooks_list(std::slice::from_ref(&repo)).unwrap();
    let listed: Vec<_> = hooks
        .iter()
        .map(|h| (h.hooks_json_event(), h.command.as_deref(), h.trust.clone()))
        .collect();
    assert_eq!(
        listed,
        [
            (
                "PreToolUse".to_owned(),
                Some("echo x"),
                TrustStatus::Untrusted
            ),
            ("Stop".to_owned(), Some("echo x"), TrustStatus::Untrusted),
        ],
        "{hooks:#?}"
    );
    assert_eq!(hooks[0].source_path, hooks_json);
    assert_eq!(hooks[0].matcher.as_deref(), Some("Bash"));
    assert_eq!(
        (hooks[0].group_index, hooks[0].handler_index),
        (Some(0), Some(0))
    );
    assert!(hooks[0].current_hash.starts_with("sha256:"), "{hooks:#?}");
    let mut cfg = std::fs::read_to_string(codex_home.join("config.toml")).unwrap();
    cfg.push_str(&format!(
        "\n[hooks.state.\"{}\"]\ntrusted_hash = \"{}\"\n",
        hooks[0].key, hooks[0].current_hash
    ));
    std::fs::write(codex_home.join("config.toml"), cfg).unwrap();
    let trust: Vec<_> = client
        .hooks_list(std::slice::from_ref(&repo))
        .unwrap()
        .into_iter()
        .map(|h| h.trust)
        .collect();
    assert_eq!(trust, [TrustStatus::Trusted, TrustStatus::Untrusted]);

    // thread/start loads a thread; turn/start runs a turn on it to its end.
    let thread = client.thread_start(&repo).unwrap().thread_id;
    assert!(
        client.thread_loaded_list().unwrap().contains(&thread),
        "{thread} is not loaded"
    );
    let turn = client.turn_start(&thread, "say hello").unwrap().turn_id;
    let completed = client
        .await_notification(
            "turn/completed",
            |p| p["turn"]["id"] == turn.as_str(),
            TURN_TIMEOUT,
        )
        .unwrap_or_else(|e| {
            panic!(
                "{e}\n--- server log:\n{}\n--- fake requests:\n{}",
                server_log(),
                fake.request_lines().join("\n")
            )
        });
    assert_eq!(completed.params["threadId"], thread.as_str());
    assert_eq!(
        completed.params["turn"]["status"], "completed",
        "{}",
        completed.params
    );
    assert_eq!(
        client.newest_turn(&thread).unwrap(),
        Some((turn.clone(), "completed".to_owned()))
    );
    // The turn was the fake model's: its one request for the turn came in.
    let asked = fake.request_lines().join("\n");
    assert!(asked.contains("\"/v1/responses\""), "{asked}");
    client.close();

    // Dropping the handle stops the server: nothing answers on the socket afterwards.
    drop(server);
    let gone = probe(&sock, Duration::from_secs(2));
    assert!(gone.is_err(), "the server still answers: {gone:?}");
}
