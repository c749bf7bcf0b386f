//! A fake `OpenAI` Responses API that drives the REAL Codex binary offline.
//!
//! The fake of `docs/harnesses/facts/codex.md` (verified against Codex 0.169.0). `spex check`
//! points Codex at it as a model provider of its own (`check.rs`), `FAKE_API_KEY` in its env.
//!
//! `POST <base>/responses` answers with an SSE stream picked by `SCENARIO:<name>` in the newest
//! user message that has one:
//!
//! | scenario | model requests (step = tool outputs seen since that message) |
//! |---|---|
//! | `shell` | a shell call ([`SHELL_CMD`] via `exec_command`, `shell_command` or `shell`, whichever is offered), then final |
//! | `failcmd` | a shell call of [`FAILING_CMD`] (exits 3), then final |
//! | `patch` | `apply_patch` [`PATCH`] (adds `hello.txt`), then final |
//! | `multipatch` | `apply_patch` [`MULTIPATCH_1`] (adds `a.txt`, `sub/b.txt`), then [`MULTIPATCH_2`] (updates `a.txt`, adds `c.txt`), then final |
//! | `both` | patch, then shell, then final |
//! | `spawn` | `multi_agent_v1.spawn_agent` (needs a model slug with that namespace, e.g. `gpt-5.4`), then final |
//! | `spawn2` | two `spawn_agent` calls in one response: [`CHILD_OK_TASK`] (answers) and [`CHILD_FAIL_TASK`] (its requests fail), then final |
//! | `escalate` | `exec_command` with `sandbox_permissions: require_escalated` (approval), then final |
//! | `ask` | `request_user_input` with one question (id `color`: options `Red`, `Blue`; Codex runs it in Plan mode only), then final quoting the answer as `LAST_OUTPUT=<output>` |
//! | `ask2` | the same with two questions (`color` as in `ask`; `size`: `Small`, `Large`) |
//! | `hang` | `response.created`, then `: keepalive` comments every second until the server is dropped or the hang limit passes (`HANG=<secs>` in the prompt, else the server's limit, default 120 s), then a message |
//! | `fail` | HTTP 500 |
//! | `limit` | HTTP 429, `usage_limit_reached` with `resets_at` (the primary window's reset), the primary window at 100% |
//! | `failonce` | HTTP 500 for the first `failonce` turn request this server sees (a title request never counts), then one assistant message |
//! | (none) | one assistant message |
//!
//! Every response reports [`USAGE`] as its token counts.
//! Rate limits: a prompt with `LIMITS=<primary>,<secondary>` (used percents) makes the answers
//! to its requests carry Codex's `x-codex-{primary,secondary}-{used-percent,window-minutes,reset-at}`
//! headers ([`PRIMARY_WINDOW_MINS`], [`SECONDARY_WINDOW_MINS`]; reset at `RESET=<unix secs>`
//! for the primary window, else an hour from now, the secondary [`SECONDARY_RESET_AFTER`]
//! later); scenario `limit` sends them too (primary 100% unless given).
//! `LATE=<secs>` in the newest user message holds each answer's `response.completed` (its usage)
//! back that long after its output item.
//! "final" is an assistant message `ok (<scenario>, <n> tool outputs seen)`.
//! The Codex TUI asks for its thread's title in a request of its own (structured output, the
//! prompt quoted in it) beside the turn's, prompt after prompt while it has none (the answers
//! here are no title); the two race, so the log marks it `"title": true` and `failonce` leaves
//! it out.
//! `POST <base>/responses/compact` -> one user message `fake compacted summary`;
//! `GET <base>/models` -> empty lists; anything else -> 404. Every request is logged.
//!
//! Request bodies: Codex 0.169.0 with a custom provider sends plain JSON (`Content-Length`, no
//! `Content-Encoding`; checked with the real binary). Should a body arrive compressed anyway it
//! is logged as `{"_encoded": "zstd", "_bytes": n}` and answered as scenario `default`.
//!
//! Difference from the Python script: the step counts tool outputs after the user message that
//! carries the scenario (the script counted every tool output in the thread), so a second
//! `SCENARIO:` prompt in the same thread runs its script again.

use std::io;
use std::ops::Deref;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::adapters::common::fake_http::token_after;
use crate::adapters::common::fake_http::{Conn, LoggingServer, Request, RequestLog, random_hex};

/// The patch of scenarios `patch` and `both`.
pub const PATCH: &str =
    "*** Begin Patch\n*** Add File: hello.txt\n+hello from fake model\n*** End Patch\n";
