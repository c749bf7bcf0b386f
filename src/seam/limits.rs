//! The limits facet: where a harness reports its account's provider rate limits (the
//! windows, how much of each is used, when each resets), and why nothing is known when it
//! reports none for the account in use. The readings themselves are kept in
//! `store::limits`; this facet reads what the harness keeps in its own files.

use std::path::Path;

use serde_json::Value;

use crate::env::Env;
use crate::seam::edit::owned::Owned;
use crate::store::limits::Reading;

/// How a harness exposes its rate limits.
pub trait LimitsEvidence: Sync {
    /// The newest reading the harness's own files hold (a log it keeps for every session,
    /// spex's or not), or `None` when they hold none.
    fn read(&self, env: &Env) -> Option<Reading>;
    /// Why the limits may be unknown, in a person's words (shown beside `unknown`).
    fn unknown_because(&self) -> &'static str;
    /// The status-line command spex installs for this harness when asked (`limits.statusLine`),
    /// given spex's binary quoted for a shell; `None` for a harness with no status line that
    /// reports limits (the default).
    fn status_line(&self, _spex: &str) -> Option<Value> {
        None
    }
    /// The reading a status-line call's payload carries, heard now; `None` when it has none.
    fn status_line_reading(&self, _payload: &Value) -> Option<Reading> {
        None
    }
    /// The person's own status-line command that spex's chains to in tree `root`: the one
    /// spex's replaced there (its ownership record, `owned`, keeps it), else the one of a lower
    /// settings layer that spex's shadows.
    fn chained_status_line(&self, _env: &Env, _owned: &Owned, _root: &Path) -> Option<String> {
        None
    }
}
