//! Every project of the store as people name it (the `PROJECT` column: its checkout's folder
//! name, or the checkout's path where two share a name), and finding the session a person's
//! word names from anywhere: this project first, then every project, `project/handle` always.
//! Reads records and the name files; writes only the handles a lookup claims (`lookup.rs`).

use std::path::{Path, PathBuf};

use super::ProjectStore;
use super::session::{Found, StoreError, check_id};
use crate::hint::Hint;
use crate::text::visible;

/// One project folder of the store, with the checkout its sessions belong to.
#[derive(Debug, Clone)]
pub struct Project {
    pub store: ProjectStore,
    /// The main checkout, as its records say (`None`: no readable record).
    pub checkout: Option<PathBuf>,
    /// What people read and type for it: see [`labels`].
    pub label: String,
}

impl ProjectStore {
    /// The main checkout this project belongs to, as its first readable record says.
    pub fn checkout(&self) -> Option<PathBuf> {
        self.session_ids()
            .iter()
            .filter_map(|id| self.load(id).ok().flatten())
            .map(|s| s.project)
            .find(|p| !p.as_os_str().is_empty())
    }

    /// The project folder's own name in the store (`<name>-<hash>`).
    pub fn folder_name(&self) -> String {
        self.dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// What people call each project, given its store folder and checkout: the checkout's folder
/// name, or its whole path when another checkout has the same folder name; the store folder's
/// name when the checkout is not known.
pub fn labels(projects: &[(&ProjectStore, Option<&Path>)]) -> Vec<String> {
    let name = |c: &Path| c.file_name().map(|n| n.to_string_lossy().into_owned());
    projects
        .iter()
        .map(|(store, checkout)| {
            let Some(c) = checkout else {
                return store.folder_name();
            };
            let Some(n) = name(c) else {
                return c.display().to_string();
            };
            let shared = projects.iter().any(|(_, other)| {
                other.is_some_and(|o| o != *c && name(o).as_deref() == Some(n.as_str()))
            });
            if shared { c.display().to_string() } else { n }
        })
        .collect()
}

/// Every project of the store, named (see [`labels`]), in the order of their folder names.
pub fn named(spex_home: &Path) -> Vec<Project> {
    let stores = super::all_projects(spex_home);
    let checkouts: Vec<Option<PathBuf>> = stores.iter().map(ProjectStore::checkout).collect();
    let pairs: Vec<(&ProjectStore, Option<&Path>)> = stores
        .iter()
        .zip(&checkouts)
        .map(|(s, c)| (s, c.as_deref()))
        .collect();
    let labels = labels(&pairs);
    stores
        .into_iter()
        .zip(checkouts)
        .zip(labels)
        .map(|((store, checkout), label)| Project {
            store,
            checkout,
            label,
        })
        .collect()
}

/// Why a person's word names no one session of any project.
#[derive(Debug, thiserror::Error)]
pub enum LocateError {
    #[error("no session of any project matches `{0}`")]
    NotFound(String),
    #[error("`{arg}` matches sessions of several projects: {}", .candidates.join(", "))]
    Ambiguous {
        arg: String,
        /// `project/handle` of each.
        candidates: Vec<String>,
    },
    #[error("no project `{project}` has sessions in the store")]
    NoProject { project: String, known: Vec<String> },
    /// What the project tried first said (a word that is no id, several of its sessions).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Hint for LocateError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            LocateError::NotFound(_) => {
                "`spex sessions --all --all-projects` lists every session of every project"
                    .to_owned()
            }
            LocateError::Ambiguous { candidates, .. } => format!(
                "name one as `project/handle` (the `PROJECT` and `ID` columns of `spex sessions --all-projects`), e.g. `{}`",
                candidates.first().map_or("", String::as_str)
            ),
            LocateError::NoProject { known, .. } if known.is_empty() => {
                "the store has no sessions yet".to_owned()
            }
            LocateError::NoProject { known, .. } => format!(
                "the projects with sessions: {} (the `PROJECT` column of `spex sessions --all-projects`)",
                known.join(", ")
            ),
            LocateError::Store(e) => return e.hint(),
        })
    }
}

