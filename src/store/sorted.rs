//! A session record as `sessions --json` prints it, serialized straight to the output: the
//! record's keys, nested ones included, in sorted order plus `live` and `subagents_running`, the bytes
//! `serde_json::to_value` of the record would print (its maps sort their keys), without
//! building that value: `sessions --all` prints thousands. Owns no state and reads no files.
//!
//! Each type here mirrors one record type field for field, alphabetically, with its
//! `skip_serializing_if`; the tests build every record type in full (no `..Default`), so a
//! new field does not compile until it is added here too.

use std::path::Path;

use serde::Serialize;

use super::session::{
    Answering, Attention, Child, Choice, Declared, ErrorKind, ExitStatus, Flags, Kept, ProcessId,
    Question, Session, Status, Timeout, Turn, TurnState, Usage, UsageCursor, Via,
};

/// A record with its `live` (see `runtime::live`).
#[derive(Debug, Serialize)]
pub struct SortedRecord<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    attended: Option<bool>,
    attention: Option<SortedAttention<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    base_commit: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    boot_id: Option<&'a str>,
    branch: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    children: &'a [Child],
    created_at: &'a str,
    declared: Option<SortedDeclared<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exit_reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exit_status: Option<&'a Kept<ExitStatus>>,
    flags: SortedFlags<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    handle: Option<&'a str>,
    harness: &'a str,
    harness_session_id: Option<&'a str>,
    headline: Option<&'a str>,
    id: &'a str,
    launched_by: &'a super::session::LaunchedBy,
    live: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    observed: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    process: Option<&'a Kept<ProcessId>>,
    project: &'a Path,
    schema: u32,
    seq: u64,
    since: Option<&'a str>,
    source: Option<&'a str>,
    /// Why its state is not to be trusted (its harness version failed `spex check`'s events
    /// promises; computed, like `live`).
    #[serde(skip_serializing_if = "Option::is_none")]
    state_unverified: Option<String>,
    status: Status,
    /// How many of its sub-agents still run (computed, like `live`).
    subagents_running: usize,
    touched: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    transcript: Option<&'a Path>,
    tree: &'a Path,
    turn: Option<SortedTurn<'a>>,
    updated_at: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<&'a Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage_cursor: Option<&'a UsageCursor>,
    #[serde(skip_serializing_if = "Option::is_none")]
    why: Option<&'a str>,
    /// Members a newer spex wrote: after the known ones (in their own order).
    #[serde(flatten)]
    other: &'a serde_json::Map<String, serde_json::Value>,
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Serialize)]
struct SortedAttention<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    answering: Option<&'a Answering>,
    #[serde(skip_serializing_if = "Option::is_none")]
    call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    choices: &'a [Choice],
    #[serde(skip_serializing_if = "Option::is_none")]
    hook: Option<&'a super::session::ProcessId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'a super::session::AttentionKind>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    questions: &'a [Question],
    reason: &'a super::session::AttentionKind,
    since: &'a str,
    text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    turn_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    via: Option<&'a Via>,
    /// Members a newer spex wrote: after the known ones (in their own order).
    #[serde(flatten)]
    other: &'a serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Serialize)]
struct SortedDeclared<'a> {
    at: &'a str,
    note: &'a str,
    state: super::session::DeclaredState,
    /// Members a newer spex wrote: after the known ones (in their own order).
    #[serde(flatten)]
    other: &'a serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Serialize)]
struct SortedFlags<'a> {
    #[serde(skip_serializing_if = "is_zero")]
    attentions: u64,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    completed_calls: &'a [String],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    failed_calls: &'a [(String, i64)],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pending_context: &'a [String],
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    spec_first_done: bool,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    specs_announced: &'a [String],
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stop_gate_asked: bool,
    /// Members a newer spex wrote: after the known ones (in their own order).
    #[serde(flatten)]
    other: &'a serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Serialize)]
struct SortedTurn<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    attempt_failed_at: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    by: Option<&'a str>,
    ended_at: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_kind: Option<ErrorKind>,
    id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    interrupting: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    interrupting_at: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    log_read: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    open_calls: &'a Vec<(String, String)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    partial: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    progress_at: Option<&'a str>,
    prompt: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stalled_at: Option<&'a str>,
    started_at: &'a str,
    state: TurnState,
    #[serde(skip_serializing_if = "Option::is_none")]
    stopped_at: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout: Option<&'a Timeout>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<&'a Usage>,
    /// Members a newer spex wrote: after the known ones (in their own order).
    #[serde(flatten)]
    other: &'a serde_json::Map<String, serde_json::Value>,
}

