//! `spex materialize`: render this tree's harness artifacts.

use super::args::current_tree;
use super::outcome::Outcome;
use super::output;
use super::plan::{plan_and_apply, report};
use crate::env::Env;
use crate::materialize::Mode;

/// Render the selected harnesses' artifacts into this checkout.
///
/// The contract, skills, agents, commands, hook shims and trust, in the main checkout or a linked
/// worktree. Writes only what differs; `--check` exits 1 when something would change.
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
