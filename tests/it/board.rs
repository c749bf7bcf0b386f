//! `spex board` at the HTTP level (issue 29 §5): the security gate point by point (each its
//! own test: Host, Origin, token and cookie, CSRF, no change on GET, the headers, requests from
//! a session's own process), one board per user, the WebSocket's snapshot and changes resumed
//! by cursor, and an answer from the board to a real Claude session. A raw HTTP client over
//! `TcpStream` and `tungstenite`, so every header is the test's own.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::payloads;
use crate::support::world::{World, pretty, read};

/// A running board and what a browser would hold: its cookie and its page's CSRF value.
pub(crate) struct Board {
    pub(crate) child: Child,
    pub(crate) port: u16,
    url: String,
    token: String,
    csrf: String,
}

impl Drop for Board {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP response.
#[derive(Debug)]
pub(crate) struct Resp {
    pub(crate) status: u16,
    head: String,
    pub(crate) body: String,
}

impl Resp {
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_owned())
        })
    }
}

/// Starts `cmd` (a `spex board` command) and reads its first line.
pub(crate) fn start(mut cmd: Command) -> Board {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spex board starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    let url = v["url"].as_str().unwrap().to_owned();
    let token = url.split("token=").nth(1).unwrap().to_owned();
    let port = u16::try_from(v["port"].as_u64().unwrap()).unwrap();
    let mut b = Board {
        child,
        port,
        url,
        token,
        csrf: String::new(),
    };
    let page = b.get("/", &[("Cookie", &b.cookie())]);
    assert_eq!(page.status, 200, "{page:?}");
    page.body
        .split("name=\"spex-csrf\" content=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .clone_into(&mut b.csrf);
    b
}

pub(crate) fn board(w: &World) -> Board {
    start(w.cmd(&w.repo, &["board", "--listen", "127.0.0.1:0", "--json"]))
}

impl Board {
    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub(crate) fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn cookie(&self) -> String {
        format!("spex_board_{}={}", self.port, self.token)
    }

    /// Sends `request` as it is and reads the whole response.
    fn raw(&self, request: &str) -> Resp {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_mins(1))).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut bytes = Vec::new();
        let _ = s.read_to_end(&mut bytes);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        Resp {
            status: head
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0),
            head: head.to_owned(),
            body: body.to_owned(),
        }
    }

    /// A request with the right `Host` unless `headers` name another.
    fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Resp {
        let mut text = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            text.push_str(&format!("Host: {}\r\n", self.host()));
        }
        for (k, v) in headers {
            if !v.is_empty() {
                text.push_str(&format!("{k}: {v}\r\n"));
            }
        }
        text.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        self.raw(&text)
    }

    fn get(&self, path: &str, headers: &[(&str, &str)]) -> Resp {
        self.request("GET", path, headers, "")
    }

    /// An action as the page sends it: own Origin, the cookie, the CSRF value.
    pub(crate) fn act(&self, name: &str, body: &Value) -> Resp {
        self.post(name, body, &[])
    }

    /// An action with some of the page's headers replaced (an empty value drops one).
    fn post(&self, name: &str, body: &Value, replace: &[(&str, &str)]) -> Resp {
        let (origin, cookie) = (self.origin(), self.cookie());
        let mut headers: Vec<(&str, &str)> = vec![
            ("Origin", &origin),
            ("Cookie", &cookie),
            ("X-Spex-Csrf", &self.csrf),
            ("Content-Type", "application/json"),
        ];
        for (k, v) in replace {
            headers.retain(|(h, _)| !h.eq_ignore_ascii_case(k));
            headers.push((k, v));
        }
        self.request("POST", &format!("/api/{name}"), &headers, &body.to_string())
    }

    /// Opens the WebSocket with the page's credentials and `origin`.
    pub(crate) fn socket(
        &self,
        origin: Option<&str>,
        cursor: Option<&str>,
    ) -> Result<Socket, tungstenite::Error> {
        let mut path = format!("/ws?csrf={}", self.csrf);
        if let Some(c) = cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let mut req = tungstenite::http::Request::builder()
            .uri(format!("ws://{}{path}", self.host()))
            .header("Host", self.host())
            .header("Cookie", self.cookie())
            .header("Connection", "Upgrade")
            .header("Upgrade", "websocket")
            .header("Sec-WebSocket-Version", "13")
            .header(
                "Sec-WebSocket-Key",
                tungstenite::handshake::client::generate_key(),
            );
        if let Some(o) = origin {
            req = req.header("Origin", o);
        }
        let stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let (ws, _) =
            tungstenite::client::client(req.body(()).unwrap(), stream).map_err(|e| match e {
                tungstenite::HandshakeError::Failure(e) => e,
                tungstenite::HandshakeError::Interrupted(_) => tungstenite::Error::ConnectionClosed,
            })?;
        Ok(Socket(ws))
    }
}

pub(crate) struct Socket(tungstenite::WebSocket<TcpStream>);

impl Socket {
    pub(crate) fn next(&mut self) -> Value {
        loop {
            match self.0.read().expect("a message within the wait") {
                tungstenite::Message::Text(t) => return serde_json::from_str(t.as_str()).unwrap(),
                tungstenite::Message::Close(_) => panic!("the board closed the socket"),
                _ => {}
            }
        }
    }

    /// Messages until one satisfies `done`.
    fn until(&mut self, done: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut got = Vec::new();
        loop {
            let v = self.next();
            let stop = done(&v);
            got.push(v);
            if stop {
                return got;
            }
        }
    }
}

