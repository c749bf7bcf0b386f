//! Keys spex owns in a git config file (the repository's shared `config`, a checkout's
//! `config.worktree`): set and taken back by key, one line each, so every byte that is not
//! spex's stays as it was. What spex wrote (the key, its value, whether spex wrote the section
//! header or a line ending before it) is recorded in spex's state; a key that no longer holds
//! spex's value is the user's. Only plain sections (`[core]`, no subsection) are edited.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::block::eol_of;

/// One variable spex wrote into a git config file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitEntry {
    /// The section, without subsection (`core`).
    pub section: String,
    /// The variable as spex spelled it (`excludesFile`); git compares names case-blind.
    pub key: String,
    pub value: String,
    /// spex wrote the section header too: it goes with the last variable under it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub header: bool,
    /// The file did not end with a line ending, and spex wrote one before its own lines.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub newline: bool,
}

/// What spex owns in one git config file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitOwned {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entries: Vec<GitEntry>,
}

impl GitOwned {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value spex wrote at `section.key`, if it wrote one.
    pub fn value_of(&self, section: &str, key: &str) -> Option<&str> {
        self.position(section, key)
            .map(|i| self.entries[i].value.as_str())
    }

    pub fn position(&self, section: &str, key: &str) -> Option<usize> {
        self.entries.iter().position(|e| {
            e.section.eq_ignore_ascii_case(section) && e.key.eq_ignore_ascii_case(key)
        })
    }
}

/// One line of a config text (a value continued with `\` spans several).
#[derive(Debug)]
struct Line {
    range: Range<usize>,
    /// A section header (the section it opens is `section`).
    header: bool,
    /// A variable on this line (after a header on the same line, too): lowercase name, value.
    var: Option<(String, String)>,
    /// The plain section this line is in (lowercase); `None` in a subsection or before any.
    section: Option<String>,
}

/// git's value syntax: leading and trailing blanks dropped, `"` quotes, `\` escapes, `#` and
/// `;` start a comment outside quotes, `\` at a line's end continues it.
fn parse_value(raw: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let mut blanks = 0;
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => break,
            '\r' if chars.peek() == Some(&'\n') => break,
            '#' | ';' if !quoted => break,
            c if c.is_whitespace() && !quoted => {
                if !out.is_empty() {
                    blanks += 1;
                }
                continue;
            }
            _ => {}
        }
        out.extend(std::iter::repeat_n(' ', blanks));
        blanks = 0;
        match c {
            '"' => quoted = !quoted,
            '\\' => match chars.next() {
                // A continued line: the value goes on after the line ending.
                Some('\n') | None => {}
                Some('\r') if chars.peek() == Some(&'\n') => {
                    chars.next();
                }
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('b') => out.push('\u{8}'),
                Some(other) => out.push(other),
            },
            c => out.push(c),
        }
    }
    out
}

/// A variable line's name and value (`None`: not a variable line). A name alone means true.
fn parse_var(text: &str) -> Option<(String, String)> {
    let t = text.trim_start();
    let name_len = t
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .unwrap_or(t.len());
    let name = &t[..name_len];
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    let rest = t[name_len..].trim_start_matches([' ', '\t']);
    let value = if let Some(v) = rest.strip_prefix('=') {
        parse_value(v)
    } else if rest.is_empty() || rest.starts_with(['\r', '\n', '#', ';']) {
        "true".to_owned()
    } else {
        return None;
    };
    Some((name.to_ascii_lowercase(), value))
}

/// Whether a variable line's raw text continues on the next line (an odd run of `\` at its end).
fn continues(raw: &str) -> bool {
    let body = raw.trim_end_matches(['\n', '\r']);
    body.len() < raw.len() && body.bytes().rev().take_while(|b| *b == b'\\').count() % 2 == 1
}

fn lines(text: &str) -> Vec<Line> {
    let mut out = Vec::new();
    let mut section: Option<String> = None;
    let mut start = 0;
    let mut pieces = text.split_inclusive('\n').peekable();
    while let Some(piece) = pieces.next() {
        let mut end = start + piece.len();
        let trimmed = piece.trim_start();
        let mut header = false;
        let mut var = None;
        if let Some(inner) = trimmed.strip_prefix('[') {
            let close = inner.find(']').unwrap_or(inner.len());
            let name = &inner[..close];
            let plain = !name.contains(['"', '.', ' ', '\t']);
            section = plain.then(|| name.to_ascii_lowercase());
            header = true;
            var = inner.get(close + 1..).and_then(parse_var);
        } else if parse_var(piece).is_some() {
            while continues(&text[start..end]) {
                let Some(next) = pieces.next() else { break };
                end += next.len();
            }
            var = parse_var(&text[start..end]);
        }
        out.push(Line {
            range: start..end,
            header,
            var,
            section: section.clone(),
        });
        start = end;
    }
    out
}

fn is(line: &Line, section: &str) -> bool {
    line.section
        .as_deref()
        .is_some_and(|s| s.eq_ignore_ascii_case(section))
}

/// Every value of `section.key` in `text`, in order (git uses the last).
pub fn values(text: &str, section: &str, key: &str) -> Vec<String> {
    lines(text)
        .into_iter()
        .filter(|l| is(l, section))
        .filter_map(|l| l.var)
        .filter(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v)
        .collect()
}

/// The value git reads for `section.key` in `text`.
pub fn last_value(text: &str, section: &str, key: &str) -> Option<String> {
    values(text, section, key).pop()
}

