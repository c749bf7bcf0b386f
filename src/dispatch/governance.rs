//! Which spec node governs an edited file: the first node in path order with a `code` glob
//! that matches it. A current receipt points to the governance index, of which only the
//! buckets the path can hit are read, and only when an event edits a file; a receipt written
//! before the index carries the nodes inline and is scanned in order, as it always was.
//! Matching one glob is `glob.rs`'s. Reads the store, writes nothing.

use std::path::PathBuf;

use super::glob::matches;
use crate::store::Receipt;
use crate::store::governance::{self, Entry};

/// Where the governed nodes of this checkout are.
#[derive(Debug)]
pub enum Governance {
    /// In the index file beside the receipt.
    Index(PathBuf),
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
            Governance::Index(index)
        } else {
            Governance::Inline(std::mem::take(&mut receipt.governance))
        }
    }

    /// The node that governs `rel` (repo-relative), if any. An index that cannot be read
    /// governs nothing, as a missing receipt does: `spex doctor` and `materialize --check`
    /// report it stale.
    pub fn governing(&self, rel: &str) -> Option<Governing> {
        match self {
            Governance::Index(file) => first_match(governance::candidates(file, rel).ok()?, rel),
            Governance::Inline(nodes) => nodes
                .iter()
                .find(|g| g.code.iter().any(|pat| matches(pat, rel)))
                .map(|g| Governing {
                    spec: g.spec.clone(),
                    title: g.title.clone(),
                }),
        }
    }
}

/// Of the candidates from the index, the first node in path order whose glob matches `rel`.
fn first_match(mut candidates: Vec<Entry>, rel: &str) -> Option<Governing> {
    candidates.sort_by_key(|e| e.node);
    candidates
        .into_iter()
        .find(|e| matches(&e.glob, rel))
        .map(|e| Governing {
            spec: e.spec,
            title: e.title,
        })
}

#[cfg(test)]
mod tests {
    use super::super::glob::tests::{glob_and_path, glob_matches, path, pattern};
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
        prop::collection::vec(prop::collection::vec(pattern(), 1..3), 1..8).prop_map(|codes| {
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
        fn the_index_answers_what_a_scan_answers(nodes in nodes(), rels in prop::collection::vec(path(), 1..6)) {
            let index = governance::index_bytes(&nodes);
            for rel in &rels {
                let indexed = first_match(governance::candidates_in(&index[..], rel).unwrap(), rel);
                let inline = Governance::Inline(nodes.clone()).governing(rel);
                let want = scanned(&nodes, rel);
                prop_assert_eq!(indexed.as_ref().map(|g| &g.spec), want.as_ref(), "index, {}", rel);
                prop_assert_eq!(inline.map(|g| g.spec), want, "inline, {}", rel);
            }
        }
    }

    #[test]
    fn the_first_node_in_path_order_wins_whichever_bucket_holds_it() {
        let nodes = vec![
            Governed {
                spec: "first".into(),
                title: "First".into(),
                code: vec!["**/*.rs".into()],
            },
            Governed {
                spec: "second".into(),
                title: "Second".into(),
                code: vec!["src/**".into()],
            },
        ];
        let index = governance::index_bytes(&nodes);
        let got = first_match(
            governance::candidates_in(&index[..], "src/a.rs").unwrap(),
            "src/a.rs",
        );
        assert_eq!(got.map(|g| g.spec).as_deref(), Some("first"));
    }
}
