//! The board's HTTP server (axum on tokio): the gate as middleware before every handler, the
//! page and its assets, the WebSocket (a snapshot, then the changes), and the actions.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::gate::{self, Pass, Secrets};
use super::hub::{self, Push};
use super::shared::Shared;
use super::{actions, assets};
use crate::store::stream::Cursor;

/// The board cookie's name: with the board's port, as browsers share a host's cookies across
/// its ports (two boards, or a board restarted on another port, never overwrite each other's).
pub fn cookie_name(port: u16) -> String {
    format!("spex_board_{port}")
}

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(page))
        .route(
            "/assets/board.css",
            get(|| async { asset("text/css", assets::CSS) }),
        )
        .route(
            "/assets/board.js",
            get(|| async { asset("text/javascript", assets::JS) }),
        )
        .route(
            "/manifest.webmanifest",
            get(|| async { asset("application/manifest+json", assets::MANIFEST) }),
        )
        .route(
            "/icon.svg",
            get(|| async { asset("image/svg+xml", assets::ICON) }),
        )
        .route(
            "/icon-192.png",
            get(|| async { ([(header::CONTENT_TYPE, "image/png")], assets::ICON_192) }),
        )
        .route(
            "/icon-512.png",
            get(|| async { ([(header::CONTENT_TYPE, "image/png")], assets::ICON_512) }),
        )
        .route("/ws", get(socket))
        .route("/api/{action}", post(action))
        .route("/a/{token}", get(link_page).post(link_answer))
        .fallback(|| async { (StatusCode::NOT_FOUND, "not found\n") })
        .layer(middleware::from_fn_with_state(shared.clone(), guard))
        .with_state(shared)
}

/// The security headers every response carries: no inline script, no framing, no sniffing,
/// no referrer; and no CORS header ever.
fn harden(headers: &mut HeaderMap, form: bool) {
    let set = |h: &mut HeaderMap, k: &'static str, v: &'static str| {
        h.insert(k, HeaderValue::from_static(v));
    };
    set(
        headers,
        "content-security-policy",
        if form {
            // An answer link's confirmation page posts its plain form back to itself.
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
        } else {
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        },
    );
    set(headers, "x-content-type-options", "nosniff");
    set(headers, "referrer-policy", "no-referrer");
    set(headers, "x-frame-options", "DENY");
    set(headers, "cache-control", "no-store");
}

fn header_str(h: &HeaderMap, name: impl header::AsHeaderName) -> Option<&str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// `name`'s value among `a=b; c=d` (cookies) or `a=b&c=d` (a query), undecoded.
pub fn pair<'a>(text: &'a str, sep: char, name: &str) -> Option<&'a str> {
    text.split(sep).map(str::trim).find_map(|kv| {
        kv.split_once('=')
            .filter(|(k, _)| *k == name)
            .map(|(_, v)| v)
    })
}

/// Runs the gate before anything else; a login sets the cookie and sends the browser to `/`.
async fn guard(State(shared): State<Arc<Shared>>, mut req: Request, next: Next) -> Response {
    let name = cookie_name(shared.local.port());
    let h = req.headers();
    let query = req.uri().query().unwrap_or_default();
    let cookie = h
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|c| pair(c, ';', &name));
    let upgrade =
        header_str(h, header::UPGRADE).is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
    let csrf = if upgrade {
        pair(query, '&', "csrf")
    } else {
        header_str(h, "x-spex-csrf")
    };
    let verdict = gate::gate(
        &shared.site,
        &Secrets {
            token: &shared.token,
        },
        &gate::Request {
            method: req.method().as_str(),
            path: req.uri().path(),
            host: header_str(h, header::HOST),
            origin: header_str(h, header::ORIGIN),
            cookie,
            query_token: pair(query, '&', "token"),
            csrf,
            upgrade,
        },
    );
    let form = verdict == Ok(Pass::Link);
    let mut resp = match verdict {
        Err(refusal) => {
            let status = StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::FORBIDDEN);
            // One uniform refusal: it says nothing of which check failed, nor of the token.
            (status, "forbidden\n").into_response()
        }
        Ok(Pass::Login) => {
            let cookie = format!("{name}={}; HttpOnly; SameSite=Strict; Path=/", shared.token);
            let mut r = Response::builder()
                .status(StatusCode::SEE_OTHER)
                .header(header::LOCATION, "/")
                .body(Body::empty())
                .unwrap_or_default();
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        Ok(pass) => {
            req.extensions_mut().insert(pass);
            next.run(req).await
        }
    };
    harden(resp.headers_mut(), form);
    resp
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

