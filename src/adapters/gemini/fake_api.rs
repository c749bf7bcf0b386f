//! A fake Gemini API (generativelanguage `v1beta`) that drives the REAL Gemini CLI offline.
//!
//! The fake of `docs/harnesses/facts/gemini.md` (verified against Gemini CLI 0.61.0). `spex check`
//! points Gemini at it (`check.rs`): `GOOGLE_GEMINI_BASE_URL=<base_url()>`, any
//! `GEMINI_API_KEY`, and `security.auth.selectedType = "gemini-api-key"` in the home's settings.
//!
//! Endpoints (`<model>` is whatever the CLI asks for; the seeded home pins `gemini-2.5-flash`):
//! - `POST /v1beta/models/<model>:streamGenerateContent?alt=sse`: the main loop, answered as
//!   server-sent events, one `data: <GenerateContentResponse>\r\n\r\n` frame per chunk;
//! - `POST /v1beta/models/<model>:generateContent`: the CLI's utility calls (next-speaker check,
//!   loop detection, model router, summaries). When the request asks for JSON
//!   (`generationConfig.responseMimeType` `application/json`) the answer is [`UTILITY_JSON`],
//!   which fits each of their schemas (the next speaker is the user, no loop), else
//!   [`SUMMARY_TEXT`];
//! - `POST ...:countTokens` -> `{"totalTokens": 42}`; `...:embedContent` /
//!   `...:batchEmbedContents` -> zero vectors; `GET /v1beta/models` -> `{"models": []}`;
//!   anything else -> 404.
//!
//! The main loop's answer is chosen by `SCENARIO:<name>` in the newest user text (a user
//! content with text and no `functionResponse`; a prompt without a tag is scenario `default`),
//! one tool call per model request; the step is the number of `functionResponse` parts after
//! that text:
//!
//! | scenario | model requests | then |
//! |---|---|---|
//! | `shell` | `run_shell_command` [`SHELL_CMD`] (writes `shell_out.txt`) | final |
//! | `shellcmd <<cmd>>` | `run_shell_command` of the text between `<<` and `>>` | final |
//! | `slowshell` | `run_shell_command` [`SLOW_CMD`] (20 s, then writes `slow_out.txt`) | final |
//! | `shellfail` | `run_shell_command` [`FAILING_CMD`] (exits 3) | final |
//! | `write` | `write_file` `hello.txt` = [`WRITE_CONTENT`] | final |
//! | `edit` | `replace` `hello` -> `bye` in `hello.txt` | final |
//! | `both` | `write_file` as `write`, then `run_shell_command` as `shell` | final |
//! | `ask` | `ask_user` (one choice question, `red` / `blue`; only offered in the TUI: without it, final at once) | final, quoting the answer as `LAST_OUTPUT=<functionResponse.response>` |
//! | `hang` | one text chunk [`HANG_TEXT`], then `: keepalive` comments every second until the client goes, the server is dropped or the hang limit passes (`HANG=<secs>` in the prompt, else the server's, default 120 s) | `hang over` |
//! | `fail` | HTTP `FAIL=<code>` from the prompt, else the server's code (default 400, which the CLI does not retry; 429 and 5xx it retries with backoff) with a Google API error body | |
//! | (other) | text `ok (<scenario>, <n> tool outputs seen)` | |
//!
//! "final" is that `ok (...)` text too. Every answer reports [`USAGE`].
//! Every request is logged: `{method, path, headers, body}` plus, for POSTs, `scenario`,
//! `n_tool_outputs`, `tools` (the function names offered) and `answered` (what the fake replied:
//! a tool name, `text`, `hang`, `fail<code>`, `utility`, `summary`, `count`, `embed`).
//!
//! Difference from the Python script: the scenario comes from the newest user text only (the
//! script walked back to the newest text carrying a tag), so a later prompt without a tag in the
//! same session is answered as `default` instead of repeating a `fail` or `hang`; and from its
//! last tag (a prompt after one cancelled at a dialog shares its user content).

