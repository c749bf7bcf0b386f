//! Unit tests of the rpc module: a captured `hooks/list` answer decoded, message sorting, and
//! the transport against a scripted WebSocket server standing in for codex. The real codex is
//! driven by the integration test `tests/it/codex_rpc.rs`.

use std::fmt::Write as _;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use serde_json::{Value, json};
use tungstenite::{Message, WebSocket};

use super::hooks::{TrustStatus, key_indices, parse_hooks_list};
use super::process::{format_tail, strip_ansi};
use super::transport::{Classified, Client, Incoming, RpcError, classify, server_error};
/// `hooks/list {"cwds":["/tmp/rpcexp/repo"]}` answered by codex 0.169.0 for a trusted repo
/// whose `.codex/hooks.json` has `PreToolUse` (matcher `Bash`, two handlers),
/// `UserPromptSubmit` and `Stop`, with `[hooks.state]` entries: `pre_tool_use:0:0` right
/// hash, `pre_tool_use:0:1` wrong hash, `user_prompt_submit` none, `stop` right hash plus
/// `enabled = false`.
const CAPTURED_HOOKS_LIST: &str = r#"{"data":[{"cwd":"/tmp/rpcexp/repo","errors":[],"hooks":[
  {"additionalContextLimit":null,"async":false,"command":"echo x","currentHash":"sha256:386325ebc6d635023598f537fa3f9a346464b03ad0ff7215fbe0885c2bace1e1","displayOrder":0,"enabled":true,"environmentId":null,"eventName":"preToolUse","handlerType":"command","isManaged":false,"key":"/tmp/rpcexp/repo/.codex/hooks.json:pre_tool_use:0:0","matcher":"Bash","pluginId":null,"source":"project","sourcePath":"/tmp/rpcexp/repo/.codex/hooks.json","statusMessage":null,"timeoutSec":30,"trustStatus":"trusted"},
  {"additionalContextLimit":null,"async":false,"command":"echo y","currentHash":"sha256:300e41a06971d9dd08c08e93c8beef4015d29817e71b3f9439100f9240c56941","displayOrder":1,"enabled":true,"environmentId":null,"eventName":"preToolUse","handlerType":"command","isManaged":false,"key":"/tmp/rpcexp/repo/.codex/hooks.json:pre_tool_use:0:1","matcher":"Bash","pluginId":null,"source":"project","sourcePath":"/tmp/rpcexp/repo/.codex/hooks.json","statusMessage":null,"timeoutSec":600,"trustStatus":"modified"},
  {"additionalContextLimit":null,"async":false,"command":"echo ups","currentHash":"sha256:9c4ab9d6e10ed8234dcda93f0586d119be57dcd3f988d610c58b2f9d127f6564","displayOrder":2,"enabled":true,"environmentId":null,"eventName":"userPromptSubmit","handlerType":"command","isManaged":false,"key":"/tmp/rpcexp/repo/.codex/hooks.json:user_prompt_submit:0:0","matcher":null,"pluginId":null,"source":"project","sourcePath":"/tmp/rpcexp/repo/.codex/hooks.json","statusMessage":null,"timeoutSec":600,"trustStatus":"untrusted"},
  {"additionalContextLimit":null,"async":false,"command":"echo x","currentHash":"sha256:7cd3bd75d5f588f95ee4f55650a36b04e9a48c57020107701365d29e991b85c0","displayOrder":3,"enabled":false,"environmentId":null,"eventName":"stop","handlerType":"command","isManaged":false,"key":"/tmp/rpcexp/repo/.codex/hooks.json:stop:0:0","matcher":null,"pluginId":null,"source":"project","sourcePath":"/tmp/rpcexp/repo/.codex/hooks.json","statusMessage":null,"timeoutSec":600,"trustStatus":"trusted"}
],"warnings":[]}]}"#;

