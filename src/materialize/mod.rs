//! Materialize and clean: compute a plan (every file's before and after bytes) from the
//! config, the `.spec` tree and the harness adapters, then apply it atomically. `clean` is the
//! same computation with nothing selected, so pruning and removal share one code path.

mod apply;
pub mod excludes;
mod journal;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::adapters;
use crate::config::{self, Config};
use crate::env::Env;
use crate::fsutil;
use crate::repo::Tree;
use crate::seam::edit::owned::{self, Owned};
use crate::seam::edit::workspace::{JsonJob, Workspace};
use crate::seam::edit::{MaterializeError, block, shell_quote, toml_entries};
use crate::seam::files::{Files, ShimCtx};
use crate::spec::{self, SpecNode};
use crate::store::{self, Governed, HookNode, Policies, ProjectStore, Receipt, Spellings};
use journal::Journal;

/// What a run should leave selected in this tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The harnesses the configuration names.
    Materialize,
    /// Nothing (clean).
    Clean,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Create,
    Modify,
    Delete,
    Mkdir,
    Rmdir,
}

#[derive(Debug, Clone, Serialize)]
pub struct Change {
    pub path: PathBuf,
    pub action: Action,
    #[serde(skip)]
    pub before: Option<Vec<u8>>,
    #[serde(skip)]
    pub after: Option<Vec<u8>>,
}

#[derive(Debug)]
pub struct Plan {
    pub tree: PathBuf,
    pub harnesses: Vec<&'static str>,
    pub changes: Vec<Change>,
    pub warnings: Vec<String>,
    /// The receipt (selection, policies, spec index for dispatch) or the governance index beside
    /// it differs from the stored one.
    pub receipt_changed: bool,
    store: ProjectStore,
    owned: Owned,
    /// The record as the plan found it, for a partial apply.
    owned_before: Owned,
    toml_jobs: std::collections::BTreeMap<PathBuf, toml_entries::Job>,
    json_jobs: std::collections::BTreeMap<PathBuf, JsonJob>,
    dispatch: DispatchFiles,
    /// The main checkout's other spellings to keep on record (`None`: no record).
    spellings: Option<Spellings>,
    /// The journal of an interrupted run, whose leftovers `apply` sweeps.
    stale: Option<Journal>,
}

/// Everything a materialize run needs to know, resolved once.
pub struct Inputs<'a> {
    pub env: &'a Env,
    pub tree: Tree,
    /// The spex binary the hook commands call.
    pub spex_bin: PathBuf,
}

