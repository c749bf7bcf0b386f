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
    /// `full` when every input byte went through the recorder's session, `partial` otherwise.
    pub capture: String,
}
