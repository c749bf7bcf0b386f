//! What reaching another machine can fail with, each error with what a person can do about it.

use crate::hint::Hint;

/// What reaching another machine can fail with.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("no remote named `{name}`{}", known_list(.known))]
    Unknown { name: String, known: Vec<String> },
    #[error("a remote named `{0}` exists already")]
    Exists(String),
    #[error("`{name}` cannot name a remote")]
    BadName { name: String },
    #[error("`{dest}` cannot be an ssh destination: it {problem}")]
    BadDest { dest: String, problem: &'static str },
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("`{path}`, {source}")]
    Edit {
        path: std::path::PathBuf,
        source: crate::seam::edit::json_edit::JsonError,
    },
    /// `fs_err`'s error, which names its path.
    #[error(transparent)]
    Io(std::io::Error),
    #[error("cannot run `ssh`: {0}")]
    NoSsh(std::io::Error),
    #[error("cannot reach `{name}` (`{dest}`): {message}")]
    Unreachable {
        name: String,
        dest: String,
        message: String,
    },
    #[error("`{name}` has no spex program `{program}`")]
    NoSpex { name: String, program: String },
    #[error("the spex on `{name}` is too old to speak spex's protocol ({message})")]
    NoProtocol { name: String, message: String },
    #[error(
        "the spex on `{name}` (version {version}) speaks protocol {protocol}; this spex (version {}) speaks {ours}",
        env!("CARGO_PKG_VERSION")
    )]
    Incompatible {
        name: String,
        version: String,
        protocol: u32,
        /// The protocols this spex speaks, in words.
        ours: String,
        /// Whether the remote's protocol is the older one.
        older: bool,
    },
    #[error(
        "the spex on `{name}` (version {version}, protocol {protocol}) does not offer `{feature}`"
    )]
    Unsupported {
        name: String,
        feature: String,
        version: String,
        protocol: u32,
    },
    #[error("the spex on `{name}` answered what this spex cannot read: {message}")]
    Garbled { name: String, message: String },
    #[error("on `{name}`: {message}")]
    Failed {
        name: String,
        message: String,
        hint: Option<String>,
    },
}

fn known_list(known: &[String]) -> String {
    if known.is_empty() {
        " (none is configured)".to_owned()
    } else {
        format!(
            " (known: {})",
            known
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

impl Hint for RemoteError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            RemoteError::Unknown { .. } => {
                "`spex remote list` lists the remotes; `spex remote add NAME DEST` adds one"
                    .to_owned()
            }
            RemoteError::Exists(name) => {
                format!("`spex remote remove {name}` first, or choose another name")
            }
            RemoteError::BadName { .. } => {
                "a remote's name is 1 to 40 letters, digits, `-` or `_`, starting with a letter"
                    .to_owned()
            }
            RemoteError::BadDest { .. } => {
                "give what `ssh` takes: `user@host`, an alias of `~/.ssh/config`, or `ssh://user@host:port`"
                    .to_owned()
            }
            RemoteError::Config(e) => return e.hint(),
            RemoteError::Edit { source, .. } => return source.hint(),
            RemoteError::Io(_) | RemoteError::Failed { hint: None, .. } => return None,
            RemoteError::NoSsh(_) => {
                "install OpenSSH's client (`ssh`) on this machine".to_owned()
            }
            RemoteError::Unreachable { dest, .. } => format!(
                "`ssh {dest} true` shows why; spex runs ssh with `BatchMode=yes`, so a key or agent must log in without a prompt"
            ),
            RemoteError::NoSpex { name, .. } => format!(
                "install spex on `{name}`, or name its path: `spex remote add {name} DEST --spex PATH` (after `spex remote remove {name}`)"
            ),
            RemoteError::Incompatible { name, older, .. } => {
                if *older {
                    format!(
                        "upgrade spex on `{name}` to version {} (this one)",
                        env!("CARGO_PKG_VERSION")
                    )
                } else {
                    format!("upgrade this spex to the version on `{name}`")
                }
            }
            RemoteError::NoProtocol { name, .. } | RemoteError::Unsupported { name, .. } => format!(
                "upgrade spex on `{name}` to version {} (this one)",
                env!("CARGO_PKG_VERSION")
            ),
            RemoteError::Garbled { name, .. } => {
                format!("`spex remote check {name}` checks the spex there")
            }
            RemoteError::Failed { hint: Some(h), .. } => h.clone(),
        })
    }
}
