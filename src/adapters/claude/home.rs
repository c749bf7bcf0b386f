//! Where Claude Code keeps its user-level state, and a tree's settings file.

use std::path::{Path, PathBuf};

use crate::env::Env;

/// Where Claude Code keeps its user-level state instead of `~` and `~/.claude`.
pub const CONFIG_DIR_VAR: &str = "CLAUDE_CONFIG_DIR";

/// Claude's global state file: `$CLAUDE_CONFIG_DIR/.claude.json`, else `~/.claude.json`.
pub fn state_file(env: &Env) -> PathBuf {
    match env.path_var(CONFIG_DIR_VAR) {
        Some(p) => p.join(".claude.json"),
        None => env.home_or_root().join(".claude.json"),
    }
}

/// A tree's shared settings: `.claude/settings.json` (hooks, and spex's status line).
pub fn settings_file(tree_root: &Path) -> PathBuf {
    tree_root.join(".claude/settings.json")
}
