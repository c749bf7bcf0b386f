//! The only writer of stdout. stdout is a protocol (`dispatch` output, `--json`), so every
//! command prints through here; diagnostics go to stderr.

use std::io::{IsTerminal, Write};

/// Prints text to stdout as is.
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    // A closed pipe (e.g. `| head`) is not an error worth reporting.
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Prints a value as pretty JSON plus a newline.
pub fn json<T: serde::Serialize>(value: &T) {
    // Streamed, not built whole first: `sessions --all --json` prints megabytes.
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    // A closed pipe (e.g. `| head`) is not an error worth reporting.
    let _ = serde_json::to_writer_pretty(&mut out, value)
        .map_err(std::io::Error::from)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
}

/// Colors for human output: only on a terminal and never with `NO_COLOR`.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub color: bool,
}

impl Style {
    pub fn detect(no_color: bool) -> Style {
        Style {
            color: !no_color && std::io::stdout().is_terminal(),
        }
    }

    fn paint(self, code: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    }

    pub fn green(self, s: &str) -> String {
        self.paint("32", s)
    }

    pub fn yellow(self, s: &str) -> String {
        self.paint("33", s)
    }

    pub fn red(self, s: &str) -> String {
        self.paint("31", s)
    }

    pub fn dim(self, s: &str) -> String {
        self.paint("2", s)
    }
}

/// Rows padded to aligned columns.
pub fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| visible_width(s))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            line.push_str(cell);
            if c + 1 < r.len() {
                line.push_str(&" ".repeat(widths[c] - visible_width(cell) + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Width without ANSI color codes.
fn visible_width(s: &str) -> usize {
    let mut n = 0;
    let mut in_escape = false;
    for c in s.chars() {
        match (in_escape, c) {
            (false, '\x1b') => in_escape = true,
            (true, 'm') => in_escape = false,
            (true, _) => {}
            (false, _) => n += 1,
        }
    }
    n
}

/// `text` for a person: the ids of sessions of `stores` shown as handles, control characters
/// visible.
pub fn human_text(text: &str, stores: &[crate::store::ProjectStore]) -> String {
    crate::text::visible_lines(&handles_for_ids(text, stores))
}

fn handles_for_ids(text: &str, stores: &[crate::store::ProjectStore]) -> String {
    let is_id_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut rest = 0;
    let mut i = 0;
    while i < text.len() {
        if !is_id_char(char::from(bytes[i])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < text.len() && is_id_char(char::from(bytes[i])) {
            i += 1;
        }
        let token = &text[start..i];
        let before = text[..start].chars().next_back();
        let after = text[i..].chars().next();
        let after2 = text[i..].chars().nth(1);
        // Part of a path (`.../<id>.sock`, `<id>/session.json`): the path must stay true.
        let in_path = before == Some('/')
            || after == Some('/')
            || (after == Some('.') && after2.is_some_and(|c| c.is_ascii_alphanumeric()));
        if token.len() < 8 || in_path {
            continue;
        }
        if let Some(store) = stores.iter().find(|store| {
            store
                .load(token)
                .ok()
                .flatten()
                .is_some_and(|s| s.id == token)
        }) {
            let label = store.label_of(token);
            if label != token {
                out.push_str(&text[rest..start]);
                out.push_str(&label);
                rest = i;
            }
        }
    }
    out.push_str(&text[rest..]);
    out
}