/// The page, with this board's CSRF value in a meta tag (read by the script; no inline
/// script anywhere).
async fn page(State(shared): State<Arc<Shared>>) -> Response {
    // A value of this page's own, bound to the token.
    let nonce = super::state::new_secret().unwrap_or_default();
    let csrf = gate::csrf_for(&shared.token, &nonce[..nonce.len().min(32)]);
    let html = assets::HTML.replace("{{csrf}}", &csrf);
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()
}

#[derive(Debug, serde::Deserialize)]
struct SocketQuery {
    cursor: Option<String>,
}

async fn socket(
    State(shared): State<Arc<Shared>>,
    Query(q): Query<SocketQuery>,
    ws: WebSocketUpgrade,
) -> Response {
    let cursor = q.cursor.as_deref().and_then(|c| Cursor::parse(c).ok());
    ws.on_upgrade(move |s| stream(shared, s, cursor))
}

fn text(v: &Value) -> Message {
    Message::Text(v.to_string().into())
}

/// One page's socket: the snapshot (after the page's cursor, when it has one), then every
/// change after it, and the screen of the session the page looks at.
async fn stream(shared: Arc<Shared>, mut ws: WebSocket, from: Option<Cursor>) {
    // Subscribed before the snapshot is taken: no change falls between the two.
    let mut rx = shared.tx.subscribe();
    let env = shared.env.clone();
    let snap = tokio::task::spawn_blocking(move || hub::snapshot(&env, from.as_ref())).await;
    let Ok(snap) = snap else {
        return;
    };
    let mut cursor = snap.cursor.clone();
    let first = json!({
        "type": "snapshot",
        "cursor": cursor.to_string(),
        "events": snap.events,
        "sessions": snap.sessions,
        "limits": snap.limits,
        "gaps": snap.gaps,
    });
    if ws.send(text(&first)).await.is_err() {
        return;
    }
    let mut screen = super::screen::Watch::default();
    // The sessions this page shows with the page visible, their markers kept fresh.
    let mut shows: BTreeSet<String> = BTreeSet::new();
    page_loop(
        &shared,
        &mut ws,
        &mut rx,
        &mut cursor,
        &mut screen,
        &mut shows,
    )
    .await;
    // Hidden, closed or gone: the page shows nothing any more.
    let sh = shared.clone();
    let _ =
        tokio::task::spawn_blocking(move || sh.viewing.change(&sh.env, &shows, &BTreeSet::new()))
            .await;
}

