//! Codex (0.169.0): hooks in the MAIN checkout's `.codex/hooks.json` (Codex reads a linked
//! worktree's project hooks from there, provided the worktree has a `.codex/` folder), project
//! and per-hook trust in `$CODEX_HOME/config.toml`, contract in `AGENTS.md`, skills under
//! `.agents/skills`. No agent or custom-command files: 0.169.0 loads neither. `rpc` speaks to
//! `codex app-server`; `session_server` runs spex's sessions as threads of it; `trust` asks it
//! which hooks it trusts.

mod answer;
pub mod check;
mod client;
mod evidence;
mod fake_responses;
mod files;
mod home;
mod limits;
pub mod rpc;
mod session_server;
mod terminal;
pub mod trust;
mod wire;

use crate::seam::answer::Answering;
use crate::seam::evidence::Observer;
use crate::seam::files::Files;
use crate::seam::session_server::SessionServer;
use crate::seam::terminal::TerminalHost;
use crate::seam::wire::HookWire;
use crate::seam::{AnswerPaths, Capabilities, Harness, Identity};

pub struct Codex;

/// Codex as spex knows it.
const IDENTITY: Identity = Identity {
    id: "codex",
    aliases: &[],
    binary: "codex",
    version: "0.169.0",
    parse_version,
    session_env_var: Some("CODEX_THREAD_ID"),
    env_vars: &[home::HOME_VAR, crate::seam::session_server::SERVER_MARK],
    capabilities: Capabilities {
        hosted_terminal: true,
        server: true,
        evidence: true,
        // Its server's requests; while the person is away, its waiting hook.
        answers: AnswerPaths {
            keys: false,
            hook: true,
            server: true,
        },
        idle_notification: false,
        title_summary: false,
    },
};

/// The version in `codex --version` output: `codex-cli 0.169.0`.
fn parse_version(output: &str) -> Option<String> {
    output.split_whitespace().nth(1).map(str::to_owned)
}

impl Harness for Codex {
    fn identity(&self) -> &'static Identity {
        &IDENTITY
    }

    fn files(&self) -> Option<&'static dyn Files> {
        Some(&files::CodexFiles)
    }

    fn wire(&self) -> Option<&'static dyn HookWire> {
        Some(&wire::CodexWire)
    }

    fn terminal(&self) -> Option<&'static dyn TerminalHost> {
        Some(&terminal::CodexTerminal)
    }

    fn server(&self) -> Option<&'static dyn SessionServer> {
        Some(&session_server::CodexServer)
    }

    fn evidence(&self) -> Option<&'static dyn Observer> {
        Some(&evidence::CodexEvidence)
    }

    fn answering(&self) -> Option<&'static dyn Answering> {
        Some(&answer::CodexAnswering)
    }

    fn limits(&self) -> Option<&'static dyn crate::seam::limits::LimitsEvidence> {
        Some(&limits::CodexLimits)
    }
}
