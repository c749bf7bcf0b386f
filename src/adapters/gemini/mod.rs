//! Gemini CLI (0.61.0): hooks in each checkout's `.gemini/settings.json`, contract in
//! `GEMINI.md`, commands as `.gemini/commands/*.toml`, folder trust per checkout in
//! `~/.gemini/trustedFolders.json` (docs/harnesses/facts/gemini.md).

mod answer;
pub mod check;
mod commands;
mod evidence;
mod fake_api;
mod files;
mod home;
mod limits;
mod process;
mod slash;
mod terminal;
mod transcript;
mod trust;
mod wire;

use crate::seam::answer::Answering;
use crate::seam::evidence::Observer;
use crate::seam::files::Files;
use crate::seam::session_server::SessionServer;
use crate::seam::terminal::TerminalHost;
use crate::seam::wire::HookWire;
use crate::seam::{AnswerPaths, Capabilities, Harness, Identity};

pub struct Gemini;

/// Gemini CLI as spex knows it.
const IDENTITY: Identity = Identity {
    id: "gemini",
    aliases: &[],
    binary: "gemini",
    version: "0.61.0",
    parse_version: crate::adapters::common::leading_version,
    session_env_var: None,
    env_vars: &[home::HOME_VAR, home::TRUSTED_FOLDERS_VAR],
    capabilities: Capabilities {
        hosted_terminal: true,
        // Its sessions run in terminals; `--acp` serves one session per process, not a
        // project's threads.
        server: false,
        evidence: true,
        // Its dialog's keys only: its hooks cannot answer its dialogs.
        answers: AnswerPaths {
            keys: true,
            hook: false,
            server: false,
        },
        idle_notification: false,
        title_summary: false,
    },
};

impl Harness for Gemini {
    fn identity(&self) -> &'static Identity {
        &IDENTITY
    }

    fn files(&self) -> Option<&'static dyn Files> {
        Some(&files::GeminiFiles)
    }

    fn wire(&self) -> Option<&'static dyn HookWire> {
        Some(&wire::GeminiWire)
    }

    fn terminal(&self) -> Option<&'static dyn TerminalHost> {
        Some(&terminal::GeminiTerminal)
    }

    fn server(&self) -> Option<&'static dyn SessionServer> {
        None
    }

    fn evidence(&self) -> Option<&'static dyn Observer> {
        Some(&evidence::GeminiEvidence)
    }

    fn answering(&self) -> Option<&'static dyn Answering> {
        Some(&answer::GeminiAnswering)
    }

    fn limits(&self) -> Option<&'static dyn crate::seam::limits::LimitsEvidence> {
        Some(&limits::GeminiLimits)
    }
}