/// The page's socket after its snapshot, until it closes: the changes out, the screen it
/// looks at, and what it says it shows.
async fn page_loop(
    shared: &Arc<Shared>,
    ws: &mut WebSocket,
    rx: &mut broadcast::Receiver<Push>,
    cursor: &mut Cursor,
    screen: &mut super::screen::Watch,
    shows: &mut BTreeSet<String>,
) {
    loop {
        tokio::select! {
            push = rx.recv() => {
                let msg = match push {
                    Ok(Push::Change(c)) => {
                        let after = cursor.after(&c.key);
                        let lines: Vec<&Value> = c.lines.iter()
                            .filter(|l| l["pos"].as_u64().is_some_and(|p| p > after))
                            .collect();
                        let Some(last) = lines.last().and_then(|l| l["pos"].as_u64()) else { continue };
                        cursor.set(&c.key, last);
                        let mut m = json!({"type": "change", "cursor": cursor.to_string(), "events": lines, "sessions": c.sessions});
                        if let Some(l) = &c.limits {
                            m["limits"] = l.clone();
                        }
                        m
                    }
                    Ok(Push::Notice(v)) => (*v).clone(),
                    // Too slow a page: it starts over from its cursor, losing nothing.
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        let _ = ws.send(text(&json!({"type": "resync", "cursor": cursor.to_string()}))).await;
                        return;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                if ws.send(text(&msg)).await.is_err() {
                    return;
                }
            }
            shot = screen.next(&shared.env) => {
                if let Some(v) = shot && ws.send(text(&v)).await.is_err() {
                    return;
                }
            }
            incoming = ws.recv() => {
                match incoming {
                    Some(Ok(Message::Text(t))) => {
                        // What a page says: which session's screen it looks at, and which
                        // sessions it shows with the page visible. There is no input path to
                        // a session's terminal.
                        let v: Value = serde_json::from_str(t.as_str()).unwrap_or_default();
                        if v["type"] == "screen" {
                            screen.set(v["session"].as_str().map(str::to_owned));
                        } else if v["type"] == "viewing" {
                            let keys: Vec<String> = v["sessions"].as_array().into_iter().flatten()
                                .filter_map(|k| k.as_str().map(str::to_owned)).collect();
                            let sh = shared.clone();
                            let old = shows.clone();
                            // Said again every few seconds while it holds: a page that stops
                            // (its network gone, the socket not yet closed) stops counting.
                            let new = tokio::task::spawn_blocking(move || {
                                let new = super::viewing::resolve(&sh.env, &keys);
                                sh.viewing.change(&sh.env, &old, &new);
                                super::viewing::Viewing::refresh(&sh.env, &old.intersection(&new).cloned().collect());
                                new
                            }).await;
                            if let Ok(new) = new {
                                *shows = new;
                            }
                        }
                    }
                    Some(Ok(Message::Close(_)) | Err(_)) | None => return,
                    Some(Ok(_)) => {}
                }
            }
        }
    }
}

async fn action(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(name): Path<String>,
    req: Request,
) -> Response {
    if req.extensions().get::<Pass>() != Some(&Pass::Action) {
        return (StatusCode::FORBIDDEN, "forbidden\n").into_response();
    }
    let Ok(bytes) = axum::body::to_bytes(req.into_body(), 1 << 20).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "too large\n").into_response();
    };
    let Ok(body) = serde_json::from_slice::<Value>(&bytes) else {
        return reply(
            StatusCode::BAD_REQUEST,
            &json!({"ok": false, "error": "the body is not JSON"}),
        );
    };
    let (status, v) = actions::run(shared, peer, &name, body).await;
    reply(status, &v)
}

async fn link_page(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(token): Path<String>,
    req: Request,
) -> Response {
    if req.extensions().get::<Pass>() != Some(&Pass::Link) {
        return (StatusCode::FORBIDDEN, "forbidden\n").into_response();
    }
    super::links::serve(shared, peer, token, None).await
}

async fn link_answer(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(token): Path<String>,
    req: Request,
) -> Response {
    if req.extensions().get::<Pass>() != Some(&Pass::Link) {
        return (StatusCode::FORBIDDEN, "forbidden\n").into_response();
    }
    let kind = header_str(req.headers(), header::CONTENT_TYPE)
        .unwrap_or_default()
        .to_owned();
    let Ok(bytes) = axum::body::to_bytes(req.into_body(), 64 << 10).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "too large\n").into_response();
    };
    let posted = super::links::posted(&kind, &bytes);
    super::links::serve(shared, peer, token, Some(posted)).await
}

fn reply(status: StatusCode, v: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}
