//! The scrubber: replaces secrets, the user's paths and what changes from one run to the next
//! (ids, times, process ids, socket and temp file names) in what a cassette records, keeping
//! the geometry of what a terminal drew. Knows nothing of the files a cassette is made of.

use std::collections::HashMap;

use regex::bytes::Regex;
use serde_json::{Value, json};

/// One literal scrubbing rule: every occurrence of `find` becomes `replace`.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub find: String,
    pub replace: String,
}

/// One pattern scrubbing rule: every match of the regular expression `regex` becomes `replace`;
/// with `numbered`, each distinct text matched gets a placeholder of its own, `replace` followed
/// by a number in the order first seen (`$UUID1`), the same wherever that text shows again.
#[derive(Debug, Clone)]
pub struct Pattern {
    pub name: String,
    pub regex: String,
    pub replace: String,
    pub numbered: bool,
    /// Which bytes may not touch a match on either side (it would be part of a longer run).
    pub guard: Guard,
}

/// The bytes a match may not touch: a regular expression's `\b` would not do, since what a
/// terminal draws puts a letter right before a value (`\x1b[38;5;231m` + an id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    None,
    /// ASCII digits: a number of its own (a pid, a time).
    Digits,
    /// Hex digits: an id of its own.
    Hex,
}

impl Guard {
    fn touches(self, b: u8) -> bool {
        match self {
            Guard::None => false,
            Guard::Digits => b.is_ascii_digit(),
            Guard::Hex => b.is_ascii_hexdigit(),
        }
    }
}

/// A rule, compiled: what it finds and what it puts there.
#[derive(Debug, Clone)]
struct Finder {
    name: String,
    /// `literal`, `pattern` or `pid`, for the report.
    kind: &'static str,
    regex: Regex,
    /// The length of the text a literal rule finds (0 for a pattern).
    literal: usize,
    replace: String,
    numbered: bool,
    guard: Guard,
}

impl Finder {
    /// Where the rule's text is in `hay`: its matches that no guarded byte touches.
    fn find(&self, hay: &[u8]) -> Vec<(usize, usize)> {
        self.regex
            .find_iter(hay)
            .map(|m| (m.start(), m.end()))
            .filter(|&(s, e)| {
                let before = s.checked_sub(1).map(|i| hay[i]);
                let after = hay.get(e).copied();
                ![before, after]
                    .into_iter()
                    .flatten()
                    .any(|b| self.guard.touches(b))
            })
            .collect()
    }
}

/// Replaces secrets, paths and volatile values, counting hits per rule. Literal rules go first
/// (longest first: a tree path inside the home folder keeps its own placeholder), then
/// API-key-shaped tokens (`sk-…`, `Bearer …`), then patterns (an adapter's before the standard
/// ones), then the session's process ids.
#[derive(Debug, Clone)]
pub struct Scrubber {
    finders: Vec<Finder>,
    /// Every finder's expression at once: one pass says which rules may have anything to do.
    set: regex::bytes::RegexSet,
    /// Hits per rule, in the order of the rules.
    pub hits: Vec<(String, u64)>,
    /// The placeholder each distinct text a numbered rule matched got, by rule.
    ids: HashMap<(String, Vec<u8>), String>,
    /// How many placeholders each numbered rule gave out.
    numbers: HashMap<String, usize>,
    /// Volatile fields left in the cassette on purpose, and why.
    kept: Vec<(String, String)>,
}

impl Default for Scrubber {
    fn default() -> Scrubber {
        Scrubber::new(Vec::new())
    }
}

const KEY_RULE: &str = "api-key-shaped token";
const BEARER_RULE: &str = "bearer token";
const PID_RULE: &str = "process id";

/// Characters of a path segment, as the standard path patterns read them.
const SEGMENT: &str = r"[A-Za-z0-9._@%+=,~-]";

