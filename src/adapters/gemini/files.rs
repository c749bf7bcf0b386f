//! Gemini CLI's files and hooks: hooks in each checkout's own `.gemini/settings.json` (Gemini
//! reads project settings from the launch folder only), contract in `GEMINI.md`, folder trust
//! per checkout in `~/.gemini/trustedFolders.json`, skills in `.agents/skills/` (shared with
//! Codex), commands in `.gemini/commands/` (docs/harnesses/facts/gemini.md §3, §4, §9, §10).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::commands;
use super::home::{self, trusted_folders_file, trusted_hooks_file};
use super::slash;
use super::trust::{self, Verdict};
use crate::adapters::common::files;
use crate::env::Env;
use crate::seam::edit::MaterializeError;
use crate::seam::edit::json_edit::JsonDoc;
use crate::seam::edit::workspace::Workspace;
use crate::seam::files::{Check, DoctorCtx, Files, ShimCtx, SlashEntry, Status};
use crate::spec::{SpecNode, Surface};

pub struct GeminiFiles;

/// Events spex binds. `BeforeModel`, `AfterModel`, `BeforeToolSelection` and `PreCompress`
/// are left out: they fire on every model request or streamed chunk (docs/harnesses/facts/gemini.md §5), a process each.
pub const EVENTS: &[&str] = &[
    "SessionStart",
    "SessionEnd",
    "BeforeAgent",
    "AfterAgent",
    "BeforeTool",
    "AfterTool",
    "Notification",
];

/// The name on spex's hook handlers: what the TUI shows while one runs (`Executing Hook:
/// spex`), what `hooksConfig.disabled` may name, and the first half of each fingerprint.
pub const HOOK_NAME: &str = "spex";

/// Gemini's hook timeout is in milliseconds (docs/harnesses/facts/gemini.md §3.2).
const HOOK_TIMEOUT_MS: u64 = 30_000;

/// Events whose hook may hold the turn while it waits for an answer from outside. None in
/// 0.61.0: `Notification`'s output is ignored (it cannot answer a dialog, docs/harnesses/facts/gemini.md §7), so spex
/// answers Gemini's dialogs through its terminal.
const WAITING_EVENTS: &[&str] = &[];

/// A handler's timeout: a waiting hook's outlasts its wait, so it is never killed while it
/// waits.
fn timeout_ms(event: &str, answer_wait_secs: u64) -> u64 {
    if WAITING_EVENTS.contains(&event) {
        HOOK_TIMEOUT_MS + answer_wait_secs * 1000
    } else {
        HOOK_TIMEOUT_MS
    }
}

/// spex's hook group for one event: one named handler, no matcher (every tool, every source).
fn hook_group(command: &str, timeout: u64) -> Value {
    json!({ "hooks": [ { "type": "command", "name": HOOK_NAME, "command": command, "timeout": timeout } ] })
}

