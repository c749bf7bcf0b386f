//! A hint: what a person can do about an error, carried as data beside its message so the
//! command line prints it last, after the `Caused by:` lines. It owns the trait every module
//! error answers and a message-with-hint error for errors written where they happen; it knows
//! no other module, and prints nothing.

use std::fmt::Display;

/// An error that may say what a person can do about it. Its `Display` is the message alone;
/// the hint (without the `hint: ` prefix) is asked for apart.
pub trait Hint {
    fn hint(&self) -> Option<String>;
}

/// A message and its hint, for an error written where it happens (`anyhow` at the CLI edge),
/// with the error it explains, if any, as its cause.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Hinted {
    pub message: String,
    pub hint: String,
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl Hinted {
    pub fn new(message: impl Into<String>, hint: impl Into<String>) -> Hinted {
        Hinted {
            message: message.into(),
            hint: hint.into(),
            source: None,
        }
    }

    /// The same, caused by `source` (printed as its `Caused by:` line).
    #[must_use]
    pub fn caused_by(self, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Hinted {
        Hinted {
            source: Some(source.into()),
            ..self
        }
    }
}

impl Hint for Hinted {
    fn hint(&self) -> Option<String> {
        Some(self.hint.clone())
    }
}

/// The error and its hint as one text (`message\nhint: hint`), where one string must carry
/// both: a `--json` field or a `doctor` line that has always held the hint, a log line.
pub fn spelled<E: Display + Hint + ?Sized>(e: &E) -> String {
    match e.hint() {
        Some(h) => format!("{e}\nhint: {h}"),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hinted_error_displays_its_message_alone_and_spells_both() {
        let e = Hinted::new("the prompt is empty", "pass the text to deliver");
        assert_eq!(e.to_string(), "the prompt is empty");
        assert_eq!(
            spelled(&e),
            "the prompt is empty\nhint: pass the text to deliver"
        );
    }
}
