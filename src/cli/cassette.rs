//! `spex cassette check|export|test|spec`: verify a recording, turn it into an asciicast, judge
//! it against its assertion spec, or draft that spec.

use std::path::PathBuf;

use super::args::cassette_dir;
use super::outcome::{Failed, Outcome};
use super::output;
use crate::env::Env;
use crate::pty::cassette::Cassette;

/// Check, export or test a recorded session.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Verify a cassette: required files, version, digest, `seq` order, output tiling.
    Check {
        /// A cassette folder, or a recorded session's handle, name, id, or a unique prefix of
        /// a handle or id.
        #[arg(add = super::complete::sessions())]
        cassette: String,
    },
    /// Write an asciicast v2 file (`asciinema play FILE` plays it).
    Export {
        /// A cassette folder, or a recorded session's handle, name, id, or a unique prefix of
        /// a handle or id.
        #[arg(add = super::complete::sessions())]
        cassette: String,
        /// The asciicast file to write.
        #[arg(long, value_name = "FILE")]
        cast: PathBuf,
    },
    /// Replay cassettes collapsed and judge each against the `assertions.json` beside it.
    ///
    /// Prints a line per cassette that passes and, per failed predicate, the predicate, the
    /// screen nearest to the failure (its time and rows) and the service events around it.
    /// Exits 1 when any predicate fails or a spec is bound to another recording. The spec
    /// format is in docs/reference/assertions.md.
    Test {
        /// Cassette folders, recorded sessions, or folders to search for every cassette with an
        /// `assertions.json`.
        #[arg(required = true, add = super::complete::sessions())]
        cassettes: Vec<String>,
        /// Print the reports as JSON: a list of `{cassette, id, assertions, binding,
        /// failures: [{index, predicate, message, seq, t_ms, excerpt, events}]}`.
        #[arg(long)]
        json: bool,
    },
    /// Write a starter `assertions.json` from a recording, for a person to tighten: its
    /// service events (as marks and in order), final screen, state, exit and outcome.
    Spec {
        /// A cassette folder, or a recorded session's handle, name, id, or a unique prefix of
        /// a handle or id.
        #[arg(add = super::complete::sessions())]
        cassette: String,
        /// Replace an `assertions.json` that is there already.
        #[arg(long)]
        force: bool,
    },
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    match &args.action {
        Action::Check { cassette } => {
            let dir = cassette_dir(cassette, env)?;
            let c = Cassette::open(&dir)?;
            let problems = c.problems();
            if problems.is_empty() {
                output::print(&format!(
                    "{}: ok ({} records, {} output bytes)\n",
                    dir.display(),
                    c.records.len(),
                    c.output.len()
                ));
                Ok(Outcome::Ok)
            } else {
                // One problem a line, each naming the cassette, as a check lists them.
                let problems: Vec<String> = problems
                    .iter()
                    .map(|p| format!("{}: {p}", dir.display()))
                    .collect();
                Err(Failed::with(
                    Outcome::Differs,
                    anyhow::anyhow!(problems.join("\n")),
                ))
            }
        }
        Action::Test { cassettes, json } => super::cassette_test::run(cassettes, *json, env),
        Action::Spec { cassette, force } => {
            super::cassette_test::starter(&cassette_dir(cassette, env)?, *force)
        }
        Action::Export { cassette, cast } => {
            let c = Cassette::open(&cassette_dir(cassette, env)?)?;
            crate::fsutil::write_atomic(cast, c.asciicast().as_bytes())
                .map_err(|e| anyhow::anyhow!("`{}`: {e}", cast.display()))?;
            output::print(&format!("wrote {}\n", cast.display()));
            Ok(Outcome::Ok)
        }
    }
}
