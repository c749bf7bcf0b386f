//! The JSON-RPC transport to a Codex app-server: one synchronous WebSocket connection over its
//! Unix socket, requests matched to responses by id with a per-call timeout, notifications
//! buffered for the caller, and server-to-client requests answered or kept. It knows no method
//! beyond `initialize` (the typed calls are in `methods` and `hooks`) and starts no process.

use std::collections::VecDeque;
use std::io;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tungstenite::handshake::HandshakeError;
use tungstenite::{Message, WebSocket};

/// The app-server serves its WebSocket at this path; the host part is ignored on a Unix socket.
const WS_URI: &str = "ws://localhost/rpc";

/// `sun_path` holds 108 bytes including the NUL; stay a little under so a path that fits in
/// theory but not in practice (platform differences) still goes through the short real path.
const SUN_PATH_SOFT_LIMIT: usize = 100;
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
pub(super) enum Incoming {
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

    /// The per-call timeout `connect` was given, for calls that take no other.
    pub fn timeout(&self) -> Duration {
        self.timeout
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

pub(super) enum Classified {
    Incoming(Incoming),
    Request {
        id: Value,
        method: String,
        params: Value,
    },
}

/// Sorts a JSON-RPC message into response, notification or server request. `None` for
/// anything else.
pub(super) fn classify(mut message: Value) -> Option<Classified> {
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

pub(super) fn server_error(method: &str, error: &Value) -> RpcError {
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
    fs_err::canonicalize(sock)
}
