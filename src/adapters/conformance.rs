//! The checks every adapter passes, run over the registry, so a harness added to `ALL` gets
//! them without a line of its own: its identity well-formed and unique, its captured payloads
//! decoding to the events their names say, its answers encoded as its harness accepts them,
//! its hook shims calling `spex dispatch <id>`, and its stated capabilities matching the facets
//! it offers. What one harness does in particular is tested beside its adapter.

use std::path::PathBuf;

use serde_json::Value;

use super::{all, lookup, payloads};
use crate::env::Env;
use crate::repo::Tree;
use crate::seam::Harness;
use crate::seam::edit::owned::Owned;
use crate::seam::edit::workspace::Workspace;
use crate::seam::event::{Answer, Kind, Reply};
use crate::seam::files::ShimCtx;
use crate::store::answers::Posted;

/// The hook events captured payloads are named after, and what each may decode to: a payload
/// file `<Event>[.<what>].json` must decode to one of its event's kinds. A harness whose
/// events are new to spex adds them here, saying what each means.
const EVENTS: &[(&str, &[Kind])] = &[
    ("SessionStart", &[Kind::SessionStart]),
    ("SessionEnd", &[Kind::SessionEnded]),
    ("UserPromptSubmit", &[Kind::PromptSubmitted]),
    ("BeforeAgent", &[Kind::PromptSubmitted]),
    ("PreToolUse", &[Kind::ToolStarted]),
    ("BeforeTool", &[Kind::ToolStarted]),
    ("PostToolUse", &[Kind::ToolCompleted]),
    ("PostToolUseFailure", &[Kind::ToolFailed]),
    ("AfterTool", &[Kind::ToolCompleted, Kind::ToolFailed]),
    ("PermissionRequest", &[Kind::PermissionRequest]),
    (
        "Notification",
        &[
            Kind::IdleNotice,
            Kind::AttentionNotice,
            Kind::PermissionRequest,
        ],
    ),
    ("Stop", &[Kind::TurnCompleted]),
    ("StopFailure", &[Kind::TurnFailed]),
    ("AfterAgent", &[Kind::TurnCompleted, Kind::TurnFailed]),
    ("Interrupt", &[Kind::TurnInterrupted]),
    ("SubagentStart", &[Kind::SubagentStarted]),
    ("SubagentStop", &[Kind::SubagentStopped]),
    ("PreModelRequest", &[Kind::ModelRequestStarted]),
    (
        "PostModelRequest",
        &[Kind::ModelRequestCompleted, Kind::ModelRequestFailed],
    ),
    // Events spex binds nothing to: captured so a payload of theirs is known not to move a
    // session.
    ("InstructionsLoaded", &[Kind::Other]),
    ("MessageDisplay", &[Kind::Other]),
    ("UserPromptExpansion", &[Kind::Other]),
    ("PreCompact", &[Kind::Other]),
    ("PostCompact", &[Kind::Other]),
    ("PreCompress", &[Kind::Other]),
    ("PostToolBatch", &[Kind::Other]),
    ("WorktreeCreate", &[Kind::Other]),
    ("BeforeModel", &[Kind::Other]),
    ("AfterModel", &[Kind::Other]),
    ("BeforeToolSelection", &[Kind::Other]),
];

/// Terminal titles a harness whose title summarizes its session would read a summary from.
const TITLES: &[&str] = &["✳ Fix the failing test", "⠐ Fix the failing test"];

/// The captured payloads of `h`: `(file stem, event, payload)`, sorted by name.
fn fixtures(h: &dyn Harness) -> Vec<(String, String, Value)> {
    payloads::seeds()
        .into_iter()
        .filter(|s| s.harness == h.id())
        .map(|s| (s.name, s.event, s.payload))
        .collect()
}

/// An environment with every variable an adapter reads named and unset, as `dispatch` reads it.
fn unset_env() -> Env {
    Env {
        vars: super::env_vars().map(|name| (name, None)).collect(),
        ..Env::default()
    }
}

