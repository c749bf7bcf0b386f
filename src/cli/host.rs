//! `spex host` (hidden): the PTY host process `spex launch` starts for one session.

use std::path::PathBuf;

use anyhow::Context;

use super::outcome::Outcome;
use crate::adapters;
use crate::env::Env;
use crate::log::log;
use crate::pty::session::{Size, Spawn};
use crate::repo::Tree;
use crate::runtime::host::{self, HostSpec};
use crate::store::ProjectStore;

/// Run one session's PTY host (started by `spex launch`; not for people).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(long)]
    pub session: String,
    #[arg(long)]
    pub harness: String,
    #[arg(long)]
    pub tree: PathBuf,
    #[arg(long)]
    pub socket: PathBuf,
    /// Record a cassette into this folder.
    #[arg(long)]
    pub record: Option<PathBuf>,
    #[arg(long, default_value_t = 40)]
    pub rows: u16,
    #[arg(long, default_value_t = 120)]
    pub cols: u16,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    pub argv: Vec<String>,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let harness = adapters::lookup(&args.harness)
        .with_context(|| format!("unknown harness `{}`", args.harness))?;
    let terminal = harness
        .terminal()
        .with_context(|| format!("spex hosts no terminal of harness `{}`", args.harness))?;
    let tree = Tree::discover(&args.tree)?;
    // The launcher read this configuration already; should it have changed into something
    // invalid since, the session still runs (without the extra scrub rules).
    let scrub = match crate::config::load(
        &env.user_config_file(),
        &crate::config::source_root(&tree.root, &tree.main),
        &adapters::known(),
    ) {
        Ok(cfg) => cfg.scrub,
        Err(e) => {
            log!("error: {}", crate::hint::spelled(&e));
            Vec::new()
        }
    };
    let spec = HostSpec {
        record: args.record.clone(),
        id: args.session.clone(),
        harness,
        terminal,
        store: ProjectStore::new(&env.spex_home(), &tree.main),
        socket: args.socket.clone(),
        spawn: Spawn {
            argv: args.argv.iter().map(Into::into).collect(),
            cwd: tree.root.clone(),
            env_clear: false,
            env: Vec::new(),
            env_remove: Vec::new(),
            size: Size {
                rows: args.rows,
                cols: args.cols,
            },
        },
        scrub,
        // A harness with a server holds the session there; its UI is one client of it.
        program_is_session: !harness.capabilities().server,
    };
    let exit = host::run(&spec)?;
    log!("session {} ended: {exit:?}", args.session);
    Ok(Outcome::Ok)
}
