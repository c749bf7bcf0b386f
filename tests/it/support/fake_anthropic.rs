//! The fake Anthropic Messages API that drives the REAL Claude Code binary offline: the one
//! `spex check` ships, `src/adapters/claude/fake_messages.rs` (its doc lists the endpoints and
//! the script), compiled into this rig by `tests/it/adapters/mod.rs`. Point Claude at it with
//! `ANTHROPIC_BASE_URL=<base_url()>` and any `ANTHROPIC_API_KEY`.

pub use crate::adapters::claude::fake_messages::*;
