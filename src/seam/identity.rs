//! A harness's identity and capabilities as data: one `const IDENTITY: Identity` per adapter,
//! read through `Harness::identity`, so who a harness is and what it can do is one table per
//! folder (starship's module table) rather than methods spread over its trait. Holds no
//! behaviour and names no harness.

/// Who a harness is: what spex calls it, how it is run, and what it can do.
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
    /// What the harness can do, stated (a test checks it against the facets offered).
    pub capabilities: Capabilities,
}

/// What a harness can do, stated by its adapter so product code reads a capability instead of
/// guessing it from whether a facet exists, and a reader sees them all in one table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "each is one yes/no capability a harness states, read on its own"
)]
pub struct Capabilities {
    /// spex hosts its interactive terminal in a PTY (the `terminal` facet).
    pub hosted_terminal: bool,
    /// The sessions spex starts run as threads of one harness server per project (the
    /// `server` facet): the terminal spex hosts is a client of it, the session outlives that
    /// terminal, and the server reports a command's failure that the hook does not.
    pub server: bool,
    /// spex reads the harness's own state files, logs and processes (the `evidence` facet).
    pub evidence: bool,
    /// The ways spex answers what a session waits on from outside its terminal (the
    /// `answering` facet when any).
    pub answers: AnswerPaths,
    /// Its hooks report an idle prompt (a notification while the session waits for input).
    pub idle_notification: bool,
    /// Its terminal title is a live summary of what the session does.
    pub title_summary: bool,
}

/// The ways an answer reaches the harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerPaths {
    /// Keys typed into the dialog on the terminal spex hosts.
    pub keys: bool,
    /// A hook that waits for the answer and prints it as the harness's decision (always, or
    /// only while the person is away).
    pub hook: bool,
    /// A response on the harness's server.
    pub server: bool,
}
