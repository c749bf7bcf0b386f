//! Integration tests: one binary (see Cargo.toml `[[test]] name = "it"`).

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "tests set up and inspect files with std::fs: a failed call panics at its own line, which says what it was doing"
)]
#![allow(
    clippy::too_many_lines,
    reason = "an end-to-end test is one scenario, read top to bottom"
)]

#[allow(
    dead_code,
    reason = "each test module uses a different part of the fakes"
)]
mod adapters;
mod answering;
mod architecture;
mod attach;
mod board;
mod board_browser;
mod browser_driver;
mod cassette_specs;
mod cassettes;
mod check;
mod cli;
mod codex_rpc;
mod codex_runtime;
mod delivery;
mod diff_usage;
mod dispatch;
mod docs;
mod events;
mod fuzz_dispatch;
mod gemini_answering;
mod gemini_files;
mod gemini_runtime;
mod gemini_sessions;
mod host;
mod limits;
mod machine_stop;
mod materialize;
mod names;
mod notify;
mod notify_board;
mod notify_desktop;
mod notify_harnesses;
mod notify_links;
mod notify_sender;
mod outcomes;
mod peers_smoke;
mod projects;
mod real_peers;
mod real_sessions;
mod real_tui;
mod record_cassettes;
mod recording;
mod remote;
mod remote_answers;
mod remote_cmds;
mod remote_stream;
mod runtime;
mod safety;
mod steering;
mod store;
mod subagents;
mod support;
mod watch;
mod watching;
