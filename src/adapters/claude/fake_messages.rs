//! A fake Anthropic Messages API that drives the REAL Claude Code binary offline.
//!
//! The fake of `docs/harnesses/facts/claude.md` (verified against Claude Code 2.1.197). Point Claude at
//! it with `ANTHROPIC_BASE_URL=<base_url()>` and any `ANTHROPIC_API_KEY`.
//!
//! Endpoints: `HEAD /` -> 200 (startup connectivity probe); `POST /v1/messages[?beta=true]`
//! -> a scripted answer (SSE when `stream:true`, else one JSON message);
//! `POST /v1/messages/count_tokens` -> `{"input_tokens":42}`; `GET /v1/models` -> one model;
//! anything else -> 200 `{}`. Every request is logged (see [`FakeAnthropic::requests`]).
//!
//! Script, chosen by keywords in the LAST real user prompt (a user turn that is not only
//! `tool_result`s) of a "main loop" request (one whose `tools` offer `Write` or `Bash`):
//!
//! | keyword | tool calls, one per model request | then |
//! |---|---|---|
//! | `USE_NONE` | none | text `PLAIN_ANSWER_OK` |
//! | `USE_BASH` | Bash `echo hi-from-bash > bash_out.txt && cat bash_out.txt` | final |
//! | `USE_BASHCMD <<cmd>>` | Bash `cmd` | final |
//! | `USE_SLOWBASH` | Bash `sleep 20; echo slow > slow_out.txt` | final |
//! | `USE_BASHFAIL` | Bash `echo failing >&2; exit 3` | final |
//! | `USE_ENV` | Bash `env \| sort > tool_env.txt` | final |
//! | `USE_EDIT` | Read `<dir>/<file>`, then Edit `hello` -> `goodbye` | final |
//! | `USE_NOTEBOOK` | Read `<dir>/nb.ipynb`, then `NotebookEdit` cell `c0` | final |
//! | `USE_READ` | Read `<dir>/<file>` | final |
//! | `USE_AGENTS2` | two parallel Agent calls: [`CHILD_OK_PROMPT`] (answers) and [`CHILD_FAIL_PROMPT`] (its request fails) | final |
//! | `USE_AGENT` | Agent (`general-purpose`, prompt `USE_BASH`: the subagent runs one Bash call) | final |
//! | `USE_ASK` | `AskUserQuestion` (Red / Blue) | final |
//! | `USE_ASKMULTI` | `AskUserQuestion`, one multi-select question (Cheese / Olives / Basil) | final |
//! | `USE_ASK2` | `AskUserQuestion`, two questions (Red / Blue, then the multi-select) | final |
//! | `USE_PLAN` | Write the plan file plan mode names, then `ExitPlanMode` | final |
//! | `USE_MULTI` | two parallel Writes `<dir>/m1.txt`, `<dir>/m2.txt` | final |
//! | `USE_SURROGATE` | none | text [`SURROGATE_ANSWER`] with a lone surrogate escape (`\ud800`) on the wire |
//! | (default) | Write `<dir>/<file>` = `hello from fake model\n` | final |
//!
//! "final" is the text `Done: the tool ran. FINAL_ANSWER_OK`. The step advances with the number
//! of `tool_result` user turns after the last real prompt. `<file>` is `FILE=<name>` or
//! `hello.txt`; `<dir>` is `TARGET_DIR=<abs>`, else the "Primary working directory" named in the
//! system prompt, else `/tmp`. `FAIL=<code>` answers the main request with that HTTP error
//! (Anthropic error JSON); `FAIL_AFTER=<code>` answers the first request of the script (its
//! text [`PARTIAL_TEXT`] and a tool call) and fails the next one with that error, so the turn
//! fails after the model wrote text; `DELAY=<secs>` delays the first answer to a prompt.
//! Every answer reports [`USAGE`] as its token counts.
//! Rate limits (what a subscription login reads; docs/harnesses/facts/claude.md): once a prompt
//! said `LIMITS=<5h>,<7d>` (used percents) every later answer carries the
//! `anthropic-ratelimit-unified-{5h,7d}-{utilization,reset}` headers (`RESET=<unix secs>` for the
//! 5-hour window, else an hour from now; the 7-day one [`SEVEN_DAY_RESET_AFTER`] later), as a
//! provider reports them on every answer; `FAIL=429` with them is a refusal (`status:
//! rejected`, the 5-hour window's claim and reset).
//! Side requests (no `Write`/`Bash` tool: title generation, topic detection) get a short text;
//! the title request gets `{"title":"Fake title from model"}`.
//!
//! Differences from the Python script: no `FAKE_TARGET_DIR` env var (tests run in parallel in
//! one process, so process env is shared); the log lives in memory.

