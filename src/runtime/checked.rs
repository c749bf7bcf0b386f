//! Capabilities `spex check` switched off: answering, interrupting or resuming through spex for
//! a harness version whose check found that promise broken is refused with the reason, leaving
//! the terminal (`spex attach`), and a session whose events promise failed reads "unverified",
//! rather than used blind.

use std::path::Path;

use crate::adapters;
use crate::env::Env;
use crate::seam::Harness;
use crate::store::checks;
use crate::store::session::{AttentionKind, Session};

/// The installed binary of `h` as `tree`'s configuration names it, and its version.
pub fn installed(env: &Env, tree: &Path, h: &dyn Harness) -> Option<(std::path::PathBuf, String)> {
    let cfg = crate::config::load(&env.user_config_file(), tree, &adapters::known()).ok();
    let command = cfg
        .as_ref()
        .and_then(|c| c.harness.get(h.id()))
        .and_then(|c| c.command.clone());
    let binary = env.which(command.as_deref().unwrap_or(h.identity().binary))?;
    let version = checks::version_of(&env.spex_home(), &binary, |b| {
        crate::env::version_output(b).and_then(|o| (h.identity().parse_version)(&o))
    })?;
    Some((binary, version))
}

/// The capability answering an attention of `kind` uses, as `spex check` names it.
fn capability(kind: Option<&AttentionKind>) -> Option<&'static str> {
    match kind? {
        AttentionKind::Permission | AttentionKind::Plan => Some("answer.permission"),
        AttentionKind::Question => Some("answer.question"),
        AttentionKind::TurnFailed | AttentionKind::Other(_) => None,
    }
}

/// Why answering this attention through spex is switched off for the session's harness
/// version, as a message and a hint; `None` when it is not.
pub fn answer_switched_off(
    env: &Env,
    record: &Session,
    kind: Option<&AttentionKind>,
) -> Option<(String, String)> {
    switched_off(env, record, capability(kind)?, "answering through spex")
}

/// Why `doing` (a command's words) is switched off for the session's harness version because
/// `spex check` found a promise of capability `cap` broken, as a message and a hint; `None`
/// when it is not.
pub fn switched_off(
    env: &Env,
    record: &Session,
    cap: &str,
    doing: &str,
) -> Option<(String, String)> {
    let (h, version, off) = failed(env, record, cap)?;
    let first = off.first()?;
    Some((
        format!(
            "{doing} is switched off for {} {version}: `spex check` found that {} does not hold",
            h.id(),
            promises(&off)
        ),
        format!(
            "{}; `spex check --harness {}` checks again",
            first.fallback.replace(
                "`spex attach`",
                &format!("`spex attach {}`", record.label())
            ),
            h.id()
        ),
    ))
}

/// `Err` (why, and what to do instead) when `doing` is switched off for the session's harness
/// version: `spex check` found a promise of capability `cap` broken.
pub fn refuse_if_off(
    env: &Env,
    record: &Session,
    cap: &str,
    doing: &str,
) -> Result<(), super::RuntimeError> {
    match switched_off(env, record, cap, doing) {
        Some((message, hint)) => Err(super::RuntimeError::SwitchedOff {
            id: record.id.clone(),
            message,
            hint,
        }),
        None => Ok(()),
    }
}

/// Why the session's state is not to be trusted: `spex check` found an events promise broken
/// for its harness version (a hook that never fired, a payload that did not decode). `None`
/// when its events passed.
pub fn state_unverified(env: &Env, record: &Session) -> Option<String> {
    let (h, version, off) = failed(env, record, "events")?;
    Some(format!(
        "`spex check` found that {} does not hold for {} {version}: trust its screen (`spex attach {}`)",
        promises(&off),
        h.id(),
        record.label()
    ))
}

/// The harness of `record`, its installed version, and the failures of capability `cap` for
/// it (`None` when there are none).
fn failed(
    env: &Env,
    record: &Session,
    cap: &str,
) -> Option<(&'static dyn Harness, String, Vec<checks::Failed>)> {
    let h = adapters::lookup(&record.harness)?;
    // No version of this harness failed `cap`: nothing to probe (`--version` starts a whole
    // runtime when the cache misses), the common case for `show` and `sessions`.
    let any = checks::load(&env.spex_home())
        .results
        .values()
        .any(|r| r.harness == h.id() && r.failed.iter().any(|f| f.capability == cap));
    if !any {
        return None;
    }
    let (binary, version) = installed(env, &record.tree, h)?;
    let off = checks::switched_off(&env.spex_home(), &binary, &version, cap);
    (!off.is_empty()).then_some((h, version, off))
}

fn promises(off: &[checks::Failed]) -> String {
    off.iter()
        .map(|f| format!("\"{}\"", f.promise))
        .collect::<Vec<_>>()
        .join(" and ")
}