fn is_id(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

fn is_var(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

#[test]
fn ids_and_aliases_are_unique_and_resolve() {
    let mut ids: Vec<&str> = all().iter().map(|h| h.id()).collect();
    ids.extend(
        all()
            .iter()
            .flat_map(|h| h.identity().aliases.iter().copied()),
    );
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n, "ids and aliases are unique");
    for id in ids {
        assert!(lookup(id).is_some(), "{id} resolves");
    }
    for h in all() {
        assert_eq!(lookup(h.id()).map(<dyn Harness>::id), Some(h.id()));
        for alias in h.identity().aliases {
            assert_eq!(lookup(alias).map(<dyn Harness>::id), Some(h.id()));
        }
    }
    assert_eq!(lookup("plugin").map(<dyn Harness>::id), Some("claude"));
    assert!(lookup("vim").is_none());
}

#[test]
fn every_identity_is_well_formed() {
    for h in all() {
        let i = h.identity();
        let id = i.id;
        assert!(
            is_id(id),
            "{id}: an id is lower-case letters, digits and `-`"
        );
        for alias in i.aliases {
            assert!(is_id(alias), "{id}: alias `{alias}`");
        }
        assert!(
            !i.binary.is_empty() && !i.binary.contains(['/', ' ']),
            "{id}: binary `{}` is a bare executable name",
            i.binary
        );
        assert!(
            i.version.split('.').count() >= 2
                && i.version
                    .split('.')
                    .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
            "{id}: version `{}` is dotted numbers",
            i.version
        );
        // `<binary> --version` prints the number alone, first or after the program's name.
        let outputs = [
            i.version.to_owned(),
            format!("{} (x)", i.version),
            format!("{} {}", i.binary, i.version),
            format!("{}-cli {}", i.binary, i.version),
        ];
        assert!(
            outputs
                .iter()
                .any(|o| (i.parse_version)(o).as_deref() == Some(i.version)),
            "{id}: parse_version reads the pinned version from none of {outputs:?}"
        );
        let mut vars: Vec<&str> = i
            .session_env_var
            .into_iter()
            .chain(i.env_vars.iter().copied())
            .collect();
        assert!(vars.iter().all(|v| is_var(v)), "{id}: {vars:?}");
        let n = vars.len();
        vars.sort_unstable();
        vars.dedup();
        assert_eq!(vars.len(), n, "{id}: variables named twice");
    }
}

#[test]
fn every_harness_has_captured_payloads_and_every_payload_folder_a_harness() {
    for h in all() {
        // Counted as the checks below read them (the seeds of the corpus), so a folder of
        // anything else cannot let those checks loop over nothing.
        assert!(
            !fixtures(*h).is_empty(),
            "no payload fixtures in {}/{}",
            payloads::PAYLOADS,
            h.id()
        );
    }
    for folder in payloads::harnesses() {
        assert!(
            all().iter().any(|h| h.id() == folder),
            "{}/{folder}: payloads of no registered harness",
            payloads::PAYLOADS
        );
    }
}

#[test]
fn every_payload_decodes_to_the_event_its_name_says() {
    for h in all() {
        let wire = h
            .wire()
            .unwrap_or_else(|| panic!("{}: no hook wire", h.id()));
        for (name, event, payload) in fixtures(*h) {
            let what = format!("{}/{name}.json", h.id());
            if let Some(said) = payload.get("hook_event_name") {
                assert_eq!(said, event.as_str(), "{what}: named for another event");
            }
            let Some(&(_, kinds)) = EVENTS.iter().find(|(e, _)| *e == event) else {
                panic!("{what}: `{event}` is not in EVENTS: say what it means");
            };
            let ev = wire.decode(&event, &payload);
            assert!(
                ev.kind.is_some_and(|k| kinds.contains(&k)),
                "{what}: decoded to {:?}, not one of {kinds:?}",
                ev.kind
            );
        }
    }
}

/// Why `reply` to `answer` is not what the harness takes, if it is not.
fn answer_problem(reply: &Reply, answer: &Answer, takes_context: bool) -> Option<String> {
    if let Some(p) = payloads::reply_problem(
        Some(reply.exit_code),
        reply.stdout.as_bytes(),
        reply.stderr.as_bytes(),
    ) {
        return Some(p);
    }
    let said = format!("{}{}", reply.stdout, reply.stderr);
    if answer.is_empty() && reply.exit_code != 0 {
        return Some("nothing to say, yet not exit 0".into());
    }
    if let Some(reason) = &answer.block
        && !said.contains(reason.as_str())
    {
        return Some(format!("the block's reason `{reason}` is not in the reply"));
    }
    if takes_context
        && answer.block.is_none()
        && let Some(missing) = answer.context.iter().find(|c| !said.contains(c.as_str()))
    {
        return Some(format!("the context `{missing}` is not in the reply"));
    }
    None
}

#[test]
fn every_answer_is_encoded_as_the_harness_takes_it() {
    let answers = [
        Answer::default(),
        Answer {
            context: vec!["spec: docs/auth.md governs src/auth".into()],
            block: None,
        },
        Answer {
            context: vec!["spec: docs/auth.md governs src/auth".into()],
            block: Some("blocked: write the spec first".into()),
        },
    ];
    for h in all() {
        let wire = h
            .wire()
            .unwrap_or_else(|| panic!("{}: no hook wire", h.id()));
        for (name, event, _) in fixtures(*h) {
            for answer in &answers {
                let reply = wire.encode(&event, answer);
                if let Some(p) = answer_problem(&reply, answer, wire.takes_context(&event)) {
                    panic!(
                        "{}/{name}.json answering {answer:?}: {p}\n{reply:?}",
                        h.id()
                    );
                }
            }
        }
    }
}

#[test]
fn every_waiting_hook_prints_an_answer_the_harness_takes() {
    let env = unset_env();
    for h in all() {
        let Some(answering) = h.answering() else {
            continue;
        };
        let mut printed = 0;
        for (name, event, payload) in fixtures(*h) {
            if !answering.hook_waits(&event, &env) && !answering.away_waits(&event, &env, &|| true)
            {
                continue;
            }
            for (choice, message) in [("allow", None), ("deny", Some("use the staging database"))] {
                let posted = Posted {
                    attention: "a1".into(),
                    choice: choice.into(),
                    message: message.map(str::to_owned),
                    ..Posted::default()
                };
                let Some(reply) = answering.hook_reply(&event, &payload, &posted) else {
                    continue;
                };
                printed += 1;
                let said = format!("{}{}", reply.stdout, reply.stderr);
                let problem = payloads::reply_problem(
                    Some(reply.exit_code),
                    reply.stdout.as_bytes(),
                    reply.stderr.as_bytes(),
                )
                .or_else(|| {
                    message
                        .filter(|m| !said.contains(m))
                        .map(|m| format!("the message `{m}` is not in the reply"))
                });
                if let Some(p) = problem {
                    panic!("{}/{name}.json answered `{choice}`: {p}\n{reply:?}", h.id());
                }
            }
        }
        assert_eq!(
            printed > 0,
            h.capabilities().answers.hook,
            "{}: a waiting hook answered {printed} captured payloads, yet its capabilities say hook: {}",
            h.id(),
            h.capabilities().answers.hook
        );
    }
}

/// The text of every file `h`'s shims are planned into, for a tree that selects it.
fn planned_shims(h: &dyn Harness, spex: &str) -> Vec<(PathBuf, String)> {
    let dir = tempfile::tempdir().unwrap();
    let base = fs_err::canonicalize(dir.path()).unwrap();
    let (repo, home) = (base.join("repo"), base.join("home"));
    fs_err::create_dir_all(repo.join(".git")).unwrap();
    fs_err::create_dir_all(&home).unwrap();
    let tree = Tree {
        root: repo.clone(),
        main: repo.clone(),
        git_dir: repo.join(".git"),
        common_dir: repo.join(".git"),
    };
    let env = Env {
        home: Some(home),
        ..unset_env()
    };
    let ctx = ShimCtx {
        id: h.id(),
        env: &env,
        tree: &tree,
        main_spellings: &[],
        here: true,
        anywhere: true,
        spex,
        nodes: &[],
        answer_wait_secs: 30,
        status_line: false,
    };
    let files = h
        .files()
        .unwrap_or_else(|| panic!("{}: no files facet", h.id()));
    let mut ws = Workspace::new(Owned::default());
    files
        .plan_shims(&ctx, &mut ws)
        .unwrap_or_else(|e| panic!("{}: planning its shims: {e}", h.id()));
    ws.files
        .iter()
        .filter_map(|(path, e)| {
            let text = String::from_utf8_lossy(e.after.as_deref()?).into_owned();
            Some((path.clone(), text))
        })
        .collect()
}

#[test]
fn every_shim_calls_spex_dispatch_with_its_harness_id() {
    let spex = "/opt/spex-test/bin/spex";
    for h in all() {
        let files = planned_shims(*h, spex);
        let want = format!("{spex} dispatch {} ", h.id());
        let mut commands = 0;
        for (path, text) in &files {
            for (at, _) in text.match_indices(" dispatch ") {
                let from = at.saturating_sub(spex.len());
                assert!(
                    text[from..].starts_with(&want),
                    "{}: {} holds a dispatch that is not `{want}<event>`: {:.120}",
                    h.id(),
                    path.display(),
                    &text[from..]
                );
                commands += 1;
            }
        }
        assert!(
            commands > 0,
            "{}: no shim calls `{want}<event>` in {:?}",
            h.id(),
            files.iter().map(|(p, _)| p).collect::<Vec<_>>()
        );
    }
}

#[test]
fn stated_capabilities_agree_with_the_facets_offered() {
    let env = unset_env();
    for h in all() {
        let id = h.id();
        let c = h.capabilities();
        assert_eq!(
            c.hosted_terminal,
            h.terminal().is_some(),
            "{id}: hosted_terminal"
        );
        assert_eq!(c.server, h.server().is_some(), "{id}: server");
        assert_eq!(c.evidence, h.evidence().is_some(), "{id}: evidence");
        let a = c.answers;
        assert_eq!(
            a.keys || a.hook || a.server,
            h.answering().is_some(),
            "{id}: answers"
        );
        assert!(
            !a.keys || c.hosted_terminal,
            "{id}: keys need a hosted terminal"
        );
        assert!(!a.server || c.server, "{id}: answers on a server need one");
        let fixtures = fixtures(*h);
        let waits = h.answering().is_some_and(|ans| {
            fixtures.iter().any(|(_, event, _)| {
                ans.hook_waits(event, &env) || ans.away_waits(event, &env, &|| true)
            })
        });
        assert_eq!(a.hook, waits, "{id}: answers.hook");
        let wire = h.wire().unwrap_or_else(|| panic!("{id}: no hook wire"));
        let idle = fixtures
            .iter()
            .any(|(_, event, p)| wire.decode(event, p).kind == Some(Kind::IdleNotice));
        assert_eq!(
            c.idle_notification, idle,
            "{id}: idle_notification (a captured payload decodes to an idle notice)"
        );
        let summarized = h
            .terminal()
            .is_some_and(|t| TITLES.iter().any(|title| t.title_summary(title).is_some()));
        assert_eq!(c.title_summary, summarized, "{id}: title_summary");
    }
}
