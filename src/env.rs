//! The process environment, read once. Everything downstream takes values from `Env`, so tests
//! inject their own and no module reads `std::env` ad hoc.

use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Debug, Clone, Default)]
pub struct Env {
    pub home: Option<PathBuf>,
    pub xdg_config_home: Option<PathBuf>,
    pub xdg_state_home: Option<PathBuf>,
    pub spex_home: Option<PathBuf>,
    pub codex_home: Option<PathBuf>,
    pub claude_config_dir: Option<PathBuf>,
    pub path: Option<OsString>,
    pub no_color: bool,
    pub spex_session_id: Option<String>,
    /// `SPEX_TRACE_DISPATCH`: log every hook invocation to the project's `dispatch.log`.
    pub trace_dispatch: bool,
    /// Session ids a harness exports into its own processes, by variable name.
    pub harness_vars: Vec<(String, String)>,
}

fn path_var(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

impl Env {
    pub fn from_process() -> Self {
        let harness_vars = crate::adapters::all()
            .iter()
            .filter_map(|h| h.session_env_var())
            .filter_map(|name| Some((name.to_owned(), std::env::var(name).ok()?)))
            .collect();
        Env {
            home: path_var("HOME"),
            xdg_config_home: path_var("XDG_CONFIG_HOME"),
            xdg_state_home: path_var("XDG_STATE_HOME"),
            spex_home: path_var("SPEX_HOME"),
            codex_home: path_var("CODEX_HOME"),
            claude_config_dir: path_var("CLAUDE_CONFIG_DIR"),
            path: std::env::var_os("PATH"),
            no_color: std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
            spex_session_id: std::env::var("SPEX_SESSION_ID")
                .ok()
                .filter(|v| !v.is_empty()),
            harness_vars,
            trace_dispatch: std::env::var_os("SPEX_TRACE_DISPATCH")
                .is_some_and(|v| !v.is_empty() && v != "0"),
        }
    }

    fn home_or_root(&self) -> PathBuf {
        self.home.clone().unwrap_or_else(|| PathBuf::from("/"))
    }

    /// `$SPEX_HOME`, else `$XDG_STATE_HOME/spex`, else `~/.local/state/spex`.
    pub fn spex_home(&self) -> PathBuf {
        if let Some(p) = &self.spex_home {
            return p.clone();
        }
        match &self.xdg_state_home {
            Some(p) => p.join("spex"),
            None => self.home_or_root().join(".local/state/spex"),
        }
    }

    /// `$XDG_CONFIG_HOME/spex/config.jsonc`, else `~/.config/spex/config.jsonc`.
    pub fn user_config_file(&self) -> PathBuf {
        match &self.xdg_config_home {
            Some(p) => p.join("spex/config.jsonc"),
            None => self.home_or_root().join(".config/spex/config.jsonc"),
        }
    }

    pub fn codex_home(&self) -> PathBuf {
        self.codex_home
            .clone()
            .unwrap_or_else(|| self.home_or_root().join(".codex"))
    }

    /// Claude's global state file: `$CLAUDE_CONFIG_DIR/.claude.json`, else `~/.claude.json`.
    pub fn claude_state_file(&self) -> PathBuf {
        match &self.claude_config_dir {
            Some(p) => p.join(".claude.json"),
            None => self.home_or_root().join(".claude.json"),
        }
    }

    pub fn harness_var(&self, name: &str) -> Option<&str> {
        self.harness_vars
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Finds an executable on `PATH` (or returns an explicit path as is when it exists).
    pub fn which(&self, program: &str) -> Option<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        let is_exec = |p: &std::path::Path| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        };
        if program.contains('/') {
            let p = PathBuf::from(program);
            return is_exec(&p).then_some(p);
        }
        std::env::split_paths(self.path.as_ref()?)
            .map(|dir| dir.join(program))
            .find(|p| is_exec(p))
    }
}
