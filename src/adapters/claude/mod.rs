//! Claude Code (2.1.197): hooks in each tree's `.claude/settings.json`, contract in
//! `CLAUDE.md`, skills/agents/commands under `.claude/`, workspace trust in `~/.claude.json`.
//! The `plugin` id (a Claude plugin bundle) routes here.

mod answer;
mod evidence;
mod failure;
mod slash;
mod transcript;
mod usage;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::env::Env;
use crate::seam::edit::MaterializeError;
use crate::seam::edit::workspace::Workspace;
use crate::seam::event::{Answer, HookEvent, Kind, Reply};
use crate::seam::{Activity, Blocker, Check, DoctorCtx, Harness, ShimCtx, SlashEntry, Status};
use crate::spec::{SpecNode, Surface};

pub struct Claude;

/// Events spex binds. Every one is in 2.1.197's validator list; an unknown name would open a
/// blocking dialog in the TUI (facts/claude.md §1.2).
const EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PermissionRequest",
    "Notification",
    "Stop",
    "StopFailure",
    "SubagentStart",
    "SubagentStop",
    "SessionEnd",
];

const HOOK_TIMEOUT_SECS: u64 = 30;

/// How long after a hook Claude's transcript may still lack what the hook reported.
const TRANSCRIPT_LAG: std::time::Duration = std::time::Duration::from_secs(10);

/// Where Claude Code keeps its user-level state instead of `~` and `~/.claude`.
const CONFIG_DIR_VAR: &str = "CLAUDE_CONFIG_DIR";

/// Claude's global state file: `$CLAUDE_CONFIG_DIR/.claude.json`, else `~/.claude.json`.
fn state_file(env: &Env) -> PathBuf {
    match env.path_var(CONFIG_DIR_VAR) {
        Some(p) => p.join(".claude.json"),
        None => env.home_or_root().join(".claude.json"),
    }
}

fn settings_file(tree_root: &Path) -> PathBuf {
    tree_root.join(".claude/settings.json")
}

fn trust_key(main: &Path) -> Vec<String> {
    vec![
        "projects".into(),
        main.to_string_lossy().into_owned(),
        "hasTrustDialogAccepted".into(),
    ]
}

/// Custom commands under a `commands` folder: `sub/name.md` is `/sub:name`.
fn commands_in(dir: &Path, kind: &str) -> Vec<SlashEntry> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
    {
        let p = e.path();
        if !e.file_type().is_file() || p.extension().is_none_or(|x| x != "md") {
            continue;
        }
        let Ok(rel) = p.strip_prefix(dir) else {
            continue;
        };
        let name = rel.with_extension("").to_string_lossy().replace('/', ":");
        out.push(SlashEntry {
            name,
            kind: kind.to_owned(),
            description: super::front_matter_field(p, "description"),
        });
    }
    out
}

