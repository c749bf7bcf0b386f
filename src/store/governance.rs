//! The governance index: every `code` glob of the governed spec nodes, filed in buckets by the
//! key an edited path must have for the glob to match it (`spec::keys`), each key's globs
//! compiled into DFAs (`spec::automaton`), in one file beside the tree's receipt. The hook path
//! reads its header, one table line per bucket a path can hit, the line saying what those
//! buckets hold, the DFAs of the keys the path has, and the one node that wins; so its cost
//! does not grow with the spec tree, only with the globs that share a key with the path.
//! Written by `materialize`, read by `dispatch`; it runs no DFA and matches no glob.
//!
//! Layout: a fixed-width header line naming the format, the slot count `n` (a power of two)
//! and the node count `m`; `n + 1` fixed-width table lines `offset length meta`, slot 0 the
//! catch-all, slot `1 + (fnv1a(key) mod n)` a key's bucket; `m` table lines `offset length 0`,
//! one a node; then the buckets and the nodes. A bucket is one JSON line of `meta` bytes
//! saying, for each DFA, its key, the way it reads, where its bytes are and which node each of
//! its patterns stands for; then the DFAs' bytes (native endian, each at a 4-aligned offset
//! from the line's end, as regex-automata reads them back without compiling). A glob whose DFA
//! alone would be over the size limit is kept as text (`loose`), for the hook to match the slow
//! way. A node is one JSON line: its spec, title and globs.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::spec::automaton::{self, Direction};
use crate::spec::keys::{self, Key};

use super::Governed;

/// A governed node, as the index keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub spec: String,
    pub title: String,
    /// Its globs, for a reader of the file (the hook does not need them).
    pub code: Vec<String>,
}

/// A glob kept as text: its DFA would be too large.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Loose {
    /// The node's place in path order: of two nodes that govern a file, the first wins.
    pub node: u32,
    pub glob: String,
}

/// What a bucket's JSON line says.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Meta {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    loose: Vec<(String, Loose)>,
}

/// One DFA of a bucket: pattern `i` is a glob of node `nodes[i]`.
#[derive(Debug, Serialize, Deserialize)]
struct Part {
    /// The key its globs are filed under ([`tag`]).
    key: String,
    way: Direction,
    /// Where its bytes are, from the first 4-aligned offset after the bucket's line.
    at: usize,
    len: usize,
    nodes: Vec<u32>,
    /// The literal texts of its globs ([`automaton::literal_of`]): a path that ends (reading
    /// backwards) or starts (forwards) with none of them matches none of its globs, and its
    /// bytes are not read. Absent when one of its globs has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lits: Option<Vec<String>>,
}

/// One DFA read from the index, ready to run.
#[derive(Debug)]
pub struct Dfa {
    way: Direction,
    buf: Vec<u8>,
    /// Where its bytes start in `buf` (4-aligned).
    start: usize,
    len: usize,
    nodes: Vec<u32>,
}

impl Dfa {
    /// The way it reads a path, its bytes, and the node each of its patterns stands for.
    pub fn parts(&self) -> (Direction, &[u8], &[u32]) {
        (
            self.way,
            &self.buf[self.start..self.start + self.len],
            &self.nodes,
        )
    }
}

/// What the buckets a path can hit hold for it: the DFAs of its keys and the loose globs.
#[derive(Debug, Default)]
pub struct Candidates {
    pub dfas: Vec<Dfa>,
    pub loose: Vec<Loose>,
}

/// The format's version is in its first line: an index of another version is not read.
const MAGIC: &str = "spex governance index 2 slots ";
const HEADER_LEN: usize = MAGIC.len() + 10 + " nodes ".len() + 10 + 1;
const LINE_LEN: usize = 3 * (10 + 1);
/// The most bytes one bucket or node line of an index may take.
const PIECE_MAX: usize = 64 << 20;

