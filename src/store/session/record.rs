//! A session's record as `session.json` holds it: the session, its status, what it declared,
//! the dispatcher's bookkeeping, and one line of its event log. Types and their serde only;
//! the transitions are `state.rs`'s, reading and writing them `storage.rs`'s.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::attention::Attention;
use super::process::{ExitStatus, Kept, ProcessId};
use super::turn::{Child, Turn};
use super::usage::{Usage, UsageCursor, is_zero};
use super::vocab::LaunchedBy;

pub const SCHEMA: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    #[default]
    Starting,
    Working,
    Idle,
    NeedsAttention,
    Exited,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Starting => "starting",
            Status::Working => "working",
            Status::Idle => "idle",
            Status::NeedsAttention => "needs_attention",
            Status::Exited => "exited",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeclaredState {
    Done,
    Parked,
    Asking,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Declared {
    pub state: DeclaredState,
    pub note: String,
    pub at: String,
    /// Members this spex does not know (a newer spex wrote them): kept, and written back.
    #[serde(flatten)]
    pub other: serde_json::Map<String, Value>,
}

/// Bookkeeping the dispatcher keeps per session (once-per-session policies).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flags {
    /// Spec files already named to the agent in this session.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub specs_announced: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub spec_first_done: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stop_gate_asked: bool,
    /// Tool calls whose command failed, as the harness's server reported them before the
    /// call's hook came (call id, exit code); the hook takes its entry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_calls: Vec<(String, i64)>,
    /// The last tool calls the hooks reported complete, so a failure reported after its hook
    /// is told apart from one still to come.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub completed_calls: Vec<String>,
    /// How many attentions the session has opened (the next one's id is `a<n+1>`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attentions: u64,
    /// Context for the agent that its harness could not take with the hook it was for (a
    /// tool call's start, where a harness reads none): given with the next hook that can.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_context: Vec<String>,
    /// Members this spex does not know (a newer spex wrote them): kept, and written back.
    #[serde(flatten)]
    pub other: serde_json::Map<String, Value>,
}

/// How many tool calls `Flags` remembers.
pub const CALLS_KEPT: usize = 16;

impl Flags {
    fn remember(list: &mut Vec<String>, id: &str) {
        if list.len() >= CALLS_KEPT {
            list.remove(0);
        }
        list.push(id.to_owned());
    }

    /// The hook of tool call `call_id` came: its exit code when the server reported a failure
    /// first, and the call remembered as completed.
    pub fn take_failure(&mut self, call_id: &str) -> Option<i64> {
        Self::remember(&mut self.completed_calls, call_id);
        let at = self.failed_calls.iter().position(|(id, _)| id == call_id)?;
        Some(self.failed_calls.remove(at).1)
    }

