//! Claude Code (2.1.197): hooks in each tree's `.claude/settings.json`, contract in
//! `CLAUDE.md`, skills/agents/commands under `.claude/`, workspace trust in `~/.claude.json`,
//! its TUI hosted in spex's PTY and answered through its waiting hook or its dialog's keys.
//! The `plugin` id (a Claude plugin bundle) routes here.

mod answer;
mod evidence;
mod failure;
mod files;
mod home;
mod slash;
mod terminal;
mod transcript;
mod usage;
mod wire;

use crate::seam::Harness;
use crate::seam::answer::Answering;
use crate::seam::evidence::Observer;
use crate::seam::files::Files;
use crate::seam::session_server::SessionServer;
use crate::seam::terminal::TerminalHost;
use crate::seam::wire::HookWire;

pub struct Claude;

impl Harness for Claude {
    fn id(&self) -> &'static str {
        "claude"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["plugin"]
    }

    fn binary_name(&self) -> &'static str {
        "claude"
    }

    fn pinned_version(&self) -> &'static str {
        "2.1.197"
    }

    fn parse_version(&self, output: &str) -> Option<String> {
        crate::adapters::common::leading_version(output)
    }

    fn session_env_var(&self) -> Option<&'static str> {
        Some("CLAUDE_CODE_SESSION_ID")
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &[home::CONFIG_DIR_VAR]
    }

    fn files(&self) -> Option<&'static dyn Files> {
        Some(&files::ClaudeFiles)
    }

    fn wire(&self) -> Option<&'static dyn HookWire> {
        Some(&wire::ClaudeWire)
    }

    fn terminal(&self) -> Option<&'static dyn TerminalHost> {
        Some(&terminal::ClaudeTerminal)
    }

    fn server(&self) -> Option<&'static dyn SessionServer> {
        None
    }

    fn evidence(&self) -> Option<&'static dyn Observer> {
        Some(&evidence::ClaudeEvidence)
    }

    fn answering(&self) -> Option<&'static dyn Answering> {
        Some(&answer::ClaudeAnswering)
    }
}
