//! `spex doctor`: what is installed, and whether each harness will really call spex.

use std::path::PathBuf;

use super::args::current_tree;
use super::outcome::Outcome;
use super::output::{self, Style};
use crate::adapters;
use crate::config;
use crate::env::Env;
use crate::materialize::{Inputs, Mode};
use crate::seam::Harness;
use crate::seam::edit::shell_quote;
use crate::seam::files::{Check, DoctorCtx, Status};
use crate::store::ProjectStore;

/// Check the installation of each harness.
///
/// Per harness: binary and version, then what its adapter checks (hook shims present and pointing
/// at this spex, the trust the harness needs to run them). Exits 1 when a check fails.
///
/// Codex: trust as the real `codex app-server` `hooks/list` reports it. Claude Code: its trust.
/// Gemini CLI, per checkout: this checkout's own `.gemini/settings.json` shims; its folder trust as
/// Gemini decides it (fails when untrusted or distrusted); spex's hook fingerprints recorded (a
/// warning); Gemini's own switches (`hooksConfig.enabled: false`, or `hooksConfig.disabled` naming
/// `spex` or a spex command) fail.
///
/// Then pending changes (a checkout never materialized, such as a worktree made with `git worktree
/// add`, fails), git excludes (spex's per-checkout file, a stale copy of your global excludes, a
/// `core.excludesFile` of your own in `config.worktree`), and the project's server (running: pid,
/// uptime, threads; a warning when it runs without its supervisor or does not answer).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

fn mark(style: Style, status: Status) -> String {
    match status {
        Status::Ok => style.green("ok"),
        Status::Warn => style.yellow("warn"),
        Status::Fail => style.red("FAIL"),
    }
}

/// The project's server of one harness: not running, running (pid, uptime, threads), or
/// running without its supervisor or not answering (a warning with what to run).
fn server_check(server: &crate::runtime::harness_server::Server) -> Check {
    let st = server.status();
    let name = format!("{} server", st.harness);
    let Some(pid) = st.pid.filter(|_| st.running) else {
        return Check::new(&name, Status::Ok, "not running");
    };
    let up = st
        .uptime_s
        .map(|s| format!(", up {}", crate::runtime::harness_server::duration_words(s)))
        .unwrap_or_default();
    let what = format!("pid {pid}{up}, {} thread(s)", st.threads.len());
    if !st.answers {
        return Check::new(
            &name,
            Status::Warn,
            format!(
                "running ({what}) but not answering on `{}`\nhint: `spex server stop` stops it; the next `spex launch` starts a new one",
                st.socket.display()
            ),
        );
    }
    if !st.supervised {
        return Check::new(
            &name,
            Status::Warn,
            format!("running ({what}) without its supervisor\nhint: `spex server stop` stops it"),
        );
    }
    Check::new(
        &name,
        Status::Ok,
        format!("running ({what}); `spex server` says more"),
    )
}

/// How git keeps spex's generated files out of `git status` in this checkout.
fn excludes_check(env: &Env, tree: &crate::repo::Tree) -> Check {
    use crate::materialize::excludes::Health;
    match crate::materialize::excludes::health(env, tree) {
        Health::Unset => Check::new(
            "git excludes",
            Status::Ok,
            "spex sets no excludes file in this checkout (it generated nothing here)",
        ),
        Health::Current { file, user } => Check::new(
            "git excludes",
            Status::Ok,
            format!(
                "`core.excludesFile` in this checkout's `config.worktree` names `{}`: your excludes from `{}`, then the files spex generated here (other checkouts are not affected)",
                file.display(),
                user.display()
            ),
        ),
        Health::Stale { file, user } => Check::new(
            "git excludes",
            Status::Warn,
            format!(
                "`{}` changed since spex copied it into `{}`, which git reads in its place in this checkout, so git here does not see your change yet\nhint: run `spex materialize`",
                user.display(),
                file.display()
            ),
        ),
        Health::Users { config, value } => Check::new(
            "git excludes",
            Status::Warn,
            format!(
                "`{}` sets `core.excludesFile = {value}` of your own, so spex leaves git's excludes here alone and the files it generated show in `git status`\nhint: add the files spex generated here to `{value}` (`spex clean --dry-run` lists them)",
                config.display()
            ),
        ),
    }
}

