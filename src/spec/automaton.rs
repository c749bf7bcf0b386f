//! `code` globs compiled into one DFA (regex-automata's dense DFA, built from globset's own
//! regex of each glob, so the glob semantics are globset's: `/` not special, case sensitive),
//! its bytes, and a path run through such bytes without compiling anything. Pure functions: it
//! reads and writes no files and knows nothing of spec nodes or of how an index stores its DFAs.
//!
//! A glob that starts with its distinctive literal text is compiled forwards, one that ends with
//! it backwards: many globs that share their start and differ at their end (`**/*_1.txt`,
//! `**/*_2.txt`) make a small DFA read from the end and a large, slow-to-build one read from the
//! start, and the other way round. Either way every match is anchored at both ends.

use regex_automata::dfa::{Automaton, StartKind, dense};
use regex_automata::nfa::thompson;
use regex_automata::util::syntax;
use regex_automata::{Anchored, Input, MatchKind};
use serde::{Deserialize, Serialize};

/// The most bytes one DFA may take: the hook checks every transition of one it loads (the safe
/// way to read it), some 4 bytes a nanosecond.
const DFA_BYTES: usize = 1 << 20;
/// The most memory determinizing one may take.
const DETERMINIZE_BYTES: usize = 8 << 20;

/// Which way a DFA reads a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Forward,
    Backward,
}

/// globset's regex for `glob` (anchored, `(?-u)^...$`); `None` for a glob globset rejects, which
/// matches nothing.
pub fn regex_of(glob: &str) -> Option<String> {
    glob_of(glob).map(|g| g.regex().to_owned())
}

/// `glob` as spex reads a `code` glob (globset, `/` not special); `None` when globset
/// rejects it.
pub fn glob_of(glob: &str) -> Option<globset::Glob> {
    globset::GlobBuilder::new(glob)
        .literal_separator(false)
        .build()
        .ok()
}

/// The way to compile `glob`: backwards when at least as much literal text ends it as starts
/// it (an alternation of plain words counts as literal: `src/{a,b}/*.ts` starts with 10).
pub fn direction_of(glob: &str) -> Direction {
    const WILD: &[char] = &['*', '?', '[', ']', '\\'];
    let start = glob.find(WILD).unwrap_or(glob.len());
    let end = glob.rfind(WILD).map_or(0, |i| glob.len() - i - 1);
    if end >= start {
        Direction::Backward
    } else {
        Direction::Forward
    }
}

/// The literal text every path `glob` matches must end with (`Backward`) or start with
/// (`Forward`): what follows its last (precedes its first) special character, a `/` next to
/// that character left out (`**/x.rs` matches `x.rs`). Empty when nothing is certain. A
/// prefilter only: a path with the literal may still not match.
pub fn literal_of(glob: &str, way: Direction) -> &str {
    const SPECIAL: &[char] = &['*', '?', '[', ']', '{', '}', ',', '\\'];
    match way {
        Direction::Backward => match glob.rfind(SPECIAL) {
            Some(i) => glob[i + 1..].trim_start_matches('/'),
            None => glob,
        },
        Direction::Forward => match glob.find(SPECIAL) {
            Some(i) => glob[..i].trim_end_matches('/'),
            None => glob,
        },
    }
}

/// The DFA of `regexes` (of [`regex_of`]), pattern `i` matching what `regexes[i]` matches, as
/// the bytes [`matching`] reads (native endian; [`matching`] wants them at a 4-aligned place);
/// `None` when it would be over the size limits: fewer regexes at a time make smaller DFAs.
pub fn build<P: AsRef<str>>(regexes: &[P], way: Direction) -> Option<Vec<u8>> {
    let dfa = dense::Builder::new()
        .syntax(syntax::Config::new().utf8(false).dot_matches_new_line(true))
        .thompson(
            thompson::Config::new()
                .utf8(false)
                .reverse(way == Direction::Backward),
        )
        .configure(
            dense::Config::new()
                .match_kind(MatchKind::All)
                .start_kind(StartKind::Anchored)
                .minimize(false)
                .accelerate(false)
                .specialize_start_states(false)
                .dfa_size_limit(Some(DFA_BYTES))
                .determinize_size_limit(Some(DETERMINIZE_BYTES)),
        )
        .build_many(regexes)
        .ok()?;
    let (bytes, pad) = dfa.to_bytes_native_endian();
    Some(bytes[pad..].to_vec())
}

