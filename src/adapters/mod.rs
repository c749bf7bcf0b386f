//! The harness adapters: one folder per harness implementing `seam::Harness`, and the registry
//! that maps an id to its adapter. Adding a harness = one folder and one line in `ALL`. Below
//! the registry, helpers the adapters share (the hook wire format Claude Code and Codex have in
//! common, hook shims, rendered files, doctor checks). Product code resolves an adapter here
//! and never compares harness ids itself.

pub mod claude;
pub mod codex;

use std::path::Path;

use serde_json::{Value, json};

use crate::config::Known;
use crate::seam::edit::json_edit::JsonDoc;
use crate::seam::edit::workspace::STAMP;
use crate::seam::event::{Answer, HookEvent, Kind, Reply};
use crate::seam::{Check, DoctorCtx, Harness, SlashEntry, Status};
use crate::spec::SpecNode;
use crate::store::session::{Attention, Choice, Question};

/// How a harness spells the parts of the hook wire format the harnesses share (Codex's hooks
/// follow Claude Code's format: same event names, `session_id`, `tool_name`, `tool_input`).
pub struct Wire {
    /// Payload key of the id that ties an event to its turn.
    pub turn_key: &'static str,
    /// That id names the turn (every prompt of one turn carries it), not one prompt.
    pub turn_key_names_turn: bool,
    /// The tool the agent calls to ask the human a question.
    pub ask_tool: &'static str,
}

/// Decodes the fields and events the wire formats share. Events the adapter decodes itself
/// come back with `kind: None`.
pub fn decode_shared(event: &str, p: &Value, wire: &Wire, edits: Vec<String>) -> HookEvent {
    let tool = str_field(p, "tool_name");
    let mut ev = HookEvent {
        session_id: str_field(p, "session_id"),
        cwd: str_field(p, "cwd"),
        transcript: str_field(p, "transcript_path"),
        turn_id: str_field(p, wire.turn_key),
        turn_id_names_turn: wire.turn_key_names_turn,
        subagent: p.get("agent_id").is_some_and(|a| !a.is_null()),
        agent_id: str_field(p, "agent_id"),
        agent_type: str_field(p, "agent_type"),
        call_id: str_field(p, "tool_use_id"),
        edits,
        tool,
        ..HookEvent::default()
    };
    let input = p.get("tool_input").unwrap_or(&Value::Null);
    ev.kind = match event {
        "SessionStart" => Some(Kind::SessionStart),
        "UserPromptSubmit" => {
            ev.prompt = str_field(p, "prompt");
            Some(Kind::PromptSubmitted)
        }
        "PreToolUse" => {
            if ev.tool.as_deref() == Some(wire.ask_tool) {
                ev.attention = Some(("question".into(), question_text(input)));
                ev.ask = Some(question_ask(input, ev.call_id.clone()));
            }
            Some(Kind::ToolStarted)
        }
        "PostToolUse" => Some(Kind::ToolCompleted),
        "Stop" => {
            ev.stop_hook_active = p
                .get("stop_hook_active")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            Some(Kind::TurnCompleted)
        }
        "SubagentStart" => {
            ev.subagent = true;
            Some(Kind::SubagentStarted)
        }
        "SubagentStop" => {
            ev.subagent = true;
            ev.summary = str_field(p, "last_assistant_message");
            Some(Kind::SubagentStopped)
        }
        "SessionEnd" => {
            ev.reason = str_field(p, "reason");
            Some(Kind::SessionEnded)
        }
        _ => None,
    };
    ev
}

/// A `PermissionRequest`'s attention: the question of an ask tool, else `describe(input)`.
pub fn permission_attention(
    ev: &HookEvent,
    wire: &Wire,
    input: &Value,
    describe: impl FnOnce(&Value) -> String,
) -> (String, String) {
    if ev.tool.as_deref() == Some(wire.ask_tool) {
        ("question".into(), question_text(input))
    } else {
        ("permission".into(), describe(input))
    }
}