/// First patch of scenario `multipatch`: two files in one envelope, one in a new subdirectory.
pub const MULTIPATCH_1: &str = "*** Begin Patch\n\
*** Add File: a.txt\n+alpha\n\
*** Add File: sub/b.txt\n+beta\n\
*** End Patch\n";
/// Second patch of scenario `multipatch`: an update and an add in one envelope.
pub const MULTIPATCH_2: &str = "*** Begin Patch\n\
*** Update File: a.txt\n@@\n-alpha\n+alpha two\n\
*** Add File: c.txt\n+gamma\n\
*** End Patch\n";
/// The command of scenarios `shell` and `both`.
pub const SHELL_CMD: &str = "echo shell-ran > shell_out.txt; env | grep -E '^CODEX' | sort > shell_env.txt; cat shell_out.txt";

/// A shell command that fails with exit code 3 (scenario `failcmd`).
pub const FAILING_CMD: &str = "ls /nonexistent-spex-dir; exit 3";
/// What every answer reports it used: distinct numbers, so a test sees which one a reader took.
pub struct Usage {
    pub input: u64,
    pub cached: u64,
    pub output: u64,
    pub reasoning: u64,
}

pub const USAGE: Usage = Usage {
    input: 13,
    cached: 4,
    output: 6,
    reasoning: 2,
};

/// The task of the sub-agent `spawn` (and the first of `spawn2`) starts: it answers.
pub const CHILD_OK_TASK: &str = "child task: say hi";
/// The task of `spawn2`'s second sub-agent: its model requests fail (scenario `fail`).
pub const CHILD_FAIL_TASK: &str = "child task: SCENARIO:fail";

/// The windows the rate-limit headers report: 5 hours and a week, as the provider's.
pub const PRIMARY_WINDOW_MINS: u64 = 300;
pub const SECONDARY_WINDOW_MINS: u64 = 10_080;
/// How long after the primary window the secondary one resets, in seconds.
pub const SECONDARY_RESET_AFTER: u64 = 4 * 86_400;

#[allow(
    dead_code,
    reason = "the integration tests' rig uses it (`tests/it/adapters/mod.rs` compiles this file)"
)]
const DEFAULT_HANG: Duration = Duration::from_mins(2);

/// A running fake; stops on Drop (which also ends any `hang` stream). Its
/// [`LoggingServer::requests`] are `{method, path, headers, body}` plus, for POSTs, `scenario`,
/// `tools` (name -> type), `n_tool_outputs` and `title` (the TUI's title request).
pub struct FakeResponses(LoggingServer);

impl FakeResponses {
    #[allow(
        dead_code,
        reason = "the integration tests' rig uses it (`tests/it/adapters/mod.rs` compiles this file)"
    )]
    pub fn start() -> FakeResponses {
        FakeResponses::start_with_hang_limit(DEFAULT_HANG)
    }

    /// Like [`FakeResponses::start`], with the default duration of the `hang` scenario.
    pub fn start_with_hang_limit(hang: Duration) -> FakeResponses {
        FakeResponses(LoggingServer::start(move |req, conn, log| {
            handle(req, conn, log, hang)
        }))
    }

    /// The provider `base_url` for Codex's config (ends in `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr())
    }

    /// One line per request so far: method, path, scenario and tool outputs seen.
    pub fn request_lines(&self) -> Vec<String> {
        self.requests()
            .iter()
            .map(|r| {
                format!(
                    "{} {} {} {}",
                    r["method"], r["path"], r["scenario"], r["n_tool_outputs"]
                )
            })
            .collect()
    }
}

impl Deref for FakeResponses {
    type Target = LoggingServer;

    fn deref(&self) -> &LoggingServer {
        &self.0
    }
}

/// Tool name -> tool `type` (`function`, `custom`, ...), as offered in the request.
fn tool_names(body: &Value) -> Map<String, Value> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            let name = t["name"]
                .as_str()
                .or_else(|| t["function"]["name"].as_str())?;
            Some((name.to_owned(), t["type"].clone()))
        })
        .collect()
}

/// Whether `body` is the Codex TUI's request for a thread title: structured output
/// (`text.format` a JSON schema with a `title`), which no turn of these tests asks for.
fn is_title_request(body: &Value) -> bool {
    let format = &body["text"]["format"];
    format["type"] == "json_schema" && format["schema"]["properties"]["title"].is_object()
}