impl Inputs<'_> {
    fn store(&self) -> ProjectStore {
        ProjectStore::new(&self.env.spex_home(), &self.tree.main)
    }

    /// The main checkout's other spellings: those on record that still resolve to it, and the
    /// one the user's `$PWD` goes through.
    pub fn main_spellings(&self, store: &ProjectStore) -> Vec<PathBuf> {
        let main = &self.tree.main;
        let mut out: BTreeSet<PathBuf> = store
            .spellings()
            .main
            .into_iter()
            .filter(|p| p != main && fs_err::canonicalize(p).is_ok_and(|c| c == *main))
            .collect();
        out.extend(
            self.env
                .pwd
                .as_deref()
                .and_then(|p| self.tree.main_spelling(p)),
        );
        out.into_iter().collect()
    }

    /// Runs `f` under the store's materialize lock, so concurrent runs (in any tree or
    /// project) never interleave their read-modify-write of shared files.
    pub fn locked<R>(&self, f: impl FnOnce() -> R) -> Result<R, MaterializeError> {
        let lock = self.env.spex_home().join("materialize.lock");
        store::lock::with(&lock, f).map_err(MaterializeError::Fs)
    }

    /// Where this tree's config and spec are read from (`config::source_root`).
    fn source_root(&self) -> PathBuf {
        config::source_root(&self.tree.root, &self.tree.main)
    }

    /// Computes the plan for this tree.
    #[expect(
        clippy::too_many_lines,
        reason = "the plan in the order it is built: inputs, what every harness wants, what the receipt and index record"
    )]
    pub fn plan(&self, mode: Mode) -> Result<Plan, MaterializeError> {
        let known = adapters::known();
        let cfg = match mode {
            Mode::Materialize => {
                config::load(&self.env.user_config_file(), &self.source_root(), &known)?
            }
            Mode::Clean => Config {
                harnesses: Vec::new(),
                ..Config::new(&known)
            },
        };
        let nodes = match mode {
            Mode::Materialize => spec::load(&self.source_root())?,
            Mode::Clean => Vec::new(),
        };
        let store = self.store();
        let owned = Owned::load(
            fsutil::read_opt(&store.owned_file())
                .ok()
                .flatten()
                .as_deref(),
        );
        // A run that was interrupted: the record as its files are now.
        let stale = Journal::load(&store.journal_file());
        let owned = stale.as_ref().map_or(owned, Journal::recovered);
        let mut ws = Workspace::new(owned.clone());

        // Which harnesses some checkout selects: the receipts of the other checkouts that still
        // exist, plus this checkout's new selection.
        let others: Vec<PathBuf> = self
            .tree
            .all_trees()
            .into_iter()
            .map(|t| t.root)
            .filter(|r| *r != self.tree.root)
            .collect();
        let here: Vec<String> = cfg.harnesses.iter().map(|s| (*s).to_owned()).collect();
        let mut anywhere = store.selected_by(others.iter().map(PathBuf::as_path));
        anywhere.extend(here.iter().cloned());

        let spellings = self.main_spellings(&store);
        let spex = shell_quote(&self.spex_bin.to_string_lossy());
        // Contract files that are one file through a link (`AGENTS.md -> CLAUDE.md`) hold one
        // block, wanted while any harness that reads that file is selected here.
        let mut contract_wanted = std::collections::BTreeMap::<PathBuf, bool>::new();
        for (h, f) in adapters::all()
            .iter()
            .filter_map(|&h| Some((h, h.files()?)))
        {
            let file = fsutil::resolve_link(&self.tree.root.join(f.contract_file()));
            *contract_wanted.entry(file).or_default() |= here.iter().any(|s| s == h.id());
        }
        // Generated files that are one file for several harnesses (a skills folder two of them
        // read) stay while any harness selected here renders them: one harness's pruning must
        // not take what another one wants.
        let generated_wanted: std::collections::HashSet<PathBuf> = adapters::all()
            .iter()
            .filter(|h| here.iter().any(|s| s == h.id()))
            .filter_map(|h| h.files())
            .flat_map(|f| nodes.iter().flat_map(|n| f.render_node(n)))
            .map(|(rel, _)| self.tree.root.join(rel))
            .collect();
        for (h, f) in adapters::all()
            .iter()
            .filter_map(|&h| Some((h, h.files()?)))
        {
            let ctx = ShimCtx {
                id: h.id(),
                env: self.env,
                tree: &self.tree,
                main_spellings: &spellings,
                here: here.iter().any(|s| s == h.id()),
                anywhere: anywhere.contains(h.id()),
                spex: &spex,
                nodes: &nodes,
                answer_wait_secs: cfg.answer_wait_secs,
                status_line: cfg.status_line,
            };
            plan_contract(f, &ctx, &contract_wanted, &mut ws)?;
            plan_generated(f, &ctx, &generated_wanted, &mut ws)?;
            f.plan_shims(&ctx, &mut ws)?;
        }
        excludes::plan(self.env, &self.tree, &mut ws)?;
        let governed: Vec<Governed> = nodes
            .iter()
            .filter(|n| !n.code.is_empty())
            .map(|n| Governed {
                spec: n.file.to_string_lossy().into_owned(),
                title: n.title.clone(),
                code: n.code.clone(),
            })
            .collect();
        let receipt = (mode == Mode::Materialize).then(|| Receipt {
            schema: owned::SCHEMA,
            tree: self.tree.root.clone(),
            harnesses: here,
            hooks: nodes
                .iter()
                .filter_map(|n| {
                    Some(HookNode {
                        spec: n.file.to_string_lossy().into_owned(),
                        handler: self.tree.root.join(n.handler.as_ref()?),
                        events: n.events.clone(),
                        order: n.order,
                        block: n.block,
                    })
                })
                .collect(),
            governance: Vec::new(),
            governance_index: !governed.is_empty(),
            policies: Policies {
                spec_first: cfg.spec_first,
                stop_gate: cfg.stop_gate,
            },
            event_log_bytes: Some(cfg.event_log_bytes),
            answer_wait_secs: Some(cfg.answer_wait_secs),
            away: cfg.away,
        });
        // Spellings matter while some checkout selects a harness; after that they are forgotten
        // with the rest of the project's selection.
        let spellings = (!anywhere.is_empty() && !spellings.is_empty()).then_some(Spellings {
            schema: owned::SCHEMA,
            main: spellings,
        });
        let mut plan = finish(
            self.tree.root.clone(),
            &others,
            cfg.harnesses,
            ws,
            (store, owned),
            DispatchFiles::new(receipt, &governed),
            stale.as_ref(),
        );
        plan.spellings = spellings;
        plan.stale = stale;
        Ok(plan)
    }
}

