//! Reading a hook payload that does not parse as it came, so no event is lost to its body: a
//! lone UTF-16 surrogate escape (`"\ud800"`, which JavaScript writes for half an emoji) or
//! invalid UTF-8 is replaced by U+FFFD, and a payload cut at the size limit is closed at its last
//! whole value (a string value cut in its middle keeps its head and a mark), so the event's kind
//! and ids still reach the record. Only payloads that fail to parse come here: the hot path
//! pays nothing.

use serde_json::Value;

/// What a cut string value ends with.
pub const CUT_MARK: &str = "…[cut by spex: the payload was over its size limit]";

/// How a payload was mended, for the log.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Mended {
    /// Lone surrogate escapes replaced.
    pub surrogates: usize,
    /// Invalid UTF-8 replaced.
    pub invalid_utf8: bool,
    /// The payload was cut at the size limit and closed.
    pub cut: bool,
}

impl Mended {
    /// Why the payload needed mending, in a few words (for `dispatch-errors.log`).
    pub fn why(&self, limit: usize) -> String {
        let mut why = Vec::new();
        if self.surrogates > 0 {
            why.push(format!(
                "{} lone surrogate escape(s) replaced with U+FFFD",
                self.surrogates
            ));
        }
        if self.invalid_utf8 {
            why.push("invalid UTF-8 replaced with U+FFFD".to_owned());
        }
        if self.cut {
            why.push(format!(
                "over the {limit}-byte limit: cut there and closed at its last whole value (the event is recorded with `payload_cut`)"
            ));
        }
        format!("payload mended: {}", why.join("; "))
    }
}

/// The payload `raw` (`cut`: only the first bytes of a longer one) as JSON, mended where it
/// must be; `None` when it is not JSON even so.
pub fn parse(raw: &[u8], cut: bool) -> Option<(Value, Option<Mended>)> {
    if !cut && let Ok(v) = serde_json::from_slice(raw) {
        return Some((v, None));
    }
    let mut mended = Mended::default();
    let text = match std::str::from_utf8(raw) {
        Ok(t) => std::borrow::Cow::Borrowed(t),
        // A cut may fall inside a character: that is the cut's, not bad input.
        Err(e) if cut && e.error_len().is_none() => {
            std::borrow::Cow::Borrowed(std::str::from_utf8(&raw[..e.valid_up_to()]).ok()?)
        }
        Err(_) => {
            mended.invalid_utf8 = true;
            String::from_utf8_lossy(raw)
        }
    };
    let (text, surrogates) = replace_lone_surrogates(&text);
    mended.surrogates = surrogates;
    if let Ok(v) = serde_json::from_str(&text) {
        return Some((v, Some(mended)));
    }
    if !cut {
        return None;
    }
    mended.cut = true;
    let closed = close_cut(&text)?;
    let v = serde_json::from_str(&closed).ok()?;
    Some((v, Some(mended)))
}

/// `text` with every `\uXXXX` escape of a surrogate that is not half of a pair replaced by
/// `\ufffd`, and how many were replaced.
fn replace_lone_surrogates(text: &str) -> (std::borrow::Cow<'_, str>, usize) {
    let b = text.as_bytes();
    let unit = |at: usize| -> Option<u16> {
        if b.get(at) != Some(&b'\\') || b.get(at + 1) != Some(&b'u') {
            return None;
        }
        u16::from_str_radix(text.get(at + 2..at + 6)?, 16).ok()
    };
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut replaced = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        let Some(u) = unit(i) else {
            // Any other escape is two bytes (`\\` included, so `\\ud800` is text, not an escape).
            i += 2;
            continue;
        };
        let high = (0xD800..=0xDBFF).contains(&u);
        let low = (0xDC00..=0xDFFF).contains(&u);
        if high && unit(i + 6).is_some_and(|n| (0xDC00..=0xDFFF).contains(&n)) {
            i += 12;
            continue;
        }
        if high || low {
            let s = out.get_or_insert_with(String::new);
            s.push_str(&text[copied..i]);
            s.push_str("\\ufffd");
            copied = i + 6;
            replaced += 1;
        }
        i += 6;
    }
    match out {
        None => (std::borrow::Cow::Borrowed(text), 0),
        Some(mut s) => {
            s.push_str(&text[copied..]);
            (std::borrow::Cow::Owned(s), replaced)
        }
    }
}

