//! Codex app-server JSON-RPC: the synchronous WebSocket client spoken over the server's Unix
//! socket (`transport`), typed wrappers for the thread and turn methods spex uses (`methods`),
//! the hooks listing (`hooks`), and spawning, probing and stopping `codex app-server --listen
//! unix://SOCK` (`process`). It owns no policy (when to start a server, which thread to steer,
//! what to do on a lost race): its callers (the Codex adapter's methods, driven by the
//! harness-neutral engines) decide that, and nothing here is reachable from `spex dispatch`.
//! Nothing in it imports outside this folder: `tests/it/codex_rpc.rs` builds these files as
//! they are and drives them against the real codex.
//!
//! Protocol facts this module relies on (verified against codex 0.169.0, see
//! `docs/harnesses/facts/codex.md` section 5): the WebSocket lives at path `/rpc` on the Unix socket;
//! `--listen unix://P` binds the real socket under `/tmp/codex-daemon-<uid>/` and makes `P` a
//! symlink to it; a client must send `initialize` then the `initialized` notification before
//! anything else.

mod hooks;
mod methods;
mod process;
mod transport;

#[cfg(test)]
mod tests;

pub use hooks::{HookEntry, TrustStatus};
pub use process::{AppServer, AppServerConfig, AppServerError, probe};
pub use transport::{Client, Notification, RpcError};

// Here, not in `process.rs`: the client's files import nothing outside their folder (a test
// builds them alone).
impl crate::hint::Hint for AppServerError {
    fn hint(&self) -> Option<String> {
        match self {
            AppServerError::Spawn { .. } => {
                Some("check the path to the codex executable".to_owned())
            }
            AppServerError::AlreadyRunning { .. }
            | AppServerError::Log { .. }
            | AppServerError::Exited { .. }
            | AppServerError::NotReady { .. } => None,
        }
    }
}
