//! Codex's files and hooks: hooks in the main checkout's `.codex/hooks.json` (worktrees
//! anchored by a `.codex/` folder), contract in `AGENTS.md`, skills under `.agents/skills`,
//! project and hook trust in `~/.codex/config.toml`.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::home::{codex_home, config_file};
use super::rpc::{self, TrustStatus};
use super::trust;
use crate::adapters::common::files;
use crate::env::Env;
use crate::seam::edit::json_edit::JsonDoc;
use crate::seam::edit::toml_entries::{Legacy, Want};
use crate::seam::edit::workspace::Workspace;
use crate::seam::edit::{MaterializeError, block, shell_quote};
use crate::seam::files::{Check, DoctorCtx, Files, ShimCtx, SlashEntry, Status};
use crate::spec::{SpecNode, Surface};

pub struct CodexFiles;

/// Events spex binds; all accepted by 0.169.0 (docs/harnesses/facts/codex.md §1).
const EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PermissionRequest",
    "Stop",
    "Interrupt",
    "SessionEnd",
    "PreModelRequest",
    "PostModelRequest",
    "SubagentStart",
    "SubagentStop",
];

/// Built-in `/` commands of 0.169.0, read from the TUI popup (docs/harnesses/facts/codex.md §6).
const BUILTINS: &[&str] = &[
    "model",
    "fast",
    "presets",
    "ide",
    "permissions",
    "keymap",
    "vim",
    "experimental",
    "approve",
    "memories",
    "skills",
    "import",
    "hooks",
    "review",
    "rename",
    "new",
    "archive",
    "delete",
    "resume",
    "fork",
    "init",
    "compact",
    "config",
    "recap",
    "plan",
    "voice",
    "goal",
    "agents",
    "side",
    "copy",
    "export",
    "raw",
    "tui",
    "diff",
    "mention",
    "status",
    "daemon",
    "warnings",
    "cd",
    "pwd",
    "title",
    "statusline",
    "theme",
    "pets",
    "mcp",
    "plugins",
    "logout",
    "exit",
    "feedback",
    "ps",
    "stop",
    "clear",
    "subagents",
];

/// The comment fence older versions kept Codex trust in.
const LEGACY_TRUST_BLOCK: &str = "codex-trust";

fn hooks_file(main: &Path) -> PathBuf {
    main.join(".codex/hooks.json")
}

/// Codex's `snake_case` label of an event (the trust key and hash use it).
fn event_label(event: &str) -> String {
    let mut out = String::new();
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `SessionEnd` and `Interrupt` hooks are clamped to 1..=3 s by Codex; others default to 600.
/// `PermissionRequest` may wait `wait` for an answer (away mode): its timeout outlasts that, so
/// Codex never kills it while it waits.
fn timeout_for(event: &str, wait: u64) -> u64 {
    match event {
        "SessionEnd" | "Interrupt" => 3,
        "PermissionRequest" => 30 + wait,
        _ => 30,
    }
}

fn normalized_timeout(event: &str, timeout: Option<u64>) -> u64 {
    if matches!(event, "SessionEnd" | "Interrupt") {
        timeout.unwrap_or(1).clamp(1, 3)
    } else {
        timeout.unwrap_or(600).max(1)
    }
}

const EVENTS_WITH_MATCHER: &[&str] = &[
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "PreCompact",
    "PostCompact",
    "SessionStart",
    "SessionEnd",
    "SubagentStart",
    "SubagentStop",
];
pub const EVENTS_WITH_CONTEXT: &[&str] = &[
    "PreToolUse",
    "PostToolUse",
    "SessionStart",
    "UserPromptSubmit",
    "SubagentStart",
];

/// JSON with object keys sorted at every level, compact, non-ASCII kept raw: the bytes Codex
/// hashes (docs/harnesses/facts/codex.md §2).
fn canonical_json(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .into_iter()
                .map(|k| {
                    format!(
                        "{}:{}",
                        serde_json::to_string(k).expect("a string serializes"),
                        canonical_json(&m[k])
                    )
                })
                .collect();
            format!("{{{}}}", items.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical_json).collect::<Vec<_>>().join(",")
        ),
        other => serde_json::to_string(other).expect("a JSON value serializes"),
    }
}

