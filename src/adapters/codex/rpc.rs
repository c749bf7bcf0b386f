//! Codex app-server JSON-RPC: spawning `codex app-server --listen unix://SOCK`, the synchronous
//! WebSocket client spoken over that socket, and typed wrappers for the methods spex uses. It
//! owns no policy (when to start a server, which thread to steer, what to do on a lost race):
//! its callers (the Codex adapter's methods, driven by the harness-neutral engines) decide that,
//! and nothing here is reachable from `spex dispatch`.
//!
//! Protocol facts this file relies on (verified against codex 0.169.0, see
//! `../shared/facts/codex.md` section 5): the WebSocket lives at path `/rpc` on the Unix socket;
//! `--listen unix://P` binds the real socket under `/tmp/codex-daemon-<uid>/` and makes `P` a
//! symlink to it; a client must send `initialize` then the `initialized` notification before
//! anything else.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};
use tungstenite::handshake::HandshakeError;
use tungstenite::{Message, WebSocket};

/// The app-server serves its WebSocket at this path; the host part is ignored on a Unix socket.
const WS_URI: &str = "ws://localhost/rpc";

/// `sun_path` holds 108 bytes including the NUL; stay a little under so a path that fits in
/// theory but not in practice (platform differences) still goes through the short real path.
const SUN_PATH_SOFT_LIMIT: usize = 100;

/// Session-identity variables removed from the server's environment: the server outlives the
/// session that happened to start it, and hooks of every thread it runs would otherwise think
/// they belong to that one session.
pub const SESSION_ENV_VARS: [&str; 3] = [
    "SPEX_SESSION_ID",
    "CODEX_THREAD_ID",
    "CLAUDE_CODE_SESSION_ID",
];

/// How long `codex app-server` may take to answer its first `initialize`.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// Grace period between SIGTERM and SIGKILL. SIGTERM lets codex run `SessionEnd` hooks (whose
/// timeout is clamped to at most 3s) and remove its socket and symlink; SIGKILL leaves both.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Poll interval while waiting for a starting server or a dying one.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Notifications kept when the caller does not drain them. A running turn streams many
/// `item/*/delta` notifications; an unread buffer must not grow without bound.
const MAX_BUFFERED_NOTIFICATIONS: usize = 10_000;

/// JSON-RPC "method not found", sent back for server requests nobody handles.
const METHOD_NOT_FOUND: i64 = -32601;

/// Everything that can go wrong talking to an app-server over its socket.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    #[error("cannot connect to codex app-server socket `{sock}`")]
    Connect {
        sock: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("websocket handshake with codex app-server at `{sock}` failed")]
    Handshake {
        sock: PathBuf,
        #[source]
        source: Box<tungstenite::Error>,
    },
    #[error("codex app-server rejected `{method}`: {message} (code {code})")]
    Server {
        method: String,
        code: i64,
        message: String,
        data: Option<Value>,
    },
    #[error("`{method}` got no answer from codex app-server at `{sock}` within {timeout:?}")]
    Timeout {
        method: String,
        sock: PathBuf,
        timeout: Duration,
    },
    #[error("no `{method}` notification from codex app-server at `{sock}` within {timeout:?}")]
    #[cfg(test)]
    NotificationTimeout {
        method: String,
        sock: PathBuf,
        timeout: Duration,
    },
    #[error("codex app-server at `{sock}` closed the connection during `{method}`")]
    Closed { method: String, sock: PathBuf },
    #[error("websocket error during `{method}` on `{sock}`")]
    Transport {
        method: String,
        sock: PathBuf,
        #[source]
        source: Box<tungstenite::Error>,
    },
    #[error(
        "codex app-server at `{sock}` sent a message that is not JSON-RPC during `{method}`: {detail}"
    )]
    Protocol {
        method: String,
        sock: PathBuf,
        detail: String,
    },
    #[error("unexpected `{method}` result from codex app-server")]
    Decode {
        method: String,
        #[source]
        source: serde_json::Error,
    },
}