/// The first check of every harness: its binary found, and its version against the pinned one.
pub fn check_binary(h: &dyn Harness, ctx: &DoctorCtx) -> Check {
    let Some(bin) = &ctx.binary else {
        return Check::new(
            "binary",
            Status::Warn,
            format!("`{}` not found on PATH", h.identity().binary),
        );
    };
    let inst = crate::check::Installed {
        binary: bin.clone(),
        version: crate::env::version_output(bin).and_then(|o| (h.identity().parse_version)(&o)),
    };
    // What `spex check` found for this binary at this version, when it is not the pinned one
    // or a check failed.
    if let Some(note) = crate::check::standing_note(&ctx.env.spex_home(), h, &inst) {
        return Check::new("binary", Status::Warn, note);
    }
    match inst.version {
        Some(v) if v == h.identity().version => {
            Check::new("binary", Status::Ok, format!("{} {v}", bin.display()))
        }
        Some(v) => Check::new(
            "binary",
            Status::Ok,
            format!(
                "{} {v}; spex was verified against {}, and `spex check` passed for this version",
                bin.display(),
                h.identity().version
            ),
        ),
        None => Check::new(
            "binary",
            Status::Warn,
            format!("{}: cannot read its version", bin.display()),
        ),
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "the checks in the order the report prints them, per harness then for the project, all adding to one report"
)]
pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let tree = current_tree()?;
    let cfg = config::load(
        &env.user_config_file(),
        &config::source_root(&tree.root, &tree.main),
        &adapters::known(),
    )?;
    let store = ProjectStore::new(&env.spex_home(), &tree.main);
    let here = store.selected_by([tree.root.as_path()]);
    let roots: Vec<PathBuf> = tree.all_trees().into_iter().map(|t| t.root).collect();
    let anywhere = store.selected_by(roots.iter().map(PathBuf::as_path));
    let spex = shell_quote(&super::args::spex_binary()?.to_string_lossy());
    let inputs = Inputs {
        env,
        tree: tree.clone(),
        spex_bin: super::args::spex_binary()?,
    };
    let spellings = inputs.main_spellings(&store);
    let mut report = serde_json::Map::new();
    let mut failed = false;
    let style = Style::detect(env.no_color);
    let mut text = String::new();
    for h in adapters::all() {
        let binary: Option<PathBuf> =
            match cfg.harness.get(h.id()).and_then(|c| c.command.as_deref()) {
                Some(cmd) => env.which(cmd),
                None => env.which(h.identity().binary),
            };
        let selected = here.contains(h.id());
        let ctx = DoctorCtx {
            id: h.id(),
            selected_anywhere: anywhere.contains(h.id()),
            env,
            tree: &tree,
            main_spellings: &spellings,
            selected,
            spex: &spex,
            binary,
        };
        let mut checks = vec![check_binary(*h, &ctx)];
        checks.extend(h.files().map(|f| f.doctor(&ctx)).unwrap_or_default());
        failed |= checks.iter().any(|c| c.status == Status::Fail);
        text.push_str(&format!(
            "{}{}\n",
            h.id(),
            if selected { "" } else { " (not selected)" }
        ));
        let rows: Vec<Vec<String>> = checks
            .iter()
            .map(|c| {
                vec![
                    format!("  {}", mark(style, c.status)),
                    c.name.clone(),
                    c.detail.replace('\n', "\n      "),
                ]
            })
            .collect();
        text.push_str(&output::table(&rows));
        report.insert(
            h.id().to_owned(),
            serde_json::json!({ "selected": selected, "checks": checks }),
        );
    }
    // Pending changes mean the harnesses run with stale shims, contract or policies.
    let check = match inputs.plan(Mode::Materialize) {
        Ok(plan) if plan.is_empty() => {
            Check::new("materialize", Status::Ok, "artifacts up to date")
        }
        // Never materialized here (a worktree made by `git worktree add`): its sessions get
        // no contract, no skills and no hooks, so spex sees none of them.
        Ok(plan) if store.receipt(&tree.root).is_none() => {
            failed = true;
            Check::new(
                "materialize",
                Status::Fail,
                format!(
                    "spex is not materialized in {} ({} artifact(s) missing: contract, skills, hooks); sessions started here report nothing\nhint: run `spex materialize`",
                    tree.root.display(),
                    plan.changes.len()
                ),
            )
        }
        Ok(plan) => Check::new(
            "materialize",
            Status::Warn,
            format!(
                "{} pending change(s){}\nhint: run `spex materialize` (`--dry-run` shows the diff)",
                plan.changes.len(),
                if plan.receipt_changed {
                    " and a stale dispatch receipt"
                } else {
                    ""
                }
            ),
        ),
        Err(e) => {
            failed = true;
            Check::new("materialize", Status::Fail, crate::hint::spelled(&e))
        }
    };
    let mut checks = vec![check, excludes_check(env, &tree)];
    checks.extend(
        crate::runtime::harness_server::of_project(env, &store, &tree.main)?
            .iter()
            .map(server_check),
    );
    let rows: Vec<Vec<String>> = checks
        .iter()
        .map(|c| {
            vec![
                format!("  {}", mark(style, c.status)),
                c.name.clone(),
                c.detail.replace('\n', "\n      "),
            ]
        })
        .collect();
    text.push_str("project\n");
    text.push_str(&output::table(&rows));
    report.insert(
        "project".to_owned(),
        serde_json::json!({ "checks": checks }),
    );
    if args.json {
        output::json(&report);
    } else {
        output::print(&text);
    }
    Ok(if failed {
        Outcome::Differs
    } else {
        Outcome::Ok
    })
}
