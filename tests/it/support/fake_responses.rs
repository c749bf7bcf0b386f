//! The fake Responses API that drives the REAL Codex binary offline: the one `spex check` ships,
//! `src/adapters/codex/fake_responses.rs` (its doc lists the scenarios and the rate-limit
//! headers), compiled into this rig by `tests/it/adapters/mod.rs`. Point Codex at it with
//! [`super::codex_home::write_codex_config`] and `FAKE_API_KEY=<anything>` in its env.

pub use crate::adapters::codex::fake_responses::*;
