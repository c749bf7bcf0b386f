//! Claude Code (2.1.197): hooks in each tree's `.claude/settings.json`, contract in
//! `CLAUDE.md`, skills/agents/commands under `.claude/`, workspace trust in `~/.claude.json`,
//! its TUI hosted in spex's PTY and answered through its waiting hook or its dialog's keys.
//! The `plugin` id (a Claude plugin bundle) routes here.

mod answer;
pub mod check;
mod evidence;
mod failure;
mod fake_messages;
mod files;
mod home;
mod limits;
mod slash;
mod terminal;
mod transcript;
mod usage;
mod wire;

use crate::seam::answer::Answering;
use crate::seam::evidence::Observer;
use crate::seam::files::Files;
use crate::seam::session_server::SessionServer;
use crate::seam::terminal::TerminalHost;
use crate::seam::wire::HookWire;
use crate::seam::{AnswerPaths, Capabilities, Harness, Identity};

pub struct Claude;

/// Claude Code as spex knows it.
const IDENTITY: Identity = Identity {
    id: "claude",
    aliases: &["plugin"],
    binary: "claude",
    version: "2.1.197",
    parse_version: crate::adapters::common::leading_version,
    session_env_var: Some("CLAUDE_CODE_SESSION_ID"),
    env_vars: &[home::CONFIG_DIR_VAR],
    capabilities: Capabilities {
        hosted_terminal: true,
        server: false,
        evidence: true,
        // Its dialog's keys, and the `PermissionRequest` hook, which waits for an answer.
        answers: AnswerPaths {
            keys: true,
            hook: true,
            server: false,
        },
        idle_notification: true,
        title_summary: true,
    },
};

impl Harness for Claude {
    fn identity(&self) -> &'static Identity {
        &IDENTITY
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

    fn limits(&self) -> Option<&'static dyn crate::seam::limits::LimitsEvidence> {
        Some(&limits::ClaudeLimits)
    }
}