/// The standard volatile-value patterns: ids, times, socket and temp file names.
pub fn standard_patterns() -> Vec<Pattern> {
    let p = |name: &str, regex: String, replace: &str, numbered: bool| Pattern {
        name: name.to_owned(),
        regex,
        replace: replace.to_owned(),
        numbered,
        guard: Guard::None,
    };
    let guarded = |guard: Guard, p: Pattern| Pattern { guard, ..p };
    vec![
        guarded(
            Guard::Hex,
            p(
                "uuid",
                r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}".into(),
                "$UUID",
                true,
            ),
        ),
        guarded(
            Guard::Digits,
            p(
                "rfc3339 timestamp",
                r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?"
                    .into(),
                "$TIME",
                false,
            ),
        ),
        guarded(
            Guard::Digits,
            p(
                "local timestamp",
                r"(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun),? )?(?:(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) {1,2}\d{1,2},? (?:\d{4} )?)?\d{1,2}:\d{2}:\d{2}(?: ?[AaPp][Mm])?|\d{1,2}:\d{2} ?[AaPp][Mm]\b|\d{4}/\d{2}/\d{2}|\d{1,2}/\d{1,2}/\d{4}"
                    .into(),
                "$TIME",
                false,
            ),
        ),
        p(
            "socket path",
            format!(r"(?:unix:/*)?(?:\$[A-Z_]+)?(?:/{SEGMENT}+)+\.sock\b"),
            "$SOCKET",
            false,
        ),
        p(
            "temp path",
            format!(r"(?:/private)?(?:/tmp|/var/tmp|/var/folders|/dev/shm)(?:/{SEGMENT}+)+"),
            "$TMP",
            false,
        ),
        p(
            "temp file name",
            r"\b(?:tmp\.[A-Za-z0-9]{6,}|\.tmp[A-Za-z0-9]{6})\b".into(),
            "$TMPNAME",
            false,
        ),
    ]
}

fn set_of(finders: &[Finder]) -> regex::bytes::RegexSet {
    regex::bytes::RegexSet::new(finders.iter().map(|f| f.regex.as_str()))
        .expect("compiled expressions compile together")
}

fn compile(regex: &str) -> Option<Regex> {
    // ASCII word boundaries and classes: bytes of other text are not letters to a rule.
    Regex::new(&format!("(?-u){regex}")).ok()
}

impl Scrubber {
    /// A scrubber of literal `rules` and the key and bearer token rules (no patterns).
    pub fn new(rules: Vec<Rule>) -> Scrubber {
        Scrubber::with_patterns(rules, Vec::new())
    }

    /// A scrubber of literal `rules`, the token rules, then `patterns` in order (a pattern
    /// that does not compile is left out, its name in the report with no hits).
    pub fn with_patterns(mut rules: Vec<Rule>, patterns: Vec<Pattern>) -> Scrubber {
        rules.retain(|r| r.find.len() >= 4);
        rules.sort_by_key(|r| std::cmp::Reverse(r.find.len()));
        let mut finders: Vec<Finder> = rules
            .into_iter()
            .filter_map(|r| {
                Some(Finder {
                    regex: compile(&regex::escape(&r.find))?,
                    literal: r.find.len(),
                    name: r.name,
                    kind: "literal",
                    replace: r.replace,
                    numbered: false,
                    guard: Guard::None,
                })
            })
            .collect();
        let token = |name: &str, regex: &str, replace: &str| Finder {
            name: name.to_owned(),
            kind: "pattern",
            regex: compile(regex).expect("the token patterns compile"),
            literal: 0,
            replace: replace.to_owned(),
            numbered: false,
            guard: Guard::None,
        };
        finders.push(token(KEY_RULE, r"sk-[A-Za-z0-9._-]{16,}", "sk-<scrubbed>"));
        finders.push(token(
            BEARER_RULE,
            r"Bearer [A-Za-z0-9._-]{8,}",
            "Bearer <scrubbed>",
        ));
        let mut hits: Vec<(String, u64)> = Vec::new();
        for p in patterns {
            match compile(&p.regex) {
                Some(regex) => finders.push(Finder {
                    name: p.name,
                    kind: "pattern",
                    regex,
                    literal: 0,
                    replace: p.replace,
                    numbered: p.numbered,
                    guard: p.guard,
                }),
                None => hits.push((format!("{} (does not compile)", p.name), 0)),
            }
        }
        let mut all: Vec<(String, u64)> = finders.iter().map(|f| (f.name.clone(), 0)).collect();
        all.dedup();
        all.extend(hits);
        Scrubber {
            set: set_of(&finders),
            finders,
            hits: all,
            ids: HashMap::new(),
            numbers: HashMap::new(),
            kept: Vec::new(),
        }
    }

