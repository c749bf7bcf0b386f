//! `spex cassette check|export`: verify a recording, or turn it into an asciicast.

use std::path::PathBuf;

use super::args::cassette_dir;
use super::outcome::{Failed, Outcome};
use super::output;
use crate::env::Env;
use crate::pty::cassette::Cassette;

/// Check or export a recorded session.
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
        Action::Export { cassette, cast } => {
            let c = Cassette::open(&cassette_dir(cassette, env)?)?;
            crate::fsutil::write_atomic(cast, c.asciicast().as_bytes())
                .map_err(|e| anyhow::anyhow!("`{}`: {e}", cast.display()))?;
            output::print(&format!("wrote {}\n", cast.display()));
            Ok(Outcome::Ok)
        }
    }
}
