//! The seam's vocabulary: the `Harness` trait every adapter implements, as an identity and the
//! facets a harness may offer (`files`, `wire`, `terminal`, `session_server`, `evidence`,
//! `answer`, `limits`), and the types they speak (hook events and answers in `event`; the byte-exact
//! edit primitives adapters plan with in `edit`). It sits beneath the engines and the
//! adapters, holds no harness-specific code, and imports only the ground.

pub mod answer;
pub mod boot;
pub mod edit;
pub mod event;
pub mod evidence;
pub mod files;
pub mod identity;
pub mod limits;
pub mod session_server;
pub mod terminal;
pub mod wire;

pub use identity::{AnswerPaths, Capabilities, Identity};

/// A harness spex knows: who it is and what it can do (one const [`Identity`]), and the
/// facets it offers. Each facet is optional; a harness without one says so with `None`, and
/// no facet has a default that describes one harness's behaviour.
pub trait Harness: Sync {
    /// Who the harness is and what it can do: the adapter's one `const IDENTITY`.
    fn identity(&self) -> &'static Identity;

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
    /// The provider's rate limits, as the harness reports them for the account in use.
    fn limits(&self) -> Option<&'static dyn limits::LimitsEvidence>;
}

// Not a trait method: an adapter states its id once, in its `IDENTITY`.
impl dyn Harness + '_ {
    /// The harness's id ([`Identity::id`]), which most callers want.
    pub fn id(&self) -> &'static str {
        self.identity().id
    }

    /// What the harness can do ([`Identity::capabilities`]).
    pub fn capabilities(&self) -> &'static Capabilities {
        &self.identity().capabilities
    }
}
