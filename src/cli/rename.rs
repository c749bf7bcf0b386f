//! `spex rename`: give a session a name people can use wherever a session is asked for.

use super::outcome::Outcome;
use super::output;
use crate::env::Env;

/// Name a session (or take its name away with `--clear`).
///
/// A name is 1 to 40 letters, digits, `-` or `_`, starting with a letter, and unique among the
/// project's live sessions; a name an exited session held can be given again.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(value_name = "ID", help = super::args::ID_HELP, add = super::complete::sessions())]
    pub id: String,
    /// The new name.
    #[arg(required_unless_present = "clear", conflicts_with = "clear")]
    pub name: Option<String>,
    /// Remove the session's name.
    #[arg(long)]
    pub clear: bool,
    /// Print the record as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let (store, id) = super::args::project_and_id(env, &args.id)?;
    let s = store.set_name(&id, args.name.as_deref())?;
    if args.json {
        output::json(&s);
    } else {
        let handle = store.label_of(&id);
        output::print(&match &s.name {
            Some(name) => format!("{handle} is named {name}\n"),
            None => format!("{handle} has no name\n"),
        });
    }
    Ok(Outcome::Ok)
}
