//! `hooks/list`: every hook a Codex app-server discovers for some working folders, with its
//! trust status, decoded from the wire shape into [`HookEntry`]. No thread is needed.

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{Value, json};

use super::transport::{Client, RpcError};

impl Client {
    /// `hooks/list {cwds}`: every hook codex discovers for those working directories, with its
    /// trust status, flattened across cwds (each entry remembers its cwd). No thread is needed.
    /// An untrusted project, a relative or a missing cwd all give an empty list, not an error;
    /// an empty `cwds` lists the server's own working directory.
    pub fn hooks_list(&mut self, cwds: &[PathBuf]) -> Result<Vec<HookEntry>, RpcError> {
        Ok(self
            .hooks_list_by_cwd(cwds)?
            .into_iter()
            .flat_map(|listing| listing.hooks)
            .collect())
    }

    /// `hooks/list {cwds}` keeping the per-cwd grouping and the discovery warnings and errors
    /// (e.g. a hooks.json that does not parse).
    pub fn hooks_list_by_cwd(&mut self, cwds: &[PathBuf]) -> Result<Vec<HooksListing>, RpcError> {
        const METHOD: &str = "hooks/list";
        let result = self.call(METHOD, json!({ "cwds": cwds }), self.timeout())?;
        parse_hooks_list(&result).map_err(|source| RpcError::Decode {
            method: METHOD.to_owned(),
            source,
        })
    }
}

/// `trustStatus` of a hook as `hooks/list` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustStatus {
    /// The stored `trusted_hash` equals the hook's current hash: it runs.
    Trusted,
    /// A `trusted_hash` is stored but differs (the hook was edited): it does not run.
    Modified,
    /// No `trusted_hash` stored: it does not run.
    Untrusted,
    /// From a managed layer (system, MDM, requirements): always runs.
    Managed,
    /// A status this version of spex does not know.
    Other(String),
}

impl TrustStatus {
    fn from_wire(s: &str) -> Self {
        match s {
            "trusted" => Self::Trusted,
            "modified" => Self::Modified,
            "untrusted" => Self::Untrusted,
            "managed" => Self::Managed,
            other => Self::Other(other.to_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::Trusted => "trusted",
            Self::Modified => "modified",
            Self::Untrusted => "untrusted",
            Self::Managed => "managed",
            Self::Other(s) => s,
        }
    }
}

/// One hook handler as `hooks/list` reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct HookEntry {
    /// The cwd this entry was listed for.
    pub cwd: PathBuf,
    /// Wire event name, camelCase (`preToolUse`, `stop`); see [`HookEntry::hooks_json_event`].
    pub event_name: String,
    /// `command`, `mcpTool`, `prompt` or `agent`.
    pub handler_type: String,
    /// The POSIX command of a command handler.
    pub command: Option<String>,
    pub matcher: Option<String>,
    /// The hooks.json or config.toml the hook came from, as codex spells it.
    pub source_path: PathBuf,
    /// The config layer (`project`, `user`, `plugin`, ...).
    pub source: String,
    /// The `hooks.state` key: `<source path>:<event label>:<group index>:<handler index>`.
    pub key: String,
    pub group_index: Option<usize>,
    pub handler_index: Option<usize>,
    /// `false` under `[hooks.state."<key>"] enabled = false`. Independent of trust: a disabled
    /// hook whose hash matches is still reported `trusted`.
    pub enabled: bool,
    pub is_managed: bool,
    pub trust: TrustStatus,
    /// `sha256:<hex>`, the value a `trusted_hash` must hold for the hook to run.
    pub current_hash: String,
    pub timeout_sec: Option<u64>,
    /// The entry exactly as the server sent it.
    pub raw: Value,
}

impl HookEntry {
    /// The event name as hooks.json spells it (`PreToolUse`, `Stop`).
    pub fn hooks_json_event(&self) -> String {
        let mut chars = self.event_name.chars();
        chars
            .next()
            .map(|first| first.to_uppercase().chain(chars).collect())
            .unwrap_or_default()
    }
}

/// The hooks discovered for one cwd, with discovery problems.
#[derive(Debug, Clone, PartialEq)]
pub struct HooksListing {
    pub cwd: PathBuf,
    pub hooks: Vec<HookEntry>,
    pub warnings: Vec<String>,
    pub errors: Vec<HookListError>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct HookListError {
    pub path: PathBuf,
    pub message: String,
}

/// Wire shapes of `hooks/list` (`HooksListResponse` in the generated schema); unknown fields
/// are ignored so a newer codex does not break parsing.
mod wire {
    use serde::Deserialize;
    use serde_json::Value;
    use std::path::PathBuf;

    #[derive(Deserialize)]
    pub struct Response {
        pub data: Vec<Listing>,
    }

    #[derive(Deserialize)]
    pub struct Listing {
        pub cwd: PathBuf,
        pub hooks: Vec<Value>,
        #[serde(default)]
        pub warnings: Vec<String>,
        #[serde(default)]
        pub errors: Vec<super::HookListError>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Hook {
        pub event_name: String,
        pub handler_type: String,
        pub command: Option<String>,
        pub matcher: Option<String>,
        pub source_path: PathBuf,
        pub source: String,
        pub key: String,
        pub enabled: bool,
        #[serde(default)]
        pub is_managed: bool,
        pub trust_status: String,
        pub current_hash: String,
        pub timeout_sec: Option<u64>,
    }
}

pub(super) fn parse_hooks_list(result: &Value) -> Result<Vec<HooksListing>, serde_json::Error> {
    let response = wire::Response::deserialize(result)?;
    response
        .data
        .into_iter()
        .map(|listing| {
            let hooks = listing
                .hooks
                .into_iter()
                .map(|raw| {
                    let hook = wire::Hook::deserialize(&raw)?;
                    let (group_index, handler_index) = key_indices(&hook.key);
                    Ok(HookEntry {
                        cwd: listing.cwd.clone(),
                        event_name: hook.event_name,
                        handler_type: hook.handler_type,
                        command: hook.command,
                        matcher: hook.matcher,
                        source_path: hook.source_path,
                        source: hook.source,
                        key: hook.key,
                        group_index,
                        handler_index,
                        enabled: hook.enabled,
                        is_managed: hook.is_managed,
                        trust: TrustStatus::from_wire(&hook.trust_status),
                        current_hash: hook.current_hash,
                        timeout_sec: hook.timeout_sec,
                        raw,
                    })
                })
                .collect::<Result<_, serde_json::Error>>()?;
            Ok(HooksListing {
                cwd: listing.cwd,
                hooks,
                warnings: listing.warnings,
                errors: listing.errors,
            })
        })
        .collect()
}

/// Group and handler indices from a `hooks.state` key. Parsed from the right because the source
/// path itself may contain `:`.
pub(super) fn key_indices(key: &str) -> (Option<usize>, Option<usize>) {
    let mut parts = key.rsplitn(3, ':');
    let handler = parts.next().and_then(|s| s.parse().ok());
    let group = parts.next().and_then(|s| s.parse().ok());
    match (group, handler) {
        (Some(g), Some(h)) => (Some(g), Some(h)),
        _ => (None, None),
    }
}