    /// The server reports call `call_id` failed: `false` when its hook already came (the
    /// caller then says so in an event of its own), else kept for the hook.
    pub fn note_failure(&mut self, call_id: &str, code: i64) -> bool {
        if self.completed_calls.iter().any(|c| c == call_id) {
            return false;
        }
        if self.failed_calls.len() >= CALLS_KEPT {
            self.failed_calls.remove(0);
        }
        self.failed_calls.push((call_id.to_owned(), code));
        true
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub schema: u32,
    pub id: String,
    pub harness: String,
    pub harness_session_id: Option<String>,
    pub project: PathBuf,
    pub tree: PathBuf,
    pub branch: Option<String>,
    /// The commit the checkout's HEAD named when the record was made (at launch, or at the
    /// first hook of a session spex did not launch): what `spex diff` compares against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_commit: Option<String>,
    /// `spex` or `self`.
    pub launched_by: LaunchedBy,
    pub status: Status,
    /// When the current state (status and turn state) began.
    #[serde(default)]
    pub since: Option<String>,
    /// What set the current state: `hook <Event>`, the harness's own files, a liveness check.
    #[serde(default)]
    pub source: Option<String>,
    /// Why, when the state was concluded from evidence rather than reported by a hook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Why the session exited: `session end`, `process gone`, `server gone`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_reason: Option<String>,
    pub attention: Option<Attention>,
    pub turn: Option<Turn>,
    pub declared: Option<Declared>,
    /// Repo-relative paths edited in this session.
    pub touched: Vec<String>,
    pub headline: Option<String>,
    /// The short id the `ID` column shows, unique in the project's store (see `claim_handle`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle: Option<String>,
    /// The name a person gave the session (`launch --name`, `spex rename`), unique among the
    /// project's live sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The harness process, recorded when first seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<Kept<ProcessId>>,
    /// The machine's boot id (`/proc/sys/kernel/random/boot_id`) while the session ran,
    /// recorded at launch or by the first reader that saw it live: a live record of another
    /// boot was stopped with the machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// The harness's own log of the session (from the hook payloads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<PathBuf>,
    /// The last state the harness's own evidence reported (opaque to the store).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<String>,
    /// Whether a client (a terminal UI) is attached to the process holding the session:
    /// `false` when the harness's server keeps the session loaded with nobody attached (its
    /// TUI was killed), `null` when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attended: Option<bool>,
    pub created_at: String,
    pub updated_at: String,
    /// Last event sequence number written to `events.jsonl`.
    #[serde(default)]
    pub seq: u64,
    #[serde(default)]
    pub flags: Flags,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<Kept<ExitStatus>>,
    /// The sub-agents it started, the most recent [`CHILDREN_KEPT`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Child>,
    /// The model usage of the session's own requests, all turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// How far the readers have read the harness's log for usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_cursor: Option<UsageCursor>,
    /// Members this spex does not know (a newer spex wrote them): kept, and written back.
    #[serde(flatten)]
    pub other: serde_json::Map<String, Value>,
}

/// How many sub-agents a record keeps (the oldest that ended go first).
pub const CHILDREN_KEPT: usize = 32;

impl Session {
    /// The harness process, when recorded.
    pub fn process_id(&self) -> Option<ProcessId> {
        self.process.as_ref().map(|p| p.known)
    }

    /// Records the harness process; what a newer spex kept beside it stays while it is the
    /// same process.
    pub fn set_process(&mut self, p: Option<ProcessId>) {
        if self.process_id() != p {
            self.process = p.map(Into::into);
        }
    }

    /// How the harness process ended, when known.
    pub fn exited_with(&self) -> Option<ExitStatus> {
        self.exit_status.as_ref().map(|e| e.known)
    }

    /// What people read for this session: its handle (the full id until it has one).
    pub fn label(&self) -> &str {
        self.handle.as_deref().unwrap_or(&self.id)
    }

    /// Whether the checkout the session works in is gone (a removed worktree): the harness may
    /// still run there, but its hooks, which start in that folder, no longer can.
    pub fn tree_gone(&self) -> bool {
        !self.tree.as_os_str().is_empty() && !self.tree.exists()
    }

    /// A new record in state `starting`.
    pub fn new(
        id: &str,
        harness: &str,
        harness_session_id: Option<String>,
        tree: &crate::repo::Tree,
        launched_by: LaunchedBy,
        now: &str,
    ) -> Session {
        let (branch, base_commit) = tree.branch_and_commit();
        Session {
            schema: SCHEMA,
            id: id.to_owned(),
            harness: harness.to_owned(),
            harness_session_id,
            project: tree.main.clone(),
            tree: tree.root.clone(),
            branch,
            base_commit,
            launched_by,
            status: Status::Starting,
            created_at: now.to_owned(),
            updated_at: now.to_owned(),
            flags: Flags::default(),
            ..Session::default()
        }
    }
}

/// One event line of `events.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub seq: u64,
    pub time: String,
    pub kind: String,
    /// The hook (or command) that produced it.
    pub source: String,
    #[serde(flatten)]
    pub fields: serde_json::Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_reported_before_or_after_its_hook_is_told_apart() {
        let mut f = Flags::default();
        // The server first: kept for the hook, which takes it once.
        assert!(f.note_failure("c1", 3));
        assert_eq!(f.take_failure("c1"), Some(3));
        assert_eq!(f.take_failure("c1"), None);
        // The hook first: the failure comes too late to be the hook's, and says so.
        assert_eq!(f.take_failure("c2"), None);
        assert!(!f.note_failure("c2", 1));
        // Bounded: the oldest calls are forgotten.
        for i in 0..CALLS_KEPT + 4 {
            f.take_failure(&format!("x{i}"));
            f.note_failure(&format!("y{i}"), 1);
        }
        assert_eq!(f.completed_calls.len(), CALLS_KEPT);
        assert_eq!(f.failed_calls.len(), CALLS_KEPT);
        assert!(f.note_failure("x0", 1), "x0 was forgotten");
    }
}
