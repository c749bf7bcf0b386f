//! Gemini CLI's folder trust as 0.61.0 decides it (`LoadedTrustedFolders.isPathTrusted`): of
//! the rules whose folder (a `TRUST_PARENT` rule's parent) holds the location, both through
//! their real paths, the longest rule path wins (docs/harnesses/facts/gemini.md §4.1).

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The level spex writes for a checkout.
pub const TRUST_FOLDER: &str = "TRUST_FOLDER";

/// What the rules say of a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Trusted,
    /// A `DO_NOT_TRUST` rule wins: the user said no, and spex does not overrule them.
    Distrusted,
    /// No rule covers it: Gemini asks (TUI) or refuses to start (headless, exit 55).
    Unknown,
}

fn real(p: &Path) -> PathBuf {
    fs_err::canonicalize(p).unwrap_or_else(|_| p.to_owned())
}

/// The verdict of `rules` (the file's JSON object) on the folder `location`.
pub fn verdict(rules: &Value, location: &Path) -> Verdict {
    let location = real(location);
    let mut best: Option<(usize, &str)> = None;
    for (rule, level) in rules.as_object().into_iter().flatten() {
        let Some(level) = level.as_str() else {
            continue;
        };
        let rule_path = Path::new(rule);
        let folder = match level {
            "TRUST_FOLDER" | "DO_NOT_TRUST" => rule_path,
            "TRUST_PARENT" => rule_path.parent().unwrap_or(rule_path),
            // Gemini reports an unknown level as an error and uses no such rule.
            _ => continue,
        };
        if !folder.is_absolute() || !location.starts_with(real(folder)) {
            continue;
        }
        if best.is_none_or(|(len, _)| rule.len() > len) {
            best = Some((rule.len(), level));
        }
    }
    match best {
        None => Verdict::Unknown,
        Some((_, "DO_NOT_TRUST")) => Verdict::Distrusted,
        Some(_) => Verdict::Trusted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_longest_covering_rule_decides() {
        let dir = tempfile::tempdir().unwrap();
        let base = fs_err::canonicalize(dir.path()).unwrap();
        let repo = base.join("repo");
        let wt = base.join("wt");
        fs_err::create_dir_all(&repo).unwrap();
        fs_err::create_dir_all(&wt).unwrap();
        let s = |p: &Path| p.to_string_lossy().into_owned();
        assert_eq!(verdict(&json!({}), &repo), Verdict::Unknown);
        assert_eq!(
            verdict(&json!({ s(&repo): "TRUST_FOLDER" }), &repo),
            Verdict::Trusted
        );
        // A sibling worktree is not covered by the main checkout's rule (docs/harnesses/facts/gemini.md §4.1).
        assert_eq!(
            verdict(&json!({ s(&repo): "TRUST_FOLDER" }), &wt),
            Verdict::Unknown
        );
        // `TRUST_PARENT` on a sibling covers its parent, so the worktree too.
        assert_eq!(
            verdict(&json!({ s(&repo): "TRUST_PARENT" }), &wt),
            Verdict::Trusted
        );
        assert_eq!(
            verdict(
                &json!({ s(&base): "DO_NOT_TRUST", s(&repo): "TRUST_FOLDER" }),
                &repo
            ),
            Verdict::Trusted
        );
        assert_eq!(
            verdict(
                &json!({ s(&base): "TRUST_FOLDER", s(&repo): "DO_NOT_TRUST" }),
                &repo
            ),
            Verdict::Distrusted
        );
        assert_eq!(
            verdict(&json!({ s(&repo): "MAYBE" }), &repo),
            Verdict::Unknown
        );
        // Through a link, both sides compared by their real paths.
        let link = base.join("link");
        fs_err::os::unix::fs::symlink(&repo, &link).unwrap();
        assert_eq!(
            verdict(&json!({ s(&link): "TRUST_FOLDER" }), &repo),
            Verdict::Trusted
        );
        // `/a/bc` is not inside `/a/b`.
        let repo2 = base.join("repo2");
        fs_err::create_dir_all(&repo2).unwrap();
        assert_eq!(
            verdict(&json!({ s(&repo): "TRUST_FOLDER" }), &repo2),
            Verdict::Unknown
        );
    }
}