use std::io;
use std::ops::Deref;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::adapters::common::fake_http::{
    Conn, LoggingServer, Request, RequestLog, random_hex, token_after,
};

/// Text of the answer after a script's last tool call.
pub const FINAL_ANSWER: &str = "Done: the tool ran. FINAL_ANSWER_OK";
/// The text a script's first answer writes before its tool call.
pub const PARTIAL_TEXT: &str = "Working on it.";
/// Text of the `USE_NONE` answer.
pub const PLAIN_ANSWER: &str = "No tool needed. PLAIN_ANSWER_OK";
/// Text of the `USE_SURROGATE` answer; the fake sends [`LONE_SURROGATE`] in it as the escape
/// `\ud800` (half an emoji: what a model cut mid-character streams, and JavaScript keeps).
pub const SURROGATE_ANSWER: &str = "Half a pair: <lone-surrogate> SURROGATE_OK";
/// Stands for the escape `\ud800` in [`SURROGATE_ANSWER`] (no Rust string can hold it).
pub const LONE_SURROGATE: &str = "<lone-surrogate>";
/// Content of the file written by the default script.
pub const WRITE_CONTENT: &str = "hello from fake model\n";
/// The token counts of every answer (the final `message_delta` repeats `output`; the
/// `message_start` says 1 output token, as the real API does while streaming).
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

/// What every answer reports it used: distinct numbers, so a test sees which one a reader took.
pub const USAGE: Usage = Usage {
    input: 11,
    output: 7,
    cache_read: 5,
    cache_write: 3,
};

/// The prompt of the sub-agent `USE_AGENTS2` starts that completes.
pub const CHILD_OK_PROMPT: &str = "Reply in text only. USE_NONE";
/// The prompt of the sub-agent `USE_AGENTS2` starts whose model request fails (HTTP 400).
pub const CHILD_FAIL_PROMPT: &str = "Reply in text only. USE_NONE FAIL=400";

/// How much later than the 5-hour window the 7-day one resets, in seconds.
pub const SEVEN_DAY_RESET_AFTER: u64 = 4 * 86_400;

/// Title returned to the title-generation side request.
pub const FAKE_TITLE: &str = "Fake title from model";

/// A running fake; stops on Drop. Its [`LoggingServer::requests`] are
/// `{method, path, headers, body, answered}` where `answered` names what the fake replied
/// (`Write`, `Bash`, `final`, `title`, `side`, `fail529`, ...; absent for non-messages requests).
pub struct FakeAnthropic(LoggingServer);

impl FakeAnthropic {
    pub fn start() -> FakeAnthropic {
        FakeAnthropic(LoggingServer::start(handle))
    }

    /// The value for `ANTHROPIC_BASE_URL` (no trailing slash, no `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// One line per request so far: method, path and what the fake answered.
    pub fn request_lines(&self) -> Vec<String> {
        self.requests()
            .iter()
            .map(|r| format!("{} {} {}", r["method"], r["path"], r["answered"]))
            .collect()
    }
}

impl Deref for FakeAnthropic {
    type Target = LoggingServer;

    fn deref(&self) -> &LoggingServer {
        &self.0
    }
}

