//! Typed wrappers of the app-server methods spex calls on a thread (`thread/*`, `turn/*`):
//! params built and results decoded here, sent through the transport's [`Client`]. Params
//! follow `docs/harnesses/facts/codex.md` section 5 and the JSON schema that
//! `codex app-server generate-json-schema --experimental` prints for 0.169.0.

use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use super::transport::{Client, RpcError};

impl Client {
    /// `thread/start {cwd}`: a new thread, loaded in the server and subscribed by this client.
    pub fn thread_start(&mut self, cwd: &Path) -> Result<ThreadStarted, RpcError> {
        const METHOD: &str = "thread/start";
        let raw = self.call(METHOD, json!({ "cwd": cwd }), self.timeout())?;
        let thread_id = string_at(METHOD, &raw, "/thread/id")?;
        Ok(ThreadStarted { thread_id, raw })
    }

    /// `turn/start {threadId, input}` with one text input; returns the new turn.
    pub fn turn_start(&mut self, thread_id: &str, text: &str) -> Result<TurnStarted, RpcError> {
        const METHOD: &str = "turn/start";
        let params = json!({"threadId": thread_id, "input": [text_input(text)]});
        let raw = self.call(METHOD, params, self.timeout())?;
        let turn_id = string_at(METHOD, &raw, "/turn/id")?;
        Ok(TurnStarted { turn_id, raw })
    }

    /// `turn/steer {threadId, expectedTurnId, input}`: adds text to the running turn and returns
    /// its turn id. Fails with `-32600 "no active turn to steer"` when the turn already ended.
    pub fn turn_steer(
        &mut self,
        thread_id: &str,
        expected_turn_id: &str,
        text: &str,
    ) -> Result<String, RpcError> {
        const METHOD: &str = "turn/steer";
        let params = json!({
            "threadId": thread_id,
            "expectedTurnId": expected_turn_id,
            "input": [text_input(text)],
        });
        let raw = self.call(METHOD, params, self.timeout())?;
        string_at(METHOD, &raw, "/turnId")
    }

    /// `turn/interrupt {threadId, turnId}`; the turn then completes with `status: "interrupted"`.
    /// Observed on 0.169.0: right after `turn/start` returns (and right after a steer) this fails
    /// with `-32600 "no active turn to interrupt"`; after the `turn/started` notification it
    /// works. Wait for that notification first.
    pub fn turn_interrupt(&mut self, thread_id: &str, turn_id: &str) -> Result<(), RpcError> {
        let params = json!({"threadId": thread_id, "turnId": turn_id});
        self.call("turn/interrupt", params, self.timeout())
            .map(drop)
    }

    /// `thread/resume {threadId, excludeTurns}`: loads a thread from its rollout when the
    /// server does not hold it, and subscribes this client to its turn and item notifications.
    /// A brand-new thread has no rollout until its first turn or name: `-32600 "no rollout
    /// found"`.
    pub fn thread_resume(&mut self, thread_id: &str) -> Result<Value, RpcError> {
        let params = json!({"threadId": thread_id, "excludeTurns": true});
        self.call("thread/resume", params, self.timeout())
    }

    /// `thread/name/set`: names the thread; it also writes the thread's rollout, so other
    /// clients (and `codex --remote ... resume`) can join a thread that has no turn yet.
    pub fn thread_name_set(&mut self, thread_id: &str, name: &str) -> Result<(), RpcError> {
        let params = json!({"threadId": thread_id, "name": name});
        self.call("thread/name/set", params, self.timeout())
            .map(drop)
    }

    /// The newest turn of a thread (`thread/turns/list`, newest first, one entry): its id and
    /// status (`inProgress`, `completed`, ...). `None` for a thread with no turn.
    pub fn newest_turn(&mut self, thread_id: &str) -> Result<Option<(String, String)>, RpcError> {
        const METHOD: &str = "thread/turns/list";
        let params = json!({"threadId": thread_id, "limit": 1, "sortDirection": "desc"});
        let page = match self.call(METHOD, params, self.timeout()) {
            // "not materialized yet": no user message, so no turn.
            Err(e)
                if e.server_message()
                    .is_some_and(|m| m.contains("not materialized")) =>
            {
                return Ok(None);
            }
            other => other?,
        };
        Ok(page.pointer("/data/0").and_then(|t| {
            Some((
                t["id"].as_str()?.to_owned(),
                t["status"].as_str()?.to_owned(),
            ))
        }))
    }

    /// `thread/archive`: the server unloads the thread at once (subscribers get
    /// `thread/status/changed` `notLoaded` and `thread/archived`).
    pub fn thread_archive(&mut self, thread_id: &str) -> Result<(), RpcError> {
        let params = json!({ "threadId": thread_id });
        self.call("thread/archive", params, self.timeout())
            .map(drop)
    }

    /// `thread/unarchive`: an archived thread cannot be resumed until this.
    pub fn thread_unarchive(&mut self, thread_id: &str) -> Result<(), RpcError> {
        let params = json!({ "threadId": thread_id });
        self.call("thread/unarchive", params, self.timeout())
            .map(drop)
    }

    /// `thread/loaded/list`: ids of every thread loaded in the server (including never-used
    /// ones), following `nextCursor` until the last page.
    pub fn thread_loaded_list(&mut self) -> Result<Vec<String>, RpcError> {
        const METHOD: &str = "thread/loaded/list";
        let mut ids = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let params = match &cursor {
                Some(c) => json!({ "cursor": c }),
                None => json!({}),
            };
            let page: LoadedPage =
                serde_json::from_value(self.call(METHOD, params, self.timeout())?).map_err(
                    |source| RpcError::Decode {
                        method: METHOD.to_owned(),
                        source,
                    },
                )?;
            ids.extend(page.data);
            match page.next_cursor {
                // A server repeating its cursor would loop forever; stop instead.
                Some(next) if cursor.as_deref() != Some(next.as_str()) => cursor = Some(next),
                _ => return Ok(ids),
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ThreadStarted {
    pub thread_id: String,
    /// The whole `thread/start` result (`thread`, `model`, `cwd`, `sandbox`, ...).
    pub raw: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TurnStarted {
    pub turn_id: String,
    /// The whole `turn/start` result (`{turn: {...}}`).
    pub raw: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LoadedPage {
    data: Vec<String>,
    next_cursor: Option<String>,
}

fn text_input(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

fn string_at(method: &str, value: &Value, pointer: &str) -> Result<String, RpcError> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| RpcError::Decode {
            method: method.to_owned(),
            source: serde::de::Error::custom(format!("missing string at `{pointer}`")),
        })
}
