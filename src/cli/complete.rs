//! Shell completion (clap's dynamic completion): the shell calls `spex` back with
//! `COMPLETE=<shell>`, and every `<id>` argument offers the project's live sessions by handle
//! and by name (outside any checkout, every project's, as `project/handle`). Reads records
//! only: a completion never writes to the store.

use std::ffi::OsStr;

use clap_complete::engine::{ArgValueCompleter, CompletionCandidate};

use crate::adapters;
use crate::env::Env;
use crate::store::session::Status;

/// The completer of an `<id>` argument.
pub fn sessions() -> ArgValueCompleter {
    ArgValueCompleter::new(live_sessions)
}

/// The handles and names of the project's live sessions that start with what is typed, each
/// with a line saying what the session is.
fn live_sessions(current: &OsStr) -> Vec<CompletionCandidate> {
    let Some(typed) = current.to_str() else {
        return Vec::new();
    };
    let env = Env::from_process(adapters::env_vars());
    // Outside any checkout, every project's sessions, each as `project/handle`.
    let projects: Vec<(crate::store::ProjectStore, String)> = match super::args::project(&env) {
        Ok(store) => vec![(store, String::new())],
        Err(_) => crate::store::projects::named(&env.spex_home())
            .into_iter()
            .map(|p| (p.store, format!("{}/", p.label)))
            .collect(),
    };
    let mut live: Vec<_> = projects
        .iter()
        .flat_map(|(store, prefix)| {
            store
                .sessions()
                .into_iter()
                .filter(|s| s.status != Status::Exited)
                .map(move |s| (prefix.as_str(), s))
        })
        .collect();
    live.sort_by(|(_, a), (_, b)| b.updated_at.cmp(&a.updated_at));
    let mut out = Vec::new();
    for (prefix, s) in &live {
        let about = format!(
            "{} {}{}",
            s.harness,
            s.status.as_str(),
            s.name
                .as_deref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        );
        // A session no reader has seen yet has no handle: its id is what names it.
        for word in [Some(s.label()), s.name.as_deref()].into_iter().flatten() {
            let word = format!("{prefix}{word}");
            if word.starts_with(typed) {
                out.push(CompletionCandidate::new(word).help(Some(about.clone().into())));
            }
        }
    }
    out
}

/// The completer of a remote's name (`spex remote check|remove`).
pub fn remotes() -> ArgValueCompleter {
    ArgValueCompleter::new(remote_names)
}

/// The configured remotes whose names start with what is typed, each with its destination.
fn remote_names(current: &OsStr) -> Vec<CompletionCandidate> {
    let Some(typed) = current.to_str() else {
        return Vec::new();
    };
    let env = Env::from_process(adapters::env_vars());
    crate::remote::remotes(&env)
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.name.starts_with(typed))
        .map(|r| CompletionCandidate::new(r.name).help(Some(r.dest.into())))
        .collect()
}

/// What `spex completions <shell>` prints: the script that registers spex's completion with
/// the shell (it calls this binary back for every completion).
pub fn registration(shell: clap_complete::Shell) -> anyhow::Result<String> {
    let name = shell.to_string();
    let shells = clap_complete::env::Shells::builtins();
    let completer = shells
        .completer(&name)
        .ok_or_else(|| anyhow::anyhow!("no dynamic completion for `{name}`"))?;
    let bin = super::args::spex_binary()?;
    let mut buf = Vec::new();
    completer.write_registration("COMPLETE", "spex", "spex", &bin.to_string_lossy(), &mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}
