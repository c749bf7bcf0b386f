//! Which spec node governs an edited file: the first node in path order with a `code` glob
//! that matches it. A current receipt points to the governance index, read only when an event
//! edits a file, and then only the DFAs of the keys the path has: each runs over the path
//! (`spec::automaton`: one step a byte, nothing compiled), a glob the index kept as text goes to
//! `glob.rs`, and only the winning node's line is read. A receipt written before the index
//! carries the nodes inline and is scanned in order, as it always was. Reads the store, writes
//! nothing.

use std::cell::RefCell;
use std::io;
use std::path::{Path, PathBuf};

use super::glob::matches;
use crate::spec::automaton;
use crate::store::Receipt;
use crate::store::governance::{self, ReadAt};

/// Where the governed nodes of this checkout are.
#[derive(Debug)]
pub enum Governance {
    /// In the index file beside the receipt; `trouble` keeps why it could not be read, for the
    /// caller to log.
    Index {
        file: PathBuf,
        trouble: RefCell<Option<String>>,
    },
    /// Inline in an older receipt (empty: nothing is governed).
    Inline(Vec<crate::store::Governed>),
}

/// The spec node that governs a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Governing {
    pub spec: String,
    pub title: String,
}

impl Governance {
    /// Takes the governance out of `receipt`; `index` is the file beside it.
    pub fn of(receipt: &mut Receipt, index: PathBuf) -> Governance {
        if receipt.governance_index {
            Governance::Index {
                file: index,
                trouble: RefCell::new(None),
            }
        } else {
            Governance::Inline(std::mem::take(&mut receipt.governance))
        }
    }

    /// The node that governs `rel` (repo-relative), if any. An index that cannot be read
    /// (missing, damaged, of another spex's format) governs nothing, as a missing receipt
    /// does, and says why in [`Governance::trouble`]: `spex doctor` and `materialize --check`
    /// report it stale, and the next `materialize` writes it anew.
    pub fn governing(&self, rel: &str) -> Option<Governing> {
        match self {
            Governance::Index { file, trouble } => match find(file, rel) {
                Ok(found) => found,
                Err(e) => {
                    *trouble.borrow_mut() =
                        Some(format!("governance index {}: {e}", file.display()));
                    None
                }
            },
            Governance::Inline(nodes) => nodes
                .iter()
                .find(|g| g.code.iter().any(|pat| matches(pat, rel)))
                .map(|g| Governing {
                    spec: g.spec.clone(),
                    title: g.title.clone(),
                }),
        }
    }

    /// Why the index could not be read, if it could not.
    pub fn trouble(&self) -> Option<String> {
        match self {
            Governance::Index { trouble, .. } => trouble.borrow().clone(),
            Governance::Inline(_) => None,
        }
    }
}

/// The node that governs `rel` by the index in `file`.
fn find(file: &Path, rel: &str) -> io::Result<Option<Governing>> {
    first_match(&governance::open(file)?, rel)
}

/// Of the globs the index holds for `rel`'s keys, the first node in path order whose glob
/// matches `rel`.
fn first_match<R: ReadAt + ?Sized>(index: &R, rel: &str) -> io::Result<Option<Governing>> {
    let candidates = governance::candidates_in(index, rel)?;
    let mut best: Option<u32> = None;
    for dfa in &candidates.dfas {
        let (way, bytes, nodes) = dfa.parts();
        let patterns = automaton::matching(bytes, way, rel)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        for p in patterns {
            let node = *nodes.get(p).ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidData, "a pattern without its node")
            })?;
            if best.is_none_or(|b| node < b) {
                best = Some(node);
            }
        }
    }
    // The slow way last, and only for a node that would come first.
    for l in &candidates.loose {
        if best.is_none_or(|b| l.node < b) && matches(&l.glob, rel) {
            best = Some(l.node);
        }
    }
    best.map(|node| {
        let owner = governance::owner_in(index, node)?;
        Ok(Governing {
            spec: owner.spec,
            title: owner.title,
        })
    })
    .transpose()
}

#[cfg(test)]
mod tests {
    use super::super::glob::tests::{form, form_path, glob_and_path, glob_matches, path, pattern};
    use super::*;
    use crate::spec::keys;
    use crate::store::Governed;
    use proptest::prelude::*;

    /// Today's answer by definition: the first node with a glob that globset says matches.
    fn scanned(nodes: &[Governed], rel: &str) -> Option<String> {
        nodes
            .iter()
            .find(|g| g.code.iter().any(|pat| glob_matches(pat, rel)))
            .map(|g| g.spec.clone())
    }

    fn nodes() -> impl Strategy<Value = Vec<Governed>> {
        let glob = prop_oneof![form(), pattern()];
        prop::collection::vec(prop::collection::vec(glob, 1..3), 1..8).prop_map(|codes| {
            codes
                .into_iter()
                .enumerate()
                .map(|(i, code)| Governed {
                    spec: format!(".spec/n{i}/spec.md"),
                    title: format!("Node {i}"),
                    code,
                })
                .collect()
        })
    }

