//! The files-and-hooks facet: what a harness reads from each checkout and from its user-level
//! state (hook shims, trust, the contract file, skills, commands), which `materialize` and
//! `clean` plan, `doctor` checks and `spex slash` lists.

use std::path::{Path, PathBuf};

use crate::env::Env;
use crate::repo::Tree;
use crate::seam::edit::MaterializeError;
use crate::seam::edit::workspace::Workspace;
use crate::spec::SpecNode;

/// What an adapter needs to plan its shims for one tree.
pub struct ShimCtx<'a> {
    /// The id of the harness planned for, as its hook commands name it.
    pub id: &'a str,
    pub env: &'a Env,
    pub tree: &'a Tree,
    /// Other spellings of the main checkout (absolute paths through symlinks that resolve to
    /// it), which a harness may be handed as its working folder; `tree.main` is not among them.
    pub main_spellings: &'a [PathBuf],
    /// This tree selected the harness.
    pub here: bool,
    /// Some tree of the project (this one included) selected the harness.
    pub anywhere: bool,
    /// The spex binary, quoted for a shell.
    pub spex: &'a str,
    pub nodes: &'a [SpecNode],
    /// How long a hook that may wait for an answer waits (`answering.hookWaitSecs`): its
    /// shim's timeout must outlast it.
    pub answer_wait_secs: u64,
    /// `limits.statusLine`: install spex's status line (chained to the person's own).
    pub status_line: bool,
}

impl ShimCtx<'_> {
    /// The hook command for one event: identical across runs, so Codex trust stays valid.
    pub fn hook_command(&self, event: &str) -> String {
        format!("{} dispatch {} {event}", self.spex, self.id)
    }
}

/// One entry of a harness's `/` menu.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SlashEntry {
    pub name: String,
    /// `built-in`, `bundled skill`, `project command`, `user command`, `project skill`, ...
    pub kind: String,
    pub description: String,
}

/// Outcome of one doctor check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Check {
    pub name: String,
    pub status: Status,
    pub detail: String,
}

impl Check {
    pub fn new(name: &str, status: Status, detail: impl Into<String>) -> Check {
        Check {
            name: name.to_owned(),
            status,
            detail: detail.into(),
        }
    }
}

/// What doctor needs to inspect one harness in one tree.
pub struct DoctorCtx<'a> {
    /// The id of the harness inspected, as its hook commands name it.
    pub id: &'a str,
    pub env: &'a Env,
    pub tree: &'a Tree,
    /// Other spellings of the main checkout, as for [`ShimCtx::main_spellings`].
    pub main_spellings: &'a [PathBuf],
    /// This tree's receipt selects the harness.
    pub selected: bool,
    /// Some checkout of the project selects the harness (shared shims are wanted).
    pub selected_anywhere: bool,
    /// The hook command prefix this spex writes (`<spex> dispatch`).
    pub spex: &'a str,
    /// The harness binary to run (config `harness.<id>.command`, else the default name).
    pub binary: Option<PathBuf>,
}

/// The files and hooks a harness reads, which spex writes and takes back.
pub trait Files: Sync {
    /// Contract file in each tree (`CLAUDE.md`, `AGENTS.md`).
    fn contract_file(&self) -> &'static str;
    /// Folders (relative to a tree) holding files spex generates whole.
    fn generated_dirs(&self) -> &'static [&'static str];
    /// Files rendered from one spec node (skills, agents, commands), relative to the tree.
    fn render_node(&self, node: &SpecNode) -> Vec<(PathBuf, String)>;
    /// Hook shims and trust for one tree.
    fn plan_shims(&self, ctx: &ShimCtx, ws: &mut Workspace) -> Result<(), MaterializeError>;
    /// The `/` menu: built-ins of the pinned version, then project and user entries.
    fn slash_menu(&self, tree: &Path, env: &Env) -> Vec<SlashEntry>;
    /// Installation checks for this harness (its binary, shims, trust).
    fn doctor(&self, ctx: &DoctorCtx) -> Vec<Check>;
}
