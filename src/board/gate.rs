//! The board's security gate: one pure function that every request passes before any handler
//! runs. `Host` first (DNS rebinding), then `Origin` on everything that changes state or opens
//! the WebSocket, then the credentials (the token, its cookie, the page's CSRF value).

/// Where the board is reached: the names a request's `Host` may carry and the origin each one
/// implies.
#[derive(Debug, Clone)]
pub struct Site {
    /// Accepted `Host` values (lowercase, with the port as a browser sends it), each with the
    /// origin a page loaded from it has.
    pub hosts: Vec<(String, String)>,
}

impl Site {
    /// The loopback names and literals with the exact `port`, the listen address when it is
    /// a specific one, and the `--public-url`'s host.
    pub fn new(listen: std::net::SocketAddr, public: Option<&PublicUrl>) -> Site {
        let port = listen.port();
        let mut hosts: Vec<(String, String)> = ["127.0.0.1", "localhost", "[::1]"]
            .iter()
            .map(|h| {
                let host = format!("{h}:{port}");
                (host.clone(), format!("http://{host}"))
            })
            .collect();
        let ip = listen.ip();
        if !ip.is_loopback() && !ip.is_unspecified() {
            let host = listen.to_string();
            hosts.push((host.clone(), format!("http://{host}")));
        }
        if let Some(p) = public {
            hosts.push((p.host.clone(), p.origin.clone()));
        }
        Site { hosts }
    }

    fn origin_of(&self, host: &str) -> Option<&str> {
        let host = host.to_ascii_lowercase();
        self.hosts
            .iter()
            .find(|(h, _)| *h == host)
            .map(|(_, o)| o.as_str())
    }
}

/// A `--public-url` (`https://board.example:8443/`): the `Host` a browser sends for it and
/// its origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl {
    pub host: String,
    pub origin: String,
    /// The URL as given, without a trailing `/`.
    pub base: String,
}

impl PublicUrl {
    /// `None` for anything but an `http`/`https` URL with a host.
    pub fn parse(url: &str) -> Option<PublicUrl> {
        let (scheme, rest) = url.split_once("://")?;
        let scheme = scheme.to_ascii_lowercase();
        let default = match scheme.as_str() {
            "http" => "80",
            "https" => "443",
            _ => return None,
        };
        let authority = rest.split(['/', '?', '#']).next()?.to_ascii_lowercase();
        if authority.is_empty() || authority.contains('@') {
            return None;
        }
        // `[::1]:8443`, `host:8443`, `host`: the port is what follows the last `:` outside
        // brackets.
        let (name, port) = match authority.rfind(':') {
            Some(i) if !authority[i..].contains(']') => {
                (&authority[..i], Some(&authority[i + 1..]))
            }
            _ => (authority.as_str(), None),
        };
        if name.is_empty()
            || port.is_some_and(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
        {
            return None;
        }
        let host = match port {
            Some(p) if p != default => format!("{name}:{p}"),
            _ => name.to_owned(),
        };
        Some(PublicUrl {
            origin: format!("{scheme}://{host}"),
            host,
            base: url.trim_end_matches('/').to_owned(),
        })
    }
}

/// What the gate reads of a request.
#[derive(Debug, Clone, Copy, Default)]
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub host: Option<&'a str>,
    pub origin: Option<&'a str>,
    /// The board cookie's value.
    pub cookie: Option<&'a str>,
    /// `?token=` of the address (only `GET /` takes it).
    pub query_token: Option<&'a str>,
    /// The `X-Spex-Csrf` header, or for the WebSocket `?csrf=`.
    pub csrf: Option<&'a str>,
    /// A WebSocket upgrade.
    pub upgrade: bool,
}

/// The board's secret: its token (the cookie's value), which the pages' CSRF values are
/// bound to.
#[derive(Debug, Clone, Copy)]
pub struct Secrets<'a> {
    pub token: &'a str,
}

/// The CSRF value of one page: a nonce of its own and a MAC of it under the board's token, so
/// it is bound to the cookie (a page of another board, or of this one before a restart,
/// carries none that passes) and tells nothing of the token.
pub fn csrf_for(token: &str, nonce: &str) -> String {
    format!("{nonce}.{}", mac(token, nonce))
}