/// The key a part is filed under, as its line says it: the catch-all's is empty.
fn tag(key: Option<&Key>) -> String {
    match key {
        None => String::new(),
        Some(Key::First(s)) => format!("f:{s}"),
        Some(Key::Ext(s)) => format!("e:{s}"),
    }
}

/// The globs filed under one key (`None`: the catch-all), each with its node.
type Filed<'a> = (Option<&'a Key>, &'a [(u32, &'a str)]);

/// The index of `governed` (in path order): deterministic bytes, so an unchanged spec tree
/// writes nothing.
pub fn index_bytes(governed: &[Governed]) -> Vec<u8> {
    let mut filed: BTreeMap<Option<Key>, Vec<(u32, &str)>> = BTreeMap::new();
    for (node, g) in (0u32..).zip(governed) {
        for glob in &g.code {
            match keys::of_glob(glob) {
                Some(ks) => {
                    for k in ks {
                        filed.entry(Some(k)).or_default().push((node, glob));
                    }
                }
                None => filed.entry(None).or_default().push((node, glob)),
            }
        }
    }
    let slots = filed.len().max(1).next_power_of_two();
    let mut buckets: Vec<Vec<Filed>> = vec![Vec::new(); slots + 1];
    for (key, globs) in &filed {
        buckets[key.as_ref().map_or(0, |k| slot(k, slots))].push((key.as_ref(), globs));
    }
    let bodies: Vec<(Vec<u8>, usize)> = buckets.iter().map(|b| body(b)).collect();
    let nodes: Vec<Vec<u8>> = governed
        .iter()
        .map(|g| {
            let owner = Owner {
                spec: g.spec.clone(),
                title: g.title.clone(),
                code: g.code.clone(),
            };
            let mut line = serde_json::to_vec(&owner).expect("a node serializes");
            line.push(b'\n');
            line
        })
        .collect();
    let mut out = format!("{MAGIC}{slots:010} nodes {:010}\n", nodes.len()).into_bytes();
    let mut offset = HEADER_LEN + (slots + 1 + nodes.len()) * LINE_LEN;
    for (body, meta) in &bodies {
        let at = if body.is_empty() { 0 } else { offset };
        out.extend_from_slice(format!("{at:010} {:010} {meta:010}\n", body.len()).as_bytes());
        offset += body.len();
    }
    for node in &nodes {
        out.extend_from_slice(format!("{offset:010} {:010} {:010}\n", node.len(), 0).as_bytes());
        offset += node.len();
    }
    for (body, _) in bodies {
        out.extend(body);
    }
    for node in nodes {
        out.extend(node);
    }
    out
}

/// A bucket's bytes and the length of its line: empty for no globs (or none globset can
/// read, which match nothing).
fn body(keys: &[Filed]) -> (Vec<u8>, usize) {
    let mut compiled = Vec::new();
    let mut meta = Meta::default();
    for (key, globs) in keys {
        let mut ways: [Vec<(u32, &str, String)>; 2] = [Vec::new(), Vec::new()];
        for &(node, glob) in *globs {
            if let Some(re) = automaton::regex_of(glob) {
                let back = automaton::direction_of(glob) == Direction::Backward;
                ways[usize::from(back)].push((node, glob, re));
            }
        }
        let key = tag(*key);
        for (way, group) in [Direction::Forward, Direction::Backward]
            .into_iter()
            .zip(&ways)
        {
            let loose = compile(way, group, &mut |nodes, lits, bytes| {
                compiled.push((key.clone(), way, nodes, lits, bytes));
            });
            meta.loose
                .extend(loose.into_iter().map(|l| (key.clone(), l)));
        }
    }
    if compiled.is_empty() && meta.loose.is_empty() {
        return (Vec::new(), 0);
    }
    let mut at = 0;
    let mut dfas = Vec::new();
    for (key, way, nodes, lits, bytes) in compiled {
        meta.parts.push(Part {
            key,
            way,
            at,
            len: bytes.len(),
            nodes,
            lits,
        });
        at = (at + bytes.len()).next_multiple_of(4);
        dfas.push(bytes);
    }
    let mut out = serde_json::to_vec(&meta).expect("a bucket serializes");
    out.push(b'\n');
    let line = out.len();
    for bytes in dfas {
        out.resize(out.len().next_multiple_of(4), 0);
        out.extend(bytes);
    }
    (out, line)
}

