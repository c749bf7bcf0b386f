//! Gemini CLI's rate limits: 0.61.0 reports quota only for a Google login, and nothing spex can
//! read for an API key (docs/harnesses/facts/remote-and-notify.md, "Rate limits"): always unknown here, never
//! a guess.

use crate::env::Env;
use crate::seam::limits::LimitsEvidence;
use crate::store::limits::Reading;

pub struct GeminiLimits;

impl LimitsEvidence for GeminiLimits {
    fn read(&self, _env: &Env) -> Option<Reading> {
        None
    }

    fn unknown_because(&self) -> &'static str {
        "Gemini CLI reports quota only for a Google login, and nothing spex can read"
    }
}
