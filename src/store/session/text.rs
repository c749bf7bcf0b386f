//! Short text for people from what a record holds: one line, a cut with an ellipsis, the
//! milliseconds between two of its times. Pure: no file, no record.

/// The first non-empty line of `text`, cut to 120 characters.
pub fn one_line(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    ellipsis(line, 120)
}

/// Milliseconds from `from` to `to` (RFC 3339), when both parse and `to` is not earlier.
pub fn elapsed_ms(from: &str, to: &str) -> Option<u64> {
    let (from, to) = (
        crate::store::parse_time(from)?,
        crate::store::parse_time(to)?,
    );
    u64::try_from(to.duration_since(from).ok()?.as_millis()).ok()
}

/// `text` cut to `max` characters, ending with an ellipsis when it was cut.
pub fn ellipsis(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ellipsis_marks_a_cut() {
        assert_eq!(ellipsis("short", 10), "short");
        assert_eq!(ellipsis("abcdefghijkl", 5), "abcd…");
    }
}