#[test]
fn parses_captured_hooks_list() {
    let result: Value = serde_json::from_str(CAPTURED_HOOKS_LIST).unwrap();
    let listings = parse_hooks_list(&result).unwrap();
    assert_eq!(listings.len(), 1);
    assert_eq!(listings[0].cwd, Path::new("/tmp/rpcexp/repo"));
    let summary: Vec<_> = listings[0]
        .hooks
        .iter()
        .map(|h| {
            (
                h.hooks_json_event(),
                h.command.as_deref().unwrap(),
                h.group_index,
                h.handler_index,
                h.enabled,
                h.trust.as_str(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "PreToolUse".to_owned(),
                "echo x",
                Some(0),
                Some(0),
                true,
                "trusted"
            ),
            (
                "PreToolUse".to_owned(),
                "echo y",
                Some(0),
                Some(1),
                true,
                "modified"
            ),
            (
                "UserPromptSubmit".to_owned(),
                "echo ups",
                Some(0),
                Some(0),
                true,
                "untrusted"
            ),
            (
                "Stop".to_owned(),
                "echo x",
                Some(0),
                Some(0),
                false,
                "trusted"
            ),
        ]
    );
    let first = &listings[0].hooks[0];
    assert_eq!(
        first.source_path,
        Path::new("/tmp/rpcexp/repo/.codex/hooks.json")
    );
    assert_eq!(first.source, "project");
    assert_eq!(first.matcher.as_deref(), Some("Bash"));
    assert_eq!(first.timeout_sec, Some(30));
    assert_eq!(
        first.current_hash,
        "sha256:386325ebc6d635023598f537fa3f9a346464b03ad0ff7215fbe0885c2bace1e1"
    );
    assert_eq!(first.raw["displayOrder"], 0);
}

#[test]
fn hooks_list_tolerates_unknown_fields_and_statuses() {
    let result = json!({"data": [{"cwd": "/r", "errors": [{"path": "/r/.codex/hooks.json", "message": "bad"}],
        "warnings": ["w"], "hooks": [{"eventName": "preToolUse", "handlerType": "mcpTool", "server": "s",
        "tool": "t", "sourcePath": "/r/.codex/hooks.json", "source": "project", "key": "odd-key",
        "enabled": true, "trustStatus": "quarantined", "currentHash": "sha256:00", "newField": 1}]}]});
    let listing = &parse_hooks_list(&result).unwrap()[0];
    assert_eq!(listing.warnings, ["w"]);
    assert_eq!(listing.errors[0].message, "bad");
    let hook = &listing.hooks[0];
    assert_eq!(hook.command, None);
    assert_eq!((hook.group_index, hook.handler_index), (None, None));
    assert_eq!(hook.trust, TrustStatus::Other("quarantined".to_owned()));
    assert_eq!(hook.timeout_sec, None);
}

#[test]
fn key_indices_parse_from_the_right() {
    for (key, want) in [
        ("/r/.codex/hooks.json:pre_tool_use:0:1", (Some(0), Some(1))),
        ("/odd:path/hooks.json:stop:2:3", (Some(2), Some(3))),
        ("/r/config.toml:stop:x:0", (None, None)),
        ("no-indices", (None, None)),
    ] {
        assert_eq!(key_indices(key), want, "{key}");
    }
}

#[test]
fn classify_sorts_messages() {
    let cases = [
        (json!({"id": 1, "result": {"a": 1}}), "response ok"),
        (
            json!({"id": 2, "error": {"code": -32600, "message": "m"}}),
            "response err",
        ),
        (
            json!({"method": "turn/started", "params": {}}),
            "notification",
        ),
        (
            json!({"id": "r1", "method": "item/tool/requestUserInput", "params": {}}),
            "request",
        ),
        (json!({"id": 3}), "none"),
        (json!([1, 2]), "none"),
    ];
    for (message, want) in cases {
        let got = match classify(message.clone()) {
            Some(Classified::Incoming(Incoming::Response { outcome: Ok(_), .. })) => "response ok",
            Some(Classified::Incoming(Incoming::Response {
                outcome: Err(_), ..
            })) => "response err",
            Some(Classified::Incoming(Incoming::Notification(_))) => "notification",
            Some(Classified::Request { .. }) => "request",
            Some(Classified::Incoming(Incoming::Requested)) => "kept",
            None => "none",
        };
        assert_eq!(got, want, "{message}");
    }
}

#[test]
fn server_error_keeps_code_and_message() {
    let e = server_error(
        "turn/steer",
        &json!({"code": -32600, "message": "no active turn to steer"}),
    );
    assert_eq!(e.server_code(), Some(-32600));
    assert_eq!(e.server_message(), Some("no active turn to steer"));
    assert_eq!(
        e.to_string(),
        "codex app-server rejected `turn/steer`: no active turn to steer (code -32600)"
    );
}

#[test]
fn log_tail_drops_colors_and_keeps_the_last_lines() {
    let mut log =
        "\u{1b}[2m2026-01-01T00:00:00Z\u{1b}[0m \u{1b}[31mERROR\u{1b}[0m boom\n\n".to_owned();
    for i in 0..20 {
        writeln!(log, "line {i}").unwrap();
    }
    let tail = format_tail(&log);
    assert!(
        tail.starts_with("\nlast lines of the log:\n  line 12"),
        "{tail}"
    );
    assert!(tail.ends_with("  line 19"), "{tail}");
    assert_eq!(strip_ansi("\u{1b}[31mERROR\u{1b}[0m x"), "ERROR x");
    assert_eq!(format_tail("\n  \n"), "");
}

/// A scripted WebSocket server on a Unix socket, standing in for codex.
fn fake_server(
    script: impl FnOnce(&mut WebSocket<UnixStream>) + Send + 'static,
) -> (tempfile::TempDir, PathBuf, thread::JoinHandle<()>) {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s.sock");
    let listener = UnixListener::bind(&sock).unwrap();
    let handle = thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut ws = tungstenite::accept(stream).unwrap();
        script(&mut ws);
    });
    (dir, sock, handle)
}