fn handle(req: &Request, conn: &mut Conn<'_>, log: &RequestLog) -> io::Result<()> {
    let mut entry = req.log_entry();
    match req.method.as_str() {
        "HEAD" => {
            log.push(Value::Object(entry));
            return conn.empty(200);
        }
        "GET" => {
            log.push(Value::Object(entry));
            if req.path().starts_with("/v1/models") {
                return conn.json(
                    200,
                    &json!({"data": [{"id": "claude-sonnet-4-5", "type": "model",
                        "display_name": "Fake"}], "has_more": false, "first_id": null,
                        "last_id": null}),
                );
            }
            return conn.json(200, &json!({}));
        }
        _ => {}
    }
    let path = req.path();
    if path.ends_with("/v1/messages/count_tokens") {
        log.push(Value::Object(entry));
        return conn.json(200, &json!({"input_tokens": 42}));
    }
    if !path.ends_with("/v1/messages") {
        log.push(Value::Object(entry));
        return conn.json(200, &json!({}));
    }

    let body = req.json().unwrap_or_else(|| json!({}));
    let has_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    let last_user = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rfind(|m| m["role"] == "user")
        .cloned()
        .unwrap_or(Value::Null);
    let last_text = text_of(&last_user["content"]);

    let (prompt, step) = prompt_and_step(&body);
    let limits = limits_asked(&prompt, log);
    if let Some(l) = &limits {
        entry.insert("limits".into(), l.clone());
    }
    let fail = token_after(&last_text, "FAIL=")
        .or_else(|| token_after(&prompt, "FAIL_AFTER=").filter(|_| step > 0));
    if has_tools && let Some(code) = fail.and_then(|c| c.parse().ok()) {
        entry.insert("answered".into(), format!("fail{code}").into());
        log.push(Value::Object(entry));
        let etype = match code {
            400 => "invalid_request_error",
            401 => "authentication_error",
            429 => "rate_limit_error",
            529 => "overloaded_error",
            _ => "api_error",
        };
        return conn.json_with(
            code,
            &json!({"type": "error", "error": {"type": etype, "message": format!("fake error {code}")}}),
            &unified_headers(limits.as_ref(), code == 429),
        );
    }

    let plan = plan_response(&body);
    entry.insert("answered".into(), plan.label.clone().into());
    log.push(Value::Object(entry));

    if has_tools
        && !has_tool_result(&last_user["content"])
        && let Some(secs) = token_after(&last_text, "DELAY=").and_then(|s| s.parse().ok())
        && !conn.sleep(Duration::from_secs(secs))
    {
        return Ok(());
    }

    let model = body["model"].as_str().unwrap_or("claude-fake").to_owned();
    let mid = format!("msg_{}", random_hex(24));
    let usage = json!({"input_tokens": USAGE.input, "output_tokens": USAGE.output,
        "cache_creation_input_tokens": USAGE.cache_write, "cache_read_input_tokens": USAGE.cache_read});
    if body["stream"] != Value::Bool(true) {
        return conn.json(
            200,
            &json!({"id": mid, "type": "message", "role": "assistant", "model": model,
                "content": plan.blocks, "stop_reason": plan.stop, "stop_sequence": null,
                "usage": usage}),
        );
    }

    write_sse(
        conn,
        &plan,
        &mid,
        &model,
        usage,
        &unified_headers(limits.as_ref(), false),
    )
}

