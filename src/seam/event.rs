//! The normalized hook event every adapter decodes its wire payload into, and the answer the
//! dispatcher hands back for the adapter to encode. Harness-neutral by construction.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    SessionStart,
    PromptSubmitted,
    ToolStarted,
    ToolCompleted,
    ToolFailed,
    /// The harness is asking the human to allow something.
    PermissionRequest,
    /// A harness notification that the session waits for the human (permission dialog).
    AttentionNotice,
    /// A harness notification that the session sits idle at its prompt.
    IdleNotice,
    TurnCompleted,
    TurnFailed,
    TurnInterrupted,
    /// A sub-agent started (`agent_id`).
    SubagentStarted,
    /// A sub-agent finished its work (`agent_id`, its last message as `summary`).
    SubagentStopped,
    /// The harness sends a model request (an attempt of the turn; retries included).
    ModelRequestStarted,
    /// A model request failed; the harness may retry it.
    ModelRequestFailed,
    ModelRequestCompleted,
    SessionEnded,
    /// An event spex binds nothing to (unknown or not handled).
    Other,
}

/// One hook invocation, harness-neutral.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HookEvent {
    pub kind: Option<Kind>,
    /// The harness's own session id (Claude session UUID, Codex thread id).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The harness's own log of the session (`transcript_path`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcript: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// `turn_id` names the turn itself, so a prompt with another id starts a new one. When it
    /// names a prompt (several queued prompts can make one turn), only the timing tells.
    #[serde(skip)]
    pub turn_id_names_turn: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The harness's id of one tool call (`tool_use_id`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// Files the tool edits (as the payload spells them: absolute or cwd-relative).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub edits: Vec<String>,
    /// The question or command text when the agent needs the human.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attention: Option<(String, String)>,
    /// What the harness asks, in full (kind, choices, questions, the call): the attention to
    /// open, without its id, time and `via`, which the dispatcher sets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ask: Option<crate::store::session::Attention>,
    /// The call comes from a subagent: it must not move the parent session.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub subagent: bool,
    /// The harness's id of the sub-agent the call comes from (or that starts or stops).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_type: Option<String>,
    /// A sub-agent's last message (`SubagentStop`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The sub-agent a parent's tool call started, as its result names it (with `usage`:
    /// that sub-agent's usage, as the harness reported it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawned: Option<String>,
    /// Model usage the payload reports (a model request's, or a spawned sub-agent's).
    #[serde(skip)]
    pub usage: Option<crate::store::session::Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The harness re-entered Stop after a Stop hook blocked.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stop_hook_active: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How a turn failed (`TurnFailed`), as the adapter read the harness's evidence.
    #[serde(skip)]
    pub failure: Option<crate::store::session::Failure>,
    /// The harness process the hook runs under, where the adapter can tell it (a harness that
    /// runs one session per process, told by the hook's ancestry): recorded on the session, so
    /// the readers see it gone when it dies without its ending hook.
    #[serde(skip)]
    pub process: Option<crate::store::session::ProcessId>,
}

/// What spex answers: context to add and, from a policy, a block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Answer {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block: Option<String>,
}

impl Answer {
    pub fn is_empty(&self) -> bool {
        self.context.is_empty() && self.block.is_none()
    }
}

/// The bytes and exit code the harness gets.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct Reply {
    pub stdout: String,
    pub stderr: String,
    pub exit_code: i32,
}
