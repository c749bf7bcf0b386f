//! The shape of a session id, handle and name: what may become a path in the store. Pure checks:
//! it reads no file.

/// File-name-safe form of a harness id (they are UUID-like, but never trust input).
pub(super) fn sanitize(s: &str) -> String {
    let clean: String = s
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(128)
        .collect();
    if clean.is_empty() {
        "_".to_owned()
    } else {
        clean
    }
}

/// The longest id (or handle, name, prefix) spex accepts.
pub const ID_MAX: usize = 128;

/// The longest session name.
pub const NAME_MAX: usize = 40;

/// A valid spex session id (and the shape of every handle, name and prefix): 1 to `ID_MAX`
/// ASCII letters, digits, `-` or `_`. Nothing else ever becomes a path in the store.
pub fn is_valid_id(s: &str) -> bool {
    // What `sanitize` keeps, checked without building its copy (`sessions --all` checks
    // thousands).
    (1..=128).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A usable session name: an id's characters, at most `NAME_MAX`, starting with a letter (so
/// it reads as a name, not as the start of an id).
pub fn is_valid_name(s: &str) -> bool {
    is_valid_id(s) && s.len() <= NAME_MAX && s.starts_with(|c: char| c.is_ascii_alphabetic())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The id check that builds no copy agrees with the one that did (`sanitize(s) == s`).
    #[test]
    fn an_id_is_valid_exactly_when_sanitizing_keeps_it() {
        let long = "a".repeat(128);
        let longer = "a".repeat(129);
        for id in [
            "",
            "a",
            "019ab099-c7ac-72d6-b465-46533601b574",
            "with_under-score",
            "../etc",
            "/abs",
            "sp ace",
            "é",
            "_",
            long.as_str(),
            longer.as_str(),
        ] {
            assert_eq!(
                is_valid_id(id),
                !id.is_empty() && sanitize(id) == id,
                "{id:?}"
            );
        }
    }
}