fn payload(w: &World, stem: &str, session: &str) -> Value {
    let path = Path::new(payloads::PAYLOADS)
        .join("claude")
        .join(format!("{stem}.json"));
    let mut v = payloads::localize(
        serde_json::from_str(&read(&path)).expect("fixture is JSON"),
        &w.repo,
        &w.home,
    );
    v["session_id"] = session.into();
    v
}

fn hook(w: &World, event: &str, stem: &str, session: &str) {
    let out = w.dispatch(&w.repo, "claude", event, &payload(w, stem, session));
    assert_eq!(out.status.code(), Some(0), "{event}");
}

/// A world with one Claude session (hand-written hooks) waiting on a permission; the board's
/// key of it.
fn waiting_world() -> (World, String) {
    let w = World::new();
    let sid = "9d2f7c1e-0b1a-4c3d-8e5f-1a2b3c4d5e6f";
    hook(&w, "SessionStart", "SessionStart.startup", sid);
    hook(&w, "UserPromptSubmit", "UserPromptSubmit", sid);
    hook(&w, "Notification", "Notification.permission_prompt", sid);
    let id = w.session_ids().pop().unwrap();
    let key = w
        .project_dir()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .rsplit('-')
        .next()
        .unwrap()
        .to_owned();
    (w, format!("{key}/{id}"))
}

/// What an action would change of the session: its state, its attention (and any answer on
/// its way), its turn, its sequence number, and its events. A reader's bookkeeping (the handle
/// it gives, the boot it saw the session in) is not a change.
fn state_of(w: &World, key: &str) -> (Value, usize) {
    let id = key.split('/').nth(1).unwrap();
    let r = w.record(id);
    let kept = json!({
        "status": r["status"], "attention": r["attention"], "turn": r["turn"], "seq": r["seq"],
        "since": r["since"],
    });
    (kept, w.events(id).len())
}

fn answer_body(w: &World, key: &str) -> Value {
    let id = key.split('/').nth(1).unwrap();
    let att = w.record(id)["attention"]["id"].clone();
    json!({"session": key, "attention": att, "choices": ["allow"]})
}

#[test]
fn board_host_is_checked_first_and_a_wrong_one_gets_one_uniform_403() {
    let (w, key) = waiting_world();
    let b = board(&w);
    let before = state_of(&w, &key);
    let port = b.port.to_string();
    let evil = format!("attacker.example:{port}");
    let other_port = format!("127.0.0.1:{}", b.port.wrapping_add(1));
    let bare = "127.0.0.1".to_owned();
    let mut bodies = Vec::new();
    for host in [evil.as_str(), other_port.as_str(), bare.as_str(), ""] {
        let cookie = b.cookie();
        // Even with every credential right, and for a public asset.
        let page = b.get("/", &[("Host", host), ("Cookie", &cookie)]);
        let login = b.get(&format!("/?token={}", b.token), &[("Host", host)]);
        let icon = b.get("/icon.svg", &[("Host", host)]);
        let act = b.post("answer", &answer_body(&w, &key), &[("Host", host)]);
        for r in [&page, &login, &icon, &act] {
            assert_eq!(r.status, 403, "{host:?}: {r:?}");
            assert!(r.header("set-cookie").is_none());
            bodies.push(r.body.clone());
        }
    }
    bodies.dedup();
    assert_eq!(bodies, ["forbidden\n"], "one uniform refusal");
    // The loopback names with the exact port are served.
    for host in [format!("localhost:{port}"), format!("[::1]:{port}")] {
        let r = b.get("/", &[("Host", &host), ("Cookie", &b.cookie())]);
        assert_eq!(r.status, 200, "{host}");
    }
    assert_eq!(state_of(&w, &key), before);
}

#[test]
fn board_origin_must_be_its_own_on_actions_and_the_socket() {
    let (w, key) = waiting_world();
    let b = board(&w);
    let before = state_of(&w, &key);
    let port = b.port.to_string();
    let other = format!("http://localhost:{port}");
    for origin in [
        "",
        "null",
        "http://attacker.example",
        other.as_str(),
        "https://127.0.0.1",
    ] {
        let r = b.post("answer", &answer_body(&w, &key), &[("Origin", origin)]);
        assert_eq!(r.status, 403, "{origin:?}: {r:?}");
        let ws = b.socket((!origin.is_empty()).then_some(origin), None);
        match ws {
            Err(tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), 403, "{origin:?}"),
            other => panic!("{origin:?}: the socket opened: {:?}", other.err()),
        }
    }
    // A cross-site form POST (a page elsewhere posting a form at the board): refused.
    let form = b.request(
        "POST",
        "/api/answer",
        &[
            ("Origin", "http://attacker.example"),
            ("Cookie", &b.cookie()),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        "session=x&choices=allow",
    );
    assert_eq!(form.status, 403, "{form:?}");
    // No CORS header on anything, a preflight included.
    let preflight = b.request(
        "OPTIONS",
        "/api/answer",
        &[
            ("Origin", "http://attacker.example"),
            ("Access-Control-Request-Method", "POST"),
        ],
        "",
    );
    assert_ne!(preflight.status, 200);
    for r in [&form, &preflight, &b.get("/", &[("Cookie", &b.cookie())])] {
        assert!(
            !r.head.to_ascii_lowercase().contains("access-control-"),
            "{}",
            r.head
        );
    }
    assert_eq!(state_of(&w, &key), before);
    // The board's own origin opens the socket.
    let mut ws = b.socket(Some(&b.origin()), None).unwrap();
    assert_eq!(ws.next()["type"], "snapshot");
}

