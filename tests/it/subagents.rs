//! Sub-agents as children of their parent's turn, and usage per turn and per session, with the
//! REAL Claude Code and Codex binaries against the fake model servers (which report known
//! token counts). Needs `scripts/install-peers.sh`; fails, never skips.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::real_sessions::{ClaudeSession, CodexRig, Perm, materialize, wait_until};
use crate::support::fake_anthropic::{self, FakeAnthropic, PLAIN_ANSWER};
use crate::support::fake_responses;
use crate::support::world::{World, assert_grammar};

const SETTLE: Duration = Duration::from_mins(1);

/// `spex show <id> --json`'s session (the readers fold the harness's evidence in first).
fn shown(w: &World, id: &str) -> Value {
    let out = w.ok(&w.repo, &["show", id, "--json"]);
    serde_json::from_str::<Value>(&out).unwrap()["session"].clone()
}

/// Polls `show --json` until `pred` holds.
fn show_until(w: &World, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let end = Instant::now() + SETTLE;
    loop {
        let s = shown(w, id);
        if pred(&s) {
            return s;
        }
        assert!(Instant::now() < end, "{what}: {s:#}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn children(s: &Value) -> Vec<Value> {
    s["children"].as_array().cloned().unwrap_or_default()
}

fn the_child<'a>(kids: &'a [Value], state: &str, diag: &dyn Fn() -> String) -> &'a Value {
    let found: Vec<&Value> = kids.iter().filter(|c| c["state"] == state).collect();
    assert_eq!(found.len(), 1, "one {state} sub-agent\n{}", diag());
    found[0]
}

/// `{input, cached, cache_write, output, requests}` of a usage object as spex records it.
fn counts(u: &Value) -> [u64; 5] {
    let n = |k: &str| u[k].as_u64().unwrap_or(0);
    [
        n("input_tokens"),
        n("cached_input_tokens"),
        n("cache_write_tokens"),
        n("output_tokens"),
        n("requests"),
    ]
}

