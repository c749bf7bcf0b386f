//! The provider rate limits of each harness as spex knows them now: the newest of what the
//! store recorded as a harness reported it and what the harness's own files hold, or unknown
//! with the adapter's reason. Read by `spex limits`, `sessions`, `show`, the board and the
//! notifier; nothing here estimates.

use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::adapters;
use crate::env::Env;
use crate::store::limits::{Reading, Window};

/// One harness's limits now.
#[derive(Debug, Clone, Serialize)]
pub struct HarnessLimits {
    pub harness: &'static str,
    /// Whether any window was reported.
    pub known: bool,
    /// Whether a window's limit is reached now (its reset not yet passed).
    pub reached: bool,
    #[serde(skip_serializing_if = "Option::is_none", flatten)]
    pub reading: Option<Reading>,
    /// Why nothing is known (when `known` is false).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<&'static str>,
}

/// Every harness spex knows, in the registry's order: the newest of what the store holds and
/// what the harness's own files say (a newer reading from its files is recorded, so a reader
/// of the store alone, `sessions`, sees it next).
pub fn current(env: &Env) -> Vec<HarnessLimits> {
    view(env, true)
}

/// What the store holds alone: one small file, no harness's logs read (for `sessions`, which
/// must stay fast).
pub fn stored(env: &Env) -> Vec<HarnessLimits> {
    view(env, false)
}

fn view(env: &Env, read_own: bool) -> Vec<HarnessLimits> {
    let home = env.spex_home();
    let stored = crate::store::limits::read(&home);
    let now = SystemTime::now();
    adapters::all()
        .iter()
        .map(|h| {
            let facet = h.limits();
            let own = facet.filter(|_| read_own).and_then(|f| f.read(env));
            let kept = stored.harnesses.get(h.id()).cloned();
            let time = |r: &Reading| crate::store::parse_time(&r.observed_at);
            let reading = match (own, kept) {
                (Some(a), b) if b.as_ref().is_none_or(|b| time(&a) > time(b)) => {
                    // Kept for the readers of the store alone; a failure only costs them that.
                    let _ = crate::store::limits::record(&home, h.id(), a.clone());
                    Some(a)
                }
                (_, b) => b,
            };
            HarnessLimits {
                harness: h.id(),
                known: reading.is_some(),
                reached: reading.as_ref().is_some_and(|r| r.reached_at(now)),
                why: reading
                    .is_none()
                    .then(|| facet.map_or("spex reads no limits for it", |f| f.unknown_because())),
                reading,
            }
        })
        .collect()
}

/// A harness reported `reading` (its server, its status line): recorded for the user and,
/// when its windows changed, said on the record of the session that brought it (`session`,
/// asked only then) as `limits.updated` (`harness`, `windows`, `was`), which the notifier
/// reads for its thresholds. Failures are logged: the caller goes on either way.
pub fn heard(
    env: &Env,
    store: &crate::store::ProjectStore,
    harness: &str,
    reading: Reading,
    source: &str,
    session: impl FnOnce() -> Option<String>,
) {
    let windows = reading.windows.clone();
    let was = match crate::store::limits::record(&env.spex_home(), harness, reading) {
        Ok(Ok(was)) => was,
        Ok(Err(_newer)) => return,
        Err(e) => {
            crate::log::log!("error: recording rate limits: {e}");
            return;
        }
    };
    if was.as_ref().is_some_and(|w| w.windows == windows) {
        return;
    }
    let Some(id) = session() else {
        return;
    };
    let r = store.update(&id, |cur| {
        let Some(s) = cur else {
            return (None, Vec::new(), ());
        };
        let event = crate::store::session::new_event(
            "limits.updated",
            source,
            serde_json::json!({ "harness": harness, "windows": windows,
                "was": was.map(|w| w.windows) }),
        );
        (Some(s), vec![event], ())
    });
    if let Err(e) = r {
        crate::log::log!("error: updating session {id}: {}", crate::hint::spelled(&e));
    }
}

