//! Session records: `sessions/<id>/session.json` (the current state, schema-versioned) and
//! `sessions/<id>/events.jsonl` (append-only), plus the alias index that maps a harness's own
//! session id to a spex id in O(1) (one file per alias). Every read-modify-write of a record
//! holds the session's lock.

use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ProjectStore;
use crate::config::Budgets;
use crate::fsutil;

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

/// What a session waits on a person for: a first-class object with an id (`a1`, `a2`, ...:
/// short, stable, unique within the session), what it asks, the choices the harness offers
/// (read from the harness's own evidence by its adapter, never invented) and how it can be
/// answered from here. It closes with an `attention.closed` event saying how it was answered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attention {
    /// `permission`, `question`, `turn_failed`, ...
    pub reason: String,
    pub text: String,
    /// When it opened.
    pub since: String,
    /// Its id within the session (`None` in records written before attentions had one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `permission`, `question`, `plan` or `other`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The choices of a permission or plan dialog.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<Choice>,
    /// The questions of a question dialog, each with its options.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub questions: Vec<Question>,
    /// The tool that asks, and the harness's id of that call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The turn it was asked in (as the harness names it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// How it can be answered here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<Via>,
    /// An answer being applied (`spex answer` sent it and waits for the harness to confirm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answering: Option<Answering>,
    /// The hook process that waits for an answer to it (`via` is then `hook`), while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook: Option<ProcessId>,
    /// Members this spex does not know (a newer spex wrote them): kept, and written back.
    #[serde(flatten)]
    pub other: serde_json::Map<String, Value>,
}

/// One choice a dialog offers. Fields in alphabetical order (`sessions --json` sorts keys).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    /// What `spex answer` takes: `allow`, `allow-session`, `deny`, `cancel`, ...
    pub id: String,
    /// What the harness calls it.
    pub label: String,
    /// It takes a message for the agent (`--message`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub message: bool,
}

/// One question of a question dialog. Fields in alphabetical order.
#[expect(
    clippy::struct_field_names,
    reason = "`question` is what the harnesses call the text"
)]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    /// Free text is accepted besides the options.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub free_text: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// The harness's id of the question, where it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub multi_select: bool,
    pub options: Vec<String>,
    pub question: String,
}

/// How an attention can be answered here: `keys` (into the terminal spex hosts), `server`
/// (as a client of the harness's server), `hook` (a waiting hook), or `terminal only`, with
/// why.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Via {
    pub how: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// An answer on its way. Fields in alphabetical order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answering {
    pub at: String,
    pub by: String,
    pub choice: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Attention {
    /// A new attention of `reason` asking `text`, opened `now`.
    pub fn new(reason: impl Into<String>, text: impl Into<String>, now: &str) -> Attention {
        Attention {
            reason: reason.into(),
            text: text.into(),
            since: now.to_owned(),
            ..Attention::default()
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

/// Model usage as the harness recorded it (never estimated; no cost). `input_tokens` counts
/// every input token, those read from or written to a cache included; `cached_input_tokens`
/// and `cache_write_tokens` are parts of it, `reasoning_tokens` a part of `output_tokens`.
/// Fields in alphabetical order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    #[serde(default)]
    pub cached_input_tokens: u64,
    #[serde(default)]
    pub input_tokens: u64,
    /// The model of the last request counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
    /// How many model requests it counts (0: the harness did not say).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub requests: u64,
    /// Members this spex does not know (a newer spex wrote them): kept, and written back.
    #[serde(flatten)]
    pub other: serde_json::Map<String, Value>,
}

impl Usage {
    /// Adds `other`'s counts; its model, when it names one, becomes the model.
    pub fn add(&mut self, other: &Usage) {
        self.cache_write_tokens += other.cache_write_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
        self.requests += other.requests;
        if other.model.is_some() {
            self.model.clone_from(&other.model);
        }
    }

    /// Takes `other`'s counts back out (a request counted before it was complete).
    pub fn sub(&mut self, other: &Usage) {
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_sub(other.cache_write_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_sub(other.cached_input_tokens);
        self.input_tokens = self.input_tokens.saturating_sub(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_sub(other.output_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_sub(other.reasoning_tokens);
        self.requests = self.requests.saturating_sub(other.requests);
    }

    /// `12.3k in (4.0k cached) / 1.2k out`: what a person reads.
    pub fn brief(&self) -> String {
        let mut out = format!("{} in", count(self.input_tokens));
        if self.cached_input_tokens > 0 {
            out.push_str(&format!(" ({} cached)", count(self.cached_input_tokens)));
        }
        out.push_str(&format!(" / {} out", count(self.output_tokens)));
        out
    }
}

/// A token count for people: `950`, `12.3k`, `4.1M`.
pub fn count(n: u64) -> String {
    #[expect(clippy::cast_precision_loss, reason = "one decimal is shown")]
    let f = n as f64;
    if n < 1000 {
        n.to_string()
    } else if n < 1_000_000 {
        format!("{:.1}k", f / 1e3)
    } else {
        format!("{:.1}M", f / 1e6)
    }
}

/// How far a reader has read the harness's own log for usage (where usage comes from there):
/// the byte offset, and the last message counted with what it counted (a message the log
/// writes in parts is counted once, with its last part's numbers). Fields in alphabetical order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageCursor {
    /// Read after the session exited: nothing more comes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub done: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<(String, Usage)>,
    pub offset: u64,
    /// Members this spex does not know (a newer spex wrote them): kept, and written back.
    #[serde(flatten)]
    pub other: serde_json::Map<String, Value>,
}

/// The harness process a session runs in: its pid and its start time (clock ticks since boot,
/// `/proc/<pid>/stat` field 22), so a reused pid is never mistaken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_zero(n: &u64) -> bool {
    *n == 0
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
    /// `spex` or `self`.
    pub launched_by: String,
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
        launched_by: &str,
        now: &str,
    ) -> Session {
        Session {
            schema: SCHEMA,
            id: id.to_owned(),
            harness: harness.to_owned(),
            harness_session_id,
            project: tree.main.clone(),
            tree: tree.root.clone(),
            branch: tree.branch(),
            launched_by: launched_by.to_owned(),
            status: Status::Starting,
            created_at: now.to_owned(),
            updated_at: now.to_owned(),
            flags: Flags::default(),
            ..Session::default()
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("no session matches `{0}`\nhint: list sessions with `spex sessions --all`")]
    NotFound(String),
    #[error(
        "`{prefix}` matches several sessions: {matches}\nhint: give more characters of the handle or id (`spex sessions --all` lists them)"
    )]
    Ambiguous { prefix: String, matches: String },
    /// An id, handle or name that cannot be one (read from an argument or a store file).
    #[error(
        "{from}`{}` is not a session id, handle or name: those are 1 to {ID_MAX} letters, digits, `-` or `_`\nhint: `spex sessions --all` lists the sessions",
        crate::text::visible(.id)
    )]
    InvalidId { id: String, from: String },
    #[error("{0}")]
    Name(String),
    #[error("`{path}`: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "`{path}` is not a valid session record: {message}\nhint: the store may be from a newer spex; it was left unchanged"
    )]
    Corrupt { path: PathBuf, message: String },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_owned(),
        source,
    }
}

