//! The provider rate limits each harness last reported, per user: `$SPEX_HOME/limits.json`
//! (0600). Written by whoever hears a harness report its windows (a server's notification, a
//! status-line call); read by `spex limits`, `sessions`, `show`, the board and the notifier.
//! It holds what a harness said, never an estimate: a harness with no entry is unknown.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

/// One rate-limit window as the harness reported it.
#[expect(
    clippy::struct_field_names,
    reason = "`window_minutes` is the length's name in the providers' own words"
)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// The harness's own name for the window (`primary`, `secondary`, `five_hour`, ...).
    pub name: String,
    /// How much of the window is used, in percent (100 or more: the limit is reached).
    pub used_percent: f64,
    /// The window's length, when the harness says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_minutes: Option<u64>,
    /// When the window resets (RFC 3339), when the harness says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<String>,
}

impl Window {
    /// Whether the window's limit is reached.
    pub fn reached(&self) -> bool {
        self.used_percent >= 100.0
    }

    /// A person's name for the window: its length (`5h`, `7d`), else the harness's name.
    pub fn label(&self) -> String {
        match self.window_minutes {
            Some(m) if m > 0 && m % 1440 == 0 => format!("{}d", m / 1440),
            Some(m) if m > 0 && m % 60 == 0 => format!("{}h", m / 60),
            Some(m) if m > 0 => format!("{m}m"),
            _ => self.name.clone(),
        }
    }
}

/// What one harness last reported about its account's limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    pub windows: Vec<Window>,
    /// When the harness reported it (RFC 3339).
    pub observed_at: String,
    /// Where it was read: `codex app-server account/rateLimits/updated`, ...
    pub source: String,
}

impl Reading {
    /// The reset of the reached window that resets last (all of them must reset before a
    /// turn can run again), `None` when no window is reached or none says when.
    pub fn reached_until(&self) -> Option<&str> {
        self.windows
            .iter()
            .filter(|w| w.reached())
            .filter_map(|w| w.resets_at.as_deref())
            .max_by_key(|t| super::parse_time(t))
    }

    /// Whether a reached window is still in force at `now` (its reset has not passed; a
    /// reached window with no reset time stays reached until a newer reading).
    pub fn reached_at(&self, now: SystemTime) -> bool {
        self.windows.iter().any(|w| {
            w.reached()
                && w.resets_at
                    .as_deref()
                    .and_then(super::parse_time)
                    .is_none_or(|t| t > now)
        })
    }
}

/// What `limits.json` holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    pub schema: u32,
    /// By harness id.
    pub harnesses: BTreeMap<String, Reading>,
}

pub const SCHEMA: u32 = 1;

pub fn file(spex_home: &Path) -> PathBuf {
    spex_home.join("limits.json")
}

/// What was last recorded; a missing file or one of another shape is empty (unknown).
pub fn read(spex_home: &Path) -> Limits {
    fs_err::read(file(spex_home))
        .ok()
        .and_then(|b| serde_json::from_slice::<Limits>(&b).ok())
        .filter(|l| l.schema == SCHEMA)
        .unwrap_or_default()
}

/// Records `reading` for `harness` unless a newer one is recorded (atomically, under a lock,
/// the file private). Returns the reading it replaced, `None` when there was none; `Err` of the
/// reading kept when the recorded one is newer.
pub fn record(
    spex_home: &Path,
    harness: &str,
    reading: Reading,
) -> std::io::Result<Result<Option<Reading>, Reading>> {
    crate::fsutil::create_private_dir_all(spex_home)?;
    let lock = spex_home.join("limits.lock");
    super::lock::with(&lock, || {
        let mut all = read(spex_home);
        all.schema = SCHEMA;
        let newer = |r: &Reading| super::parse_time(&r.observed_at);
        if let Some(kept) = all.harnesses.get(harness)
            && newer(kept) > newer(&reading)
        {
            return Ok(Err(kept.clone()));
        }
        let was = all.harnesses.insert(harness.to_owned(), reading);
        crate::fsutil::write_private(&file(spex_home), &super::json_bytes(&all))?;
        Ok(Ok(was))
    })?
}

