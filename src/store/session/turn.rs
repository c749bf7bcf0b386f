//! A session's turn and its sub-agents as the record holds them: the turn's terminal state,
//! why it failed, its budget, and each child with its own state. Types only: `state.rs` moves
//! them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::usage::Usage;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnState {
    Running,
    Completed,
    /// The model wrote useful text, then the turn failed: the text is kept apart
    /// (`Turn::partial`), never shown as the answer.
    PartialFailed,
    Failed,
    Interrupted,
    TimedOut,
}

/// Why a turn failed, from a small documented set (README "Turn outcomes"); the adapter reads
/// it from the harness's evidence, so readers and scripts can act on it without parsing text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The model API refused or broke the request (bad request, overloaded, server error).
    ModelError,
    RateLimit,
    /// Credentials, organisation or billing.
    Authentication,
    ToolFailure,
    HookBlock,
    /// The harness process went away mid-turn.
    ProcessGone,
    /// The harness's server went away mid-turn.
    ServerGone,
    /// The harness gave no kind spex knows.
    Unknown,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::ModelError => "model_error",
            ErrorKind::RateLimit => "rate_limit",
            ErrorKind::Authentication => "authentication",
            ErrorKind::ToolFailure => "tool_failure",
            ErrorKind::HookBlock => "hook_block",
            ErrorKind::ProcessGone => "process_gone",
            ErrorKind::ServerGone => "server_gone",
            ErrorKind::Unknown => "unknown",
        }
    }

    /// What a person can do about it.
    pub fn next(self) -> &'static str {
        match self {
            ErrorKind::ModelError => {
                "send the prompt again (`spex deliver`); if it fails again, change the prompt or the model"
            }
            ErrorKind::RateLimit => "wait for the rate limit to reset, then send the prompt again",
            ErrorKind::Authentication => {
                "log the harness in again (or fix its API key or billing), then send the prompt again"
            }
            ErrorKind::ToolFailure => {
                "read the failed tool call in `spex show`, fix its cause, then send the prompt again"
            }
            ErrorKind::HookBlock => {
                "read the hook's reason in `spex show`; change the request or the hook"
            }
            ErrorKind::ProcessGone => "`spex resume` the session",
            ErrorKind::ServerGone => "`spex resume` the session (its server is started again)",
            ErrorKind::Unknown => "read the error in `spex show`, then send the prompt again",
        }
    }
}

/// How a turn failed, as the adapter decoded it from the harness's evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The harness's own error text.
    pub error: String,
    pub kind: ErrorKind,
    /// Useful assistant text written before the failure (the turn is then `partial_failed`).
    pub partial: Option<String>,
    /// When the harness wrote the first of that text, where it says: text written before the
    /// turn began is an earlier turn's answer, never this turn's partial text.
    pub partial_at: Option<String>,
}

