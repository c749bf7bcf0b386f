//! The governance index: every `code` glob of the governed spec nodes, filed in buckets by the
//! key an edited path must have for the glob to match it (`spec::keys`), each bucket's globs
//! compiled into DFAs (`spec::automaton`), in one file beside the tree's receipt. The hook path
//! reads its header, one table line per bucket a path can hit and those buckets, so its cost
//! does not grow with the spec tree: only with the globs that share a key with the path.
//! Written by `materialize`, read by `dispatch`; it runs no DFA and matches no glob.
//!
//! Layout: a fixed-width header line naming the format and the slot count `n` (a power of
//! two); `n + 1` fixed-width table lines `offset length`, slot 0 the catch-all, slot `1 +
//! (fnv1a(key) mod n)` a key's bucket; then the buckets. A bucket is one JSON line saying which
//! node each DFA pattern stands for, then, each at a 4-aligned offset from the bucket's start,
//! the DFAs' bytes (native endian, as regex-automata reads them back without compiling). A
//! glob whose DFA alone would be over the size limit is kept as text (`loose`), for the hook to
//! match the slow way.

use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::spec::automaton::{self, Direction};
use crate::spec::keys::{self, Key};

use super::Governed;

/// The node a glob stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    /// The node's place in path order: of two nodes that govern a file, the first wins.
    pub node: u32,
    pub spec: String,
    pub title: String,
}

/// A glob kept as text: its DFA would be too large.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Loose {
    pub node: u32,
    pub spec: String,
    pub title: String,
    pub glob: String,
}

/// What a bucket's JSON line says.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Meta {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    loose: Vec<Loose>,
}

/// One DFA of a bucket: pattern `i` is the glob of `owners[i]`.
#[derive(Debug, Serialize, Deserialize)]
struct Part {
    way: Direction,
    /// Where its bytes are, from the first 4-aligned offset after the bucket's line.
    at: usize,
    len: usize,
    owners: Vec<Owner>,
}

/// One glob of one governed node, as filed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    owner: Owner,
    glob: String,
}

/// The format's version is in its first line: an index of another version is not read.
const MAGIC: &str = "spex governance index 2 slots ";
const HEADER_LEN: usize = MAGIC.len() + 10 + 1;
const LINE_LEN: usize = 10 + 1 + 10 + 1;