/// Codex's `trusted_hash` of one command handler (docs/harnesses/facts/codex.md §2).
pub fn trust_hash(event: &str, matcher: Option<&str>, handler: &Value) -> String {
    let mut h = serde_json::Map::new();
    h.insert("type".into(), json!("command"));
    h.insert(
        "command".into(),
        handler.get("command").cloned().unwrap_or(Value::Null),
    );
    h.insert(
        "timeout".into(),
        json!(normalized_timeout(
            event,
            handler.get("timeout").and_then(Value::as_u64)
        )),
    );
    h.insert(
        "async".into(),
        json!(
            handler
                .get("async")
                .and_then(Value::as_bool)
                .unwrap_or(false)
        ),
    );
    if let Some(s) = handler.get("statusMessage").filter(|s| !s.is_null()) {
        h.insert("statusMessage".into(), s.clone());
    }
    if let Some(acl) = handler
        .get("additionalContextLimit")
        .and_then(Value::as_u64)
        && acl != 2500
        && EVENTS_WITH_CONTEXT.contains(&event)
    {
        {
            h.insert("additionalContextLimit".into(), json!(acl));
        }
    }
    let mut ident = json!({ "event_name": event_label(event), "hooks": [Value::Object(h)] });
    if let Some(m) = matcher.filter(|_| EVENTS_WITH_MATCHER.contains(&event)) {
        ident["matcher"] = json!(m);
    }
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(canonical_json(&ident).as_bytes()))
    )
}

/// `(state key, hash)` for every spex handler in a hooks document at `path`.
fn spex_trust_entries(path: &Path, doc: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(events) = doc.get("hooks").and_then(Value::as_object) else {
        return out;
    };
    for (event, groups) in events {
        for (gi, group) in groups.as_array().into_iter().flatten().enumerate() {
            if !files::is_spex_group(group) {
                continue;
            }
            let matcher = group.get("matcher").and_then(Value::as_str);
            for (hi, handler) in group["hooks"].as_array().into_iter().flatten().enumerate() {
                let key = format!("{}:{}:{gi}:{hi}", path.display(), event_label(event));
                out.push((key, trust_hash(event, matcher, handler)));
            }
        }
    }
    out
}

/// `(key path, value)` of every entry spex wants in `config.toml`: trust for the main
/// checkout and one `trusted_hash` per spex handler (docs/harnesses/facts/codex.md §2), for the canonical
/// path and for each of its other `spellings`.
///
/// Codex keys hook trust by the hooks file's path as it spells it from the thread's working
/// folder, without resolving symlinks: a thread started in `/x/link` (`codex -C /x/link`,
/// `thread/start {cwd}`) looks up `/x/link/.codex/hooks.json:stop:0:0`, one in `/x/repo`
/// (or in a shell `cd`'d into `/x/link`, whose working folder is resolved) looks up
/// `/x/repo/.codex/hooks.json:stop:0:0`. Project trust is looked up by the resolved path, so
/// one `[projects]` entry covers every spelling (checked with 0.169.0's `hooks/list`).
fn trust_wants(main: &Path, spellings: &[PathBuf], hooks_doc: &Value) -> Vec<Want> {
    let main_key = main.to_string_lossy().into_owned();
    let mut out = vec![Want {
        key: vec!["projects".into(), main_key, "trust_level".into()],
        value: "trusted".into(),
        if_different: "so Codex will not run this project's hooks".into(),
    }];
    for spelling in std::iter::once(main).chain(spellings.iter().map(PathBuf::as_path)) {
        for (key, hash) in spex_trust_entries(&hooks_file(spelling), hooks_doc) {
            out.push(Want {
                key: state_key(key),
                value: hash,
                if_different: "so Codex reports spex's hook modified and does not run it".into(),
            });
        }
    }
    out
}

fn state_key(key: String) -> Vec<String> {
    vec!["hooks".into(), "state".into(), key, "trusted_hash".into()]
}