    /// Scrubs `pid` (one of the session's processes) wherever it stands as a number of its own.
    pub fn add_pid(&mut self, pid: u32) {
        let text = pid.to_string();
        let pids = self.finders.iter().filter(|f| f.kind == "pid");
        if pid == 0
            || pids
                .clone()
                .any(|f| f.regex.as_str() == format!("(?-u){text}"))
        {
            return;
        }
        let n = pids.count() + 1;
        if let Some(regex) = compile(&text) {
            self.finders.push(Finder {
                name: PID_RULE.into(),
                kind: "pid",
                regex,
                literal: text.len(),
                replace: format!("$PID{n}"),
                numbered: false,
                guard: Guard::Digits,
            });
            if !self.hits.iter().any(|(n, _)| n == PID_RULE) {
                self.hits.push((PID_RULE.into(), 0));
            }
            self.set = set_of(&self.finders);
        }
    }

    /// Notes a volatile field the cassette keeps on purpose (`field`: where; `why`).
    pub fn keep(&mut self, field: &str, why: &str) {
        self.kept.push((field.to_owned(), why.to_owned()));
    }

    /// What `scrub-report.json` says: every rule with its kind, placeholder and hits, the
    /// numbered placeholders given out, and the volatile fields kept on purpose.
    pub fn report(&self) -> Value {
        let rules: Vec<Value> = self
            .hits
            .iter()
            .map(|(rule, hits)| {
                let f = self.finders.iter().find(|f| &f.name == rule);
                let placeholder = f.map(|f| match f.kind {
                    "pid" => "$PID<n>".to_owned(),
                    _ if f.numbered => format!("{}<n>", f.replace),
                    _ => f.replace.clone(),
                });
                json!({"rule": rule, "kind": f.map(|f| f.kind), "placeholder": placeholder,
                    "hits": hits})
            })
            .collect();
        let mut numbered: Vec<(&String, &usize)> = self.numbers.iter().collect();
        numbered.sort();
        let kept: Vec<Value> = self
            .kept
            .iter()
            .map(|(field, why)| json!({"field": field, "why": why}))
            .collect();
        json!({
            "rules": rules,
            "distinct_ids": numbered.into_iter().map(|(rule, n)| json!({"rule": rule, "count": n})).collect::<Vec<_>>(),
            "kept": kept,
        })
    }

    fn hit(&mut self, name: &str, n: u64) {
        if let Some(h) = self.hits.iter_mut().find(|(k, _)| k == name) {
            h.1 += n;
        }
    }

    /// Longest literal any rule looks for, and at least the longest fixed-size pattern (a
    /// UUID, a timestamp) with color changes inside: how much a streaming caller must hold
    /// back. A text that may grow
    /// past it (a path) is kept whole by [`Scrubber::safe_cut`].
    pub fn longest(&self) -> usize {
        self.finders
            .iter()
            .map(|f| f.literal)
            .max()
            .unwrap_or(0)
            // An id drawn in a color gradient takes four times its length and more.
            .max(256)
    }

