//! The scrubber: replaces secrets and the user's paths in what a cassette records, keeping the
//! geometry of what a terminal drew. Knows nothing of the files a cassette is made of.

/// One scrubbing rule: every occurrence of `find` becomes `replace`.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub find: String,
    pub replace: String,
}

/// Replaces secrets and paths, counting hits per rule. Besides the literal rules, any token
/// that looks like an API key (`sk-…`) or follows `Bearer ` is replaced.
#[derive(Debug, Clone, Default)]
pub struct Scrubber {
    rules: Vec<Rule>,
    pub hits: Vec<(String, u64)>,
}

const KEY_RULE: &str = "api-key-shaped token";
const BEARER_RULE: &str = "bearer token";

impl Scrubber {
    pub fn new(mut rules: Vec<Rule>) -> Scrubber {
        rules.retain(|r| r.find.len() >= 4);
        // Longest first: a tree path inside the home folder keeps its own placeholder.
        rules.sort_by_key(|r| std::cmp::Reverse(r.find.len()));
        let mut hits: Vec<(String, u64)> = rules.iter().map(|r| (r.name.clone(), 0)).collect();
        hits.push((KEY_RULE.into(), 0));
        hits.push((BEARER_RULE.into(), 0));
        Scrubber { rules, hits }
    }

    fn hit(&mut self, name: &str, n: u64) {
        if let Some(h) = self.hits.iter_mut().find(|(k, _)| k == name) {
            h.1 += n;
        }
    }

    /// Longest literal any rule looks for: how much a streaming caller must hold back.
    pub fn longest(&self) -> usize {
        self.rules
            .iter()
            .map(|r| r.find.len())
            .max()
            .unwrap_or(0)
            .max(64)
    }

    pub fn scrub(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.scrub_mapped(bytes, &mut [], false)
    }

    /// `scrub`, also moving `positions` (offsets into `bytes`, ascending) to the matching
    /// offsets of the result. A position inside a replaced text moves to the end of its
    /// placeholder: the placeholder goes with the bytes before the position. With `pad`, a
    /// placeholder shorter than the text it replaces is followed by spaces up to that text's
    /// width: what a terminal draws keeps its geometry (a TUI that later redraws only the
    /// cells that changed, or moves the cursor to an absolute column, lands where it did,
    /// instead of leaving the tail of what the shorter placeholder did not cover).
    pub fn scrub_mapped(&mut self, bytes: &[u8], positions: &mut [usize], pad: bool) -> Vec<u8> {
        let mut out = bytes.to_vec();
        for i in 0..self.rules.len() {
            let (find, replace) = (
                self.rules[i].find.as_bytes().to_vec(),
                self.rules[i].replace.as_bytes().to_vec(),
            );
            let (next, n) = replace_all(&out, &find, &replace, positions, pad);
            out = next;
            let name = self.rules[i].name.clone();
            self.hit(&name, n);
        }
        let (next, n) = replace_tokens(&out, b"sk-", 16, b"sk-<scrubbed>", positions, pad);
        out = next;
        self.hit(KEY_RULE, n);
        let (next, n) = replace_tokens(&out, b"Bearer ", 8, b"Bearer <scrubbed>", positions, pad);
        self.hit(BEARER_RULE, n);
        next
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
    /// (a long line the terminal wrapped: a path or a key cut at the right edge, which no row
    /// holds whole). The placeholder, padded to the text's width, takes the text's cells, row
    /// by row, as the output scrubbed whole draws it. Run after the rows were scrubbed one by
    /// one.
    pub fn scrub_wrapped_rows(&mut self, rows: &mut [String]) {
        for i in 0..self.rules.len() {
            let (find, replace) = (self.rules[i].find.clone(), self.rules[i].replace.clone());
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
                let Some(at) = joined
                    .match_indices(&find)
                    .map(|(at, _)| at)
                    .find(|&at| row_of(at) != row_of(at + find.len() - 1))
                else {
                    break;
                };
                let mut cells: Vec<char> = replace.chars().collect();
                let width = find.chars().count();
                cells.resize(width.max(cells.len()), ' ');
                let mut cells = cells.into_iter();
                let (first, last) = (row_of(at), row_of(at + find.len() - 1));
                for row in first..=last {
                    let r = &rows[row];
                    let from = at.saturating_sub(starts[row]);
                    let to = (at + find.len() - starts[row]).min(r.len());
                    let taken = r[from..to].chars().count();
                    let mut part: String = cells.by_ref().take(taken).collect();
                    if row == last {
                        part.extend(cells.by_ref());
                    }
                    rows[row] = format!("{}{part}{}", &r[..from], &r[to..]);
                }
                n += 1;
            }
            let name = self.rules[i].name.clone();
            self.hit(&name, n);
        }
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

/// `placeholder`, followed with `pad` by spaces up to the width (in characters) of `replaced`.
fn placeholder(out: &mut Vec<u8>, placeholder: &[u8], replaced: &[u8], pad: bool) {
    out.extend_from_slice(placeholder);
    if pad {
        let width = |b: &[u8]| String::from_utf8_lossy(b).chars().count();
        let missing = width(replaced).saturating_sub(width(placeholder));
        out.resize(out.len() + missing, b' ');
    }
}

fn replace_all(
    hay: &[u8],
    find: &[u8],
    replace: &[u8],
    positions: &mut [usize],
    pad: bool,
) -> (Vec<u8>, u64) {
    let mut out = Vec::with_capacity(hay.len());
    let mut moved = Mover { positions, next: 0 };
    let mut n = 0;
    let mut i = 0;
    while i < hay.len() {
        moved.upto(i, out.len());
        if hay[i..].starts_with(find) {
            placeholder(&mut out, replace, find, pad);
            i += find.len();
            moved.before(i, out.len());
            n += 1;
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    moved.upto(usize::MAX, out.len());
    (out, n)
}

/// Replaces `prefix` + a run of at least `min` token characters.
fn replace_tokens(
    hay: &[u8],
    prefix: &[u8],
    min: usize,
    with: &[u8],
    positions: &mut [usize],
    pad: bool,
) -> (Vec<u8>, u64) {
    let token = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.';
    let mut out = Vec::with_capacity(hay.len());
    let mut moved = Mover { positions, next: 0 };
    let mut n = 0;
    let mut i = 0;
    while i < hay.len() {
        moved.upto(i, out.len());
        if hay[i..].starts_with(prefix) && !hay[i + prefix.len()..].starts_with(b"<scrubbed>") {
            let rest = &hay[i + prefix.len()..];
            let len = rest.iter().take_while(|&&b| token(b)).count();
            if len >= min {
                placeholder(&mut out, with, &hay[i..i + prefix.len() + len], pad);
                i += prefix.len() + len;
                moved.before(i, out.len());
                n += 1;
                continue;
            }
        }
        out.push(hay[i]);
        i += 1;
    }
    moved.upto(usize::MAX, out.len());
    (out, n)
}
