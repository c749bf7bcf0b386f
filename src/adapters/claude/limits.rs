//! Claude Code's rate limits (docs/harnesses/facts/claude.md, section 8): 2.1.197 reads its
//! provider's `anthropic-ratelimit-unified-*` headers only for a subscription login, and then
//! passes `rate_limits` (`five_hour`, `seven_day`) to the status-line command; with an API key
//! the field is absent (the `context_window` it does pass is not a rate limit). Claude keeps no
//! file spex could read them from: what a status-line call carried is recorded in the store as
//! it arrives.

use std::path::Path;

use serde_json::{Value, json};

use crate::env::Env;
use crate::seam::edit::owned::Owned;
use crate::seam::limits::LimitsEvidence;
use crate::store::limits::{Reading, Window};

/// The settings key of the status line, in the tree's `.claude/settings.json`.
pub const KEY: &str = "statusLine";

pub struct ClaudeLimits;

impl LimitsEvidence for ClaudeLimits {
    fn read(&self, _env: &Env) -> Option<Reading> {
        None
    }

    fn unknown_because(&self) -> &'static str {
        "Claude Code passes rate limits to its status line only for a subscription login; \
         none arrived (an API key has none)"
    }

    fn status_line(&self, spex: &str) -> Option<Value> {
        Some(json!({ "type": "command", "command": format!("{spex} statusline claude") }))
    }

    fn status_line_reading(&self, payload: &Value) -> Option<Reading> {
        from_status_line(payload)
    }

    fn chained_status_line(&self, env: &Env, owned: &Owned, root: &Path) -> Option<String> {
        let settings = super::home::settings_file(root);
        // spex replaced only the person's `statusLine.command` (or, written before, the whole
        // member).
        let replaced = owned.json.get(&settings).and_then(|j| {
            j.replaced.iter().find_map(|(k, v)| match k.as_slice() {
                [key, command] if key == KEY && command == "command" => {
                    Some(json!({ "command": v }))
                }
                [key] if key == KEY => Some(v.clone()),
                _ => None,
            })
        });
        // Claude's layers below the project's shared settings: the user's own file.
        let user = || {
            let dir = env
                .path_var(super::home::CONFIG_DIR_VAR)
                .unwrap_or_else(|| env.home_or_root().join(".claude"));
            let bytes = fs_err::read(dir.join("settings.json")).ok()?;
            serde_json::from_slice::<Value>(&bytes)
                .ok()?
                .get(KEY)
                .cloned()
        };
        let command = replaced.or_else(user)?;
        let command = command.get("command")?.as_str()?.trim().to_owned();
        // Never spex's own (a user file that copied it would call itself forever).
        (!command.is_empty() && !command.contains(" statusline claude")).then_some(command)
    }
}

/// The reading of a status-line payload's `rate_limits` (`{five_hour: {used_percentage,
/// resets_at}, seven_day: ...}`, `used_percentage` the header's fraction × 100, `resets_at` in
/// Unix seconds: section 8 of the facts), heard now; `None` when the payload has none.
fn from_status_line(payload: &Value) -> Option<Reading> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The `rate_limits` the real 2.1.197 passed its status line for the headers
    /// `5h-utilization: 0.23`, `7d-utilization: 0.415` (facts, section 8).
    #[test]
    fn the_status_line_input_claude_sends_reads_as_two_windows() {
        let payload = json!({"session_id": "4d2ae62b-1d95-4a53-aa42-384bbc15e6cc",
            "context_window": {"used_percentage": 0, "remaining_percentage": 100},
            "rate_limits": {"five_hour": {"used_percentage": 23, "resets_at": 1_795_807_696_u64},
                "seven_day": {"used_percentage": 41.5, "resets_at": 1_795_890_496_u64}}});
        let r = from_status_line(&payload).unwrap();
        let got: Vec<(&str, f64, Option<u64>, Option<&str>)> = r
            .windows
            .iter()
            .map(|w| {
                (
                    w.name.as_str(),
                    w.used_percent,
                    w.window_minutes,
                    w.resets_at.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("five_hour", 23.0, Some(300), Some("2026-11-27T19:28:16Z")),
                (
                    "seven_day",
                    41.5,
                    Some(10_080),
                    Some("2026-11-28T18:28:16Z")
                ),
            ]
        );
        // An API key's input: a context window, no rate limits.
        assert!(from_status_line(&json!({"context_window": {"used_percentage": 3}})).is_none());
    }
}
