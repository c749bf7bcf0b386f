//! Gemini CLI's custom commands: `.gemini/commands/<name>.toml` with `description` and
//! `prompt`, `sub/name.toml` being `/sub:name` (docs/harnesses/facts/gemini.md §10; 0.61.0
//! `FileCommandLoader`).

use std::path::Path;

use crate::adapters::common::files;
use crate::seam::files::SlashEntry;
use crate::spec::SpecNode;

/// Where the words typed after the command go (`/review the parser`).
const ARGS: &str = "{{args}}";
/// The same placeholder in Claude Code's spelling, which a spec body may use.
const CLAUDE_ARGS: &str = "$ARGUMENTS";

/// A TOML string holding `text`: a multi-line literal string, which shows the prompt as it
/// is, when `text` can be one; a basic string with escapes otherwise.
fn toml_string(text: &str) -> String {
    let literal_ok = !text.contains("'''")
        && text
            .chars()
            .all(|c| !c.is_control() || c == '\t' || c == '\n');
    if literal_ok && text.ends_with('\n') {
        // The line break right after the opening quotes is not part of the string.
        format!("'''\n{text}'''")
    } else {
        toml_edit::Value::from(text).to_string()
    }
}

/// One command file: spex's stamp in a comment, the node's `desc`, and its body as the prompt,
/// the command's arguments where the body says `{{args}}` (or `$ARGUMENTS`), else after it.
pub fn render(node: &SpecNode) -> String {
    let mut prompt = node.body.replace("\r\n", "\n").replace(CLAUDE_ARGS, ARGS);
    if !prompt.contains(ARGS) {
        prompt = format!("{}\n\n{ARGS}", prompt.trim_end());
    }
    prompt.push('\n');
    format!(
        "# {}\ndescription = {}\nprompt = {}\n",
        files::stamp_line(node),
        toml_edit::Value::from(node.desc.as_deref().unwrap_or_default()),
        toml_string(&prompt)
    )
}

/// The name Gemini gives a command file: its path under `dir` without `.toml`, folders joined
/// by `:`, each part with characters other than letters, digits, `_`, `-` and `.` made `_`.
fn command_name(rel: &Path) -> String {
    rel.with_extension("")
        .iter()
        .map(|part| {
            part.to_string_lossy()
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || "_-.".contains(c) {
                        c
                    } else {
                        '_'
                    }
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join(":")
}

/// The commands in `dir` (`**/*.toml`), by path.
pub fn commands_in(dir: &Path, kind: &str) -> Vec<SlashEntry> {
    let mut out = Vec::new();
    for (p, rel) in files::files_with_ext(dir, "toml") {
        let doc = fs_err::read_to_string(&p)
            .ok()
            .and_then(|t| t.parse::<toml_edit::DocumentMut>().ok());
        // Gemini skips a file without a string `prompt`.
        let Some(doc) = doc.filter(|d| d.get("prompt").and_then(|v| v.as_str()).is_some()) else {
            continue;
        };
        let description = doc.get("description").and_then(|v| v.as_str()).map_or_else(
            || {
                format!(
                    "Custom command from {}",
                    p.file_name().unwrap_or_default().to_string_lossy()
                )
            },
            str::to_owned,
        );
        out.push(SlashEntry {
            name: command_name(&rel),
            kind: kind.to_owned(),
            description,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn node(desc: &str, body: &str) -> SpecNode {
        SpecNode {
            file: PathBuf::from(".spec/review/spec.md"),
            name: "review".into(),
            title: "Review".into(),
            surfaces: Vec::new(),
            desc: Some(desc.into()),
            tools: Vec::new(),
            code: Vec::new(),
            events: Vec::new(),
            order: 0,
            block: false,
            body: body.into(),
            handler: None,
        }
    }

    fn parsed(text: &str) -> (String, String) {
        let doc: toml_edit::DocumentMut = text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"));
        (
            doc["description"].as_str().unwrap().to_owned(),
            doc["prompt"].as_str().unwrap().to_owned(),
        )
    }

    #[test]
    fn a_command_is_toml_gemini_reads_with_the_args_placeholder() {
        let text = render(&node("Review a change", "Review it.\n"));
        assert_eq!(
            text,
            "# <!-- spex:generated from .spec/review/spec.md; edit that file, then run `spex materialize` -->\ndescription = \"Review a change\"\nprompt = '''\nReview it.\n\n{{args}}\n'''\n"
        );
        assert_eq!(
            parsed(&text),
            ("Review a change".into(), "Review it.\n\n{{args}}\n".into())
        );
        // Claude's placeholder becomes Gemini's, in place.
        let (_, prompt) = parsed(&render(&node("d", "Check $ARGUMENTS now.")));
        assert_eq!(prompt, "Check {{args}} now.\n");
    }

    #[test]
    fn any_text_round_trips_through_the_toml() {
        for body in [
            "quotes ''' and \"\"\" and \\ backslash",
            "a\u{7}bell and\r\nCRLF",
            "ends with a quote'",
            "tab\there ✓ 日本語",
            "",
        ] {
            for desc in ["a \"quoted\" \\ desc", "", "multi\nline"] {
                let (d, p) = parsed(&render(&node(desc, body)));
                assert_eq!(d, desc);
                assert!(
                    p.starts_with(body.replace("\r\n", "\n").trim_end()),
                    "{p:?}"
                );
                assert!(p.ends_with("{{args}}\n"), "{p:?}");
            }
        }
    }

    #[test]
    fn command_names_follow_gemini() {
        assert_eq!(command_name(Path::new("review.toml")), "review");
        assert_eq!(command_name(Path::new("git/commit.toml")), "git:commit");
        assert_eq!(command_name(Path::new("a b+c.toml")), "a_b_c");
    }
}
