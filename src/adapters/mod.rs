//! The harness adapters: one folder per harness implementing `seam::Harness` and its facets,
//! and the registry that maps an id to its adapter. Adding a harness = one folder and one line
//! in `ALL`. What the adapters share lives in `common`, below them. Product code resolves an
//! adapter here and never compares harness ids itself.

pub mod claude;
pub mod codex;
pub mod common;
pub mod gemini;

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
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn registry_ids_are_unique_and_resolve() {
        let mut ids: Vec<&str> = all().iter().map(|h| h.id()).collect();
        ids.extend(
            all()
                .iter()
                .flat_map(|h| h.identity().aliases.iter().copied()),
        );
        let n = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), n, "ids and aliases are unique");
        for id in ids {
            assert!(lookup(id).is_some());
        }
        assert_eq!(lookup("plugin").map(<dyn Harness>::id), Some("claude"));
        assert!(lookup("vim").is_none());
    }

    #[test]
    fn every_adapter_has_fixtures() {
        for h in all() {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/payloads")
                .join(h.id());
            let n = std::fs::read_dir(&dir).map_or(0, Iterator::count);
            assert!(n > 0, "no payload fixtures in {}", dir.display());
        }
    }
}
