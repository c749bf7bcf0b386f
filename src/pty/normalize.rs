//! Volatile screen content made stable for assertions: clocks, durations, spinner glyphs and
//! token counters change from one recording of the same session to the next. Only what a test
//! or `replay --at` compares goes through here; `output.raw` and the recorded frames keep what
//! the program drew. Knows no harness: the patterns are ones many terminal programs draw, and
//! the glyphs a harness spins with come from its adapter.

/// Spinner glyphs many programs draw (braille dots are checked apart).
const SPINNER: &[char] = &['◐', '◓', '◑', '◒'];

/// Each line with its volatile parts replaced: `<clock>`, `<duration>`, `<spin>` (a glyph of
/// `spinner`, or a common one, leading its line) and the count of a token counter as `<n>`.
pub fn lines(lines: &[String], spinner: &[char]) -> Vec<String> {
    lines.iter().map(|l| line(l, spinner)).collect()
}

/// One line with its volatile parts replaced (see `lines`).
pub fn line(text: &str, spinner: &[char]) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < c.len() && c[i] == ' ' {
        out.push(' ');
        i += 1;
    }
    // A spinner is a glyph leading its line, followed by a space (or nothing).
    if i < c.len()
        && (spinner.contains(&c[i])
            || SPINNER.contains(&c[i])
            || ('\u{2800}'..='\u{28FF}').contains(&c[i]))
        && c.get(i + 1).is_none_or(|&n| n == ' ')
    {
        out.push_str("<spin>");
        i += 1;
    }
    while i < c.len() {
        let starts_word = i == 0 || !(c[i - 1].is_alphanumeric() || matches!(c[i - 1], '.' | ':'));
        if c[i].is_ascii_digit() && starts_word {
            if let Some(end) = clock(&c, i) {
                out.push_str("<clock>");
                i = end;
                continue;
            }
            if let Some(end) = duration(&c, i) {
                out.push_str("<duration>");
                i = end;
                continue;
            }
            if let Some(end) = token_count(&c, i) {
                out.push_str("<n>");
                i = end;
                continue;
            }
        }
        out.push(c[i]);
        i += 1;
    }
    out
}

/// The end of the run of ASCII digits from `i`.
fn digits(c: &[char], mut i: usize) -> usize {
    while i < c.len() && c[i].is_ascii_digit() {
        i += 1;
    }
    i
}

/// Whether a word ends at `i` (the line ends or no letter, digit or `:` follows).
fn word_ends(c: &[char], i: usize) -> bool {
    c.get(i).is_none_or(|&n| !(n.is_alphanumeric() || n == ':'))
}

/// `14:03` or `14:03:27` from `i`: where it ends.
fn clock(c: &[char], i: usize) -> Option<usize> {
    let h = digits(c, i);
    if !(1..=2).contains(&(h - i)) || c.get(h) != Some(&':') {
        return None;
    }
    let mut end = h;
    for _ in 0..2 {
        if c.get(end) != Some(&':') {
            break;
        }
        let m = digits(c, end + 1);
        if m - (end + 1) != 2 {
            break;
        }
        end = m;
    }
    (end > h && word_ends(c, end)).then_some(end)
}

/// `3s`, `0.4s`, `350ms`, `1m 2s`, `1m2s`, `1h 2m 3s` from `i`: where it ends.
fn duration(c: &[char], i: usize) -> Option<usize> {
    // One number and its unit, no letter right after.
    let part = |at: usize| -> Option<usize> {
        let mut n = digits(c, at);
        if n == at {
            return None;
        }
        if c.get(n) == Some(&'.') && c.get(n + 1).is_some_and(char::is_ascii_digit) {
            n = digits(c, n + 1);
        }
        let unit = ["ms", "h", "m", "s"].into_iter().find(|u| {
            u.chars()
                .enumerate()
                .all(|(k, uc)| c.get(n + k) == Some(&uc))
        })?;
        let end = n + unit.len();
        (!c.get(end).is_some_and(|ch| ch.is_alphabetic())).then_some(end)
    };
    let mut end = part(i)?;
    loop {
        // The next part follows directly (`1m2s`) or one space on (`1m 2s`).
        let next = match c.get(end) {
            Some(d) if d.is_ascii_digit() => end,
            Some(' ') if c.get(end + 1).is_some_and(char::is_ascii_digit) => end + 1,
            _ => break,
        };
        match part(next) {
            Some(e) => end = e,
            None => break,
        }
    }
    word_ends(c, end).then_some(end)
}

/// The count of `1,234 tokens`, `1.2k tokens` or `12 token` from `i`: where the count ends.
fn token_count(c: &[char], i: usize) -> Option<usize> {
    let mut n = i;
    while n < c.len() && (c[n].is_ascii_digit() || matches!(c[n], ',' | '.')) {
        n += 1;
    }
    if matches!(c.get(n), Some('k' | 'K' | 'M')) {
        n += 1;
    }
    let rest: String = c[n..].iter().take(7).collect();
    rest.starts_with(" token").then_some(n)
}

#[cfg(test)]
mod tests {
    use super::line;

    #[test]
    fn volatile_parts_are_replaced_and_the_rest_kept() {
        let cases = [
            ("✻ Worked for 0s", "<spin> Worked for <duration>"),
            (
                "✶ Working… (1m 2s · ↓ 1.2k tokens)",
                "<spin> Working… (<duration> · ↓ <n> tokens)",
            ),
            (
                "* Thinking… (350ms · 1,234 tokens)",
                "<spin> Thinking… (<duration> · <n> tokens)",
            ),
            ("⠋ Loading 1h 2m 3s", "<spin> Loading <duration>"),
            ("  ⠙", "  <spin>"),
            (
                "last run 14:03, next 9:05:07",
                "last run <clock>, next <clock>",
            ),
            (
                "took 0.4s; 12 token left",
                "took <duration>; <n> token left",
            ),
            // Not volatile: versions, words with digits, a bullet that is a word, ratios.
            ("Some Agent v2.1.197", "Some Agent v2.1.197"),
            ("● No tool needed. DONE", "● No tool needed. DONE"),
            // A glyph the program was not said to spin with.
            ("✳ not a spinner here", "✳ not a spinner here"),
            ("*bold* 3 files in 2s3", "*bold* 3 files in 2s3"),
            ("a 123:4567 b 10ms2", "a 123:4567 b 10ms2"),
            ("took 1m2s 4 files", "took <duration> 4 files"),
            ("5min 3sec", "5min 3sec"),
        ];
        // The glyphs an adapter would hand in.
        let spinner = ['✻', '✶', '*'];
        for (input, want) in cases {
            assert_eq!(line(input, &spinner), want, "{input:?}");
        }
    }
}