/// The head of a JSON text cut short, closed so it parses: a string value it was cut in keeps
/// its head (never half an escape) and [`CUT_MARK`]; otherwise it ends after its last whole
/// value (or the last container it opened), and every open container is closed.
fn close_cut(text: &str) -> Option<String> {
    let b = text.as_bytes();
    // Open containers: (`{` or `[`, whether a key comes next).
    let mut stack: Vec<(u8, bool)> = Vec::new();
    // Where the text may end, and how many of the open containers are then open.
    let mut safe: Option<(usize, usize)> = None;
    // In a string: where its text starts, whether it is a key, where its last escape began.
    let mut string: Option<(usize, bool, Option<usize>)> = None;
    let mut literal = false;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if let Some((_, key, escape)) = string.as_mut() {
            match c {
                b'\\' => {
                    *escape = Some(i);
                    i += 2;
                    continue;
                }
                b'"' => {
                    let key = *key;
                    string = None;
                    if !key {
                        safe = Some((i + 1, stack.len()));
                    }
                }
                _ => {}
            }
            i += 1;
            continue;
        }
        let ends_literal = matches!(c, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t');
        if literal && ends_literal {
            literal = false;
            safe = Some((i, stack.len()));
        }
        match c {
            b'{' | b'[' => {
                stack.push((c, c == b'{'));
                safe = Some((i + 1, stack.len()));
            }
            b'}' | b']' => {
                stack.pop();
                safe = Some((i + 1, stack.len()));
            }
            b'"' => {
                let key = stack
                    .last()
                    .is_some_and(|&(k, expect_key)| k == b'{' && expect_key);
                string = Some((i + 1, key, None));
            }
            b':' => {
                if let Some(top) = stack.last_mut() {
                    top.1 = false;
                }
            }
            b',' => {
                if let Some(top) = stack.last_mut() {
                    top.1 = top.0 == b'{';
                }
            }
            _ if !ends_literal => literal = true,
            _ => {}
        }
        i += 1;
    }
    let closers = |open: &[(u8, bool)]| -> String {
        open.iter()
            .rev()
            .map(|&(k, _)| if k == b'{' { '}' } else { ']' })
            .collect()
    };
    if let Some((start, false, escape)) = string {
        // Cut inside a string value: keep its head, never half an escape.
        let mut end = b.len();
        if let Some(e) = escape {
            let len = if b.get(e + 1) == Some(&b'u') { 6 } else { 2 };
            if e + len > end {
                end = e;
            }
        }
        let head = &text[..end.max(start)];
        return Some(format!("{head}{CUT_MARK}\"{}", closers(&stack)));
    }
    let (at, depth) = safe?;
    Some(format!("{}{}", &text[..at], closers(&stack[..depth])))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lone_surrogates_are_replaced_and_pairs_kept() {
        let cases = [
            (r#"{"a":"x\ud800y"}"#, json!({"a": "x\u{fffd}y"}), 1),
            (r#"{"a":"\udc00"}"#, json!({"a": "\u{fffd}"}), 1),
            (r#"{"a":"\ud83d\ude00"}"#, json!({"a": "😀"}), 0),
            (r#"{"a":"\\ud800"}"#, json!({"a": "\\ud800"}), 0),
            (
                r#"{"a":"\ud800\ud800"}"#,
                json!({"a": "\u{fffd}\u{fffd}"}),
                2,
            ),
        ];
        for (raw, want, n) in cases {
            let (v, mended) = parse(raw.as_bytes(), false).unwrap_or_else(|| panic!("{raw}"));
            assert_eq!(v, want, "{raw}");
            assert_eq!(mended.map_or(0, |m| m.surrogates), n, "{raw}");
        }
    }

    #[test]
    fn a_cut_payload_keeps_its_ids_and_marks_the_cut() {
        // Ids first, as the harnesses write them; the long text last.
        let full = format!(
            r#"{{"session_id": "s1", "cwd": "/r", "hook_event_name": "Stop", "nested": {{"turn_id": "t1", "list": [1, 2.5, true, {{"k": "v"}}]}}, "last_assistant_message": "é{}\n\"x\ud83d\ude00"}}"#,
            "a".repeat(300)
        );
        let whole = parse(full.as_bytes(), false).unwrap().0["last_assistant_message"].clone();
        for at in 1..full.len() {
            let Some(head) = full.as_bytes().get(..at) else {
                continue;
            };
            let Some((v, mended)) = parse(head, true) else {
                // Only a cut before the first member can leave nothing to keep.
                assert!(at < 2, "cut at {at}: {}", String::from_utf8_lossy(head));
                continue;
            };
            assert!(mended.is_some_and(|m| m.cut), "cut at {at}");
            if at > full.find(", \"cwd\"").unwrap() {
                assert_eq!(v["session_id"], "s1", "cut at {at}: {v}");
            }
            if let Some(msg) = v["last_assistant_message"].as_str() {
                assert!(
                    msg.ends_with(CUT_MARK) || whole == msg,
                    "cut at {at}: {msg:?}"
                );
            }
        }
    }

    #[test]
    fn well_formed_payloads_are_not_mended() {
        let (v, mended) = parse(br#"{"a": [1, "b"]}"#, false).unwrap();
        assert_eq!((v, mended), (json!({"a": [1, "b"]}), None));
        assert!(parse(b"not json", false).is_none());
    }
}