/// Why a DFA's bytes could not be read.
#[derive(Debug, thiserror::Error)]
#[error("not a DFA this spex can read: {0}")]
pub struct Unreadable(String);

/// The patterns of the DFA in `bytes` (4-aligned, as [`build`] wrote them) that match all of
/// `path`, in increasing order. Checks the DFA's bytes (every transition) but compiles nothing;
/// the walk costs one step per byte of `path`.
pub fn matching(bytes: &[u8], way: Direction, path: &str) -> Result<Vec<usize>, Unreadable> {
    let (dfa, _) = dense::DFA::from_bytes(bytes).map_err(|e| Unreadable(e.to_string()))?;
    let input = Input::new(path).anchored(Anchored::Yes);
    let start = match way {
        Direction::Forward => dfa.start_state_forward(&input),
        Direction::Backward => dfa.start_state_reverse(&input),
    };
    let mut state = start.map_err(|e| Unreadable(e.to_string()))?;
    let mut step = |b: u8| {
        state = dfa.next_state(state, b);
        !dfa.is_dead_state(state)
    };
    let alive = match way {
        Direction::Forward => path.bytes().all(&mut step),
        Direction::Backward => path.bytes().rev().all(&mut step),
    };
    if !alive {
        return Ok(Vec::new());
    }
    let end = dfa.next_eoi_state(state);
    if !dfa.is_match_state(end) {
        return Ok(Vec::new());
    }
    let mut out: Vec<usize> = (0..dfa.match_len(end))
        .map(|i| dfa.match_pattern(end, i).as_usize())
        .collect();
    out.sort_unstable();
    Ok(out)
}

/// The first index of `buf` (at least 3 bytes long) at a 4-aligned address.
pub fn aligned_start(buf: &[u8]) -> usize {
    (4 - buf.as_ptr().addr() % 4) % 4
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The literal a glob's every match must carry at its reading end, checked against
    /// globset's own answer for paths that do and do not carry it.
    #[test]
    fn a_globs_literal_is_what_every_match_carries() {
        use Direction::{Backward, Forward};
        let cases: &[(&str, Direction, &str, &[&str])] = &[
            (
                "**/*_17.txt",
                Backward,
                "_17.txt",
                &["_17.txt", "a/b_17.txt"],
            ),
            ("**/x.rs", Backward, "x.rs", &["x.rs", "a/x.rs"]),
            ("src/a/**", Forward, "src/a", &["src/a/b", "src/a/b/c.rs"]),
            (
                "src/{a,b}/*.ts",
                Forward,
                "src",
                &["src/a/x.ts", "src/b/y.ts"],
            ),
            ("src/{a,b}/*.ts", Backward, ".ts", &["src/a/x.ts"]),
            ("lib/[a-c]*.py", Forward, "lib", &["lib/a.py", "lib/cz.py"]),
            (
                "docs/page1.md",
                Backward,
                "docs/page1.md",
                &["docs/page1.md"],
            ),
            ("a/**/b", Backward, "b", &["a/b", "a/x/y/b"]),
            ("a\\*b", Backward, "b", &["a*b"]),
            ("*.{ts,js}", Backward, "", &["x.ts", "y.js"]),
            ("**", Forward, "", &["anything"]),
        ];
        for (glob, way, want, matching) in cases {
            let lit = literal_of(glob, *way);
            assert_eq!(lit, *want, "{glob} {way:?}");
            let g = glob_of(glob).unwrap().compile_matcher();
            for path in *matching {
                assert!(g.is_match(path), "{glob} should match {path}");
                let carries = match way {
                    Backward => path.ends_with(lit),
                    Forward => path.starts_with(lit),
                };
                assert!(carries, "{glob} matches {path}, which lacks `{lit}`");
            }
        }
    }
}
