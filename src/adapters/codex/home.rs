//! Where Codex keeps its user-level state.

use std::path::PathBuf;

use crate::env::Env;

/// Where Codex keeps its user-level state.
pub const HOME_VAR: &str = "CODEX_HOME";

/// `$CODEX_HOME`, else `~/.codex`.
pub fn codex_home(env: &Env) -> PathBuf {
    env.path_var(HOME_VAR)
        .unwrap_or_else(|| env.home_or_root().join(".codex"))
}

pub fn config_file(env: &Env) -> PathBuf {
    codex_home(env).join("config.toml")
}
