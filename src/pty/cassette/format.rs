//! The cassette format, version 1: the files a cassette is made of, its manifest, and the
//! errors reading or writing one reports. Shared by the recorder and the reader; knows neither.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::hint::Hint;

pub const VERSION: u32 = 1;
pub const STREAMS: [&str; 4] = [
    "input.jsonl",
    "output.jsonl",
    "frames.jsonl",
    "service-events.jsonl",
];
pub(super) const REQUIRED: [&str; 8] = [
    "manifest.json",
    "input.jsonl",
    "output.raw",
    "output.jsonl",
    "frames.jsonl",
    "service-events.jsonl",
    "final.json",
    "scrub-report.json",
];

#[derive(Debug, thiserror::Error)]
pub enum CassetteError {
    #[error("`{path}`: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file could not be read or written; the error names it (`fs_err`).
    #[error(transparent)]
    File(#[from] std::io::Error),
    #[error("`{0}` is not a cassette: `{1}` is missing")]
    Missing(PathBuf, &'static str),
    #[error("`{path}` is cassette version {found}; this spex reads version {VERSION}")]
    Version { path: PathBuf, found: u32 },
    #[error(
        "`{path}` was derived with terminal emulator {recorded}; this spex replays with {EMULATOR} {EMULATOR_VERSION}"
    )]
    Emulator { path: PathBuf, recorded: String },
    #[error("`{path}` line {line}: {message}")]
    Bad {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

impl Hint for CassetteError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            CassetteError::Missing(..) => {
                "a cassette is the folder spex recorded, with all of its files".to_owned()
            }
            CassetteError::Version { .. } => "replay it with a newer spex".to_owned(),
            CassetteError::Emulator { .. } => {
                "replay it with the spex that recorded it, or record it again with this one"
                    .to_owned()
            }
            CassetteError::Io { .. } | CassetteError::File(_) | CassetteError::Bad { .. } => {
                return None;
            }
        })
    }
}

pub(super) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CassetteError + '_ {
    move |source| CassetteError::Io {
        path: path.to_owned(),
        source,
    }
}

/// The fixed facts of a recording, written to `manifest.json` at the start and completed at
/// the end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u32,
    pub id: String,
    /// `sha256:<hex>` of `output.raw`, filled in when the recording ends.
    pub content_digest: Option<String>,
    pub harness: Value,
    pub command: Value,
    pub terminal: Value,
    pub timing: Value,
    pub provenance: Value,
    /// `full` when the recording saw the session from its start to its end, `partial`
    /// otherwise (`capture_reason` says why).
    pub capture: String,
    // What follows came after the first cassettes: optional on read, so they stay readable.
    /// Why the capture is `partial`: started mid-session, stopped before the end, the launch
    /// failed at a screen spex cannot answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_reason: Option<String>,
    /// How `t_ms` was taken: `{"source": "monotonic", "resolution_ms", "zero": "first
    /// record", "wall_time": "scrubbed"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<Value>,
    /// How `spex replay` plays it with no flag: `real-time` or `collapsed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_default: Option<String>,
    /// The session's permission mode, as the harness was started with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<String>,
    /// The project's git state when the recording started: `{"commit", "dirty"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<Value>,
}

/// The terminal emulator the frames were derived with and a replay re-derives them with:
/// `vt100` at this version (a test checks it against `Cargo.lock`). Versions that differ in
/// major or, before 1.0, minor parse differently and are refused.
pub const EMULATOR: &str = "vt100";
pub const EMULATOR_VERSION: &str = "0.16.2";

/// Whether an emulator `recorded` (a version) draws as this one does: the same major, and
/// before 1.0 the same minor.
pub fn same_emulator(recorded: &str) -> bool {
    let key = |v: &str| -> Vec<String> {
        let parts: Vec<String> = v.split('.').map(str::to_owned).collect();
        let take = if parts.first().is_some_and(|m| m == "0") {
            2
        } else {
            1
        };
        parts.into_iter().take(take).collect()
    };
    key(recorded) == key(EMULATOR_VERSION)
}
