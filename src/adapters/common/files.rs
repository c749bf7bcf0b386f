//! What adapters share for the files facet: hook shims (recognising spex's own), rendered
//! skills and Markdown files, the `/` menu's skills, and doctor's binary and shim checks.

use std::path::Path;

use serde_json::{Value, json};

use crate::seam::edit::json_edit::JsonDoc;
use crate::seam::edit::workspace::STAMP;
use crate::seam::files::{Check, DoctorCtx, SlashEntry, Status};
use crate::spec::SpecNode;

/// A hook group whose one handler runs `command`.
pub fn hook_group(command: &str, timeout: u64) -> Value {
    json!({ "hooks": [ { "type": "command", "command": command, "timeout": timeout } ] })
}

/// Whether `command` is exactly a spex hook shim as spex writes it: `<path>/spex dispatch
/// <id> <Event>`, the path one shell word. A command that merely ends that way (`env X=1
/// /path/spex dispatch ...`, a logging wrapper) is the user's.
pub fn is_spex_command(command: &str) -> bool {
    let parts: Vec<&str> = command.rsplitn(4, ' ').collect();
    let [_event, _id, verb, program] = parts.as_slice() else {
        return false;
    };
    let one_word = match program
        .strip_prefix('\'')
        .and_then(|p| p.strip_suffix('\''))
    {
        Some(quoted) => !quoted.contains('\''),
        None => !program.contains([' ', '\t', '\'', '"', ';', '&', '|', '$', '`']),
    };
    let program = program.trim_matches('\'');
    *verb == "dispatch"
        && one_word
        && !program.is_empty()
        && Path::new(program).file_name().is_some_and(|n| n == "spex")
}

/// Whether a hook group is one spex wrote: every handler is a spex shim.
pub fn is_spex_group(group: &Value) -> bool {
    let Some(hooks) = group.get("hooks").and_then(Value::as_array) else {
        return false;
    };
    !hooks.is_empty()
        && hooks.iter().all(|h| {
            h.get("command")
                .and_then(Value::as_str)
                .is_some_and(is_spex_command)
        })
}

/// The spex commands found in a hooks document, as (event, command).
pub fn spex_commands(doc: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(events) = doc.get("hooks").and_then(Value::as_object) else {
        return out;
    };
    for (event, groups) in events {
        for g in groups.as_array().into_iter().flatten() {
            for h in g
                .get("hooks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(c) = h
                    .get("command")
                    .and_then(Value::as_str)
                    .filter(|c| is_spex_command(c))
                {
                    out.push((event.clone(), c.to_owned()));
                }
            }
        }
    }
    out
}

/// The stamp that proves a generated file is spex's, naming the spec file it comes from (an
/// HTML comment: a format without one carries it inside its own comment).
pub fn stamp_line(node: &SpecNode) -> String {
    format!(
        "{STAMP} from {}; edit that file, then run `spex materialize` -->",
        node.file.display()
    )
}

/// A `SKILL.md` (front matter `name` + `description`, then the stamp and the body).
pub fn render_skill(node: &SpecNode) -> String {
    let desc = node.desc.as_deref().unwrap_or_default();
    format!(
        "---\nname: {}\ndescription: {}\n---\n{}\n\n{}\n",
        node.name,
        serde_json::to_string(desc).expect("a string serializes"),
        stamp_line(node),
        node.body
    )
}

/// A Markdown file with front matter fields, then the stamp and the body.
pub fn render_markdown(node: &SpecNode, fields: &[(&str, String)]) -> String {
    let mut out = String::from("---\n");
    for (k, v) in fields {
        out.push_str(&format!("{k}: {v}\n"));
    }
    out.push_str("---\n");
    out.push_str(&stamp_line(node));
    out.push_str("\n\n");
    out.push_str(&node.body);
    out.push('\n');
    out
}