fn mac(token: &str, nonce: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(
        format!("spex board csrf\0{token}\0{nonce}").as_bytes(),
    ))
}

/// Whether `value` is a CSRF value a page of the board with `token` was given.
pub fn csrf_valid(token: &str, value: &str) -> bool {
    let Some((nonce, m)) = value.split_once('.') else {
        return false;
    };
    !nonce.is_empty()
        && nonce.len() <= 64
        && nonce.bytes().all(|b| b.is_ascii_hexdigit())
        && eq(m.as_bytes(), mac(token, nonce).as_bytes())
}

/// What a request may do once through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// A static asset (no data in it: the stylesheet, the script, the manifest, the icon).
    Asset,
    /// `GET /?token=` with the right token: set the cookie and send the browser to `/`.
    Login,
    /// A page or a read with the cookie.
    Read,
    /// The WebSocket, with the cookie and the page's CSRF value, from the board's own origin.
    Socket,
    /// An action (POST), with the cookie and the page's CSRF value, from the board's origin.
    Action,
    /// An answer link (`/a/<token>`): the link is the credential (its handler checks it), so
    /// no cookie; a GET only shows it, a POST answers from no `Origin` (a notification app
    /// sends none) or the board's own.
    Link,
}

/// Why a request was refused. Every refusal is one uniform 403 (405 for a method the board
/// has no use for), its body saying nothing of the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Host,
    Origin,
    Credentials,
    Csrf,
    Method,
}

impl Refusal {
    pub fn status(self) -> u16 {
        match self {
            Refusal::Method => 405,
            _ => 403,
        }
    }
}

/// Paths served to anyone who reached the right `Host`: they hold no data.
pub const PUBLIC: [&str; 6] = [
    "/assets/board.css",
    "/assets/board.js",
    "/manifest.webmanifest",
    "/icon.svg",
    "/icon-192.png",
    "/icon-512.png",
];

/// The gate: `Host`, then `Origin` where state changes or the socket opens, then the
/// credentials. Nothing else about a request is looked at before it.
pub fn gate(site: &Site, secrets: &Secrets, req: &Request) -> Result<Pass, Refusal> {
    let Some(own) = req.host.and_then(|h| site.origin_of(h)) else {
        return Err(Refusal::Host);
    };
    let reads = matches!(req.method, "GET" | "HEAD");
    if !reads && req.method != "POST" {
        return Err(Refusal::Method);
    }
    if !req.upgrade
        && req
            .path
            .strip_prefix("/a/")
            .is_some_and(|t| !t.contains('/'))
    {
        return match req.origin {
            // A POST carrying a foreign (or `null`) Origin is a cross-site form: refused.
            Some(o) if !reads && (o == "null" || !eq(o.as_bytes(), own.as_bytes())) => {
                Err(Refusal::Origin)
            }
            _ => Ok(Pass::Link),
        };
    }
    if !reads || req.upgrade {
        // A missing or `null` Origin (a sandboxed frame, a redirect chain) is refused as a
        // foreign one is.
        match req.origin {
            Some(o) if o != "null" && eq(o.as_bytes(), own.as_bytes()) => {}
            _ => return Err(Refusal::Origin),
        }
    }
    if reads && !req.upgrade && PUBLIC.contains(&req.path) {
        return Ok(Pass::Asset);
    }
    if reads
        && !req.upgrade
        && req.path == "/"
        && let Some(t) = req.query_token
    {
        return if eq(t.as_bytes(), secrets.token.as_bytes()) {
            Ok(Pass::Login)
        } else {
            Err(Refusal::Credentials)
        };
    }
    match req.cookie {
        Some(c) if eq(c.as_bytes(), secrets.token.as_bytes()) => {}
        _ => return Err(Refusal::Credentials),
    }
    if reads && !req.upgrade {
        return Ok(Pass::Read);
    }
    match req.csrf {
        Some(c) if csrf_valid(secrets.token, c) => {}
        _ => return Err(Refusal::Csrf),
    }
    Ok(if req.upgrade {
        Pass::Socket
    } else {
        Pass::Action
    })
}

