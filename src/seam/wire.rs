//! The hook-wire facet: how a harness's hook payloads read as spex's events, and how spex's
//! answer is written back in the harness's hook output protocol.

use serde_json::Value;

use crate::seam::event::{Answer, HookEvent, Reply};

pub trait HookWire: Sync {
    /// Decodes one hook payload (tolerantly: unknown events and fields are skipped).
    fn decode(&self, event: &str, payload: &Value) -> HookEvent;
    /// Encodes spex's answer in the harness's hook output protocol.
    fn encode(&self, event: &str, answer: &Answer) -> Reply;
    /// Whether the harness gives the agent the context of spex's answer to `event`. Context
    /// for an event that cannot carry it is kept on the record and given with the session's
    /// next event that can.
    fn takes_context(&self, event: &str) -> bool;
    /// Whether `SPEX_SESSION_ID` in a hook's environment names the session. False where hooks
    /// run in a process shared by many sessions (a server).
    fn hook_env_names_session(&self) -> bool;
}
