//! A harness's identity as data: one `const IDENTITY: Identity` per adapter, read through
//! `Harness::identity`, so who a harness is is one table per folder (starship's module table)
//! rather than methods spread over its trait. Holds no behaviour and names no harness.

/// Who a harness is: what spex calls it and how it is run.
#[derive(Debug)]
pub struct Identity {
    /// Stable id used in hook commands, config and session records.
    pub id: &'static str,
    /// Other ids that route to this adapter.
    pub aliases: &'static [&'static str],
    /// The harness's executable name.
    pub binary: &'static str,
    /// The version spex's facts were verified against.
    pub version: &'static str,
    /// Extracts the version number from `<binary> --version` output.
    pub parse_version: fn(&str) -> Option<String>,
    /// Environment variable carrying the harness's own session id inside its processes.
    pub session_env_var: Option<&'static str>,
    /// Other environment variables the adapter reads (e.g. where the harness keeps its state).
    /// `Env` reads exactly these and the session variables, so the ground names no harness.
    pub env_vars: &'static [&'static str],
}