/// One event to append: (kind, source, fields).
pub type NewEvent = (String, String, serde_json::Map<String, Value>);

/// An event with its fields (null fields dropped).
pub fn new_event(kind: &str, source: &str, fields: Value) -> NewEvent {
    let fields = match fields {
        Value::Object(m) => m.into_iter().filter(|(_, v)| !v.is_null()).collect(),
        _ => serde_json::Map::new(),
    };
    (kind.to_owned(), source.to_owned(), fields)
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Milliseconds from one time the store wrote to another (0 when either does not parse).
fn ms_between(from: &str, to: &str) -> u64 {
    match (super::parse_time(from), super::parse_time(to)) {
        (Some(a), Some(b)) => b.duration_since(a).map_or(0, ms),
        _ => 0,
    }
}

/// The state a session's `since` and `source` describe: its status and its turn's state.
pub type StateKey = (Status, Option<TurnState>);

/// The transitions every writer of a record shares (the hook handlers and the readers that
/// fold in evidence), so the event log keeps one grammar: every `turn.started` has exactly one
/// ending event, and attention is raised and cleared in pairs.
impl Session {
    pub fn state_key(&self) -> StateKey {
        (self.status, self.turn.as_ref().map(|t| t.state))
    }

    pub fn turn_running(&self) -> bool {
        self.turn
            .as_ref()
            .is_some_and(|t| t.state == TurnState::Running)
    }

    /// Ends the running turn as `state`: a `tool.interrupted` for each tool call still open
    /// (so every `tool.started` ends), then its ending event (`turn.<state>`, with `extra`
    /// fields); nothing when no turn runs (a finished turn keeps its state).
    pub fn end_turn(
        &mut self,
        state: TurnState,
        now: &str,
        source: &str,
        extra: Value,
    ) -> Vec<NewEvent> {
        let Some(turn) = self.turn.as_mut().filter(|t| t.state == TurnState::Running) else {
            return Vec::new();
        };
        let mut out: Vec<NewEvent> = std::mem::take(&mut turn.open_calls)
            .into_iter()
            .map(|(call, tool)| {
                new_event(
                    "tool.interrupted",
                    source,
                    serde_json::json!({ "call_id": call, "tool": tool, "turn_id": turn.id }),
                )
            })
            .collect();
        turn.state = state;
        turn.ended_at = Some(now.to_owned());
        turn.stopped_at = None;
        turn.stalled_at = None;
        let asked = turn.interrupting.take();
        let turn_id = turn.id.clone();
        let mut fields = serde_json::json!({ "turn_id": turn_id });
        if let (Some(f), Value::Object(extra)) = (fields.as_object_mut(), extra) {
            f.extend(extra.into_iter().filter(|(_, v)| !v.is_null()));
        }
        if state == TurnState::Interrupted {
            // Who asked for an interrupt on its way knows better than the evidence that saw
            // the turn end (an Esc key, an idle screen).
            if let Some(by) = asked {
                fields["by"] = by.into();
            }
            turn.by = fields["by"].as_str().map(str::to_owned);
        }
        if state != TurnState::Completed {
            // Its sub-agents do not outlive a turn that did not complete (a completed turn
            // waited for them, or was followed by a prompt while they work on); a turn past
            // its budget takes them past it too.
            let running: Vec<String> = self
                .children
                .iter()
                .filter(|c| c.state == ChildState::Running && c.turn_id == turn_id)
                .map(|c| c.id.clone())
                .collect();
            let (end, why) = if state == TurnState::TimedOut {
                (ChildState::TimedOut, "its turn timed out".to_owned())
            } else {
                (
                    ChildState::Interrupted,
                    format!("its turn ended {}", state.as_str()),
                )
            };
            for id in running {
                out.extend(self.end_child(&id, end, now, source, None, Some(&why)));
            }
        }
        let (total, failed, _) = self.turn_children();
        if total > 0 {
            fields["subagents"] = total.into();
            fields["subagents_failed"] = failed.into();
        }
        out.push(new_event(
            &format!("turn.{}", state.as_str()),
            source,
            fields,
        ));
        out
    }

    /// The current turn's sub-agents: how many it started, how many of them failed (or timed
    /// out) and how many still run.
    pub fn turn_children(&self) -> (usize, usize, usize) {
        let Some(turn) = &self.turn else {
            return (0, 0, 0);
        };
        let mine = self.children.iter().filter(|c| c.turn_id == turn.id);
        let (mut total, mut failed, mut running) = (0, 0, 0);
        for c in mine {
            total += 1;
            match c.state {
                ChildState::Failed | ChildState::TimedOut => failed += 1,
                ChildState::Running => running += 1,
                ChildState::Completed | ChildState::Interrupted => {}
            }
        }
        (total, failed, running)
    }

    /// How many of the session's sub-agents still run.
    pub fn running_children(&self) -> usize {
        self.children
            .iter()
            .filter(|c| c.state == ChildState::Running)
            .count()
    }

    /// The current turn's state, with what its sub-agents did where it started any:
    /// `completed, 1 of 3 sub-agents failed`, `running, 2 sub-agents running`.
    pub fn turn_phrase(&self) -> Option<String> {
        let t = self.turn.as_ref()?;
        Some(format!("{}{}", t.state.as_str(), self.children_phrase()))
    }

    /// What the current turn's sub-agents did, where it started any: `, 1 of 3 sub-agents
    /// failed`, `, 2 sub-agents running`, `, 2 sub-agents ended`; empty otherwise.
    pub fn children_phrase(&self) -> String {
        let mut out = String::new();
        let (total, failed, running) = self.turn_children();
        let plural = |n: usize| if n == 1 { "sub-agent" } else { "sub-agents" };
        if failed > 0 {
            out.push_str(&format!(", {failed} of {total} {} failed", plural(total)));
        }
        if running > 0 {
            out.push_str(&format!(", {running} {} running", plural(running)));
        }
        if failed == 0 && running == 0 && total > 0 {
            out.push_str(&format!(", {total} {} ended", plural(total)));
        }
        out
    }

    /// The harness says the turn is over: a running one ends `completed`, attention cleared
    /// and the session idle, unless sub-agents it started still run: then it waits for them
    /// (`stopped_at`) and nothing is recorded yet. Returns the events and whether the session
    /// is now done with the turn.
    pub fn complete_turn(&mut self, now: &str, source: &str) -> (Vec<NewEvent>, bool) {
        if self.turn_running() && self.turn_children().2 > 0 {
            if let Some(t) = self.turn.as_mut() {
                t.stopped_at.get_or_insert_with(|| now.to_owned());
            }
            return (Vec::new(), false);
        }
        // A turn that already ended (`timed_out` while the harness went on with it) adds no
        // second ending; the session is idle all the same.
        let mut out = self.end_turn(TurnState::Completed, now, source, Value::Null);
        out.extend(self.clear_attention(source));
        if self.status != Status::Exited {
            self.status = Status::Idle;
        }
        (out, true)
    }

    /// Sub-agent `id` started (within the running turn, or the last one): `subagent.started`.
    /// Nothing when it is already known.
    pub fn start_child(
        &mut self,
        id: &str,
        agent_type: Option<&str>,
        now: &str,
        source: &str,
    ) -> Vec<NewEvent> {
        if self.children.iter().any(|c| c.id == id) {
            return Vec::new();
        }
        if self.children.len() >= CHILDREN_KEPT {
            let at = self
                .children
                .iter()
                .position(|c| c.state != ChildState::Running)
                .unwrap_or(0);
            self.children.remove(at);
        }
        let turn_id = self.turn.as_ref().and_then(|t| t.id.clone());
        self.children.push(Child {
            agent_type: agent_type.filter(|t| !t.is_empty()).map(str::to_owned),
            attempt_failed_at: None,
            ended_at: None,
            error: None,
            id: id.to_owned(),
            open_calls: Vec::new(),
            started_at: now.to_owned(),
            state: ChildState::Running,
            summary: None,
            turn_id: turn_id.clone(),
            usage: None,
            other: serde_json::Map::new(),
        });
        vec![new_event(
            "subagent.started",
            source,
            serde_json::json!({ "agent_id": id, "agent_type": agent_type, "turn_id": turn_id }),
        )]
    }

    /// Sub-agent `id`, if it runs, ends as `state` (with its last message or its error): a
    /// `tool.interrupted` for each of its calls still open, then `subagent.<state>`. Nothing
    /// for a sub-agent that is not running (it ends once).
    pub fn end_child(
        &mut self,
        id: &str,
        state: ChildState,
        now: &str,
        source: &str,
        summary: Option<&str>,
        error: Option<&str>,
    ) -> Vec<NewEvent> {
        let Some(c) = self
            .children
            .iter_mut()
            .find(|c| c.id == id && c.state == ChildState::Running)
        else {
            return Vec::new();
        };
        let mut out: Vec<NewEvent> = std::mem::take(&mut c.open_calls)
            .into_iter()
            .map(|(call, tool)| {
                new_event(
                    "tool.interrupted",
                    source,
                    serde_json::json!({ "call_id": call, "tool": tool, "agent_id": id }),
                )
            })
            .collect();
        c.state = state;
        c.ended_at = Some(now.to_owned());
        c.attempt_failed_at = None;
        if let Some(text) = summary.map(one_line).filter(|t| !t.is_empty()) {
            c.summary = Some(text);
        }
        c.error = error.map(str::to_owned);
        let elapsed_ms = elapsed_ms(&c.started_at, now);
        out.push(new_event(
            &format!("subagent.{}", state.as_str()),
            source,
            serde_json::json!({ "agent_id": id, "agent_type": c.agent_type, "turn_id": c.turn_id,
                "summary": c.summary, "error": c.error, "elapsed_ms": elapsed_ms }),
        ));
        out
    }

    /// The running sub-agent `id`, if there is one.
    pub fn running_child(&mut self, id: &str) -> Option<&mut Child> {
        self.children
            .iter_mut()
            .find(|c| c.id == id && c.state == ChildState::Running)
    }

    /// The running turn failed: it ends `partial_failed` when the model had written text,
    /// else `failed`, with the error as its note, its kind and the next step; the failure
    /// becomes the session's attention (a person should look). Nothing when no turn runs.
    pub fn fail_turn(&mut self, failure: &Failure, now: &str, source: &str) -> Vec<NewEvent> {
        // Text from before the turn began is an earlier answer (Claude may fail a request before
        // it writes the turn's prompt into its transcript).
        let started = self
            .turn
            .as_ref()
            .and_then(|t| super::parse_time(&t.started_at));
        let earlier = match (
            failure.partial_at.as_deref().and_then(super::parse_time),
            started,
        ) {
            (Some(at), Some(started)) => at < started,
            _ => false,
        };
        let partial = failure
            .partial
            .as_deref()
            .map(str::trim)
            .filter(|p| !p.is_empty() && !earlier);
        let state = if partial.is_some() {
            TurnState::PartialFailed
        } else {
            TurnState::Failed
        };
        let next = failure.kind.next();
        let ended = self.end_turn(
            state,
            now,
            source,
            serde_json::json!({ "error": failure.error, "error_kind": failure.kind,
                "next": next, "partial": partial }),
        );
        if ended.is_empty() {
            return Vec::new();
        }
        if let Some(t) = self.turn.as_mut() {
            t.note = Some(failure.error.clone());
            t.error_kind = Some(failure.kind);
            t.next = Some(next.to_owned());
            t.partial = partial.map(str::to_owned);
        }
        let mut out: Vec<NewEvent> = self
            .close_attention(source, "unanswered")
            .into_iter()
            .collect();
        out.extend(ended);
        self.status = Status::Idle;
        let mut failed = Attention::new("turn_failed", failure.error.clone(), now);
        failed.kind = Some("other".into());
        failed.via = Some(Via {
            how: "terminal only".into(),
            why: Some(
                "a failed turn asks no question: a new prompt (`spex deliver`) answers it".into(),
            ),
        });
        out.extend(self.open_attention(failed, source));
        out
    }

    /// Opens attention `a` (closing any other first): it gets the session's next id, and the
    /// `attention.opened` event carries all of it.
    pub fn open_attention(&mut self, mut a: Attention, source: &str) -> Vec<NewEvent> {
        let mut out: Vec<NewEvent> = self
            .close_attention(source, "replaced")
            .into_iter()
            .collect();
        self.flags.attentions += 1;
        a.id = Some(format!("a{}", self.flags.attentions));
        a.kind.get_or_insert_with(|| match a.reason.as_str() {
            "permission" | "question" | "plan" => a.reason.clone(),
            _ => "other".into(),
        });
        let mut fields = match serde_json::to_value(&a) {
            Ok(Value::Object(m)) => m,
            _ => serde_json::Map::new(),
        };
        // The event names the attention by `attention`; `since` is the event's own time.
        // (`kind` is the event's own: the attention's is `attention_kind`.)
        if let Some(id) = fields.remove("id") {
            fields.insert("attention".into(), id);
        }
        if let Some(kind) = fields.remove("kind") {
            fields.insert("attention_kind".into(), kind);
        }
        fields.remove("since");
        out.push(("attention.opened".to_owned(), source.to_owned(), fields));
        self.attention = Some(a);
        out
    }

    /// Closes any attention as answered at the terminal (or by whatever spex's own answer
    /// was on its way): `attention.closed`, or nothing when there was none.
    pub fn clear_attention(&mut self, source: &str) -> Option<NewEvent> {
        self.close_attention(source, "terminal")
    }

    /// Closes any attention: `attention.closed` with its id and how it went (`how`: `terminal`,
    /// `unanswered`, `replaced`; an answer `spex answer` had sent takes precedence: `how` is
    /// then `spex answer`, with the choice and message).
    pub fn close_attention(&mut self, source: &str, how: &str) -> Option<NewEvent> {
        let a = self.attention.take()?;
        let (how, answer) = match &a.answering {
            Some(ans) => (ans.by.as_str(), Some(ans)),
            None => (how, None),
        };
        Some(new_event(
            "attention.closed",
            source,
            serde_json::json!({
                "attention": a.id,
                "reason": a.reason,
                "attention_kind": a.kind,
                "how": how,
                "choice": answer.map(|x| &x.choice),
                "message": answer.and_then(|x| x.message.as_ref()),
            }),
        ))
    }

    /// Evidence that the running turn makes progress (a hook, the screen, the server): noted
    /// in `progress_at`, and a stalled turn is working again (`turn.resumed`).
    pub fn note_progress(&mut self, now: &str, source: &str) -> Vec<NewEvent> {
        let Some(turn) = self.turn.as_mut().filter(|t| t.state == TurnState::Running) else {
            return Vec::new();
        };
        turn.progress_at = Some(now.to_owned());
        let Some(stalled) = turn.stalled_at.take() else {
            return Vec::new();
        };
        let quiet = ms_between(&stalled, now);
        vec![new_event(
            "turn.resumed",
            source,
            serde_json::json!({ "turn_id": turn.id, "stalled_at": stalled, "stalled_ms": quiet }),
        )]
    }

    /// The running turn's last evidence of progress: the newest of its start, the progress
    /// the record holds and `activity` (what the caller saw that the record does not hold).
    fn last_progress(&self, activity: Option<SystemTime>) -> Option<SystemTime> {
        let t = self
            .turn
            .as_ref()
            .filter(|t| t.state == TurnState::Running)?;
        [
            super::parse_time(&t.started_at),
            t.progress_at.as_deref().and_then(super::parse_time),
            activity,
        ]
        .into_iter()
        .flatten()
        .max()
    }

    /// When the budgets next have something to judge about this record: the end of the
    /// running turn's budget, or the moment it would have shown no progress for the stall
    /// budget; `None` when nothing runs or no budget is set.
    pub fn budget_deadline(&self, b: &Budgets, activity: Option<SystemTime>) -> Option<SystemTime> {
        let t = self
            .turn
            .as_ref()
            .filter(|t| t.state == TurnState::Running)?;
        let end = b
            .turn
            .and_then(|d| Some(super::parse_time(&t.started_at)? + d));
        let stall = b
            .stall
            .filter(|_| self.status == Status::Working && t.stalled_at.is_none())
            .and_then(|d| Some(self.last_progress(activity)? + d));
        [end, stall].into_iter().flatten().min()
    }

    /// Judges the running turn against the budgets at `now`, with `activity` the newest
    /// progress the caller saw that the record may not hold yet. Past the turn budget the turn
    /// ends `timed_out` (its one ending: later evidence of its end adds none), with the budget,
    /// the time it ran and what to do; `interrupt` says whether the caller will interrupt the
    /// session (`onTimeout: interrupt` and a transport it owns). A working turn with no
    /// progress for the stall budget is marked `turn.stalled` (not an ending); one that shows
    /// progress after that is `turn.resumed`.
    pub fn judge_budgets(
        &mut self,
        b: &Budgets,
        now: SystemTime,
        activity: Option<SystemTime>,
        interrupt: bool,
        source: &str,
    ) -> Vec<NewEvent> {
        let Some(t) = self.turn.as_ref().filter(|t| t.state == TurnState::Running) else {
            return Vec::new();
        };
        let stamp = humantime::format_rfc3339_millis(now).to_string();
        let elapsed = super::parse_time(&t.started_at)
            .and_then(|s| now.duration_since(s).ok())
            .unwrap_or_default();
        if let Some(budget) = b.turn.filter(|d| elapsed >= *d) {
            let action = if interrupt { "interrupt" } else { "mark" };
            let words = crate::config::duration_words(budget);
            let ran = crate::config::duration_words(elapsed);
            let next = if interrupt {
                "spex interrupts the session; send the next prompt (`spex deliver`), or raise `turnTimeout` in `spex.jsonc`".to_owned()
            } else {
                "the harness may still be working on it: `spex interrupt` stops it (where spex hosts the session), or raise `turnTimeout` in `spex.jsonc`".to_owned()
            };
            let timeout = Timeout {
                budget_ms: ms(budget),
                elapsed_ms: ms(elapsed),
                interrupt_sent_at: None,
                action: action.to_owned(),
            };
            let note = format!("ran past its turn budget of {words} ({ran})");
            let before = self.state_key();
            let out = self.end_turn(
                TurnState::TimedOut,
                &stamp,
                source,
                serde_json::json!({ "budget_ms": timeout.budget_ms, "elapsed_ms": timeout.elapsed_ms,
                    "budget": words, "on_timeout": action, "next": next }),
            );
            if let Some(t) = self.turn.as_mut() {
                t.note = Some(note.clone());
                t.next = Some(next);
                t.timeout = Some(timeout);
            }
            self.stamp(before, &stamp, source, Some(note));
            return out;
        }
        let last = self.last_progress(activity);
        let stalled = self.turn.as_ref().is_some_and(|t| t.stalled_at.is_some());
        // Progress the caller saw after the turn was marked stalled: it works again.
        let since_stall = self
            .turn
            .as_ref()
            .and_then(|t| t.stalled_at.as_deref())
            .and_then(super::parse_time);
        if stalled {
            if let (Some(a), Some(st)) = (activity, since_stall)
                && a > st
            {
                let at = humantime::format_rfc3339_millis(a).to_string();
                return self.note_progress(&at, source);
            }
            return Vec::new();
        }
        let Some(budget) = b.stall.filter(|_| self.status == Status::Working) else {
            return Vec::new();
        };
        let quiet = last
            .and_then(|l| now.duration_since(l).ok())
            .unwrap_or_default();
        if quiet < budget {
            return Vec::new();
        }
        let turn = self.turn.as_mut().expect("a running turn");
        turn.stalled_at = Some(stamp.clone());
        vec![new_event(
            "turn.stalled",
            source,
            serde_json::json!({ "turn_id": turn.id, "budget_ms": ms(budget),
                "budget": crate::config::duration_words(budget), "quiet_ms": ms(quiet),
                "last_progress": last.map(|l| humantime::format_rfc3339_millis(l).to_string()) }),
        )]
    }

    /// Records that the state changed since `before`: `since`, `source` and `why` describe the
    /// new one. Nothing changes when the state did not.
    pub fn stamp(&mut self, before: StateKey, now: &str, source: &str, why: Option<String>) {
        if self.state_key() != before || self.since.is_none() {
            self.since = Some(now.to_owned());
            self.source = Some(source.to_owned());
            self.why = why;
        }
    }

    /// A new harness process runs the session (it was resumed): forget the old one and what
    /// its evidence said, so the readers find the new one.
    pub fn forget_process(&mut self) {
        self.process = None;
        self.observed = None;
        self.attended = None;
        self.exit_status = None;
    }

    /// The session is over: a running turn is closed (`turn.interrupted`), attention that
    /// asked for a person is cleared (a failed turn's stays visible), `session.exited`.
    pub fn exit(&mut self, reason: &str, now: &str, source: &str) -> Vec<NewEvent> {
        let mut out: Vec<NewEvent> = Vec::new();
        out.extend(self.end_turn(
            TurnState::Interrupted,
            now,
            source,
            serde_json::json!({ "by": "exit" }),
        ));
        let running: Vec<String> = self
            .children
            .iter()
            .filter(|c| c.state == ChildState::Running)
            .map(|c| c.id.clone())
            .collect();
        for id in running {
            out.extend(self.end_child(
                &id,
                ChildState::Interrupted,
                now,
                source,
                None,
                Some("the session ended"),
            ));
        }
        if self
            .attention
            .as_ref()
            .is_some_and(|a| a.reason != "turn_failed")
        {
            out.extend(self.close_attention(source, "unanswered"));
        }
        self.status = Status::Exited;
        self.exit_reason = Some(reason.to_owned());
        out.push(new_event(
            "session.exited",
            source,
            serde_json::json!({ "reason": reason }),
        ));
        out
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

impl ProjectStore {
    pub fn sessions_dir(&self) -> PathBuf {
        self.dir.join("sessions")
    }

    pub fn session_dir(&self, id: &str) -> PathBuf {
        self.sessions_dir().join(id)
    }

    fn alias_file(&self, harness: &str, harness_id: &str) -> PathBuf {
        self.dir
            .join("aliases")
            .join(format!("{harness}-{}", sanitize(harness_id)))
    }

    /// The spex id a harness session id maps to.
    pub fn alias(&self, harness: &str, harness_id: &str) -> Option<String> {
        self.alias_entry(harness, harness_id).ok().flatten()
    }

    /// The spex id a harness session id maps to; an alias file that holds no valid id (a
    /// garbled or forged file) is an error, never a path.
    pub fn alias_entry(
        &self,
        harness: &str,
        harness_id: &str,
    ) -> Result<Option<String>, StoreError> {
        let path = self.alias_file(harness, harness_id);
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Ok(None);
        };
        let id = text.trim();
        if id.is_empty() {
            return Ok(None);
        }
        check_id(id, &format!("alias file `{}` holds", path.display()))?;
        Ok(Some(id.to_owned()))
    }

    pub fn set_alias(&self, harness: &str, harness_id: &str, id: &str) -> Result<(), StoreError> {
        let path = self.alias_file(harness, harness_id);
        fsutil::write_private(&path, id.as_bytes())
            .map_err(io(&path))
            .map(drop)
    }

    pub fn load(&self, id: &str) -> Result<Option<Session>, StoreError> {
        check_id(id, "session")?;
        let path = self.session_dir(id).join("session.json");
        match fsutil::read_opt(&path).map_err(io(&path))? {
            None => Ok(None),
            Some(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|e| StoreError::Corrupt {
                        path,
                        message: e.to_string(),
                    })
            }
        }
    }

    fn save(&self, s: &Session) -> Result<(), StoreError> {
        let path = self.session_dir(&s.id).join("session.json");
        fsutil::replace(&path, &super::json_bytes(s)).map_err(io(&path))
    }

    /// Read-modify-write of one session under its lock: `f` gets the current record (or
    /// `None`) and returns the record to store plus events to append (numbered here).
    pub fn update<R>(
        &self,
        id: &str,
        f: impl FnOnce(
            Option<Session>,
        ) -> (
            Option<Session>,
            Vec<(String, String, serde_json::Map<String, Value>)>,
            R,
        ),
    ) -> Result<R, StoreError> {
        check_id(id, "session")?;
        let dir = self.session_dir(id);
        let lock = dir.join("lock");
        super::lock::with(&lock, || -> Result<R, StoreError> {
            let current = self.load(id)?;
            let (next, events, out) = f(current);
            let Some(mut next) = next else { return Ok(out) };
            if !events.is_empty() {
                let path = dir.join("events.jsonl");
                let mut lines = String::new();
                for (kind, source, fields) in events {
                    next.seq += 1;
                    let ev = Event {
                        seq: next.seq,
                        time: next.updated_at.clone(),
                        kind,
                        source,
                        fields,
                    };
                    lines.push_str(&serde_json::to_string(&ev).expect("an event serializes"));
                    lines.push('\n');
                }
                // Events first: a crash between the two leaves the record one step behind
                // its log, never a record claiming events that were not written.
                let loose = fsutil::append_bounded(&path, lines.as_bytes(), self.event_log_bytes)
                    .map_err(io(&path))?;
                if loose {
                    // A store an older spex left readable by others: private from now on.
                    if let Some(home) = self.dir.parent().and_then(Path::parent) {
                        fsutil::tighten(home);
                    }
                }
            }
            self.save(&next)?;
            Ok(out)
        })
        .map_err(io(&lock))?
    }

    /// The last `n` events of a session (all when `n` is `None`).
    pub fn events(&self, id: &str, n: Option<usize>) -> Result<Vec<Event>, StoreError> {
        let path = self.session_dir(id).join("events.jsonl");
        let read = |path: &Path| match std::fs::read_to_string(path) {
            Ok(t) => Ok(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(e) => Err(io(path)(e)),
        };
        // The segment rotated out by the size bound comes first.
        let text = read(&fsutil::previous_segment(&path))? + &read(&path)?;
        let all: Vec<Event> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let skip = n.map_or(0, |n| all.len().saturating_sub(n));
        Ok(all.into_iter().skip(skip).collect())
    }

    /// The record of `id` and the events it has taken in. The log is written before the
    /// record, so a reader can see events the record does not hold yet; those wait.
    pub fn committed(&self, id: &str) -> Result<(Option<Session>, Vec<Event>), StoreError> {
        let mut events = self.events(id, None)?;
        let record = self.load(id)?;
        if let Some(r) = &record {
            events.retain(|e| e.seq <= r.seq);
        }
        Ok((record, events))
    }

    /// Every session id of the project.
    pub fn session_ids(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.sessions_dir()) else {
            return Vec::new();
        };
        let mut ids: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|id| is_valid_id(id))
            .collect();
        // Ids are unique: an unstable sort gives the same order, cheaper.
        ids.sort_unstable();
        ids
    }

    /// Every readable session record (one that `load` cannot read or parse is left out).
    /// `sessions --all` reads thousands: each is opened relative to the sessions folder (opened
    /// once) and read into one buffer they share (two fewer syscalls per record than `load`).
    pub fn sessions(&self) -> Vec<Session> {
        use rustix::fs::{Mode, OFlags};
        let Ok(dir) = rustix::fs::open(
            self.sessions_dir(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            return Vec::new();
        };
        let mut buf = Vec::new();
        self.session_ids()
            .iter()
            .filter_map(|id| {
                let n = fsutil::read_at(&dir, &format!("{id}/session.json"), &mut buf).ok()?;
                // Checked as UTF-8 once, whole: `from_slice` checks every string on its own,
                // which costs more than the rest of the parse's string handling.
                serde_json::from_str(std::str::from_utf8(&buf[..n]).ok()?).ok()
            })
            .collect()
    }

    fn handle_file(&self, handle: &str) -> PathBuf {
        self.dir.join("handles").join(sanitize(handle))
    }

    /// The short handle of session `id`: the shortest tail (4 characters or more) of its id
    /// that no other session of the project holds, claimed once in `handles/<handle>` (created
    /// exclusively, so two readers never hand one handle to two sessions) and kept for the
    /// session's life. The tail, not the head: time-ordered ids (`UUIDv7`) share their first
    /// characters for about a minute, and both v4 and v7 end in random bits.
    pub fn claim_handle(&self, id: &str) -> Result<String, StoreError> {
        let chars: Vec<char> = id
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect();
        let dir = self.dir.join("handles");
        fsutil::create_private_dir_all(&dir).map_err(io(&dir))?;
        for n in 4..=chars.len() {
            let handle: String = chars[chars.len() - n..].iter().collect();
            if handle != id
                && (self.session_dir(&handle).join("session.json").is_file()
                    || self.name_file(&handle).is_file())
            {
                // Another session's full id, which `resolve` puts first: as this session's
                // handle it would name the other one.
                continue;
            }
            let path = self.handle_file(&handle);
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(fsutil::PRIVATE_FILE)
                .open(&path)
            {
                Ok(mut f) => {
                    std::io::Write::write_all(&mut f, id.as_bytes()).map_err(io(&path))?;
                    return Ok(handle);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let owner = std::fs::read_to_string(&path).map_err(io(&path))?;
                    // An empty file is a claim being written right now by another reader.
                    if owner.trim() == id {
                        return Ok(handle);
                    }
                }
                Err(e) => return Err(io(&path)(e)),
            }
        }
        Ok(id.to_owned())
    }

    /// The session a handle or name file names, when that session's record exists.
    fn owner(&self, file: &Path) -> Option<String> {
        let owner = std::fs::read_to_string(file).ok()?;
        let owner = owner.trim();
        (is_valid_id(owner) && self.session_dir(owner).join("session.json").is_file())
            .then(|| owner.to_owned())
    }

    /// Resolves what a person typed for a session: its full id, its handle, its name, or a
    /// unique prefix of a handle or of an id, in that order. A full id comes first: a handle
    /// claimed before a session with that very id appeared must not hide it. Anything that
    /// cannot be an id (empty, a path) is refused before it comes near the file system.
    pub fn resolve(&self, arg: &str) -> Result<String, StoreError> {
        check_id(arg, "")?;
        if self.session_dir(arg).join("session.json").is_file() {
            return Ok(arg.to_owned());
        }
        if let Some(owner) = self.owner(&self.handle_file(arg)) {
            return Ok(owner);
        }
        if let Some(owner) = self.owner(&self.name_file(arg)) {
            return Ok(owner);
        }
        let mut matches: Vec<String> = self
            .session_ids()
            .into_iter()
            .filter(|id| id.starts_with(arg))
            .collect();
        if let Ok(entries) = std::fs::read_dir(self.dir.join("handles")) {
            for e in entries.filter_map(Result::ok) {
                if e.file_name().to_string_lossy().starts_with(arg)
                    && let Some(owner) = self.owner(&e.path())
                {
                    matches.push(owner);
                }
            }
        }
        matches.sort();
        matches.dedup();
        // A session no reader has listed yet has no handle: give every such session its
        // handle (as `spex sessions` would) and look again.
        if matches.is_empty() && self.claim_missing_handles() > 0 {
            return self.resolve(arg);
        }
        match matches.len() {
            0 => Err(StoreError::NotFound(crate::text::visible(arg))),
            1 => Ok(matches.into_iter().next().expect("one match")),
            _ => Err(StoreError::Ambiguous {
                prefix: arg.to_owned(),
                matches: matches
                    .iter()
                    .map(|id| self.label_of(id))
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// Claims the handle of every record that has none; how many it claimed.
    fn claim_missing_handles(&self) -> usize {
        self.sessions()
            .iter()
            .filter(|s| s.handle.is_none())
            .filter(|s| self.label_of(&s.id) != s.id)
            .count()
    }

    /// What people read for session `id`: its handle, claimed now if it has none yet (and
    /// saved in its record), else the full id. Every message that names a session uses it.
    pub fn label_of(&self, id: &str) -> String {
        match self.load(id) {
            Ok(Some(s)) if s.handle.is_some() => s.label().to_owned(),
            Ok(Some(_)) => self.claim_handle(id).map_or_else(
                |_| id.to_owned(),
                |handle| {
                    let _ = self.update(id, |cur| {
                        let cur = cur.map(|mut c| {
                            c.handle.get_or_insert_with(|| handle.clone());
                            c
                        });
                        (cur, Vec::new(), ())
                    });
                    handle
                },
            ),
            _ => id.to_owned(),
        }
    }

    fn name_file(&self, name: &str) -> PathBuf {
        self.dir.join("names").join(sanitize(name))
    }

    /// Gives session `id` the name `name` (or none): checked for shape, refused when it is a
    /// session id or handle, or the name of another live session of the project. A name an
    /// exited session held passes to the new one.
    pub fn set_name(&self, id: &str, name: Option<&str>) -> Result<Session, StoreError> {
        if let Some(name) = name {
            self.name_free(name, Some(id))?;
        }
        let dir = self.dir.join("names");
        fsutil::create_private_dir_all(&dir).map_err(io(&dir))?;
        let lock = dir.join(".lock");
        super::lock::with(&lock, || -> Result<Session, StoreError> {
            // Checked again under the lock: two renames at once cannot both take one name.
            if let Some(name) = name {
                self.name_free(name, Some(id))?;
                let path = self.name_file(name);
                fsutil::write_private(&path, id.as_bytes()).map_err(io(&path))?;
            }
            let saved = self.update(id, |cur| match cur {
                None => (None, Vec::new(), Err(StoreError::NotFound(id.to_owned()))),
                Some(mut s) => {
                    let old = std::mem::replace(&mut s.name, name.map(str::to_owned));
                    let mut fields = serde_json::Map::new();
                    fields.insert("name".into(), name.into());
                    if let Some(old) = &old {
                        fields.insert("was".into(), old.clone().into());
                    }
                    let event = ("renamed".to_owned(), "spex rename".to_owned(), fields);
                    (Some(s.clone()), vec![event], Ok((s, old)))
                }
            })?;
            let (s, old) = saved?;
            // The old name's index entry goes, unless another session has taken it since.
            if let Some(old) = old.filter(|o| Some(o.as_str()) != name) {
                let file = self.name_file(&old);
                if self.owner(&file).as_deref() == Some(id) {
                    let _ = std::fs::remove_file(&file);
                }
            }
            Ok(s)
        })
        .map_err(io(&lock))?
    }

    /// Whether `name` may name session `id` (`None`: a session about to start).
    pub fn name_free(&self, name: &str, id: Option<&str>) -> Result<(), StoreError> {
        if !is_valid_name(name) {
            return Err(StoreError::Name(format!(
                "`{}` is not a usable session name: a name is 1 to {NAME_MAX} letters, digits, `-` or `_`, starting with a letter\nhint: for example `--name fix-login`",
                crate::text::visible(name)
            )));
        }
        let taken = |what: &str, other: &str| {
            StoreError::Name(format!(
                "`{name}` is {what} session {}\nhint: pick another name (`spex sessions --all` shows the names in use)",
                self.label_of(other)
            ))
        };
        if self.session_dir(name).join("session.json").is_file() && Some(name) != id {
            return Err(taken("the id of", name));
        }
        if let Some(other) = self.owner(&self.handle_file(name))
            && Some(other.as_str()) != id
        {
            return Err(taken("the handle of", &other));
        }
        if let Some(other) = self.owner(&self.name_file(name))
            && Some(other.as_str()) != id
            && self
                .load(&other)
                .ok()
                .flatten()
                .is_some_and(|s| s.status != Status::Exited && s.name.as_deref() == Some(name))
        {
            return Err(taken("already the name of live", &other));
        }
        Ok(())
    }

    fn touched_file(&self, rel: &str) -> PathBuf {
        self.dir
            .join("touched")
            .join(super::path_key(Path::new(rel)))
    }

    /// Sessions that recorded an edit of `rel` (repo-relative), in first-touch order.
    pub fn touched_by(&self, rel: &str) -> Vec<String> {
        let Ok(text) = std::fs::read_to_string(self.touched_file(rel)) else {
            return Vec::new();
        };
        let mut out: Vec<String> = Vec::new();
        for id in text.lines() {
            if !out.iter().any(|o| o == id) {
                out.push(id.to_owned());
            }
        }
        out
    }

    /// Notes that session `id` edited `rel` (one appended line; lines never interleave).
    pub fn note_touched(&self, rel: &str, id: &str) {
        if !self.touched_by(rel).iter().any(|o| o == id) {
            let _ = fsutil::append(&self.touched_file(rel), format!("{id}\n").as_bytes());
        }
    }
}

/// File-name-safe form of a harness id (they are UUID-like, but never trust input).
fn sanitize(s: &str) -> String {
    let clean: String = s
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(128)
        .collect();
    if clean.is_empty() {
        "_".to_owned()
    } else {
        clean
    }
}

/// The first non-empty line of `text`, cut to 120 characters.
pub fn one_line(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    ellipsis(line, 120)
}

/// Milliseconds from `from` to `to` (RFC 3339), when both parse and `to` is not earlier.
pub fn elapsed_ms(from: &str, to: &str) -> Option<u64> {
    let (from, to) = (super::parse_time(from)?, super::parse_time(to)?);
    u64::try_from(to.duration_since(from).ok()?.as_millis()).ok()
}

/// `text` cut to `max` characters, ending with an ellipsis when it was cut.
pub fn ellipsis(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The longest id (or handle, name, prefix) spex accepts.
pub const ID_MAX: usize = 128;

/// The longest session name.
pub const NAME_MAX: usize = 40;

/// A valid spex session id (and the shape of every handle, name and prefix): 1 to `ID_MAX`
/// ASCII letters, digits, `-` or `_`. Nothing else ever becomes a path in the store.
pub fn is_valid_id(s: &str) -> bool {
    // What `sanitize` keeps, checked without building its copy (`sessions --all` checks
    // thousands).
    (1..=128).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A usable session name: an id's characters, at most `NAME_MAX`, starting with a letter (so
/// it reads as a name, not as the start of an id).
pub fn is_valid_name(s: &str) -> bool {
    is_valid_id(s) && s.len() <= NAME_MAX && s.starts_with(|c: char| c.is_ascii_alphabetic())
}

/// `id` as a valid id, or the error that names it and where it came from (`from`: "session",
/// "alias file `...` holds", or empty for what a person typed).
pub fn check_id(id: &str, from: &str) -> Result<(), StoreError> {
    if is_valid_id(id) {
        return Ok(());
    }
    Err(StoreError::InvalidId {
        id: id.to_owned(),
        from: if from.is_empty() {
            String::new()
        } else {
            format!("{from} ")
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The id check that builds no copy agrees with the one that did (`sanitize(s) == s`).
    #[test]
    fn an_id_is_valid_exactly_when_sanitizing_keeps_it() {
        let long = "a".repeat(128);
        let longer = "a".repeat(129);
        for id in [
            "",
            "a",
            "019ab099-c7ac-72d6-b465-46533601b574",
            "with_under-score",
            "../etc",
            "/abs",
            "sp ace",
            "é",
            "_",
            long.as_str(),
            longer.as_str(),
        ] {
            assert_eq!(
                is_valid_id(id),
                !id.is_empty() && sanitize(id) == id,
                "{id:?}"
            );
        }
    }

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

    fn store_with(ids: &[&str]) -> (tempfile::TempDir, ProjectStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = ProjectStore {
            dir: dir.path().to_path_buf(),
            event_log_bytes: crate::config::EVENT_LOG_BYTES,
        };
        for id in ids {
            let path = store.session_dir(id).join("session.json");
            fsutil::write_atomic(&path, b"{}").unwrap();
        }
        (dir, store)
    }

    #[test]
    fn handles_are_tails_unique_stable_and_resolve() {
        // Two UUIDv7 thread ids started within the same millisecond share 13 characters.
        let a = "01a207f5-336d-7833-9809-0ddaefd8289b";
        let b = "01a207f5-336d-7833-9809-0ddaefd9289b";
        let (_dir, store) = store_with(&[a, b]);
        let ha = store.claim_handle(a).unwrap();
        let hb = store.claim_handle(b).unwrap();
        assert_eq!(ha, "289b");
        assert_eq!(hb, "9289b", "the tail grows until it is unique");
        assert_eq!(store.claim_handle(a).unwrap(), ha, "stable");
        assert_eq!(store.resolve(&ha).unwrap(), a);
        assert_eq!(store.resolve(&hb).unwrap(), b);
        assert_eq!(store.resolve(a).unwrap(), a, "the full id");
        assert!(matches!(
            store.resolve("01a207f5"),
            Err(StoreError::Ambiguous { .. })
        ));
        assert_eq!(
            store.resolve("01a207f5-336d-7833-9809-0ddaefd8").unwrap(),
            a
        );
    }

    /// Found by the dispatch fuzz test: hook payloads with the session ids `null` and
    /// `<uuid>null` (tests/fixtures/payloads/fuzz-regressions/claude/SessionStart.id_*.json).
    #[test]
    fn a_handle_never_hides_another_sessions_full_id() {
        let (short, long) = ("null", "378ebf22-04e3-431b-a36e-0da512805eecnull");
        let (_dir, store) = store_with(&[long]);
        assert_eq!(store.claim_handle(long).unwrap(), "null");
        // A session whose id is that handle appears later: its id still names it.
        let record = store.session_dir(short).join("session.json");
        fsutil::write_atomic(&record, b"{}").unwrap();
        assert_eq!(store.resolve(short).unwrap(), short);
        // Claimed after the short id exists, the long id's handle steps past it.
        let (_dir2, both) = store_with(&[long, short]);
        let h = both.claim_handle(long).unwrap();
        assert_eq!(h, "cnull");
        assert_eq!(both.claim_handle(short).unwrap(), "null");
        assert_eq!(both.resolve(&h).unwrap(), long);
        assert_eq!(both.resolve(short).unwrap(), short);
    }

    /// What a person types: full id, then handle, then name, then a unique prefix of a handle
    /// or id; never something shaped like a path.
    #[test]
    fn resolve_takes_ids_handles_names_and_prefixes_in_that_order() {
        let a = "11111111-2222-4333-8444-55555555306f";
        let b = "11111111-2222-4333-8444-66666666cafe";
        let (_dir, store) = store_with(&[]);
        for id in [a, b] {
            let s = Session {
                id: id.into(),
                ..Session::default()
            };
            fsutil::write_atomic(
                &store.session_dir(id).join("session.json"),
                &crate::store::json_bytes(&s),
            )
            .unwrap();
        }
        // Handles are claimed on the first miss.
        assert_eq!(store.resolve("306").unwrap(), a);
        assert_eq!(store.resolve("caf").unwrap(), b);
        assert!(matches!(
            store.resolve("1111"),
            Err(StoreError::Ambiguous { .. })
        ));
        store.set_name(a, Some("fix-login")).unwrap();
        assert_eq!(store.resolve("fix-login").unwrap(), a);
        assert_eq!(
            store.load(a).unwrap().unwrap().name.as_deref(),
            Some("fix-login")
        );
        // Taken by a live session; a handle is no name; a name is no id.
        assert!(matches!(
            store.set_name(b, Some("fix-login")),
            Err(StoreError::Name(_))
        ));
        assert!(matches!(
            store.set_name(a, Some("cafe")),
            Err(StoreError::Name(_))
        ));
        assert!(matches!(
            store.set_name(b, Some("9lives")),
            Err(StoreError::Name(_))
        ));
        // A handle claimed later skips a name in use.
        store.set_name(b, Some("beef")).unwrap();
        let c = "11111111-2222-4333-8444-77777777beef";
        let s = Session {
            id: c.into(),
            ..Session::default()
        };
        fsutil::write_atomic(
            &store.session_dir(c).join("session.json"),
            &crate::store::json_bytes(&s),
        )
        .unwrap();
        assert_eq!(store.claim_handle(c).unwrap(), "7beef");
        assert_eq!(store.resolve("beef").unwrap(), b);
        for bad in ["", "/tmp/x", "..", "a/b", "x y", "é"] {
            assert!(
                matches!(store.resolve(bad), Err(StoreError::InvalidId { .. })),
                "{bad:?}"
            );
        }
    }

    /// A working session whose turn started at 10:00:00.
    fn running_at_ten() -> Session {
        Session {
            status: Status::Working,
            turn: Some(Turn {
                id: Some("t1".into()),
                started_at: "2026-11-26T10:00:00.000Z".into(),
                ..Turn::default()
            }),
            ..Session::default()
        }
    }

    fn at(t: &str) -> SystemTime {
        super::super::parse_time(&format!("2026-11-26T{t}Z")).unwrap()
    }

    fn kinds(events: &[NewEvent]) -> Vec<&str> {
        events.iter().map(|e| e.0.as_str()).collect()
    }

    #[test]
    fn budgets_end_a_turn_once_and_mark_a_stall_that_progress_resumes() {
        let b = Budgets {
            turn: Some(Duration::from_mins(45)),
            stall: Some(Duration::from_mins(10)),
            on_timeout: crate::config::OnTimeout::Mark,
        };
        let mut s = running_at_ten();
        assert_eq!(s.budget_deadline(&b, None), Some(at("10:10:00")));
        // Screen activity the record does not hold moves the stall deadline.
        assert_eq!(
            s.budget_deadline(&b, Some(at("10:05:00"))),
            Some(at("10:15:00"))
        );
        assert!(
            s.judge_budgets(&b, at("10:09:59"), None, false, "t")
                .is_empty()
        );
        let stalled = s.judge_budgets(&b, at("10:10:00"), None, false, "t");
        assert_eq!(kinds(&stalled), ["turn.stalled"]);
        assert_eq!(stalled[0].2["quiet_ms"], 600_000);
        assert!(s.turn_running(), "a stall is no ending");
        // Marked once; then only the turn budget is left to judge.
        assert!(
            s.judge_budgets(&b, at("10:11:00"), None, false, "t")
                .is_empty()
        );
        assert_eq!(s.budget_deadline(&b, None), Some(at("10:45:00")));
        // Progress seen after the mark: working again.
        let resumed = s.judge_budgets(&b, at("10:12:00"), Some(at("10:11:30")), false, "t");
        assert_eq!(kinds(&resumed), ["turn.resumed"]);
        assert_eq!(
            s.note_progress("2026-11-26T10:13:00.000Z", "hook"),
            Vec::new()
        );
        // Past the turn budget: one ending, with the budget and the time it ran.
        let ended = s.judge_budgets(&b, at("10:46:00"), None, true, "t");
        assert_eq!(kinds(&ended), ["turn.timed_out"]);
        assert_eq!(ended[0].2["budget_ms"], 2_700_000);
        assert_eq!(ended[0].2["elapsed_ms"], 2_760_000);
        assert_eq!(ended[0].2["on_timeout"], "interrupt");
        let t = s.turn.as_ref().unwrap();
        assert_eq!(t.state, TurnState::TimedOut);
        assert!(t.note.as_deref().unwrap().contains("45m"));
        assert!(t.next.is_some());
        // The harness's own ending, later, adds none.
        assert!(
            s.end_turn(TurnState::Interrupted, "x", "hook", Value::Null)
                .is_empty()
        );
        assert!(
            s.judge_budgets(&b, at("11:00:00"), None, true, "t")
                .is_empty()
        );
        assert_eq!(s.budget_deadline(&b, None), None);
        // No budget, no judgement; a turn waiting on a person is not stalled.
        let mut quiet = running_at_ten();
        assert!(
            quiet
                .judge_budgets(&Budgets::default(), at("23:00:00"), None, false, "t")
                .is_empty()
        );
        quiet.status = Status::NeedsAttention;
        let stall_only = Budgets { turn: None, ..b };
        assert!(
            quiet
                .judge_budgets(&stall_only, at("11:00:00"), None, false, "t")
                .is_empty()
        );
    }

    /// Found live: a request that fails at once, before Claude writes the turn's prompt into
    /// its transcript, left the previous turn's answer as the "partial" text.
    #[test]
    fn text_written_before_the_turn_began_is_no_partial_text() {
        let failure = |at: &str| Failure {
            partial: Some("an answer".into()),
            partial_at: Some(at.into()),
            ..Failure::new("API Error: 400", ErrorKind::ModelError)
        };
        let mut s = running_at_ten();
        s.fail_turn(
            &failure("2026-11-26T09:59:58.000Z"),
            "2026-11-26T10:00:01.000Z",
            "t",
        );
        assert_eq!(s.turn.as_ref().unwrap().state, TurnState::Failed);
        assert_eq!(s.turn.as_ref().unwrap().partial, None);
        let mut s = running_at_ten();
        s.fail_turn(
            &failure("2026-11-26T10:00:00.500Z"),
            "2026-11-26T10:00:01.000Z",
            "t",
        );
        assert_eq!(s.turn.as_ref().unwrap().state, TurnState::PartialFailed);
    }

    #[test]
    fn an_interrupt_on_its_way_names_who_sent_it() {
        let mut s = running_at_ten();
        s.turn.as_mut().unwrap().interrupting = Some("spex interrupt".into());
        let ended = s.end_turn(
            TurnState::Interrupted,
            "x",
            "hook",
            serde_json::json!({"by": "terminal"}),
        );
        assert_eq!(ended.last().unwrap().2["by"], "spex interrupt");
        assert_eq!(
            s.turn.as_ref().unwrap().by.as_deref(),
            Some("spex interrupt")
        );
        let mut s = running_at_ten();
        s.end_turn(
            TurnState::Interrupted,
            "x",
            "hook",
            serde_json::json!({"by": "terminal"}),
        );
        assert_eq!(s.turn.as_ref().unwrap().by.as_deref(), Some("terminal"));
    }

    #[test]
    fn ellipsis_marks_a_cut() {
        assert_eq!(ellipsis("short", 10), "short");
        assert_eq!(ellipsis("abcdefghijkl", 5), "abcd…");
    }
}
