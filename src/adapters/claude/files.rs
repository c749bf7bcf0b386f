//! Claude Code's files and hooks: hooks in each tree's `.claude/settings.json`, contract in
//! `CLAUDE.md`, skills/agents/commands under `.claude/`, workspace trust in `~/.claude.json`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::answer;
use super::home::{CONFIG_DIR_VAR, settings_file, state_file};
use super::slash;
use crate::adapters::common::files;
use crate::env::Env;
use crate::seam::edit::MaterializeError;
use crate::seam::edit::workspace::Workspace;
use crate::seam::files::{Check, DoctorCtx, Files, ShimCtx, SlashEntry, Status};
use crate::seam::limits::LimitsEvidence as _;
use crate::spec::{SpecNode, Surface};

pub struct ClaudeFiles;

/// Events spex binds. Every one is in 2.1.197's validator list; an unknown name would open a
/// blocking dialog in the TUI (docs/harnesses/facts/claude.md §1.2).
pub const EVENTS: &[&str] = &[
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

fn trust_key(main: &Path) -> Vec<String> {
    vec![
        "projects".into(),
        main.to_string_lossy().into_owned(),
        "hasTrustDialogAccepted".into(),
    ]
}

/// Custom commands under a `commands` folder: `sub/name.md` is `/sub:name`.
fn commands_in(dir: &Path, kind: &str) -> Vec<SlashEntry> {
    files::files_with_ext(dir, "md")
        .into_iter()
        .map(|(p, rel)| SlashEntry {
            name: rel.with_extension("").to_string_lossy().replace('/', ":"),
            kind: kind.to_owned(),
            description: files::front_matter_field(&p, "description"),
        })
        .collect()
}

impl Files for ClaudeFiles {
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
                files::render_skill(node),
            ));
        }
        if node.has(Surface::Agent) {
            let mut fields = vec![("name", node.name.clone()), ("description", desc())];
            if !node.tools.is_empty() {
                fields.push(("tools", node.tools.join(", ")));
            }
            out.push((
                PathBuf::from(format!(".claude/agents/{}.md", node.name)),
                files::render_markdown(node, &fields),
            ));
        }
        if node.has(Surface::Command) {
            out.push((
                PathBuf::from(format!(".claude/commands/{}.md", node.name)),
                files::render_markdown(node, &[("description", desc())]),
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
                    // it waits (docs/harnesses/facts/answering-claude.md §4.5).
                    let timeout = if answer::waits(e) {
                        HOOK_TIMEOUT_SECS + ctx.answer_wait_secs
                    } else {
                        HOOK_TIMEOUT_SECS
                    };
                    (
                        (*e).to_owned(),
                        files::hook_group(&ctx.hook_command(e), timeout),
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        ws.hook_groups(
            &settings_file(&ctx.tree.root),
            &wanted,
            &files::is_spex_group,
        )?;
        plan_status_line(ctx, ws)?;
        // Trust for the main checkout covers every worktree (docs/harnesses/facts/claude.md §1.2); only added
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
        out.extend(files::skills_in(
            &tree.join(".claude/skills"),
            "project skill",
        ));
        if let Some(home) = &env.home {
            let user = env
                .path_var(CONFIG_DIR_VAR)
                .unwrap_or_else(|| home.join(".claude"));
            out.extend(commands_in(&user.join("commands"), "user command"));
            out.extend(files::skills_in(&user.join("skills"), "user skill"));
        }
        out
    }

    fn doctor(&self, ctx: &DoctorCtx) -> Vec<Check> {
        let mut checks = vec![files::check_shims(
            EVENTS,
            ctx,
            &settings_file(&ctx.tree.root),
            ctx.selected,
        )];
        let state = state_file(ctx.env);
        let trusted = fs_err::read(&state)
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
}

/// spex's status line (`limits.statusLine`) in the tree's settings: in place of the person's
/// command when they have a status line there (only its `command` replaced, their text kept in
/// the ownership record for `spex statusline` to run and for `clean` to put back byte for
/// byte), else a `statusLine` member of spex's own.
fn plan_status_line(ctx: &ShimCtx, ws: &mut Workspace) -> Result<(), MaterializeError> {
    let file = settings_file(&ctx.tree.root);
    let whole = vec![super::limits::KEY.to_owned()];
    let leaf = vec![super::limits::KEY.to_owned(), "command".to_owned()];
    let Some(line) = (ctx.here && ctx.status_line)
        .then(|| super::limits::ClaudeLimits.status_line(ctx.spex))
        .flatten()
    else {
        ws.json_value(&file, &leaf, None)?;
        return ws.json_value(&file, &whole, None);
    };
    let theirs = !ws.json_member_owned(&file, &whole)
        && ws
            .read(&file)?
            .and_then(|b| crate::seam::edit::json_edit::JsonDoc::parse(&b).ok())
            .and_then(|d| d.get(&whole))
            .is_some_and(|v| v.is_object());
    if theirs {
        ws.json_value(&file, &leaf, line.get("command"))
    } else {
        ws.json_value(&file, &whole, Some(&line))
    }
}