impl RpcError {
    /// The JSON-RPC error code when the server answered with an error, e.g. `-32600` for
    /// `turn/steer` with no active turn.
    #[cfg(test)]
    pub fn server_code(&self) -> Option<i64> {
        match self {
            Self::Server { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The server's error message, for callers that must tell one `-32600` from another
    /// (codex uses that code for "no active turn to steer" and for a wrong expected turn id).
    pub fn server_message(&self) -> Option<&str> {
        match self {
            Self::Server { message, .. } => Some(message),
            _ => None,
        }
    }
}

/// A notification the server sent while the client was waiting for something else.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    pub method: String,
    /// `Value::Null` when the server sent no params.
    pub params: Value,
}

/// Answers a server-to-client request (approvals, user input, ...): `Some(result)` is sent back
/// as the result, `None` makes the client answer "method not found".
pub type RequestHandler = dyn FnMut(&str, &Value) -> Option<Value> + Send;

/// One message read off the socket, after server requests have been answered.
enum Incoming {
    Response {
        id: Value,
        outcome: Result<Value, Value>,
    },
    Notification(Notification),
    /// A server request was kept for the caller (no handler): see [`Client::wait_request`].
    Requested,
}

/// A synchronous JSON-RPC client over one WebSocket connection to an app-server.
///
/// Calls are strictly sequential: `call` sends a request and reads until the matching response,
/// buffering notifications it sees on the way and answering server requests inline.
pub struct Client {
    ws: WebSocket<UnixStream>,
    sock: PathBuf,
    next_id: i64,
    timeout: Duration,
    notifications: VecDeque<Notification>,
    handler: Option<Box<RequestHandler>>,
    /// Server requests kept unanswered (id, request), for `wait_request`.
    requests: VecDeque<(Value, Notification)>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("sock", &self.sock)
            .field("next_id", &self.next_id)
            .field("buffered_notifications", &self.notifications.len())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Connects and does the WebSocket handshake; `timeout` bounds the whole connect and
    /// becomes the default per-call timeout. Does not send `initialize`.
    pub fn connect(sock: &Path, timeout: Duration) -> Result<Self, RpcError> {
        let deadline = Instant::now() + timeout;
        let stream = connect_path(sock)
            .and_then(UnixStream::connect)
            .map_err(|source| RpcError::Connect {
                sock: sock.to_owned(),
                source,
            })?;
        let set_timeouts = |s: &UnixStream| {
            s.set_read_timeout(Some(timeout))?;
            s.set_write_timeout(Some(timeout))
        };
        set_timeouts(&stream).map_err(|source| RpcError::Connect {
            sock: sock.to_owned(),
            source,
        })?;

        // A read timeout during the handshake surfaces as `Interrupted`; resume it until the
        // deadline rather than failing on the first slow read.
        let mut attempt = tungstenite::client(WS_URI, stream);
        let ws = loop {
            match attempt {
                Ok((ws, _response)) => break ws,
                Err(HandshakeError::Interrupted(mid)) => {
                    if Instant::now() >= deadline {
                        return Err(RpcError::Timeout {
                            method: "websocket handshake".to_owned(),
                            sock: sock.to_owned(),
                            timeout,
                        });
                    }
                    attempt = mid.handshake();
                }
                Err(HandshakeError::Failure(e)) => {
                    return Err(RpcError::Handshake {
                        sock: sock.to_owned(),
                        source: Box::new(e),
                    });
                }
            }
        };
        Ok(Self {
            ws,
            sock: sock.to_owned(),
            next_id: 1,
            timeout,
            notifications: VecDeque::new(),
            handler: None,
            requests: VecDeque::new(),
        })
    }

    /// Connects, handshakes and initializes: the usual way to get a usable client.
    pub fn open(sock: &Path, client_name: &str, timeout: Duration) -> Result<Self, RpcError> {
        let mut client = Self::connect(sock, timeout)?;
        client.initialize(client_name)?;
        Ok(client)
    }

    /// Sends `initialize` and then the `initialized` notification; codex answers every other
    /// request with `-32600 "Not initialized"` before that, and a second `initialize` on the
    /// same connection with `"Already initialized"`. The experimental API is requested because
    /// the schema marks fields spex may use as experimental (`hooks/list` and `turn/steer`
    /// themselves answered without it on 0.169.0). Returns the `initialize` result
    /// (`userAgent`, `codexHome`, platform fields).
    pub fn initialize(&mut self, client_name: &str) -> Result<Value, RpcError> {
        let params = json!({
            "clientInfo": {"name": client_name, "version": env!("CARGO_PKG_VERSION")},
            "capabilities": {"experimentalApi": true},
        });
        let result = self.call("initialize", params, self.timeout)?;
        self.notify("initialized", None)?;
        Ok(result)
    }

    /// Installs the handler for server-to-client requests; a request it returns `None` for is
    /// answered "method not found". Without a handler requests are left unanswered, for the
    /// client that owns them (the person's terminal UI).
    #[cfg(test)]
    pub fn set_request_handler(&mut self, handler: Box<RequestHandler>) {
        self.handler = Some(handler);
    }

    /// Sends a request and waits for its response, at most `timeout`.
    pub fn call(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, RpcError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut request = json!({"jsonrpc": "2.0", "id": id, "method": method});
        request["params"] = params;
        self.send(method, &request, timeout)?;
        let deadline = Instant::now() + timeout;
        loop {
            match self.read_incoming(method, deadline, timeout)? {
                Incoming::Response { id: got, outcome } if got.as_i64() == Some(id) => {
                    return outcome.map_err(|error| server_error(method, &error));
                }
                // A late answer to an earlier call that timed out; its caller is gone.
                Incoming::Response { .. } | Incoming::Requested => {}
                Incoming::Notification(n) => self.buffer(n),
            }
        }
    }

    /// Sends a notification (no response expected).
    pub fn notify(&mut self, method: &str, params: Option<Value>) -> Result<(), RpcError> {
        let mut message = json!({"jsonrpc": "2.0", "method": method});
        if let Some(params) = params {
            message["params"] = params;
        }
        self.send(method, &message, self.timeout)
    }

    /// Notifications read so far and not yet taken, oldest first.
    #[cfg(test)]
    pub fn notifications(&self) -> impl Iterator<Item = &Notification> {
        self.notifications.iter()
    }

    /// Takes every buffered notification, oldest first.
    #[cfg(test)]
    pub fn take_notifications(&mut self) -> Vec<Notification> {
        self.notifications.drain(..).collect()
    }

    /// Returns (and removes from the buffer) the oldest notification named `method` whose params
    /// satisfy `pred`, reading from the socket for at most `timeout` if none is buffered yet.
    #[cfg(test)]
    pub fn wait_notification(
        &mut self,
        method: &str,
        pred: impl FnMut(&Value) -> bool,
        timeout: Duration,
    ) -> Result<Notification, RpcError> {
        self.await_notification(method, pred, timeout)
            .map_err(|e| match e {
                RpcError::Timeout {
                    method,
                    sock,
                    timeout,
                } => RpcError::NotificationTimeout {
                    method,
                    sock,
                    timeout,
                },
                other => other,
            })
    }

    /// The next notification, reading for at most `timeout` (blocking on the socket).
    pub fn next_notification(&mut self, timeout: Duration) -> Result<Notification, RpcError> {
        if let Some(n) = self.notifications.pop_front() {
            return Ok(n);
        }
        let deadline = Instant::now() + timeout;
        loop {
            match self.read_incoming("notification", deadline, timeout)? {
                Incoming::Notification(n) => return Ok(n),
                Incoming::Response { .. } | Incoming::Requested => {}
            }
        }
    }

    /// Sends a close frame; errors are ignored because the connection is going away anyway.
    pub fn close(mut self) {
        let _ = self.ws.close(None);
        let _ = self.ws.flush();
    }

    fn buffer(&mut self, n: Notification) {
        if self.notifications.len() >= MAX_BUFFERED_NOTIFICATIONS {
            self.notifications.pop_front();
        }
        self.notifications.push_back(n);
    }

    fn send(&mut self, method: &str, message: &Value, timeout: Duration) -> Result<(), RpcError> {
        if let Err(e) = self.ws.get_mut().set_write_timeout(Some(timeout)) {
            return Err(self.transport(method, tungstenite::Error::Io(e)));
        }
        match self.ws.send(Message::text(message.to_string())) {
            Ok(()) => Ok(()),
            Err(tungstenite::Error::Io(e)) if is_timeout(&e) => Err(RpcError::Timeout {
                method: method.to_owned(),
                sock: self.sock.clone(),
                timeout,
            }),
            Err(e) => Err(self.transport(method, e)),
        }
    }

    /// Reads until a response or notification arrives, answering server requests on the way.
    /// `method` only labels errors.
    fn read_incoming(
        &mut self,
        method: &str,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Incoming, RpcError> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(RpcError::Timeout {
                    method: method.to_owned(),
                    sock: self.sock.clone(),
                    timeout,
                });
            }
            if let Err(e) = self.ws.get_mut().set_read_timeout(Some(left)) {
                return Err(self.transport(method, tungstenite::Error::Io(e)));
            }
            let text = match self.ws.read() {
                Ok(Message::Text(text)) => text.as_str().to_owned(),
                Ok(Message::Binary(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
                Ok(Message::Close(_)) => {
                    return Err(RpcError::Closed {
                        method: method.to_owned(),
                        sock: self.sock.clone(),
                    });
                }
                // Pings are answered by tungstenite itself on the next read or write.
                Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => continue,
                // tungstenite buffers a partial frame across timeouts, so just loop and let
                // the deadline decide.
                Err(tungstenite::Error::Io(e)) if is_timeout(&e) => continue,
                // A signal (Ctrl-C during a launch) cuts a read with a timeout short, which
                // the kernel never restarts: nothing was read, so read on; the caller looks at
                // the signal at its next step.
                Err(tungstenite::Error::Io(e)) if e.kind() == io::ErrorKind::Interrupted => {
                    continue;
                }
                Err(e) => return Err(self.transport(method, e)),
            };
            let message: Value =
                serde_json::from_str(&text).map_err(|e| self.protocol(method, &e.to_string()))?;
            match classify(message) {
                Some(Classified::Incoming(incoming)) => return Ok(incoming),
                Some(Classified::Request {
                    id,
                    method: request,
                    params,
                }) => {
                    if self.answer_request(method, id.clone(), &request, &params)? {
                        continue;
                    }
                    if self.requests.len() >= MAX_BUFFERED_NOTIFICATIONS {
                        self.requests.pop_front();
                    }
                    self.requests.push_back((
                        id,
                        Notification {
                            method: request,
                            params,
                        },
                    ));
                    return Ok(Incoming::Requested);
                }
                None => return Err(self.protocol(method, &truncate(&text, 200))),
            }
        }
    }

    fn answer_request(
        &mut self,
        during: &str,
        id: Value,
        method: &str,
        params: &Value,
    ) -> Result<bool, RpcError> {
        // Without a handler the request is left to another client: approvals and questions
        // belong to the person in the harness's own UI, and an error answer would decline them.
        // It is kept for `wait_request` (false: not answered).
        let Some(handler) = self.handler.as_mut() else {
            return Ok(false);
        };
        let result = handler(method, params);
        let mut reply = match result {
            Some(result) => json!({"jsonrpc": "2.0", "result": result}),
            None => json!({
                "jsonrpc": "2.0",
                "error": {"code": METHOD_NOT_FOUND, "message": format!("spex does not handle `{method}`")},
            }),
        };
        reply["id"] = id;
        self.send(during, &reply, self.timeout).map(|()| true)
    }

    /// The oldest server request kept (id, request) that satisfies `pred`, reading for at most
    /// `timeout` (notifications read meanwhile are buffered).
    pub fn wait_request(
        &mut self,
        mut pred: impl FnMut(&Notification) -> bool,
        timeout: Duration,
    ) -> Result<(Value, Notification), RpcError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(pos) = self.requests.iter().position(|(_, r)| pred(r)) {
                return Ok(self.requests.remove(pos).expect("position is in range"));
            }
            match self.read_incoming("server request", deadline, timeout)? {
                Incoming::Notification(n) => self.buffer(n),
                Incoming::Response { .. } | Incoming::Requested => {}
            }
        }
    }