#[test]
fn board_token_becomes_an_httponly_cookie_and_is_never_sent_back() {
    use std::os::unix::fs::PermissionsExt;
    let (w, key) = waiting_world();
    let b = board(&w);
    // Without the token, or with a wrong one: refused.
    assert_eq!(b.get("/", &[]).status, 403);
    let wrong = format!("/?token={}", "0".repeat(64));
    assert_eq!(b.get(&wrong, &[]).status, 403);
    let forged = format!("spex_board_{}=abc", b.port);
    assert_eq!(b.get("/", &[("Cookie", &forged)]).status, 403);
    // Another board's cookie (another port) is not this one's.
    let other = format!("spex_board_{}={}", b.port.wrapping_add(1), b.token);
    assert_eq!(b.get("/", &[("Cookie", &other)]).status, 403);
    // The address's token becomes the cookie, and the browser goes to `/` without it.
    let path = b.url.split_once(&b.host()).unwrap().1;
    assert_eq!(path, format!("/?token={}", b.token), "{}", b.url);
    let login = b.get(path, &[]);
    assert_eq!(login.status, 303, "{login:?}");
    assert_eq!(login.header("location").as_deref(), Some("/"));
    let cookie = login.header("set-cookie").unwrap();
    for part in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(part), "{cookie}");
    }
    // The token is in no response body: the page, the assets, the socket's messages, refusals.
    let mut bodies: Vec<String> = [
        "/",
        "/assets/board.js",
        "/assets/board.css",
        "/manifest.webmanifest",
        "/icon.svg",
        "/icon-192.png",
        "/nothing",
    ]
    .iter()
    .map(|p| b.get(p, &[("Cookie", &b.cookie())]).body)
    .collect();
    bodies.push(login.body);
    bodies.push(b.get("/", &[]).body);
    bodies.push(b.act("answer", &answer_body(&w, &key)).body);
    let mut ws = b.socket(Some(&b.origin()), None).unwrap();
    bodies.push(ws.next().to_string());
    for body in &bodies {
        assert!(!body.contains(&b.token), "the token was sent back: {body}");
    }
    // Stored 0600 in a 0700 folder of the store; the state file says where it listens.
    let dir = w.spex_home.join("board");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir.join("token")), 0o600);
    assert_eq!(mode(&dir.join("state.json")), 0o600);
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(read(&dir.join("token")).trim(), b.token);
    assert_eq!(b.token.len(), 64, "256 bits as hex");
}

#[test]
fn board_actions_need_the_pages_csrf_value_beside_the_cookie() {
    let (w, key) = waiting_world();
    let b = board(&w);
    let before = state_of(&w, &key);
    for (name, value) in [("X-Spex-Csrf", ""), ("X-Spex-Csrf", "0123"), ("Cookie", "")] {
        let r = b.post("answer", &answer_body(&w, &key), &[(name, value)]);
        assert_eq!(r.status, 403, "{name}={value:?}: {r:?}");
    }
    assert_eq!(state_of(&w, &key), before);
    // With all three the request reaches the action (this hand-written session has no way
    // to be answered: refused by the runtime, as `spex answer` refuses it).
    let r = b.act("answer", &answer_body(&w, &key));
    assert_eq!(r.status, 409, "{r:?}");
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["ok"], false, "{}", pretty(&v));
}

#[test]
fn board_changes_nothing_on_get_and_sends_its_security_headers() {
    let (w, key) = waiting_world();
    let b = board(&w);
    let before = state_of(&w, &key);
    let q = format!("/api/answer?session={key}&choices=allow");
    let r = b.get(
        &q,
        &[
            ("Cookie", &b.cookie()),
            ("Origin", &b.origin()),
            ("X-Spex-Csrf", &b.csrf),
        ],
    );
    assert_eq!(r.status, 405, "{r:?}");
    assert_eq!(state_of(&w, &key), before);
    let page = b.get("/", &[("Cookie", &b.cookie())]);
    for r in [&page, &b.get("/", &[]), &b.get("/assets/board.js", &[])] {
        let csp = r.header("content-security-policy").unwrap();
        assert!(
            csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'self'"),
            "{csp}"
        );
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{csp}"
        );
        assert_eq!(
            r.header("x-content-type-options").as_deref(),
            Some("nosniff")
        );
        assert_eq!(r.header("referrer-policy").as_deref(), Some("no-referrer"));
    }
    // No inline script: every script element loads a file of the board's own.
    let scripts: Vec<&str> = page.body.split("<script").skip(1).collect();
    assert!(!scripts.is_empty());
    for s in scripts {
        let tag = s.split('>').next().unwrap();
        assert!(tag.contains("src=\"/assets/"), "{tag}");
        assert!(
            s.split('>').nth(1).unwrap().starts_with("</script"),
            "inline script: {s}"
        );
    }
    assert!(
        !page.body.contains("onclick=") && !page.body.contains("javascript:"),
        "no inline handlers"
    );
    // Installable: the manifest's icons are served, from the binary.
    let manifest: Value = serde_json::from_str(&b.get("/manifest.webmanifest", &[]).body).unwrap();
    assert_eq!(manifest["start_url"], "/");
    for icon in manifest["icons"].as_array().unwrap() {
        let r = b.get(icon["src"].as_str().unwrap(), &[]);
        assert_eq!(r.status, 200, "{icon}");
        assert_eq!(
            r.header("content-type"),
            icon["type"].as_str().map(str::to_owned)
        );
    }
    // Session text reaches the page as text: the script never parses HTML.
    let js = b.get("/assets/board.js", &[]).body;
    for sink in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
    ] {
        assert!(!js.contains(sink), "{sink}");
    }
}