/// The rate limits to report: those `prompt`'s `LIMITS=` and `RESET=` ask for, else the newest
/// an earlier request asked for (a provider reports them on every answer); `None` before any.
fn limits_asked(prompt: &str, log: &RequestLog) -> Option<Value> {
    let Some(given) = token_after(prompt, "LIMITS=") else {
        return log
            .all()
            .iter()
            .rev()
            .find_map(|r| r.get("limits").cloned());
    };
    let (five, seven) = given.split_once(',').unwrap_or((given, "0"));
    let pct = |s: &str| s.parse::<f64>().unwrap_or(0.0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let reset = token_after(prompt, "RESET=")
        .and_then(|r| r.parse::<u64>().ok())
        .unwrap_or(now + 3600);
    Some(json!({"five_hour": pct(five), "seven_day": pct(seven), "reset": reset}))
}

/// The `anthropic-ratelimit-unified-*` headers of `limits` (utilization is a fraction there);
/// `rejected`: the refusal's status, claim and reset too.
fn unified_headers(limits: Option<&Value>, rejected: bool) -> Vec<(&'static str, String)> {
    let Some(l) = limits else {
        return Vec::new();
    };
    let reset = l["reset"].as_u64().unwrap_or_default();
    let fraction = |k: &str| (l[k].as_f64().unwrap_or_default() / 100.0).to_string();
    let mut headers = vec![
        (
            "anthropic-ratelimit-unified-5h-utilization",
            fraction("five_hour"),
        ),
        ("anthropic-ratelimit-unified-5h-reset", reset.to_string()),
        (
            "anthropic-ratelimit-unified-7d-utilization",
            fraction("seven_day"),
        ),
        (
            "anthropic-ratelimit-unified-7d-reset",
            (reset + SEVEN_DAY_RESET_AFTER).to_string(),
        ),
        (
            "anthropic-ratelimit-unified-status",
            if rejected { "rejected" } else { "allowed" }.to_owned(),
        ),
    ];
    if rejected {
        headers.push(("anthropic-ratelimit-unified-reset", reset.to_string()));
        headers.push((
            "anthropic-ratelimit-unified-representative-claim",
            "five_hour".to_owned(),
        ));
    }
    headers
}

/// The answer as the SSE sequence Claude 2.1.197 accepted: `message_start`, per block
/// start / one delta / stop, `message_delta` with the stop reason, `message_stop`.
fn write_sse(
    conn: &mut Conn<'_>,
    plan: &Plan,
    mid: &str,
    model: &str,
    usage: Value,
    headers: &[(&str, String)],
) -> io::Result<()> {
    conn.start_sse_with(headers)?;
    let mut start_usage = usage;
    start_usage["output_tokens"] = 1.into();
    conn.sse_event(
        "message_start",
        &json!({"type": "message_start", "message": {"id": mid, "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": start_usage}}),
    )?;
    for (i, b) in plan.blocks.iter().enumerate() {
        if b["type"] == "text" {
            conn.sse_event(
                "content_block_start",
                &json!({"type": "content_block_start", "index": i,
                    "content_block": {"type": "text", "text": ""}}),
            )?;
            let delta = json!({"type": "content_block_delta", "index": i,
                    "delta": {"type": "text_delta", "text": b["text"]}});
            let data = delta.to_string().replace(LONE_SURROGATE, "\\ud800");
            conn.write_raw(format!("event: content_block_delta\ndata: {data}\n\n").as_bytes())?;
        } else {
            conn.sse_event(
                "content_block_start",
                &json!({"type": "content_block_start", "index": i,
                    "content_block": {"type": "tool_use", "id": b["id"], "name": b["name"],
                        "input": {}}}),
            )?;
            // The whole input in one partial_json delta is what Claude accepted in the probes.
            conn.sse_event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": i,
                    "delta": {"type": "input_json_delta", "partial_json": b["input"].to_string()}}),
            )?;
        }
        conn.sse_event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": i}),
        )?;
    }
    conn.sse_event(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": plan.stop,
            "stop_sequence": null}, "usage": {"output_tokens": USAGE.output}}),
    )?;
    conn.sse_event("message_stop", &json!({"type": "message_stop"}))
}

struct Plan {
    blocks: Vec<Value>,
    stop: &'static str,
    label: String,
}

fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

