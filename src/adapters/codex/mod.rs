//! Codex (0.169.0): hooks in the MAIN checkout's `.codex/hooks.json` (Codex reads a linked
//! worktree's project hooks from there, provided the worktree has a `.codex/` folder), project
//! and per-hook trust in `$CODEX_HOME/config.toml`, contract in `AGENTS.md`, skills under
//! `.agents/skills`. No agent or custom-command files: 0.169.0 loads neither. `rpc` speaks to
//! `codex app-server`; `session_server` runs spex's sessions as threads of it; `trust` asks it
//! which hooks it trusts.

mod answer;
mod client;
mod evidence;
mod files;
mod home;
pub mod rpc;
mod session_server;
mod terminal;
pub mod trust;
mod wire;

use crate::seam::Harness;
use crate::seam::answer::Answering;
use crate::seam::evidence::Observer;
use crate::seam::files::Files;
use crate::seam::session_server::SessionServer;
use crate::seam::terminal::TerminalHost;
use crate::seam::wire::HookWire;

pub struct Codex;

impl Harness for Codex {
    fn id(&self) -> &'static str {
        "codex"
    }

    fn binary_name(&self) -> &'static str {
        "codex"
    }

    fn pinned_version(&self) -> &'static str {
        "0.169.0"
    }

    fn parse_version(&self, output: &str) -> Option<String> {
        // `codex-cli 0.169.0`
        output.split_whitespace().nth(1).map(str::to_owned)
    }

    fn session_env_var(&self) -> Option<&'static str> {
        Some("CODEX_THREAD_ID")
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &[home::HOME_VAR, crate::seam::session_server::SERVER_MARK]
    }

    fn aliases(&self) -> &'static [&'static str] {
        &[]
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
}
