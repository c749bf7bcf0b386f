//! `spex init`: a configuration and a starter contract, then materialize.

use super::args::current_tree;
use super::outcome::Outcome;
use super::output;
use super::plan::{plan_and_apply, report};
use crate::adapters;
use crate::config::{LOCAL_FILE, PROJECT_FILE};
use crate::env::Env;
use crate::fsutil;
use crate::hint::Hinted;
use crate::materialize::Mode;

/// Set spex up in this repository, then materialize.
///
/// Writes `spex.jsonc` (selecting the harnesses found on PATH, else all) and a starter contract
/// node, `.spec/contract/spec.md`, adds `/spex.local.jsonc` to `.git/info/exclude`, materializes,
/// and says what it wrote, the trust entries it holds in your home, and what to commit
/// (`spex.jsonc` and `.spec/`). Existing files are left alone, so running it twice changes nothing.
/// In a linked worktree it writes no configuration: it materializes from the main checkout's setup,
/// or says to run it there.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

const STARTER: &str = include_str!("../../templates/contract.spec.md");

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let tree = current_tree()?;
    if tree.root != tree.main {
        return in_worktree(args, env, tree);
    }
    let mut said: Vec<String> = Vec::new();
    let config = tree.root.join(PROJECT_FILE);
    if config.exists() {
        said.push(format!("kept    {PROJECT_FILE} (it exists)"));
    } else {
        let mut found: Vec<&str> = adapters::all()
            .iter()
            .filter(|h| env.which(h.identity().binary).is_some())
            .map(|h| h.id())
            .collect();
        if found.is_empty() {
            found = adapters::all().iter().map(|h| h.id()).collect();
        }
        let list = found
            .iter()
            .map(|id| format!("\"{id}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let text = format!(
            "// spex configuration (JSON with comments). See `spex --help`.\n{{\n  // Harnesses to materialize: {}\n  \"harnesses\": [{list}],\n  \"defaultHarness\": \"{}\",\n  \"policies\": {{\n    // off | nudge | block: before the first edit of a governed file\n    \"specFirst\": \"nudge\",\n    // off | ask: ask an agent that stops without declaring done/park/ask\n    \"stopGate\": \"off\"\n  }}\n}}\n",
            adapters::all()
                .iter()
                .map(|h| h.id())
                .collect::<Vec<_>>()
                .join(", "),
            found[0],
        );
        fsutil::write_atomic(&config, text.as_bytes())?;
        said.push(format!(
            "wrote   {PROJECT_FILE} (harnesses: {})",
            found.join(", ")
        ));
    }
    let spec_dir = tree.root.join(".spec");
    if spec_dir.exists() {
        said.push("kept    .spec/ (it exists)".to_owned());
    } else {
        fsutil::write_atomic(&spec_dir.join("contract/spec.md"), STARTER.as_bytes())?;
        said.push("wrote   .spec/contract/spec.md (the starter contract)".to_owned());
    }
    if exclude_local(&tree)? {
        said.push(format!(
            "added   /{LOCAL_FILE} to `{}` (personal settings stay out of git)",
            tree.common_dir.join("info/exclude").display()
        ));
    }
    let plan = plan_and_apply(env, tree.clone(), Mode::Materialize, true)?;
    if args.json {
        report(
            std::slice::from_ref(&plan),
            ("materialize", "materialized"),
            true,
            true,
            env,
        );
        return Ok(Outcome::Ok);
    }
    let mut text = format!("spex init in {}\n", tree.root.display());
    for line in &said {
        text.push_str(&format!("  {line}\n"));
    }
    output::print(&text);
    report(
        std::slice::from_ref(&plan),
        ("materialize", "materialized"),
        true,
        false,
        env,
    );
    let store = crate::store::ProjectStore::new(&env.spex_home(), &tree.main);
    let mut text = String::new();
    let trust = granted(&store, &tree.main, env);
    if !trust.is_empty() {
        text.push_str("trust spex holds in your home (`spex clean` takes it back):\n");
        for line in trust {
            text.push_str(&format!("  {line}\n"));
        }
    }
    text.push_str(&format!(
        "next: commit the project's setup, so every clone and worktree gets it:\n  git add {PROJECT_FILE} .spec && git commit -m \"spex: project contract\"\n"
    ));
    output::print(&text);
    Ok(Outcome::Ok)
}