impl Harness for Claude {
    fn id(&self) -> &'static str {
        "claude"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["plugin"]
    }

    fn binary_name(&self) -> &'static str {
        "claude"
    }

    fn pinned_version(&self) -> &'static str {
        "2.1.197"
    }

    fn parse_version(&self, output: &str) -> Option<String> {
        // `2.1.197 (Claude Code)`
        output
            .split_whitespace()
            .next()
            .filter(|v| v.chars().next().is_some_and(|c| c.is_ascii_digit()))
            .map(str::to_owned)
    }

    fn host_argv(&self, binary: &Path, args: &[String], id: &str) -> Option<Vec<String>> {
        let mut argv = vec![
            binary.to_string_lossy().into_owned(),
            "--session-id".to_owned(),
            id.to_owned(),
        ];
        argv.extend(args.iter().cloned());
        Some(argv)
    }

    fn ready_for_input(&self, screen: &str) -> bool {
        // The input box, empty. Its footer changes with the permission mode (`? for shortcuts`
        // only in the default mode; `⏵⏵ accept edits on`, `⏸ plan mode on`, `⏵⏵ bypass
        // permissions on` in the others, seen live), so the box itself is what tells.
        input_box(screen).is_some_and(|text| text.trim().is_empty())
            || screen.contains(PROMPT_FOOTER)
    }

    fn blocking_screen(&self, screen: &str) -> Option<Blocker> {
        blocking_screen(screen)
    }

    fn resume_argv(&self, binary: &Path, args: &[String], id: &str) -> Option<Vec<String>> {
        let mut argv = vec![
            binary.to_string_lossy().into_owned(),
            "--resume".to_owned(),
            id.to_owned(),
        ];
        argv.extend(args.iter().cloned());
        Some(argv)
    }

    fn screen_activity(&self, title: &str, screen: &str) -> Option<Activity> {
        // The title's glyph is a braille spinner while a turn runs and `✳` otherwise; a dialog
        // keeps `✳` but shows its own footer (facts/claude.md "Terminal title", seen live).
        if title
            .chars()
            .next()
            .is_some_and(|c| ('\u{2800}'..='\u{28ff}').contains(&c))
        {
            Some(Activity::Busy)
        } else if screen.contains("Esc to cancel") {
            Some(Activity::Waiting)
        } else if title.starts_with('✳')
            || screen.contains(PROMPT_FOOTER)
            || input_box(screen).is_some()
        {
            // An interrupted first prompt goes back into the input box, which hides the
            // footer: the title's idle glyph still tells.
            Some(Activity::Idle)
        } else {
            None
        }
    }

    fn title_summary(&self, title: &str) -> Option<String> {
        // `<glyph> <summary>`; the title is `Claude Code` until the first prompt is summarized.
        let summary = match title.split_once(' ') {
            Some((glyph, rest))
                if glyph.chars().count() == 1 && !glyph.chars().all(char::is_alphanumeric) =>
            {
                rest
            }
            _ => title,
        }
        .trim();
        (!summary.is_empty() && summary != "Claude Code").then(|| summary.to_owned())
    }

    fn interrupt_keys(&self) -> Option<&'static [u8]> {
        Some(b"\x1b")
    }

    fn spinner_glyphs(&self) -> &'static [char] {
        &['*', '·', '✢', '✳', '✶', '✻', '✽']
    }

    fn clear_input_key(&self) -> Option<&'static [u8]> {
        // Ctrl-U deletes to the start of the line, and at a line's start the line break; many
        // in one write clear a multi-line box. An interrupted prompt comes back into the box
        // (seen live); Ctrl-U on an empty box does nothing (the footer offers Ctrl+Y to paste
        // the deleted text back). Not Esc Esc: on an empty box it opens the Rewind dialog.
        Some(b"\x15")
    }

    fn exit_keys(&self) -> &'static [&'static [u8]] {
        // Ctrl-D twice at the prompt exits like `/exit` (SessionEnd `prompt_input_exit`,
        // facts/claude.md §7.4 "Interrupting and exiting").
        &[b"\x04", b"\x04"]
    }

    fn submit_pause(&self) -> std::time::Duration {
        // Enter as a separate write: the first prompt after start stays unsubmitted with no
        // gap; 100-300 ms always worked (facts/claude.md §7.4).
        std::time::Duration::from_millis(250)
    }

    fn normalize_prompt(&self, text: &str) -> String {
        // How `UserPromptSubmit` reports a pasted prompt (seen live with 2.1.197): line breaks
        // as `\n`, a tab as four spaces, and trailing whitespace trimmed, except in a paste
        // long enough to be kept as a `[Pasted text]` block, which keeps it. Both sides are
        // compared trimmed, which holds either way.
        text.replace("\r\n", "\n")
            .replace('\r', "\n")
            .replace('\t', "    ")
            .trim_end_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
            .to_owned()
    }

    fn session_env_var(&self) -> Option<&'static str> {
        Some("CLAUDE_CODE_SESSION_ID")
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &[CONFIG_DIR_VAR]
    }

    fn hook_events(&self) -> &'static [&'static str] {
        EVENTS
    }

    fn contract_file(&self) -> &'static str {
        "CLAUDE.md"
    }

    fn generated_dirs(&self) -> &'static [&'static str] {
        &[".claude/skills", ".claude/agents", ".claude/commands"]
    }

    fn render_node(&self, node: &SpecNode) -> Vec<(PathBuf, String)> {
        let desc = || {
            serde_json::to_string(node.desc.as_deref().unwrap_or_default())
                .expect("a string serializes")
        };
        let mut out = Vec::new();
        if node.has(Surface::Skill) {
            out.push((
                PathBuf::from(format!(".claude/skills/{}/SKILL.md", node.name)),
                super::render_skill(node),
            ));
        }
        if node.has(Surface::Agent) {
            let mut fields = vec![("name", node.name.clone()), ("description", desc())];
            if !node.tools.is_empty() {
                fields.push(("tools", node.tools.join(", ")));
            }
            out.push((
                PathBuf::from(format!(".claude/agents/{}.md", node.name)),
                super::render_markdown(node, &fields),
            ));
        }
        if node.has(Surface::Command) {
            out.push((
                PathBuf::from(format!(".claude/commands/{}.md", node.name)),
                super::render_markdown(node, &[("description", desc())]),
            ));
        }
        out
    }

    fn plan_shims(&self, ctx: &ShimCtx, ws: &mut Workspace) -> Result<(), MaterializeError> {
        let wanted: Vec<(String, Value)> = if ctx.here {
            EVENTS
                .iter()
                .map(|e| {
                    // The waiting hook's timeout outlasts its wait, so it is never killed while
                    // it waits (facts/answering-claude.md §4.5).
                    let timeout = if answer::waits(e) {
                        HOOK_TIMEOUT_SECS + ctx.answer_wait_secs
                    } else {
                        HOOK_TIMEOUT_SECS
                    };
                    (
                        (*e).to_owned(),
                        super::hook_group(&ctx.hook_command(self.id(), e), timeout),
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        ws.hook_groups(
            &settings_file(&ctx.tree.root),
            &wanted,
            &super::is_spex_group,
        )?;
        // Trust for the main checkout covers every worktree (facts/claude.md §1.2); only added
        // when not already granted, and remembered so clean takes back exactly that.
        let state = state_file(ctx.env);
        let key = trust_key(&ctx.tree.main);
        if ctx.anywhere {
            let granted = ws
                .read(&state)?
                .and_then(|b| crate::seam::edit::json_edit::JsonDoc::parse(&b).ok())
                .and_then(|d| d.get(&key))
                .is_some_and(|v| v == Value::Bool(true));
            if !granted {
                ws.json_value(&state, &key, Some(&Value::Bool(true)))?;
            }
        } else {
            ws.json_value(&state, &key, None)?;
        }
        Ok(())
    }

    fn slash_menu(&self, tree: &Path, env: &Env) -> Vec<SlashEntry> {
        let mut out: Vec<SlashEntry> = slash::BUILTINS
            .iter()
            .map(|(name, kind, description)| SlashEntry {
                name: (*name).to_owned(),
                kind: (*kind).to_owned(),
                description: (*description).to_owned(),
            })
            .collect();
        out.extend(commands_in(
            &tree.join(".claude/commands"),
            "project command",
        ));
        out.extend(super::skills_in(
            &tree.join(".claude/skills"),
            "project skill",
        ));
        if let Some(home) = &env.home {
            let user = env
                .path_var(CONFIG_DIR_VAR)
                .unwrap_or_else(|| home.join(".claude"));
            out.extend(commands_in(&user.join("commands"), "user command"));
            out.extend(super::skills_in(&user.join("skills"), "user skill"));
        }
        out
    }

    fn doctor(&self, ctx: &DoctorCtx) -> Vec<Check> {
        let mut checks = vec![
            super::check_binary(self, ctx),
            super::check_shims(self, ctx, &settings_file(&ctx.tree.root), ctx.selected),
        ];
        let state = state_file(ctx.env);
        let trusted = std::fs::read(&state)
            .ok()
            .and_then(|b| crate::seam::edit::json_edit::JsonDoc::parse(&b).ok())
            .and_then(|d| d.get(&trust_key(&ctx.tree.main)))
            .is_some_and(|v| v == Value::Bool(true));
        checks.push(match (trusted, ctx.selected) {
            (true, _) => Check::new("workspace trust", Status::Ok, format!("{} trusted in {}", ctx.tree.main.display(), state.display())),
            (false, true) => Check::new(
                "workspace trust",
                Status::Warn,
                format!("{} is not trusted in {}: the TUI ignores project hooks until it is\nhint: run `spex materialize`", ctx.tree.main.display(), state.display()),
            ),
            (false, false) => Check::new("workspace trust", Status::Ok, "not selected"),
        });
        checks
    }

    fn decode(&self, event: &str, payload: &Value) -> HookEvent {
        Claude::decode_payload(event, payload)
    }

    fn encode(&self, event: &str, answer: &Answer) -> Reply {
        Claude::encode_answer(event, answer)
    }

    fn hook_env_names_session(&self) -> bool {
        true
    }

    fn answering(&self) -> Option<&'static dyn crate::seam::answer::Answering> {
        Some(&answer::ClaudeAnswering)
    }

    fn observe(
        &self,
        env: &Env,
        sessions: &[&crate::store::session::Session],
    ) -> Vec<(usize, crate::seam::evidence::Evidence)> {
        evidence::observe(env, sessions)
    }

    fn evidence_dirs(&self, env: &Env, session: &crate::store::session::Session) -> Vec<PathBuf> {
        vec![evidence::registry_dir(env, session)]
    }

    fn read_log(
        &self,
        s: &crate::store::session::Session,
    ) -> Option<crate::seam::evidence::LogReading> {
        use crate::store::session::{Status as S, TurnState};
        let transcript = s.transcript.as_deref()?;
        let cursor = s.usage_cursor.clone().unwrap_or_default();
        // A turn StopFailure ended `failed`: the text it wrote first is only in the transcript.
        let failed_unread = s
            .turn
            .as_ref()
            .is_some_and(|t| t.state == TurnState::Failed && !t.log_read);
        if cursor.done && !failed_unread {
            return None;
        }
        let mut r = crate::seam::evidence::LogReading::default();
        if !cursor.done
            && let Some((usage, next)) = usage::read(transcript, &cursor, s.status == S::Exited)
        {
            r.usage = usage;
            r.cursor = Some(next);
        }
        if let Some(turn) = s.turn.as_ref().filter(|_| failed_unread) {
            let written = failure::partial_text(transcript);
            let at = crate::store::parse_time;
            let started = at(&turn.started_at);
            // Written since the turn began (not an earlier turn's answer).
            let since_start = |t: Option<&str>| match (t.and_then(at), started) {
                (Some(t), Some(start)) => t >= start,
                (None, _) | (_, None) => true,
            };
            let text = written
                .text
                .filter(|(_, first)| since_start(first.as_deref()))
                .map(|(text, _)| text);
            let caught_up = written
                .error_at
                .as_deref()
                .is_some_and(|t| since_start(Some(t)));
            // Until the transcript has the failure, it may lack the text before it too: read
            // again next time, for a while.
            let long_ago = turn
                .ended_at
                .as_deref()
                .and_then(at)
                .and_then(|t| std::time::SystemTime::now().duration_since(t).ok())
                .is_some_and(|d| d > TRANSCRIPT_LAG);
            if text.is_some() || caught_up || long_ago {
                r.partial_read = true;
                r.partial = text;
            }
        }
        (r != crate::seam::evidence::LogReading::default()).then_some(r)
    }
}

/// The prompt box's footer (`ready_for_input`).
const PROMPT_FOOTER: &str = "? for shortcuts";

/// The text in Claude's input box, when the screen shows the box: a line that opens with `❯`
/// right under a horizontal rule, up to the rule that closes the box. Dialogs draw their `❯`
/// indented and not under a rule, so a dialog is no input box.
fn input_box(screen: &str) -> Option<String> {
    let lines: Vec<&str> = screen.lines().collect();
    let rule = |l: &str| {
        let l = l.trim_end();
        l.chars().count() >= 10 && l.chars().all(|c| c == '─')
    };
    let start = (1..lines.len())
        .rev()
        .find(|&i| lines[i].starts_with('❯') && rule(lines[i - 1]))?;
    let end = (start + 1..lines.len()).find(|&i| rule(lines[i]))?;
    let mut text = lines[start]['❯'.len_utf8()..].trim().to_owned();
    for l in &lines[start + 1..end] {
        text.push('\n');
        text.push_str(l.trim());
    }
    Some(text)
}

/// Screens 2.1.197 stops at before its prompt, each seen live under spex's host (offline, fake
/// Messages API, facts/claude.md §7.3): (texts any of which marks the screen, what it asks,
/// what to do). A dialog counts only while the prompt box is not on screen, so a resumed
/// conversation quoting one of these texts is no dialog.
const DIALOGS: &[(&[&str], &str, &str)] = &[
    (
        &[
            "Do you want to use this API key?",
            "Detected a custom API key",
        ],
        "Claude Code asks whether to use the API key in `ANTHROPIC_API_KEY` (its default answer is No)",
        "approve the key once: add its last 20 characters to `customApiKeyResponses.approved` in `~/.claude.json` (or run `claude` and pick `1. Yes`), or pass it as `ANTHROPIC_AUTH_TOKEN`, which asks nothing",
    ),
    (
        &["Yes, I trust this folder", "Accessing workspace:"],
        "Claude Code asks whether to trust this folder",
        "`spex materialize` in the main checkout records the trust (`projects.<path>.hasTrustDialogAccepted` in `~/.claude.json`); worktrees inherit it",
    ),
    (
        &["running in Bypass Permissions mode"],
        "Claude Code asks to accept Bypass Permissions mode (`--dangerously-skip-permissions`; its default answer is No, exit)",
        "accept it once: `bypassPermissionsModeAccepted: true` in `~/.claude.json`, or drop the flag from `harness.claude.args`",
    ),
    (
        &["Settings Warning"],
        "Claude Code warns about entries in its settings that it skipped",
        "fix the settings file the screen names (an unknown hook event name is the usual cause)",
    ),
    (
        // The first-run setup checks api.anthropic.com itself, whatever `ANTHROPIC_BASE_URL`
        // says; offline it shows this and exits.
        &["Unable to connect to Anthropic services"],
        "Claude Code's first-run setup could not reach Anthropic",
        "finish Claude Code's setup once (run `claude` online), or mark it done: `hasCompletedOnboarding: true` in `~/.claude.json`",
    ),
];

/// The prompt box's footer when no key or login is usable: the prompt is there, but every
/// prompt fails until the person logs in (seen live with no `ANTHROPIC_API_KEY`).
const NOT_LOGGED_IN: &str = "Not logged in · Run /login";

fn blocking_screen(screen: &str) -> Option<Blocker> {
    let blocker = |what: &str, hint: &str| Blocker {
        what: what.to_owned(),
        hint: hint.to_owned(),
    };
    if screen.contains(NOT_LOGGED_IN) {
        return Some(blocker(
            "Claude Code is not logged in (no API key or login it may use)",
            "set `ANTHROPIC_API_KEY` (approved in `~/.claude.json`) or `ANTHROPIC_AUTH_TOKEN`, or run `claude` and `/login` once",
        ));
    }
    if screen.contains(PROMPT_FOOTER) || input_box(screen).is_some() {
        return None;
    }
    DIALOGS
        .iter()
        .find(|(marks, _, _)| marks.iter().any(|m| screen.contains(m)))
        .map(|(_, what, hint)| blocker(what, hint))
}

/// Tools whose input names the file they edit.
fn edited_file(tool: &str, input: &Value) -> Option<String> {
    match tool {
        "Write" | "Edit" | "MultiEdit" => super::str_field(input, "file_path"),
        "NotebookEdit" => super::str_field(input, "notebook_path"),
        _ => None,
    }
}

/// Events whose hook output may carry `additionalContext` (facts/claude.md §3).
const CONTEXT_EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Notification",
    "Stop",
    "SubagentStop",
];

/// Claude's spelling of the shared wire format.
const WIRE: super::Wire = super::Wire {
    turn_key: "prompt_id",
    // Claude takes prompts queued while it worked up as one turn, each with its own id.
    turn_key_names_turn: false,
    ask_tool: "AskUserQuestion",
};

impl Claude {
    pub(super) fn decode_payload(event: &str, p: &Value) -> HookEvent {
        use super::str_field as s;
        let input = p.get("tool_input").cloned().unwrap_or(Value::Null);
        let edits = s(p, "tool_name")
            .and_then(|t| edited_file(&t, &input))
            .into_iter()
            .collect();
        let mut ev = super::decode_shared(event, p, &WIRE, edits);
        if event == "PostToolUse" && matches!(ev.tool.as_deref(), Some("Agent" | "Task")) {
            // The call that ran a sub-agent names it and reports what it used (seen live).
            let r = p.get("tool_response").unwrap_or(&Value::Null);
            ev.spawned = s(r, "agentId");
            ev.usage = r
                .get("usage")
                .filter(|u| u.is_object())
                .map(|u| usage::from_api(u, s(r, "resolvedModel")))
                .map(|u| crate::store::session::Usage { requests: 0, ..u });
        }
        if ev.kind.is_some() {
            return ev;
        }
        ev.kind = Some(match event {
            "PostToolUseFailure" => {
                ev.error = s(p, "error");
                // Esc during a tool interrupts the turn, and no Stop follows (facts/claude.md §7.4).
                if p.get("is_interrupt").and_then(Value::as_bool) == Some(true) {
                    Kind::TurnInterrupted
                } else {
                    Kind::ToolFailed
                }
            }
            "PermissionRequest" => {
                let tool = ev.tool.clone().unwrap_or_else(|| "tool".into());
                ev.attention = Some(super::permission_attention(&ev, &WIRE, &input, |input| {
                    let what = s(input, "command")
                        .or_else(|| s(input, "file_path"))
                        .unwrap_or_else(|| input.to_string());
                    format!("{tool}: {what}")
                }));
                ev.ask = Some(answer::ask(&tool, &input, p));
                // The payload names no call: the transcript does (read on this hook only).
                if ev.call_id.is_none() {
                    ev.call_id = ev
                        .transcript
                        .as_deref()
                        .and_then(|t| transcript::pending_call(Path::new(t), &tool, &input));
                }
                Kind::PermissionRequest
            }
            "Notification" => match s(p, "notification_type").as_deref() {
                Some("permission_prompt" | "elicitation_dialog") => {
                    ev.attention = Some(("permission".into(), s(p, "message").unwrap_or_default()));
                    Kind::AttentionNotice
                }
                Some("idle_prompt") => Kind::IdleNotice,
                _ => Kind::Other,
            },
            "StopFailure" => {
                let failure = failure::stop_failure(p);
                ev.error = Some(failure.error.clone());
                ev.failure = Some(failure);
                Kind::TurnFailed
            }
            _ => Kind::Other,
        });
        ev
    }

    pub(super) fn encode_answer(event: &str, answer: &Answer) -> Reply {
        if let Some(reason) = super::block_text(answer) {
            let out = match event {
                "PreToolUse" => json!({ "hookSpecificOutput": {
                    "hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": reason } }),
                "UserPromptSubmit" | "Stop" | "SubagentStop" | "PostToolUse" => {
                    json!({ "decision": "block", "reason": reason })
                }
                _ => {
                    return Reply {
                        stderr: reason,
                        exit_code: 2,
                        ..Reply::default()
                    };
                }
            };
            return Reply {
                stdout: out.to_string(),
                ..Reply::default()
            };
        }
        if answer.context.is_empty() || !CONTEXT_EVENTS.contains(&event) {
            return Reply::default();
        }
        super::context_reply(event, &answer.context)
    }
}

#[cfg(test)]
mod screen_tests {
    use super::*;

    #[test]
    fn reads_activity_and_summary_from_the_terminal() {
        let c = Claude;
        let cases = [
            ("⠂ Fix the bug", "", Some(Activity::Busy)),
            (
                "✳ Fix the bug",
                " Do you want to proceed?\n Esc to cancel",
                Some(Activity::Waiting),
            ),
            ("✳ Fix the bug", "❯ half-typed prompt", Some(Activity::Idle)),
            ("Claude Code", "? for shortcuts", Some(Activity::Idle)),
            (
                "Claude Code",
                "Do you trust the files in this folder?",
                None,
            ),
        ];
        for (title, screen, want) in cases {
            assert_eq!(
                c.screen_activity(title, screen),
                want,
                "{title:?} {screen:?}"
            );
        }
        assert_eq!(
            c.title_summary("⠐ Fix the bug").as_deref(),
            Some("Fix the bug")
        );
        assert_eq!(c.title_summary("✳ Claude Code"), None);
        assert_eq!(c.title_summary(""), None);
    }

    /// The prompt as 2.1.197 draws it in each permission mode (captured live under spex's
    /// host), empty and holding text, and a dialog's options, which are no input box.
    #[test]
    fn the_empty_prompt_is_ready_in_every_permission_mode() {
        let rule = "─".repeat(40);
        let at = |input: &str, footer: &str| {
            format!(" ▐▛███▜▌   Claude Code v2.1.197\n\n{rule}\n{input}\n{rule}\n  {footer}")
        };
        let c = Claude;
        for footer in [
            "? for shortcuts · ← for agents",
            "⏵⏵ accept edits on (shift+tab to cycle) · ← for agents",
            "⏸ plan mode on (shift+tab to cycle) · ← for agents",
            "⏵⏵ bypass permissions on (shift+tab to cycle) · ← for agents",
        ] {
            assert!(c.ready_for_input(&at("❯", footer)), "{footer}");
            assert!(c.ready_for_input(&at("❯ ", footer)), "{footer}");
            // With text in the box the footer keeps the mode and drops its hints (seen live).
            let typed = footer
                .split(" · ")
                .next()
                .filter(|f| !f.starts_with('?'))
                .unwrap_or("");
            assert!(!c.ready_for_input(&at("❯ hello there", typed)), "{footer}");
            assert_eq!(c.blocking_screen(&at("❯", footer)), None);
        }
        let multi = format!("{rule}\n❯ first line\n  second line\n{rule}\n  ⏵⏵ accept edits on");
        assert!(!c.ready_for_input(&multi));
        let dialog = format!(
            "{rule}\n Bash command\n\n Do you want to proceed?\n ❯ 1. Yes\n   2. No\n\n Esc to cancel"
        );
        assert!(!c.ready_for_input(&dialog));
        assert_eq!(
            c.screen_activity("✳ Claude Code", &dialog),
            Some(Activity::Waiting)
        );
    }

    #[test]
    fn a_prompt_compares_as_claude_reports_it() {
        let c = Claude;
        for (typed, reported) in [
            ("USE_NONE one\n", "USE_NONE one"),
            ("  two  \n\n", "  two"),
            ("a\tb\t \n", "a    b"),
            ("four\r\nline2 \n  ", "four\nline2"),
            ("kept\nas\na block \n", "kept\nas\na block \n"),
            ("nbsp\u{a0}", "nbsp"),
        ] {
            assert_eq!(
                c.normalize_prompt(typed),
                c.normalize_prompt(reported),
                "{typed:?}"
            );
        }
        assert_ne!(c.normalize_prompt("  lead"), c.normalize_prompt("lead"));
    }

    /// Screens captured from 2.1.197 under spex's host (the live launches that stopped there).
    #[test]
    fn knows_the_screens_that_block_a_start_and_not_the_prompt() {
        let api_key = "  Detected a custom API key in your environment\n\n  ANTHROPIC_API_KEY: sk-ant-...-for-spex-tests-0000\n\n  Do you want to use this API key?\n\n    1. Yes\n  ❯ 2. No (recommended)\n\n  Enter to confirm · Esc to cancel";
        let trust = " Accessing workspace:\n\n /tmp/probe/trust/repo\n\n ❯ 1. Yes, I trust this folder\n   2. No, exit\n\n Enter to confirm · Esc to cancel";
        let bypass = "  WARNING: Claude Code running in Bypass Permissions mode\n\n  ❯ 1. No, exit\n    2. Yes, I accept";
        let settings = "  Settings Warning\n\n  └ hooks.FooBarEvent: Unknown hook event \"FooBarEvent\" was ignored.\n  ❯ 1. Continue";
        let onboarding = "Welcome to Claude Code v2.1.197\n Unable to connect to Anthropic services\n\n Failed to connect to api.anthropic.com: ENOTFOUND";
        let no_login = "❯\n  ? for shortcuts · ← for agents          Not logged in · Run /login";
        let prompt = "❯\n  ? for shortcuts · ← for agents          ● high · /effort";
        let resumed = "> tell me about the Settings Warning dialog\n❯\n  ? for shortcuts";
        let c = Claude;
        for (screen, want) in [
            (api_key, Some("API key")),
            (trust, Some("trust this folder")),
            (bypass, Some("Bypass Permissions")),
            (settings, Some("settings")),
            (onboarding, Some("first-run setup")),
            (no_login, Some("not logged in")),
            (prompt, None),
            (resumed, None),
        ] {
            let got = c.blocking_screen(screen);
            match want {
                Some(w) => assert!(
                    got.as_ref()
                        .is_some_and(|b| b.what.contains(w) && !b.hint.is_empty()),
                    "{screen:?}: {got:?}"
                ),
                None => assert_eq!(got, None, "{screen:?}"),
            }
        }
    }
}