    /// Where a streaming caller holding `carry` may cut at or before `cut` without splitting
    /// any text a rule would replace: a text that starts before the cut and ends after it (or
    /// runs to the end of `carry`, so it may go on in the next chunk) moves the cut to its
    /// start, so it is scrubbed whole once it is all there.
    pub fn safe_cut(&self, carry: &[u8], mut cut: usize) -> usize {
        let visible = Visible::of(carry);
        let candidates: Vec<&Finder> = self
            .set
            .matches(visible.text.as_ref().map_or(carry, |t| &t.0))
            .into_iter()
            .map(|i| &self.finders[i])
            .collect();
        loop {
            let before = cut;
            for f in &candidates {
                // Unguarded: what may turn out a match once the bytes around it are known is
                // held too. A match ending at the cut is held as well: the byte after it,
                // which decides whether a guarded rule takes it, is not released with it.
                for (start, end) in visible.candidates(f, carry) {
                    if start >= cut {
                        break;
                    }
                    if end >= cut || end == carry.len() {
                        cut = start;
                        break;
                    }
                }
            }
            if cut == before {
                return cut;
            }
        }
    }

    pub fn scrub(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.scrub_mapped(bytes, &mut [], false)
    }

    /// The placeholder for `matched`, found by rule `i`: its fixed text, or for a numbered
    /// rule the one this text got when first seen.
    fn placeholder_for(&mut self, i: usize, matched: &[u8]) -> Vec<u8> {
        let f = &self.finders[i];
        if !f.numbered {
            return f.replace.as_bytes().to_vec();
        }
        let key = (f.name.clone(), matched.to_ascii_lowercase());
        if let Some(p) = self.ids.get(&key) {
            return p.as_bytes().to_vec();
        }
        let n = self.numbers.entry(f.name.clone()).or_insert(0);
        *n += 1;
        let p = format!("{}{n}", f.replace);
        self.ids.insert(key, p.clone());
        p.into_bytes()
    }

    /// `scrub`, also moving `positions` (offsets into `bytes`, ascending) to the matching
    /// offsets of the result. A position inside a replaced text moves to the end of its
    /// placeholder: the placeholder goes with the bytes before the position. With `pad`, a
    /// placeholder shorter than the text it replaces is followed by spaces up to that text's
    /// width, and one longer is cut to it: what a terminal draws keeps its geometry (a TUI
    /// that later redraws only the cells that changed, or moves the cursor to an absolute
    /// column, lands where it did, instead of leaving the tail of what the shorter
    /// placeholder did not cover).
    pub fn scrub_mapped(&mut self, bytes: &[u8], positions: &mut [usize], pad: bool) -> Vec<u8> {
        let mut out = bytes.to_vec();
        // Most output holds nothing to scrub: one pass over it says so.
        let candidates = {
            let visible = Visible::of(&out);
            self.set
                .matches(visible.text.as_ref().map_or(&out[..], |t| &t.0))
                .into_iter()
                .collect::<Vec<usize>>()
        };
        for i in candidates {
            let visible = Visible::of(&out);
            let matches = visible.matches(&self.finders[i], &out);
            if matches.is_empty() {
                continue;
            }
            let mut next = Vec::with_capacity(out.len());
            let mut moved = Mover { positions, next: 0 };
            let mut at = 0;
            for &(start, end) in &matches {
                copy(&out[at..start], at, &mut next, &mut moved);
                moved.upto(start, next.len());
                let (text, styles) = visible.split(&out, start, end);
                let with = self.placeholder_for(i, &text);
                placeholder(&mut next, &with, &text, pad);
                // The styles drawn inside the text stay, after its placeholder: what follows
                // is drawn as it was.
                next.extend_from_slice(&styles);
                moved.before(end, next.len());
                at = end;
            }
            copy(&out[at..], at, &mut next, &mut moved);
            moved.upto(usize::MAX, next.len());
            out = next;
            let name = self.finders[i].name.clone();
            self.hit(&name, matches.len() as u64);
        }
        out
    }

    pub fn scrub_str(&mut self, s: &str) -> String {
        String::from_utf8_lossy(&self.scrub(s.as_bytes())).into_owned()
    }

    /// `scrub_str` for text that is a terminal's screen: placeholders padded (see
    /// [`Scrubber::scrub_mapped`]).
    pub fn scrub_screen_str(&mut self, s: &str) -> String {
        String::from_utf8_lossy(&self.scrub_mapped(s.as_bytes(), &mut [], true)).into_owned()
    }

