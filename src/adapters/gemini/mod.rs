//! Gemini CLI (0.61.0): hooks in each checkout's `.gemini/settings.json`, contract in
//! `GEMINI.md`, commands as `.gemini/commands/*.toml`, folder trust per checkout in
//! `~/.gemini/trustedFolders.json` (facts/gemini.md).

mod answer;
mod commands;
mod evidence;
mod files;
mod home;
mod process;
mod slash;
mod terminal;
mod transcript;
mod trust;
mod wire;

use crate::seam::Harness;
use crate::seam::answer::Answering;
use crate::seam::evidence::Observer;
use crate::seam::files::Files;
use crate::seam::session_server::SessionServer;
use crate::seam::terminal::TerminalHost;
use crate::seam::wire::HookWire;

pub struct Gemini;

impl Harness for Gemini {
    fn id(&self) -> &'static str {
        "gemini"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }

    fn binary_name(&self) -> &'static str {
        "gemini"
    }

    fn pinned_version(&self) -> &'static str {
        "0.61.0"
    }

    fn parse_version(&self, output: &str) -> Option<String> {
        crate::adapters::common::leading_version(output)
    }

    fn session_env_var(&self) -> Option<&'static str> {
        None
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &[home::HOME_VAR, home::TRUSTED_FOLDERS_VAR]
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
        // Its sessions run in terminals; `--acp` serves one session per process, not a
        // project's threads.
        None
    }

    fn evidence(&self) -> Option<&'static dyn Observer> {
        Some(&evidence::GeminiEvidence)
    }

    fn answering(&self) -> Option<&'static dyn Answering> {
        Some(&answer::GeminiAnswering)
    }
}
