//! `spex launch`: start a session under a spex PTY host, optionally with a first prompt.

use std::process::Command;
use std::time::Duration;

use anyhow::Context;

use super::args::current_tree;
use super::args::text_arg;
use super::outcome::Outcome;
use super::output;
use super::start::{report, resolve};
use crate::env::Env;
use crate::hint::Hinted;
use crate::runtime::{self};
use crate::store::ProjectStore;
use crate::store::session::{Session, Status};

/// Start an agent session in this checkout under spex's terminal host, then attach to it.
///
/// The session runs detached from this terminal: `Ctrl-\` (config `detachKey`) detaches, `spex
/// attach` comes back, `spex deliver` sends it prompts, `spex stop` ends it. With `--worktree NAME`
/// it runs in the linked worktree `<main>-NAME` (branch NAME; created and materialized when
/// missing). PROMPT is sent as its first turn.
///
/// Claude Code runs under spex's PTY host and takes the prompt once it is ready for one (it fails
/// at once, with the screen and what to do, when Claude stops at a screen spex cannot answer); it
/// is ready in every permission mode (default, `acceptEdits`, `plan`, `bypassPermissions`). Codex:
/// a thread on the project's app-server, the Codex TUI on that thread under spex's PTY host (the
/// same host, detach key, `snapshot` and recording as Claude's; quitting the TUI leaves the thread
/// running, and `spex attach` opens it again), and the prompt as the thread's first turn through
/// the server. Gemini CLI runs under spex's PTY host as Claude does (`--session-id` gives it spex's
/// id), ready at its empty input box once its `SessionStart` is recorded; it fails at once, with
/// the screen and what to do, at its folder-trust, authentication, API-key and new-agents dialogs.
/// Then this terminal attaches.
///
/// With `--detach` it prints the session's handle (and name) and the commands to attach and
/// deliver; `--json` prints `{session: {id, handle, name, socket, host_pid, child_pid}, delivery}`.
/// Arguments after `--` go to the harness after the configured `harness.<id>.args` (`spex launch --
/// --permission-mode acceptEdits`).
///
/// Ctrl-C while the session starts or takes its first prompt stops the session it started and says
/// so, with its handle and whether the prompt went in (exit 130). Refused, before anything starts,
/// in a checkout where `spex materialize` has not installed that harness's hooks (they report the
/// session's start and its turns).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The harness (default: the configuration's `defaultHarness`).
    #[arg(long)]
    pub harness: Option<String>,
    /// Run the session in the linked worktree NAME (branch NAME, created beside the main
    /// checkout as `<main>-NAME` if missing) with spex materialized into it.
    #[arg(long, value_name = "NAME")]
    pub worktree: Option<String>,
    /// Record the session as a cassette (`spex replay <id>` plays it).
    #[arg(long)]
    pub record: bool,
    /// Do not attach this terminal; print the session's handle and the commands that reach it.
    #[arg(long)]
    pub detach: bool,
    /// Print the result as JSON (implies nothing about attaching).
    #[arg(long)]
    pub json: bool,
    /// Name the session (letters, digits, `-`, `_`; unique among the project's live sessions):
    /// every command that takes a session takes its name too, and `spex sessions` shows it.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// How long the harness may take to be ready for a prompt.
    #[arg(long, default_value_t = 60)]
    pub ready_timeout: u64,
    /// Start it on another machine: the remote NAME (`spex remote list`), whose spex launches
    /// it there as here; `attach`, `deliver` and the rest reach it as `NAME:HANDLE`.
    #[arg(long, value_name = "NAME")]
    pub remote: Option<String>,
    /// With `--remote`: the checkout on that machine to run in (`~/...` is under its home;
    /// default: this checkout's path, under that machine's home when it is under this one's).
    #[arg(long, value_name = "PATH", requires = "remote")]
    pub repo: Option<String>,
    /// The first prompt (`-` reads it from stdin).
    pub prompt: Option<String>,
    /// Arguments for the harness itself, after `--` (e.g. `-- --permission-mode acceptEdits`),
    /// added after the configured `harness.<id>.args`.
    #[arg(last = true, value_name = "HARNESS_ARGS")]
    pub passed: Vec<String>,
}

