//! What a session waits on a person for, as the record holds it: the attention, the choices
//! and questions its dialog offers, how it can be answered here and the answer on its way.
//! Types only: `state.rs` opens and closes it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::process::ProcessId;
use super::vocab::{AnswerWay, AttentionKind};

/// What a session waits on a person for: a first-class object with an id (`a1`, `a2`, ...:
/// short, stable, unique within the session), what it asks, the choices the harness offers
/// (read from the harness's own evidence by its adapter, never invented) and how it can be
/// answered from here. It closes with an `attention.closed` event saying how it was answered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attention {
    /// `permission`, `question`, `turn_failed`, ...
    pub reason: AttentionKind,
    pub text: String,
    /// When it opened.
    pub since: String,
    /// Its id within the session (`None` in records written before attentions had one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `permission`, `question`, `plan` or `other`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<AttentionKind>,
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
    pub how: AnswerWay,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// An answer on its way. Fields in alphabetical order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answering {
    pub at: String,
    pub by: String,
    pub choice: String,
    /// Where the answer came from: `cli`, `board` (what `by` names is the command's path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Attention {
    /// A new attention of `reason` asking `text`, opened `now`.
    pub fn new(reason: impl Into<AttentionKind>, text: impl Into<String>, now: &str) -> Attention {
        Attention {
            reason: reason.into(),
            text: text.into(),
            since: now.to_owned(),
            ..Attention::default()
        }
    }
}
