//! The harness adapters: one folder per harness implementing `seam::Harness` and its facets,
//! and the registry that maps an id to its adapter. Adding a harness = one folder and one line
//! in `ALL`. What the adapters share lives in `common`, below them. Product code resolves an
//! adapter here and never compares harness ids itself.

pub mod claude;
pub mod codex;
pub mod common;
pub mod gemini;

/// The adapters' errors that carry hints, re-exported so `cli/report.rs` lists them by a path
/// that names no harness folder.
pub use codex::rpc::AppServerError;

use crate::config::Known;
use crate::seam::Harness;

static ALL: [&dyn Harness; 3] = [&claude::Claude, &codex::Codex, &gemini::Gemini];

/// Every adapter, in the default order.
pub fn all() -> &'static [&'static dyn Harness] {
    &ALL
}

/// The adapter for an id or alias.
pub fn lookup(id: &str) -> Option<&'static dyn Harness> {
    ALL.iter()
        .copied()
        .find(|h| h.id() == id || h.identity().aliases.contains(&id))
}

/// The check kit of a harness id.
pub fn check_kit(id: &str) -> Option<&'static dyn common::check::CheckKit> {
    match lookup(id)?.id() {
        "claude" => Some(&claude::check::Kit),
        "codex" => Some(&codex::check::Kit),
        "gemini" => Some(&gemini::check::Kit),
        _ => None,
    }
}

/// Every environment variable some adapter reads, for `Env::from_process` to read with the
/// rest of the environment.
pub fn env_vars() -> impl Iterator<Item = &'static str> {
    ALL.iter().flat_map(|h| {
        let i = h.identity();
        i.session_env_var
            .into_iter()
            .chain(i.env_vars.iter().copied())
    })
}

/// The harness ids a configuration may name, in the default order, with their aliases.
pub fn known() -> Known {
    Known {
        ids: ALL.iter().map(|h| h.id()).collect(),
        canonical: |id| lookup(id).map(<dyn Harness>::id),
    }
}

#[cfg(test)]
mod conformance;
// The captured payloads as a corpus (shared with the integration tests), for the checks every
// adapter passes and the fuzz tests of the hook path.
#[cfg(test)]
#[path = "../../tests/it/support/payloads.rs"]
#[allow(
    clippy::disallowed_methods,
    reason = "the integration tests' file, under their crate's allow of std::fs"
)]
pub mod payloads;
