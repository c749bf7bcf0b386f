//! The limits facet: where a harness reports its account's provider rate limits (the
//! windows, how much of each is used, when each resets), and why nothing is known when it
//! reports none for the account in use. The readings themselves are kept in
//! `store::limits`; this facet reads what the harness keeps in its own files.

use crate::env::Env;
use crate::store::limits::Reading;

/// How a harness exposes its rate limits.
pub trait LimitsEvidence: Sync {
    /// The newest reading the harness's own files hold (a log it keeps for every session,
    /// spex's or not), or `None` when they hold none.
    fn read(&self, env: &Env) -> Option<Reading>;
    /// Why the limits may be unknown, in a person's words (shown beside `unknown`).
    fn unknown_because(&self) -> &'static str;
}