#[expect(
    clippy::too_many_lines,
    reason = "the script's keywords in the order the facts' fake checks them, one arm each"
)]
fn plan_response(body: &Value) -> Plan {
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    let is_main = tools.contains(&"Write") || tools.contains(&"Bash");
    if !is_main {
        let sys = body["system"].to_string();
        if sys.contains("Generate a concise, sentence-case title") {
            return Plan {
                blocks: vec![text_block(&json!({"title": FAKE_TITLE}).to_string())],
                stop: "end_turn",
                label: "title".into(),
            };
        }
        return Plan {
            blocks: vec![text_block("Fake side answer")],
            stop: "end_turn",
            label: "side".into(),
        };
    }

    // Walk back to the last real prompt, counting tool_result turns on the way: that count is
    // the script step. `messages` may also hold role:"system" entries; they are skipped.
    let mut step = 0usize;
    let mut user_text = String::new();
    for m in body["messages"].as_array().into_iter().flatten().rev() {
        if m["role"] != "user" {
            continue;
        }
        if has_tool_result(&m["content"]) {
            step += 1;
            continue;
        }
        user_text = text_of(&m["content"]);
        if !user_text.trim().is_empty() {
            break;
        }
    }

    let dir = find_dir(body, &user_text);
    let dir = Path::new(&dir);
    let file = token_after(&user_text, "FILE=").unwrap_or("hello.txt");
    let fp = dir.join(file).to_string_lossy().into_owned();
    let tid = format!("toolu_{}", random_hex(24));
    let final_plan = || Plan {
        blocks: vec![text_block(FINAL_ANSWER)],
        stop: "end_turn",
        label: "final".into(),
    };

    if user_text.contains("USE_SURROGATE") {
        return Plan {
            blocks: vec![text_block(SURROGATE_ANSWER)],
            stop: "end_turn",
            label: "surrogate".into(),
        };
    }
    if user_text.contains("USE_NONE") {
        return Plan {
            blocks: vec![text_block(PLAIN_ANSWER)],
            stop: "end_turn",
            label: "plain".into(),
        };
    }
    if user_text.contains("USE_AGENTS2") {
        // Two sub-agents in one message (Claude runs them at once): one answers, one fails.
        if step > 0 {
            return final_plan();
        }
        let agent = |id: String, prompt: &str| {
            json!({"type": "tool_use", "id": id, "name": "Agent", "input": {
                "description": "Sub task", "prompt": prompt, "subagent_type": "general-purpose"}})
        };
        return Plan {
            blocks: vec![
                agent(tid.clone(), CHILD_OK_PROMPT),
                agent(format!("{tid}b"), CHILD_FAIL_PROMPT),
            ],
            stop: "tool_use",
            label: "agents2".into(),
        };
    }
    let Some(script) = script_for(body, &user_text, dir, &fp) else {
        // USE_MULTI: two parallel Writes in one message (Claude runs them as one batch).
        if step > 0 {
            return final_plan();
        }
        let w = |name: &str, id: String, content: &str| {
            json!({"type": "tool_use", "id": id, "name": "Write", "input": {
                    "file_path": dir.join(name).to_string_lossy(), "content": content}})
        };
        return Plan {
            blocks: vec![
                w("m1.txt", tid.clone(), "one\n"),
                w("m2.txt", format!("{tid}b"), "two\n"),
            ],
            stop: "tool_use",
            label: "multi".into(),
        };
    };
    let Some((name, input)) = script.into_iter().nth(step) else {
        return final_plan();
    };
    let mut blocks = Vec::new();
    if step == 0 {
        blocks.push(text_block(PARTIAL_TEXT));
    }
    blocks.push(json!({"type": "tool_use", "id": tid, "name": name, "input": input}));
    Plan {
        blocks,
        stop: "tool_use",
        label: name.to_owned(),
    }
}

/// `AskUserQuestion`'s single-choice question (`USE_ASK`, `USE_ASK2`).
fn color() -> Value {
    json!({"question": "Which color do you prefer?", "header": "Color", "multiSelect": false,
        "options": [
            {"label": "Red", "description": "The color red"},
            {"label": "Blue", "description": "The color blue"}]})
}

