//! The fake model providers `spex check` ships (and the HTTP server under them), compiled into
//! the test rig (and the benchmarks) from `src/` at the paths they name each other by
//! (`crate::adapters::...`): the rig and the product share one copy. `support::fake_*` and
//! `support::http` re-export them.

// A `mod.rs` so these paths are relative to this folder whichever crate includes the file.
#[path = "../../../src/adapters/claude"]
pub mod claude {
    pub mod fake_messages;
}

#[path = "../../../src/adapters/codex"]
pub mod codex {
    pub mod fake_responses;
}

#[path = "../../../src/adapters/common"]
pub mod common {
    pub mod fake_http;
}

#[path = "../../../src/adapters/gemini"]
pub mod gemini {
    pub mod fake_api;
}
