//! Gemini CLI's rate limits: 0.61.0 reports quota only for a Google login, and nothing spex can
//! read for an API key (docs/harnesses/facts/remote-and-notify.md, "Rate limits"): always unknown here, never
//! a guess.

use std::path::Path;

use crate::env::Env;
use crate::seam::limits::LimitsEvidence;
use crate::store::limits::Reading;

pub struct GeminiLimits;

impl LimitsEvidence for GeminiLimits {
    fn status_line(&self, _spex: &str) -> Option<serde_json::Value> {
        // Its status line runs no command of the user's.
        None
    }

    fn status_line_reading(&self, _payload: &serde_json::Value) -> Option<Reading> {
        None
    }

    fn chained_status_line(
        &self,
        _env: &Env,
        _owned: &crate::seam::edit::owned::Owned,
        _root: &Path,
    ) -> Option<String> {
        None
    }

    fn read(&self, _env: &Env) -> Option<Reading> {
        None
    }

    fn unknown_because(&self) -> &'static str {
        "Gemini CLI reports quota only for a Google login, and nothing spex can read"
    }
}