/// Compares in time that depends on the lengths only, never on where the bytes differ.
pub fn eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "t0k3n";
    fn csrf() -> &'static str {
        Box::leak(csrf_for(TOKEN, "0a1b").into_boxed_str())
    }

    fn site() -> Site {
        Site::new(
            "127.0.0.1:4750".parse().unwrap(),
            PublicUrl::parse("https://board.example/").as_ref(),
        )
    }

    fn run(req: Request) -> Result<Pass, Refusal> {
        gate(&site(), &Secrets { token: TOKEN }, &req)
    }

    fn action() -> Request<'static> {
        Request {
            method: "POST",
            path: "/api/answer",
            host: Some("127.0.0.1:4750"),
            origin: Some("http://127.0.0.1:4750"),
            cookie: Some(TOKEN),
            csrf: Some(csrf()),
            ..Request::default()
        }
    }

    #[test]
    fn host_is_checked_before_anything_else() {
        for host in [
            None,
            Some("evil.example:4750"),
            Some("127.0.0.1:4751"),
            Some("127.0.0.1"),
            Some("localhost.evil:4750"),
        ] {
            assert_eq!(
                run(Request { host, ..action() }),
                Err(Refusal::Host),
                "{host:?}"
            );
            // Even a public asset and a right token are refused under a wrong Host.
            let asset = Request {
                method: "GET",
                path: "/icon.svg",
                host,
                ..Request::default()
            };
            assert_eq!(run(asset), Err(Refusal::Host));
        }
        for host in [
            "127.0.0.1:4750",
            "LOCALHOST:4750",
            "[::1]:4750",
            "board.example",
        ] {
            let get = Request {
                method: "GET",
                path: "/",
                host: Some(host),
                cookie: Some(TOKEN),
                ..Request::default()
            };
            assert_eq!(run(get), Ok(Pass::Read), "{host}");
        }
    }

    #[test]
    fn origin_must_be_the_boards_own_on_actions_and_the_socket() {
        assert_eq!(run(action()), Ok(Pass::Action));
        for origin in [
            None,
            Some("null"),
            Some("http://evil.example"),
            Some("http://localhost:4750"),
            Some("http://127.0.0.1:4751"),
        ] {
            assert_eq!(
                run(Request { origin, ..action() }),
                Err(Refusal::Origin),
                "{origin:?}"
            );
            let ws = Request {
                method: "GET",
                path: "/ws",
                upgrade: true,
                origin,
                ..action()
            };
            assert_eq!(run(ws), Err(Refusal::Origin), "{origin:?}");
        }
        let ws = Request {
            method: "GET",
            path: "/ws",
            upgrade: true,
            ..action()
        };
        assert_eq!(run(ws), Ok(Pass::Socket));
        let public = Request {
            host: Some("board.example"),
            origin: Some("https://board.example"),
            ..action()
        };
        assert_eq!(run(public), Ok(Pass::Action));
    }

    #[test]
    fn credentials_are_the_cookie_and_the_pages_csrf_value() {
        assert_eq!(
            run(Request {
                cookie: None,
                ..action()
            }),
            Err(Refusal::Credentials)
        );
        assert_eq!(
            run(Request {
                cookie: Some("t0k3m"),
                ..action()
            }),
            Err(Refusal::Credentials)
        );
        assert_eq!(
            run(Request {
                csrf: None,
                ..action()
            }),
            Err(Refusal::Csrf)
        );
        // Another board's page value, a forged MAC, a value without its nonce: refused.
        let other = csrf_for("another token", "0a1b");
        let forged = format!("0a1c.{}", csrf().split_once('.').unwrap().1);
        for bad in [other.as_str(), forged.as_str(), "c5rf", ".", "0a1b."] {
            assert_eq!(
                run(Request {
                    csrf: Some(bad),
                    ..action()
                }),
                Err(Refusal::Csrf),
                "{bad}"
            );
        }
        // Each page has its own value; every one passes.
        let page2 = csrf_for(TOKEN, "ffee");
        assert_ne!(page2, csrf());
        assert_eq!(
            run(Request {
                csrf: Some(&page2),
                ..action()
            }),
            Ok(Pass::Action)
        );
        let ws = Request {
            method: "GET",
            path: "/ws",
            upgrade: true,
            csrf: None,
            ..action()
        };
        assert_eq!(run(ws), Err(Refusal::Csrf));
        let page = Request {
            method: "GET",
            path: "/",
            origin: None,
            cookie: None,
            csrf: None,
            ..action()
        };
        assert_eq!(run(page), Err(Refusal::Credentials));
        assert_eq!(
            run(Request {
                query_token: Some(TOKEN),
                ..page
            }),
            Ok(Pass::Login)
        );
        assert_eq!(
            run(Request {
                query_token: Some("t0k3"),
                ..page
            }),
            Err(Refusal::Credentials)
        );
        // The token is taken from the address of `/` only.
        assert_eq!(
            run(Request {
                path: "/api/sessions",
                query_token: Some(TOKEN),
                ..page
            }),
            Err(Refusal::Credentials)
        );
        assert_eq!(
            run(Request {
                path: "/assets/board.js",
                ..page
            }),
            Ok(Pass::Asset)
        );
    }

    #[test]
    fn only_get_head_and_post_are_served() {
        for method in ["PUT", "DELETE", "PATCH", "OPTIONS"] {
            assert_eq!(run(Request { method, ..action() }), Err(Refusal::Method));
        }
    }

    #[test]
    fn public_urls_give_the_host_a_browser_sends() {
        let p = PublicUrl::parse("https://Board.Example:443/x").unwrap();
        assert_eq!(
            (p.host.as_str(), p.origin.as_str()),
            ("board.example", "https://board.example")
        );
        let p = PublicUrl::parse("http://10.0.0.2:8080").unwrap();
        assert_eq!(
            (p.host.as_str(), p.origin.as_str()),
            ("10.0.0.2:8080", "http://10.0.0.2:8080")
        );
        let p = PublicUrl::parse("http://[fd00::1]:8080/").unwrap();
        assert_eq!(p.host, "[fd00::1]:8080");
        for bad in [
            "ftp://x",
            "http://",
            "board.example",
            "http://u@h",
            "http://h:",
        ] {
            assert_eq!(PublicUrl::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn equal_is_exact() {
        assert!(eq(b"abc", b"abc"));
        assert!(!eq(b"abc", b"abd"));
        assert!(!eq(b"abc", b"abcd"));
        assert!(!eq(b"", b"a"));
    }

    #[test]
    fn an_answer_link_needs_the_host_but_no_cookie_and_refuses_a_foreign_origin() {
        let link = |method, origin| Request {
            method,
            path: "/a/0123abcd",
            host: Some("board.example"),
            origin,
            ..Request::default()
        };
        // The link is the credential: no cookie, no CSRF value.
        assert_eq!(run(link("GET", None)), Ok(Pass::Link));
        assert_eq!(run(link("HEAD", None)), Ok(Pass::Link));
        // A notification app posts with no Origin; the confirmation page with the board's own.
        assert_eq!(run(link("POST", None)), Ok(Pass::Link));
        assert_eq!(
            run(link("POST", Some("https://board.example"))),
            Ok(Pass::Link)
        );
        for foreign in ["http://evil.example", "null", "http://board.example"] {
            assert_eq!(
                run(link("POST", Some(foreign))),
                Err(Refusal::Origin),
                "{foreign}"
            );
        }
        // Host still first; other methods, deeper paths and the socket are no links.
        assert_eq!(
            run(Request {
                host: Some("evil.example"),
                ..link("POST", None)
            }),
            Err(Refusal::Host)
        );
        assert_eq!(run(link("PUT", None)), Err(Refusal::Method));
        for path in ["/a/x/y", "/a", "/ab/x"] {
            assert_eq!(
                run(Request {
                    path,
                    ..link("GET", None)
                }),
                Err(Refusal::Credentials),
                "{path}"
            );
        }
        assert_eq!(
            run(Request {
                upgrade: true,
                ..link("GET", Some("https://board.example"))
            }),
            Err(Refusal::Credentials)
        );
    }
}