/// The files under `dir` (at any depth) whose name ends in `.<ext>`, sorted by path, each as
/// (path, path relative to `dir`): a harness's commands folder.
pub fn files_with_ext(dir: &Path, ext: &str) -> Vec<(std::path::PathBuf, std::path::PathBuf)> {
    walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file() && e.path().extension().is_some_and(|x| x == ext))
        .filter_map(|e| {
            let rel = e.path().strip_prefix(dir).ok()?.to_owned();
            Some((e.into_path(), rel))
        })
        .collect()
}

/// Skills in `dir` (`<name>/SKILL.md`), by name.
pub fn skills_in(dir: &Path, kind: &str) -> Vec<SlashEntry> {
    let Ok(entries) = fs_err::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<SlashEntry> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().join("SKILL.md").is_file())
        .map(|e| SlashEntry {
            name: e.file_name().to_string_lossy().into_owned(),
            kind: kind.to_owned(),
            description: front_matter_field(&e.path().join("SKILL.md"), "description"),
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// One scalar field of a Markdown file's front matter (empty when absent).
pub fn front_matter_field(path: &Path, key: &str) -> String {
    let Ok(text) = fs_err::read_to_string(path) else {
        return String::new();
    };
    crate::spec::split_front_matter(&text)
        .and_then(|(yaml, _)| serde_yaml_ng::from_str::<serde_yaml_ng::Mapping>(yaml).ok())
        .and_then(|m| m.get(key).and_then(|v| v.as_str().map(str::to_owned)))
        .unwrap_or_default()
}

/// Shim checks the adapters share: every event of `events` has a spex handler of the harness `ctx.id`
/// pointing at this spex; handlers pointing at another spex are reported as stale.
pub fn check_shims(events: &[&str], ctx: &DoctorCtx, file: &Path, wanted: bool) -> Check {
    let doc = fs_err::read(file)
        .ok()
        .and_then(|b| JsonDoc::parse(&b).ok())
        .map_or(Value::Null, |d| d.value());
    let found = spex_commands(&doc);
    let prefix = format!("{} dispatch {} ", ctx.spex, ctx.id);
    let stale: Vec<&String> = found
        .iter()
        .map(|(_, c)| c)
        .filter(|c| !c.starts_with(&prefix))
        .collect();
    let missing: Vec<&str> = events
        .iter()
        .copied()
        .filter(|e| {
            !found
                .iter()
                .any(|(ev, c)| ev == e && c.starts_with(&prefix))
        })
        .collect();
    let name = format!("shims in {}", file.display());
    if !wanted {
        return if found.is_empty() {
            Check::new(&name, Status::Ok, "not selected; no spex shims")
        } else {
            Check::new(
                &name,
                Status::Warn,
                format!(
                    "not selected but {} spex shims remain\nhint: run `spex materialize`",
                    found.len()
                ),
            )
        };
    }
    if missing.is_empty() && stale.is_empty() {
        Check::new(
            &name,
            Status::Ok,
            format!("{} events bound to this spex", events.len()),
        )
    } else {
        let mut detail = Vec::new();
        if !missing.is_empty() {
            detail.push(format!("missing: {}", missing.join(", ")));
        }
        if !stale.is_empty() {
            detail.push(format!(
                "{} shims point at another spex binary (left alone)",
                stale.len()
            ));
        }
        Check::new(
            &name,
            Status::Fail,
            format!("{}\nhint: run `spex materialize`", detail.join("; ")),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn recognizes_spex_commands() {
        assert!(is_spex_command("/usr/local/bin/spex dispatch claude Stop"));
        assert!(is_spex_command("'/my dir/spex' dispatch codex PreToolUse"));
        assert!(!is_spex_command("/usr/bin/other dispatch claude Stop"));
        assert!(!is_spex_command(
            "env FOO=1 /usr/local/bin/spex dispatch claude Stop"
        ));
        assert!(!is_spex_command("log-it /x/spex dispatch codex Stop"));
        assert!(!is_spex_command(" /x/spex dispatch codex Stop"));
        assert!(!is_spex_command("spex materialize"));
        assert!(!is_spex_group(
            &json!({"hooks": [{"command": "spex dispatch claude Stop"}, {"command": "echo hi"}]})
        ));
    }
}
