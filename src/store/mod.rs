//! The spex store under `$SPEX_HOME`: one folder per project (keyed by its main checkout), with
//! per-tree receipts, the ownership record of materialized artifacts, the dispatch log and
//! session state. Owns paths and locking; it does not know what a harness is.

pub mod answers;
pub mod away;
pub mod checks;
pub mod daily;
pub mod governance;
pub mod limits;
pub mod lock;
pub mod projects;
pub mod prune;
pub mod remotes;
pub mod session;
pub mod sorted;
pub mod stream;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Per-tree receipt, written by `materialize`: which harnesses this tree selected, and what
/// `dispatch` needs from the `.spec` tree (so the hot path never walks `.spec`). Which spec
/// governs which files lives beside it in the governance index (`governance.rs`), read only
/// for events that edit files.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    pub schema: u32,
    pub tree: PathBuf,
    pub harnesses: Vec<String>,
    #[serde(default)]
    pub hooks: Vec<HookNode>,
    /// The governed nodes inline: receipts written before the governance index. `dispatch`
    /// still reads them as it did; the next `materialize` moves them into the index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub governance: Vec<Governed>,
    /// The governed nodes are in the governance index beside this receipt.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub governance_index: bool,
    #[serde(default)]
    pub policies: Policies,
    /// Config `store.eventLogBytes`: one session's event log is kept under this size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_log_bytes: Option<u64>,
    /// Config `answering.hookWaitSecs`: how long a hook that may wait for an answer waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_wait_secs: Option<u64>,
    /// Config `answering.away`: away mode while `spex away` was never run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub away: bool,
}

/// Other spellings of a project's main checkout: absolute paths through symlinks that resolve
/// to it, learnt from where the user ran `spex materialize`. A harness handed such a path as
/// its working folder names the checkout's files through it (Codex keys hook trust by it), so
/// materialize keeps the artifacts that name paths right for each spelling it knows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spellings {
    pub schema: u32,
    /// Sorted, without the canonical path.
    pub main: Vec<PathBuf>,
}

/// Bound of each of spex's own logs (`dispatch-errors.log`, `dispatch.log`).
pub const LOG_BYTES: u64 = 1024 * 1024;

/// The dispatch policies of `spex.jsonc`, as of the last `materialize`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policies {
    pub spec_first: crate::config::Policy,
    pub stop_gate: crate::config::StopGate,
}

/// A `surface: hook` spec node: its handler runs after the built-in handlers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookNode {
    pub spec: String,
    pub handler: PathBuf,
    pub events: Vec<String>,
    pub order: i64,
    pub block: bool,
}

/// A spec node that governs files (`code` globs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Governed {
    pub spec: String,
    pub title: String,
    pub code: Vec<String>,
}

/// Short stable hash of a path, used to name per-project and per-tree entries.
pub fn path_key(path: &Path) -> String {
    let digest = Sha256::digest(path.as_os_str().as_encoded_bytes());
    hex::encode(&digest[..6])
}

/// Every project folder of the store, in the order of their folder names.
pub fn all_projects(spex_home: &Path) -> Vec<ProjectStore> {
    let root = spex_home.join("projects");
    let Ok(entries) = fs_err::read_dir(&root) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|dir| ProjectStore {
            dir,
            event_log_bytes: crate::config::EVENT_LOG_BYTES,
        })
        .collect()
}

/// Where one project's state lives.
#[derive(Debug, Clone)]
pub struct ProjectStore {
    pub dir: PathBuf,
    /// Bound of each session's event log (older events rotate into one previous segment).
    pub event_log_bytes: u64,
}

impl ProjectStore {
    pub fn new(spex_home: &Path, main_checkout: &Path) -> ProjectStore {
        let name: String = main_checkout
            .file_name()
            .map(|n| {
                n.to_string_lossy()
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        ProjectStore {
            dir: spex_home
                .join("projects")
                .join(format!("{name}-{}", path_key(main_checkout))),
            event_log_bytes: crate::config::EVENT_LOG_BYTES,
        }
    }

    pub fn receipt(&self, tree: &Path) -> Option<Receipt> {
        serde_json::from_slice(&fs_err::read(self.receipt_file(tree)).ok()?).ok()
    }

    /// Harness ids that the receipts of the checkouts rooted at `roots` select.
    pub fn selected_by<'a>(&self, roots: impl IntoIterator<Item = &'a Path>) -> BTreeSet<String> {
        roots
            .into_iter()
            .filter_map(|r| self.receipt(r))
            .flat_map(|r| r.harnesses)
            .collect()
    }

    pub fn receipt_file(&self, tree: &Path) -> PathBuf {
        self.dir
            .join("trees")
            .join(format!("{}.json", path_key(tree)))
    }

    /// The spellings of the main checkout spex knows; none when there is no readable record.
    pub fn spellings(&self) -> Spellings {
        fs_err::read(self.spellings_file())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    pub fn spellings_file(&self) -> PathBuf {
        self.dir.join("spellings.json")
    }

    /// The governance index beside the receipt of the checkout rooted at `tree`.
    pub fn governance_file(&self, tree: &Path) -> PathBuf {
        self.dir
            .join("trees")
            .join(format!("{}.governance", path_key(tree)))
    }

    pub fn owned_file(&self) -> PathBuf {
        self.dir.join("owned.json")
    }

    /// The crash journal of a materialize or clean that is being applied (or was interrupted).
    pub fn journal_file(&self) -> PathBuf {
        self.dir.join("journal.json")
    }

    /// The project's folder in the store.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn dispatch_log(&self) -> PathBuf {
        self.dir.join("dispatch.log")
    }
}

/// A store record as written: pretty JSON and a final newline.
pub fn json_bytes<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(value).expect("store records serialize");
    out.push(b'\n');
    out
}

/// Current time as RFC 3339 with millisecond precision (UTC).
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// A time the store wrote ([`now_rfc3339`]), read back.
pub fn parse_time(rfc3339: &str) -> Option<std::time::SystemTime> {
    humantime::parse_rfc3339_weak(rfc3339.trim_end_matches('Z')).ok()
}