#[test]
fn board_refuses_an_action_from_a_sessions_own_process() {
    let (w, key) = waiting_world();
    let b = board(&w);
    let before = state_of(&w, &key);
    let body = answer_body(&w, &key).to_string();
    let request = format!(
        "POST /api/answer HTTP/1.1\r\nHost: {}\r\nOrigin: {}\r\nCookie: {}\r\nX-Spex-Csrf: {}\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        b.host(),
        b.origin(),
        b.cookie(),
        b.csrf,
        body.len()
    );
    // A process of a session (it carries the session's variable), with every credential
    // right: what an agent that read the token would send.
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "exec 3<>/dev/tcp/127.0.0.1/{}; printf '%s' \"$REQ\" >&3; cat <&3",
            b.port
        ))
        .env("REQ", &request)
        .env("SPEX_SESSION_ID", key.split('/').nth(1).unwrap())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("HTTP/1.1 403"), "{text}");
    assert!(text.contains("inside a session"), "{text}");
    assert_eq!(state_of(&w, &key), before);
    // The same request from a process outside any session reaches the action.
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "exec 3<>/dev/tcp/127.0.0.1/{}; printf '%s' \"$REQ\" >&3; cat <&3",
            b.port
        ))
        .env("REQ", &request)
        .env_remove("SPEX_SESSION_ID")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("HTTP/1.1 409"), "{text}");
    assert!(!text.contains("inside a session"), "{text}");
}

