//! `spex check` for Codex: the fake Responses API as a model provider of its own, a
//! `CODEX_HOME` with approvals on request in a workspace-write sandbox and its first-run
//! notices seen, and the scenarios' prompts in the fake's `SCENARIO:` tags.

use std::io;
use std::time::Duration;

use super::fake_responses::FakeResponses;
use crate::adapters::common::check::{CheckKit, Fake, Prepared, Sandbox, Script};

pub struct Kit;

impl Fake for FakeResponses {
    fn requests(&self) -> Vec<String> {
        self.request_lines()
    }
}

static SCRIPT: Script = Script {
    tool: "SCENARIO:shell run it",
    permission: "SCENARIO:escalate",
    permission_via: "server",
    permission_source: None,
    // With the sandbox's `default_mode_request_user_input` feature: outside Plan mode a turn
    // is offered no question tool (docs/harnesses/facts/codex.md §4).
    question: Ok(("SCENARIO:ask pick a color", "Blue")),
    slow: ("SCENARIO:hang HANG=60", "Working"),
    fail: "SCENARIO:fail",
    plain: "say hello",
    // A sub-agent (`SubagentStart`, `SubagentStop`): see `hooks_turns`.
    hooks: &["SCENARIO:spawn one helper"],
};

impl CheckKit for Kit {
    fn prepare(&self, sandbox: &Sandbox) -> io::Result<Prepared> {
        let fake = FakeResponses::start_with_hang_limit(Duration::from_mins(1));
        let codex_home = sandbox.home.join(".codex");
        fs_err::create_dir_all(&codex_home)?;
        // The fake as the provider (docs/harnesses/facts/codex.md): no retries, so a scripted
        // failure fails at once; the notices a first run shows are marked seen; the question
        // tool offered outside Plan mode (§4), which a delivered prompt cannot choose.
        let config = format!(
            "{}model_provider = \"fake\"\napproval_policy = \"on-request\"\n\
             sandbox_mode = \"workspace-write\"\n\n[model_providers.fake]\nname = \"fake\"\n\
             base_url = \"{}\"\nwire_api = \"responses\"\nenv_key = \"FAKE_API_KEY\"\n\
             request_max_retries = 0\nstream_max_retries = 0\n\n\
             [notice.model_migrations]\n\"gpt-5.5\" = \"gpt-6-sol\"\n\n\
             [tui.model_availability_nux]\n\"gpt-6.1-sol\" = 1\n\n\
             [tui]\nscreen_reader_detection_done = true\n\n\
             [features]\ndefault_mode_request_user_input = true\n",
            model_line(KNOWN_MODEL),
            fake.base_url()
        );
        fs_err::write(codex_home.join("config.toml"), config)?;
        Ok(Prepared {
            fake: Box::new(fake),
            env: vec![
                ("CODEX_HOME", codex_home.into()),
                ("FAKE_API_KEY", "dummy".into()),
                ("OPENAI_API_KEY", "sk-dummy".into()),
                ("RUST_LOG", "warn".into()),
            ],
        })
    }

    fn script(&self) -> &'static Script {
        &SCRIPT
    }

    /// A model slug 0.169.0 does not know for the sub-agent turn: only such a model is offered
    /// `multi_agent_v1.spawn_agent` (docs/harnesses/facts/codex.md §4); the known slug the other
    /// scenarios use is put back after it.
    fn hooks_turns(&self, sandbox: &Sandbox, on: bool) -> io::Result<()> {
        let path = sandbox.home.join(".codex/config.toml");
        let (from, to) = if on {
            (KNOWN_MODEL, SPAWN_MODEL)
        } else {
            (SPAWN_MODEL, KNOWN_MODEL)
        };
        let text = fs_err::read_to_string(&path)?;
        fs_err::write(&path, text.replacen(&model_line(from), &model_line(to), 1))
    }
}

/// The model the scenarios run with: known to 0.169.0, so offered `exec_command` and
/// `apply_patch`.
const KNOWN_MODEL: &str = "gpt-5.5";
/// A slug 0.169.0 does not know, which gets `spawn_agent`.
const SPAWN_MODEL: &str = "gpt-5.4";

fn model_line(model: &str) -> String {
    format!("model = \"{model}\"\n")
}
