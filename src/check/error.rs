//! What stops `spex check` before a promise is judged.

use crate::hint::Hint;

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("cannot make the throwaway folder to check in: {0}")]
    Sandbox(std::io::Error),
    #[error("cannot set up the throwaway repository: {0}")]
    Setup(String),
    #[error("`{0}` has no scenarios for `spex check`")]
    NoKit(String),
    #[error("unknown harness `{0}`")]
    Unknown(String),
    #[error("`{0}` is not installed (not on PATH, no `harness.{0}.command`)")]
    Missing(String),
    #[error("cannot start the fake model server for `{harness}`: {error}")]
    Fake {
        harness: String,
        error: std::io::Error,
    },
}

impl Hint for CheckError {
    fn hint(&self) -> Option<String> {
        match self {
            CheckError::Sandbox(_) | CheckError::Fake { .. } => {
                Some("`spex check` needs a writable `/tmp` and a loopback port".into())
            }
            CheckError::Setup(_) => Some("`spex check` needs `git` on PATH".into()),
            CheckError::NoKit(_) => None,
            CheckError::Unknown(_) => Some(format!(
                "one of: {}",
                crate::adapters::all()
                    .iter()
                    .map(|h| format!("`{}`", h.id()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            CheckError::Missing(id) => Some(format!(
                "install it, or set its path: `\"harness\": {{\"{id}\": {{\"command\": \"/path/to/{id}\"}}}}` in your spex config"
            )),
        }
    }
}