    /// Answers server request `id` with `result`.
    pub fn respond(&mut self, id: &Value, result: &Value) -> Result<(), RpcError> {
        let reply = json!({"jsonrpc": "2.0", "id": id, "result": result});
        self.send("response", &reply, self.timeout)
    }

    /// The oldest notification named `method` whose params satisfy `pred` (buffered or read
    /// within `timeout`).
    pub fn await_notification(
        &mut self,
        method: &str,
        mut pred: impl FnMut(&Value) -> bool,
        timeout: Duration,
    ) -> Result<Notification, RpcError> {
        if let Some(pos) = self
            .notifications
            .iter()
            .position(|n| n.method == method && pred(&n.params))
        {
            return Ok(self
                .notifications
                .remove(pos)
                .expect("position is in range"));
        }
        let deadline = Instant::now() + timeout;
        loop {
            match self.read_incoming(method, deadline, timeout)? {
                Incoming::Notification(n) if n.method == method && pred(&n.params) => return Ok(n),
                Incoming::Notification(n) => self.buffer(n),
                Incoming::Response { .. } | Incoming::Requested => {}
            }
        }
    }

    /// Maps a WebSocket error; every flavor of "the server went away" becomes `Closed`, the
    /// error a caller can act on (restart the server), rather than a protocol detail.
    fn transport(&self, method: &str, source: tungstenite::Error) -> RpcError {
        if is_closed(&source) {
            return RpcError::Closed {
                method: method.to_owned(),
                sock: self.sock.clone(),
            };
        }
        RpcError::Transport {
            method: method.to_owned(),
            sock: self.sock.clone(),
            source: Box::new(source),
        }
    }

    fn protocol(&self, method: &str, detail: &str) -> RpcError {
        RpcError::Protocol {
            method: method.to_owned(),
            sock: self.sock.clone(),
            detail: detail.to_owned(),
        }
    }
}

/// Typed wrappers. Params follow `../shared/facts/codex.md` section 5 and the JSON schema that
/// `codex app-server generate-json-schema --experimental` prints for 0.169.0.
impl Client {
    /// `hooks/list {cwds}`: every hook codex discovers for those working directories, with its
    /// trust status, flattened across cwds (each entry remembers its cwd). No thread is needed.
    /// An untrusted project, a relative or a missing cwd all give an empty list, not an error;
    /// an empty `cwds` lists the server's own working directory.
    pub fn hooks_list(&mut self, cwds: &[PathBuf]) -> Result<Vec<HookEntry>, RpcError> {
        Ok(self
            .hooks_list_by_cwd(cwds)?
            .into_iter()
            .flat_map(|listing| listing.hooks)
            .collect())
    }

    /// `hooks/list {cwds}` keeping the per-cwd grouping and the discovery warnings and errors
    /// (e.g. a hooks.json that does not parse).
    pub fn hooks_list_by_cwd(&mut self, cwds: &[PathBuf]) -> Result<Vec<HooksListing>, RpcError> {
        const METHOD: &str = "hooks/list";
        let result = self.call(METHOD, json!({ "cwds": cwds }), self.timeout)?;
        parse_hooks_list(&result).map_err(|source| RpcError::Decode {
            method: METHOD.to_owned(),
            source,
        })
    }

    /// `thread/start {cwd}`: a new thread, loaded in the server and subscribed by this client.
    pub fn thread_start(&mut self, cwd: &Path) -> Result<ThreadStarted, RpcError> {
        const METHOD: &str = "thread/start";
        let raw = self.call(METHOD, json!({ "cwd": cwd }), self.timeout)?;
        let thread_id = string_at(METHOD, &raw, "/thread/id")?;
        Ok(ThreadStarted { thread_id, raw })
    }

    /// `turn/start {threadId, input}` with one text input; returns the new turn.
    pub fn turn_start(&mut self, thread_id: &str, text: &str) -> Result<TurnStarted, RpcError> {
        const METHOD: &str = "turn/start";
        let params = json!({"threadId": thread_id, "input": [text_input(text)]});
        let raw = self.call(METHOD, params, self.timeout)?;
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
        let raw = self.call(METHOD, params, self.timeout)?;
        string_at(METHOD, &raw, "/turnId")
    }