use std::io;
use std::ops::Deref;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::adapters::common::fake_http::token_after;
use crate::adapters::common::fake_http::{Conn, LoggingServer, Request, RequestLog};

/// The command of scenarios `shell` and `both` (as in the Python fake).
pub const SHELL_CMD: &str = "echo shell-ran > shell_out.txt; cat shell_out.txt";
#[allow(
    dead_code,
    reason = "the integration tests' rig uses it (`tests/it/adapters/mod.rs` compiles this file)"
)]
/// What [`SHELL_CMD`] writes into `shell_out.txt`.
pub const SHELL_OUT: &str = "shell-ran\n";
/// The command of scenario `slowshell`: long enough to interrupt, then it leaves a file.
pub const SLOW_CMD: &str = "sleep 20; echo slow > slow_out.txt";
/// The command of scenario `shellfail`: exits 3.
pub const FAILING_CMD: &str = "echo failing >&2; exit 3";
/// The file scenarios `write`, `both` and `edit` name (relative: the CLI resolves it against
/// its cwd).
pub const WRITE_FILE: &str = "hello.txt";
/// What `write` and `both` write into [`WRITE_FILE`].
pub const WRITE_CONTENT: &str = "hello from fake model\n";
/// The text of the first chunk of scenario `hang`.
pub const HANG_TEXT: &str = "thinking...";
/// The answer to a utility request that does not ask for JSON.
pub const SUMMARY_TEXT: &str = "fake summary";
/// The question of scenario `ask`, and its choices.
pub const ASK_QUESTION: &str = "Which colour?";
pub const ASK_CHOICES: [&str; 2] = ["red", "blue"];

/// What every answer reports it used (`usageMetadata`): distinct numbers, so a test sees which
/// one a reader took.
pub struct Usage {
    pub prompt: u64,
    pub cached: u64,
    pub candidates: u64,
    pub thoughts: u64,
}

pub const USAGE: Usage = Usage {
    prompt: 17,
    cached: 4,
    candidates: 9,
    thoughts: 2,
};

/// The answer to JSON utility requests: every field one of their schemas wants (next-speaker
/// check, model router, loop detection), saying "the user speaks next" and "no loop".
pub fn utility_json() -> Value {
    json!({
        "reasoning": "fake", "next_speaker": "user", "model_choice": "flash",
        "complexity_reasoning": "fake", "complexity_score": 1,
        "unproductive_state_analysis": "none", "unproductive_state_confidence": 0.0,
        "confidence": 0.0, "is_loop": false,
    })
}

/// How the server answers where a prompt does not say.
#[derive(Clone, Copy, Debug)]
pub struct FakeGeminiOptions {
    /// How long a `hang` stream stays open without `HANG=<secs>`.
    pub hang: Duration,
    /// The HTTP status of scenario `fail` without `FAIL=<code>`.
    pub fail_code: u16,
}

impl Default for FakeGeminiOptions {
    fn default() -> Self {
        FakeGeminiOptions {
            hang: Duration::from_mins(2),
            fail_code: 400,
        }
    }
}

/// A running fake; stops on Drop (which also ends any `hang` stream). See the module doc for
/// its log entries ([`LoggingServer::requests`]).
pub struct FakeGemini(LoggingServer);

impl FakeGemini {
    pub fn start() -> FakeGemini {
        FakeGemini::start_with(FakeGeminiOptions::default())
    }

    pub fn start_with(opts: FakeGeminiOptions) -> FakeGemini {
        FakeGemini(LoggingServer::start(move |req, conn, log| {
            handle(req, conn, log, opts)
        }))
    }

    /// The value for `GOOGLE_GEMINI_BASE_URL` (no trailing slash, no `/v1beta`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// One line per request so far: method, path, scenario, tool outputs seen and the answer.
    pub fn request_lines(&self) -> Vec<String> {
        self.requests()
            .iter()
            .map(|r| {
                format!(
                    "{} {} {} {} {}",
                    r["method"], r["path"], r["scenario"], r["n_tool_outputs"], r["answered"]
                )
            })
            .collect()
    }
}

