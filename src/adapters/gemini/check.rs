//! `spex check` for Gemini CLI: the fake Gemini API, user settings with API-key auth and
//! nothing that leaves the machine, and the scenarios' prompts in the fake's `SCENARIO:` tags.

use std::io;
use std::path::Path;

use super::fake_api::{FakeGemini, HANG_TEXT};
use crate::adapters::common::check::{CheckKit, Fake, Prepared, Sandbox, Script, edit_json};

/// The API key the harness is given; the fake accepts anything, no provider sees it.
const DUMMY_API_KEY: &str = "fake-gemini-key-for-spex-check";
/// The model the seeded settings pin (the fake answers any).
const MODEL: &str = "gemini-2.5-flash";
/// Where Gemini is told its system settings are: nowhere, so the machine's cannot change a check.
const NO_SYSTEM_SETTINGS: &str = "/nonexistent/spex-check/gemini-cli/settings.json";

pub struct Kit;

impl Fake for FakeGemini {
    fn requests(&self) -> Vec<String> {
        self.request_lines()
    }
}

static SCRIPT: Script = Script {
    tool: "SCENARIO:shellcmd <<echo tool-ran>>",
    permission: "SCENARIO:shellcmd <<touch approved.txt>>",
    permission_via: "keys",
    permission_source: None,
    question: Ok(("SCENARIO:ask pick one", "2")),
    slow: ("SCENARIO:hang HANG=60", HANG_TEXT),
    fail: "SCENARIO:fail now",
    plain: "say hello",
    // The other scenarios fire every hook spex binds.
    hooks: &[],
};

fn settings(home: &Path) -> std::path::PathBuf {
    home.join(".gemini/settings.json")
}

impl CheckKit for Kit {
    fn prepare(&self, sandbox: &Sandbox) -> io::Result<Prepared> {
        edit_json(&settings(sandbox.home), |v| {
            v["security"]["auth"]["selectedType"] = "gemini-api-key".into();
            v["model"]["name"] = MODEL.into();
            v["privacy"]["usageStatisticsEnabled"] = false.into();
            v["telemetry"]["enabled"] = false.into();
            v["general"]["enableAutoUpdate"] = false.into();
            v["general"]["enableAutoUpdateNotification"] = false.into();
        })?;
        let fake = FakeGemini::start();
        Ok(Prepared {
            env: vec![
                ("GOOGLE_GEMINI_BASE_URL", fake.base_url().into()),
                ("GEMINI_API_KEY", DUMMY_API_KEY.into()),
                ("GEMINI_CLI_SYSTEM_SETTINGS_PATH", NO_SYSTEM_SETTINGS.into()),
            ],
            fake: Box::new(fake),
        })
    }

    fn script(&self) -> &'static Script {
        &SCRIPT
    }

    /// `echo` allowed without asking (`tools.allowed`) for the tool turn only: with it set,
    /// Gemini refuses every other command instead of asking.
    fn tool_unasked(&self, sandbox: &Sandbox, on: bool) -> io::Result<()> {
        edit_json(&settings(sandbox.home), |v| {
            if on {
                v["tools"]["allowed"] = serde_json::json!(["run_shell_command(echo)"]);
            } else if let Some(tools) = v["tools"].as_object_mut() {
                tools.remove("allowed");
            }
        })
    }
}
