//! Starting a session's harness, shared by `launch`, `resume` and `attach`: the harness, its
//! binary and this terminal's size resolved into a launch, and what a start prints. Imports no
//! subcommand.

use std::time::Duration;

use super::args::current_tree;
use super::output;
use crate::adapters;
use crate::config;
use crate::env::Env;
use crate::hint::Hinted;
use crate::pty::session::Size;
use crate::runtime::{self, Launch};
use crate::store::ProjectStore;
use crate::store::session::Session;

/// Resolves the harness (by id, else the configured default), its binary and arguments, and
/// this terminal's size into what the runtime needs.
pub fn resolve<'e>(
    env: &'e Env,
    tree: &crate::repo::Tree,
    harness: Option<&str>,
    ready_timeout: Duration,
    record: bool,
) -> anyhow::Result<Launch<'e>> {
    let known = adapters::known();
    let cfg = config::load(
        &env.user_config_file(),
        &config::source_root(&tree.root, &tree.main),
        &known,
    )?;
    let id = harness.unwrap_or(cfg.default_harness);
    let harness = adapters::lookup(id).ok_or_else(|| {
        Hinted::new(
            format!("unknown harness `{id}`"),
            format!("one of {}", known.ids.join(", ")),
        )
    })?;
    let configured = cfg.harness.get(harness.id());
    let program = configured
        .and_then(|c| c.command.clone())
        .unwrap_or_else(|| harness.identity().binary.to_owned());
    let binary = env.which(&program).ok_or_else(|| {
        Hinted::new(
            format!("`{program}` not found on PATH"),
            format!(
                "install it, or set `harness.{}.command` in spex.jsonc",
                harness.id()
            ),
        )
    })?;
    let size = rustix::termios::tcgetwinsize(std::io::stdout())
        .ok()
        .filter(|s| s.ws_row > 0 && s.ws_col > 0)
        .map_or(
            Size {
                rows: 40,
                cols: 120,
            },
            |s| Size {
                rows: s.ws_row,
                cols: s.ws_col,
            },
        );
    Ok(Launch {
        env,
        harness,
        binary,
        args: configured.map(|c| c.args.clone()).unwrap_or_default(),
        tree: tree.clone(),
        spex_bin: super::args::spex_binary()?,
        size,
        ready_timeout,
        record: record || cfg.record,
    })
}

/// What starting a terminal for `record`'s session again needs (its tree, harness, binary,
/// this terminal's size).
pub fn relaunch<'e>(
    env: &'e Env,
    record: &Session,
    ready_timeout: Duration,
) -> anyhow::Result<Launch<'e>> {
    let tree = crate::repo::Tree::discover(&record.tree).or_else(|_| current_tree())?;
    resolve(env, &tree, Some(&record.harness), ready_timeout, false)
}

/// Prints what `launch` and `resume` started: the session's handle and the commands that
/// reach it (with `--detach`), or `{session: {id, handle, name, socket, host_pid, child_pid},
/// delivery}` with `--json`.
pub fn report(
    store: &ProjectStore,
    json: bool,
    detach: bool,
    launched: &runtime::Launched,
    delivery: Option<&runtime::Delivery>,
) {
    let handle = store.label_of(&launched.id);
    let name = store.load(&launched.id).ok().flatten().and_then(|s| s.name);
    if json {
        let mut session = serde_json::to_value(launched).expect("serializes");
        session["handle"] = handle.into();
        session["name"] = name.into();
        output::json(&serde_json::json!({ "session": session, "delivery": delivery }));
    } else if detach {
        let named = name.map(|n| format!(" ({n})")).unwrap_or_default();
        output::print(&format!(
            "{handle}{named}\n  attach:  spex attach {handle}\n  deliver: spex deliver {handle} \"<prompt>\"\n"
        ));
    }
}