    /// `turn/interrupt {threadId, turnId}`; the turn then completes with `status: "interrupted"`.
    /// Observed on 0.169.0: right after `turn/start` returns (and right after a steer) this fails
    /// with `-32600 "no active turn to interrupt"`; after the `turn/started` notification it
    /// works. Wait for that notification first.
    pub fn turn_interrupt(&mut self, thread_id: &str, turn_id: &str) -> Result<(), RpcError> {
        let params = json!({"threadId": thread_id, "turnId": turn_id});
        self.call("turn/interrupt", params, self.timeout).map(drop)
    }

    /// `thread/resume {threadId, excludeTurns}`: loads a thread from its rollout when the
    /// server does not hold it, and subscribes this client to its turn and item notifications.
    /// A brand-new thread has no rollout until its first turn or name: `-32600 "no rollout
    /// found"`.
    pub fn thread_resume(&mut self, thread_id: &str) -> Result<Value, RpcError> {
        let params = json!({"threadId": thread_id, "excludeTurns": true});
        self.call("thread/resume", params, self.timeout)
    }

    /// `thread/name/set`: names the thread; it also writes the thread's rollout, so other
    /// clients (and `codex --remote ... resume`) can join a thread that has no turn yet.
    pub fn thread_name_set(&mut self, thread_id: &str, name: &str) -> Result<(), RpcError> {
        let params = json!({"threadId": thread_id, "name": name});
        self.call("thread/name/set", params, self.timeout).map(drop)
    }

