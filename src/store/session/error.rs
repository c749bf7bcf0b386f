//! What can go wrong reading, writing or naming a session record, and the check that an id
//! may become a path in the store, each with its hint apart. Messages only: it decides nothing.

use std::path::{Path, PathBuf};

use crate::hint::Hint;

use super::ids::{ID_MAX, is_valid_id};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("no session matches `{0}`")]
    NotFound(String),
    #[error("`{prefix}` matches several sessions: {matches}")]
    Ambiguous { prefix: String, matches: String },
    /// An id, handle or name that cannot be one (read from an argument or a store file).
    #[error(
        "{from}`{}` is not a session id, handle or name: those are 1 to {ID_MAX} letters, digits, `-` or `_`",
        crate::text::visible(.id)
    )]
    InvalidId { id: String, from: String },
    /// A name that cannot name the session: why, and what to do.
    #[error("{message}")]
    Name { message: String, hint: String },
    /// Every store call goes through `fs_err` or `fsutil`, whose error already names the file
    /// (and the lock's path): the message is the source's alone; `path` stays as data.
    #[error("{source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("`{path}` is not a valid session record: {message}")]
    Corrupt { path: PathBuf, message: String },
}

impl Hint for StoreError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            StoreError::NotFound(_) => "list sessions with `spex sessions --all`".to_owned(),
            StoreError::Ambiguous { .. } => {
                "give more characters of the handle or id (`spex sessions --all` lists them)"
                    .to_owned()
            }
            StoreError::InvalidId { .. } => "`spex sessions --all` lists the sessions".to_owned(),
            StoreError::Name { hint, .. } => hint.clone(),
            StoreError::Corrupt { .. } => {
                "the store may be from a newer spex; it was left unchanged".to_owned()
            }
            StoreError::Io { .. } => return None,
        })
    }
}

pub(super) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_owned(),
        source,
    }
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
