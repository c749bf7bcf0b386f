//! Asking the real Codex what it thinks of a tree's hooks: a short-lived private
//! `codex app-server`, one `hooks/list`, then the server is stopped.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::rpc::{AppServer, AppServerConfig, Client, HookEntry};

/// Every hook Codex discovers for each of `cwds` (the first is the server's own working
/// folder), with its trust status.
pub fn hooks_for(
    codex_bin: &Path,
    codex_home: &Path,
    cwds: &[PathBuf],
) -> anyhow::Result<Vec<HookEntry>> {
    // A short private folder keeps the socket path well inside `sun_path`.
    let dir = tempfile::Builder::new()
        .prefix("spex-")
        .tempdir_in("/tmp")?;
    let sock = dir.path().join("s.sock");
    let mut cfg = AppServerConfig::new(codex_bin, &sock, codex_home, dir.path().join("server.log"));
    cfg.cwd = cwds.first().cloned();
    // The doctor prints this error as one line of text: it keeps its hint.
    let _server = AppServer::spawn(&cfg).map_err(|e| anyhow::anyhow!(crate::hint::spelled(&e)))?;
    let mut client = Client::open(&sock, "spex-doctor", Duration::from_secs(20))?;
    Ok(client.hooks_list(cwds)?)
}