    /// The newest turn of a thread (`thread/turns/list`, newest first, one entry): its id and
    /// status (`inProgress`, `completed`, ...). `None` for a thread with no turn.
    pub fn newest_turn(&mut self, thread_id: &str) -> Result<Option<(String, String)>, RpcError> {
        const METHOD: &str = "thread/turns/list";
        let params = json!({"threadId": thread_id, "limit": 1, "sortDirection": "desc"});
        let page = match self.call(METHOD, params, self.timeout) {
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
        self.call("thread/archive", params, self.timeout).map(drop)
    }

    /// `thread/unarchive`: an archived thread cannot be resumed until this.
    pub fn thread_unarchive(&mut self, thread_id: &str) -> Result<(), RpcError> {
        let params = json!({ "threadId": thread_id });
        self.call("thread/unarchive", params, self.timeout)
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
                serde_json::from_value(self.call(METHOD, params, self.timeout)?).map_err(
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

/// `trustStatus` of a hook as `hooks/list` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustStatus {
    /// The stored `trusted_hash` equals the hook's current hash: it runs.
    Trusted,
    /// A `trusted_hash` is stored but differs (the hook was edited): it does not run.
    Modified,
    /// No `trusted_hash` stored: it does not run.
    Untrusted,
    /// From a managed layer (system, MDM, requirements): always runs.
    Managed,
    /// A status this version of spex does not know.
    Other(String),
}

impl TrustStatus {
    fn from_wire(s: &str) -> Self {
        match s {
            "trusted" => Self::Trusted,
            "modified" => Self::Modified,
            "untrusted" => Self::Untrusted,
            "managed" => Self::Managed,
            other => Self::Other(other.to_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::Trusted => "trusted",
            Self::Modified => "modified",
            Self::Untrusted => "untrusted",
            Self::Managed => "managed",
            Self::Other(s) => s,
        }
    }
}

/// One hook handler as `hooks/list` reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct HookEntry {
    /// The cwd this entry was listed for.
    pub cwd: PathBuf,
    /// Wire event name, camelCase (`preToolUse`, `stop`); see [`HookEntry::hooks_json_event`].
    pub event_name: String,
    /// `command`, `mcpTool`, `prompt` or `agent`.
    pub handler_type: String,
    /// The POSIX command of a command handler.
    pub command: Option<String>,
    pub matcher: Option<String>,
    /// The hooks.json or config.toml the hook came from, as codex spells it.
    pub source_path: PathBuf,
    /// The config layer (`project`, `user`, `plugin`, ...).
    pub source: String,
    /// The `hooks.state` key: `<source path>:<event label>:<group index>:<handler index>`.
    pub key: String,
    pub group_index: Option<usize>,
    pub handler_index: Option<usize>,
    /// `false` under `[hooks.state."<key>"] enabled = false`. Independent of trust: a disabled
    /// hook whose hash matches is still reported `trusted`.
    pub enabled: bool,
    pub is_managed: bool,
    pub trust: TrustStatus,
    /// `sha256:<hex>`, the value a `trusted_hash` must hold for the hook to run.
    pub current_hash: String,
    pub timeout_sec: Option<u64>,
    /// The entry exactly as the server sent it.
    pub raw: Value,
}

impl HookEntry {
    /// The event name as hooks.json spells it (`PreToolUse`, `Stop`).
    pub fn hooks_json_event(&self) -> String {
        let mut chars = self.event_name.chars();
        chars
            .next()
            .map(|first| first.to_uppercase().chain(chars).collect())
            .unwrap_or_default()
    }
}

/// The hooks discovered for one cwd, with discovery problems.
#[derive(Debug, Clone, PartialEq)]
pub struct HooksListing {
    pub cwd: PathBuf,
    pub hooks: Vec<HookEntry>,
    pub warnings: Vec<String>,
    pub errors: Vec<HookListError>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct HookListError {
    pub path: PathBuf,
    pub message: String,
}

/// Wire shapes of `hooks/list` (`HooksListResponse` in the generated schema); unknown fields
/// are ignored so a newer codex does not break parsing.
mod wire {
    use serde::Deserialize;
    use serde_json::Value;
    use std::path::PathBuf;

    #[derive(Deserialize)]
    pub struct Response {
        pub data: Vec<Listing>,
    }

    #[derive(Deserialize)]
    pub struct Listing {
        pub cwd: PathBuf,
        pub hooks: Vec<Value>,
        #[serde(default)]
        pub warnings: Vec<String>,
        #[serde(default)]
        pub errors: Vec<super::HookListError>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Hook {
        pub event_name: String,
        pub handler_type: String,
        pub command: Option<String>,
        pub matcher: Option<String>,
        pub source_path: PathBuf,
        pub source: String,
        pub key: String,
        pub enabled: bool,
        #[serde(default)]
        pub is_managed: bool,
        pub trust_status: String,
        pub current_hash: String,
        pub timeout_sec: Option<u64>,
    }
}

fn parse_hooks_list(result: &Value) -> Result<Vec<HooksListing>, serde_json::Error> {
    let response = wire::Response::deserialize(result)?;
    response
        .data
        .into_iter()
        .map(|listing| {
            let hooks = listing
                .hooks
                .into_iter()
                .map(|raw| {
                    let hook = wire::Hook::deserialize(&raw)?;
                    let (group_index, handler_index) = key_indices(&hook.key);
                    Ok(HookEntry {
                        cwd: listing.cwd.clone(),
                        event_name: hook.event_name,
                        handler_type: hook.handler_type,
                        command: hook.command,
                        matcher: hook.matcher,
                        source_path: hook.source_path,
                        source: hook.source,
                        key: hook.key,
                        group_index,
                        handler_index,
                        enabled: hook.enabled,
                        is_managed: hook.is_managed,
                        trust: TrustStatus::from_wire(&hook.trust_status),
                        current_hash: hook.current_hash,
                        timeout_sec: hook.timeout_sec,
                        raw,
                    })
                })
                .collect::<Result<_, serde_json::Error>>()?;
            Ok(HooksListing {
                cwd: listing.cwd,
                hooks,
                warnings: listing.warnings,
                errors: listing.errors,
            })
        })
        .collect()
}

/// Group and handler indices from a `hooks.state` key. Parsed from the right because the source
/// path itself may contain `:`.
fn key_indices(key: &str) -> (Option<usize>, Option<usize>) {
    let mut parts = key.rsplitn(3, ':');
    let handler = parts.next().and_then(|s| s.parse().ok());
    let group = parts.next().and_then(|s| s.parse().ok());
    match (group, handler) {
        (Some(g), Some(h)) => (Some(g), Some(h)),
        _ => (None, None),
    }
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

enum Classified {
    Incoming(Incoming),
    Request {
        id: Value,
        method: String,
        params: Value,
    },
}

/// Sorts a JSON-RPC message into response, notification or server request. `None` for
/// anything else.
fn classify(mut message: Value) -> Option<Classified> {
    let object = message.as_object_mut()?;
    let method = object.remove("method");
    let id = object.remove("id");
    let params = object.remove("params").unwrap_or(Value::Null);
    match (method, id) {
        (Some(Value::String(method)), Some(id)) => Some(Classified::Request { id, method, params }),
        (Some(Value::String(method)), None) => {
            Some(Classified::Incoming(Incoming::Notification(Notification {
                method,
                params,
            })))
        }
        (None, Some(id)) => {
            let outcome = if let Some(error) = object.remove("error") {
                Err(error)
            } else {
                Ok(object.remove("result")?)
            };
            Some(Classified::Incoming(Incoming::Response { id, outcome }))
        }
        _ => None,
    }
}

fn server_error(method: &str, error: &Value) -> RpcError {
    RpcError::Server {
        method: method.to_owned(),
        code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
        message: error
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| error.to_string(), str::to_owned),
        data: error.get("data").cloned(),
    }
}

fn is_closed(e: &tungstenite::Error) -> bool {
    use tungstenite::error::ProtocolError;
    match e {
        tungstenite::Error::ConnectionClosed
        | tungstenite::Error::AlreadyClosed
        | tungstenite::Error::Protocol(ProtocolError::ResetWithoutClosingHandshake) => true,
        tungstenite::Error::Io(e) => matches!(
            e.kind(),
            io::ErrorKind::BrokenPipe
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::UnexpectedEof
        ),
        _ => false,
    }
}

fn is_timeout(e: &io::Error) -> bool {
    // SO_RCVTIMEO expiry is EAGAIN (`WouldBlock`) on Linux; `TimedOut` elsewhere.
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_owned(),
    }
}

/// The path to hand to `connect(2)`. Codex makes the requested path a symlink to a real socket
/// with a short name, so a path too long for `sun_path` is reached through its target. A long
/// path that does not resolve fails with the resolution error (usually "not found"), which says
/// more than the kernel's "path too long".
fn connect_path(sock: &Path) -> io::Result<PathBuf> {
    if sock.as_os_str().len() < SUN_PATH_SOFT_LIMIT {
        return Ok(sock.to_owned());
    }
    std::fs::canonicalize(sock)
}

/// Connects and initializes, answering whether a server is alive at `sock`. Liveness means
/// the server answers `initialize`; a socket file alone may be left over from a killed server.
pub fn probe(sock: &Path, timeout: Duration) -> Result<Value, RpcError> {
    let mut client = Client::connect(sock, timeout)?;
    // Named plain "spex": codex takes the first client's name as the server-wide user-agent
    // originator (`userAgent: "spex/0.169.0 ..."` for every later client too), and the first
    // client of a server spex starts is this probe.
    let result = client.initialize("spex")?;
    client.close();
    Ok(result)
}

/// How to start an app-server.
#[derive(Debug, Clone)]
pub struct AppServerConfig {
    /// The `codex` executable.
    pub codex_bin: PathBuf,
    /// The socket path passed to `--listen unix://`; codex makes it a symlink.
    pub sock: PathBuf,
    /// `CODEX_HOME` for the server (config.toml, trust state, sessions).
    pub codex_home: PathBuf,
    /// Where the server's stdout and stderr go (appended, so a crash's log survives a restart).
    pub log: PathBuf,
    /// Extra environment for the server, applied after [`SESSION_ENV_VARS`] are removed.
    pub env: Vec<(OsString, OsString)>,
    /// The server's working directory; inherited when `None`.
    pub cwd: Option<PathBuf>,
    pub startup_timeout: Duration,
}

impl AppServerConfig {
    pub fn new(
        codex_bin: impl Into<PathBuf>,
        sock: impl Into<PathBuf>,
        codex_home: impl Into<PathBuf>,
        log: impl Into<PathBuf>,
    ) -> Self {
        Self {
            codex_bin: codex_bin.into(),
            sock: sock.into(),
            codex_home: codex_home.into(),
            log: log.into(),
            env: Vec::new(),
            cwd: None,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AppServerError {
    #[error("a codex app-server already answers at `{sock}`")]
    AlreadyRunning { sock: PathBuf },
    #[error("cannot open the codex app-server log `{path}`")]
    Log {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot start `{bin} app-server`\nhint: check the path to the codex executable")]
    Spawn {
        bin: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "codex app-server for `{sock}` exited ({status}) before answering `initialize`; see `{log}`{tail}"
    )]
    Exited {
        sock: PathBuf,
        status: ExitStatus,
        log: PathBuf,
        /// The last lines of the log, preformatted (empty when the log is empty).
        tail: String,
    },
    #[error(
        "codex app-server for `{sock}` did not answer `initialize` within {waited:?}; see `{log}`"
    )]
    NotReady {
        sock: PathBuf,
        waited: Duration,
        log: PathBuf,
        #[source]
        last: Option<Box<RpcError>>,
    },
}

/// A running `codex app-server` child, in its own process group. Dropping it stops the whole
/// group (SIGTERM, then SIGKILL after a grace period) unless [`AppServer::detach`] was called.
#[derive(Debug)]
pub struct AppServer {
    child: Child,
    sock: PathBuf,
    log: PathBuf,
    detached: bool,
}

impl AppServer {
    /// Starts the server and waits until it answers `initialize`. Fails if a server already
    /// answers at the socket: two servers on one path would fight over the symlink.
    pub fn spawn(config: &AppServerConfig) -> Result<Self, AppServerError> {
        if probe(&config.sock, Duration::from_secs(2)).is_ok() {
            return Err(AppServerError::AlreadyRunning {
                sock: config.sock.clone(),
            });
        }
        let log_error = |source| AppServerError::Log {
            path: config.log.clone(),
            source,
        };
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&config.log)
            .map_err(log_error)?;
        // Where this run's output starts, so a startup error quotes this run and not an
        // earlier one (the log is appended to).
        let log_start = log.metadata().map_err(log_error)?.len();
        let log_err = log.try_clone().map_err(log_error)?;

        let mut listen = OsString::from("unix://");
        listen.push(&config.sock);
        let mut command = Command::new(&config.codex_bin);
        command
            .arg("app-server")
            .arg("--listen")
            .arg(listen)
            .env("CODEX_HOME", &config.codex_home)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            // Its own group: a Ctrl-C in the launching terminal must not reach it, and Drop can
            // stop codex together with whatever it spawned.
            .process_group(0);
        for var in SESSION_ENV_VARS {
            command.env_remove(var);
        }
        command.envs(config.env.iter().map(|(k, v)| (k, v)));
        if let Some(cwd) = &config.cwd {
            command.current_dir(cwd);
        }
        let child = command.spawn().map_err(|source| AppServerError::Spawn {
            bin: config.codex_bin.clone(),
            source,
        })?;
        let mut server = Self {
            child,
            sock: config.sock.clone(),
            log: config.log.clone(),
            detached: false,
        };
        server.wait_ready(config.startup_timeout, log_start)?;
        Ok(server)
    }

    fn wait_ready(&mut self, timeout: Duration, log_start: u64) -> Result<(), AppServerError> {
        let start = Instant::now();
        let mut last = None;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(AppServerError::Exited {
                    sock: self.sock.clone(),
                    status,
                    log: self.log.clone(),
                    tail: log_tail(&self.log, log_start),
                });
            }
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(AppServerError::NotReady {
                    sock: self.sock.clone(),
                    waited: timeout,
                    log: self.log.clone(),
                    last,
                });
            }
            // Until codex binds, connect fails at once (no file, or a refused stale socket);
            // the short per-attempt budget keeps a wedged accept from eating the deadline.
            match probe(&self.sock, left.min(Duration::from_secs(2))) {
                Ok(_) => return Ok(()),
                Err(e) => last = Some(Box::new(e)),
            }
            thread::sleep(POLL_INTERVAL.min(left));
        }
    }

    /// Opens an initialized client on this server.
    #[cfg(test)]
    pub fn client(&self, client_name: &str, timeout: Duration) -> Result<Client, RpcError> {
        Client::open(&self.sock, client_name, timeout)
    }

    /// Leaves the server running after this handle is gone (it is meant to outlive the
    /// `spex` invocation that started it). Returns its pid.
    pub fn detach(mut self) -> u32 {
        self.detached = true;
        self.child.id()
    }

    /// Stops the process group: SIGTERM, then SIGKILL if it is still alive after the grace
    /// period. Returns the server's exit status.
    #[cfg(test)]
    pub fn shutdown(mut self) -> io::Result<ExitStatus> {
        self.stop()
    }

    fn stop(&mut self) -> io::Result<ExitStatus> {
        self.detached = true;
        if let Some(status) = self.child.try_wait()? {
            return Ok(status);
        }
        let group = rustix::process::Pid::from_child(&self.child);
        // ESRCH only means the group is already gone.
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::TERM);
        let deadline = Instant::now() + SHUTDOWN_GRACE;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            thread::sleep(POLL_INTERVAL);
        }
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        self.child.wait()
    }
}