/// `AskUserQuestion`'s multi-select question (`USE_ASKMULTI`, `USE_ASK2`).
fn toppings() -> Value {
    json!({"question": "Which toppings do you want?", "header": "Toppings", "multiSelect": true,
        "options": [
            {"label": "Cheese", "description": "Melted cheese"},
            {"label": "Olives", "description": "Black olives"},
            {"label": "Basil", "description": "Fresh basil"}]})
}

/// The plan file plan mode's system prompt names (`<config dir>/plans/<slug>.md`).
fn plan_file(body: &Value) -> Option<String> {
    let blob = format!("{}{}", body["system"], body["messages"]);
    let at = blob.find("/plans/")?;
    let start = blob[..at]
        .rfind(|c: char| c.is_whitespace() || "\"'`\\".contains(c))
        .map_or(0, |i| i + 1);
    let end = at + blob[at..].find(".md")? + 3;
    Some(blob[start..end].to_owned())
}

/// The tool calls of a one-call-per-step script, in order; `None` for `USE_MULTI`.
/// Keyword precedence follows the Python script's `elif` chain.
fn script_for(
    body: &Value,
    user_text: &str,
    dir: &Path,
    fp: &str,
) -> Option<Vec<(&'static str, Value)>> {
    let script = if user_text.contains("USE_BASHFAIL") {
        vec![(
            "Bash",
            json!({"command": "echo failing >&2; exit 3", "description": "Fail on purpose"}),
        )]
    } else if user_text.contains("USE_SLOWBASH") {
        vec![(
            "Bash",
            json!({"command": "sleep 20; echo slow > slow_out.txt", "description": "Slow command"}),
        )]
    } else if user_text.contains("USE_BASHCMD") {
        // The command between `<<` and `>>`.
        let cmd = user_text
            .split_once("<<")
            .and_then(|(_, rest)| rest.split_once(">>"))
            .map_or("true", |(c, _)| c);
        vec![(
            "Bash",
            json!({"command": cmd, "description": "Run the requested command"}),
        )]
    } else if user_text.contains("USE_BASH") {
        vec![(
            "Bash",
            json!({"command": "echo hi-from-bash > bash_out.txt && cat bash_out.txt",
                "description": "Write bash_out.txt"}),
        )]
    } else if user_text.contains("USE_ENV") {
        vec![(
            "Bash",
            json!({"command": "env | sort > tool_env.txt; echo done", "description": "Dump env"}),
        )]
    } else if user_text.contains("USE_EDIT") {
        vec![
            ("Read", json!({"file_path": fp})),
            (
                "Edit",
                json!({"file_path": fp, "old_string": "hello", "new_string": "goodbye",
                    "replace_all": false}),
            ),
        ]
    } else if user_text.contains("USE_NOTEBOOK") {
        let nb = dir.join("nb.ipynb").to_string_lossy().into_owned();
        vec![
            ("Read", json!({"file_path": nb})),
            (
                "NotebookEdit",
                json!({"notebook_path": nb, "cell_id": "c0", "new_source": "print(2)",
                    "edit_mode": "replace"}),
            ),
        ]
    } else if user_text.contains("USE_READ") {
        vec![("Read", json!({"file_path": fp}))]
    } else if user_text.contains("USE_AGENT") {
        vec![(
            "Agent",
            json!({"description": "Sub task", "prompt": "Run one command. USE_BASH",
                "subagent_type": "general-purpose"}),
        )]
    } else if user_text.contains("USE_ASKMULTI") {
        vec![("AskUserQuestion", json!({"questions": [toppings()]}))]
    } else if user_text.contains("USE_ASK2") {
        vec![(
            "AskUserQuestion",
            json!({"questions": [color(), toppings()]}),
        )]
    } else if user_text.contains("USE_ASK") {
        vec![("AskUserQuestion", json!({"questions": [color()]}))]
    } else if user_text.contains("USE_PLAN") {
        // Plan mode names the plan file in its system prompt; Claude fills ExitPlanMode's
        // input (the plan) from it.
        let plan =
            plan_file(body).unwrap_or_else(|| dir.join("PLAN.md").to_string_lossy().into_owned());
        vec![
            (
                "Write",
                json!({"file_path": plan, "content": "# Plan\n\n1. Create hello.txt\n2. Done\n"}),
            ),
            ("ExitPlanMode", json!({})),
        ]
    } else if user_text.contains("USE_MULTI") {
        return None;
    } else {
        vec![("Write", json!({"file_path": fp, "content": WRITE_CONTENT}))]
    };
    Some(script)
}

