//! `spex slash`: each harness's `/` menu.

use super::args::current_tree;
use super::outcome::Outcome;
use super::output;
use crate::adapters;
use crate::env::Env;
use crate::hint::Hinted;
use crate::seam::Harness;
use crate::seam::files::SlashEntry;

/// List each harness's `/` menu.
///
/// The pinned version's built-ins, then the project's and the user's commands and skills. Gemini
/// CLI: the 42 built-ins its `/help` lists with default settings, `/oncall` when it takes itself
/// for a nightly build (no `version` in the nearest `package.json`), then the skills (each a `/`
/// command there), then the user's and the project's `.gemini/commands/`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this harness (an id `spex doctor` lists).
    #[arg(long = "harness", value_name = "ID")]
    pub harness: Option<String>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let tree = current_tree()?;
    let harnesses: Vec<&dyn Harness> = match &args.harness {
        Some(id) => vec![adapters::lookup(id).ok_or_else(|| {
            let known: Vec<&str> = adapters::all().iter().map(|h| h.id()).collect();
            Hinted::new(
                format!("unknown harness `{id}`"),
                format!("use one of {}", known.join(", ")),
            )
        })?],
        None => adapters::all().to_vec(),
    };
    if args.json {
        let map: serde_json::Map<String, serde_json::Value> = harnesses
            .iter()
            .map(|h| {
                (
                    h.id().to_owned(),
                    serde_json::to_value(slash_menu(*h, &tree.root, env))
                        .expect("entries serialize"),
                )
            })
            .collect();
        output::json(&map);
        return Ok(Outcome::Ok);
    }
    let mut text = String::new();
    for h in harnesses {
        text.push_str(&format!("{}:\n", h.id()));
        let rows: Vec<Vec<String>> = slash_menu(h, &tree.root, env)
            .into_iter()
            .map(|e| {
                let prefix = if e.name.starts_with('$') { "" } else { "/" };
                vec![format!("  {prefix}{}", e.name), e.kind, e.description]
            })
            .collect();
        text.push_str(&output::table(&rows));
    }
    output::print(&text);
    Ok(Outcome::Ok)
}

/// A harness's `/` menu (empty for one spex writes no files for).
fn slash_menu(h: &dyn Harness, tree: &std::path::Path, env: &Env) -> Vec<SlashEntry> {
    h.files()
        .map(|f| f.slash_menu(tree, env))
        .unwrap_or_default()
}