impl Failure {
    pub fn new(error: impl Into<String>, kind: ErrorKind) -> Failure {
        Failure {
            error: error.into(),
            kind,
            partial: None,
            partial_at: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    pub id: Option<String>,
    pub state: TurnState,
    pub prompt: Option<String>,
    pub started_at: String,
    pub ended_at: Option<String>,
    /// What the harness reported about the turn while it runs (e.g. a failed model request
    /// it is retrying), or the error it failed with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// When the last attempt failed, while no new attempt has started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt_failed_at: Option<String>,
    /// A failed turn's kind (`failed`, `partial_failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<ErrorKind>,
    /// What a person can do about a failed turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    /// A `partial_failed` turn's assistant text, written before the failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<String>,
    /// Tool calls started and not yet ended (call id, tool): the turn's ending closes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_calls: Vec<(String, String)>,
    /// When the harness said the turn is over while sub-agents it started still ran: it
    /// completes when the last of them ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<String>,
    /// The model usage of the turn's own requests (its sub-agents' are theirs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// A reader looked in the harness's log for the text the failed turn wrote first.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub log_read: bool,
    /// The last evidence of progress recorded (a hook; the host's screen and the server's
    /// notifications are recorded when they end a stall), judged against `stallTimeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_at: Option<String>,
    /// When the running turn was marked stalled (`turn.stalled`); cleared by progress
    /// (`turn.resumed`) and by its ending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalled_at: Option<String>,
    /// Who interrupted an `interrupted` turn: `terminal`, `spex interrupt`, `denial`, `exit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// An interrupt on its way and who asked for it, so the evidence that ends the turn
    /// names who did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupting: Option<String>,
    /// When that interrupt went out: the turn's end is taken for its doing only within
    /// [`INTERRUPT_SETTLE`] of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupting_at: Option<String>,
    /// A `timed_out` turn's budget, how long it ran, and what spex did about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Timeout>,
    /// Members this spex does not know (a newer spex wrote them): kept, and written back.
    #[serde(flatten)]
    pub other: serde_json::Map<String, Value>,
}

impl Default for Turn {
    fn default() -> Turn {
        Turn {
            id: None,
            state: TurnState::Running,
            prompt: None,
            started_at: String::new(),
            ended_at: None,
            note: None,
            attempt_failed_at: None,
            error_kind: None,
            next: None,
            partial: None,
            open_calls: Vec::new(),
            progress_at: None,
            stalled_at: None,
            by: None,
            interrupting: None,
            interrupting_at: None,
            timeout: None,
            stopped_at: None,
            usage: None,
            log_read: false,
            other: serde_json::Map::new(),
        }
    }
}

/// A turn past its budget. Fields in alphabetical order (`sessions --json` sorts keys).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeout {
    /// `mark` or `interrupt` (`onTimeout`): what spex does about it (`interrupt` only where
    /// it hosts the session).
    pub action: String,
    /// The turn budget (`turnTimeout`).
    pub budget_ms: u64,
    /// How long the turn had run when it was judged.
    pub elapsed_ms: u64,
    /// When spex sent the session its interrupt (`onTimeout: interrupt`, through its host or
    /// its server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupt_sent_at: Option<String>,
}

/// How long after an interrupt went out (a key typed at the terminal, `spex interrupt`) the
/// harness's report that the turn ended is taken for that interrupt's doing: a harness whose
/// turn-end hook also fires on a cancel (Gemini CLI's `AfterAgent`) reports it within
/// moments; a turn that ends later went on past the key (the key closed a menu, or came too
/// late) and ends as the harness says.
pub const INTERRUPT_SETTLE: std::time::Duration = std::time::Duration::from_secs(10);

impl TurnState {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnState::Running => "running",
            TurnState::Completed => "completed",
            TurnState::PartialFailed => "partial_failed",
            TurnState::Failed => "failed",
            TurnState::Interrupted => "interrupted",
            TurnState::TimedOut => "timed_out",
        }
    }
}

/// How a sub-agent ended (or that it still runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildState {
    Running,
    Completed,
    Failed,
    Interrupted,
    TimedOut,
}

impl ChildState {
    pub fn as_str(self) -> &'static str {
        match self {
            ChildState::Running => "running",
            ChildState::Completed => "completed",
            ChildState::Failed => "failed",
            ChildState::Interrupted => "interrupted",
            ChildState::TimedOut => "timed_out",
        }
    }
}

/// A sub-agent the session started: a child of the turn that started it, with its own
/// terminal state. Fields in alphabetical order (`sessions --json` sorts keys).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Child {
    /// The harness's name for the kind of agent (`general-purpose`, `default`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_type: Option<String>,
    /// When its last model request failed, while no new one has started (a harness that
    /// retries says no more than that).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt_failed_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// Why it failed, in the harness's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The harness's id of the sub-agent (`agent_id`).
    pub id: String,
    /// Its tool calls started and not yet ended (call id, tool): its ending closes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_calls: Vec<(String, String)>,
    pub started_at: String,
    pub state: ChildState,
    /// Its last message, cut to one line, where the harness gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The parent's turn that started it (as the harness names turns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// Its model usage, where the harness reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Members this spex does not know (a newer spex wrote them): kept, and written back.
    #[serde(flatten)]
    pub other: serde_json::Map<String, Value>,
}
