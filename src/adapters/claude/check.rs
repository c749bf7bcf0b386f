//! `spex check` for Claude Code: the fake Messages API, a home past onboarding, the workspace
//! trust and the API-key approval, and the scenarios' prompts in the fake's keywords.

use std::io;
use std::path::Path;

use serde_json::{Map, Value, json};

use super::fake_messages::FakeAnthropic;
use crate::adapters::common::check::{CheckKit, Fake, Prepared, Sandbox, Script};

/// The API key the harness is given; the fake accepts anything, no provider sees it.
const DUMMY_API_KEY: &str = "sk-ant-dummy-key-for-spex-check-0000";

pub struct Kit;

impl Fake for FakeAnthropic {
    fn requests(&self) -> Vec<String> {
        self.request_lines()
    }
}

static SCRIPT: Script = Script {
    tool: "USE_READ read hello.txt",
    permission: "USE_BASH run it",
    permission_via: "hook",
    permission_source: Some("PermissionRequest"),
    question: Ok(("USE_ASK pick a color", "Blue")),
    slow: ("USE_NONE DELAY=30 slow", "DELAY=30 slow"),
    fail: "USE_NONE FAIL=400 broken",
    plain: "USE_NONE say hello",
    // A Read of a file that is not there fails (`PostToolUseFailure`); two sub-agents
    // (`SubagentStart`, `SubagentStop`).
    hooks: &[
        "USE_READ FILE=absent.txt read it",
        "USE_AGENTS2 ask two helpers",
    ],
};

impl CheckKit for Kit {
    fn prepare(&self, sandbox: &Sandbox) -> io::Result<Prepared> {
        seed_home(sandbox.home, &[sandbox.repo])?;
        fs_err::write(sandbox.repo.join("hello.txt"), "hello from the repo\n")?;
        let fake = FakeAnthropic::start();
        let env = vec![
            ("ANTHROPIC_BASE_URL", fake.base_url().into()),
            ("ANTHROPIC_API_KEY", DUMMY_API_KEY.into()),
            ("DISABLE_AUTOUPDATER", "1".into()),
        ];
        Ok(Prepared {
            fake: Box::new(fake),
            env,
        })
    }

    fn script(&self) -> &'static Script {
        &SCRIPT
    }
}

/// `<home>/.claude.json` so the TUI starts straight into the prompt in each of `projects`:
/// onboarding done (it would contact the provider), the key approved, the folder trusted
/// (docs/harnesses/facts/claude.md).
fn seed_home(home: &Path, projects: &[&Path]) -> io::Result<()> {
    fs_err::create_dir_all(home.join(".claude"))?;
    let tail: String = {
        let chars: Vec<char> = DUMMY_API_KEY.chars().collect();
        chars[chars.len().saturating_sub(20)..].iter().collect()
    };
    let mut cfg = json!({
        "hasCompletedOnboarding": true,
        "lastOnboardingVersion": super::IDENTITY.version,
        "theme": "dark",
        "numStartups": 1,
        // `Notification` (`idle_prompt`) a second after a turn ends instead of a minute
        // (docs/harnesses/facts/claude.md §2): the check sees that hook fire.
        "messageIdleNotifThresholdMs": 1000,
        "customApiKeyResponses": {"approved": [tail], "rejected": []},
    });
    let mut projs = Map::new();
    for p in projects {
        let entry = json!({"hasTrustDialogAccepted": true,
            "hasCompletedProjectOnboarding": true, "allowedTools": []});
        projs.insert(p.to_string_lossy().into_owned(), entry.clone());
        if let Ok(c) = fs_err::canonicalize(p) {
            projs.insert(c.to_string_lossy().into_owned(), entry);
        }
    }
    cfg["projects"] = Value::Object(projs);
    fs_err::write(
        home.join(".claude.json"),
        serde_json::to_string_pretty(&cfg).map_err(io::Error::other)?,
    )
}