#[test]
fn board_listens_on_another_address_only_with_a_warning_and_the_token() {
    let (w, _key) = waiting_world();
    let mut child = w
        .cmd(&w.repo, &["board", "--listen", "0.0.0.0:0", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let v: Value = serde_json::from_str(&line).unwrap();
    let port = v["port"].as_u64().unwrap();
    let mut err = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut err)
        .unwrap();
    assert!(
        err.starts_with("warning:") && err.contains("0.0.0.0"),
        "{err}"
    );
    assert!(v["url"].as_str().unwrap().contains("?token="), "{v}");
    // Without the token, refused there too.
    let mut s = TcpStream::connect(("127.0.0.1", u16::try_from(port).unwrap())).unwrap();
    write!(
        s,
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 403"), "{text}");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn board_is_one_per_user_detaches_says_where_it_listens_and_stops() {
    let w = World::new();
    let first = w.ok(&w.repo, &["board", "--listen", "127.0.0.1:0", "--detach"]);
    let url = first.lines().next().unwrap().to_owned();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.contains("/?token="),
        "{first}"
    );
    // A second board prints the running one's address.
    let second = w.ok(&w.repo, &["board", "--listen", "127.0.0.1:0"]);
    assert_eq!(second.trim(), url);
    let status: Value =
        serde_json::from_str(&w.ok(&w.repo, &["board", "--status", "--json"])).unwrap();
    assert_eq!(status["running"], true, "{status}");
    assert!(url.starts_with(status["url"].as_str().unwrap()));
    let text = w.ok(&w.repo, &["board", "--status"]);
    assert!(!text.contains("token"), "{text}");
    let pid = status["pid"].as_u64().unwrap();
    w.ok(&w.repo, &["board", "--stop"]);
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists()
            || read(Path::new(&format!("/proc/{pid}/stat"))).contains(" Z ")
    );
    let out = w.spex(&w.repo, &["board", "--status", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "{\"running\":false}"
    );
}

#[test]
fn board_socket_sends_a_snapshot_then_changes_and_resumes_by_cursor() {
    let (w, key) = waiting_world();
    let b = board(&w);
    let mut ws = b.socket(Some(&b.origin()), None).unwrap();
    let snap = ws.next();
    assert_eq!(snap["type"], "snapshot", "{}", pretty(&snap));
    let s = snap["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == key.as_str())
        .unwrap_or_else(|| panic!("{}", pretty(&snap)))
        .clone();
    assert_eq!(s["group"], "needs_you", "{}", pretty(&s));
    assert_eq!(s["harness"], "claude");
    assert_eq!(s["attention"]["reason"], "permission", "{}", pretty(&s));
    for field in ["project", "tree", "label", "since", "source", "status"] {
        assert!(!s[field].is_null(), "{field}: {}", pretty(&s));
    }
    let cursor = snap["cursor"].as_str().unwrap().to_owned();
    // A change reaches the socket as it happens, with the session as it is now.
    let sid = "9d2f7c1e-0b1a-4c3d-8e5f-1a2b3c4d5e6f";
    let began = Instant::now();
    hook(&w, "Stop", "Stop", sid);
    let got = ws.until(|v| {
        v["type"] == "change"
            && v["sessions"].as_array().is_some_and(|a| {
                a.iter()
                    .any(|s| s["key"] == key.as_str() && s["group"] == "idle")
            })
    });
    eprintln!(
        "board change pushed {} ms after the hook started (its own run included)",
        began.elapsed().as_millis()
    );
    let last = got.last().unwrap();
    assert!(
        last["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "turn.completed"
                || e["kind"] == "turn.ended"
                || e["kind"].as_str().is_some_and(|k| k.starts_with("turn."))),
        "{}",
        pretty(last)
    );
    drop(ws);
    // Reconnecting with the first cursor: every event after it comes again, none lost.
    hook(&w, "UserPromptSubmit", "UserPromptSubmit", sid);
    let mut again = b.socket(Some(&b.origin()), Some(&cursor)).unwrap();
    let snap2 = again.next();
    assert_eq!(snap2["type"], "snapshot");
    let kinds: Vec<&str> = snap2["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert!(kinds.iter().any(|k| k.starts_with("turn.")), "{kinds:?}");
    assert!(kinds.contains(&"turn.started"), "{kinds:?}");
    let positions: Vec<u64> = snap2["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["pos"].as_u64())
        .collect();
    let first_pos: u64 = cursor.split(':').nth(1).unwrap().parse().unwrap();
    assert_eq!(
        positions.first().copied(),
        Some(first_pos + 1),
        "{positions:?}"
    );
    assert!(
        positions.windows(2).all(|p| p[1] == p[0] + 1),
        "{positions:?}"
    );
    let s = snap2["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == key.as_str())
        .unwrap();
    assert_eq!(s["group"], "working", "{}", pretty(s));
}

/// Waits until session `id`'s attention `att` is open and a hook waits for its answer.
fn hooked(w: &World, id: &str, att: &str) -> Value {
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        let a = w.record(id)["attention"].clone();
        if a["id"] == att && a["via"]["how"] == "hook" {
            return a;
        }
        assert!(
            Instant::now() < deadline,
            "no hook waits for {att}: {}\n{}",
            pretty(&a),
            crate::runtime::host_log(w, id)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
#[expect(
    clippy::many_single_char_names,
    reason = "the world, the board, a session, a reply: the names every test here uses"
)]
fn board_delivers_to_a_real_claude_session_and_answers_its_permission_by_the_board() {
    use crate::runtime::{claude_world, host_log, launch, spex_cmd, stop};
    use crate::support::claude_home::SeedOptions;
    let (w, fake) = claude_world(SeedOptions::default());
    let id = launch(&w, &fake);
    let b = start(spex_cmd(
        &w,
        &fake,
        &["board", "--listen", "127.0.0.1:0", "--json"],
    ));
    let mut ws = b.socket(Some(&b.origin()), None).unwrap();
    let snap = ws.next();
    let s = snap["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id.as_str())
        .unwrap_or_else(|| panic!("{}", pretty(&snap)))
        .clone();
    let key = s["key"].as_str().unwrap().to_owned();
    assert_eq!(s["harness"], "claude");
    // deliver: the receipt's stages come as they are reached, over the socket too.
    let out = w.repo.join("bash_out.txt");
    let r = b.act(
        "deliver",
        &json!({"session": key, "text": "USE_BASH run it", "request": "r1"}),
    );
    assert_eq!(r.status, 200, "{r:?}\n{}", host_log(&w, &id));
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["delivery"]["confirmed"], true, "{}", pretty(&v));
    let stages: Vec<&str> = v["delivery"]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["stage"].as_str())
        .collect();
    assert_eq!(stages.first(), Some(&"accepted"), "{stages:?}");
    // The permission dialog reaches the page, with its real choices.
    let began = Instant::now();
    let got = ws.until(|m| {
        m["type"] == "change"
            && m["sessions"].as_array().is_some_and(|a| {
                a.iter()
                    .any(|s| s["id"] == id.as_str() && s["group"] == "needs_you")
            })
    });
    eprintln!(
        "permission dialog on the board {} ms after the delivery returned",
        began.elapsed().as_millis()
    );
    let s = got.last().unwrap()["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id.as_str())
        .unwrap()
        .clone();
    let att = s["attention"]["id"].as_str().unwrap().to_owned();
    let choices: Vec<&str> = s["attention"]["choices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["id"].as_str())
        .collect();
    assert!(
        choices.contains(&"allow") && choices.contains(&"deny"),
        "{}",
        pretty(&s)
    );
    hooked(&w, &id, &att);
    // allow from the board: the tool runs, and the closing event says the board answered.
    let r = b.act(
        "answer",
        &json!({"session": key, "attention": att, "choices": ["allow"]}),
    );
    assert_eq!(r.status, 200, "{r:?}\n{}", host_log(&w, &id));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !out.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        out.exists(),
        "the command did not run\n{}",
        host_log(&w, &id)
    );
    let closed = w
        .events(&id)
        .into_iter()
        .rfind(|e| e["kind"] == "attention.closed")
        .unwrap();
    assert_eq!(closed["by"], "board", "{}", pretty(&closed));
    assert_eq!(closed["choice"], "allow");
    // The turn's end comes to the page as the delivery's `done` stage.
    let done =
        ws.until(|m| m["type"] == "receipt" && m["request"] == "r1" && m["outcome"].is_string());
    let last = done.last().unwrap();
    let stages: Vec<&str> = last["stages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["stage"].as_str())
        .collect();
    assert_eq!(stages.last(), Some(&"done"), "{}", pretty(last));
    assert_eq!(last["outcome"], "completed", "{}", pretty(last));
    // The screen, read-only: the host's snapshot of the session's terminal.
    ws.0.send(tungstenite::Message::Text(
        json!({"type": "screen", "session": key}).to_string().into(),
    ))
    .unwrap();
    let screen = ws.until(|m| m["type"] == "screen");
    let lines = screen.last().unwrap()["lines"].as_array().unwrap().clone();
    assert!(!lines.is_empty(), "{}", pretty(screen.last().unwrap()));
    // stop, then resume, from the board: the CLI's code, the record says so.
    let r = b.act("stop", &json!({"session": key}));
    assert_eq!(r.status, 200, "{r:?}\n{}", host_log(&w, &id));
    assert_eq!(w.record(&id)["status"], "exited", "{}", host_log(&w, &id));
    ws.until(|m| {
        m["type"] == "change"
            && m["sessions"].as_array().is_some_and(|a| {
                a.iter()
                    .any(|s| s["id"] == id.as_str() && s["group"] == "exited")
            })
    });
    let r = b.act("resume", &json!({"session": key}));
    assert_eq!(r.status, 200, "{r:?}\n{}", host_log(&w, &id));
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["ok"], true, "{}", pretty(&v));
    crate::support::world::wait_status(&w, &id, "idle", Duration::from_mins(1));
    stop(&w, &fake, &id);
}

#[test]
fn board_shows_every_project_and_one_that_appears_while_it_runs() {
    let (w, key) = waiting_world();
    let b = board(&w);
    let mut ws = b.socket(Some(&b.origin()), None).unwrap();
    let snap = ws.next();
    assert_eq!(
        snap["sessions"].as_array().unwrap().len(),
        1,
        "{}",
        pretty(&snap)
    );
    // A second repository's first session, after the board started: its project folder
    // is new, and everything in it reaches the page.
    let other = w.dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    crate::support::world::git(&other, &["init", "-q", "-b", "main"]);
    let sid = "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9";
    let mut start = payload(&w, "SessionStart.startup", sid);
    let mut prompt = payload(&w, "UserPromptSubmit", sid);
    for v in [&mut start, &mut prompt] {
        let text = v
            .to_string()
            .replace(&*w.repo.to_string_lossy(), &other.to_string_lossy());
        *v = serde_json::from_str(&text).unwrap();
    }
    assert!(
        w.dispatch(&other, "claude", "SessionStart", &start)
            .status
            .success()
    );
    assert!(
        w.dispatch(&other, "claude", "UserPromptSubmit", &prompt)
            .status
            .success()
    );
    let got = ws.until(|m| {
        m["type"] == "change"
            && m["sessions"].as_array().is_some_and(|a| {
                a.iter()
                    .any(|s| s["project"] == "other" && s["group"] == "working")
            })
    });
    let s = got.last().unwrap()["sessions"].as_array().unwrap()[0].clone();
    assert_ne!(
        s["project_key"].as_str().unwrap(),
        key.split('/').next().unwrap()
    );
    // A new page sees both projects.
    let mut again = b.socket(Some(&b.origin()), None).unwrap();
    let snap = again.next();
    let mut projects: Vec<&str> = snap["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["project"].as_str())
        .collect();
    projects.sort_unstable();
    assert_eq!(projects, ["other", "repo"], "{}", pretty(&snap));
}

#[test]
fn board_public_url_is_printed_and_its_host_and_origin_accepted() {
    let (w, key) = waiting_world();
    let b = start(w.cmd(
        &w.repo,
        &[
            "board",
            "--listen",
            "127.0.0.1:0",
            "--public-url",
            "https://board.test:8443/",
            "--json",
        ],
    ));
    assert!(
        b.url.starts_with("https://board.test:8443/?token="),
        "{}",
        b.url
    );
    let page = b.get("/", &[("Host", "board.test:8443"), ("Cookie", &b.cookie())]);
    assert_eq!(page.status, 200, "{page:?}");
    // Its origin is the public one: the loopback origin is foreign under that host.
    let r = b.post(
        "answer",
        &answer_body(&w, &key),
        &[
            ("Host", "board.test:8443"),
            ("Origin", "https://board.test:8443"),
        ],
    );
    assert_eq!(r.status, 409, "reaches the action: {r:?}");
    let r = b.post(
        "answer",
        &answer_body(&w, &key),
        &[("Host", "board.test:8443")],
    );
    assert_eq!(r.status, 403, "{r:?}");
    // Another name under the same address is still refused.
    let r = b.get("/", &[("Host", "board.test:8444"), ("Cookie", &b.cookie())]);
    assert_eq!(r.status, 403);
}

#[test]
fn board_shows_a_sessions_diff_per_file_and_opens_a_file_in_the_editor() {
    use crate::support::world::{executable, git, write};
    let w = World::new();
    write(&w.repo.join("notes.txt"), "one\n");
    git(&w.repo, &["add", "-A"]);
    git(&w.repo, &["commit", "-q", "-m", "base"]);
    let sid = "7b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d";
    hook(&w, "SessionStart", "SessionStart.startup", sid);
    hook(&w, "UserPromptSubmit", "UserPromptSubmit", sid);
    let id = w.session_ids().pop().unwrap();
    let project = w.project_dir();
    let project = project.file_name().unwrap().to_string_lossy();
    let key = format!("{}/{id}", project.rsplit('-').next().unwrap());
    write(&w.repo.join("notes.txt"), "one\n<b>two</b>\n");
    write(&w.repo.join("new.txt"), "fresh\n");
    // The editor: a script that writes down its arguments.
    let argv_file = w.dir.path().join("editor-argv");
    let editor = w.dir.path().join("editor.sh");
    executable(
        &editor,
        &format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > '{}'\n",
            argv_file.display()
        ),
    );
    write(
        &w.xdg_config.join("spex/config.jsonc"),
        json!({"editor": format!("'{}' {{path}}", editor.display())}).to_string(),
    );
    let b = board(&w);
    let r = b.act("diff", &json!({"session": key}));
    assert_eq!(r.status, 200, "{r:?}");
    let v: Value = serde_json::from_str(&r.body).unwrap();
    let files = v["files"].as_array().unwrap();
    let file = |p: &str| {
        files
            .iter()
            .find(|f| f["path"] == p)
            .cloned()
            .unwrap_or_else(|| panic!("{p}: {}", pretty(&v)))
    };
    let notes = file("notes.txt");
    assert_eq!(notes["status"], "modified", "{}", pretty(&notes));
    assert_eq!(notes["added"], 1);
    let patch = notes["patch"].as_str().unwrap();
    assert!(
        patch.contains("+<b>two</b>") && patch.contains("notes.txt"),
        "{patch}"
    );
    assert!(!patch.contains("new.txt"), "a patch per file: {patch}");
    assert!(!patch.contains('\u{1b}'), "no colour: {patch:?}");
    assert_eq!(file("new.txt")["status"], "added");
    let r = b.act("open", &json!({"session": key, "file": "notes.txt"}));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        read(&argv_file),
        format!("{}/notes.txt\n", w.repo.display())
    );
    std::fs::remove_file(&argv_file).unwrap();
    let r = b.act("open", &json!({"session": key, "file": "../outside.txt"}));
    assert_eq!(r.status, 409, "{r:?}");
    assert!(r.body.contains("outside the worktree"), "{}", r.body);
    assert!(!argv_file.exists(), "the editor ran");
}

#[test]
fn board_shows_a_killed_session_exited_without_a_reload() {
    use crate::runtime::{claude_world, launch_json, spex_cmd};
    use crate::support::claude_home::SeedOptions;
    let (w, fake) = claude_world(SeedOptions::default());
    let launched = launch_json(&w, &fake, &[]);
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let host = launched["session"]["host_pid"].as_i64().unwrap();
    let child = launched["session"]["child_pid"].as_i64().unwrap();
    let board = start(spex_cmd(
        &w,
        &fake,
        &["board", "--listen", "127.0.0.1:0", "--json"],
    ));
    let mut ws = board.socket(Some(&board.origin()), None).unwrap();
    let snap = ws.next();
    assert!(
        snap["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == id.as_str() && s["group"] != "exited"),
        "{}",
        pretty(&snap)
    );
    // The host killed: nothing writes the record but the board's watcher, which sees the
    // processes go.
    Command::new("kill")
        .args(["-9", &host.to_string()])
        .status()
        .unwrap();
    let began = Instant::now();
    ws.until(|m| {
        m["type"] == "change"
            && m["sessions"].as_array().is_some_and(|a| {
                a.iter()
                    .any(|s| s["id"] == id.as_str() && s["group"] == "exited")
            })
    });
    let took = began.elapsed();
    eprintln!("killed session shown exited after {} ms", took.as_millis());
    assert!(took < Duration::from_secs(5), "{took:?}");
    let _ = Command::new("kill")
        .args(["-9", &child.to_string()])
        .status();
}

/// Sessions of another machine (issue 32): the board shows them beside this machine's with
/// their host, marks them stale (their last known state kept) when the host stops answering,
/// and runs its actions on them through the spex there (over a real sshd).
#[test]
fn board_shows_a_remote_session_with_its_host_stale_when_unreachable_and_acts_there() {
    use crate::support::sshd::Sshd;
    let here = World::new();
    let other = World::new();
    let mut sshd = Sshd::start(&other);
    sshd.ok(&here, &["remote", "add", "other", Sshd::ALIAS]);
    let sid = "eeeeeeee-5555-4555-8555-0000000000e5";
    hook(&other, "SessionStart", "SessionStart.startup", sid);
    hook(&other, "UserPromptSubmit", "UserPromptSubmit", sid);
    let mut cmd = sshd.cmd(&here, &["board", "--listen", "127.0.0.1:0", "--json"]);
    cmd.current_dir(&here.repo);
    let board = start(cmd);
    let remote = |v: &Value| {
        v["sessions"]
            .as_array()
            .and_then(|a| a.iter().find(|s| s["id"] == sid && s["host"] == "other"))
            .cloned()
    };
    // The board's watcher follows the host: the session appears, live, with its host.
    let end = Instant::now() + Duration::from_mins(1);
    let s = loop {
        let mut ws = board.socket(Some(&board.origin()), None).unwrap();
        if let Some(s) = remote(&ws.next()).filter(|s| s["stale"] == false) {
            break s;
        }
        assert!(Instant::now() < end, "the remote session never showed");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(s["group"], "working", "{}", pretty(&s));
    assert!(
        s["label"].as_str().unwrap().starts_with("other:"),
        "{}",
        pretty(&s)
    );
    let key = s["key"].as_str().unwrap().to_owned();
    // An action runs the command on the other machine: its spex's own refusal comes back.
    let resp = board.post("stop", &json!({"session": key}), &[]);
    let v: Value = serde_json::from_str(&resp.body).unwrap_or_default();
    assert_eq!(v["host"], "other", "{resp:?}");
    assert!(
        v["ok"] == true
            || v["error"]
                .as_str()
                .is_some_and(|e| e.starts_with("on `other`")),
        "{resp:?}"
    );
    // The host stops answering: the socket gets the session stale, its state kept.
    let mut ws = board.socket(Some(&board.origin()), None).unwrap();
    ws.next();
    sshd.stop();
    let got = ws.until(|v| v["type"] == "change" && remote(v).is_some_and(|s| s["stale"] == true));
    let s = remote(got.last().unwrap()).unwrap();
    assert_eq!(s["group"], "working", "{}", pretty(&s));
    assert!(s["unreachable"]["error"].is_string(), "{}", pretty(&s));
}

/// Waits until `done` holds, for at most `within`.
fn within(what: &str, within: Duration, done: impl Fn() -> bool) {
    let end = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < end, "{what} not within {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Issue 31: a page that says it shows a session (over its socket) has the board keep the
/// notifier's viewing marker for it, and the notifier sends nothing for that session; the
/// marker goes when no page shows it (hidden, or its socket closed), and a key naming no
/// session makes no file. Hand-written hooks; the browser test drives the real page.
#[test]
fn board_keeps_the_viewing_marker_while_a_page_shows_a_session_and_the_notifier_holds_back() {
    let (w, key) = waiting_world();
    let id = key.split('/').nth(1).unwrap().to_owned();
    let sid = "9d2f7c1e-0b1a-4c3d-8e5f-1a2b3c4d5e6f";
    let hook_rx = crate::notify::receiver(200, None);
    crate::notify::configure(
        &w,
        &json!({"on": ["needs_attention"], "dwell": "0s",
                "webhook": {"url": format!("http://{}/hook", hook_rx.addr())}}),
    );
    // Open before the sender's first start, which announces it whether or not the page says
    // it shows it yet (a race): what is judged below is what opens later.
    let before_start = w.record(&id)["attention"]["id"].clone();
    let later = || {
        hook_rx
            .requests()
            .into_iter()
            .filter(|r| r["body"]["attention"] != before_start)
            .collect::<Vec<_>>()
    };
    let b = board(&w);
    let viewing = w.spex_home.join("notify/viewing");
    let marker = viewing.join(&id);
    let mut ws = b.socket(Some(&b.origin()), None).unwrap();
    assert_eq!(ws.next()["type"], "snapshot");
    let say = |ws: &mut Socket, keys: &[&str]| {
        ws.0.send(tungstenite::Message::Text(
            json!({"type": "viewing", "sessions": keys})
                .to_string()
                .into(),
        ))
        .unwrap();
    };
    say(
        &mut ws,
        &[&key, "0000/nope", "../../../etc", &format!("{key}/../x")],
    );
    within("the viewing marker", Duration::from_secs(5), || {
        marker.exists()
    });
    assert_eq!(read(&marker).trim(), b.child.id().to_string());
    let files: Vec<_> = std::fs::read_dir(&viewing)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(files, [std::ffi::OsString::from(&id)], "only real sessions");
    // Said again (the page does every 10 s), the marker is touched again: a page that stops
    // saying so stops counting once the marker is 30 s old.
    let mtime = || std::fs::metadata(&marker).unwrap().modified().unwrap();
    let first = mtime();
    std::thread::sleep(Duration::from_millis(1100));
    say(&mut ws, &[&key]);
    within("the marker touched again", Duration::from_secs(5), || {
        mtime() > first
    });

    // The notifier (the board's process runs it: a channel is configured) sends nothing for
    // the session while a page shows it.
    let lock = w.spex_home.join("notify/sender.lock");
    within("the sender", Duration::from_secs(20), || {
        std::fs::read_to_string(&lock).unwrap_or_default().trim() == b.child.id().to_string()
    });
    hook(&w, "Stop", "Stop", sid);
    hook(&w, "UserPromptSubmit", "UserPromptSubmit", sid);
    hook(&w, "Notification", "Notification.permission_prompt", sid);
    let shown_att = w.record(&id)["attention"]["id"].clone();
    assert!(shown_att.is_string(), "{}", pretty(&w.record(&id)));
    assert_ne!(shown_att, before_start);
    std::thread::sleep(Duration::from_secs(2));
    assert!(later().is_empty(), "sent while shown: {:?}", later());

    // A second page shows it too; the first is hidden: the marker stays for the second.
    let mut ws2 = b.socket(Some(&b.origin()), None).unwrap();
    assert_eq!(ws2.next()["type"], "snapshot");
    say(&mut ws2, &[&key]);
    std::thread::sleep(Duration::from_millis(300));
    say(&mut ws, &[]);
    std::thread::sleep(Duration::from_millis(500));
    assert!(marker.exists(), "the second page still shows it");
    // The second page closes: nobody shows it, the marker goes, and the next attention is sent.
    drop(ws2);
    within("the marker to go", Duration::from_secs(5), || {
        !marker.exists()
    });
    hook(&w, "Stop", "Stop", sid);
    hook(&w, "UserPromptSubmit", "UserPromptSubmit", sid);
    hook(&w, "Notification", "Notification.permission_prompt", sid);
    let next_att = w.record(&id)["attention"]["id"].clone();
    assert_ne!(next_att, shown_att);
    let got = hook_rx
        .request_within(
            |r| r["body"]["attention"] == next_att,
            Duration::from_secs(5),
        )
        .expect("not sent once nobody looks");
    assert_eq!(got["body"]["session"], id.as_str());
    assert_eq!(later().len(), 1, "{:?}", hook_rx.requests());
}
