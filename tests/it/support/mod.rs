//! Shared helpers for the integration tests: the real harness binaries, fakes of the model APIs
//! they talk to, and seeding of their home directories.

// Each test module uses a different subset of these helpers; the rest is not dead, just idle.
#![allow(dead_code)]

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
pub mod term;