/// `(scenario, hang override, tool outputs after the scenario's message)`.
fn scenario_of(body: &Value) -> (String, Option<u64>, usize) {
    let input = body["input"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut scenario = "default".to_owned();
    let mut hang = None;
    let mut since = 0;
    for (i, item) in input.iter().enumerate() {
        if item["type"] != "message" || item["role"] != "user" {
            continue;
        }
        for c in item["content"].as_array().into_iter().flatten() {
            let Some(text) = c["text"].as_str() else {
                continue;
            };
            if let Some(s) = text.split_once("SCENARIO:").map(|(_, rest)| rest) {
                s.split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .clone_into(&mut scenario);
                hang = token_after(text, "HANG=").and_then(|h| h.parse().ok());
                since = i;
            }
        }
    }
    let outs = input[since..]
        .iter()
        .filter(|i| {
            matches!(
                i["type"].as_str(),
                Some(
                    "function_call_output" | "custom_tool_call_output" | "local_shell_call_output"
                )
            )
        })
        .count();
    (scenario, hang, outs)
}

/// The text of the last user message of the request's input.
fn newest_user_text(body: &Value) -> Option<String> {
    let item = body["input"]
        .as_array()?
        .iter()
        .rfind(|i| i["type"] == "message" && i["role"] == "user")?;
    let texts: Vec<&str> = item["content"]
        .as_array()?
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect();
    Some(texts.join("\n"))
}

/// The rate-limit headers the newest `LIMITS=` prompt asks for (scenario `limit`: the primary
/// window full unless given).
fn limit_headers(body: &Value, scenario: &str) -> Vec<(&'static str, String)> {
    let texts: Vec<&str> = body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["type"] == "message" && i["role"] == "user")
        .flat_map(|i| i["content"].as_array().into_iter().flatten())
        .filter_map(|c| c["text"].as_str())
        .collect();
    let newest = texts
        .iter()
        .rev()
        .find(|t| t.contains("LIMITS=") || t.contains("SCENARIO:"));
    let given = newest.and_then(|t| token_after(t, "LIMITS="));
    let (primary, secondary) = match (given, scenario) {
        (Some(l), _) => {
            let (p, s) = l.split_once(',').unwrap_or((l, "0"));
            (p.to_owned(), s.to_owned())
        }
        (None, "limit") => ("100".to_owned(), "0".to_owned()),
        (None, _) => return Vec::new(),
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let reset: u64 = newest
        .and_then(|t| token_after(t, "RESET="))
        .and_then(|r| r.parse().ok())
        .unwrap_or(now + 3600);
    vec![
        ("x-codex-primary-used-percent", primary),
        (
            "x-codex-primary-window-minutes",
            PRIMARY_WINDOW_MINS.to_string(),
        ),
        ("x-codex-primary-reset-at", reset.to_string()),
        ("x-codex-secondary-used-percent", secondary),
        (
            "x-codex-secondary-window-minutes",
            SECONDARY_WINDOW_MINS.to_string(),
        ),
        (
            "x-codex-secondary-reset-at",
            (reset + SECONDARY_RESET_AFTER).to_string(),
        ),
    ]
}

fn call_id() -> String {
    format!("call_{}", random_hex(10))
}

fn output_item_done(item: &Value) -> Value {
    json!({"type": "response.output_item.done", "item": item})
}

fn message(text: &str) -> Value {
    output_item_done(&json!({"type": "message", "role": "assistant",
        "id": format!("msg_{}", random_hex(12)),
        "content": [{"type": "output_text", "text": text}]}))
}

fn shell_call(tools: &Map<String, Value>) -> Value {
    command_call(tools, SHELL_CMD)
}

fn command_call(tools: &Map<String, Value>, cmd: &str) -> Value {
    let cid = call_id();
    let (name, args) = if tools.contains_key("exec_command") {
        ("exec_command", json!({"cmd": cmd, "yield_time_ms": 2000}))
    } else if tools.contains_key("shell_command") {
        ("shell_command", json!({"command": cmd}))
    } else {
        ("shell", json!({"command": ["bash", "-lc", cmd]}))
    };
    output_item_done(&json!({"type": "function_call", "id": format!("fc_{cid}"),
        "call_id": cid, "name": name, "arguments": args.to_string()}))
}

fn patch_call(tools: &Map<String, Value>, patch: &str) -> Value {
    let cid = call_id();
    // gpt-5.5 offers apply_patch as a freeform (custom) tool; other slugs as a function.
    if tools.get("apply_patch").and_then(Value::as_str) == Some("custom") {
        return output_item_done(
            &json!({"type": "custom_tool_call", "id": format!("ctc_{cid}"),
            "call_id": cid, "name": "apply_patch", "input": patch}),
        );
    }
    output_item_done(&json!({"type": "function_call", "id": format!("fc_{cid}"),
        "call_id": cid, "name": "apply_patch",
        "arguments": json!({"input": patch}).to_string()}))
}

fn spawn_call(message: &str) -> Value {
    let cid = call_id();
    output_item_done(&json!({"type": "function_call", "id": format!("fc_{cid}"),
        "call_id": cid, "namespace": "multi_agent_v1", "name": "spawn_agent",
        "arguments": json!({"message": message}).to_string()}))
}

fn escalate_call() -> Value {
    let cid = call_id();
    let args = json!({"cmd": "echo escalated > escalated.txt",
        "sandbox_permissions": "require_escalated",
        "justification": "need to write outside sandbox", "yield_time_ms": 2000});
    output_item_done(&json!({"type": "function_call", "id": format!("fc_{cid}"),
        "call_id": cid, "name": "exec_command", "arguments": args.to_string()}))
}

fn ask_call(two: bool) -> Value {
    let cid = call_id();
    let mut questions = vec![json!({"id": "color", "header": "Color",
        "question": "Which color should I use?",
        "options": [{"label": "Red", "description": "warm"},
                    {"label": "Blue", "description": "cold"}]})];
    if two {
        questions.push(
            json!({"id": "size", "header": "Size", "question": "Which size?",
            "options": [{"label": "Small", "description": "s"},
                        {"label": "Large", "description": "l"}]}),
        );
    }
    let args = json!({ "questions": questions });
    output_item_done(&json!({"type": "function_call", "id": format!("fc_{cid}"),
        "call_id": cid, "name": "request_user_input", "arguments": args.to_string()}))
}

/// The output of the newest tool call in the request's input.
fn last_output(body: &Value) -> String {
    body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|i| i["type"].as_str().is_some_and(|t| t.ends_with("_output")))
        .map(|i| match &i["output"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .unwrap_or_default()
}

fn handle(req: &Request, conn: &mut Conn<'_>, log: &RequestLog, hang: Duration) -> io::Result<()> {
    let mut entry = req.log_entry();
    let path = req.path().trim_end_matches('/');
    if req.method != "POST" {
        log.push(Value::Object(entry));
        if req.method == "GET" && (path.ends_with("/models") || req.target.contains("/models?")) {
            return conn.json(200, &json!({"models": [], "data": []}));
        }
        return conn.json(404, &json!({"error": "not found"}));
    }

    let body = req.json().unwrap_or(Value::Null);
    let tools = tool_names(&body);
    let (scenario, hang_override, outs) = scenario_of(&body);
    entry.insert("scenario".into(), scenario.clone().into());
    entry.insert("tools".into(), Value::Object(tools.clone()));
    entry.insert("n_tool_outputs".into(), outs.into());
    let title = is_title_request(&body);
    entry.insert("title".into(), title.into());
    log.push(Value::Object(entry));

    if path.ends_with("/responses/compact") {
        return conn.json(
            200,
            &json!({"output": [{"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "fake compacted summary"}]}]}),
        );
    }
    if !path.ends_with("/responses") {
        return conn.json(404, &json!({"error": "not found"}));
    }
    let first_failonce = scenario == "failonce"
        && !title
        && log
            .all()
            .iter()
            .filter(|r| r["scenario"] == "failonce" && r["title"] != true)
            .count()
            == 1;
    let limits = limit_headers(&body, &scenario);
    if scenario == "limit" && !title {
        let reset = limits
            .iter()
            .find(|(k, _)| *k == "x-codex-primary-reset-at")
            .and_then(|(_, v)| v.parse::<u64>().ok());
        return conn.json_with(
            429,
            &json!({"error": {"type": "usage_limit_reached", "plan_type": "plus",
                "message": "The usage limit has been reached", "resets_at": reset}}),
            &limits,
        );
    }
    if scenario == "fail" || first_failonce {
        return conn.json(
            500,
            &json!({"error": {"message": "fake failure", "type": "server_error"}}),
        );
    }

    let rid = format!("resp_{}", random_hex(12));
    conn.start_sse_with(&limits)?;
    conn.sse_event(
        "response.created",
        &json!({"type": "response.created", "response": {"id": rid}}),
    )?;
    let item = match (scenario.as_str(), outs) {
        ("hang", _) => {
            let limit = hang_override.map_or(hang, Duration::from_secs);
            let end = std::time::Instant::now() + limit;
            while std::time::Instant::now() < end {
                if !conn.sleep(Duration::from_secs(1).min(end - std::time::Instant::now())) {
                    return Ok(());
                }
                // A comment keeps the connection visibly alive without producing an event.
                conn.write_raw(b": keepalive\n\n")?;
            }
            message("hang over")
        }
        ("shell", 0) | ("both", 1) => shell_call(&tools),
        ("failcmd", 0) => command_call(&tools, FAILING_CMD),
        ("patch" | "both", 0) => patch_call(&tools, PATCH),
        ("multipatch", 0) => patch_call(&tools, MULTIPATCH_1),
        ("multipatch", 1) => patch_call(&tools, MULTIPATCH_2),
        ("spawn", 0) => spawn_call(CHILD_OK_TASK),
        ("spawn2", 0) => {
            // Two sub-agents in one response: the first answers, the second's requests fail.
            conn.sse_event("response.output_item.done", &spawn_call(CHILD_OK_TASK))?;
            spawn_call(CHILD_FAIL_TASK)
        }
        ("escalate", 0) => escalate_call(),
        ("ask", 0) => ask_call(false),
        ("ask2", 0) => ask_call(true),
        ("ask" | "ask2", _) => message(&format!("LAST_OUTPUT={}", last_output(&body))),
        _ => message(&format!("ok ({scenario}, {outs} tool outputs seen)")),
    };
    conn.sse_event("response.output_item.done", &item)?;
    // `LATE=<secs>`: the output is out, its usage (and Codex's word of the limits) comes later.
    let late = newest_user_text(&body).and_then(|t| token_after(&t, "LATE=")?.parse().ok());
    if !title
        && let Some(secs) = late
        && !conn.sleep(Duration::from_secs(secs))
    {
        return Ok(());
    }
    completed(conn, &rid)
}

/// The answer's end, with its token usage ([`USAGE`]).
fn completed(conn: &mut Conn<'_>, rid: &str) -> io::Result<()> {
    conn.sse_event(
        "response.completed",
        &json!({"type": "response.completed", "response": {"id": rid, "usage": {
            "input_tokens": USAGE.input, "input_tokens_details": {"cached_tokens": USAGE.cached},
            "output_tokens": USAGE.output,
            "output_tokens_details": {"reasoning_tokens": USAGE.reasoning},
            "total_tokens": USAGE.input + USAGE.output}}}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Value {
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
    }

    #[test]
    fn scenario_and_step_count_from_latest_scenario_message() {
        let out = json!({"type": "custom_tool_call_output", "call_id": "c"});
        let body =
            json!({"input": [user("# AGENTS.md"), user("do it SCENARIO:multipatch now"), out]});
        assert_eq!(scenario_of(&body), ("multipatch".into(), None, 1));
        let body = json!({"input": [user("SCENARIO:patch"), out, user("SCENARIO:hang HANG=3")]});
        assert_eq!(scenario_of(&body), ("hang".into(), Some(3), 0));
        assert_eq!(scenario_of(&json!({})), ("default".into(), None, 0));
    }

    /// The HTTP status of `POST /v1/responses` with `body`.
    fn post_status(fake: &FakeResponses, body: &Value) -> String {
        use std::io::{BufRead as _, Write as _};
        let body = body.to_string();
        let mut stream = std::net::TcpStream::connect(fake.addr()).expect("connect");
        write!(
            stream,
            "POST /v1/responses HTTP/1.1\r\nHost: fake\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .expect("write");
        let mut line = String::new();
        io::BufReader::new(stream)
            .read_line(&mut line)
            .expect("status line");
        line.split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned()
    }

    /// The TUI's title request for a `failonce` prompt, sent first (as it races the turn's
    /// request), is answered; the turn's own first request still fails, its retry does not.
    #[test]
    fn failonce_fails_the_turns_first_request_not_the_title_request() {
        let fake = FakeResponses::start();
        let prompt = "SCENARIO:failonce";
        let title = json!({
            "input": [user(&format!("Generate a concise, single-line task title.\n\nUser prompt:\n{prompt}"))],
            "text": {"format": {"type": "json_schema", "name": "codex_output_schema", "strict": true,
                "schema": {"type": "object", "properties": {"title": {"type": "string"}}}}},
        });
        let turn = json!({"input": [user(prompt)]});
        assert_eq!(post_status(&fake, &title), "200");
        assert_eq!(post_status(&fake, &turn), "500");
        assert_eq!(post_status(&fake, &title), "200");
        assert_eq!(post_status(&fake, &turn), "200");
    }
}