/// `init` in a linked worktree: the project is set up in its main checkout. When that is
/// done (committed or not), this worktree is materialized from it; else init says where to
/// run it. Never a second, diverging `spex.jsonc` here.
fn in_worktree(args: &Args, env: &Env, tree: crate::repo::Tree) -> anyhow::Result<Outcome> {
    let source = crate::config::source_root(&tree.root, &tree.main);
    let here_or_main =
        |root: &std::path::Path| root.join(PROJECT_FILE).is_file() || root.join(".spec").is_dir();
    if !here_or_main(&source) {
        anyhow::bail!(Hinted::new(
            format!(
                "{} is a linked worktree of {}: spex is set up once, in the main checkout",
                tree.root.display(),
                tree.main.display()
            ),
            format!(
                "`cd {} && spex init`, then `spex materialize` here",
                tree.main.display()
            )
        ));
    }
    if source != tree.root {
        eprintln!(
            "note: {} is a linked worktree; it reads {PROJECT_FILE} and .spec/ from the main checkout {} until its branch has them",
            tree.root.display(),
            tree.main.display()
        );
    }
    let plan = plan_and_apply(env, tree, Mode::Materialize, true)?;
    report(
        std::slice::from_ref(&plan),
        ("materialize", "materialized"),
        true,
        args.json,
        env,
    );
    Ok(Outcome::Ok)
}

/// Adds `/spex.local.jsonc` to the repository's `info/exclude` unless git already ignores it;
/// whether it did.
fn exclude_local(tree: &crate::repo::Tree) -> anyhow::Result<bool> {
    let ignored = std::process::Command::new("git")
        .arg("-C")
        .arg(&tree.root)
        .args(["check-ignore", "-q", "--no-index", LOCAL_FILE])
        .status()
        .is_ok_and(|s| s.success());
    if ignored {
        return Ok(false);
    }
    let path = tree.common_dir.join("info/exclude");
    let mut text = fsutil::read_opt(&path)?
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!("/{LOCAL_FILE}\n"));
    fsutil::write_atomic(&path, text.as_bytes())?;
    Ok(true)
}

/// The entries spex added to files outside the project (the home's harness configuration),
/// as `file: key = value` lines; many entries of one kind (a trusted hash per hook) in one.
fn granted(store: &crate::store::ProjectStore, main: &std::path::Path, env: &Env) -> Vec<String> {
    let owned = crate::seam::edit::owned::Owned::load(
        fsutil::read_opt(&store.owned_file())
            .ok()
            .flatten()
            .as_deref(),
    );
    let home = env.home.clone().unwrap_or_default();
    let show = |p: &std::path::Path| match p.strip_prefix(&home) {
        Ok(rel) if !home.as_os_str().is_empty() => format!("~/{}", rel.display()),
        _ => p.display().to_string(),
    };
    let key = |k: &[String]| {
        k.iter()
            .map(|part| {
                if part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    part.clone()
                } else {
                    format!("{part:?}")
                }
            })
            .collect::<Vec<_>>()
            .join(".")
    };
    let mut out = Vec::new();
    for (file, j) in &owned.json {
        if file.starts_with(main) {
            continue;
        }
        for (k, v) in &j.written {
            out.push(format!("{}: {} = {v}", show(file), key(k)));
        }
        for (k, elements) in &j.elements {
            let n = elements.len();
            let s = if n == 1 { "" } else { "s" };
            out.push(format!(
                "{}: {} holds {n} element{s} of spex's",
                show(file),
                key(k)
            ));
        }
    }
    for (file, t) in &owned.toml {
        if file.starts_with(main) {
            continue;
        }
        // Grouped by the first and last key: one line for the per-hook trusted hashes.
        let mut groups: Vec<(String, String, Vec<&crate::seam::edit::toml_entries::Entry>)> =
            Vec::new();
        for e in &t.entries {
            let first = e.key.first().cloned().unwrap_or_default();
            let last = e.key.last().cloned().unwrap_or_default();
            match groups.iter_mut().find(|g| g.0 == first && g.1 == last) {
                Some(g) => g.2.push(e),
                None => groups.push((first, last, vec![e])),
            }
        }
        for (first, last, entries) in groups {
            if let [e] = entries.as_slice() {
                out.push(format!("{}: {} = {:?}", show(file), key(&e.key), e.value));
            } else {
                out.push(format!(
                    "{}: {first}.….{last} × {} (one per spex hook)",
                    show(file),
                    entries.len()
                ));
            }
        }
    }
    out
}