/// Claude starts two sub-agents in one message (the Agent tool): one answers, the other's model
/// request fails (Claude fires `StopFailure` with the sub-agent's `agent_id`, then the parent
/// goes on). The parent turn completes and says one of its two sub-agents failed; the failure
/// is the child's, not the parent's. The turn's usage (read from the transcript by the
/// readers) is what Claude itself reports for the turn and what the fake answered.
#[test]
fn claude_turn_with_a_sub_agent_that_completes_and_one_that_fails() {
    let w = World::new();
    materialize(&w);
    let fake = FakeAnthropic::start();
    let mut session = ClaudeSession::start(&w, &fake, Perm::Bypass);
    let id = session.id.clone();
    let result = session.turn(&w, "Please delegate twice. USE_AGENTS2");
    let (_, _) = wait_until(&w, &id, SETTLE, |r, _| r["turn"]["state"] != "running")
        .unwrap_or_else(|d| panic!("turn never ended\n{d}\n{}", session.diag(&w)));
    // Claude may write the turn's last message to its transcript a moment after its Stop hook:
    // the readers count it once it is there.
    let s = show_until(&w, &id, "the turn's two requests never counted", |s| {
        s["turn"]["usage"]["requests"] == 2
    });
    let show = w.ok(&w.repo, &["show", &id]);
    let table = w.ok(&w.repo, &["sessions"]);
    let transcript =
        std::fs::read_to_string(s["transcript"].as_str().unwrap_or_default()).unwrap_or_default();
    let diag = || {
        format!(
            "transcript:\n{transcript}\nresult {result}\nshow:\n{show}\nsessions:\n{table}\nfake: {:?}\n{}",
            fake.request_lines(),
            session.diag(&w)
        )
    };
    assert_eq!(s["turn"]["state"], "completed", "{}", diag());
    assert!(s["attention"].is_null(), "{}", diag());
    let kids = children(&s);
    assert_eq!(kids.len(), 2, "{}", diag());
    for c in &kids {
        assert_eq!(c["turn_id"], s["turn"]["id"], "{}", diag());
        assert_eq!(c["agent_type"], "general-purpose", "{}", diag());
        assert!(c["ended_at"].is_string(), "{}", diag());
    }
    let ok = the_child(&kids, "completed", &diag);
    assert_eq!(ok["summary"], PLAIN_ANSWER, "{}", diag());
    let failed = the_child(&kids, "failed", &diag);
    assert!(
        failed["error"].as_str().unwrap_or_default().contains("400"),
        "{}",
        diag()
    );
    assert_eq!(s["subagents_running"], 0, "{}", diag());
    assert!(
        show.contains("completed, 1 of 2 sub-agents failed") && show.contains("sub-agent"),
        "{}",
        diag()
    );
    assert!(
        table.contains("completed, 1 of 2 sub-agents failed"),
        "{}",
        diag()
    );
    // The USAGE column: the session's input / output tokens (two requests of 19 in, 7 out).
    assert!(table.contains("38/14"), "{}", diag());

    // Usage: the parent's own requests (the two Agent calls, then the final answer), as the
    // transcript records them, equal Claude's own `result.usage` and the fake's numbers.
    let main_requests = fake
        .requests()
        .iter()
        .filter(|r| r["answered"] == "agents2" || r["answered"] == "final")
        .count() as u64;
    assert_eq!(main_requests, 2, "{}", diag());
    let fake_usage = fake_anthropic::USAGE;
    let per = fake_usage.input + fake_usage.cache_read + fake_usage.cache_write;
    let want = [
        per * main_requests,
        fake_usage.cache_read * main_requests,
        fake_usage.cache_write * main_requests,
        fake_usage.output * main_requests,
        main_requests,
    ];
    assert_eq!(counts(&s["turn"]["usage"]), want, "{}", diag());
    assert_eq!(counts(&s["usage"]), want, "{}", diag());
    let reported = &result["usage"];
    let n = |k: &str| reported[k].as_u64().unwrap_or(0);
    assert_eq!(
        [
            n("input_tokens") + n("cache_read_input_tokens") + n("cache_creation_input_tokens"),
            n("cache_read_input_tokens"),
            n("cache_creation_input_tokens"),
            n("output_tokens"),
        ],
        want[..4],
        "Claude's own account of the turn\n{}",
        diag()
    );
    assert!(s["usage"]["model"].is_string(), "{}", diag());
    // The child that answered: its usage as the Agent call reported it (one request).
    assert_eq!(
        counts(&ok["usage"])[..4],
        [
            per,
            fake_usage.cache_read,
            fake_usage.cache_write,
            fake_usage.output
        ],
        "{}",
        diag()
    );
    assert!(
        show.contains("usage") && show.contains("session"),
        "{}",
        diag()
    );

    let events = w.events(&id);
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
    let at = |k: &str| kinds.iter().position(|x| *x == k).unwrap_or(usize::MAX);
    assert_eq!(
        kinds.iter().filter(|k| **k == "subagent.started").count(),
        2,
        "{}",
        diag()
    );
    assert!(
        at("subagent.failed") < at("turn.completed")
            && at("subagent.completed") < at("turn.completed"),
        "{kinds:?}\n{}",
        diag()
    );
    assert!(!kinds.contains(&"turn.failed"), "{kinds:?}\n{}", diag());
    let done = &events[at("turn.completed")];
    assert_eq!(
        (&done["subagents"], &done["subagents_failed"]),
        (&json!(2), &json!(1)),
        "{}",
        diag()
    );
    assert_grammar(&w.record_if_any(&id).unwrap(), &events, &diag);
    session.end(&w, true);
}

