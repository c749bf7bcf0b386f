//! Codex (0.169.0): hooks in the MAIN checkout's `.codex/hooks.json` (Codex reads a linked
//! worktree's project hooks from there, provided the worktree has a `.codex/` folder), project
//! and per-hook trust in `$CODEX_HOME/config.toml`, contract in `AGENTS.md`, skills under
//! `.agents/skills`. No agent or custom-command files: 0.169.0 loads neither. `rpc` speaks to
//! `codex app-server`; `trust` asks it which hooks it trusts.

mod answer;
mod evidence;
pub mod rpc;
mod server;
pub mod trust;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::env::Env;
use crate::seam::edit::json_edit::JsonDoc;
use crate::seam::edit::toml_entries::{Legacy, Want};
use crate::seam::edit::workspace::Workspace;
use crate::seam::edit::{MaterializeError, block, shell_quote};
use crate::seam::event::{Answer, HookEvent, Kind, Reply};
use crate::seam::{Check, DoctorCtx, Harness, ShimCtx, SlashEntry, Status};
use crate::spec::{SpecNode, Surface};
use crate::store::session::Usage;
use rpc::TrustStatus;

pub struct Codex;

/// Events spex binds; all accepted by 0.169.0 (facts/codex.md §1).
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

/// Built-in `/` commands of 0.169.0, read from the TUI popup (facts/codex.md §6).
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

/// Where Codex keeps its user-level state.
const HOME_VAR: &str = "CODEX_HOME";

/// `$CODEX_HOME`, else `~/.codex`.
fn codex_home(env: &Env) -> PathBuf {
    env.path_var(HOME_VAR)
        .unwrap_or_else(|| env.home_or_root().join(".codex"))
}

