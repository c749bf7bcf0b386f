//! `spex init`: a configuration and a starter contract, then materialize.

use super::Outcome;
use super::materialize::{current_tree, plan_and_apply, report};
use crate::adapters;
use crate::config::PROJECT_FILE;
use crate::env::Env;
use crate::fsutil;
use crate::materialize::Mode;

/// Set spex up in this repository, then materialize.
///
/// Writes `spex.jsonc` (selecting the harnesses found on PATH, else all) and a starter
/// contract node under `.spec/`. Existing files are left alone, so running it twice changes
/// nothing.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

const STARTER: &str = include_str!("../../templates/contract.spec.md");

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let tree = current_tree()?;
    let config = tree.root.join(PROJECT_FILE);
    if !config.exists() {
        let mut found: Vec<&str> = adapters::all()
            .iter()
            .filter(|h| env.which(h.binary_name()).is_some())
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
    }
    let spec_dir = tree.root.join(".spec");
    if !spec_dir.exists() {
        fsutil::write_atomic(&spec_dir.join("contract/spec.md"), STARTER.as_bytes())?;
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