/// The index of `governed` (in path order): deterministic bytes, so an unchanged spec tree
/// writes nothing.
pub fn index_bytes(governed: &[Governed]) -> Vec<u8> {
    let mut filed: Vec<(Option<Key>, Entry)> = Vec::new();
    for (node, g) in (0u32..).zip(governed) {
        for glob in &g.code {
            let entry = Entry {
                owner: Owner {
                    node,
                    spec: g.spec.clone(),
                    title: g.title.clone(),
                },
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
    let bodies: Vec<Vec<u8>> = buckets.iter().map(|b| body(b)).collect();
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

/// A bucket's bytes: empty for no globs (or none globset can read, which match nothing).
fn body(entries: &[&Entry]) -> Vec<u8> {
    let mut ways: [Vec<(&Entry, String)>; 2] = [Vec::new(), Vec::new()];
    for e in entries {
        if let Some(re) = automaton::regex_of(&e.glob) {
            ways[usize::from(automaton::direction_of(&e.glob) == Direction::Backward)]
                .push((e, re));
        }
    }
    let mut compiled = Vec::new();
    let mut meta = Meta::default();
    for (way, group) in [Direction::Forward, Direction::Backward]
        .into_iter()
        .zip(&ways)
    {
        compile(way, group, &mut compiled, &mut meta.loose);
    }
    if compiled.is_empty() && meta.loose.is_empty() {
        return Vec::new();
    }
    let mut at = 0;
    let mut dfas = Vec::new();
    for (way, owners, bytes) in compiled {
        meta.parts.push(Part {
            way,
            at,
            len: bytes.len(),
            owners,
        });
        at = (at + bytes.len()).next_multiple_of(4);
        dfas.push(bytes);
    }
    let mut out = serde_json::to_vec(&meta).expect("a bucket serializes");
    out.push(b'\n');
    for bytes in dfas {
        out.resize(out.len().next_multiple_of(4), 0);
        out.extend(bytes);
    }
    out
}

/// Compiles `group` into one DFA, or into halves of it when one would be over the size limit
/// (globs that each grow the DFA with the others' states fit apart), and keeps as text a glob
/// too large alone.
fn compile(
    way: Direction,
    group: &[(&Entry, String)],
    parts: &mut Vec<(Direction, Vec<Owner>, Vec<u8>)>,
    loose: &mut Vec<Loose>,
) {
    if group.is_empty() {
        return;
    }
    let regexes: Vec<String> = group.iter().map(|(_, re)| re.clone()).collect();
    match automaton::build(&regexes, way) {
        Some(bytes) => {
            let owners = group.iter().map(|(e, _)| e.owner.clone()).collect();
            parts.push((way, owners, bytes));
        }
        None if group.len() == 1 => {
            let e = group[0].0;
            loose.push(Loose {
                node: e.owner.node,
                spec: e.owner.spec.clone(),
                title: e.owner.title.clone(),
                glob: e.glob.clone(),
            });
        }
        None => {
            let (a, b) = group.split_at(group.len() / 2);
            compile(way, a, parts, loose);
            compile(way, b, parts, loose);
        }
    }
}

/// One bucket as read: its bytes in a buffer of their own, 4-aligned where a DFA starts.
#[derive(Debug)]
pub struct Bucket {
    buf: Vec<u8>,
    /// Where the bucket's DFAs start in `buf` (the parts' `at` count from there).
    dfas: usize,
    meta: Meta,
}

/// One DFA of a bucket, ready to run: the way it reads, its bytes and the node each of its
/// patterns stands for.
pub type Dfa<'a> = (Direction, &'a [u8], &'a [Owner]);

impl Bucket {
    /// The bucket's DFAs; an error for one whose bytes are not where the line says.
    pub fn dfas(&self) -> impl Iterator<Item = io::Result<Dfa<'_>>> {
        self.meta.parts.iter().map(|p| {
            let from = self.dfas.checked_add(p.at);
            let bytes = from
                .and_then(|f| self.buf.get(f..f.checked_add(p.len)?))
                .ok_or_else(|| invalid("a DFA past its bucket's end"))?;
            Ok((p.way, bytes, &p.owners[..]))
        })
    }

    /// The bucket's globs kept as text.
    pub fn loose(&self) -> &[Loose] {
        &self.meta.loose
    }
}

/// The buckets `rel` can hit (its first component, its extension, the catch-all); a glob in
/// them may still not match.
pub fn buckets(index: &Path, rel: &str) -> io::Result<Vec<Bucket>> {
    buckets_in(&fs_err::File::open(index)?.into_file(), rel)
}

/// Reading a piece of the index, from a file or (in tests) from memory.
pub trait ReadAt {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
}

impl ReadAt for std::fs::File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, offset)
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

/// [`buckets`] from any source.
pub fn buckets_in<R: ReadAt + ?Sized>(index: &R, rel: &str) -> io::Result<Vec<Bucket>> {
    let mut header = [0u8; HEADER_LEN];
    index.read_exact_at(&mut header, 0)?;
    let slots = std::str::from_utf8(&header)
        .ok()
        .and_then(|h| h.strip_prefix(MAGIC)?.trim_end().parse::<usize>().ok())
        .filter(|n| n.is_power_of_two())
        .ok_or_else(|| invalid("not a governance index of this spex's format"))?;
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
        let mut buf = vec![0u8; len + 3];
        let start = automaton::aligned_start(&buf);
        index.read_exact_at(&mut buf[start..start + len], at)?;
        let body = &buf[start..start + len];
        let line_end = body
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| invalid("a bucket without its line"))?;
        let meta: Meta =
            serde_json::from_slice(&body[..line_end]).map_err(|e| invalid(&e.to_string()))?;
        let dfas = start + (line_end + 1).next_multiple_of(4);
        out.push(Bucket { buf, dfas, meta });
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

    /// One node a glob, named by its glob, so that a bucket's nodes say which globs it holds.
    fn nodes(globs: &[&str]) -> Vec<Governed> {
        globs
            .iter()
            .map(|g| Governed {
                spec: (*g).to_owned(),
                title: g.to_uppercase(),
                code: vec![(*g).to_owned()],
            })
            .collect()
    }

    /// The globs in the buckets `rel` hits, compiled or kept as text.
    fn globs(index: &[u8], rel: &str) -> Vec<String> {
        let mut g: Vec<String> = Vec::new();
        for bucket in buckets_in(index, rel).unwrap() {
            for dfa in bucket.dfas() {
                let (_, bytes, owners) = dfa.unwrap();
                assert_eq!(bytes.as_ptr().addr() % 4, 0, "a DFA starts 4-aligned");
                g.extend(owners.iter().map(|o| o.spec.clone()));
            }
            g.extend(bucket.loose().iter().map(|l| l.glob.clone()));
        }
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
        let index = index_bytes(&nodes(&[
            "dir/**",
            "**/*.proto",
            "{x,y}/**/*.ts",
            "**/src/**",
        ]));
        assert!(finds(&index, "dir/a.rs", &["**/src/**", "dir/**"]));
        assert!(finds(&index, "q/a.proto", &["**/*.proto", "**/src/**"]));
        assert!(finds(&index, "y/z.ts", &["**/src/**", "{x,y}/**/*.ts"]));
        assert!(finds(&index, "docs/readme.md", &["**/src/**"]));
    }

    #[test]
    fn a_path_reads_a_few_entries_of_a_large_index() {
        let globs_of: Vec<String> = (0..500)
            .map(|i| match i % 4 {
                0 => format!("dir{i}/**"),
                1 => format!("**/*.p{i}"),
                2 => format!("lib{i}/a*_*.rs"),
                _ => format!("{{a{i},b{i}}}/**/*.ts"),
            })
            .collect();
        let refs: Vec<&str> = globs_of.iter().map(String::as_str).collect();
        let index = index_bytes(&nodes(&refs));
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
        let tree = nodes(&["dir/**", "*.rs"]);
        assert_eq!(index_bytes(&tree), index_bytes(&tree));
        let empty = index_bytes(&[]);
        assert_eq!(globs(&empty, "dir/a.rs"), Vec::<String>::new());
    }

    #[test]
    fn a_glob_globset_rejects_is_filed_nowhere() {
        let index = index_bytes(&nodes(&["a{b", "a/**"]));
        assert_eq!(globs(&index, "a/x"), vec!["a/**".to_owned()]);
    }

    #[test]
    fn a_damaged_index_is_an_error_not_an_answer() {
        let index = index_bytes(&nodes(&["dir/**"]));
        assert!(buckets_in(&index[..20], "dir/a.rs").is_err());
        assert!(buckets_in(&b"something else entirely, long enough"[..], "a").is_err());
        let mut cut = index.clone();
        cut.truncate(index.len() - 5);
        assert!(buckets_in(&cut[..], "dir/a.rs").is_err());
        // Cut inside the DFA's bytes: the line reads, the DFA's bytes are not all there.
        let mut short = index.clone();
        let line = short.len() - 40;
        short.truncate(line);
        assert!(buckets_in(&short[..], "dir/a.rs").is_err());
    }

    #[test]
    fn an_index_of_the_format_before_is_not_read() {
        let v1 = b"spex governance index 1 slots 0000000001\n0000000000 0000000000\n0000000097 0000000046\n[{\"node\":0,\"spec\":\"a\",\"title\":\"A\",\"glob\":\"dir/**\"}]\n";
        let err = buckets_in(&v1[..], "dir/a.rs").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