    /// A screen's rows, scrubbed also where a rule's text runs from one row on into the next
    /// (a long line the terminal wrapped: a path, a key or an id cut at the right edge, which
    /// no row holds whole). The placeholder, padded to the text's width, takes the text's
    /// cells, row by row, as the output scrubbed whole draws it. Run after the rows were
    /// scrubbed one by one.
    pub fn scrub_wrapped_rows(&mut self, rows: &mut [String]) {
        self.wrapped_rows(rows, false);
    }

    /// [`Scrubber::scrub_wrapped_rows`] of the literal rules only, run before the rows are
    /// scrubbed one by one: a path cut by the wrap is found whole before a pattern takes its
    /// first part (the checkout's path, cut after its temp folder, read as `$TMP`). Patterns
    /// wait for the pass after: over raw rows joined, one would read on into the next row.
    pub fn scrub_wrapped_literals(&mut self, rows: &mut [String]) {
        self.wrapped_rows(rows, true);
    }

    fn wrapped_rows(&mut self, rows: &mut [String], literals_only: bool) {
        for i in 0..self.finders.len() {
            if literals_only && self.finders[i].literal == 0 {
                continue;
            }
            let n = if self.finders[i].literal > 0 {
                self.wrapped_in(i, rows)
            } else {
                // A pattern may look at what follows its text (a word boundary): each row
                // with the next alone, so the row after is not read as going on from it.
                (0..rows.len().saturating_sub(1))
                    .map(|k| self.wrapped_in(i, &mut rows[k..k + 2]))
                    .sum()
            };
            let name = self.finders[i].name.clone();
            self.hit(&name, n);
        }
    }

    /// [`Scrubber::scrub_wrapped_rows`] of rule `i` over `rows` joined: how many it replaced.
    fn wrapped_in(&mut self, i: usize, rows: &mut [String]) -> u64 {
        {
            let mut n = 0;
            // Each pass takes one match; a placeholder holding the text cannot loop forever.
            for _ in 0..rows.len() {
                let joined = rows.concat();
                // Where each row starts in the joined text.
                let starts: Vec<usize> = rows
                    .iter()
                    .scan(0, |at, r| {
                        let start = *at;
                        *at += r.len();
                        Some(start)
                    })
                    .collect();
                let row_of = |at: usize| starts.iter().rposition(|&s| s <= at).unwrap_or(0);
                let Some((at, end)) = self.finders[i]
                    .find(joined.as_bytes())
                    .into_iter()
                    .find(|&(at, end)| row_of(at) != row_of(end - 1))
                else {
                    break;
                };
                let found = &joined[at..end];
                let replace = self.placeholder_for(i, found.as_bytes());
                let mut cells: Vec<char> = String::from_utf8_lossy(&replace).chars().collect();
                let width = found.chars().count();
                cells.resize(width, ' ');
                let mut cells = cells.into_iter();
                let (first, last) = (row_of(at), row_of(end - 1));
                for row in first..=last {
                    let r = &rows[row];
                    let from = at.saturating_sub(starts[row]);
                    let to = (end - starts[row]).min(r.len());
                    let taken = r[from..to].chars().count();
                    let mut part: String = cells.by_ref().take(taken).collect();
                    if row == last {
                        part.extend(cells.by_ref());
                    }
                    rows[row] = format!("{}{part}{}", &r[..from], &r[to..]);
                }
                n += 1;
            }
            n
        }
    }
}

/// Text as a terminal shows it: the bytes with their SGR sequences (colors, bold) taken out,
/// each kept byte with the offset it came from. A TUI that colors a text in a gradient (a resume
/// hint's id with a color change every few characters) draws it in pieces no rule would find
/// in the bytes themselves.
struct Visible {
    /// `None`: the bytes hold no SGR sequence; they are the text.
    text: Option<(Vec<u8>, Vec<usize>)>,
}

