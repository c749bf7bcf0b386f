//! Where Gemini CLI keeps its user-level state: `$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`
//! (docs/harnesses/facts/gemini.md §3.1).

use std::path::PathBuf;

use crate::env::Env;

/// Replaces `$HOME` for everything Gemini CLI keeps under `.gemini/`.
pub const HOME_VAR: &str = "GEMINI_CLI_HOME";

/// Names the folder-trust file instead of `<gemini dir>/trustedFolders.json` (0.61.0
/// `Storage.getTrustedFoldersPath`).
pub const TRUSTED_FOLDERS_VAR: &str = "GEMINI_CLI_TRUSTED_FOLDERS_PATH";

/// `$GEMINI_CLI_HOME`, else `~`: where `.gemini/` and the user's `.agents/` are.
pub fn home(env: &Env) -> PathBuf {
    env.path_var(HOME_VAR).unwrap_or_else(|| env.home_or_root())
}

/// `$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`.
pub fn gemini_dir(env: &Env) -> PathBuf {
    home(env).join(".gemini")
}

/// The folder-trust file: `{"<path>": "TRUST_FOLDER" | "TRUST_PARENT" | "DO_NOT_TRUST"}`.
pub fn trusted_folders_file(env: &Env) -> PathBuf {
    env.path_var(TRUSTED_FOLDERS_VAR)
        .unwrap_or_else(|| gemini_dir(env).join("trustedFolders.json"))
}

/// The project-hook fingerprints Gemini has warned about: `{"<project root>": ["<name>:<command>"]}`.
pub fn trusted_hooks_file(env: &Env) -> PathBuf {
    gemini_dir(env).join("trusted_hooks.json")
}
