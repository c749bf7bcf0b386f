//! Codex's rate limits (docs/harnesses/facts/remote-and-notify.md, "Rate limits"): Codex 0.169.0 reads its
//! provider's `x-codex-{primary,secondary}-*` headers; its app-server sends them to every
//! client as `account/rateLimits/updated` (camelCase: `usedPercent`, `windowDurationMins`,
//! `resetsAt` in Unix seconds), and its rollout log keeps them in `token_count` events
//! (snake case: `used_percent`, `window_minutes`, `resets_at`), for sessions spex did not
//! start. `account/rateLimits/read` asks the account backend instead, which an API key
//! cannot: spex never calls it.
//!
//! The notification names no thread. The app-server sends it from a thread's `TokenCount`
//! event, right after that thread's `thread/tokenUsage/updated` (`handle_token_count_event` in
//! codex-rs/app-server `bespoke_event_handling.rs`, 0.169.0), after the response completed; a
//! request refused before its thread had any usage (a 429 on its first request) sends it alone,
//! then the turn ends (docs/harnesses/facts/remote-and-notify.md). [`LimitsOwner`] gives each
//! reading to that thread.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::env::Env;
use crate::seam::limits::LimitsEvidence;
use crate::seam::session_server::ServerEvent;
use crate::store::limits::{Reading, Window};

pub struct CodexLimits;

/// The source named on a reading from the server's notification.
pub const FROM_SERVER: &str = "codex app-server account/rateLimits/updated";
const FROM_ROLLOUT: &str = "codex rollout token_count";

impl LimitsEvidence for CodexLimits {
    fn read(&self, env: &Env) -> Option<Reading> {
        newest_rollout_reading(&super::home::codex_home(env).join("sessions"))
    }

    fn unknown_because(&self) -> &'static str {
        "Codex has reported no rate limits yet (it reads them from its provider's answers: \
         run a turn)"
    }
}

/// Which thread an `account/rateLimits/updated` belongs to, on one app-server connection's
/// notifications in order.
#[derive(Debug, Default)]
pub struct LimitsOwner {
    /// The thread of the notification just before, when it was `thread/tokenUsage/updated`.
    usage_of: Option<String>,
    /// A reading that came alone (a request refused before its thread had usage): owned by the
    /// turn that ends next (that refused turn), unless a reading after a usage replaces it.
    pending: Option<Reading>,
}

impl LimitsOwner {
    /// Notification `method` (about `thread`, with `params`) arrived: a reading whose thread
    /// is now known goes to `sink` as [`ServerEvent::RateLimits`].
    pub fn heard(
        &mut self,
        method: &str,
        thread: Option<&str>,
        params: &Value,
        sink: &mut dyn FnMut(ServerEvent),
    ) {
        let after_usage_of = self.usage_of.take();
        match method {
            "thread/tokenUsage/updated" => self.usage_of = thread.map(str::to_owned),
            "account/rateLimits/updated" => {
                let Some(reading) = from_notification(params) else {
                    return;
                };
                match after_usage_of {
                    Some(thread) => {
                        self.pending = None;
                        sink(ServerEvent::RateLimits { thread, reading });
                    }
                    None => self.pending = Some(reading),
                }
            }
            "turn/completed" => {
                if let Some(thread) = thread
                    && let Some(reading) = self.pending.take()
                {
                    sink(ServerEvent::RateLimits {
                        thread: thread.to_owned(),
                        reading,
                    });
                }
            }
            _ => {}
        }
    }
}

/// One window of either spelling; `None` when it has no used percent.
fn window(name: &str, w: &Value) -> Option<Window> {
    let used = w
        .get("usedPercent")
        .or_else(|| w.get("used_percent"))?
        .as_f64()?;
    let minutes = w
        .get("windowDurationMins")
        .or_else(|| w.get("window_minutes"))
        .and_then(Value::as_u64);
    let resets_at = w
        .get("resetsAt")
        .or_else(|| w.get("resets_at"))
        .and_then(Value::as_u64)
        .map(|secs| {
            let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
            humantime::format_rfc3339_seconds(t).to_string()
        });
    Some(Window {
        name: name.to_owned(),
        used_percent: used,
        window_minutes: minutes,
        resets_at,
    })
}

/// The windows of a rate-limit snapshot (`{primary, secondary, ...}` in either spelling);
/// `None` when it names none.
fn reading(snapshot: &Value, observed_at: String, source: &str) -> Option<Reading> {
    let windows: Vec<Window> = ["primary", "secondary"]
        .iter()
        .filter_map(|name| window(name, snapshot.get(*name)?))
        .collect();
    (!windows.is_empty()).then(|| Reading {
        windows,
        observed_at,
        source: source.to_owned(),
    })
}

/// The reading of an `account/rateLimits/updated` notification's params, heard now.
pub fn from_notification(params: &Value) -> Option<Reading> {
    reading(
        &params["rateLimits"],
        crate::store::now_rfc3339(),
        FROM_SERVER,
    )
}

/// The newest `token_count` event with rate limits in one rollout log.
fn last_in_log(text: &str) -> Option<Reading> {
    text.lines().rev().find_map(|line| {
        if !line.contains("\"token_count\"") || !line.contains("rate_limits") {
            return None;
        }
        let v: Value = serde_json::from_str(line).ok()?;
        let payload = &v["payload"];
        if payload["type"] != "token_count" {
            return None;
        }
        let at = v["timestamp"].as_str()?.to_owned();
        reading(&payload["rate_limits"], at, FROM_ROLLOUT)
    })
}