impl Visible {
    fn of(bytes: &[u8]) -> Visible {
        if !bytes.windows(2).any(|w| w == b"\x1b[") {
            return Visible { text: None };
        }
        let (mut text, mut from) = (
            Vec::with_capacity(bytes.len()),
            Vec::with_capacity(bytes.len()),
        );
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i..].starts_with(b"\x1b[") {
                let params = bytes[i + 2..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit() || **b == b';' || **b == b':')
                    .count();
                if bytes.get(i + 2 + params) == Some(&b'm') {
                    i += 3 + params;
                    continue;
                }
            }
            text.push(bytes[i]);
            from.push(i);
            i += 1;
        }
        Visible {
            text: Some((text, from)),
        }
    }

    /// Where `f`'s matches of the text are in the bytes: `(start, end)` offsets.
    fn matches(&self, f: &Finder, bytes: &[u8]) -> Vec<(usize, usize)> {
        self.map(f.find(self.text.as_ref().map_or(bytes, |t| &t.0)))
    }

    /// [`Visible::matches`] of `f`'s pattern, unguarded (what may turn out a match).
    fn candidates(&self, f: &Finder, bytes: &[u8]) -> Vec<(usize, usize)> {
        let hay = self.text.as_ref().map_or(bytes, |t| &t.0);
        self.map(
            f.regex
                .find_iter(hay)
                .map(|m| (m.start(), m.end()))
                .collect(),
        )
    }

    fn map(&self, found: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
        match &self.text {
            None => found,
            Some((_, from)) => found
                .into_iter()
                .map(|(s, e)| (from[s], from[e - 1] + 1))
                .collect(),
        }
    }

    /// The text of `bytes[start..end]` and the SGR sequences among it.
    fn split(&self, bytes: &[u8], start: usize, end: usize) -> (Vec<u8>, Vec<u8>) {
        let piece = &bytes[start..end];
        if self.text.is_none() {
            return (piece.to_vec(), Vec::new());
        }
        match Visible::of(piece).text {
            None => (piece.to_vec(), Vec::new()),
            Some((text, from)) => {
                let mut styles = Vec::new();
                let mut kept = from.iter().peekable();
                for (k, &b) in piece.iter().enumerate() {
                    if kept.peek() == Some(&&k) {
                        kept.next();
                    } else {
                        styles.push(b);
                    }
                }
                (text, styles)
            }
        }
    }
}

/// Copies `bytes` (starting at `from` of a pass's input) to `out`, moving the positions in it.
fn copy(bytes: &[u8], from: usize, out: &mut Vec<u8>, moved: &mut Mover<'_>) {
    for (k, &b) in bytes.iter().enumerate() {
        moved.upto(from + k, out.len());
        out.push(b);
    }
}

/// Moves positions (ascending offsets into a pass's input) to the same places in its output,
/// as the pass goes: a position at the start of a replaced text stays before its placeholder;
/// one inside it moves past it.
struct Mover<'a> {
    positions: &'a mut [usize],
    next: usize,
}

impl Mover<'_> {
    /// Every position up to `at` (of the input) lands at `out_len` (of the output).
    fn upto(&mut self, at: usize, out_len: usize) {
        while self.next < self.positions.len() && self.positions[self.next] <= at {
            self.positions[self.next] = out_len;
            self.next += 1;
        }
    }

    /// Every position before `at` lands at `out_len`.
    fn before(&mut self, at: usize, out_len: usize) {
        while self.next < self.positions.len() && self.positions[self.next] < at {
            self.positions[self.next] = out_len;
            self.next += 1;
        }
    }
}

/// `placeholder`, with `pad` fitted to the width (in characters) of `replaced`: followed by
/// spaces up to it, or cut to it.
fn placeholder(out: &mut Vec<u8>, placeholder: &[u8], replaced: &[u8], pad: bool) {
    if !pad {
        out.extend_from_slice(placeholder);
        return;
    }
    let width = String::from_utf8_lossy(replaced).chars().count();
    // Placeholders are ASCII: a byte is a cell.
    let kept = &placeholder[..placeholder.len().min(width)];
    out.extend_from_slice(kept);
    out.resize(out.len() + (width - kept.len()), b' ');
}
