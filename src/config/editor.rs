//! The editor command (`editor` in the configuration, else `$VISUAL`, else `$EDITOR`): a
//! command line split into argv the way a shell would split it (quotes and backslashes, no
//! expansion), its `{path}` and `{line}` placeholders filled in. Builds argv; runs nothing.

use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditorError {
    #[error("the editor command `{0}` has an unterminated quote")]
    Unterminated(String),
    #[error("the editor command is empty")]
    Empty,
}

impl crate::hint::Hint for EditorError {
    fn hint(&self) -> Option<String> {
        Some(
            "set `editor` in spex.jsonc (e.g. \"code --goto {path}:{line}\"), or `$VISUAL` / `$EDITOR`"
                .to_owned(),
        )
    }
}

/// Splits a command line into words: blanks separate, `'...'` is literal, `"..."` keeps blanks
/// and takes `\"`, `\\`, `\$` and `` \` `` as escapes, and a backslash outside quotes escapes
/// the next character. Nothing is expanded (no shell runs it).
pub fn split(line: &str) -> Result<Vec<String>, EditorError> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    let unterminated = || EditorError::Unterminated(line.to_owned());
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => words.extend(word.take()),
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next().ok_or_else(unterminated)? {
                        '\'' => break,
                        c => w.push(c),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next().ok_or_else(unterminated)? {
                        '"' => break,
                        '\\' => match chars.next().ok_or_else(unterminated)? {
                            c @ ('"' | '\\' | '$' | '`') => w.push(c),
                            c => {
                                w.push('\\');
                                w.push(c);
                            }
                        },
                        c => w.push(c),
                    }
                }
            }
            '\\' => {
                let w = word.get_or_insert_with(String::new);
                if let Some(c) = chars.next() {
                    w.push(c);
                }
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Ok(words)
}

/// Where an editor reads a line number from, for a command line that has no `{line}`: the
/// editors people set in `$VISUAL` / `$EDITOR` most, by program name.
fn line_argument(program: &str, path: &str, line: u32) -> Vec<String> {
    let name = Path::new(program)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(program);
    match name {
        "vi" | "vim" | "nvim" | "gvim" | "nano" | "emacs" | "emacsclient" | "micro" | "kak"
        | "mg" | "joe" | "ne" => vec![format!("+{line}"), path.to_owned()],
        "code" | "codium" | "cursor" | "windsurf" => {
            vec!["--goto".to_owned(), format!("{path}:{line}")]
        }
        "hx" | "helix" | "zed" | "subl" | "sublime_text" => vec![format!("{path}:{line}")],
        _ => vec![path.to_owned()],
    }
}

/// The argv that opens `path` (at `line`, when given) with the command line `command`:
/// `{path}` and `{line}` replaced wherever they appear (`{line}` is `1` without a line);
/// without `{path}`, the path is added at the end, with the line where the editor is known to
/// take one.
pub fn argv(command: &str, path: &Path, line: Option<u32>) -> Result<Vec<String>, EditorError> {
    let words = split(command)?;
    if words.is_empty() {
        return Err(EditorError::Empty);
    }
    let path = path.to_string_lossy();
    let has_path = words.iter().any(|w| w.contains("{path}"));
    let line_text = line.unwrap_or(1).to_string();
    let mut argv: Vec<String> = words
        .iter()
        .map(|w| w.replace("{path}", &path).replace("{line}", &line_text))
        .collect();
    if !has_path {
        match line {
            Some(n) => argv.extend(line_argument(&words[0], &path, n)),
            None => argv.push(path.into_owned()),
        }
    }
    Ok(argv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_splits_like_a_shell_without_expanding() {
        let cases: &[(&str, &[&str])] = &[
            ("code -w", &["code", "-w"]),
            ("  vim   ", &["vim"]),
            (
                "'/opt/My Editor/bin/ed' --x=\"a b\"",
                &["/opt/My Editor/bin/ed", "--x=a b"],
            ),
            (
                "ed a\\ b \"q\\\"x\" '$HOME'",
                &["ed", "a b", "q\"x", "$HOME"],
            ),
            ("ed \"\"", &["ed", ""]),
            ("e $(rm -rf /);x", &["e", "$(rm", "-rf", "/);x"]),
        ];
        for (line, want) in cases {
            assert_eq!(split(line).unwrap(), *want, "{line}");
        }
        assert!(matches!(split("ed 'x"), Err(EditorError::Unterminated(_))));
    }

    #[test]
    fn placeholders_and_known_line_arguments() {
        let p = Path::new("/t/src/a b.rs");
        let a = |cmd: &str, line| argv(cmd, p, line).unwrap();
        assert_eq!(
            a("code --goto {path}:{line}", Some(7)),
            ["code", "--goto", "/t/src/a b.rs:7"]
        );
        assert_eq!(a("ed {path} +{line}", None), ["ed", "/t/src/a b.rs", "+1"]);
        assert_eq!(a("vim", Some(3)), ["vim", "+3", "/t/src/a b.rs"]);
        assert_eq!(
            a("/usr/bin/code -w", Some(3)),
            ["/usr/bin/code", "-w", "--goto", "/t/src/a b.rs:3"]
        );
        assert_eq!(a("hx", Some(3)), ["hx", "/t/src/a b.rs:3"]);
        assert_eq!(a("unknown-ed", Some(3)), ["unknown-ed", "/t/src/a b.rs"]);
        assert_eq!(a("vim", None), ["vim", "/t/src/a b.rs"]);
        assert_eq!(argv("  ", p, None), Err(EditorError::Empty));
    }
}
