//! The governance index: every `code` glob of the governed spec nodes, filed in buckets by the
//! key an edited path must have for the glob to match it (`spec::keys`), in one file beside the
//! tree's receipt. The hook path reads its header, one table line per bucket a path can hit
//! and those buckets, so its cost does not grow with the spec tree. Written by `materialize`,
//! read by `dispatch`; it does not match globs.
//!
//! Layout: a fixed-width header line naming the slot count `n` (a power of two); `n + 1`
//! fixed-width table lines `offset length`, slot 0 the catch-all, slot `1 + (fnv1a(key) mod
//! n)` a key's bucket; then the buckets, each a JSON array of entries and a newline.

use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::spec::keys::{self, Key};

use super::Governed;

/// One glob of one governed node, as filed in a bucket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The node's place in path order: of two nodes that govern a file, the first wins.
    pub node: u32,
    pub spec: String,
    pub title: String,
    pub glob: String,
}

const MAGIC: &str = "spex governance index 1 slots ";
const HEADER_LEN: usize = MAGIC.len() + 10 + 1;
const LINE_LEN: usize = 10 + 1 + 10 + 1;

/// The index of `governed` (in path order): deterministic bytes, so an unchanged spec tree
/// writes nothing.
pub fn index_bytes(governed: &[Governed]) -> Vec<u8> {
    let mut filed: Vec<(Option<Key>, Entry)> = Vec::new();
    for (node, g) in (0u32..).zip(governed) {
        for glob in &g.code {
            let entry = Entry {
                node,
                spec: g.spec.clone(),
                title: g.title.clone(),
                glob: glob.clone(),
            };
            match keys::of_glob(glob) {
                Some(ks) => filed.extend(ks.into_iter().map(|k| (Some(k), entry.clone()))),
                None => filed.push((None, entry)),
            }
        }
    }
    let mut distinct: Vec<&Key> = filed.iter().filter_map(|(k, _)| k.as_ref()).collect();
    distinct.sort();
    distinct.dedup();
    let slots = distinct.len().max(1).next_power_of_two();
    let mut buckets: Vec<Vec<&Entry>> = vec![Vec::new(); slots + 1];
    for (key, entry) in &filed {
        let bucket = &mut buckets[key.as_ref().map_or(0, |k| slot(k, slots))];
        if bucket.last() != Some(&entry) {
            bucket.push(entry);
        }
    }
    let bodies: Vec<Vec<u8>> = buckets
        .iter()
        .map(|b| {
            if b.is_empty() {
                return Vec::new();
            }
            let mut body = serde_json::to_vec(b).expect("entries serialize");
            body.push(b'\n');
            body
        })
        .collect();
    let mut out = format!("{MAGIC}{slots:010}\n").into_bytes();
    let mut offset = HEADER_LEN + (slots + 1) * LINE_LEN;
    for body in &bodies {
        let at = if body.is_empty() { 0 } else { offset };
        out.extend_from_slice(format!("{at:010} {:010}\n", body.len()).as_bytes());
        offset += body.len();
    }
    for body in bodies {
        out.extend(body);
    }
    out
}

/// The entries in the buckets `rel` can hit (its first component, its extension, the
/// catch-all), in no particular order; a glob among them may still not match.
pub fn candidates(index: &Path, rel: &str) -> io::Result<Vec<Entry>> {
    candidates_in(&fs_err::File::open(index)?, rel)
}

/// Reading a piece of the index, from a file or (in tests) from memory.
pub trait ReadAt {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
}

impl ReadAt for fs_err::File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        fs_err::os::unix::fs::FileExt::read_exact_at(self, buf, offset)
    }
}

impl ReadAt for [u8] {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let piece = usize::try_from(offset)
            .ok()
            .and_then(|at| self.get(at..at.checked_add(buf.len())?))
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(piece);
        Ok(())
    }
}

