//! Capabilities `spex check` switched off: answering a permission or a question through spex
//! for a harness version whose check found that promise broken is refused with the reason,
//! leaving the terminal (`spex attach`), rather than used blind.

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
    let cap = capability(kind)?;
    let h = adapters::lookup(&record.harness)?;
    let (binary, version) = installed(env, &record.tree, h)?;
    let off = checks::switched_off(&env.spex_home(), &binary, &version, cap);
    let first = off.first()?;
    let promises: Vec<String> = off.iter().map(|f| format!("\"{}\"", f.promise)).collect();
    Some((
        format!(
            "answering through spex is switched off for {} {version}: `spex check` found that {} does not hold",
            h.id(),
            promises.join(" and ")
        ),
        format!(
            "{}; `spex check --harness {}` checks again",
            first.fallback,
            h.id()
        ),
    ))
}