fn read_json(ws: &mut WebSocket<UnixStream>) -> Value {
    loop {
        if let Message::Text(t) = ws.read().unwrap() {
            return serde_json::from_str(t.as_str()).unwrap();
        }
    }
}

fn send_json(ws: &mut WebSocket<UnixStream>, v: &Value) {
    ws.send(Message::text(v.to_string())).unwrap();
}

#[test]
fn call_matches_ids_buffers_notifications_and_answers_requests() {
    let (_dir, sock, server) = fake_server(|ws| {
        let req = read_json(ws);
        assert_eq!(req["method"], "x/echo");
        assert_eq!(req["params"], json!({"a": 1}));
        send_json(ws, &json!({"method": "turn/started", "params": {"n": 1}}));
        send_json(
            ws,
            &json!({"id": "s1", "method": "item/tool/requestUserInput", "params": {}}),
        );
        // No handler yet: the request is left for another client, unanswered.
        // A stale answer to some earlier call must not be taken for this one.
        send_json(ws, &json!({"id": 999, "result": "stale"}));
        send_json(ws, &json!({"id": req["id"], "result": {"echo": 1}}));

        let req = read_json(ws);
        send_json(
            ws,
            &json!({"id": "s2", "method": "item/commandExecution/requestApproval", "params": {"c": 2}}),
        );
        let reply = read_json(ws);
        assert_eq!(reply["result"], json!({"decision": "accept"}));
        send_json(ws, &json!({"method": "turn/completed", "params": {"n": 2}}));
        send_json(
            ws,
            &json!({"id": req["id"], "error": {"code": -32600, "message": "nope"}}),
        );

        send_json(ws, &json!({"method": "turn/completed", "params": {"n": 3}}));
        // Silence, then close: the client's waits must time out, then see the close.
        let _ = read_json(ws);
        thread::sleep(Duration::from_millis(500));
    });
    let mut client = Client::connect(&sock, Duration::from_secs(5)).unwrap();
    let result = client
        .call("x/echo", json!({"a": 1}), Duration::from_secs(5))
        .unwrap();
    assert_eq!(result, json!({"echo": 1}));
    assert_eq!(client.notifications().count(), 1);

    client.set_request_handler(Box::new(|method, params| {
        (method == "item/commandExecution/requestApproval" && params["c"] == 2)
            .then(|| json!({"decision": "accept"}))
    }));
    let err = client
        .call("x/fail", json!({}), Duration::from_secs(5))
        .unwrap_err();
    assert_eq!(err.server_message(), Some("nope"));

    // Buffered first, then read from the socket, each taken once.
    let n = client
        .wait_notification("turn/completed", |_| true, Duration::from_secs(5))
        .unwrap();
    assert_eq!(n.params["n"], 2);
    let n = client
        .wait_notification("turn/completed", |p| p["n"] == 3, Duration::from_secs(5))
        .unwrap();
    assert_eq!(n.params["n"], 3);
    let err = client
        .wait_notification("turn/completed", |_| true, Duration::from_millis(200))
        .unwrap_err();
    assert!(
        matches!(err, RpcError::NotificationTimeout { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains(&sock.display().to_string()),
        "{err}"
    );
    let err = client
        .call("x/slow", json!({}), Duration::from_millis(200))
        .unwrap_err();
    assert!(
        err.to_string().starts_with("`x/slow` got no answer"),
        "{err}"
    );
    assert_eq!(client.take_notifications().len(), 1);
    server.join().unwrap();
    let err = client
        .call("x/after", json!({}), Duration::from_secs(5))
        .unwrap_err();
    assert!(matches!(err, RpcError::Closed { .. }), "{err:?}");
}
