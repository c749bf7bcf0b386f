//! The one test rig of the integration tests: the hermetic world the real `spex` runs in
//! (`world`), the real harness binaries, fakes of the model APIs they talk to, and seeding of
//! their home directories. A wait here fails on timeout unless its name says it may not find.

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
pub mod world;