#[allow(
    dead_code,
    reason = "the integration tests' rig uses it (`tests/it/adapters/mod.rs` compiles this file)"
)]
impl FakeGemini {
    /// The main-loop requests so far (`:streamGenerateContent`), oldest first.
    pub fn stream_requests(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(is_stream_request)
            .collect()
    }

    /// The first `functionResponse` (`{id?, name, response}`) for tool `name` that the CLI sent
    /// back to the model, waiting up to `timeout` for it: proof the tool ran and its result
    /// reached the model. `None` when none came.
    pub fn function_response_within(&self, name: &str, timeout: Duration) -> Option<Value> {
        let found = |r: &Value| {
            function_responses(&r["body"])
                .find(|f| f["name"] == name)
                .cloned()
        };
        self.request_within(|r| found(r).is_some(), timeout)
            .and_then(|r| found(&r))
    }

    /// The first main-loop request whose newest user text contains `needle`, waiting up to
    /// `timeout`: proof a prompt reached the model. `None` when none came.
    pub fn prompt_within(&self, needle: &str, timeout: Duration) -> Option<Value> {
        self.request_within(
            |r| is_stream_request(r) && newest_user_text(&r["body"]).0.contains(needle),
            timeout,
        )
    }
}

impl Deref for FakeGemini {
    type Target = LoggingServer;

    fn deref(&self) -> &LoggingServer {
        &self.0
    }
}

#[allow(
    dead_code,
    reason = "the integration tests' rig uses it (`tests/it/adapters/mod.rs` compiles this file)"
)]
fn is_stream_request(r: &Value) -> bool {
    r["path"]
        .as_str()
        .is_some_and(|p| p.contains(":streamGenerateContent"))
}

fn parts(content: &Value) -> impl Iterator<Item = &Value> {
    content["parts"].as_array().into_iter().flatten()
}

fn function_responses(body: &Value) -> impl Iterator<Item = &Value> {
    body["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(parts)
        .filter_map(|p| p.get("functionResponse"))
}

/// The function names the request offers.
fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| t["functionDeclarations"].as_array().into_iter().flatten())
        .filter_map(|f| f["name"].as_str().map(str::to_owned))
        .collect()
}

