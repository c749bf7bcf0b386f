//! An error as `main` prints it: its message, the causes that add to it, and every hint its
//! chain carries, each naming sessions by their handles. The one place that knows which
//! errors carry hints; it decides no exit code and prints nothing.

use std::error::Error;

use crate::env::Env;
use crate::hint::{Hint, Hinted};
use crate::repo::RepoError;
use crate::runtime::RuntimeError;
use crate::seam::edit::MaterializeError;
use crate::seam::edit::block::BlockError;
use crate::seam::edit::json_edit::JsonError;
use crate::spec::SpecError;
use crate::store::stream::{CursorError, StreamError};

/// What `main` prints for an error: `error: ...`, then `Caused by: ...`, then `hint: ...`.
pub struct Report {
    pub error: String,
    /// The causes that say more than the message (module errors spell out their cause).
    pub causes: Vec<String>,
    /// Every hint of the chain, outermost first, each once.
    pub hints: Vec<String>,
}

/// `e` for a person: every full session id of any project it names is replaced by the
/// session's handle (the full id stays where it is part of a path), and control characters in
/// it are made visible (an error may quote a prompt or a question). Whichever layer wrote the
/// message, this is the one place a session is named for a person.
pub fn report(e: &anyhow::Error, env: &Env) -> Report {
    // This project's sessions first, then every project's: a command names sessions from
    // anywhere.
    let mut stores: Vec<crate::store::ProjectStore> =
        super::args::project(env).ok().into_iter().collect();
    for other in crate::store::all_projects(&env.spex_home()) {
        if stores.iter().all(|s| s.dir != other.dir) {
            stores.push(other);
        }
    }
    let human = |text: &str| {
        let text = super::output::human_text(text, &stores);
        match ADDRESSED_AS.get() {
            Some(host) => qualified(&text, host, &|w| names_session(&stores, w)),
            None => text,
        }
    };
    let error = human(&e.to_string());
    let causes = e
        .chain()
        .skip(1)
        .map(|c| human(&c.to_string()))
        .filter(|c| !error.contains(c.as_str()))
        .collect();
    let mut hints: Vec<String> = Vec::new();
    for hint in e.chain().filter_map(hint_of) {
        let hint = human(&hint);
        if !hints.contains(&hint) {
            hints.push(hint);
        }
    }
    Report {
        error,
        causes,
        hints,
    }
}

/// This machine's name on the caller's side while it runs a command for another spex (`spex
/// rpc --as NAME -- ...`): there its sessions are `NAME:handle`.
static ADDRESSED_AS: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Errors and hints name this machine's sessions as `name:handle`, so they work as printed
/// on the machine that asked.
pub fn address_as(name: &str) {
    let _ = ADDRESSED_AS.set(name.to_owned());
}

/// Whether `word` is exactly a session's id, handle or name in one of `stores` (a prefix is
/// not: a choice such as `a` must not read as session `a3`).
fn names_session(stores: &[crate::store::ProjectStore], word: &str) -> bool {
    stores.iter().any(|s| {
        s.resolve(word).is_ok_and(|id| {
            id == word
                || s.load(&id).ok().flatten().is_some_and(|r| {
                    r.handle.as_deref() == Some(word) || r.name.as_deref() == Some(word)
                })
        })
    })
}

/// `text` with every session `is_session` recognizes in a code span (a whole span, or a word
/// after a `spex` command's subcommand) named `host:session`.
fn qualified(text: &str, host: &str, is_session: &dyn Fn(&str) -> bool) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let parts: Vec<&str> = text.split('`').collect();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push('`');
        }
        // Inside backticks: the odd parts (an unclosed last one is left as it is).
        if i % 2 == 0 || i + 1 == parts.len() {
            out.push_str(part);
            continue;
        }
        let words: Vec<&str> = part.split(' ').collect();
        let first = if words.first() == Some(&"spex") { 2 } else { 0 };
        let whole = words.len() == 1;
        let mut span = Vec::with_capacity(words.len());
        for (n, w) in words.iter().enumerate() {
            let candidate = (whole || (first == 2 && n >= first)) && !w.starts_with('-');
            if candidate && !w.contains(':') && is_session(w) {
                span.push(format!("{host}:{w}"));
            } else {
                span.push((*w).to_owned());
            }
        }
        out.push_str(&span.join(" "));
    }
    out
}

