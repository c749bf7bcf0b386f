//! The harness process a session runs in, and how it ended, as the record holds them. Types
//! only: the readers that watch the process live elsewhere.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The harness process a session runs in: its pid and its start time (clock ticks since boot,
/// `/proc/<pid>/stat` field 22), so a reused pid is never mistaken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProcessId {
    pub pid: u32,
    pub start: u64,
}

/// How the harness process ended (known when spex hosted it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitStatus {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

/// A record member of a plain (`Copy`) type, with the members a newer spex wrote beside its
/// own: kept, and written back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kept<T> {
    #[serde(flatten)]
    pub known: T,
    #[serde(flatten)]
    pub other: serde_json::Map<String, Value>,
}

impl<T> From<T> for Kept<T> {
    fn from(known: T) -> Self {
        Kept {
            known,
            other: serde_json::Map::new(),
        }
    }
}