/// The fingerprints Gemini records of a hook group's handlers: `<name>:<command>`
/// (0.61.0 `getHookKey`).
fn fingerprints(group: &Value) -> Vec<String> {
    group["hooks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| {
            format!(
                "{}:{}",
                h["name"].as_str().unwrap_or_default(),
                h["command"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

fn settings_file(tree_root: &Path) -> PathBuf {
    tree_root.join(".gemini/settings.json")
}

fn root_key(root: &Path) -> Vec<String> {
    vec![root.to_string_lossy().into_owned()]
}

fn json_of(bytes: Option<Vec<u8>>) -> Value {
    bytes
        .and_then(|b| JsonDoc::parse(&b).ok())
        .map_or(Value::Null, |d| d.value())
}

/// Trusts this checkout in Gemini's folder-trust file unless a rule already decides it (a
/// worktree inherits nothing from the main checkout, docs/harnesses/facts/gemini.md §4.1). Owned by key, so clean takes
/// back exactly the entry spex added and never a user's.
fn plan_folder_trust(ctx: &ShimCtx, ws: &mut Workspace) -> Result<(), MaterializeError> {
    let file = trusted_folders_file(ctx.env);
    let key = root_key(&ctx.tree.root);
    if !ctx.here {
        return ws.json_value(&file, &key, None);
    }
    // Spex's entries for other checkouts do not count: a worktree inside the main checkout is
    // covered by the main's entry only until the main's clean takes it back.
    let mut rules = json_of(ws.read(&file)?);
    let others: Vec<String> = ws
        .owned
        .json
        .get(&crate::fsutil::resolve_link(&file))
        .into_iter()
        .flat_map(|o| o.written.iter())
        .filter_map(|(k, _)| match k.as_slice() {
            [root] if *root != key[0] => Some(root.clone()),
            _ => None,
        })
        .collect();
    if let Some(rules) = rules.as_object_mut() {
        rules.retain(|k, _| !others.contains(k));
    }
    match trust::verdict(&rules, &ctx.tree.root) {
        Verdict::Trusted => Ok(()),
        Verdict::Unknown => ws.json_value(&file, &key, Some(&Value::from(trust::TRUST_FOLDER))),
        Verdict::Distrusted => {
            ws.warnings.push(format!(
                "`{}` distrusts {}: Gemini CLI runs no project hooks there, so spex records no Gemini session in it; spex leaves that to you (change the rule if you want them)",
                file.display(),
                ctx.tree.root.display()
            ));
            Ok(())
        }
    }
}

/// What spex added to Gemini's files for a checkout that is gone (a worktree removed without
/// `spex clean`) is taken back, as that checkout's clean would have: the record names it.
fn plan_gone_checkouts(ctx: &ShimCtx, ws: &mut Workspace) -> Result<(), MaterializeError> {
    let live: Vec<String> = ctx
        .tree
        .all_trees()
        .into_iter()
        .map(|t| t.root.to_string_lossy().into_owned())
        .collect();
    let folders = trusted_folders_file(ctx.env);
    let hooks = trusted_hooks_file(ctx.env);
    for file in [&folders, &hooks] {
        let Some(owned) = ws.owned.json.get(&crate::fsutil::resolve_link(file)) else {
            continue;
        };
        let mut gone: Vec<String> = owned
            .members
            .iter()
            .chain(owned.written.iter().map(|(k, _)| k))
            .chain(owned.replaced.iter().map(|(k, _)| k))
            .chain(owned.elements.iter().map(|(k, _)| k))
            .filter_map(|k| k.first())
            .filter(|k| !live.contains(k))
            .cloned()
            .collect();
        gone.sort();
        gone.dedup();
        for checkout in gone {
            let key = [checkout];
            if file == &folders {
                ws.json_value(file, &key, None)?;
            } else {
                ws.json_elements(file, &key, &[])?;
            }
        }
    }
    Ok(())
}

impl Files for GeminiFiles {
    fn contract_file(&self) -> &'static str {
        "GEMINI.md"
    }

    fn generated_dirs(&self) -> &'static [&'static str] {
        &[".agents/skills", ".gemini/commands"]
    }

    fn render_node(&self, node: &SpecNode) -> Vec<(PathBuf, String)> {
        let mut out = Vec::new();
        if node.has(Surface::Skill) {
            // `.agents/skills`, which Codex reads too: the same skill in `.gemini/skills` as
            // well would make Gemini warn of a conflict each session.
            out.push((
                PathBuf::from(format!(".agents/skills/{}/SKILL.md", node.name)),
                files::render_skill(node),
            ));
        }
        // A skill is a `/` command in Gemini already: a command file of the same name would
        // make both renamed (`/review1`, `/workspace.review`) with a conflict notice.
        if node.has(Surface::Command) && !node.has(Surface::Skill) {
            out.push((
                PathBuf::from(format!(".gemini/commands/{}.toml", node.name)),
                commands::render(node),
            ));
        }
        out
    }

    fn plan_shims(&self, ctx: &ShimCtx, ws: &mut Workspace) -> Result<(), MaterializeError> {
        let wanted: Vec<(String, Value)> = if ctx.here {
            EVENTS
                .iter()
                .map(|e| {
                    (
                        (*e).to_owned(),
                        hook_group(&ctx.hook_command(e), timeout_ms(e, ctx.answer_wait_secs)),
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
        // Gemini warns once about project hooks whose fingerprint it has not recorded for this
        // folder (a banner in the TUI, a warning on stderr); spex's are recorded beforehand.
        let fingerprints: Vec<Value> = wanted
            .iter()
            .flat_map(|(_, g)| fingerprints(g))
            .map(Value::from)
            .collect();
        ws.json_elements(
            &trusted_hooks_file(ctx.env),
            &root_key(&ctx.tree.root),
            &fingerprints,
        )?;
        plan_folder_trust(ctx, ws)?;
        plan_gone_checkouts(ctx, ws)
    }

    fn slash_menu(&self, tree: &Path, env: &Env) -> Vec<SlashEntry> {
        let mut out = slash::builtins(tree);
        // Skills are commands too (`/<name>` activates one); of one name, the last folder
        // read wins, the project's over the user's.
        let user = home::home(env);
        let mut skills: Vec<SlashEntry> = Vec::new();
        for (dir, kind) in [
            (user.join(".gemini/skills"), "user skill"),
            (user.join(".agents/skills"), "user skill"),
            (tree.join(".gemini/skills"), "project skill"),
            (tree.join(".agents/skills"), "project skill"),
        ] {
            for s in files::skills_in(&dir, kind) {
                skills.retain(|e| e.name != s.name);
                skills.push(s);
            }
        }
        out.extend(skills);
        out.extend(commands::commands_in(
            &user.join(".gemini/commands"),
            "user command",
        ));
        out.extend(commands::commands_in(
            &tree.join(".gemini/commands"),
            "project command",
        ));
        out
    }

    fn doctor(&self, ctx: &DoctorCtx) -> Vec<Check> {
        let mut checks = vec![files::check_shims(
            EVENTS,
            ctx,
            &settings_file(&ctx.tree.root),
            ctx.selected,
        )];
        let file = trusted_folders_file(ctx.env);
        let rules = json_of(fs_err::read(&file).ok());
        let root = &ctx.tree.root;
        let name = "folder trust";
        checks.push(match (trust::verdict(&rules, root), ctx.selected) {
            (_, false) => Check::new(name, Status::Ok, "not selected"),
            (Verdict::Trusted, true) => Check::new(
                name,
                Status::Ok,
                format!("{} trusted in {}", root.display(), file.display()),
            ),
            (Verdict::Unknown, true) => Check::new(
                name,
                Status::Fail,
                format!(
                    "{} is not trusted in {}: Gemini CLI runs no project hooks there, and headless runs exit 55\nhint: run `spex materialize`",
                    root.display(),
                    file.display()
                ),
            ),
            (Verdict::Distrusted, true) => Check::new(
                name,
                Status::Fail,
                format!(
                    "{} is distrusted (`DO_NOT_TRUST`) in {}: Gemini CLI runs no project hooks there\nhint: remove that rule from {}, then run `spex materialize`",
                    root.display(),
                    file.display(),
                    file.display()
                ),
            ),
        });
        checks.push(fingerprint_check(ctx));
        checks.push(switches_check(ctx));
        checks
    }
}

/// Whether Gemini's own switches leave spex's hooks on: `hooksConfig.enabled` (the project's
/// settings over the user's) and `hooksConfig.disabled`, which names hooks by name (`spex`)
/// or command.
fn switches_check(ctx: &DoctorCtx) -> Check {
    let name = "hooks switched on";
    if !ctx.selected {
        return Check::new(name, Status::Ok, "not selected");
    }
    let files = [
        settings_file(&ctx.tree.root),
        home::gemini_dir(ctx.env).join("settings.json"),
    ];
    let mut off = Vec::new();
    let mut enabled_decided = false;
    for file in &files {
        let config = &json_of(fs_err::read(file).ok())["hooksConfig"];
        if let Some(enabled) = config["enabled"].as_bool().filter(|_| !enabled_decided) {
            enabled_decided = true;
            if !enabled {
                off.push(format!(
                    "`hooksConfig.enabled` is false in {}",
                    file.display()
                ));
            }
        }
        let disabled: Vec<&str> = config["disabled"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|d| *d == HOOK_NAME || files::is_spex_command(d))
            .collect();
        if !disabled.is_empty() {
            off.push(format!(
                "`hooksConfig.disabled` names {} in {}",
                disabled.join(", "),
                file.display()
            ));
        }
    }
    if off.is_empty() {
        Check::new(name, Status::Ok, "Gemini CLI runs spex's hooks")
    } else {
        Check::new(
            name,
            Status::Fail,
            format!(
                "{}: Gemini CLI runs none or not all of spex's hooks\nhint: remove that setting",
                off.join("; ")
            ),
        )
    }
}

/// Whether Gemini has spex's hook fingerprints for this checkout (else it prints a warning
/// about them once: a banner in the TUI).
fn fingerprint_check(ctx: &DoctorCtx) -> Check {
    let file = trusted_hooks_file(ctx.env);
    let name = "hook fingerprints";
    if !ctx.selected {
        return Check::new(name, Status::Ok, "not selected");
    }
    let recorded = json_of(fs_err::read(&file).ok());
    let recorded = recorded[ctx.tree.root.to_string_lossy().as_ref()]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let missing: Vec<&str> = EVENTS
        .iter()
        .copied()
        .filter(|e| {
            let command = format!("{} dispatch gemini {e}", ctx.spex);
            !recorded.contains(&Value::from(format!("{HOOK_NAME}:{command}")))
        })
        .collect();
    if missing.is_empty() {
        Check::new(
            name,
            Status::Ok,
            format!(
                "spex's hooks recorded for {} in {}",
                ctx.tree.root.display(),
                file.display()
            ),
        )
    } else {
        Check::new(
            name,
            Status::Warn,
            format!(
                "{} has no fingerprint of spex's {} hooks in {}: Gemini CLI warns about them once (a banner in the TUI)\nhint: run `spex materialize`",
                ctx.tree.root.display(),
                missing.join(", "),
                file.display()
            ),
        )
    }
}
