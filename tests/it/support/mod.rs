//! The one test rig of the integration tests: the hermetic world the real `spex` runs in
//! (`world`), the real harness binaries, fakes of the model APIs they talk to, and seeding of
//! their home directories. A `wait_*` here fails on timeout: it panics with what it waited for,
//! how long and what it last saw, or (`Term`'s) returns that as an `Err` for the caller to add
//! its own diagnostics to. A wait that may well come back empty is named `*_within` and returns
//! an `Option` (`status_within`: the last record seen as its `Err`), so a caller that relies on
//! it does so by name.

// Each test module uses a different subset of these helpers; the rest is not dead, just idle.
#![allow(dead_code)]

pub mod browser;
pub mod claude_home;
pub mod codex_home;
pub mod fake_anthropic;
pub mod fake_gemini;
pub mod fake_responses;
pub mod gemini_home;
pub mod http;
pub mod payloads;
pub mod peers;
pub mod rpc;
pub mod sshd;
pub mod term;
pub mod world;
