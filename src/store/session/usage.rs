//! Model usage as the harness recorded it, and how far a reader has read the harness's log
//! for it. Types and arithmetic only.

use serde::{Deserialize, Serialize};
use serde_json::Value;

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

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
pub(super) fn is_zero(n: &u64) -> bool {
    *n == 0
}
