//! The Claude benchmarks' world: a temporary repo, home and store, spex run in it against the
//! tests' fake Messages API, and every session it launched stopped when it goes.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

use crate::live::repo_in;
use crate::support::fake_anthropic::FakeAnthropic;
use crate::support::peers::peers_path;

const API_KEY: &str = "sk-ant-dummy-key-for-spex-tests-0000";

pub struct World {
    _dir: tempfile::TempDir,
    pub base: PathBuf,
    pub fake: FakeAnthropic,
}

impl World {
    /// `spex args` in the world; its output whatever its exit.
    pub fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_spex"))
            .args(args)
            .current_dir(self.base.join("repo"))
            .env_clear()
            .env("PATH", peers_path())
            .env("HOME", self.base.join("home"))
            .env("SPEX_HOME", self.base.join("store"))
            .env("XDG_CONFIG_HOME", self.base.join("xdg"))
            .env("XDG_RUNTIME_DIR", self.base.join("run"))
            .env("ANTHROPIC_BASE_URL", self.fake.base_url())
            .env("ANTHROPIC_API_KEY", API_KEY)
            .env("DISABLE_AUTOUPDATER", "1")
            .env("TERM", "xterm-256color")
            .output()
            .expect("spex runs")
    }

    pub fn spex(&self, args: &[&str]) -> Value {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "spex {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }
}

/// A bench that fails half way leaves no host running.
impl Drop for World {
    fn drop(&mut self) {
        let out = self.run(&["sessions", "--json"]);
        let live: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        for s in live.as_array().into_iter().flatten() {
            if let Some(id) = s["id"].as_str() {
                let _ = self.run(&["stop", id]);
            }
        }
    }
}

/// A repo whose `spex.jsonc` is `config`, materialized, in a Claude home seeded as the facts
/// describe (no onboarding, the key approved, the project trusted), with the fake Messages API.
pub fn world(config: &str) -> World {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("spxb")
        .tempdir_in("/tmp")
        .unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let repo = repo_in(&base);
    std::fs::create_dir_all(base.join("home/.claude")).unwrap();
    std::fs::create_dir_all(base.join("run")).unwrap();
    std::fs::set_permissions(base.join("run"), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(repo.join("spex.jsonc"), config).unwrap();
    // The seeding the facts describe: no onboarding, key approved, project trusted.
    let tail = &API_KEY[API_KEY.len() - 20..];
    let state = json!({
        "hasCompletedOnboarding": true, "lastOnboardingVersion": "2.1.197", "theme": "dark",
        "numStartups": 1, "customApiKeyResponses": {"approved": [tail], "rejected": []},
        "projects": { repo.to_string_lossy(): {"hasTrustDialogAccepted": true,
            "hasCompletedProjectOnboarding": true, "allowedTools": []}},
    });
    std::fs::write(base.join("home/.claude.json"), state.to_string()).unwrap();
    let w = World {
        _dir: dir,
        base,
        fake: FakeAnthropic::start(),
    };
    w.spex(&["materialize", "--json"]);
    w
}