/// The project and session `arg` names, from anywhere: `project/word` in that project (its
/// `PROJECT` label, its checkout's folder name or its checkout's path); else the project `here`
/// (the checkout the command runs in) first, as [`ProjectStore::resolve`] reads a word; else a
/// session of another project that the word names exactly (full id, handle, name), else by a
/// unique prefix. Several candidates are refused, each named `project/handle`.
pub fn locate(
    spex_home: &Path,
    here: Option<&ProjectStore>,
    arg: &str,
) -> Result<(ProjectStore, String), LocateError> {
    if let Some((project, word)) = arg.rsplit_once('/') {
        return locate_in(spex_home, project, word, arg);
    }
    if let Some(store) = here {
        match store.resolve(arg) {
            Ok(id) => return Ok((store.clone(), id)),
            Err(StoreError::NotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    check_id(arg, "")?;
    let stores: Vec<ProjectStore> = super::all_projects(spex_home)
        .into_iter()
        .filter(|s| here.is_none_or(|h| h.dir != s.dir))
        .collect();
    pick(spex_home, &stores, arg)
}

/// `project/word`: the session `word` names in the project(s) `project` names.
fn locate_in(
    spex_home: &Path,
    project: &str,
    word: &str,
    arg: &str,
) -> Result<(ProjectStore, String), LocateError> {
    let projects = named(spex_home);
    let chosen: Vec<ProjectStore> = projects
        .iter()
        .filter(|p| {
            p.label == project
                || p.checkout.as_deref().is_some_and(|c| {
                    c == Path::new(project)
                        || c.file_name()
                            .is_some_and(|n| n == std::ffi::OsStr::new(project))
                })
        })
        .map(|p| p.store.clone())
        .collect();
    if chosen.is_empty() {
        return Err(LocateError::NoProject {
            project: visible(project),
            known: projects
                .into_iter()
                .filter(|p| p.checkout.is_some())
                .map(|p| p.label)
                .collect(),
        });
    }
    check_id(word, "")?;
    pick(spex_home, &chosen, word).map_err(|e| match e {
        LocateError::NotFound(_) => LocateError::NotFound(visible(arg)),
        LocateError::Ambiguous { candidates, .. } => LocateError::Ambiguous {
            arg: visible(arg),
            candidates,
        },
        e => e,
    })
}

/// The one session `word` names among `stores`: exact names first, then prefixes.
fn pick(
    spex_home: &Path,
    stores: &[ProjectStore],
    word: &str,
) -> Result<(ProjectStore, String), LocateError> {
    let mut exact = Vec::new();
    let mut prefixed = Vec::new();
    for store in stores {
        match store.find(word) {
            Found::Exact(id) => exact.push((store, id)),
            Found::Prefixed(ids) => prefixed.extend(ids.into_iter().map(|id| (store, id))),
        }
    }
    let hits = if exact.is_empty() { prefixed } else { exact };
    match hits.as_slice() {
        [] => Err(LocateError::NotFound(word.to_owned())),
        [(store, id)] => Ok(((*store).clone(), id.clone())),
        _ => {
            // Labels only now: they read a record of every project.
            let projects = named(spex_home);
            let candidates = hits
                .iter()
                .map(|(store, id)| {
                    let label = projects
                        .iter()
                        .find(|p| p.store.dir == store.dir)
                        .map_or_else(|| store.folder_name(), |p| p.label.clone());
                    format!("{label}/{}", store.label_of(id))
                })
                .collect();
            Err(LocateError::Ambiguous {
                arg: word.to_owned(),
                candidates,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsutil;
    use crate::store::session::Session;

    /// A store with a project per checkout, each holding sessions `ids`.
    fn world(projects: &[(&str, &[&str])]) -> tempfile::TempDir {
        let home = tempfile::tempdir().unwrap();
        for (checkout, ids) in projects {
            let store = ProjectStore::new(home.path(), Path::new(checkout));
            for id in *ids {
                let s = Session {
                    id: (*id).into(),
                    project: PathBuf::from(checkout),
                    ..Session::default()
                };
                let path = store.session_dir(id).join("session.json");
                fsutil::write_atomic(&path, &crate::store::json_bytes(&s)).unwrap();
            }
        }
        home
    }

    fn store_of(home: &Path, checkout: &str) -> ProjectStore {
        ProjectStore::new(home, Path::new(checkout))
    }

    #[test]
    fn labels_are_folder_names_unless_two_share_one() {
        let home = world(&[
            ("/w/a/app", &["11111111-0000-4000-8000-00000000aaaa"]),
            ("/w/b/app", &["11111111-0000-4000-8000-00000000bbbb"]),
            ("/w/lib", &["11111111-0000-4000-8000-00000000cccc"]),
        ]);
        let mut labels: Vec<String> = named(home.path()).into_iter().map(|p| p.label).collect();
        labels.sort();
        assert_eq!(labels, ["/w/a/app", "/w/b/app", "lib"]);
    }

    #[test]
    fn here_first_then_unique_anywhere_then_refused_with_candidates() {
        let (a, b) = (
            "11111111-0000-4000-8000-00000000aaaa",
            "22222222-0000-4000-8000-00000000aaaa",
        );
        let c = "33333333-0000-4000-8000-00000000cccc";
        let home = world(&[("/w/app", &[a, c]), ("/w/lib", &[b])]);
        let (app, lib) = (
            store_of(home.path(), "/w/app"),
            store_of(home.path(), "/w/lib"),
        );
        // The same tail claims the same handle in both projects.
        assert_eq!(app.claim_handle(a).unwrap(), "aaaa");
        assert_eq!(lib.claim_handle(b).unwrap(), "aaaa");
        // Inside a checkout, its own session wins.
        assert_eq!(locate(home.path(), Some(&lib), "aaaa").unwrap().1, b);
        assert_eq!(locate(home.path(), Some(&app), "aaaa").unwrap().1, a);
        // A session of another project, unique across projects, from inside or outside.
        let (store, id) = locate(home.path(), Some(&lib), "cccc").unwrap();
        assert_eq!((store.dir, id.as_str()), (app.dir.clone(), c));
        assert_eq!(locate(home.path(), None, "ccc").unwrap().1, c);
        // Outside, a handle two projects hold is refused, naming both as `project/handle`.
        match locate(home.path(), None, "aaaa") {
            Err(LocateError::Ambiguous { candidates, .. }) => {
                assert_eq!(candidates, ["app/aaaa", "lib/aaaa"]);
            }
            other => panic!("{other:?}"),
        }
        // `project/handle` always works, by label or by checkout path.
        assert_eq!(locate(home.path(), None, "lib/aaaa").unwrap().1, b);
        assert_eq!(locate(home.path(), Some(&lib), "app/aaaa").unwrap().1, a);
        assert_eq!(locate(home.path(), None, "/w/app/aaaa").unwrap().1, a);
        assert!(matches!(
            locate(home.path(), None, "nope/aaaa"),
            Err(LocateError::NoProject { .. })
        ));
        assert!(matches!(
            locate(home.path(), None, "dddd"),
            Err(LocateError::NotFound(_))
        ));
        assert!(matches!(
            locate(home.path(), None, "lib/cccc"),
            Err(LocateError::NotFound(_))
        ));
        // Something that is no id is refused before any lookup.
        assert!(matches!(
            locate(home.path(), None, "a b"),
            Err(LocateError::Store(StoreError::InvalidId { .. }))
        ));
    }

    #[test]
    fn an_exact_name_elsewhere_beats_a_prefix() {
        let a = "cafe0000-0000-4000-8000-000000001111";
        let b = "22222222-0000-4000-8000-000000002222";
        let home = world(&[("/w/app", &[a]), ("/w/lib", &[b])]);
        let lib = store_of(home.path(), "/w/lib");
        lib.set_name(b, Some("cafe")).unwrap();
        assert_eq!(locate(home.path(), None, "cafe").unwrap().1, b);
        assert_eq!(locate(home.path(), None, "cafe0").unwrap().1, a);
    }
}
