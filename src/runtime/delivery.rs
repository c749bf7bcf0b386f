//! What a delivery reports: how the prompt went in, whether the harness confirmed it, and the
//! stages it reached.

use std::time::Instant;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Typed into an idle prompt.
    Inject,
    /// Typed while a turn runs: the harness queues it until the turn ends.
    Queued,
    /// Added to the running turn by the harness's server.
    Steer,
    /// Started a new turn through the harness's server.
    Start,
}

#[derive(Debug, Serialize)]
pub struct Delivery {
    pub delivered: bool,
    pub mode: Mode,
    /// The turn the prompt started, once the harness reported it.
    pub turn_id: Option<String>,
    pub confirmed: bool,
    pub elapsed_ms: u64,
    /// Control characters in the text (a paste's end, keys) were made visible instead of
    /// typed, so the prompt arrived as one paste (see `seam::terminal::neutralize_paste`).
    pub sanitized: bool,
    /// The stages reached so far, in order: `accepted` (the harness took the text), `started`
    /// (a turn runs with it), `done` (that turn ended).
    pub stages: Vec<StageAt>,
}

/// A delivery stage reached, and when.
#[derive(Debug, Clone, Serialize)]
pub struct StageAt {
    pub stage: &'static str,
    pub at: String,
    /// Since the delivery began.
    pub elapsed_ms: u64,
}

impl StageAt {
    pub fn now(stage: &'static str, since: Instant) -> StageAt {
        StageAt {
            stage,
            at: crate::store::now_rfc3339(),
            elapsed_ms: elapsed_ms(since),
        }
    }
}

pub fn elapsed_ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}
