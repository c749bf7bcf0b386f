//! `spex clean`: the exact inverse of `materialize`.

use super::args::current_tree;
use super::outcome::Outcome;
use super::output;
use super::plan::{plan_and_apply, report};
use crate::env::Env;
use crate::materialize::Mode;

/// Remove everything `spex materialize` put into this checkout.
///
/// The exact inverse of `materialize`, byte for byte. Shared files go once no other checkout still
/// needs them. Removes only what carries spex's stamp; deletes a file or folder only if spex
/// created it and it is now empty.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Clean every checkout of the repository (main and linked worktrees).
    #[arg(long)]
    pub all_trees: bool,
    /// Change nothing; print the diff of what would be removed.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let tree = current_tree()?;
    let trees = if args.all_trees {
        // Worktrees first, so shared files (in the main checkout) go last.
        let mut all = tree.all_trees();
        all.rotate_left(1);
        all
    } else {
        vec![tree]
    };
    let mut plans = Vec::new();
    for t in trees {
        plans.push(plan_and_apply(env, t, Mode::Clean, !args.dry_run)?);
    }
    if args.dry_run && !args.json {
        output::print(
            &plans
                .iter()
                .map(crate::materialize::Plan::diff)
                .collect::<String>(),
        );
    } else {
        report(&plans, ("clean", "cleaned"), !args.dry_run, args.json, env);
    }
    Ok(Outcome::Ok)
}