/// The rollout logs under `sessions/YYYY/MM/DD/`, newest day first (the folder names sort
/// by date), at most `days` days of them.
fn recent_logs(sessions: &Path, days: usize) -> Vec<PathBuf> {
    let sorted_dirs = |dir: &Path| -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = fs_err::read_dir(dir)
            .map(|it| it.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        out.sort();
        out.reverse();
        out
    };
    let mut logs = Vec::new();
    let mut seen_days = 0;
    'out: for year in sorted_dirs(sessions) {
        for month in sorted_dirs(&year) {
            for day in sorted_dirs(&month) {
                if seen_days == days {
                    break 'out;
                }
                seen_days += 1;
                logs.extend(
                    sorted_dirs(&day)
                        .into_iter()
                        .filter(|p| p.extension().is_some_and(|e| e == "jsonl")),
                );
            }
        }
    }
    logs
}

/// The rollout logs read at most, newest written first, and how much of each one's end: a
/// `token_count` event follows every model answer, so the newest is near the end; `sessions`
/// shows limits on every call and must not read whole logs.
const LOGS: usize = 8;
const TAIL: u64 = 256 * 1024;

/// The last `TAIL` bytes of `path`, from the first whole line in them.
fn tail(path: &Path) -> Option<String> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut f = fs_err::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(TAIL))).ok()?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Some(if len > TAIL {
        text.split_once('\n')
            .map_or_else(String::new, |(_, rest)| rest.to_owned())
    } else {
        text
    })
}

/// The newest reading the most recently written rollout logs of the last week hold (a
/// reading older than that says nothing about today's windows).
fn newest_rollout_reading(sessions: &Path) -> Option<Reading> {
    let mut logs: Vec<(std::time::SystemTime, PathBuf)> = recent_logs(sessions, 7)
        .into_iter()
        .filter_map(|p| Some((fs_err::metadata(&p).ok()?.modified().ok()?, p)))
        .collect();
    logs.sort_by_key(|l| std::cmp::Reverse(l.0));
    logs.iter()
        .take(LOGS)
        .filter_map(|(_, p)| last_in_log(&tail(p)?))
        .max_by_key(|r| crate::store::parse_time(&r.observed_at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_read_the_same_windows() {
        let n = serde_json::json!({"rateLimits": {
            "primary": {"usedPercent": 42, "windowDurationMins": 300, "resetsAt": 1_900_000_000},
            "secondary": {"usedPercent": 7.5, "windowDurationMins": 10080, "resetsAt": null}}});
        let r = from_notification(&n).unwrap();
        assert_eq!(r.windows.len(), 2);
        assert!((r.windows[0].used_percent - 42.0).abs() < f64::EPSILON);
        assert_eq!(
            r.windows[0].resets_at.as_deref(),
            Some("2030-03-17T17:46:40Z")
        );
        assert_eq!(r.windows[1].resets_at, None);
        let line = serde_json::json!({"timestamp": "2026-11-27T10:00:00.000Z", "type": "event_msg",
            "payload": {"type": "token_count", "info": null, "rate_limits": {
                "primary": {"used_percent": 42.0, "window_minutes": 300, "resets_at": 1_900_000_000}}}});
        let r2 = last_in_log(&format!("{line}\n{{\"type\":\"other\"}}\n")).unwrap();
        assert_eq!(r2.windows[0], r.windows[0]);
        assert!(from_notification(&serde_json::json!({"rateLimits": null})).is_none());
    }

    fn used(reading: &Reading) -> f64 {
        reading.windows[0].used_percent
    }

    /// Two threads' notifications as the app-server sends them: a reading after a thread's
    /// usage is that thread's, even when another thread spoke last before the usage; a lone
    /// reading is replaced by one after a usage, or owned by the turn that ends next.
    #[test]
    fn a_reading_goes_to_the_thread_whose_usage_it_follows() {
        let limits = |p: u32| {
            serde_json::json!({"rateLimits": {"primary": {"usedPercent": p,
                "windowDurationMins": 300, "resetsAt": 1_900_000_000}}})
        };
        let none = serde_json::json!({});
        let mut owner = LimitsOwner::default();
        let mut got: Vec<(String, f64)> = Vec::new();
        let mut feed = |owner: &mut LimitsOwner, method: &str, thread: Option<&str>, p: &Value| {
            owner.heard(method, thread, p, &mut |ev| {
                if let ServerEvent::RateLimits { thread, reading } = ev {
                    got.push((thread, used(&reading)));
                }
            });
        };
        // A lone reading, then the same after A's usage: A's, once.
        feed(&mut owner, "turn/started", Some("A"), &none);
        feed(&mut owner, "account/rateLimits/updated", None, &limits(10));
        feed(&mut owner, "item/completed", Some("B"), &none);
        feed(&mut owner, "thread/tokenUsage/updated", Some("A"), &none);
        feed(&mut owner, "account/rateLimits/updated", None, &limits(10));
        // B spoke last, but the usage before the reading is A's.
        feed(&mut owner, "turn/started", Some("B"), &none);
        feed(&mut owner, "thread/tokenUsage/updated", Some("A"), &none);
        feed(&mut owner, "account/rateLimits/updated", None, &limits(30));
        // A usage with a notification between is not the reading's.
        feed(&mut owner, "thread/tokenUsage/updated", Some("A"), &none);
        feed(&mut owner, "item/completed", Some("B"), &none);
        feed(&mut owner, "account/rateLimits/updated", None, &limits(40));
        // Refused on its first request: the turn that ends owns the lone reading.
        feed(&mut owner, "turn/completed", Some("B"), &none);
        feed(&mut owner, "turn/completed", Some("A"), &none);
        assert_eq!(
            got,
            vec![
                ("A".to_owned(), 10.0),
                ("A".to_owned(), 30.0),
                ("B".to_owned(), 40.0)
            ]
        );
    }
}
