//! `spex diff`: what a session changed: its checkout against the commit it started from, with
//! the files its own tools touched marked. The diff is git's (`repo::diff`); this file marks it.

use std::collections::BTreeSet;

use super::outcome::Outcome;
use super::output::{self, Style};
use crate::env::Env;
use crate::hint::Hinted;
use crate::repo::Tree;
use crate::repo::diff::{Diff, FileChange, Form};
use crate::store::session::Session;

/// Show what a session changed: its worktree against the commit it started from.
///
/// Committed and uncommitted changes together (untracked files as added), as git prints them:
/// the stat, then the patch; in colour on a terminal, never with `NO_COLOR`. In the stat and
/// in `--name-only`, `*` marks the files the session's own tools edited (its touched-files
/// ledger); the others changed some other way (a command it ran, a person, a commit). The base
/// is the commit the checkout's HEAD named when spex first saw the session (its launch, or
/// its first hook). Nothing in the repository changes: git runs on a copy of the index.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(value_name = "ID", help = super::args::ID_HELP, add = super::complete::sessions())]
    pub id: String,
    /// Only the stat (a line per file, marked, and the totals).
    #[arg(long, conflicts_with = "name_only")]
    pub stat: bool,
    /// Only the changed files' paths, one a line (`* ` before those the session touched).
    #[arg(long)]
    pub name_only: bool,
    /// Print `{session, tree, base, files: [{path, old_path, status, added, removed, binary,
    /// touched_by_session}], touched}` as JSON.
    #[arg(long, conflicts_with_all = ["stat", "name_only"])]
    pub json: bool,
    /// Limit the diff to these paths (relative to the session's worktree).
    #[arg(last = true, value_name = "PATH")]
    pub paths: Vec<String>,
}

#[derive(serde::Serialize)]
struct Changed<'a> {
    #[serde(flatten)]
    file: &'a FileChange,
    touched_by_session: bool,
}

/// The session's checkout and base commit, or why there is no diff to show.
fn checkout_and_base(s: &Session) -> anyhow::Result<(Tree, String)> {
    let label = s.label();
    if s.tree_gone() {
        anyhow::bail!(Hinted::new(
            format!(
                "the worktree of session `{label}` is gone (`{}`)",
                s.tree.display()
            ),
            "a removed worktree has no diff; `git log` in the project shows what was committed"
        ));
    }
    let Some(base) = s.base_commit.clone() else {
        anyhow::bail!(Hinted::new(
            format!("session `{label}` has no base commit recorded"),
            "spex records it from this version on, when a session starts; for an older session run `git diff <commit>` in its worktree"
        ));
    };
    Ok((Tree::discover(&s.tree)?, base))
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let (store, id) = super::args::project_and_id(env, &args.id)?;
    let s = store
        .load(&id)?
        .ok_or_else(|| crate::store::session::StoreError::NotFound(id.clone()))?;
    let (tree, base) = checkout_and_base(&s)?;
    let diff = Diff::new(&tree, &base, &args.paths)?;
    let files = diff.files()?;
    let touched: BTreeSet<&str> = s.touched.iter().map(String::as_str).collect();
    let marks: Vec<bool> = files
        .iter()
        .map(|f| touched.contains(f.path.as_str()))
        .collect();
    if args.json {
        let listed: Vec<Changed> = files
            .iter()
            .zip(&marks)
            .map(|(file, &touched_by_session)| Changed {
                file,
                touched_by_session,
            })
            .collect();
        output::json(&serde_json::json!({
            "session": s.id,
            "tree": s.tree,
            "base": base,
            "files": listed,
            "touched": s.touched,
        }));
        return Ok(Outcome::Ok);
    }
    if files.is_empty() {
        output::print(&format!(
            "no changes in `{}` since {}\n",
            s.tree.display(),
            short(&base)
        ));
        return Ok(Outcome::Ok);
    }
    let form = match (args.stat, args.name_only) {
        (true, _) => Form::Stat,
        (_, true) => Form::NameOnly,
        _ => Form::Patch,
    };
    let color = Style::detect(env.no_color).color;
    let text = diff.text(form, color)?;
    output::print(&marked(&text, form, &marks));
    Ok(Outcome::Ok)
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// Git's output with the touched files marked: a `*` in the first column of their stat lines
/// (where git writes a space), `* ` or two spaces before each name of `--name-only`; a line
/// saying what the mark means after a stat. The stat lists the files in the order of `marks`
/// (both are git's one diff queue), so the n-th line is the n-th file whatever git shortened
/// its name to.
fn marked(text: &str, form: Form, marks: &[bool]) -> String {
    let mut out = String::with_capacity(text.len() + marks.len() * 2);
    let mut lines = text.split_inclusive('\n');
    for &mark in marks {
        let Some(line) = lines.next() else { break };
        match form {
            Form::NameOnly => {
                out.push_str(if mark { "* " } else { "  " });
                out.push_str(line);
            }
            Form::Stat | Form::Patch => match line.strip_prefix(' ') {
                Some(rest) if mark => {
                    out.push('*');
                    out.push_str(rest);
                }
                _ => out.push_str(line),
            },
        }
    }
    if form != Form::NameOnly {
        // The totals line, then the legend where git leaves a blank line before the patch.
        if let Some(totals) = lines.next() {
            out.push_str(totals);
        }
        if marks.iter().any(|m| *m) {
            out.push_str("(* edited by the session's own tools)\n");
        }
    }
    out.extend(lines);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touched_files_are_marked_by_their_place_in_the_stat() {
        let stat = " a.rs    | 2 +-\n .../long/name.rs | 1 +\n 2 files changed, 2 insertions(+), 1 deletion(-)\n\ndiff --git a/a.rs b/a.rs\n";
        assert_eq!(
            marked(stat, Form::Patch, &[false, true]),
            " a.rs    | 2 +-\n*.../long/name.rs | 1 +\n 2 files changed, 2 insertions(+), 1 deletion(-)\n(* edited by the session's own tools)\n\ndiff --git a/a.rs b/a.rs\n"
        );
        assert_eq!(
            marked("a.rs\nb.rs\n", Form::NameOnly, &[true, false]),
            "* a.rs\n  b.rs\n"
        );
        let plain = " a.rs | 1 +\n 1 file changed, 1 insertion(+)\n";
        assert_eq!(marked(plain, Form::Stat, &[false]), plain);
    }
}
