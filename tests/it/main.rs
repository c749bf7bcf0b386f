//! Integration tests: one binary (see Cargo.toml `[[test]] name = "it"`).

mod answering;
mod architecture;
mod attach;
mod cassettes;
mod cli;
mod codex_runtime;
mod common;
mod dispatch;
mod events;
mod fuzz_dispatch;
mod gemini_files;
mod gemini_sessions;
mod host;
mod materialize;
mod names;
mod outcomes;
mod peers_smoke;
mod real_peers;
mod real_sessions;
mod real_tui;
mod runtime;
mod safety;
mod steering;
mod store;
mod subagents;
mod support;