impl<'a> SortedRecord<'a> {
    #[expect(
        clippy::too_many_lines,
        reason = "one binding per record field: destructured in full, so a field added to the record is not forgotten"
    )]
    pub fn new(s: &'a Session, live: Option<bool>) -> SortedRecord<'a> {
        // Destructured in full, so a field added to a record type is not forgotten here.
        let Session {
            schema,
            id,
            harness,
            harness_session_id,
            project,
            tree,
            branch,
            base_commit,
            launched_by,
            status,
            since,
            source,
            why,
            exit_reason,
            attention,
            turn,
            declared,
            touched,
            headline,
            handle,
            name,
            process,
            boot_id,
            transcript,
            observed,
            attended,
            created_at,
            updated_at,
            seq,
            flags,
            exit_status,
            children,
            usage,
            usage_cursor,
            other,
        } = s;
        let Flags {
            attentions,
            specs_announced,
            spec_first_done,
            stop_gate_asked,
            failed_calls,
            completed_calls,
            pending_context,
            other: flags_other,
        } = flags;
        SortedRecord {
            attended: *attended,
            boot_id: boot_id.as_deref(),
            attention: attention.as_ref().map(
                |Attention {
                     reason,
                     text,
                     since,
                     id,
                     kind,
                     choices,
                     questions,
                     tool,
                     call_id,
                     turn_id,
                     via,
                     answering,
                     hook,
                     other,
                 }| SortedAttention {
                    answering: answering.as_ref(),
                    call_id: call_id.as_deref(),
                    choices,
                    hook: hook.as_ref(),
                    id: id.as_deref(),
                    kind: kind.as_ref(),
                    questions,
                    reason,
                    since,
                    text,
                    tool: tool.as_deref(),
                    turn_id: turn_id.as_deref(),
                    via: via.as_ref(),
                    other,
                },
            ),
            base_commit: base_commit.as_deref(),
            branch: branch.as_deref(),
            children,
            created_at,
            declared: declared.as_ref().map(
                |Declared {
                     state,
                     note,
                     at,
                     other,
                 }| SortedDeclared {
                    at,
                    note,
                    state: *state,
                    other,
                },
            ),
            exit_reason: exit_reason.as_deref(),
            exit_status: exit_status.as_ref(),
            flags: SortedFlags {
                attentions: *attentions,
                completed_calls,
                failed_calls,
                pending_context,
                spec_first_done: *spec_first_done,
                specs_announced,
                stop_gate_asked: *stop_gate_asked,
                other: flags_other,
            },
            handle: handle.as_deref(),
            harness,
            harness_session_id: harness_session_id.as_deref(),
            headline: headline.as_deref(),
            id,
            launched_by,
            live,
            name: name.as_deref(),
            observed: observed.as_deref(),
            process: process.as_ref(),
            project,
            schema: *schema,
            seq: *seq,
            since: since.as_deref(),
            source: source.as_deref(),
            state_unverified: None,
            status: *status,
            subagents_running: s.running_children(),
            touched,
            transcript: transcript.as_deref(),
            tree,
            turn: turn.as_ref().map(
                |Turn {
                     id,
                     state,
                     prompt,
                     started_at,
                     ended_at,
                     note,
                     attempt_failed_at,
                     error_kind,
                     next,
                     partial,
                     open_calls,
                     stopped_at,
                     usage: turn_usage,
                     log_read,
                     progress_at,
                     stalled_at,
                     by,
                     interrupting,
                     interrupting_at,
                     timeout,
                     other,
                 }| SortedTurn {
                    attempt_failed_at: attempt_failed_at.as_deref(),
                    by: by.as_deref(),
                    ended_at: ended_at.as_deref(),
                    error_kind: *error_kind,
                    id: id.as_deref(),
                    interrupting: interrupting.as_deref(),
                    interrupting_at: interrupting_at.as_deref(),
                    log_read: *log_read,
                    next: next.as_deref(),
                    note: note.as_deref(),
                    open_calls,
                    partial: partial.as_deref(),
                    progress_at: progress_at.as_deref(),
                    prompt: prompt.as_deref(),
                    stalled_at: stalled_at.as_deref(),
                    started_at,
                    state: *state,
                    stopped_at: stopped_at.as_deref(),
                    timeout: timeout.as_ref(),
                    usage: turn_usage.as_ref(),
                    other,
                },
            ),
            updated_at,
            usage: usage.as_ref(),
            usage_cursor: usage_cursor.as_ref(),
            why: why.as_deref(),
            other,
        }
    }

    /// The record with why its state is unverified (`runtime::checked::state_unverified`).
    #[must_use]
    pub fn unverified(mut self, why: Option<String>) -> SortedRecord<'a> {
        self.state_unverified = why;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::session::{ChildState, DeclaredState};

    /// What `sessions --json` printed before `SortedRecord`: the record as a value, plus `live`.
    fn as_value(s: &Session, live: Option<bool>) -> serde_json::Value {
        let mut v = serde_json::to_value(s).unwrap();
        let o = v.as_object_mut().unwrap();
        o.insert("live".into(), live.into());
        o.insert("subagents_running".into(), s.running_children().into());
        v
    }

    /// Every field set (no `..Default`: a new field must be added here, and to `SortedRecord`).
    #[expect(
        clippy::too_many_lines,
        reason = "one value per record field, every one set"
    )]
    fn full() -> Session {
        Session {
            schema: 1,
            id: "0000-\"quoted\"-id".into(),
            harness: "alpha".into(),
            harness_session_id: Some("thread-1".into()),
            project: "/p/main".into(),
            tree: "/p/wt ü".into(),
            branch: Some("feature/x".into()),
            base_commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
            launched_by: "spex".into(),
            status: Status::NeedsAttention,
            since: Some("2026-11-23T10:00:01.000Z".into()),
            source: Some("hook PermissionRequest".into()),
            why: Some("because\nof a newline".into()),
            exit_reason: Some("server gone".into()),
            attention: Some(Attention {
                reason: "permission".into(),
                text: "Bash: rm -rf\t/".into(),
                since: "2026-11-23T10:00:01.000Z".into(),
                id: Some("a3".into()),
                kind: Some("permission".into()),
                choices: vec![Choice {
                    id: "deny".into(),
                    label: "No, and tell the agent".into(),
                    message: true,
                }],
                questions: vec![Question {
                    free_text: true,
                    header: Some("Color".into()),
                    id: Some("color".into()),
                    multi_select: true,
                    options: vec!["Red".into()],
                    question: "Which?".into(),
                }],
                tool: Some("Bash".into()),
                call_id: Some("toolu_1".into()),
                turn_id: Some("t1".into()),
                via: Some(Via {
                    how: crate::store::session::AnswerWay::TerminalOnly,
                    why: Some("no host".into()),
                }),
                answering: Some(Answering {
                    at: "2026-11-23T10:00:02.000Z".into(),
                    by: "spex answer".into(),
                    choice: "deny".into(),
                    from: Some("cli".into()),
                    message: Some("no".into()),
                }),
                hook: Some(super::super::session::ProcessId { pid: 42, start: 7 }),
                other: newer("zz_attention"),
            }),
            turn: Some(Turn {
                id: Some("t1".into()),
                state: TurnState::Running,
                prompt: Some("do it 🚀".into()),
                started_at: "2026-11-23T10:00:00.000Z".into(),
                ended_at: Some("2026-11-23T10:00:02.000Z".into()),
                note: Some("http 500".into()),
                attempt_failed_at: Some("2026-11-23T10:00:01.500Z".into()),
                error_kind: Some(ErrorKind::ModelError),
                next: Some("send it again".into()),
                partial: Some("half an answer".into()),
                open_calls: vec![("toolu_1".into(), "Bash".into())],
                stopped_at: Some("2026-11-23T10:00:01.900Z".into()),
                usage: Some(usage()),
                log_read: true,
                progress_at: Some("2026-11-23T10:00:01.700Z".into()),
                stalled_at: Some("2026-11-23T10:00:01.800Z".into()),
                by: Some("spex interrupt".into()),
                interrupting: Some("timeout".into()),
                interrupting_at: Some("2026-11-23T10:00:02.000Z".into()),
                timeout: Some(Timeout {
                    action: "interrupt".into(),
                    budget_ms: 1000,
                    elapsed_ms: 2000,
                    interrupt_sent_at: Some("2026-11-23T10:00:02.000Z".into()),
                }),
                other: newer("zz_turn"),
            }),
            declared: Some(Declared {
                state: DeclaredState::Asking,
                note: "which one?".into(),
                at: "2026-11-23T10:00:03.000Z".into(),
                other: newer("zz_declared"),
            }),
            touched: vec!["src/a.rs".into(), "b.md".into()],
            headline: Some("a headline".into()),
            handle: Some("9289b".into()),
            name: Some("fix-login".into()),
            process: Some(Kept {
                known: ProcessId {
                    pid: 42,
                    start: 123_456,
                },
                other: newer("zz_process"),
            }),
            boot_id: Some("7c4b2f0e-2d1a-4a5e-9b1e-0c6f3d2a8e11".into()),
            transcript: Some("/h/.agent/rollout.jsonl".into()),
            observed: Some("busy".into()),
            attended: Some(false),
            created_at: "2026-11-23T09:59:59.000Z".into(),
            updated_at: "2026-11-23T10:00:03.000Z".into(),
            seq: u64::MAX,
            flags: Flags {
                specs_announced: vec![".spec/a.md".into()],
                spec_first_done: true,
                stop_gate_asked: true,
                failed_calls: vec![("call_1".into(), -3)],
                completed_calls: vec!["call_0".into()],
                attentions: 3,
                pending_context: vec!["read the spec".into()],
                other: newer("zz_flags"),
            },
            exit_status: Some(Kept {
                known: ExitStatus {
                    code: Some(1),
                    signal: None,
                },
                other: newer("zz_exit_status"),
            }),
            children: vec![Child {
                agent_type: Some("general-purpose".into()),
                attempt_failed_at: Some("2026-11-23T10:00:01.200Z".into()),
                ended_at: Some("2026-11-23T10:00:01.400Z".into()),
                error: Some("API Error: 400".into()),
                id: "a26855bad8382405a".into(),
                open_calls: vec![("toolu_2".into(), "Read".into())],
                started_at: "2026-11-23T10:00:01.100Z".into(),
                state: ChildState::Failed,
                summary: Some("one line".into()),
                turn_id: Some("t1".into()),
                usage: Some(usage()),
                other: newer("zz_child"),
            }],
            usage: Some(usage()),
            usage_cursor: Some(UsageCursor {
                done: true,
                last: Some(("msg_1".into(), usage())),
                offset: 4096,
                other: newer("zz_usage_cursor"),
            }),
            other: newer("zz_record"),
        }
    }

    fn usage() -> Usage {
        Usage {
            cache_write_tokens: 3,
            cached_input_tokens: 5,
            input_tokens: 19,
            model: Some("model-x".into()),
            output_tokens: 7,
            reasoning_tokens: 2,
            requests: 1,
            other: newer("zz_usage"),
        }
    }

    /// A member a newer spex wrote, named to sort after the known ones (where `SortedRecord`
    /// prints it).
    fn newer(key: &str) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert(key.into(), serde_json::json!({"b": [1, "two"], "a": null}));
        m
    }

    #[test]
    fn prints_the_bytes_the_record_as_a_value_prints() {
        let full = full();
        // The optional parts each present alone, the rest left out or empty.
        let turn = Session {
            turn: full.turn.clone().map(|t| Turn {
                note: None,
                attempt_failed_at: None,
                error_kind: None,
                next: None,
                partial: None,
                open_calls: Vec::new(),
                stopped_at: None,
                usage: None,
                log_read: false,
                progress_at: None,
                stalled_at: None,
                by: None,
                interrupting: None,
                interrupting_at: None,
                timeout: None,
                other: serde_json::Map::new(),
                ..t
            }),
            ..Session::default()
        };
        let declared = Session {
            status: Status::Exited,
            declared: full.declared.clone(),
            ..Session::default()
        };
        let flags = Session {
            flags: Flags {
                spec_first_done: true,
                ..Flags::default()
            },
            ..Session::default()
        };
        for s in [&full, &Session::default(), &turn, &declared, &flags] {
            for live in [None, Some(true), Some(false)] {
                let rows = [SortedRecord::new(s, live), SortedRecord::new(s, live)];
                let values = [as_value(s, live), as_value(s, live)];
                assert_eq!(
                    serde_json::to_string_pretty(&rows).unwrap(),
                    serde_json::to_string_pretty(&values).unwrap(),
                );
                assert_eq!(
                    serde_json::to_string(&rows[0]).unwrap(),
                    serde_json::to_string(&values[0]).unwrap(),
                );
            }
        }
    }
}
