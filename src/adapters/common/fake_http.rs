//! A minimal HTTP/1.1 server (std only, one thread per connection) shared by the fake model APIs.
//!
//! The real harnesses speak plain HTTP/1.1 to a `*_BASE_URL`: a request line, headers, a
//! `Content-Length` (or chunked) body, keep-alive between requests, and server-sent events that
//! end when the server closes the connection. That is all this implements.

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::fmt::Write as _;
use std::hash::BuildHasher;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

/// One parsed request.
#[derive(Debug)]
pub struct Request {
    pub method: String,
    /// The request target as sent, including any query (`/v1/messages?beta=true`).
    pub target: String,
    /// Header names lower-cased, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The target without its query string.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or_default()
    }

    /// The body as JSON; `None` when empty, compressed or not JSON.
    pub fn json(&self) -> Option<Value> {
        if self.header("content-encoding").is_some() {
            return None;
        }
        serde_json::from_slice(&self.body).ok()
    }

    /// The body as it should appear in a request log: parsed JSON when possible, a marker for
    /// compressed bodies (so a test can tell "compressed" from "garbage"), else lossy text.
    pub fn logged_body(&self) -> Value {
        if let Some(enc) = self.header("content-encoding") {
            return json!({ "_encoded": enc, "_bytes": self.body.len() });
        }
        if self.body.is_empty() {
            return Value::Null;
        }
        self.json()
            .unwrap_or_else(|| Value::String(String::from_utf8_lossy(&self.body).into_owned()))
    }

    /// `{method, path, headers, body}`, the common part of every log entry.
    pub fn log_entry(&self) -> Map<String, Value> {
        let headers: Map<String, Value> = self
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        let mut entry = Map::new();
        entry.insert("method".into(), self.method.clone().into());
        entry.insert("path".into(), self.target.clone().into());
        entry.insert("headers".into(), Value::Object(headers));
        entry.insert("body".into(), self.logged_body());
        entry
    }
}

/// The writing side of one connection, handed to the handler for one request.
pub struct Conn<'a> {
    stream: &'a mut TcpStream,
    stop: &'a AtomicBool,
    close: bool,
}