/// git's `false` spellings (anything else set is true).
pub fn is_false(value: &str) -> bool {
    ["false", "no", "off", "0", ""]
        .iter()
        .any(|f| value.eq_ignore_ascii_case(f))
}

/// `value` as git reads it back.
fn quote(value: &str) -> String {
    let plain = !value.is_empty()
        && !value
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\\' | '#' | ';'));
    if plain {
        return value.to_owned();
    }
    let mut out = String::from('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `text` with `section.key = value` added: under the last `[section]` header, after its last
/// variable, or in a new section at the end.
pub fn set(text: &str, section: &str, key: &str, value: &str) -> (String, GitEntry) {
    let eol = eol_of(text);
    let ls = lines(text);
    let header = ls.iter().rposition(|l| l.header && is(l, section));
    let var_line = format!("\t{key} = {}{eol}", quote(value));
    let mut entry = GitEntry {
        section: section.to_owned(),
        key: key.to_owned(),
        value: value.to_owned(),
        header: false,
        newline: false,
    };
    let (at, insert) = if let Some(h) = header {
        let last_var = ls[h..]
            .iter()
            .enumerate()
            .take_while(|(i, l)| *i == 0 || !l.header)
            .filter(|(_, l)| l.var.is_some())
            .map(|(i, _)| h + i)
            .last()
            .unwrap_or(h);
        (ls[last_var].range.end, var_line)
    } else {
        entry.header = true;
        (text.len(), format!("[{section}]{eol}{var_line}"))
    };
    let mut out = String::with_capacity(text.len() + insert.len() + 1);
    out.push_str(&text[..at]);
    if at > 0 && !text[..at].ends_with('\n') {
        out.push_str(eol);
        entry.newline = true;
    }
    out.push_str(&insert);
    out.push_str(&text[at..]);
    (out, entry)
}

/// `text` without `entry` (the last line that sets its key to its value), and without the
/// header and line ending spex wrote for it once nothing else is under that header; `None`
/// when no line holds spex's value any more (the key is the user's now).
pub fn unset(text: &str, entry: &GitEntry) -> Option<String> {
    let ls = lines(text);
    let idx = ls.iter().rposition(|l| {
        !l.header
            && is(l, &entry.section)
            && l.var
                .as_ref()
                .is_some_and(|(k, v)| k.eq_ignore_ascii_case(&entry.key) && *v == entry.value)
    })?;
    let mut cut = ls[idx].range.clone();
    if entry.header {
        let above = idx.checked_sub(1).map(|i| &ls[i]);
        let below_is_section_end = ls.get(idx + 1).is_none_or(|l| l.header);
        if let Some(h) = above
            && below_is_section_end
            && h.var.is_none()
            && h.header
            && is(h, &entry.section)
            && text[h.range.clone()].trim() == format!("[{}]", entry.section)
        {
            cut.start = h.range.start;
        }
    }
    // The line ending spex wrote before its lines, when they were (and are) the file's end.
    if entry.newline && cut.end == text.len() && text[..cut.start].ends_with('\n') {
        let eol = if text[..cut.start].ends_with("\r\n") {
            2
        } else {
            1
        };
        cut.start -= eol;
    }
    Some(format!("{}{}", &text[..cut.start], &text[cut.end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_read_as_git_reads_them() {
        let text = "[core]\n\tbare = false\n[Core]\n\texcludesFile = \"/a b/#x\" ; note\n[core \"x\"]\n\texcludesfile = no\n[extensions] worktreeConfig\n[core]\n\tEXCLUDESFILE = /c\\\n/d\n";
        assert_eq!(
            values(text, "core", "excludesFile"),
            ["/a b/#x", "/c/d"],
            "subsections and other sections are not core"
        );
        assert_eq!(
            last_value(text, "extensions", "worktreeconfig").as_deref(),
            Some("true")
        );
        assert_eq!(last_value(text, "core", "worktree"), None);
    }

    /// Every edit taken back restores the exact bytes.
    #[test]
    fn set_then_unset_is_byte_exact() {
        let cases = [
            "",
            "[core]\n\tbare = false\n",
            "[core]\n\tbare = false",
            "[core]\r\n\tbare = false\r\n[user]\r\n\tname = x\r\n",
            "# mine\n[user]\n\tname = x\n\n",
            "[user]\n\tname = x",
            "[core \"x\"]\n\ty = 1\n",
            "[core]\n",
            "[core]\n\tbare = false\n# trailing comment\n\n[user]\n\tname = a\n",
        ];
        for before in cases {
            let (after, entry) = set(before, "core", "excludesFile", "/p q/x#");
            assert_eq!(
                last_value(&after, "core", "excludesFile").as_deref(),
                Some("/p q/x#"),
                "{before:?} -> {after:?}"
            );
            for k in ["bare", "name"] {
                for s in ["core", "user"] {
                    assert_eq!(
                        last_value(before, s, k),
                        last_value(&after, s, k),
                        "{s}.{k} in {before:?} -> {after:?}"
                    );
                }
            }
            assert_eq!(
                unset(&after, &entry).as_deref(),
                Some(before),
                "{after:?} {entry:?}"
            );
        }
    }

    #[test]
    fn a_changed_value_is_not_spex_s_to_take_back() {
        let (after, entry) = set("", "core", "excludesFile", "/x");
        let changed = after.replace("/x", "/mine");
        assert_eq!(unset(&changed, &entry), None);
        // Something the user added under spex's header keeps the header.
        let added = format!("{after}\tautocrlf = true\n");
        assert_eq!(
            unset(&added, &entry).as_deref(),
            Some("[core]\n\tautocrlf = true\n")
        );
    }
}