    /// What the index written for `nodes` answers for `rel`.
    fn indexed(index: &[u8], rel: &str) -> Option<String> {
        first_match(index, rel).unwrap().map(|g| g.spec)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 6000, failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn a_glob_matches_only_paths_in_its_buckets(
            (pat, rel) in glob_and_path(),
        ) {
            if glob_matches(&pat, &rel) && let Some(filed) = keys::of_glob(&pat) {
                let hit = keys::of_path(&rel);
                prop_assert!(filed.iter().any(|k| hit.contains(k)), "{} matches {} but is filed under {:?}, the path hits {:?}", pat, rel, filed, hit);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1500, failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn the_index_answers_what_a_scan_answers(
            nodes in nodes(),
            rels in prop::collection::vec(prop_oneof![form_path(), path()], 1..6),
        ) {
            let index = governance::index_bytes(&nodes);
            for rel in &rels {
                let inline = Governance::Inline(nodes.clone()).governing(rel);
                let want = scanned(&nodes, rel);
                prop_assert_eq!(indexed(&index, rel), want.clone(), "index, {}", rel);
                prop_assert_eq!(inline.map(|g| g.spec), want, "inline, {}", rel);
            }
        }
    }

    fn node(spec: &str, code: &[&str]) -> Governed {
        Governed {
            spec: spec.into(),
            title: spec.to_uppercase(),
            code: code.iter().map(|c| (*c).to_owned()).collect(),
        }
    }

    #[test]
    fn the_first_node_in_path_order_wins_whichever_bucket_holds_it() {
        let nodes = vec![node("first", &["**/*.rs"]), node("second", &["src/**"])];
        let index = governance::index_bytes(&nodes);
        assert_eq!(indexed(&index, "src/a.rs").as_deref(), Some("first"));
        // Both ways in one bucket: the first node still wins.
        let nodes = vec![
            node("first", &["src/**/*_x.rs"]),
            node("second", &["src/a/**"]),
        ];
        let index = governance::index_bytes(&nodes);
        assert_eq!(indexed(&index, "src/a/b_x.rs").as_deref(), Some("first"));
        assert_eq!(indexed(&index, "src/a/b.rs").as_deref(), Some("second"));
    }

    #[test]
    fn the_five_forms_of_a_large_tree_each_find_their_node() {
        let nodes: Vec<Governed> = (0..500)
            .map(|i| {
                let glob = match i % 5 {
                    0 => format!("src/m{i}/**"),
                    1 => format!("**/*_{i}.txt"),
                    2 => format!("src/{{a{i},b{i}}}/*.ts"),
                    3 => format!("lib/[a-c]*{i}.py"),
                    _ => format!("docs/page{i}.md"),
                };
                node(&format!("n{i}"), &[&glob])
            })
            .collect();
        let index = governance::index_bytes(&nodes);
        for (rel, want) in [
            ("src/m100/deep/x.rs", Some("n100")),
            ("docs/x_101.txt", Some("n101")),
            ("src/b102/x.ts", Some("n102")),
            ("lib/c_8.py", Some("n8")),
            ("lib/d_8.py", None),
            // `lib/[a-c]*3.py` (n3) and `lib/[a-c]*8.py` (n8) match them too, and come first.
            ("lib/c_103.py", Some("n3")),
            ("lib/c_108.py", Some("n8")),
            ("docs/page104.md", Some("n104")),
            ("hello.txt", None),
            ("src/m5/x_6.txt", Some("n5")),
        ] {
            assert_eq!(indexed(&index, rel).as_deref(), want, "{rel}");
        }
    }

    #[test]
    fn an_index_that_cannot_be_read_governs_nothing_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tree.governance");
        let mut receipt = Receipt {
            governance_index: true,
            ..Receipt::default()
        };
        let missing = Governance::of(&mut receipt, file.clone());
        assert_eq!(missing.governing("src/a.rs"), None);
        assert!(
            missing
                .trouble()
                .is_some_and(|t| t.contains("tree.governance"))
        );

        let index = governance::index_bytes(&[node("a", &["src/**"])]);
        fs_err::write(&file, &index).unwrap();
        let good = Governance::of(&mut receipt, file.clone());
        assert_eq!(
            good.governing("src/a.rs").map(|g| g.spec).as_deref(),
            Some("a")
        );
        assert_eq!(good.trouble(), None);

        // Of an older spex's format, or with its DFA's bytes garbled.
        fs_err::write(&file, b"spex governance index 1 slots 0000000001\n").unwrap();
        let old = Governance::of(&mut receipt, file.clone());
        assert_eq!(old.governing("src/a.rs"), None);
        assert!(old.trouble().is_some());
        let mut garbled = index.clone();
        let at = garbled.len() - 200;
        garbled[at..].fill(0xff);
        fs_err::write(&file, &garbled).unwrap();
        let bad = Governance::of(&mut receipt, file);
        assert_eq!(bad.governing("src/a.rs"), None);
        assert!(bad.trouble().is_some());
    }
}