fn contract_lines(nodes: &[SpecNode]) -> Option<Vec<String>> {
    let system: Vec<&SpecNode> = nodes
        .iter()
        .filter(|n| n.has(spec::Surface::System))
        .collect();
    if system.is_empty() {
        return None;
    }
    let mut lines = Vec::new();
    for (i, n) in system.iter().enumerate() {
        if i > 0 {
            lines.push(String::new());
        }
        lines.push(format!("## {}", n.title));
        lines.push(String::new());
        lines.extend(n.body.lines().map(|l| l.trim_end_matches('\r').to_owned()));
    }
    Some(lines)
}

fn plan_contract(
    h: &dyn Files,
    ctx: &ShimCtx,
    wanted: &std::collections::BTreeMap<PathBuf, bool>,
    ws: &mut Workspace,
) -> Result<(), MaterializeError> {
    let path = ctx.tree.root.join(h.contract_file());
    ws.validate_blocks(&path, block::MARKDOWN)?;
    let here = wanted
        .get(&fsutil::resolve_link(&path))
        .copied()
        .unwrap_or(ctx.here);
    let body = if here {
        contract_lines(ctx.nodes)
    } else {
        None
    };
    ws.block(&path, block::MARKDOWN, "contract", body.as_deref())
}

/// Skills, agents and commands: render the wanted ones, delete stamped leftovers that no
/// selected harness wants (`keep`).
fn plan_generated(
    h: &dyn Files,
    ctx: &ShimCtx,
    keep: &std::collections::HashSet<PathBuf>,
    ws: &mut Workspace,
) -> Result<(), MaterializeError> {
    let mut wanted: Vec<(PathBuf, String)> = Vec::new();
    if ctx.here {
        for n in ctx.nodes {
            for (rel, content) in h.render_node(n) {
                wanted.push((ctx.tree.root.join(rel), content));
            }
        }
    }
    for dir in h.generated_dirs() {
        let dir = ctx.tree.root.join(dir);
        // What the record says spex generated, and stamped files it has no record of (named
        // in a warning, never removed).
        let mut stale: BTreeSet<PathBuf> = ws.generated_under(&dir).into_iter().collect();
        stale.extend(Workspace::stamped_files(&dir, keep));
        for p in stale.into_iter().filter(|p| !keep.contains(p)) {
            ws.generated(&p, None)?;
        }
    }
    for (path, content) in wanted {
        ws.generated(&path, Some(content))?;
    }
    Ok(())
}

/// Adds `dir` and its ancestors that do not exist yet to `out`.
fn missing_dirs(dir: Option<&Path>, out: &mut BTreeSet<PathBuf>) {
    for d in dir
        .into_iter()
        .flat_map(Path::ancestors)
        .take_while(|d| !d.exists())
    {
        out.insert(d.to_owned());
    }
}

/// What `dispatch` reads of this tree: the receipt and the governance index beside it (`None`:
/// no such file).
#[derive(Debug, PartialEq, Eq)]
struct DispatchFiles {
    receipt: Option<Receipt>,
    index: Option<Vec<u8>>,
}

impl DispatchFiles {
    fn new(receipt: Option<Receipt>, governed: &[Governed]) -> DispatchFiles {
        let index = receipt
            .as_ref()
            .filter(|r| r.governance_index)
            .map(|_| store::governance::index_bytes(governed));
        DispatchFiles { receipt, index }
    }

