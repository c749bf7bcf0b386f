//! The seam's vocabulary: the `Harness` trait every adapter implements, as an identity and the
//! facets a harness may offer (`files`, `wire`, `terminal`, `session_server`, `evidence`,
//! `answer`), and the types they speak (hook events and answers in `event`; the byte-exact
//! edit primitives adapters plan with in `edit`). It sits beneath the engines and the
//! adapters, holds no harness-specific code, and imports only the ground.

pub mod answer;
pub mod edit;
pub mod event;
pub mod evidence;
pub mod files;
pub mod session_server;
pub mod terminal;
pub mod wire;

/// A harness spex knows: who it is, and the facets it offers. Each facet is optional; a
/// harness without one says so with `None`, and no facet has a default that describes one
/// harness's behaviour.
pub trait Harness: Sync {
    /// Stable id used in hook commands, config and session records.
    fn id(&self) -> &'static str;
    /// Other ids that route to this adapter.
    fn aliases(&self) -> &'static [&'static str];
    /// The harness's executable name.
    fn binary_name(&self) -> &'static str;
    /// The version spex's facts were verified against.
    fn pinned_version(&self) -> &'static str;
    /// Extracts the version number from `<binary> --version` output.
    fn parse_version(&self, output: &str) -> Option<String>;
    /// Environment variable carrying the harness's own session id inside its processes.
    fn session_env_var(&self) -> Option<&'static str>;
    /// Other environment variables the adapter reads (e.g. where the harness keeps its state).
    /// `Env` reads exactly these and the session variables, so the ground names no harness.
    fn env_vars(&self) -> &'static [&'static str];

    /// Files and hooks: materialize, clean, trust, doctor, the `/` menu.
    fn files(&self) -> Option<&'static dyn files::Files>;
    /// The hook wire: decoding payloads, encoding answers.
    fn wire(&self) -> Option<&'static dyn wire::HookWire>;
    /// The interactive terminal spex hosts in its PTY.
    fn terminal(&self) -> Option<&'static dyn terminal::TerminalHost>;
    /// The server runtime, for a harness whose sessions spex runs as threads of one server per
    /// project.
    fn server(&self) -> Option<&'static dyn session_server::SessionServer>;
    /// Evidence beyond hooks: the harness's own state files, logs and processes.
    fn evidence(&self) -> Option<&'static dyn evidence::Observer>;
    /// Answering what a session waits on from outside its terminal.
    fn answering(&self) -> Option<&'static dyn answer::Answering>;
}