impl Conn<'_> {
    fn head(&mut self, status: u16, headers: &[(&str, String)]) -> io::Result<()> {
        let mut out = format!("HTTP/1.1 {status} {}\r\n", reason(status));
        for (k, v) in headers {
            out.push_str(k);
            out.push_str(": ");
            out.push_str(v);
            out.push_str("\r\n");
        }
        out.push_str("\r\n");
        self.stream.write_all(out.as_bytes())
    }

    /// A complete JSON response with `Content-Length`, so the client may reuse the connection.
    pub fn json(&mut self, status: u16, body: &Value) -> io::Result<()> {
        self.json_with(status, body, &[])
    }

    /// [`Conn::json`] with `extra` headers (a provider's rate-limit headers).
    pub fn json_with(
        &mut self,
        status: u16,
        body: &Value,
        extra: &[(&str, String)],
    ) -> io::Result<()> {
        let data = serde_json::to_vec(body).map_err(io::Error::other)?;
        let mut headers = vec![
            ("Content-Type", "application/json".into()),
            ("Content-Length", data.len().to_string()),
        ];
        headers.extend_from_slice(extra);
        self.head(status, &headers)?;
        self.stream.write_all(&data)?;
        self.stream.flush()
    }

    /// A response without a body (used for `HEAD`).
    pub fn empty(&mut self, status: u16) -> io::Result<()> {
        self.head(status, &[("Content-Length", "0".into())])?;
        self.stream.flush()
    }

    /// Start a server-sent-event stream. It has no length, so the connection closes after it.
    pub fn start_sse(&mut self) -> io::Result<()> {
        self.start_sse_with(&[])
    }

    /// [`Conn::start_sse`] with `extra` headers (a provider's rate-limit headers).
    pub fn start_sse_with(&mut self, extra: &[(&str, String)]) -> io::Result<()> {
        self.close = true;
        let mut headers = vec![
            ("Content-Type", "text/event-stream".into()),
            ("Cache-Control", "no-cache".into()),
            ("Connection", "close".into()),
        ];
        headers.extend_from_slice(extra);
        self.head(200, &headers)?;
        self.stream.flush()
    }

    /// One `event: <name>\ndata: <json>\n\n` frame, flushed at once so the client sees it now.
    pub fn sse_event(&mut self, event: &str, data: &Value) -> io::Result<()> {
        self.write_raw(format!("event: {event}\ndata: {data}\n\n").as_bytes())
    }

    pub fn write_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// True once the server is being dropped: long-running responses should end.
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Sleep up to `d`, waking early when the server stops. Returns false when it stopped.
    pub fn sleep(&self, d: Duration) -> bool {
        let end = Instant::now() + d;
        while Instant::now() < end {
            if self.stopping() {
                return false;
            }
            thread::sleep((end - Instant::now()).min(Duration::from_millis(50)));
        }
        !self.stopping()
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

pub type Handler = dyn Fn(&Request, &mut Conn<'_>) -> io::Result<()> + Send + Sync;

struct Shared {
    stop: AtomicBool,
    next_conn: AtomicU64,
    /// Clones of open connections, so Drop can shut them down and unblock their threads.
    conns: Mutex<HashMap<u64, TcpStream>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

/// A running server on `127.0.0.1:<ephemeral>`; stops (and joins every thread) on Drop.
pub struct HttpServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl HttpServer {
    pub fn start(handler: Arc<Handler>) -> HttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local_addr");
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            next_conn: AtomicU64::new(0),
            conns: Mutex::new(HashMap::new()),
            workers: Mutex::new(Vec::new()),
        });
        let sh = Arc::clone(&shared);
        let accept = thread::Builder::new()
            .name(format!("fake-http-{}", addr.port()))
            .spawn(move || accept_loop(&listener, &sh, &handler))
            .expect("spawn accept thread");
        HttpServer {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // accept() has no timeout; a throwaway connection wakes it so it can see the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
        for s in lock(&self.shared.conns).values() {
            let _ = s.shutdown(Shutdown::Both);
        }
        let workers = std::mem::take(&mut *lock(&self.shared.workers));
        for h in workers {
            let _ = h.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panicking handler thread must not take the whole fake (and every later assertion) down.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>, handler: &Arc<Handler>) {
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        let id = shared.next_conn.fetch_add(1, Ordering::SeqCst);
        if let Ok(clone) = stream.try_clone() {
            lock(&shared.conns).insert(id, clone);
        }
        let sh = Arc::clone(shared);
        let h = Arc::clone(handler);
        let worker = thread::spawn(move || {
            serve(stream, &sh, &*h);
            lock(&sh.conns).remove(&id);
        });
        lock(&shared.workers).push(worker);
    }
}

fn serve(mut stream: TcpStream, shared: &Shared, handler: &Handler) {
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    loop {
        let req = match read_request(&mut reader, &mut stream) {
            Ok(Some(req)) => req,
            Ok(None) => break,
            Err(_) => {
                let _ = stream.write_all(
                    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
                break;
            }
        };
        let client_close = req
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let mut conn = Conn {
            stream: &mut stream,
            stop: &shared.stop,
            close: false,
        };
        let ok = handler(&req, &mut conn).is_ok();
        if !ok || conn.close || client_close || shared.stop.load(Ordering::SeqCst) {
            break;
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
}

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_owned())
}

/// Reads one request; `Ok(None)` on a clean EOF between requests.
fn read_request(reader: &mut impl BufRead, stream: &mut TcpStream) -> io::Result<Option<Request>> {
    let mut line = String::new();
    // Tolerate stray CRLFs between keep-alive requests (RFC 9112 §2.2).
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        if !line.trim().is_empty() {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().ok_or_else(|| bad("no method"))?.to_owned();
    let target = parts.next().ok_or_else(|| bad("no target"))?.to_owned();

    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 {
            return Err(bad("eof in headers"));
        }
        let h = h.trim_end_matches(['\r', '\n']);
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':').ok_or_else(|| bad("malformed header"))?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
    }
    let mut req = Request {
        method,
        target,
        headers,
        body: Vec::new(),
    };

    if req
        .header("expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }
    let chunked = req
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    if chunked {
        req.body = read_chunked(reader)?;
    } else if let Some(n) = req.header("content-length") {
        let n: usize = n.parse().map_err(|_| bad("bad content-length"))?;
        let mut body = vec![0; n];
        reader.read_exact(&mut body)?;
        req.body = body;
    }
    Ok(Some(req))
}

fn read_chunked(reader: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size_line = String::new();
        reader.read_line(&mut size_line)?;
        let size_hex = size_line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_hex, 16).map_err(|_| bad("bad chunk size"))?;
        if size == 0 {
            // Trailer section: lines until an empty one.
            loop {
                let mut t = String::new();
                if reader.read_line(&mut t)? == 0 || t.trim().is_empty() {
                    return Ok(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        let mut crlf = String::new();
        reader.read_line(&mut crlf)?;
    }
}

/// A shared, append-only log of requests that tests can read or wait on.
#[derive(Clone, Default)]
pub struct RequestLog {
    inner: Arc<(Mutex<Vec<Value>>, Condvar)>,
}

impl RequestLog {
    pub fn push(&self, entry: Value) {
        lock(&self.inner.0).push(entry);
        self.inner.1.notify_all();
    }

    pub fn all(&self) -> Vec<Value> {
        lock(&self.inner.0).clone()
    }

    #[allow(
        dead_code,
        reason = "the integration tests' rig uses it (`tests/it/adapters/mod.rs` compiles this file)"
    )]
    /// The first logged request matching `pred`, waiting up to `timeout` for one to arrive;
    /// `None` when none did (the caller decides whether that fails).
    pub fn find_within(&self, pred: impl Fn(&Value) -> bool, timeout: Duration) -> Option<Value> {
        let end = Instant::now() + timeout;
        let mut log = lock(&self.inner.0);
        loop {
            if let Some(v) = log.iter().find(|v| pred(v)) {
                return Some(v.clone());
            }
            let now = Instant::now();
            if now >= end {
                return None;
            }
            log = self
                .inner
                .1
                .wait_timeout(log, end - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// An [`HttpServer`] whose handler logs every request into a [`RequestLog`]: what the fake
/// model APIs share. Stops on Drop.
pub struct LoggingServer {
    server: HttpServer,
    log: RequestLog,
}

impl LoggingServer {
    pub fn start(
        handle: impl Fn(&Request, &mut Conn<'_>, &RequestLog) -> io::Result<()> + Send + Sync + 'static,
    ) -> LoggingServer {
        let log = RequestLog::default();
        let l = log.clone();
        let server = HttpServer::start(Arc::new(move |req: &Request, conn: &mut Conn<'_>| {
            handle(req, conn, &l)
        }));
        LoggingServer { server, log }
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// Every request so far, oldest first (see the fake for the fields of an entry).
    pub fn requests(&self) -> Vec<Value> {
        self.log.all()
    }

    #[allow(
        dead_code,
        reason = "the integration tests' rig uses it (`tests/it/adapters/mod.rs` compiles this file)"
    )]
    /// The first request matching `pred`, waiting up to `timeout` for it; `None` when none came.
    pub fn request_within(
        &self,
        pred: impl Fn(&Value) -> bool,
        timeout: Duration,
    ) -> Option<Value> {
        self.log.find_within(pred, timeout)
    }
}

/// `n` random lower-case hex digits for message / call ids (no uuid crate needed).
pub fn random_hex(n: usize) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut s = String::with_capacity(n + 16);
    while s.len() < n {
        let c = COUNTER.fetch_add(1, Ordering::Relaxed);
        // RandomState is seeded randomly per process, so ids differ between runs too.
        let h = RandomState::new().hash_one(c);
        let _ = write!(s, "{h:016x}");
    }
    s.truncate(n);
    s
}

/// The non-empty run of non-whitespace after the first `key` that has one (regex `KEY(\S+)`).
pub fn token_after<'a>(hay: &'a str, key: &str) -> Option<&'a str> {
    hay.match_indices(key).find_map(|(i, _)| {
        let rest = &hay[i + key.len()..];
        let tok = &rest[..rest.find(char::is_whitespace).unwrap_or(rest.len())];
        (!tok.is_empty()).then_some(tok)
    })
}