/// The linked worktree `name` of this project, created (with its branch) when missing, and
/// materialized.
fn worktree(env: &Env, tree: &crate::repo::Tree, name: &str) -> anyhow::Result<crate::repo::Tree> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        || name.starts_with('.')
    {
        anyhow::bail!(Hinted::new(
            format!("`{name}` is not a usable worktree name"),
            "use letters, digits, `.`, `_` and `-`"
        ));
    }
    let main_name = tree
        .main
        .file_name()
        .map_or_else(|| "repo".into(), |n| n.to_string_lossy().into_owned());
    let path = tree
        .main
        .parent()
        .unwrap_or(&tree.main)
        .join(format!("{main_name}-{name}"));
    if !path.exists() {
        let has_branch = Command::new("git")
            .arg("-C")
            .arg(&tree.main)
            .args(["rev-parse", "--verify", "--quiet"])
            .arg(format!("refs/heads/{name}"))
            .output()
            .is_ok_and(|o| o.status.success());
        let mut git = Command::new("git");
        git.arg("-C")
            .arg(&tree.main)
            .args(["worktree", "add", "-q"]);
        if has_branch {
            git.arg(&path).arg(name);
        } else {
            git.arg("-b").arg(name).arg(&path);
        }
        let out = git.output().context("cannot run `git worktree add`")?;
        if !out.status.success() {
            anyhow::bail!(Hinted::new(
                format!(
                    "`git worktree add` for `{}` failed: {}",
                    path.display(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
                "fix what git says, or pick another name"
            ));
        }
    }
    let wt = crate::repo::Tree::discover(&path)?;
    if wt.main != tree.main {
        anyhow::bail!(Hinted::new(
            format!(
                "`{}` exists and is not a worktree of `{}`",
                path.display(),
                tree.main.display()
            ),
            "move it away, or pick another name"
        ));
    }
    super::plan::plan_and_apply(env, wt.clone(), crate::materialize::Mode::Materialize, true)?;
    Ok(wt)
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let tree = current_tree()?;
    let tree = match &args.worktree {
        Some(name) => worktree(env, &tree, name)?,
        None => tree,
    };
    let mut launch = resolve(
        env,
        &tree,
        args.harness.as_deref(),
        Duration::from_secs(args.ready_timeout),
        args.record,
    )?;
    launch.args.extend(args.passed.iter().cloned());
    // What `spex check` found for this version: unchecked or failed is said before it starts.
    let h = launch.harness;
    let inst = crate::check::Installed {
        version: crate::store::checks::version_of(&env.spex_home(), &launch.binary, |b| {
            crate::env::version_output(b).and_then(|o| (h.identity().parse_version)(&o))
        }),
        binary: launch.binary.clone(),
    };
    if let Some(note) = crate::check::standing_note(&env.spex_home(), h, &inst) {
        eprintln!("warning: {note}");
    }
    let prompt = args.prompt.as_deref().map(text_arg).transpose()?;
    let store = ProjectStore::new(&env.spex_home(), &tree.main);
    // Without spex's hooks the harness never reports its start or a turn: refuse before
    // starting anything rather than wait out `--ready-timeout`.
    let id = launch.harness.id();
    if !store
        .receipt(&tree.root)
        .is_some_and(|r| r.harnesses.iter().any(|h| h == id))
    {
        anyhow::bail!(Hinted::new(
            format!(
                "`{id}` is not materialized in {}: spex's hooks, which report the session's start and its turns, are not installed there",
                tree.root.display()
            ),
            format!(
                "add \"{id}\" to `harnesses` in spex.jsonc and run `spex materialize` (`spex init` sets a project up)"
            )
        ));
    }
    if let Some(name) = &args.name {
        // Refused before anything starts; taken for real once the session exists.
        store.name_free(name, None)?;
    }
    // Ctrl-C while the session starts or takes its first prompt cancels the launch: what was
    // started is stopped, and the person is told so (killed outright, spex would leave the
    // session running with its prompt never sent, and say nothing).
    runtime::catch_interrupt().context("cannot catch Ctrl-C")?;
    let started = runtime::transport::launch(&launch, &store, prompt.as_deref(), |launched| {
        if let Some(name) = &args.name {
            store.set_name(&launched.id, Some(name))?;
        }
        Ok(())
    });
    let (launched, delivery) = match started {
        Err(runtime::RuntimeError::Cancelled { id }) => {
            cancelled(&store, &id, prompt.is_some(), args.json, || {
                let record = store
                    .load(&id)?
                    .ok_or_else(|| crate::store::session::StoreError::NotFound(id.clone()))?;
                runtime::transport::of(env, &store, &record)?.stop(Duration::from_secs(3))
            });
            return Ok(Outcome::Interrupted);
        }
        started => started?,
    };
    report(&store, args.json, args.detach, &launched, delivery.as_ref());
    if !args.detach {
        super::terminal::attach(
            env,
            &launched.id,
            super::terminal::detach_key(env, &tree.root),
        )?;
    }
    Ok(Outcome::Ok)
}

/// Ctrl-C during a launch: the session it started is stopped, and the person told which one,
/// how it ended, and whether its prompt had gone in.
fn cancelled(
    store: &ProjectStore,
    id: &str,
    had_prompt: bool,
    json: bool,
    stop: impl FnOnce() -> Result<Session, runtime::RuntimeError>,
) {
    let handle = store.label_of(id);
    let typed = store
        .events(id, None)
        .unwrap_or_default()
        .iter()
        .any(|e| e.kind == "turn.started");
    let stopped = match store.load(id) {
        Ok(Some(s)) if s.status == Status::Exited => Ok((s, "ended")),
        _ => stop().map(|s| (s, "stopped")),
    };
    let how = match &stopped {
        Ok((s, done)) => format!("{done} ({})", runtime::how_it_ended(s)),
        Err(e) => format!("could not be stopped: {}", crate::hint::spelled(e)),
    };
    let prompt = match (had_prompt, typed) {
        (false, _) => "",
        (true, false) => "; its first prompt was not sent",
        (true, true) => "; its first prompt had started a turn, which the stop ended",
    };
    if json {
        output::json(&serde_json::json!({
            "session": { "id": id, "handle": handle },
            "cancelled": true,
            "stopped": stopped.is_ok(),
        }));
    }
    eprintln!("launch interrupted (Ctrl-C): session {handle} {how}{prompt}");
}
