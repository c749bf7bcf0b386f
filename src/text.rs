//! Session text made safe for a terminal: the one place that turns payload text (prompts,
//! notes, headlines, tool commands, questions, ids typed by someone) into what human output
//! shows. Control characters become visible escapes (`\e[2J`), so text can never move the
//! cursor, clear the screen, set the title or the clipboard. `--json` keeps the exact text.

/// `text` with every control character shown as an escape, newlines included (one line).
pub fn visible(text: &str) -> String {
    escape(text, false)
}

/// `text` with every control character shown as an escape, but its line breaks kept (a
/// multi-line note shown as lines).
pub fn visible_lines(text: &str) -> String {
    escape(text, true)
}

fn escape(text: &str, keep_newlines: bool) -> String {
    if !text.chars().any(needs_escape) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' if keep_newlines => out.push('\n'),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x1b' => out.push_str("\\e"),
            c if u32::from(c) < 0x80 && needs_escape(c) => {
                out.push_str(&format!("\\x{:02x}", u32::from(c)));
            }
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

/// C0 and C1 controls, DEL, and the invisible characters that reorder or hide text
/// (bidirectional overrides and isolates, zero-width joiners are left: emoji need them).
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_become_visible_escapes() {
        for (raw, shown) in [
            ("plain text, ünïcode ✓", "plain text, ünïcode ✓"),
            ("\x1b[2Jcleared", "\\e[2Jcleared"),
            ("\x1b]52;c;aGk=\x07", "\\e]52;c;aGk=\\x07"),
            ("a\nb\r\tc", "a\\nb\\r\\tc"),
            ("del\x7f", "del\\x7f"),
            ("csi\u{9b}2J", "csi\\u{9b}2J"),
            ("\u{202e}txt.exe", "\\u{202e}txt.exe"),
        ] {
            assert_eq!(visible(raw), shown, "{raw:?}");
        }
        assert_eq!(visible_lines("one\ntwo\x1b"), "one\ntwo\\e");
    }
}