/// `in 1h 12m`, `in 3d 4h`, `now` for a time passed.
pub fn until(at: SystemTime, now: SystemTime) -> String {
    let Ok(left) = at.duration_since(now) else {
        return "now".to_owned();
    };
    let mins = left.as_secs().div_ceil(60);
    let (d, h, m) = (mins / 1440, mins % 1440 / 60, mins % 60);
    match (d, h, m) {
        (0, 0, m) => format!("in {m}m"),
        (0, h, 0) => format!("in {h}h"),
        (0, h, m) => format!("in {h}h {m}m"),
        (d, 0, _) => format!("in {d}d"),
        (d, h, _) => format!("in {d}d {h}h"),
    }
}

/// `5h 42% (resets in 1h 12m)`.
pub fn window_text(w: &Window, now: SystemTime) -> String {
    let reset = w
        .resets_at
        .as_deref()
        .and_then(crate::store::parse_time)
        .map(|t| {
            if t <= now {
                // Reported before the reset: the numbers are the old window's.
                " (has reset since)".to_owned()
            } else {
                format!(" (resets {})", until(t, now))
            }
        })
        .unwrap_or_default();
    let used = if w.used_percent.fract() == 0.0 {
        format!("{:.0}%", w.used_percent)
    } else {
        format!("{:.1}%", w.used_percent)
    };
    format!("{} {used}{reset}", w.label())
}

/// One line for a harness: `codex: 5h 42% (resets in 1h 12m), 7d 7% (...)`, `limit reached`
/// first when one is.
pub fn line(l: &HarnessLimits, now: SystemTime) -> String {
    let Some(r) = &l.reading else {
        return format!("{}: unknown", l.harness);
    };
    let windows: Vec<String> = r.windows.iter().map(|w| window_text(w, now)).collect();
    let reached = if l.reached { "limit reached, " } else { "" };
    format!("{}: {reached}{}", l.harness, windows.join(", "))
}

/// When a turn of `harness` that failed on a limit may run again: the reset of the reached
/// window that resets last, as reported; `None` when no reached window says when.
pub fn reset_after_failure(env: &Env, harness: &str) -> Option<String> {
    // The store alone: a limit reached in a turn arrives by the server or the status line
    // (Codex's log records no reading for the refused request).
    stored(env)
        .into_iter()
        .find(|l| l.harness == harness)?
        .reading?
        .reached_until()
        .map(str::to_owned)
}

/// When the limit session `s`'s failed turn ran into resets, as its harness reported it: only
/// for a turn that failed on a rate limit, and only when a reached window says when.
pub fn failed_turn_reset(env: &Env, s: &crate::store::session::Session) -> Option<String> {
    let t = s.turn.as_ref()?;
    if t.error_kind != Some(crate::store::session::ErrorKind::RateLimit) {
        return None;
    }
    reset_after_failure(env, &s.harness)
}

/// How old a reading is, for a person (`2m ago`).
pub fn age(observed_at: &str, now: SystemTime) -> String {
    let Some(t) = crate::store::parse_time(observed_at) else {
        return observed_at.to_owned();
    };
    let secs = now.duration_since(t).unwrap_or(Duration::ZERO).as_secs();
    match secs {
        0..60 => "just now".to_owned(),
        60..3600 => format!("{}m ago", secs / 60),
        3600..86_400 => format!("{}h ago", secs / 3600),
        _ => format!("{}d ago", secs / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_left_read_as_a_person_says_them() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let at = |s| now + Duration::from_secs(s);
        assert_eq!(until(at(30), now), "in 1m");
        assert_eq!(until(at(3600), now), "in 1h");
        assert_eq!(until(at(3600 + 12 * 60), now), "in 1h 12m");
        assert_eq!(until(at(4 * 86_400 + 3 * 3600), now), "in 4d 3h");
        assert_eq!(until(now - Duration::from_secs(5), now), "now");
        let w = Window {
            name: "primary".into(),
            used_percent: 42.0,
            window_minutes: Some(300),
            resets_at: Some(humantime::format_rfc3339_seconds(at(3600)).to_string()),
        };
        assert_eq!(window_text(&w, now), "5h 42% (resets in 1h)");
        assert_eq!(
            window_text(&w, at(3601)),
            "5h 42% (has reset since)",
            "an old reading"
        );
    }
}