/// Codex spawns two sub-agents (`spawn_agent`) in one response: one answers (`SubagentStop`),
/// the other's model requests fail, after which Codex fires nothing more for it. The parent
/// turn's Stop comes while that child still counts as running, so the turn waits; the readers
/// conclude the child failed (no new attempt within the retry bound) and the turn completes,
/// saying one of two sub-agents failed. The turn's usage is what Codex's `PostModelRequest`
/// payloads carried: the fake's numbers times the parent's requests.
#[test]
fn codex_turn_with_a_sub_agent_that_completes_and_one_that_fails() {
    let mut rig = CodexRig::start();
    // A model slug Codex does not know offers the multi-agent tools (facts/codex.md §4).
    let thread = rig
        .cx
        .start_thread(&json!({"cwd": rig.w.repo, "model": "gpt-5.4"}));
    rig.turn(&thread, "SCENARIO:spawn2", "completed");
    let id = rig.record_id(&thread);
    // Codex's turn is over (its Stop hook may land a moment after the server said so), but the
    // child whose request failed is not known to have failed until no retry came within the
    // bound: the parent waits on it, and says so.
    let waiting = show_until(&rig.w, &id, "no Stop", |s| {
        s["turn"]["stopped_at"].is_string() || s["turn"]["state"] != "running"
    });
    let table = rig.w.ok(&rig.w.repo, &["sessions"]);
    assert!(
        waiting["turn"]["state"] == "running"
            && waiting["turn"]["stopped_at"].is_string()
            && waiting["subagents_running"].as_u64() >= Some(1)
            && waiting["status"] == "working",
        "{waiting:#}\n{table}\n{}",
        rig.diag(&id)
    );
    assert!(
        table.contains("1 sub-agent running") || table.contains("2 sub-agents running"),
        "{table}\n{}",
        rig.diag(&id)
    );
    let s = show_until(&rig.w, &id, "the turn never completed", |s| {
        s["turn"]["state"] != "running"
    });
    let show = rig.w.ok(&rig.w.repo, &["show", &id]);
    let diag = || format!("{s:#}\nshow:\n{show}\n{}", rig.diag(&id));
    assert_eq!(s["turn"]["state"], "completed", "{}", diag());
    let kids = children(&s);
    assert_eq!(kids.len(), 2, "{}", diag());
    let ok = the_child(&kids, "completed", &diag);
    assert_eq!(
        ok["summary"],
        "ok (default, 0 tool outputs seen)",
        "{}",
        diag()
    );
    let failed = the_child(&kids, "failed", &diag);
    assert!(failed["error"].is_string(), "{}", diag());
    for c in &kids {
        assert_eq!(c["turn_id"], s["turn"]["id"], "{}", diag());
        assert_eq!(c["agent_type"], "default", "{}", diag());
    }
    assert!(
        show.contains("completed, 1 of 2 sub-agents failed"),
        "{}",
        diag()
    );

    // The parent's requests are the fake's `spawn2` ones; each reported the fake's usage.
    let parent_requests = rig
        .fake
        .requests()
        .iter()
        .filter(|r| r["scenario"] == "spawn2")
        .count() as u64;
    let u = fake_responses::USAGE;
    let want = [
        u.input * parent_requests,
        u.cached * parent_requests,
        0,
        u.output * parent_requests,
        parent_requests,
    ];
    assert!(parent_requests >= 2, "{}", diag());
    assert_eq!(counts(&s["turn"]["usage"]), want, "{}", diag());
    assert_eq!(counts(&s["usage"]), want, "{}", diag());
    assert_eq!(
        s["turn"]["usage"]["reasoning_tokens"],
        u.reasoning * parent_requests,
        "{}",
        diag()
    );
    assert_eq!(s["usage"]["model"], "gpt-5.4", "{}", diag());
    // The child that answered made one request of its own, counted as its own.
    assert_eq!(
        counts(&ok["usage"]),
        [u.input, u.cached, 0, u.output, 1],
        "{}",
        diag()
    );
    // What Codex recorded in its own log of the thread: its last token count.
    let rollout = std::fs::read_to_string(s["transcript"].as_str().unwrap()).unwrap();
    let total = rollout
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|e| {
            let info = &e["payload"]["info"]["total_token_usage"];
            info.is_object().then(|| info.clone())
        })
        .unwrap_or_else(|| panic!("no token count in the rollout\n{rollout}\n{}", diag()));
    assert_eq!(
        [
            total["input_tokens"].as_u64().unwrap_or(0),
            total["cached_input_tokens"].as_u64().unwrap_or(0),
            total["output_tokens"].as_u64().unwrap_or(0),
        ],
        [want[0], want[1], want[3]],
        "Codex's own account\n{total}\n{}",
        diag()
    );

    let events = rig.w.events(&id);
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
    let at = |k: &str| kinds.iter().position(|x| *x == k).unwrap_or(usize::MAX);
    assert!(
        at("subagent.failed") < at("turn.completed")
            && at("subagent.completed") < at("turn.completed"),
        "the turn completes after its sub-agents end: {kinds:?}\n{}",
        diag()
    );
    let done = &events[at("turn.completed")];
    assert_eq!(
        done["source"],
        "hook PostModelRequest",
        "the readers' conclusion that the child failed completed the turn\n{}",
        diag()
    );
    assert_grammar(&rig.w.record_if_any(&id).unwrap(), &events, &diag);
}
