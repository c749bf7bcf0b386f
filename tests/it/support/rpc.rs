//! A real `codex app-server` on a Unix socket, and just enough JSON-RPC over WebSocket to drive
//! it (the crate has the real client).

use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tungstenite::{Message, WebSocket};

use super::peers::GroupChild;
use crate::support::world::read_or_empty;

/// How long the server may take to listen, and to answer one request.
pub const RPC_TIMEOUT: Duration = Duration::from_secs(30);

/// JSON-RPC over WebSocket that keeps every notification and server request it reads.
pub struct Rpc {
    ws: WebSocket<UnixStream>,
    next_id: u64,
    /// What arrived besides the responses, oldest first, until [`Rpc::take`] removes it.
    pub inbox: Vec<Value>,
}

impl Rpc {
    /// A client on `stream` (the WebSocket handshake done).
    pub fn connect(stream: UnixStream) -> Result<Rpc, String> {
        // Short read timeouts let `recv` enforce deadlines instead of blocking forever.
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .map_err(|e| format!("set_read_timeout: {e}"))?;
        let (ws, _) = tungstenite::client("ws://localhost/rpc", stream)
            .map_err(|e| format!("websocket handshake: {e}"))?;
        Ok(Rpc {
            ws,
            next_id: 0,
            inbox: Vec::new(),
        })
    }

    pub fn send(&mut self, msg: &Value) {
        self.ws
            .send(Message::text(msg.to_string()))
            .expect("websocket send");
    }

    /// Answers the server request with id `id`.
    pub fn respond(&mut self, id: &Value, result: &Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    /// The next JSON message, or `None` at `deadline`.
    fn recv(&mut self, deadline: Instant) -> Option<Value> {
        while Instant::now() < deadline {
            match self.ws.read() {
                Ok(Message::Text(t)) => return Some(serde_json::from_str(t.as_str()).unwrap()),
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => panic!("websocket read: {e}"),
            }
        }
        None
    }

    /// The result of one request; what arrives in between goes to the inbox.
    pub fn call(&mut self, method: &str, params: &Value) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + RPC_TIMEOUT;
        loop {
            let Some(msg) = self.recv(deadline) else {
                return Err(format!("no answer to {method} in {RPC_TIMEOUT:?}"));
            };
            if msg["id"] == id && msg.get("method").is_none() {
                return match msg.get("error") {
                    Some(e) => Err(format!("{method} failed: {e}")),
                    None => Ok(msg["result"].clone()),
                };
            }
            self.inbox.push(msg);
        }
    }

    /// Removes and returns the first message (notification or server request) with `method`
    /// whose params satisfy `pred`, reading more until `deadline`.
    pub fn take(
        &mut self,
        method: &str,
        pred: impl Fn(&Value) -> bool,
        deadline: Instant,
    ) -> Option<Value> {
        let matches = |m: &Value| m["method"] == method && pred(&m["params"]);
        loop {
            if let Some(i) = self.inbox.iter().position(matches) {
                return Some(self.inbox.remove(i));
            }
            let msg = self.recv(deadline)?;
            self.inbox.push(msg);
        }
    }
}

/// A real `codex app-server` on a Unix socket with one initialized client. Stopped (with its
/// whole process group) on Drop.
pub struct AppServer {
    pub rpc: Rpc,
    log_path: PathBuf,
    server: GroupChild,
}

impl AppServer {
    /// Runs `cmd` (a [`super::codex_home::codex_command`] with its cwd and env set) as
    /// `codex app-server` listening on `<dir>/<tag>.sock`, both output streams in
    /// `<dir>/<tag>.log`, and initializes a client that calls itself `client`.
    ///
    /// `AF_UNIX` paths max out at 108 bytes: `dir` must be short (a `/tmp/spx*` folder).
    pub fn start(cmd: &mut Command, dir: &Path, tag: &str, client: &str) -> AppServer {
        let sock = dir.join(format!("{tag}.sock"));
        let log_path = dir.join(format!("{tag}.log"));
        // One file for both streams (a clone shares the offset, so they interleave, not overwrite).
        let log_file = File::create(&log_path).unwrap();
        cmd.arg("app-server")
            .arg("--listen")
            .arg(format!("unix://{}", sock.display()))
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file);
        let mut server = GroupChild::spawn(cmd);

        // The socket file appears before the server accepts; only a connect proves it is up.
        let deadline = Instant::now() + RPC_TIMEOUT;
        let stream = loop {
            if let Ok(s) = UnixStream::connect(&sock) {
                break s;
            }
            if let Some(st) = server.try_wait() {
                panic!(
                    "codex app-server exited early ({st})\n{}",
                    read_or_empty(&log_path)
                );
            }
            assert!(
                Instant::now() < deadline,
                "codex app-server never listened on {}\n{}",
                sock.display(),
                read_or_empty(&log_path)
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let rpc =
            Rpc::connect(stream).unwrap_or_else(|e| panic!("{e}\n{}", read_or_empty(&log_path)));
        let mut app = AppServer {
            rpc,
            log_path,
            server,
        };
        app.call(
            "initialize",
            &json!({"clientInfo": {"name": client, "version": "0"},
                "capabilities": {"experimentalApi": true}}),
        );
        app.rpc
            .send(&json!({"jsonrpc": "2.0", "method": "initialized"}));
        app
    }

    /// The server's output so far, for failure messages.
    pub fn log(&self) -> String {
        format!("--- app-server log:\n{}", read_or_empty(&self.log_path))
    }

    /// The result of one request; panics (with the server's log) on an error or no answer.
    pub fn call(&mut self, method: &str, params: &Value) -> Value {
        match self.rpc.call(method, params) {
            Ok(v) => v,
            Err(e) => panic!("{e}\n{}", self.log()),
        }
    }

    /// Starts a thread with `params` (at least `cwd`); its id.
    pub fn start_thread(&mut self, params: &Value) -> String {
        let r = self.call("thread/start", params);
        r["thread"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no thread id in {r}"))
            .to_owned()
    }

    /// Starts a turn with the user message `text`; its id.
    pub fn start_turn(&mut self, thread: &str, text: &str) -> String {
        let r = self.call(
            "turn/start",
            &json!({"threadId": thread, "input": [{"type": "text", "text": text}]}),
        );
        r["turn"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no turn id in {r}"))
            .to_owned()
    }

    /// The `turn/completed` params of `turn`, or `None` after `timeout`.
    pub fn completed_within(&mut self, turn: &str, timeout: Duration) -> Option<Value> {
        let n = self.rpc.take(
            "turn/completed",
            |p| p["turn"]["id"] == turn,
            Instant::now() + timeout,
        );
        n.map(|n| n["params"].clone())
    }

    /// SIGKILL to the server's group: no hook fires.
    pub fn kill(&mut self) {
        self.server.kill();
    }

    /// SIGTERM to the server's group (Codex ends every loaded thread: `SessionEnd`), SIGKILL
    /// after `grace`. Idempotent.
    pub fn stop(&mut self, grace: Duration) {
        self.server.stop(grace);
    }
}

impl Drop for AppServer {
    fn drop(&mut self) {
        self.server.stop(Duration::from_secs(5));
    }
}