/// The newest user text (its text parts joined by newlines; a content holding a
/// `functionResponse` is a tool result, not a prompt) and the `functionResponse` parts after it.
fn newest_user_text(body: &Value) -> (String, usize) {
    let contents = body["contents"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut outs = 0;
    for c in contents.iter().rev() {
        let n = parts(c)
            .filter(|p| p.get("functionResponse").is_some())
            .count();
        if n > 0 {
            outs += n;
            continue;
        }
        if c["role"] != "user" {
            continue;
        }
        let text: Vec<&str> = parts(c).filter_map(|p| p["text"].as_str()).collect();
        if !text.is_empty() {
            return (text.join("\n"), outs);
        }
    }
    (String::new(), outs)
}

/// The scenario named in `text` (`default` when none): its last tag, since a prompt that
/// follows one cancelled at a permission dialog joins it in one user content (Gemini drops the
/// cancelled call from the history).
fn scenario_in(text: &str) -> String {
    text.rsplit_once("SCENARIO:")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .map(|s| s.trim_matches(|c: char| ".,;:'\"".contains(c)))
        .filter(|s| !s.is_empty())
        .unwrap_or("default")
        .to_owned()
}

fn usage() -> Value {
    json!({"promptTokenCount": USAGE.prompt, "cachedContentTokenCount": USAGE.cached,
        "candidatesTokenCount": USAGE.candidates, "thoughtsTokenCount": USAGE.thoughts,
        "totalTokenCount": USAGE.prompt + USAGE.candidates + USAGE.thoughts})
}

/// One `GenerateContentResponse` with `parts`; `finish` `None` for a chunk that is not the last.
fn candidate(parts: &Value, finish: Option<&str>) -> Value {
    let mut c = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(f) = finish {
        c["finishReason"] = f.into();
    }
    json!({"candidates": [c], "usageMetadata": usage(), "modelVersion": "gemini-2.5-flash"})
}

fn text(t: &str) -> Value {
    candidate(&json!([{ "text": t }]), Some("STOP"))
}

fn call(name: &str, args: &Value) -> Value {
    candidate(
        &json!([{"functionCall": {"name": name, "args": args}}]),
        Some("STOP"),
    )
}

fn shell(cmd: &str, description: &str) -> (&'static str, Value) {
    (
        "run_shell_command",
        json!({"command": cmd, "description": description}),
    )
}

/// The tool call of `scenario` at `step`, if it makes one there.
fn tool_call(
    scenario: &str,
    step: usize,
    prompt: &str,
    tools: &[String],
) -> Option<(&'static str, Value)> {
    let write = || {
        (
            "write_file",
            json!({"file_path": WRITE_FILE, "content": WRITE_CONTENT}),
        )
    };
    Some(match (scenario, step) {
        ("shell", 0) | ("both", 1) => shell(SHELL_CMD, "fake shell step"),
        ("slowshell", 0) => shell(SLOW_CMD, "fake slow step"),
        ("shellfail", 0) => shell(FAILING_CMD, "fake failing step"),
        ("shellcmd", 0) => {
            let cmd = prompt
                .rsplit_once("<<")
                .and_then(|(_, rest)| rest.split_once(">>"))
                .map_or("true", |(c, _)| c);
            shell(cmd, "run the requested command")
        }
        ("write" | "both", 0) => write(),
        ("edit", 0) => (
            "replace",
            json!({"file_path": WRITE_FILE, "old_string": "hello", "new_string": "bye",
                "instruction": "replace hello by bye"}),
        ),
        ("ask", 0) if tools.iter().any(|t| t == "ask_user") => (
            "ask_user",
            json!({"questions": [{"question": ASK_QUESTION, "header": "Colour", "type": "choice",
                "options": [{"label": ASK_CHOICES[0], "description": "warm"},
                            {"label": ASK_CHOICES[1], "description": "cold"}]}]}),
        ),
        _ => return None,
    })
}

fn status_name(code: u16) -> &'static str {
    match code {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        _ => "INTERNAL",
    }
}

fn handle(
    req: &Request,
    conn: &mut Conn<'_>,
    log: &RequestLog,
    opts: FakeGeminiOptions,
) -> io::Result<()> {
    let mut entry = req.log_entry();
    let path = req.path().to_owned();
    if req.method != "POST" {
        log.push(Value::Object(entry));
        if req.method == "GET" && path.ends_with("/models") {
            return conn.json(200, &json!({"models": []}));
        }
        return not_found(conn);
    }

    let body = req.json().unwrap_or(Value::Null);
    let tools = tool_names(&body);
    let (prompt, outs) = newest_user_text(&body);
    let scenario = scenario_in(&prompt);
    entry.insert("scenario".into(), scenario.clone().into());
    entry.insert("n_tool_outputs".into(), outs.into());
    entry.insert("tools".into(), json!(tools));
    let mut answer = |what: &str| {
        entry.insert("answered".into(), what.into());
        log.push(Value::Object(std::mem::take(&mut entry)));
    };

    if path.ends_with(":countTokens") {
        answer("count");
        return conn.json(200, &json!({"totalTokens": 42}));
    }
    if path.ends_with(":embedContent") {
        answer("embed");
        return conn.json(200, &json!({"embedding": {"values": vec![0.0; 8]}}));
    }
    if path.ends_with(":batchEmbedContents") {
        answer("embed");
        let n = body["requests"].as_array().map_or(0, Vec::len);
        let one = json!({"values": vec![0.0; 8]});
        return conn.json(200, &json!({"embeddings": vec![one; n]}));
    }
    if path.ends_with(":generateContent") {
        if body["generationConfig"]["responseMimeType"] == "application/json" {
            answer("utility");
            return conn.json(200, &text(&utility_json().to_string()));
        }
        answer("summary");
        return conn.json(200, &text(SUMMARY_TEXT));
    }
    if !path.ends_with(":streamGenerateContent") {
        answer("404");
        return not_found(conn);
    }

    if scenario == "fail" {
        let code = token_after(&prompt, "FAIL=")
            .and_then(|c| c.parse().ok())
            .unwrap_or(opts.fail_code);
        answer(&format!("fail{code}"));
        return conn.json(
            code,
            &json!({"error": {"code": code, "message": "fake failure",
                "status": status_name(code)}}),
        );
    }

    if scenario == "hang" {
        answer("hang");
        conn.start_sse()?;
        sse(conn, &candidate(&json!([{ "text": HANG_TEXT }]), None))?;
        let limit = token_after(&prompt, "HANG=")
            .and_then(|s| s.parse().ok())
            .map_or(opts.hang, Duration::from_secs);
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if !conn.sleep(Duration::from_secs(1).min(end - Instant::now())) {
                return Ok(());
            }
            // A comment keeps the stream visibly alive without producing a chunk; once the
            // client has gone the write fails and the stream ends.
            conn.write_raw(b": keepalive\r\n\r\n")?;
        }
        return sse(conn, &text("hang over"));
    }

    let chunk = if let Some((name, args)) = tool_call(&scenario, outs, &prompt, &tools) {
        answer(name);
        call(name, &args)
    } else {
        answer("text");
        let mut t = format!("ok ({scenario}, {outs} tool outputs seen)");
        if scenario == "ask"
            && let Some(r) = function_responses(&body).last()
        {
            t.push_str(&format!(" LAST_OUTPUT={}", r["response"]));
        }
        text(&t)
    };
    conn.start_sse()?;
    sse(conn, &chunk)
}