/// A question tool's call as an attention to open: each question with its options (Claude's
/// `AskUserQuestion`: `questions[].{question, header, options[].label, multiSelect}`, free
/// text always offered as "Type something"; Codex's `request_user_input`:
/// `questions[].{id, header, question, options[].label, isOther}`).
pub fn question_ask(input: &Value, call_id: Option<String>) -> Attention {
    let questions = input
        .get("questions")
        .and_then(Value::as_array)
        .map(|qs| {
            qs.iter()
                .map(|q| Question {
                    free_text: q.get("isOther").and_then(Value::as_bool).unwrap_or(true),
                    header: str_field(q, "header"),
                    id: str_field(q, "id"),
                    multi_select: q.get("multiSelect").and_then(Value::as_bool) == Some(true),
                    options: q
                        .get("options")
                        .and_then(Value::as_array)
                        .map(|os| os.iter().filter_map(|o| str_field(o, "label")).collect())
                        .unwrap_or_default(),
                    question: str_field(q, "question").unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    Attention {
        kind: Some("question".into()),
        questions,
        call_id,
        ..Attention::default()
    }
}

/// A choice of a dialog.
pub fn choice(id: &str, label: &str, message: bool) -> Choice {
    Choice {
        id: id.to_owned(),
        label: label.to_owned(),
        message,
    }
}

/// The text of a block: the reason, then any context spex also had to say.
pub fn block_text(answer: &Answer) -> Option<String> {
    let mut reason = answer.block.clone()?;
    for c in &answer.context {
        reason.push_str("\n\n");
        reason.push_str(c);
    }
    Some(reason)
}

/// A string field of a JSON object.
pub fn str_field(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// The text of a question tool's input: every `question` found, one per line.
pub fn question_text(input: &Value) -> String {
    let mut out = Vec::new();
    if let Some(qs) = input.get("questions").and_then(Value::as_array) {
        for q in qs {
            if let Some(t) = q.get("question").and_then(Value::as_str) {
                out.push(t.to_owned());
            }
        }
    }
    if let Some(t) = input.get("question").and_then(Value::as_str) {
        out.push(t.to_owned());
    }
    if out.is_empty() {
        input.to_string()
    } else {
        out.join("\n")
    }
}

/// `{"hookSpecificOutput": {"hookEventName": E, "additionalContext": C}}` as a reply.
pub fn context_reply(event: &str, context: &[String]) -> Reply {
    let out = json!({ "hookSpecificOutput": { "hookEventName": event, "additionalContext": context.join("\n\n") } });
    Reply {
        stdout: out.to_string(),
        ..Reply::default()
    }
}

static ALL: [&dyn Harness; 2] = [&claude::Claude, &codex::Codex];

/// Every adapter, in the default order.
pub fn all() -> &'static [&'static dyn Harness] {
    &ALL
}

/// The adapter for an id or alias.
pub fn lookup(id: &str) -> Option<&'static dyn Harness> {
    ALL.iter()
        .copied()
        .find(|h| h.id() == id || h.aliases().contains(&id))
}

/// Every environment variable some adapter reads, for `Env::from_process` to read with the
/// rest of the environment.
pub fn env_vars() -> impl Iterator<Item = &'static str> {
    ALL.iter().flat_map(|h| {
        h.session_env_var()
            .into_iter()
            .chain(h.env_vars().iter().copied())
    })
}

/// The harness ids a configuration may name, in the default order, with their aliases.
pub fn known() -> Known {
    Known {
        ids: ALL.iter().map(|h| h.id()).collect(),
        canonical: |id| lookup(id).map(Harness::id),
    }
}

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

fn stamp_line(node: &SpecNode) -> String {
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

/// Skills in `dir` (`<name>/SKILL.md`), by name.
pub fn skills_in(dir: &Path, kind: &str) -> Vec<SlashEntry> {
    let Ok(entries) = std::fs::read_dir(dir) else {
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
    let Ok(text) = std::fs::read_to_string(path) else {
        return String::new();
    };
    crate::spec::split_front_matter(&text)
        .and_then(|(yaml, _)| serde_yaml_ng::from_str::<serde_yaml_ng::Mapping>(yaml).ok())
        .and_then(|m| m.get(key).and_then(|v| v.as_str().map(str::to_owned)))
        .unwrap_or_default()
}

/// Runs `<binary> --version` and returns its first line.
pub fn version_output(binary: &Path) -> Option<String> {
    let out = std::process::Command::new(binary)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines().next().map(str::to_owned)
}

/// The shared doctor checks: binary found and its version against the pinned one.
pub fn check_binary(h: &dyn Harness, ctx: &DoctorCtx) -> Check {
    let Some(bin) = &ctx.binary else {
        return Check::new(
            "binary",
            Status::Warn,
            format!("`{}` not found on PATH", h.binary_name()),
        );
    };
    match version_output(bin).and_then(|o| h.parse_version(&o)) {
        Some(v) if v == h.pinned_version() => {
            Check::new("binary", Status::Ok, format!("{} {v}", bin.display()))
        }
        Some(v) => Check::new(
            "binary",
            Status::Warn,
            format!(
                "{} {v}; spex was verified against {} (hook events may differ)",
                bin.display(),
                h.pinned_version()
            ),
        ),
        None => Check::new(
            "binary",
            Status::Warn,
            format!("{}: cannot read its version", bin.display()),
        ),
    }
}

/// Shim checks shared by both adapters: every bound event has a spex handler pointing at
/// this spex; handlers pointing at another spex are reported as stale.
pub fn check_shims(h: &dyn Harness, ctx: &DoctorCtx, file: &Path, wanted: bool) -> Check {
    let doc = std::fs::read(file)
        .ok()
        .and_then(|b| JsonDoc::parse(&b).ok())
        .map_or(Value::Null, |d| d.value());
    let found = spex_commands(&doc);
    let prefix = format!("{} dispatch {} ", ctx.spex, h.id());
    let stale: Vec<&String> = found
        .iter()
        .map(|(_, c)| c)
        .filter(|c| !c.starts_with(&prefix))
        .collect();
    let missing: Vec<&str> = h
        .hook_events()
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
            format!("{} events bound to this spex", h.hook_events().len()),
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

/// How much of a harness's JSON-lines log (a transcript, a rollout) is read at its end.
const JSONL_TAIL_BYTES: u64 = 256 * 1024;

/// The entries in the last [`JSONL_TAIL_BYTES`] of a JSON-lines log, oldest first (a cut first
/// line is not JSON and is skipped).
pub fn jsonl_tail(path: &Path) -> Option<Vec<Value>> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let from = len.saturating_sub(JSONL_TAIL_BYTES);
    f.seek(SeekFrom::Start(from)).ok()?;
    let mut bytes = Vec::new();
    f.take(JSONL_TAIL_BYTES).read_to_end(&mut bytes).ok()?;
    Some(
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_ids_are_unique_and_resolve() {
        let mut ids: Vec<&str> = all().iter().map(|h| h.id()).collect();
        ids.extend(all().iter().flat_map(|h| h.aliases().iter().copied()));
        let n = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), n, "ids and aliases are unique");
        for id in ids {
            assert!(lookup(id).is_some());
        }
        assert_eq!(lookup("plugin").map(Harness::id), Some("claude"));
        assert!(lookup("vim").is_none());
    }

    #[test]
    fn every_adapter_has_fixtures() {
        for h in all() {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/payloads")
                .join(h.id());
            let n = std::fs::read_dir(&dir).map_or(0, Iterator::count);
            assert!(n > 0, "no payload fixtures in {}", dir.display());
        }
    }

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