impl Files for CodexFiles {
    fn contract_file(&self) -> &'static str {
        "AGENTS.md"
    }

    fn generated_dirs(&self) -> &'static [&'static str] {
        &[".agents/skills"]
    }

    fn render_node(&self, node: &SpecNode) -> Vec<(PathBuf, String)> {
        if node.has(Surface::Skill) {
            vec![(
                PathBuf::from(format!(".agents/skills/{}/SKILL.md", node.name)),
                files::render_skill(node),
            )]
        } else {
            Vec::new()
        }
    }

    fn plan_shims(&self, ctx: &ShimCtx, ws: &mut Workspace) -> Result<(), MaterializeError> {
        let hooks_path = hooks_file(&ctx.tree.main);
        let wanted: Vec<(String, Value)> = if ctx.anywhere {
            EVENTS
                .iter()
                .map(|e| {
                    (
                        (*e).to_owned(),
                        files::hook_group(
                            &ctx.hook_command(e),
                            timeout_for(e, ctx.answer_wait_secs),
                        ),
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        let hooks_doc = ws
            .hook_groups(&hooks_path, &wanted, &files::is_spex_group)?
            .map_or(Value::Null, |d| d.value());
        if ctx.here && ctx.anywhere && ctx.tree.root != ctx.tree.main {
            // Codex reads a worktree's hooks from the main checkout only if the worktree has
            // a `.codex/` folder of its own (docs/harnesses/facts/codex.md §1).
            ws.want_dir(&ctx.tree.root.join(".codex"));
        }
        let config = config_file(ctx.env);
        let wanted = if ctx.anywhere {
            trust_wants(&ctx.tree.main, ctx.main_spellings, &hooks_doc)
        } else {
            Vec::new()
        };
        // Before entries were owned by key, spex kept its trust in a comment-fenced block; what
        // it wrote there is recognised by key (the hooks file as it was then names the keys).
        let before = ws
            .read_before(&hooks_path)?
            .and_then(|b| JsonDoc::parse(&b).ok())
            .map_or(Value::Null, |d| d.value());
        let mut claims: Vec<Vec<String>> = trust_wants(&ctx.tree.main, &[], &before)
            .into_iter()
            .map(|w| w.key)
            .collect();
        claims.extend(
            spex_trust_entries(&hooks_path, &hooks_doc)
                .into_iter()
                .map(|(key, _)| state_key(key)),
        );
        let legacy = Legacy {
            syntax: block::HASH,
            id: LEGACY_TRUST_BLOCK.into(),
            claims,
        };
        ws.toml_entries(&config, wanted, Some(legacy))
    }

    fn slash_menu(&self, tree: &Path, env: &Env) -> Vec<SlashEntry> {
        let mut out: Vec<SlashEntry> = BUILTINS
            .iter()
            .map(|n| SlashEntry {
                name: (*n).to_owned(),
                kind: "built-in".into(),
                description: String::new(),
            })
            .collect();
        // Skills are mentioned with `$name` in Codex; listed so a script sees the whole menu.
        let roots = [
            (tree.join(".agents/skills"), "project skill"),
            (tree.join(".codex/skills"), "project skill"),
            (codex_home(env).join("skills"), "user skill"),
        ];
        for (dir, kind) in roots {
            out.extend(
                files::skills_in(&dir, kind)
                    .into_iter()
                    .map(|e| SlashEntry {
                        name: format!("${}", e.name),
                        ..e
                    }),
            );
        }
        out
    }

    fn doctor(&self, ctx: &DoctorCtx) -> Vec<Check> {
        let mut checks = vec![];
        let hooks_path = hooks_file(&ctx.tree.main);
        // The hooks file is shared by every checkout: wanted while any checkout selects Codex.
        checks.push(files::check_shims(
            EVENTS,
            ctx,
            &hooks_path,
            ctx.selected_anywhere,
        ));
        if ctx.selected && !ctx.tree.is_main() && !ctx.tree.root.join(".codex").is_dir() {
            checks.push(Check::new("worktree anchor", Status::Fail, format!("{} has no `.codex/` folder, so Codex loads no project hooks here\nhint: run `spex materialize`", ctx.tree.root.display())));
        }
        if !ctx.selected {
            return checks;
        }
        let Some(bin) = &ctx.binary else {
            return checks;
        };
        // Threads started through another spelling of the checkout look trust up by that one.
        let mut cwds = vec![ctx.tree.root.clone()];
        cwds.extend(ctx.main_spellings.iter().cloned());
        checks.push(match trust::hooks_for(bin, &codex_home(ctx.env), &cwds) {
            Ok(hooks) => hooks_list_check(&hooks, &cwds),
            Err(e) => Check::new(
                "codex hooks/list",
                Status::Warn,
                format!(
                    "could not ask `{} app-server`: {e}",
                    shell_quote(&bin.to_string_lossy())
                ),
            ),
        });
        checks
    }
}

/// The doctor's verdict on `hooks/list` for `cwds`: every spex hook listed, enabled and
/// trusted in each of them.
fn hooks_list_check(hooks: &[rpc::HookEntry], cwds: &[PathBuf]) -> Check {
    let mut ok = 0;
    for cwd in cwds {
        // Named only when there is more than the tree's own path to tell apart.
        let at = if cwds.len() > 1 {
            format!(" in `{}`", cwd.display())
        } else {
            String::new()
        };
        let ours: Vec<_> = hooks
            .iter()
            .filter(|h| h.cwd == *cwd && h.command.as_deref().is_some_and(files::is_spex_command))
            .collect();
        let bad: Vec<String> = ours
            .iter()
            .filter(|h| !(h.trust == TrustStatus::Trusted && h.enabled))
            .map(|h| {
                format!(
                    "{} ({}{})",
                    h.hooks_json_event(),
                    h.trust.as_str(),
                    if h.enabled { "" } else { ", disabled" }
                )
            })
            .collect();
        if ours.is_empty() {
            let whom = if at.is_empty() {
                " for this tree".to_owned()
            } else {
                at
            };
            return Check::new(
                "codex hooks/list",
                Status::Fail,
                format!("Codex lists no spex hooks{whom}\nhint: run `spex materialize`"),
            );
        }
        if ours.len() < EVENTS.len() || !bad.is_empty() {
            return Check::new(
                "codex hooks/list",
                Status::Fail,
                format!(
                    "not trusted or disabled{at}: {}\nhint: run `spex materialize`",
                    bad.join(", ")
                ),
            );
        }
        ok = ours.len();
    }
    let also: Vec<String> = cwds[1..]
        .iter()
        .map(|c| format!("`{}`", c.display()))
        .collect();
    let also = if also.is_empty() {
        String::new()
    } else {
        format!(" (also through {})", also.join(", "))
    };
    Check::new(
        "codex hooks/list",
        Status::Ok,
        format!("{ok} spex hooks enabled and trusted{also}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_match_the_verified_examples() {
        let h = json!({"type": "command", "command": "echo pre-bash", "timeout": 30});
        assert_eq!(
            trust_hash("PreToolUse", Some("Bash"), &h),
            "sha256:9c5b8179ae84c63ce8434a3229ca2d244080c60e343ae3da541bdb9af2d3ca02"
        );
        let h = json!({"type": "command", "command": "echo stop", "timeout": 5, "additionalContextLimit": 2500});
        assert_eq!(
            trust_hash("Stop", None, &h),
            "sha256:09401cceb4f683a7677cb3c8f8172ff1d9d712e977b65f194022bee07678f972"
        );
        let h = json!({"type": "command", "command": "echo ups", "additionalContextLimit": 100});
        assert_eq!(
            trust_hash("UserPromptSubmit", Some("ignored"), &h),
            "sha256:0bee737402a6142a68a9dbb9c9ffe9a1b5ff5551d9308b91573df08d7c4797d6"
        );
    }

    #[test]
    fn labels_are_snake_case() {
        assert_eq!(event_label("PreToolUse"), "pre_tool_use");
        assert_eq!(event_label("Stop"), "stop");
    }
}
