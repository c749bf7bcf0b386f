//! Claude Code's rate limits (docs/harnesses/facts/remote-and-notify.md, "Rate limits"): 2.1.197 reads its
//! provider's `anthropic-ratelimit-unified-*` headers only for a subscription login, and then
//! passes `rate_limits` to the status-line command; with an API key the field is absent (the
//! `context_window` it does pass is not a rate limit). Claude keeps no file spex could read
//! them from: what a status-line call carried is recorded in the store as it arrives.

use serde_json::Value;

use crate::env::Env;
use crate::seam::limits::LimitsEvidence;
use crate::store::limits::{Reading, Window};

pub struct ClaudeLimits;

impl LimitsEvidence for ClaudeLimits {
    fn read(&self, _env: &Env) -> Option<Reading> {
        None
    }

    fn unknown_because(&self) -> &'static str {
        "Claude Code passes rate limits to its status line only for a subscription login; \
         none arrived (an API key has none)"
    }
}

/// The reading of a status-line payload's `rate_limits` (`{five_hour: {used_percentage,
/// resets_at}, seven_day: ...}`, `resets_at` in Unix seconds), heard now; `None` when the
/// payload has none.
pub fn from_status_line(payload: &Value) -> Option<Reading> {
    let limits = payload.get("rate_limits")?.as_object()?;
    let windows: Vec<Window> = limits
        .iter()
        .filter_map(|(name, w)| {
            let used = w
                .get("used_percentage")
                .or_else(|| w.get("used_percent"))?
                .as_f64()?;
            let minutes = match name.as_str() {
                "five_hour" => Some(300),
                "seven_day" | "seven_day_opus" | "seven_day_sonnet" => Some(10_080),
                _ => None,
            };
            let resets_at = w.get("resets_at").and_then(Value::as_u64).map(|secs| {
                let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
                humantime::format_rfc3339_seconds(t).to_string()
            });
            Some(Window {
                name: name.clone(),
                used_percent: used,
                window_minutes: minutes,
                resets_at,
            })
        })
        .collect();
    (!windows.is_empty()).then(|| Reading {
        windows,
        observed_at: crate::store::now_rfc3339(),
        source: "claude status line rate_limits".to_owned(),
    })
}
