//! `spex materialize`: render this tree's harness artifacts.

use std::path::Path;

use anyhow::Context;

use super::Outcome;
use super::output::{self, Style};
use crate::env::Env;
use crate::materialize::{Action, Inputs, Mode, Plan};
use crate::repo::Tree;
use crate::seam::edit::MaterializeError;

/// Render the selected harnesses' artifacts into this checkout.
///
/// The contract, skills, agents, hook shims and trust, in the main checkout or a linked
/// worktree. Writes only what differs.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Change nothing; exit 1 if anything would change.
    #[arg(long)]
    pub check: bool,
    /// Change nothing; print the diff of what would change.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn current_tree() -> anyhow::Result<Tree> {
    let cwd = std::env::current_dir().context("cannot read the current folder")?;
    Ok(Tree::discover(&cwd)?)
}

/// How often a plan is made again when a harness rewrote one of its files between plan and
/// write.
const ATTEMPTS: usize = 5;

/// Plans (and unless `write` is false, applies) one tree in `mode`.
pub fn plan_and_apply(env: &Env, tree: Tree, mode: Mode, write: bool) -> anyhow::Result<Plan> {
    let inputs = Inputs {
        env,
        tree,
        spex_bin: super::spex_binary()?,
    };
    let plan = inputs.locked(|| -> anyhow::Result<Plan> {
        let mut attempt = 1;
        loop {
            let mut plan = inputs.plan(mode)?;
            if !write {
                return Ok(plan);
            }
            match plan.apply() {
                Err(MaterializeError::Changed(_)) if attempt < ATTEMPTS => attempt += 1,
                other => return other.map(|()| plan).map_err(Into::into),
            }
        }
    })??;
    Ok(plan)
}

fn rel(path: &Path, tree: &Path) -> String {
    path.strip_prefix(tree)
        .map_or_else(|_| path.display().to_string(), |p| p.display().to_string())
}

/// Prints a plan the way `materialize` and `clean` report it.
pub fn report(plans: &[Plan], verb: (&str, &str), written: bool, json: bool, env: &Env) {
    if json {
        let items: Vec<_> = plans
            .iter()
            .map(|p| {
                serde_json::json!({
                    "tree": p.tree,
                    "harnesses": p.harnesses,
                    "changed": !p.is_empty(),
                    "receipt_changed": p.receipt_changed,
                    "written": written && !p.is_empty(),
                    "changes": p.changes,
                    "warnings": p.warnings,
                })
            })
            .collect();
        if items.len() == 1 {
            output::json(&items[0]);
        } else {
            output::json(&items);
        }
        return;
    }
    let style = Style::detect(env.no_color);
    let mut text = String::new();
    for p in plans {
        for w in &p.warnings {
            eprintln!("warning: {w}");
        }
        if p.is_empty() {
            text.push_str(&format!("{}: up to date\n", p.tree.display()));
            continue;
        }
        let head = if written {
            verb.1.to_owned()
        } else {
            format!("would {}", verb.0)
        };
        let n = p.changes.len() + usize::from(p.receipt_changed);
        text.push_str(&format!(
            "{}: {head} ({n} change{})\n",
            p.tree.display(),
            if n == 1 { "" } else { "s" }
        ));
        let rows: Vec<Vec<String>> = p
            .changes
            .iter()
            .map(|c| {
                let action = match c.action {
                    Action::Create | Action::Mkdir => {
                        style.green(&format!("{:?}", c.action).to_lowercase())
                    }
                    Action::Delete | Action::Rmdir => {
                        style.red(&format!("{:?}", c.action).to_lowercase())
                    }
                    Action::Modify => style.yellow("modify"),
                };
                vec![format!("  {action}"), rel(&c.path, &p.tree)]
            })
            .collect();
        text.push_str(&output::table(&rows));
        if p.receipt_changed {
            text.push_str("  dispatch receipt (selection, policies, spec index)\n");
        }
    }
    output::print(&text);
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let tree = current_tree()?;
    let write = !(args.check || args.dry_run);
    let plan = plan_and_apply(env, tree, Mode::Materialize, write)?;
    if args.dry_run && !args.json {
        output::print(&plan.diff());
    } else {
        report(
            std::slice::from_ref(&plan),
            ("materialize", "materialized"),
            write,
            args.json,
            env,
        );
    }
    Ok(if args.check && !plan.is_empty() {
        Outcome::Differs
    } else {
        Outcome::Ok
    })
}