fn config_file(env: &Env) -> PathBuf {
    codex_home(env).join("config.toml")
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
const EVENTS_WITH_CONTEXT: &[&str] = &[
    "PreToolUse",
    "PostToolUse",
    "SessionStart",
    "UserPromptSubmit",
    "SubagentStart",
];

/// JSON with object keys sorted at every level, compact, non-ASCII kept raw: the bytes Codex
/// hashes (facts/codex.md §2).
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

/// Codex's `trusted_hash` of one command handler (facts/codex.md §2).
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
            if !super::is_spex_group(group) {
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
/// checkout and one `trusted_hash` per spex handler (facts/codex.md §2), for the canonical
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

impl Harness for Codex {
    fn id(&self) -> &'static str {
        "codex"
    }

    fn binary_name(&self) -> &'static str {
        "codex"
    }

    fn pinned_version(&self) -> &'static str {
        "0.169.0"
    }

    fn parse_version(&self, output: &str) -> Option<String> {
        // `codex-cli 0.169.0`
        output.split_whitespace().nth(1).map(str::to_owned)
    }

    fn session_env_var(&self) -> Option<&'static str> {
        Some("CODEX_THREAD_ID")
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &[HOME_VAR, crate::seam::server::SERVER_MARK]
    }

    fn hook_events(&self) -> &'static [&'static str] {
        EVENTS
    }

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
                super::render_skill(node),
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
                        super::hook_group(
                            &ctx.hook_command(self.id(), e),
                            timeout_for(e, ctx.answer_wait_secs),
                        ),
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        let hooks_doc = ws
            .hook_groups(&hooks_path, &wanted, &super::is_spex_group)?
            .map_or(Value::Null, |d| d.value());
        if ctx.here && ctx.anywhere && ctx.tree.root != ctx.tree.main {
            // Codex reads a worktree's hooks from the main checkout only if the worktree has
            // a `.codex/` folder of its own (facts/codex.md §1).
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
                super::skills_in(&dir, kind)
                    .into_iter()
                    .map(|e| SlashEntry {
                        name: format!("${}", e.name),
                        ..e
                    }),
            );
        }
        out
    }

    fn decode(&self, event: &str, payload: &Value) -> HookEvent {
        Codex::decode_payload(event, payload)
    }

    fn encode(&self, event: &str, answer: &Answer) -> Reply {
        Codex::encode_answer(event, answer)
    }

    fn hook_env_names_session(&self) -> bool {
        false
    }

    fn server(&self) -> Option<&'static dyn crate::seam::server::SessionServer> {
        Some(&server::CodexServer)
    }

    fn answering(&self) -> Option<&'static dyn crate::seam::answer::Answering> {
        Some(&answer::CodexAnswering)
    }

    fn ready_for_input(&self, screen: &str) -> bool {
        // The composer's footer while it is empty (0.169.0, seen live); a dialog (trust, model
        // upgrade) shows its own footer instead.
        screen.contains(COMPOSER_FOOTER)
    }

    fn screen_activity(&self, title: &str, screen: &str) -> Option<crate::seam::Activity> {
        screen_activity(title, screen)
    }

    fn observe(
        &self,
        _env: &Env,
        sessions: &[&crate::store::session::Session],
    ) -> Vec<(usize, crate::seam::evidence::Evidence)> {
        evidence::observe(sessions)
    }

    fn doctor(&self, ctx: &DoctorCtx) -> Vec<Check> {
        let mut checks = vec![super::check_binary(self, ctx)];
        let hooks_path = hooks_file(&ctx.tree.main);
        // The hooks file is shared by every checkout: wanted while any checkout selects Codex.
        checks.push(super::check_shims(
            self,
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
            .filter(|h| h.cwd == *cwd && h.command.as_deref().is_some_and(super::is_spex_command))
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

/// The footer under Codex's empty composer (0.169.0).
const COMPOSER_FOOTER: &str = "? for shortcuts";

/// What the Codex TUI's screen says it is doing (0.169.0, seen live under spex's host and in
/// facts/answering-codex.md): an approval dialog offers "Yes, proceed (y)" and "No, and tell
/// Codex what to do differently (esc)"; while a turn runs the title starts with a braille
/// spinner and the status line says "esc to interrupt"; the empty composer's footer is idle.
fn screen_activity(title: &str, screen: &str) -> Option<crate::seam::Activity> {
    use crate::seam::Activity;
    if screen.contains("Yes, proceed (y)") || screen.contains("tell Codex what to do differently") {
        Some(Activity::Waiting)
    } else if title
        .chars()
        .next()
        .is_some_and(|c| ('\u{2800}'..='\u{28ff}').contains(&c))
        || screen.contains("esc to interrupt")
    {
        Some(Activity::Busy)
    } else if screen.contains(COMPOSER_FOOTER) {
        Some(Activity::Idle)
    } else {
        None
    }
}

#[cfg(test)]
mod screen_tests {
    use super::*;
    use crate::seam::Activity;

    #[test]
    fn the_tui_screen_says_what_codex_does() {
        let idle =
            "› Ask Codex to do anything\n  GPT-5.5 default · /r · spex main\n  ? for shortcuts";
        let working =
            "• Working (0s • esc to interrupt)\n› Ask Codex to do anything\n  ? for shortcuts";
        let dialog = "Would you like to run the following command?\n› 1. Yes, proceed (y)\n  3. No, and tell Codex what to do differently (esc)";
        for (title, screen, want) in [
            ("spex main | repo", idle, Some(Activity::Idle)),
            ("⠋ spex main | repo", idle, Some(Activity::Busy)),
            ("spex main | repo", working, Some(Activity::Busy)),
            ("⠋ spex main | repo", dialog, Some(Activity::Waiting)),
            ("repo", "Loading…", None),
        ] {
            assert_eq!(screen_activity(title, screen), want, "{title:?} {screen:?}");
        }
    }
}

/// Every file an `apply_patch` envelope touches (added, updated, deleted, or moved to).
pub fn patch_files(patch: &str) -> Vec<String> {
    const HEADS: [&str; 4] = [
        "*** Add File: ",
        "*** Update File: ",
        "*** Delete File: ",
        "*** Move to: ",
    ];
    let mut out: Vec<String> = Vec::new();
    for line in patch.lines() {
        let line = line.trim_end_matches('\r');
        if let Some(path) = HEADS.iter().find_map(|h| line.strip_prefix(h)) {
            let path = path.trim().to_owned();
            if !path.is_empty() && !out.contains(&path) {
                out.push(path);
            }
        }
    }
    out
}

/// The exit code in a tool response that starts with `Exit code: N`.
fn response_exit_code(resp: &Value) -> Option<i64> {
    let text = resp.as_str()?;
    text.lines()
        .next()?
        .strip_prefix("Exit code: ")?
        .trim()
        .parse()
        .ok()
}

/// Codex's spelling of the shared wire format.
const WIRE: super::Wire = super::Wire {
    turn_key: "turn_id",
    turn_key_names_turn: true,
    ask_tool: "request_user_input",
};

impl Codex {
    fn decode_payload(event: &str, p: &Value) -> HookEvent {
        use super::str_field as s;
        let input = p.get("tool_input").cloned().unwrap_or(Value::Null);
        let edits = match s(p, "tool_name").as_deref() {
            Some("apply_patch") => {
                let patch = s(&input, "command")
                    .or_else(|| s(&input, "input"))
                    .or_else(|| input.as_str().map(str::to_owned));
                patch.map(|p| patch_files(&p)).unwrap_or_default()
            }
            Some("Write" | "Edit") => s(&input, "file_path").into_iter().collect(),
            _ => Vec::new(),
        };
        let mut ev = super::decode_shared(event, p, &WIRE, edits);
        ev.kind = Some(match (event, ev.kind) {
            // Only an `Exit code: N` line tells a failure apart (apply_patch has it; Bash does not).
            ("PostToolUse", _) => match p.get("tool_response").and_then(response_exit_code) {
                Some(code) if code != 0 => {
                    ev.error = Some(format!("exit code {code}"));
                    Kind::ToolFailed
                }
                _ => Kind::ToolCompleted,
            },
            (_, Some(kind)) => kind,
            ("PermissionRequest", None) => {
                ev.attention = Some(super::permission_attention(&ev, &WIRE, &input, |input| {
                    let command = s(input, "command").unwrap_or_else(|| input.to_string());
                    match s(input, "description") {
                        Some(d) if !d.is_empty() => format!("{command} ({d})"),
                        _ => command,
                    }
                }));
                ev.ask = Some(answer::ask(ev.tool.as_deref(), &input));
                Kind::PermissionRequest
            }
            ("Interrupt", None) => Kind::TurnInterrupted,
            ("PreModelRequest", None) => Kind::ModelRequestStarted,
            // Fires once per reconnect attempt; a failed one may be followed by a retry
            // (facts/codex.md §8), so it is not the end of the turn.
            ("PostModelRequest", None) => {
                if s(p, "status").as_deref() == Some("failed") {
                    ev.error = Some(s(p, "error").unwrap_or_else(|| "model request failed".into()));
                    Kind::ModelRequestFailed
                } else {
                    ev.usage = p.get("token_usage").filter(|u| u.is_object()).map(|u| {
                        let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
                        // `input_tokens` counts the cached ones too (seen live: 13 in, 4 cached).
                        Usage {
                            cache_write_tokens: n("cache_write_input_tokens"),
                            cached_input_tokens: n("cached_input_tokens"),
                            input_tokens: n("input_tokens"),
                            model: s(p, "model"),
                            output_tokens: n("output_tokens"),
                            reasoning_tokens: n("reasoning_output_tokens"),
                            requests: 1,
                            other: serde_json::Map::new(),
                        }
                    });
                    Kind::ModelRequestCompleted
                }
            }
            _ => Kind::Other,
        });
        ev
    }

    fn encode_answer(event: &str, answer: &Answer) -> Reply {
        if let Some(reason) = super::block_text(answer) {
            // Exit 2 + stderr blocks PreToolUse, UserPromptSubmit, PostToolUse and Stop alike.
            return Reply {
                stderr: reason,
                exit_code: 2,
                ..Reply::default()
            };
        }
        if answer.context.is_empty() || !EVENTS_WITH_CONTEXT.contains(&event) {
            return Reply::default();
        }
        super::context_reply(event, &answer.context)
    }
}

#[cfg(test)]
mod patch_tests {
    use super::*;

    #[test]
    fn patch_names_every_file() {
        let patch = "*** Begin Patch\n*** Add File: a.txt\n+x\n*** Update File: src/b.rs\n*** Move to: src/c.rs\n@@\n-a\n+b\n*** Delete File: d.txt\n*** End Patch\n";
        assert_eq!(
            patch_files(patch),
            vec!["a.txt", "src/b.rs", "src/c.rs", "d.txt"]
        );
    }
}