impl Drop for AppServer {
    fn drop(&mut self) {
        if !self.detached {
            let _ = self.stop();
        }
    }
}

/// The last few lines written to a log since `start`, indented under a heading, for an error
/// message. Best effort: an unreadable log gives an empty string.
fn log_tail(path: &Path, start: u64) -> String {
    const MAX_BYTES: u64 = 4096;
    let Ok(mut file) = File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let mut bytes = Vec::new();
    if file
        .seek(SeekFrom::Start(start.max(len.saturating_sub(MAX_BYTES))))
        .is_err()
        || file.read_to_end(&mut bytes).is_err()
    {
        return String::new();
    }
    format_tail(&String::from_utf8_lossy(&bytes))
}

fn format_tail(text: &str) -> String {
    const MAX_LINES: usize = 8;
    // codex colors its tracing output even into a file; escapes would garble the terminal.
    let clean = strip_ansi(text);
    let lines: Vec<&str> = clean.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return String::new();
    }
    let mut out = String::from("\nlast lines of the log:");
    for line in &lines[lines.len().saturating_sub(MAX_LINES)..] {
        out.push_str("\n  ");
        out.push_str(line);
    }
    out
}

/// Removes CSI escape sequences (`ESC [ ... final byte`), which is all codex's logger emits.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            // Parameter and intermediate bytes, then one final byte in `@`..=`~`.
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write as _;
    use std::os::unix::net::UnixListener;

    /// `hooks/list {"cwds":["/tmp/rpcexp/repo"]}` answered by codex 0.169.0 for a trusted repo
    /// whose `.codex/hooks.json` has `PreToolUse` (matcher `Bash`, two handlers),
    /// `UserPromptSubmit` and `Stop`, with `[hooks.state]` entries: `pre_tool_use:0:0` right
    /// hash, `pre_tool_use:0:1` wrong hash, `user_prompt_submit` none, `stop` right hash plus
    /// `enabled = false`.
    const CAPTURED_HOOKS_LIST: &str = r#"{"data":[{"cwd":"/tmp/rpcexp/repo","errors":[],"hooks":[
      {"additionalContextLimit":null,"async":false,"command":"echo x","currentHash":"sha256:386325ebc6d635023598f537fa3f9a346464b03ad0ff7215fbe0885c2bace1e1","displayOrder":0,"enabled":true,"environmentId":null,"eventName":"preToolUse","handlerType":"command","isManaged":false,"key":"/tmp/rpcexp/repo/.codex/hooks.json:pre_tool_use:0:0","matcher":"Bash","pluginId":null,"source":"project","sourcePath":"/tmp/rpcexp/repo/.codex/hooks.json","statusMessage":null,"timeoutSec":30,"trustStatus":"trusted"},
      {"additionalContextLimit":null,"async":false,"command":"echo y","currentHash":"sha256:300e41a06971d9dd08c08e93c8beef4015d29817e71b3f9439100f9240c56941","displayOrder":1,"enabled":true,"environmentId":null,"eventName":"preToolUse","handlerType":"command","isManaged":false,"key":"/tmp/rpcexp/repo/.codex/hooks.json:pre_tool_use:0:1","matcher":"Bash","pluginId":null,"source":"project","sourcePath":"/tmp/rpcexp/repo/.codex/hooks.json","statusMessage":null,"timeoutSec":600,"trustStatus":"modified"},
      {"additionalContextLimit":null,"async":false,"command":"echo ups","currentHash":"sha256:9c4ab9d6e10ed8234dcda93f0586d119be57dcd3f988d610c58b2f9d127f6564","displayOrder":2,"enabled":true,"environmentId":null,"eventName":"userPromptSubmit","handlerType":"command","isManaged":false,"key":"/tmp/rpcexp/repo/.codex/hooks.json:user_prompt_submit:0:0","matcher":null,"pluginId":null,"source":"project","sourcePath":"/tmp/rpcexp/repo/.codex/hooks.json","statusMessage":null,"timeoutSec":600,"trustStatus":"untrusted"},
      {"additionalContextLimit":null,"async":false,"command":"echo x","currentHash":"sha256:7cd3bd75d5f588f95ee4f55650a36b04e9a48c57020107701365d29e991b85c0","displayOrder":3,"enabled":false,"environmentId":null,"eventName":"stop","handlerType":"command","isManaged":false,"key":"/tmp/rpcexp/repo/.codex/hooks.json:stop:0:0","matcher":null,"pluginId":null,"source":"project","sourcePath":"/tmp/rpcexp/repo/.codex/hooks.json","statusMessage":null,"timeoutSec":600,"trustStatus":"trusted"}
    ],"warnings":[]}]}"#;

    #[test]
    fn parses_captured_hooks_list() {
        let result: Value = serde_json::from_str(CAPTURED_HOOKS_LIST).unwrap();
        let listings = parse_hooks_list(&result).unwrap();
        assert_eq!(listings.len(), 1);
        assert_eq!(listings[0].cwd, Path::new("/tmp/rpcexp/repo"));
        let summary: Vec<_> = listings[0]
            .hooks
            .iter()
            .map(|h| {
                (
                    h.hooks_json_event(),
                    h.command.as_deref().unwrap(),
                    h.group_index,
                    h.handler_index,
                    h.enabled,
                    h.trust.as_str(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "PreToolUse".to_owned(),
                    "echo x",
                    Some(0),
                    Some(0),
                    true,
                    "trusted"
                ),
                (
                    "PreToolUse".to_owned(),
                    "echo y",
                    Some(0),
                    Some(1),
                    true,
                    "modified"
                ),
                (
                    "UserPromptSubmit".to_owned(),
                    "echo ups",
                    Some(0),
                    Some(0),
                    true,
                    "untrusted"
                ),
                (
                    "Stop".to_owned(),
                    "echo x",
                    Some(0),
                    Some(0),
                    false,
                    "trusted"
                ),
            ]
        );
        let first = &listings[0].hooks[0];
        assert_eq!(
            first.source_path,
            Path::new("/tmp/rpcexp/repo/.codex/hooks.json")
        );
        assert_eq!(first.source, "project");
        assert_eq!(first.matcher.as_deref(), Some("Bash"));
        assert_eq!(first.timeout_sec, Some(30));
        assert_eq!(
            first.current_hash,
            "sha256:386325ebc6d635023598f537fa3f9a346464b03ad0ff7215fbe0885c2bace1e1"
        );
        assert_eq!(first.raw["displayOrder"], 0);
    }

    #[test]
    fn hooks_list_tolerates_unknown_fields_and_statuses() {
        let result = json!({"data": [{"cwd": "/r", "errors": [{"path": "/r/.codex/hooks.json", "message": "bad"}],
            "warnings": ["w"], "hooks": [{"eventName": "preToolUse", "handlerType": "mcpTool", "server": "s",
            "tool": "t", "sourcePath": "/r/.codex/hooks.json", "source": "project", "key": "odd-key",
            "enabled": true, "trustStatus": "quarantined", "currentHash": "sha256:00", "newField": 1}]}]});
        let listing = &parse_hooks_list(&result).unwrap()[0];
        assert_eq!(listing.warnings, ["w"]);
        assert_eq!(listing.errors[0].message, "bad");
        let hook = &listing.hooks[0];
        assert_eq!(hook.command, None);
        assert_eq!((hook.group_index, hook.handler_index), (None, None));
        assert_eq!(hook.trust, TrustStatus::Other("quarantined".to_owned()));
        assert_eq!(hook.timeout_sec, None);
    }

    #[test]
    fn key_indices_parse_from_the_right() {
        for (key, want) in [
            ("/r/.codex/hooks.json:pre_tool_use:0:1", (Some(0), Some(1))),
            ("/odd:path/hooks.json:stop:2:3", (Some(2), Some(3))),
            ("/r/config.toml:stop:x:0", (None, None)),
            ("no-indices", (None, None)),
        ] {
            assert_eq!(key_indices(key), want, "{key}");
        }
    }

    #[test]
    fn classify_sorts_messages() {
        let cases = [
            (json!({"id": 1, "result": {"a": 1}}), "response ok"),
            (
                json!({"id": 2, "error": {"code": -32600, "message": "m"}}),
                "response err",
            ),
            (
                json!({"method": "turn/started", "params": {}}),
                "notification",
            ),
            (
                json!({"id": "r1", "method": "item/tool/requestUserInput", "params": {}}),
                "request",
            ),
            (json!({"id": 3}), "none"),
            (json!([1, 2]), "none"),
        ];
        for (message, want) in cases {
            let got = match classify(message.clone()) {
                Some(Classified::Incoming(Incoming::Response { outcome: Ok(_), .. })) => {
                    "response ok"
                }
                Some(Classified::Incoming(Incoming::Response {
                    outcome: Err(_), ..
                })) => "response err",
                Some(Classified::Incoming(Incoming::Notification(_))) => "notification",
                Some(Classified::Request { .. }) => "request",
                Some(Classified::Incoming(Incoming::Requested)) => "kept",
                None => "none",
            };
            assert_eq!(got, want, "{message}");
        }
    }

    #[test]
    fn server_error_keeps_code_and_message() {
        let e = server_error(
            "turn/steer",
            &json!({"code": -32600, "message": "no active turn to steer"}),
        );
        assert_eq!(e.server_code(), Some(-32600));
        assert_eq!(e.server_message(), Some("no active turn to steer"));
        assert_eq!(
            e.to_string(),
            "codex app-server rejected `turn/steer`: no active turn to steer (code -32600)"
        );
    }

    #[test]
    fn log_tail_drops_colors_and_keeps_the_last_lines() {
        let mut log =
            "\u{1b}[2m2026-01-01T00:00:00Z\u{1b}[0m \u{1b}[31mERROR\u{1b}[0m boom\n\n".to_owned();
        for i in 0..20 {
            writeln!(log, "line {i}").unwrap();
        }
        let tail = format_tail(&log);
        assert!(
            tail.starts_with("\nlast lines of the log:\n  line 12"),
            "{tail}"
        );
        assert!(tail.ends_with("  line 19"), "{tail}");
        assert_eq!(strip_ansi("\u{1b}[31mERROR\u{1b}[0m x"), "ERROR x");
        assert_eq!(format_tail("\n  \n"), "");
    }

    /// A scripted WebSocket server on a Unix socket, standing in for codex.
    fn fake_server(
        script: impl FnOnce(&mut WebSocket<UnixStream>) + Send + 'static,
    ) -> (tempfile::TempDir, PathBuf, thread::JoinHandle<()>) {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("s.sock");
        let listener = UnixListener::bind(&sock).unwrap();
        let handle = thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut ws = tungstenite::accept(stream).unwrap();
            script(&mut ws);
        });
        (dir, sock, handle)
    }

    fn read_json(ws: &mut WebSocket<UnixStream>) -> Value {
        loop {
            if let Message::Text(t) = ws.read().unwrap() {
                return serde_json::from_str(t.as_str()).unwrap();
            }
        }
    }

    fn send_json(ws: &mut WebSocket<UnixStream>, v: &Value) {
        ws.send(Message::text(v.to_string())).unwrap();
    }

    #[test]
    fn call_matches_ids_buffers_notifications_and_answers_requests() {
        let (_dir, sock, server) = fake_server(|ws| {
            let req = read_json(ws);
            assert_eq!(req["method"], "x/echo");
            assert_eq!(req["params"], json!({"a": 1}));
            send_json(ws, &json!({"method": "turn/started", "params": {"n": 1}}));
            send_json(
                ws,
                &json!({"id": "s1", "method": "item/tool/requestUserInput", "params": {}}),
            );
            // No handler yet: the request is left for another client, unanswered.
            // A stale answer to some earlier call must not be taken for this one.
            send_json(ws, &json!({"id": 999, "result": "stale"}));
            send_json(ws, &json!({"id": req["id"], "result": {"echo": 1}}));

            let req = read_json(ws);
            send_json(
                ws,
                &json!({"id": "s2", "method": "item/commandExecution/requestApproval", "params": {"c": 2}}),
            );
            let reply = read_json(ws);
            assert_eq!(reply["result"], json!({"decision": "accept"}));
            send_json(ws, &json!({"method": "turn/completed", "params": {"n": 2}}));
            send_json(
                ws,
                &json!({"id": req["id"], "error": {"code": -32600, "message": "nope"}}),
            );

            send_json(ws, &json!({"method": "turn/completed", "params": {"n": 3}}));
            // Silence, then close: the client's waits must time out, then see the close.
            let _ = read_json(ws);
            thread::sleep(Duration::from_millis(500));
        });
        let mut client = Client::connect(&sock, Duration::from_secs(5)).unwrap();
        let result = client
            .call("x/echo", json!({"a": 1}), Duration::from_secs(5))
            .unwrap();
        assert_eq!(result, json!({"echo": 1}));
        assert_eq!(client.notifications().count(), 1);

        client.set_request_handler(Box::new(|method, params| {
            (method == "item/commandExecution/requestApproval" && params["c"] == 2)
                .then(|| json!({"decision": "accept"}))
        }));
        let err = client
            .call("x/fail", json!({}), Duration::from_secs(5))
            .unwrap_err();
        assert_eq!(err.server_message(), Some("nope"));

        // Buffered first, then read from the socket, each taken once.
        let n = client
            .wait_notification("turn/completed", |_| true, Duration::from_secs(5))
            .unwrap();
        assert_eq!(n.params["n"], 2);
        let n = client
            .wait_notification("turn/completed", |p| p["n"] == 3, Duration::from_secs(5))
            .unwrap();
        assert_eq!(n.params["n"], 3);
        let err = client
            .wait_notification("turn/completed", |_| true, Duration::from_millis(200))
            .unwrap_err();
        assert!(
            matches!(err, RpcError::NotificationTimeout { .. }),
            "{err:?}"
        );
        assert!(
            err.to_string().contains(&sock.display().to_string()),
            "{err}"
        );
        let err = client
            .call("x/slow", json!({}), Duration::from_millis(200))
            .unwrap_err();
        assert!(
            err.to_string().starts_with("`x/slow` got no answer"),
            "{err}"
        );
        assert_eq!(client.take_notifications().len(), 1);
        server.join().unwrap();
        let err = client
            .call("x/after", json!({}), Duration::from_secs(5))
            .unwrap_err();
        assert!(matches!(err, RpcError::Closed { .. }), "{err:?}");
    }

    /// End to end against a real codex when `SPEX_TEST_CODEX` names the binary; skipped
    /// otherwise (the integration suite covers it).
    #[test]
    fn real_app_server_lists_hooks_and_sees_trust_change() {
        let Some(codex) = std::env::var_os("SPEX_TEST_CODEX") else {
            eprintln!("skipped: set SPEX_TEST_CODEX to a codex binary to run");
            return;
        };
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let home = tmp.path().join("home");
        std::fs::create_dir_all(repo.join(".codex")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let status = Command::new("git")
            .arg("init")
            .arg("-q")
            .arg(&repo)
            .status()
            .unwrap();
        assert!(status.success());
        let hooks_json = repo.join(".codex/hooks.json");
        std::fs::write(
            &hooks_json,
            r#"{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"echo x"}]}],
               "Stop":[{"hooks":[{"type":"command","command":"echo x"}]}]}}"#,
        )
        .unwrap();
        let trust = format!(
            "[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            repo.display()
        );
        std::fs::write(home.join("config.toml"), &trust).unwrap();

        let mut config = AppServerConfig::new(
            codex,
            tmp.path().join("s.sock"),
            &home,
            tmp.path().join("server.log"),
        );
        config.cwd = Some(home.clone());
        let server = AppServer::spawn(&config).unwrap();
        let mut client = server.client("spex-test", Duration::from_secs(10)).unwrap();
        let hooks = client.hooks_list(std::slice::from_ref(&repo)).unwrap();
        let events: Vec<_> = hooks
            .iter()
            .map(|h| (h.hooks_json_event(), h.trust.clone()))
            .collect();
        assert_eq!(
            events,
            [
                ("PreToolUse".to_owned(), TrustStatus::Untrusted),
                ("Stop".to_owned(), TrustStatus::Untrusted)
            ]
        );
        assert_eq!(hooks[0].source_path, hooks_json);

        // Trust the first hook with the hash codex reports; a running server rereads config.
        let state = format!(
            "{trust}\n[hooks.state.\"{}\"]\ntrusted_hash = \"{}\"\n",
            hooks[0].key, hooks[0].current_hash
        );
        std::fs::write(home.join("config.toml"), state).unwrap();
        let hooks = client.hooks_list(std::slice::from_ref(&repo)).unwrap();
        assert_eq!(hooks[0].trust, TrustStatus::Trusted);
        assert_eq!(hooks[1].trust, TrustStatus::Untrusted);

        let thread = client.thread_start(&repo).unwrap();
        assert!(
            client
                .thread_loaded_list()
                .unwrap()
                .contains(&thread.thread_id)
        );
        server.shutdown().unwrap();
    }
}
