//! `spex limits`: the rate-limit windows each harness's own evidence reports.

use std::time::Duration;

use serde_json::json;

use crate::support::codex_home::{codex_command, write_codex_config};
use crate::support::fake_responses::FakeResponses;
use crate::support::rpc::AppServer;

#[test]
fn probe_codex_limits() {
    let fake = FakeResponses::start();
    let tmp = tempfile::Builder::new().prefix("spx").tempdir_in("/tmp").unwrap();
    let codex_home = tmp.path().join("ch");
    let home = tmp.path().join("h");
    let repo = tmp.path().join("r");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&repo).unwrap();
    write_codex_config(&codex_home, &fake.base_url(), "never", "danger-full-access");
    let mut cmd = codex_command(&codex_home, &home);
    cmd.current_dir(&repo);
    let mut app = AppServer::start(&mut cmd, tmp.path(), "s", "probe");
    let thread = app.start_thread(&json!({"cwd": repo}));
    let turn = app.start_turn(&thread, "hello LIMITS=42,7 RESET=1900000000");
    let done = app.completed_within(&turn, Duration::from_secs(60));
    eprintln!("DONE1 {done:?}");
    let turn = app.start_turn(&thread, "SCENARIO:limit LIMITS=100,30 RESET=1900000000");
    let done = app.completed_within(&turn, Duration::from_secs(60));
    eprintln!("DONE2 {done:?}");
    for m in &app.rpc.inbox {
        let method = m["method"].as_str().unwrap_or_default();
        if !method.starts_with("item/") {
            eprintln!("MSG {m}");
        }
    }
    let out = std::process::Command::new("sh").arg("-c").arg(format!("grep -h token_count -r {} | tail -3; grep -h -i 'error\\|limit' -r {}/sessions | grep -v token_count | tail -5", codex_home.display(), codex_home.display())).output().unwrap();
    eprintln!("ROLLOUT {}", String::from_utf8_lossy(&out.stdout));
    eprintln!("{}", fake.request_lines().join("\n"));
    panic!("probe");
}