/// The hint of one link of an error's chain: the link is one of the errors that carry hints.
fn hint_of(link: &(dyn Error + 'static)) -> Option<String> {
    macro_rules! hint_of_any {
        ($($t:ty),+ $(,)?) => {
            $(
                if let Some(e) = link.downcast_ref::<$t>() {
                    return e.hint();
                }
            )+
        };
    }
    // Every type that implements `Hint` (a test checks that none is missing).
    hint_of_any!(
        Hinted,
        RuntimeError,
        MaterializeError,
        BlockError,
        JsonError,
        SpecError,
        crate::config::ConfigError,
        crate::config::editor::EditorError,
        RepoError,
        crate::repo::diff::DiffError,
        CursorError,
        StreamError,
        crate::store::session::StoreError,
        crate::store::projects::LocateError,
        crate::pty::cassette::format::CassetteError,
        crate::pty::cassette::assertions::AssertionsError,
        crate::pty::cassette::assertions::eval::TestError,
        crate::pty::cassette::program::ProgramError,
        crate::adapters::AppServerError,
        crate::board::BoardError,
        crate::watch::service::ServiceError,
        crate::notify::AlreadyRunning,
        crate::remote::RemoteError,
        crate::check::CheckError,
        crate::remote::forward::ForwardError,
    );
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hints(e: &anyhow::Error) -> Vec<String> {
        e.chain().filter_map(hint_of).collect()
    }

    #[test]
    fn a_hint_is_found_at_any_depth_of_the_chain() {
        let inner = anyhow::Error::new(Hinted::new("the prompt is empty", "pass the text"));
        let e = inner.context("cannot deliver").context("session `a`");
        assert_eq!(hints(&e), vec!["pass the text".to_owned()]);
        let e = anyhow::Error::new(
            Hinted::new("`--older-than 5x` is not a duration", "e.g. `30d`")
                .caused_by(std::io::Error::other("unknown unit")),
        );
        assert_eq!(e.chain().count(), 2);
        assert_eq!(hints(&e), vec!["e.g. `30d`".to_owned()]);
    }

    #[test]
    fn sessions_in_code_spans_are_named_by_the_callers_host() {
        let is = |w: &str| w == "a3" || w == "fix-bug";
        assert_eq!(
            qualified(
                "answer it: `spex answer a3 <choice> --attention x1` (`spex show a3`), session `fix-bug`; a3 `a` `spex doctor`",
                "dev",
                &is
            ),
            "answer it: `spex answer dev:a3 <choice> --attention x1` (`spex show dev:a3`), session `dev:fix-bug`; a3 `a` `spex doctor`"
        );
        // A flag's value after a session word and an unclosed span stay as they are.
        assert_eq!(
            qualified("`spex a3` and `a3", "dev", &is),
            "`spex a3` and `a3"
        );
    }

    #[test]
    fn a_transparent_variant_answers_with_its_inner_errors_hint() {
        let e = anyhow::Error::new(MaterializeError::Repo(RepoError::NotARepo("/x".into())));
        assert_eq!(e.chain().count(), 1);
        assert_eq!(
            hints(&e),
            vec!["run spex from a git repository (or `git init` first)".to_owned()]
        );
    }

    /// A type that implements `Hint` but is not listed in `hint_of` would lose its hints
    /// silently: every `impl ... Hint for X` in `src/` names a type the list holds.
    #[test]
    fn every_error_with_hints_is_listed() {
        let listed = include_str!("report.rs");
        let listed = &listed[listed.find("hint_of_any!(\n").expect("the list")..];
        let listed = &listed[..listed.find(");").expect("its end")];
        let mut missing = Vec::new();
        let mut stack = vec![std::path::PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src"
        ))];
        while let Some(dir) = stack.pop() {
            for entry in fs_err::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                // Only Rust sources: `src/board/assets/` holds the page's images.
                if path.extension().is_none_or(|e| e != "rs") {
                    continue;
                }
                let text = fs_err::read_to_string(&path).unwrap();
                for line in text.lines() {
                    let Some((_, rest)) = line.split_once("Hint for ") else {
                        continue;
                    };
                    if !line.trim_start().starts_with("impl") {
                        continue;
                    }
                    let ty = rest.trim_end_matches(" {").trim();
                    if !listed.contains(&format!("{ty},")) && !listed.contains(&format!("::{ty},"))
                    {
                        missing.push(format!("{ty} ({})", path.display()));
                    }
                }
            }
        }
        assert!(missing.is_empty(), "not in `hint_of`: {missing:?}");
    }
}
