//! Plans and applies `materialize` and `clean` for a checkout, and prints the plans: shared
//! by `init`, `materialize`, `clean` and `launch --worktree`; imports no subcommand.

use std::path::Path;

use super::output::{self, Style};
use crate::env::Env;
use crate::materialize::{Action, Inputs, Mode, Plan};
use crate::repo::Tree;
use crate::seam::edit::MaterializeError;

/// How often a plan is made again when a harness rewrote one of its files between plan and
/// write.
const ATTEMPTS: usize = 5;

/// Plans (and unless `write` is false, applies) one tree in `mode`.
pub fn plan_and_apply(env: &Env, tree: Tree, mode: Mode, write: bool) -> anyhow::Result<Plan> {
    let inputs = Inputs {
        env,
        tree,
        spex_bin: super::args::spex_binary()?,
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

/// Prints plans the way `materialize` and `clean` report them.
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

fn rel(path: &Path, tree: &Path) -> String {
    path.strip_prefix(tree)
        .map_or_else(|_| path.display().to_string(), |p| p.display().to_string())
}