/// One SSE frame as the real API writes it: `data: <json>` and a blank line, CRLF-terminated.
fn sse(conn: &mut Conn<'_>, chunk: &Value) -> io::Result<()> {
    conn.write_raw(format!("data: {chunk}\r\n\r\n").as_bytes())
}

fn not_found(conn: &mut Conn<'_>) -> io::Result<()> {
    conn.json(
        404,
        &json!({"error": {"code": 404, "message": "not found", "status": "NOT_FOUND"}}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(t: &str) -> Value {
        json!({"role": "user", "parts": [{"text": t}]})
    }

    fn result(name: &str) -> Value {
        json!({"role": "user", "parts": [{"functionResponse": {"name": name, "response": {"output": "x"}}}]})
    }

    fn model_call() -> Value {
        json!({"role": "model", "parts": [{"functionCall": {"name": "write_file", "args": {}}}]})
    }

    #[test]
    fn scenario_and_step_come_from_the_newest_user_text() {
        let body = json!({"contents": [user("<session_context>"), user("go SCENARIO:both."),
            model_call(), result("write_file")]});
        let (prompt, outs) = newest_user_text(&body);
        assert_eq!((scenario_in(&prompt).as_str(), outs), ("both", 1));
        assert_eq!(
            tool_call("both", outs, &prompt, &[]).unwrap().0,
            "run_shell_command"
        );
        // A later prompt without a tag is the default scenario, not the older tag again.
        let body = json!({"contents": [user("SCENARIO:fail"), {"role": "model", "parts": [{"text": "x"}]},
            user("hello")]});
        let (prompt, outs) = newest_user_text(&body);
        assert_eq!((scenario_in(&prompt).as_str(), outs), ("default", 0));
        assert_eq!(newest_user_text(&json!({})), (String::new(), 0));
    }

    #[test]
    fn ask_needs_the_tool_offered_and_shellcmd_takes_its_command() {
        let tools = vec!["ask_user".to_owned()];
        assert_eq!(tool_call("ask", 0, "", &tools).unwrap().0, "ask_user");
        assert!(tool_call("ask", 0, "", &[]).is_none());
        let (_, args) = tool_call("shellcmd", 0, "SCENARIO:shellcmd <<touch x>>", &[]).unwrap();
        assert_eq!(args["command"], "touch x");
    }
}
