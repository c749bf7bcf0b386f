//! Where a session's recordings (cassettes) go in its folder of the store: one folder each,
//! never one over another.

use std::path::PathBuf;

use crate::store::ProjectStore;

/// The folder of session `id`'s recording number `n` (from 1): `cassette`, then
/// `cassette-2`, `cassette-3`, ... (a resumed session records beside the earlier recordings).
fn nth_cassette_dir(store: &ProjectStore, id: &str, n: usize) -> PathBuf {
    let name = if n <= 1 {
        "cassette".to_owned()
    } else {
        format!("cassette-{n}")
    };
    store.session_dir(id).join(name)
}

/// Session `id`'s latest recording (its first folder when it has none).
pub fn cassette_dir(store: &ProjectStore, id: &str) -> PathBuf {
    (1..=MAX_RECORDINGS)
        .map(|n| nth_cassette_dir(store, id, n))
        .take_while(|d| d.exists())
        .last()
        .unwrap_or_else(|| nth_cassette_dir(store, id, 1))
}

/// The folder session `id`'s next recording goes into: never one that holds a recording.
pub fn new_cassette_dir(store: &ProjectStore, id: &str) -> PathBuf {
    (1..=MAX_RECORDINGS)
        .map(|n| nth_cassette_dir(store, id, n))
        .find(|d| !d.exists())
        .unwrap_or_else(|| nth_cassette_dir(store, id, MAX_RECORDINGS + 1))
}

/// More recordings of one session than anyone keeps; past it, new ones go into one last
/// folder, which a recorder refuses while it holds a recording (never overwritten).
const MAX_RECORDINGS: usize = 10_000;