/// [`candidates`] from any source.
pub fn candidates_in<R: ReadAt + ?Sized>(index: &R, rel: &str) -> io::Result<Vec<Entry>> {
    let mut header = [0u8; HEADER_LEN];
    index.read_exact_at(&mut header, 0)?;
    let slots = std::str::from_utf8(&header)
        .ok()
        .and_then(|h| h.strip_prefix(MAGIC)?.trim_end().parse::<usize>().ok())
        .filter(|n| n.is_power_of_two())
        .ok_or_else(|| invalid("not a governance index"))?;
    let mut wanted: Vec<usize> = keys::of_path(rel).iter().map(|k| slot(k, slots)).collect();
    wanted.push(0);
    wanted.sort_unstable();
    wanted.dedup();
    let mut out = Vec::new();
    for s in wanted {
        let mut line = [0u8; LINE_LEN];
        index.read_exact_at(&mut line, (HEADER_LEN + s * LINE_LEN) as u64)?;
        let (at, len) = std::str::from_utf8(&line)
            .ok()
            .and_then(|l| l.trim_end().split_once(' '))
            .and_then(|(a, n)| Some((a.parse::<u64>().ok()?, n.parse::<usize>().ok()?)))
            .ok_or_else(|| invalid("bad table line"))?;
        if len == 0 {
            continue;
        }
        let mut body = vec![0u8; len];
        index.read_exact_at(&mut body, at)?;
        let entries: Vec<Entry> =
            serde_json::from_slice(&body).map_err(|e| invalid(&e.to_string()))?;
        out.extend(entries);
    }
    Ok(out)
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

/// The slot of `key` among `slots` (a power of two): FNV-1a, stable across builds and runs.
fn slot(key: &Key, slots: usize) -> usize {
    let (tag, text) = match key {
        Key::First(s) => (b'f', s),
        Key::Ext(s) => (b'e', s),
    };
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in std::iter::once(tag).chain(text.bytes()) {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    #[expect(
        clippy::cast_possible_truncation,
        reason = "masked below `slots`, a usize"
    )]
    let s = (hash & (slots as u64 - 1)) as usize;
    1 + s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn governed(spec: &str, code: &[&str]) -> Governed {
        Governed {
            spec: spec.into(),
            title: spec.to_uppercase(),
            code: code.iter().map(|c| (*c).to_owned()).collect(),
        }
    }

    fn globs(index: &[u8], rel: &str) -> Vec<String> {
        let mut g: Vec<String> = candidates_in(index, rel)
            .unwrap()
            .into_iter()
            .map(|e| e.glob)
            .collect();
        g.sort();
        g
    }

    /// Whether the candidates for `rel` include every one of `want` (a bucket may also hold
    /// the globs of keys that share its slot).
    fn finds(index: &[u8], rel: &str, want: &[&str]) -> bool {
        let got = globs(index, rel);
        want.iter().all(|w| got.iter().any(|g| g == w))
    }

    #[test]
    fn a_path_reads_its_own_buckets_and_the_catch_all() {
        let index = index_bytes(&[
            governed("a", &["dir/**", "**/*.proto"]),
            governed("b", &["{x,y}/**/*.ts", "**/src/**"]),
        ]);
        assert!(finds(&index, "dir/a.rs", &["**/src/**", "dir/**"]));
        assert!(finds(&index, "q/a.proto", &["**/*.proto", "**/src/**"]));
        assert!(finds(&index, "y/z.ts", &["**/src/**", "{x,y}/**/*.ts"]));
        assert!(finds(&index, "docs/readme.md", &["**/src/**"]));
    }

    #[test]
    fn a_path_reads_a_few_entries_of_a_large_index() {
        let nodes: Vec<Governed> = (0..500)
            .map(|i| match i % 4 {
                0 => governed(&format!("n{i}"), &[&format!("dir{i}/**")]),
                1 => governed(&format!("n{i}"), &[&format!("**/*.p{i}")]),
                2 => governed(&format!("n{i}"), &[&format!("lib{i}/a*_*.rs")]),
                _ => governed(&format!("n{i}"), &[&format!("{{a{i},b{i}}}/**/*.ts")]),
            })
            .collect();
        let index = index_bytes(&nodes);
        for rel in ["dir248/x.rs", "docs/readme.md", "a3/x/y.ts", "q/x.p5"] {
            let got = globs(&index, rel);
            assert!(got.len() <= 6, "{rel}: {got:?}");
        }
        assert!(finds(&index, "dir248/x.rs", &["dir248/**"]));
        assert!(finds(&index, "b7/x.ts", &["{a7,b7}/**/*.ts"]));
        assert!(finds(&index, "q/x.p5", &["**/*.p5"]));
    }

    #[test]
    fn the_same_spec_tree_gives_the_same_bytes() {
        let nodes = [governed("a", &["dir/**"]), governed("b", &["*.rs"])];
        assert_eq!(index_bytes(&nodes), index_bytes(&nodes));
        let empty = index_bytes(&[]);
        assert_eq!(globs(&empty, "dir/a.rs"), Vec::<String>::new());
    }

    #[test]
    fn a_damaged_index_is_an_error_not_an_answer() {
        let index = index_bytes(&[governed("a", &["dir/**"])]);
        assert!(candidates_in(&index[..20], "dir/a.rs").is_err());
        assert!(candidates_in(&b"something else entirely, long enough"[..], "a").is_err());
        let mut cut = index.clone();
        cut.truncate(index.len() - 5);
        assert!(candidates_in(&cut[..], "dir/a.rs").is_err());
    }
}