    /// What the store holds now; an index that cannot be read counts as changed.
    fn stored(store: &ProjectStore, tree: &Path) -> Option<DispatchFiles> {
        Some(DispatchFiles {
            receipt: store.receipt(tree),
            index: fsutil::read_opt(&store.governance_file(tree)).ok()?,
        })
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "the plan's changes, then the owned folders left empty, both from the same files and folders"
)]
fn finish(
    tree: PathBuf,
    others: &[PathBuf],
    harnesses: Vec<&'static str>,
    ws: Workspace,
    (store, owned_before): (ProjectStore, Owned),
    dispatch: DispatchFiles,
    stale: Option<&Journal>,
) -> Plan {
    let owned_files = ws.owned_files_after();
    let Workspace {
        files,
        wanted_dirs,
        mut owned,
        warnings,
        toml_jobs,
        mut json_jobs,
        not_by_key,
        ..
    } = ws;
    json_jobs.retain(|p, _| !not_by_key.contains(p));
    owned.files = owned_files;
    let mut changes = Vec::new();
    let mut new_dirs = BTreeSet::new();
    for d in &wanted_dirs {
        missing_dirs(Some(d), &mut new_dirs);
    }
    let deleted: BTreeSet<&PathBuf> = files
        .iter()
        .filter(|(_, e)| e.before.is_some() && e.after.is_none())
        .map(|(p, _)| p)
        .collect();
    for (path, e) in &files {
        if e.before == e.after {
            continue;
        }
        let action = match (&e.before, &e.after) {
            (None, Some(_)) => {
                missing_dirs(path.parent(), &mut new_dirs);
                Action::Create
            }
            (Some(_), None) => Action::Delete,
            _ => Action::Modify,
        };
        changes.push(Change {
            path: path.clone(),
            action,
            before: e.before.clone(),
            after: e.after.clone(),
        });
    }
    for d in &new_dirs {
        changes.push(Change {
            path: d.clone(),
            action: Action::Mkdir,
            before: None,
            after: None,
        });
    }
    owned.dirs.extend(new_dirs.iter().cloned());
    // Owned folders that end up empty (and are not wanted) are removed, deepest first.
    let mut removed: BTreeSet<PathBuf> = BTreeSet::new();
    // Candidates: folders of files this plan deletes, and this checkout's own folders (never
    // another checkout's, e.g. its `.codex/` anchor).
    let mut deleted_parents: BTreeSet<&Path> = BTreeSet::new();
    for p in &deleted {
        deleted_parents.extend(p.ancestors().skip(1));
    }
    let mut needed: BTreeSet<&Path> = BTreeSet::new();
    for (p, e) in &files {
        if e.after.is_some() {
            needed.extend(p.ancestors().skip(1));
        }
    }
    let mut candidates: Vec<PathBuf> = owned
        .dirs
        .iter()
        // Cheap prefix tests first: the record holds every checkout's folders.
        .filter(|d| {
            (d.starts_with(&tree) && excludes::in_tree_scope(d, &tree, others))
                || deleted_parents.contains(d.as_path())
        })
        .filter(|d| {
            !new_dirs.contains(*d) && !wanted_dirs.contains(*d) && !needed.contains(d.as_path())
        })
        .cloned()
        .collect();
    candidates.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for d in candidates {
        let Ok(entries) = fs_err::read_dir(&d) else {
            owned.dirs.remove(&d);
            continue;
        };
        // What an interrupted run left in the folder is swept before the folders go.
        let empty_after = entries.filter_map(Result::ok).all(|e| {
            let p = e.path();
            deleted.contains(&p) || removed.contains(&p) || stale.is_some_and(|j| j.sweeps(&p))
        });
        if empty_after {
            removed.insert(d.clone());
            owned.dirs.remove(&d);
            changes.push(Change {
                path: d,
                action: Action::Rmdir,
                before: None,
                after: None,
            });
        }
    }
    let receipt_changed = DispatchFiles::stored(&store, &tree).as_ref() != Some(&dispatch);
    Plan {
        tree,
        harnesses,
        changes,
        warnings,
        receipt_changed,
        store,
        owned,
        owned_before,
        toml_jobs,
        json_jobs,
        dispatch,
        spellings: None,
        stale: None,
    }
}

#[cfg(test)]
mod tests {
    use super::journal::Planned;
    use super::*;

    /// A run killed while writing into a folder spex made earlier leaves its temp file there; a
    /// `clean` that comes next counts it gone (its sweep takes it) and removes the folder.
    #[test]
    fn a_folder_holding_only_what_a_killed_run_left_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("repo");
        let agent = tree.join(".agent");
        let commands = agent.join("commands");
        fs_err::create_dir_all(&commands).unwrap();
        fs_err::write(commands.join(".spex-tmpABC"), "half").unwrap();
        let mut owned = Owned::default();
        owned.dirs.extend([agent.clone(), commands.clone()]);
        let stale = Journal {
            schema: owned::SCHEMA,
            before: owned.clone(),
            after: owned.clone(),
            files: vec![Planned::new(&commands.join("x.md"), None, Some(b"x"))],
            dirs: Vec::new(),
        };
        let store = ProjectStore::new(&dir.path().join("home"), &tree);
        let mut plan = finish(
            tree.clone(),
            &[],
            Vec::new(),
            Workspace::new(owned.clone()),
            (store, owned),
            DispatchFiles::new(None, &[]),
            Some(&stale),
        );
        plan.stale = Some(stale);
        plan.apply().unwrap();
        assert!(!agent.exists(), "left behind: {plan:?}");
        assert!(plan.owned.dirs.is_empty(), "{:?}", plan.owned.dirs);
    }
}