/// Compiles `group` into one DFA, or into halves of it when one would be over the size limit
/// (globs that each grow the DFA with the others' states fit apart), handing each to `done`;
/// returns the globs too large alone, to keep as text.
fn compile(
    way: Direction,
    group: &[(u32, &str, String)],
    done: &mut dyn FnMut(Vec<u32>, Option<Vec<String>>, Vec<u8>),
) -> Vec<Loose> {
    if group.is_empty() {
        return Vec::new();
    }
    let regexes: Vec<&str> = group.iter().map(|(_, _, re)| re.as_str()).collect();
    match automaton::build(&regexes, way) {
        Some(bytes) => {
            let lits: Option<BTreeSet<String>> = group
                .iter()
                .map(|(_, glob, _)| automaton::literal_of(glob, way))
                .map(|l| (!l.is_empty()).then(|| l.to_owned()))
                .collect();
            done(
                group.iter().map(|(node, ..)| *node).collect(),
                lits.map(|l| l.into_iter().collect()),
                bytes,
            );
            Vec::new()
        }
        None if group.len() == 1 => vec![Loose {
            node: group[0].0,
            glob: group[0].1.to_owned(),
        }],
        None => {
            let (a, b) = group.split_at(group.len() / 2);
            let mut loose = compile(way, a, done);
            loose.extend(compile(way, b, done));
            loose
        }
    }
}

/// Opens the index file, on the hook path: without a copy of its path unless it fails.
#[expect(
    clippy::disallowed_types,
    reason = "the plain file `fsutil::open_lean` returns, whose error names the path"
)]
pub fn open(index: &Path) -> io::Result<std::fs::File> {
    let mut options = fs_err::OpenOptions::new();
    options.read(true);
    crate::fsutil::open_lean(&options, index)
}

/// Reading a piece of the index, from a file or (in tests) from memory.
pub trait ReadAt {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
}

#[expect(
    clippy::disallowed_types,
    reason = "positioned reads of the file `open` returns; nothing is opened here"
)]
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

/// The slot count and the node count the header names.
fn header<R: ReadAt + ?Sized>(index: &R) -> io::Result<(usize, usize)> {
    let mut header = [0u8; HEADER_LEN];
    index.read_exact_at(&mut header, 0)?;
    std::str::from_utf8(&header)
        .ok()
        .and_then(|h| {
            let (slots, nodes) = h.strip_prefix(MAGIC)?.trim_end().split_once(" nodes ")?;
            Some((slots.parse::<usize>().ok()?, nodes.parse::<usize>().ok()?))
        })
        .filter(|(slots, _)| slots.is_power_of_two())
        .ok_or_else(|| invalid("not a governance index of this spex's format"))
}

/// Table line `i`: `(offset, length, meta)`.
fn table_line<R: ReadAt + ?Sized>(index: &R, i: usize) -> io::Result<(u64, usize, usize)> {
    let mut line = [0u8; LINE_LEN];
    index.read_exact_at(&mut line, (HEADER_LEN + i * LINE_LEN) as u64)?;
    std::str::from_utf8(&line)
        .ok()
        .and_then(|l| {
            let mut f = l.trim_end().split(' ');
            let at = f.next()?.parse().ok()?;
            let len = f.next()?.parse().ok()?;
            let meta = f.next()?.parse().ok()?;
            Some((at, len, meta))
        })
        // A damaged line must not size an allocation the hook cannot make (an abort, not an
        // error): no piece of an index spex writes comes near this.
        .filter(|&(_, len, meta)| len <= PIECE_MAX && meta <= PIECE_MAX)
        .ok_or_else(|| invalid("bad table line"))
}

