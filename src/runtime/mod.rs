//! Talking to running harnesses: the Codex app-server client. Nothing here is reachable from
//! `spex dispatch`.

pub mod codex_rpc;
pub mod codex_trust;