/// The windows of `now` whose used percent rose to or past one of `thresholds` since `was`
/// (a window that reset and filled again crosses again): `(window, threshold)`, the highest
/// threshold crossed per window.
pub fn crossed<'a>(
    was: Option<&[Window]>,
    now: &'a [Window],
    thresholds: &[u8],
) -> Vec<(&'a Window, u8)> {
    now.iter()
        .filter_map(|w| {
            let before = was
                .and_then(|ws| ws.iter().find(|o| o.name == w.name))
                // A window that reset since starts from nothing again.
                .filter(|o| o.resets_at == w.resets_at)
                .map_or(0.0, |o| o.used_percent);
            thresholds
                .iter()
                .filter(|t| before < f64::from(**t) && w.used_percent >= f64::from(**t))
                .max()
                .map(|t| (w, *t))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(name: &str, used: f64, resets_at: &str) -> Window {
        Window {
            name: name.into(),
            used_percent: used,
            window_minutes: Some(300),
            resets_at: Some(resets_at.into()),
        }
    }

    fn reading(at: &str, windows: Vec<Window>) -> Reading {
        Reading {
            windows,
            observed_at: at.into(),
            source: "test".into(),
        }
    }

    #[test]
    fn record_keeps_the_newest_reading_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("spex");
        assert!(read(&home).harnesses.is_empty());
        let old = reading(
            "2026-11-27T10:00:00.000Z",
            vec![window("primary", 10.0, "2026-11-27T12:00:00Z")],
        );
        let new = reading(
            "2026-11-27T11:00:00.000Z",
            vec![window("primary", 20.0, "2026-11-27T12:00:00Z")],
        );
        assert_eq!(record(&home, "h1", new.clone()).unwrap(), Ok(None));
        assert_eq!(record(&home, "h1", old).unwrap(), Err(new.clone()));
        assert_eq!(read(&home).harnesses["h1"], new);
        let mode = fs_err::metadata(file(&home)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        fs_err::write(file(&home), "{not json").unwrap();
        assert!(read(&home).harnesses.is_empty());
    }

    #[test]
    fn a_threshold_is_crossed_once_per_window_fill() {
        let reset = "2026-11-27T12:00:00Z";
        let was = reading("t", vec![window("primary", 70.0, reset)]);
        let now = reading(
            "t",
            vec![
                window("primary", 85.0, reset),
                window("secondary", 5.0, reset),
            ],
        );
        let crossed_now = crossed(Some(&was.windows), &now.windows, &[50, 80]);
        assert_eq!(crossed_now.len(), 1);
        assert_eq!(
            (crossed_now[0].0.name.as_str(), crossed_now[0].1),
            ("primary", 80)
        );
        assert!(
            crossed(Some(&now.windows), &now.windows, &[80]).is_empty(),
            "no second time"
        );
        let refilled = reading("t", vec![window("primary", 90.0, "2026-11-27T17:00:00Z")]);
        assert_eq!(
            crossed(Some(&now.windows), &refilled.windows, &[80]).len(),
            1,
            "a new window"
        );
    }

    #[test]
    fn a_reached_window_says_until_when() {
        let r = reading(
            "t",
            vec![
                window("primary", 100.0, "2026-11-27T12:00:00Z"),
                window("secondary", 30.0, "2026-12-01T00:00:00Z"),
            ],
        );
        assert_eq!(r.reached_until(), Some("2026-11-27T12:00:00Z"));
        let at = |t: &str| humantime::parse_rfc3339(t).unwrap();
        assert!(r.reached_at(at("2026-11-27T11:00:00Z")));
        assert!(!r.reached_at(at("2026-11-27T13:00:00Z")));
        assert_eq!(window("secondary", 1.0, "x").label(), "5h");
    }
}
