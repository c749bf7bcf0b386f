//! Where a `code` glob can match, read from its text alone: the literal first path component
//! every match starts with or, failing that, the literal extension every match ends with. The
//! governance index files each glob under these keys, so the hook path reads only the buckets
//! an edited path can hit. Knows nothing of how the index is stored, nor of matching itself.
//!
//! Why the text is enough (globset 0.4, `/` not special): the characters before the first
//! metacharacter and after the last one compile to literals, so every match starts and ends
//! with them. A `/` that globset folds into a `**` token stays required (`a/**` is `a/.*`,
//! `a/**/b` is `a(?:/|/.*/)b`); only the `/` after a leading `**` is optional, and no key
//! reaches past a `**`. An alternation `{x,y}` with plain alternatives is spelled out: each
//! match took one alternative, so it fits the text with that alternative in place.

/// A bucket of the governance index.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    /// Every match starts with this path component: `dir/**` -> `dir`.
    First(String),
    /// Every match ends with this extension, its dot included: `**/*.proto` -> `.proto`.
    Ext(String),
}

/// Characters with a meaning in a globset glob; `]` and `}` only inside a class or an
/// alternation, but counting them everywhere is merely cautious.
const META: &[char] = &['*', '?', '[', ']', '{', '}', '\\'];

/// The most keys one glob is filed under (alternations multiply); a glob that would need more
/// goes in the catch-all bucket.
const MAX_KEYS: usize = 32;

/// The keys of which every path `glob` matches has at least one; `None` when the text does not
/// say (the glob goes in the catch-all bucket). A first component is preferred: it is the more
/// selective key.
pub fn of_glob(glob: &str) -> Option<Vec<Key>> {
    // An escape makes a metacharacter literal: not worth reading, the catch-all takes it.
    if glob.contains('\\') {
        return None;
    }
    let mut keys = Vec::new();
    if !firsts(glob, &mut keys) {
        keys.clear();
        if !exts(glob, &mut keys) {
            return None;
        }
    }
    keys.sort();
    keys.dedup();
    Some(keys)
}

/// The keys of a repo-relative path: its first component and its extension, if it has one.
pub fn of_path(rel: &str) -> Vec<Key> {
    let first = rel.split('/').next().unwrap_or(rel);
    let mut keys = vec![Key::First(first.to_owned())];
    keys.extend(extension(rel).map(|e| Key::Ext(e.to_owned())));
    keys
}

/// The extension of `text` read as a path: from its last `.`, when no `/` follows.
fn extension(text: &str) -> Option<&str> {
    let ext = &text[text.rfind('.')?..];
    (!ext.contains('/')).then_some(ext)
}

fn push(keys: &mut Vec<Key>, key: Key) -> bool {
    keys.push(key);
    keys.len() <= MAX_KEYS
}

/// Adds the first components every match of `glob` starts with; false if the text leaves one
/// open.
fn firsts(glob: &str, keys: &mut Vec<Key>) -> bool {
    let Some(i) = glob.find(META) else {
        let first = glob.split('/').next().unwrap_or(glob);
        return push(keys, Key::First(first.to_owned()));
    };
    let prefix = &glob[..i];
    if let Some(slash) = prefix.find('/') {
        return push(keys, Key::First(prefix[..slash].to_owned()));
    }
    let Some((alternatives, rest)) = glob[i..]
        .strip_prefix('{')
        .and_then(|g| plain_group(g, g.find('}')?))
    else {
        return false;
    };
    alternatives
        .split(',')
        .all(|alt| firsts(&format!("{prefix}{alt}{rest}"), keys))
}

/// Adds the extensions every match of `glob` ends with; false if the text leaves one open.
fn exts(glob: &str, keys: &mut Vec<Key>) -> bool {
    let Some(i) = glob.rfind(META) else {
        return extension(glob).is_some_and(|e| push(keys, Key::Ext(e.to_owned())));
    };
    let suffix = &glob[i + 1..];
    if let Some(e) = extension(suffix) {
        return push(keys, Key::Ext(e.to_owned()));
    }
    if !glob[i..].starts_with('}') {
        return false;
    }
    let Some(open) = glob[..i].rfind('{') else {
        return false;
    };
    let head = &glob[..open];
    let Some((alternatives, _)) = plain_group(&glob[open + 1..], i - open - 1) else {
        return false;
    };
    alternatives
        .split(',')
        .all(|alt| exts(&format!("{head}{alt}{suffix}"), keys))
}

/// `text[..close]` as the alternatives of a group closed at `close`, and what follows the
/// group; `None` unless every alternative is plain text (no class, escape or nested group).
fn plain_group(text: &str, close: usize) -> Option<(&str, &str)> {
    let inside = &text[..close];
    (!inside.contains(META)).then(|| (inside, &text[close + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first(s: &str) -> Key {
        Key::First(s.into())
    }

    fn ext(s: &str) -> Key {
        Key::Ext(s.into())
    }

    #[test]
    fn files_each_common_form_under_its_literal_start_or_end() {
        let cases: &[(&str, Option<Vec<Key>>)] = &[
            ("dir/**", Some(vec![first("dir")])),
            ("**/*.proto", Some(vec![ext(".proto")])),
            ("lib/a*_*.rs", Some(vec![first("lib")])),
            ("{a,b}/**/*.ts", Some(vec![first("a"), first("b")])),
            ("src/main.rs", Some(vec![first("src")])),
            ("Makefile", Some(vec![first("Makefile")])),
            ("**/*.{ts,tsx}", Some(vec![ext(".ts"), ext(".tsx")])),
            ("*.rs", Some(vec![ext(".rs")])),
            ("**/.gitignore", Some(vec![ext(".gitignore")])),
            // No literal start, and the end is not an extension: the catch-all.
            ("**/src/**", None),
            ("src*/x", None),
            ("{a*,b}/x", None),
            ("d\\*/x.rs", None),
            ("{a/**,**/*.rs}", None),
        ];
        for (glob, want) in cases {
            assert_eq!(&of_glob(glob), want, "{glob}");
        }
    }

    #[test]
    fn a_path_has_its_first_component_and_its_extension() {
        assert_eq!(of_path("src/a.rs"), vec![first("src"), ext(".rs")]);
        assert_eq!(of_path("Makefile"), vec![first("Makefile")]);
        assert_eq!(of_path("a.d/Makefile"), vec![first("a.d")]);
    }

    #[test]
    fn alternations_past_the_limit_go_in_the_catch_all() {
        let many = format!(
            "{{{}}}/x",
            (0..40)
                .map(|i| format!("d{i}"))
                .collect::<Vec<_>>()
                .join(",")
        );
        assert_eq!(of_glob(&many), None);
    }
}