/// What the buckets `rel` can hit hold for its keys (its first component, its extension) and
/// the catch-all; a glob among them may still not match.
pub fn candidates_in<R: ReadAt + ?Sized>(index: &R, rel: &str) -> io::Result<Candidates> {
    let (slots, _) = header(index)?;
    let path_keys = keys::of_path(rel);
    let mut wanted: Vec<usize> = path_keys.iter().map(|k| slot(k, slots)).collect();
    wanted.push(0);
    wanted.sort_unstable();
    wanted.dedup();
    let tags: Vec<String> = path_keys.iter().map(Some).chain([None]).map(tag).collect();
    let mut out = Candidates::default();
    for s in wanted {
        let (at, len, meta_len) = table_line(index, s)?;
        if len == 0 {
            continue;
        }
        if meta_len == 0 || meta_len > len {
            return Err(invalid("bad table line"));
        }
        let mut line = vec![0u8; meta_len];
        index.read_exact_at(&mut line, at)?;
        let meta: Meta = serde_json::from_slice(&line).map_err(|e| invalid(&e.to_string()))?;
        let dfas = at + meta_len.next_multiple_of(4) as u64;
        for p in meta.parts {
            if !tags.contains(&p.key) {
                continue;
            }
            let has = |l: &String| match p.way {
                Direction::Backward => rel.ends_with(l.as_str()),
                Direction::Forward => rel.starts_with(l.as_str()),
            };
            if p.lits.as_ref().is_some_and(|lits| !lits.iter().any(has)) {
                continue;
            }
            let ends_in =
                p.at.checked_add(p.len)
                    .and_then(|end| end.checked_add(meta_len.next_multiple_of(4)));
            if ends_in.is_none_or(|end| end > len) {
                return Err(invalid("a DFA past its bucket's end"));
            }
            let mut buf = vec![0u8; p.len + 3];
            let start = automaton::aligned_start(&buf);
            index.read_exact_at(&mut buf[start..start + p.len], dfas + p.at as u64)?;
            out.dfas.push(Dfa {
                way: p.way,
                buf,
                start,
                len: p.len,
                nodes: p.nodes,
            });
        }
        out.loose.extend(
            meta.loose
                .into_iter()
                .filter(|(key, _)| tags.contains(key))
                .map(|(_, l)| l),
        );
    }
    Ok(out)
}