/// The last real prompt (a user turn that is not only `tool_result`s) and how many
/// `tool_result` turns followed it (the script step).
fn prompt_and_step(body: &Value) -> (String, usize) {
    let mut step = 0usize;
    for m in body["messages"].as_array().into_iter().flatten().rev() {
        if m["role"] != "user" {
            continue;
        }
        if has_tool_result(&m["content"]) {
            step += 1;
            continue;
        }
        let text = text_of(&m["content"]);
        if !text.trim().is_empty() {
            return (text, step);
        }
    }
    (String::new(), step)
}

/// The text of a message `content`: the string itself, or its `text` blocks joined by newlines.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .map(|b| b["text"].as_str().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn has_tool_result(content: &Value) -> bool {
    content
        .as_array()
        .is_some_and(|a| a.iter().any(|b| b["type"] == "tool_result"))
}

fn find_dir(body: &Value, user_text: &str) -> String {
    if let Some(d) = token_after(user_text, "TARGET_DIR=") {
        return d.to_owned();
    }
    // Search the JSON text like the Python regex
    // `(?:Primary working directory|Working directory): (/[^\\\s"]+)`: in serialized JSON a
    // newline is `\n`, so a backslash ends the path.
    let blob = format!("{}{}", body["system"], body["messages"]);
    let mut best: Option<(usize, &str)> = None;
    for key in ["Primary working directory: ", "Working directory: "] {
        for (i, _) in blob.match_indices(key) {
            let rest = &blob[i + key.len()..];
            if !rest.starts_with('/') {
                continue;
            }
            let end = rest
                .find(|c: char| c == '\\' || c == '"' || c.is_whitespace())
                .unwrap_or(rest.len());
            if best.is_none_or(|(j, _)| i < j) {
                best = Some((i, &rest[..end]));
            }
            break;
        }
    }
    best.map_or_else(|| "/tmp".to_owned(), |(_, d)| d.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_steps_follow_tool_results_after_last_prompt() {
        let tools = json!([{"name": "Write"}, {"name": "Read"}]);
        let prompt = json!({"role": "user", "content": [{"type": "text", "text": "USE_EDIT TARGET_DIR=/x"}]});
        let result =
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]});
        let sys = json!({"role": "system", "content": "reminder"});
        let body = json!({"tools": tools, "messages": [prompt, sys]});
        let p = plan_response(&body);
        assert_eq!(p.label, "Read");
        assert_eq!(p.blocks[1]["input"]["file_path"], "/x/hello.txt");
        let body =
            json!({"tools": tools, "messages": [prompt, {"role": "assistant"}, result, sys]});
        assert_eq!(plan_response(&body).label, "Edit");
        let body = json!({"tools": tools, "messages": [prompt, result, result]});
        assert_eq!(plan_response(&body).label, "final");
    }

    #[test]
    fn working_directory_comes_from_system_prompt() {
        let body = json!({"tools": [{"name": "Bash"}],
            "system": [{"type": "text", "text": "env\nPrimary working directory: /a/b\nmore"}],
            "messages": [{"role": "user", "content": "go FILE=x.txt"}]});
        let p = plan_response(&body);
        assert_eq!(p.blocks[1]["input"]["file_path"], "/a/b/x.txt");
    }

    #[test]
    fn side_and_title_requests() {
        let body = json!({"tools": [], "system": [{"type": "text",
            "text": "Generate a concise, sentence-case title for this"}], "messages": []});
        assert_eq!(plan_response(&body).label, "title");
        assert_eq!(plan_response(&json!({"messages": []})).label, "side");
    }
}
