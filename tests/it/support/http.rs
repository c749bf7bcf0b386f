//! The minimal HTTP/1.1 server under the fake model APIs, also the tests' webhook and ntfy
//! stand-ins: `src/adapters/common/fake_http.rs`, compiled into this rig by
//! `tests/it/adapters/mod.rs`.

pub use crate::adapters::common::fake_http::*;