/// Node `node` of the index.
pub fn owner_in<R: ReadAt + ?Sized>(index: &R, node: u32) -> io::Result<Owner> {
    let (slots, nodes) = header(index)?;
    let node = node as usize;
    if node >= nodes {
        return Err(invalid("no such node"));
    }
    let (at, len, _) = table_line(index, slots + 1 + node)?;
    let mut line = vec![0u8; len];
    index.read_exact_at(&mut line, at)?;
    serde_json::from_slice(&line).map_err(|e| invalid(&e.to_string()))
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

    /// The globs the index holds for `rel`, compiled or kept as text.
    fn globs(index: &[u8], rel: &str) -> Vec<String> {
        let candidates = candidates_in(index, rel).unwrap();
        let mut g: Vec<String> = Vec::new();
        for dfa in &candidates.dfas {
            let (_, bytes, nodes) = dfa.parts();
            assert_eq!(bytes.as_ptr().addr() % 4, 0, "a DFA starts 4-aligned");
            for &n in nodes {
                g.push(owner_in(index, n).unwrap().spec);
            }
        }
        g.extend(candidates.loose.iter().map(|l| l.glob.clone()));
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
        assert!(candidates_in(&index[..20], "dir/a.rs").is_err());
        assert!(candidates_in(&b"something else entirely, long enough"[..], "a").is_err());
        // Cut inside the last node's line: the DFAs read, the node does not.
        let mut cut = index.clone();
        cut.truncate(index.len() - 5);
        assert!(candidates_in(&cut[..], "dir/a.rs").is_ok());
        assert!(owner_in(&cut[..], 0).is_err());
        // Cut inside the DFA's bytes: the line reads, the DFA's bytes are not all there.
        let label = b"rust-regex-automata-dfa-dense";
        let dfa = index.windows(label.len()).position(|w| w == label).unwrap();
        let mut short = index.clone();
        short.truncate(dfa + 40);
        assert!(candidates_in(&short[..], "dir/a.rs").is_err());
    }

    #[test]
    fn an_index_of_the_format_before_is_not_read() {
        let v1 = b"spex governance index 1 slots 0000000001\n0000000000 0000000000\n0000000097 0000000046\n[{\"node\":0,\"spec\":\"a\",\"title\":\"A\",\"glob\":\"dir/**\"}]\n";
        let err = candidates_in(&v1[..], "dir/a.rs").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn a_node_is_read_by_its_place_and_holds_its_globs() {
        let tree = [
            Governed {
                spec: "a".into(),
                title: "A".into(),
                code: vec!["dir/**".into(), "**/*.rs".into()],
            },
            Governed {
                spec: "b".into(),
                title: "B".into(),
                code: vec!["x".into()],
            },
        ];
        let index = index_bytes(&tree);
        let b = owner_in(&index[..], 1).unwrap();
        assert_eq!((b.spec.as_str(), b.title.as_str()), ("b", "B"));
        assert_eq!(owner_in(&index[..], 0).unwrap().code, tree[0].code);
        assert!(owner_in(&index[..], 2).is_err());
    }

    #[test]
    fn a_path_reads_only_the_dfas_of_its_own_keys() {
        // One slot for every key: the bucket holds both, the path runs only its own.
        let tree = nodes(&["dir/**", "**/*.md"]);
        let index = index_bytes(&tree);
        assert_eq!(globs(&index, "dir/a.rs"), vec!["dir/**".to_owned()]);
        assert_eq!(globs(&index, "x/a.md"), vec!["**/*.md".to_owned()]);
    }

    #[test]
    fn a_path_without_a_dfas_literals_skips_it_unread() {
        let index = index_bytes(&nodes(&["**/*_1.txt", "**/*_2.txt"]));
        // Both globs sit in the `.txt` bucket; `hello.txt` ends with neither `_1.txt` nor
        // `_2.txt`, so their DFA is not even read.
        assert!(
            candidates_in(&index[..], "x/hello.txt")
                .unwrap()
                .dfas
                .is_empty()
        );
        // A path with one of them reads the DFA, which holds both globs.
        assert_eq!(globs(&index, "x/a_2.txt"), vec!["**/*_1.txt", "**/*_2.txt"]);
        // A glob with no literal keeps its DFA read for every path of its bucket.
        let index = index_bytes(&nodes(&["**/*_1.txt", "**/*.txt"]));
        assert_eq!(
            candidates_in(&index[..], "x/hello.txt").unwrap().dfas.len(),
            1
        );
    }

    #[test]
    fn a_table_line_naming_a_huge_piece_is_an_error_not_an_allocation() {
        let index = index_bytes(&nodes(&["dir/**"]));
        // The bucket of `dir` says it is 9,999,999,999 bytes long.
        let mut huge = index.clone();
        let (slots, _) = header(&index[..]).unwrap();
        let slot = (1..=slots)
            .find(|&i| table_line(&index[..], i).is_ok_and(|(_, len, _)| len > 0))
            .unwrap();
        let at = HEADER_LEN + slot * LINE_LEN;
        huge[at + 11..at + 21].copy_from_slice(b"9999999999");
        assert!(table_line(&huge[..], slot).is_err());
        assert!(candidates_in(&huge[..], "dir/a.rs").is_err());
    }
}
