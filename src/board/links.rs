//! The notifier's answer links on the board's server: `GET /a/<token>` shows a confirmation
//! page (link scanners and previews fetch URLs: a GET never answers), `POST /a/<token>`
//! answers through the runtime's answer path, recorded as answered `by: "link"`. The
//! capability logic is [`crate::notify::links`]; the gate already checked the `Host` and refused
//! a foreign `Origin`.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::shared::Shared;
use crate::env::Env;
use crate::notify::links::{self, Link, Verdict};
use crate::runtime;
use crate::store::session::Session;

/// How long an answer waits for the harness to confirm (the CLI's default).
const CONFIRM: Duration = Duration::from_secs(30);

/// What a POST names: the choice, and optionally the session and attention it is meant for
/// (the confirmation page's form sends them: a link never answers another).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Posted {
    pub choice: String,
    pub session: Option<String>,
    pub attention: Option<String>,
}

/// Reads a POST's body: a form (`choice=allow`, as the ntfy app and the page send) or JSON.
pub fn posted(content_type: &str, body: &[u8]) -> Posted {
    let text = String::from_utf8_lossy(body);
    if content_type.starts_with("application/json") {
        let v: Value = serde_json::from_str(&text).unwrap_or_default();
        let s = |k: &str| v[k].as_str().map(str::to_owned);
        return Posted {
            choice: s("choice").unwrap_or_default(),
            session: s("session"),
            attention: s("attention"),
        };
    }
    let mut p = Posted::default();
    for kv in text.split('&') {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let v = form_decode(v);
        match k {
            "choice" => p.choice = v,
            "session" => p.session = Some(v),
            "attention" => p.attention = Some(v),
            _ => {}
        }
    }
    p
}

/// `application/x-www-form-urlencoded` value: `+` is a space, `%XX` a byte.
fn form_decode(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(x) => {
                        out.push(x);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Escapes `text` for HTML, its control characters made visible first.
pub fn html(text: &str) -> String {
    let mut out = String::new();
    for c in crate::text::visible(text).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn page(status: StatusCode, title: &str, inner: &str) -> Response {
    let body = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"referrer\" content=\"no-referrer\">\
         <link rel=\"stylesheet\" href=\"/assets/board.css\"><title>{t}</title></head>\
         <body class=\"link\"><main><h1>{t}</h1>\n{inner}</main></body></html>\n",
        t = html(title)
    );
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

/// The same 404 for a token that names no link and one refused: no oracle.
fn unknown() -> Response {
    page(
        StatusCode::NOT_FOUND,
        "No such link",
        "<p>This answer link is not known here.</p>",
    )
}

fn gone(why: &str) -> Response {
    page(
        StatusCode::GONE,
        "This link is closed",
        &format!("<p>{}; the link answers nothing.</p>", html(why)),
    )
}

fn again(link: &Link) -> Response {
    let given = link.answered.as_deref().unwrap_or_default();
    page(
        StatusCode::OK,
        "Answered",
        &format!("<p>Answered through this link: <b>{}</b>.</p>", html(given)),
    )
}

/// The confirmation page: the session, what it asks, one button per choice posting back here.
fn confirm(token: &str, link: &Link, s: &Session) -> Response {
    let Some(a) = &s.attention else {
        return gone("the attention closed");
    };
    let mut inner = format!(
        "<p>Session <b>{}</b>{}</p>\n<pre>{}</pre>\n",
        html(s.handle.as_deref().unwrap_or(&s.id)),
        s.name
            .as_deref()
            .map(|n| format!(" ({})", html(n)))
            .unwrap_or_default(),
        html(&a.text),
    );
    for q in &a.questions {
        let _ = writeln!(inner, "<p>{}</p>", html(&q.question));
    }
    let mut choices: Vec<(String, String)> = a
        .choices
        .iter()
        .map(|c| (c.id.clone(), c.label.clone()))
        .collect();
    for q in &a.questions {
        choices.extend(q.options.iter().map(|o| (o.clone(), o.clone())));
    }
    let _ = writeln!(
        inner,
        "<form method=\"post\" action=\"/a/{}\">\
         <input type=\"hidden\" name=\"session\" value=\"{}\">\
         <input type=\"hidden\" name=\"attention\" value=\"{}\">",
        html(token),
        html(&link.session),
        html(&link.attention),
    );
    for (id, label) in choices {
        let _ = writeln!(
            inner,
            "<button type=\"submit\" name=\"choice\" value=\"{}\">{}</button>",
            html(&id),
            html(&label)
        );
    }
    inner.push_str("</form>\n");
    page(StatusCode::OK, "Answer", &inner)
}

/// `GET /a/<token>`: shows the link's attention; never changes anything.
pub fn show(env: &Env, token: &str) -> Response {
    let Ok((v, link)) = links::check(env, token, None, "") else {
        return unknown();
    };
    match (v, link) {
        (Verdict::Open, Some(link)) => match links::record_of(env, &link)
            .map(|(_, s)| s)
            .or_else(|| links::remote_of(env, &link).map(|(_, s)| s))
        {
            Some(s) => confirm(token, &link, &s),
            None => gone("the session is gone"),
        },
        (Verdict::Again, Some(link)) => again(&link),
        (Verdict::Gone { why }, _) => gone(why),
        _ => unknown(),
    }
}

/// `POST /a/<token>`: judges the answer, gives it through the runtime (the same path as
/// `spex answer`), records it on the link.
pub fn answer(env: &Env, token: &str, p: &Posted) -> Response {
    let expect = match (&p.session, &p.attention) {
        (Some(s), Some(a)) => Some((s.as_str(), a.as_str())),
        (None, None) => None,
        // Half a name is not the link's attention.
        _ => Some(("", "")),
    };
    let Ok((v, link)) = links::check(env, token, expect, &p.choice) else {
        return unknown();
    };
    let link = match (v, link) {
        (Verdict::Answer, Some(link)) => link,
        (v, link) => return after(v, link.as_ref()),
    };
    let given = if let Some((store, _)) = links::record_of(env, &link) {
        runtime::transport::answer(
            env,
            &store,
            &link.session,
            Some(&link.attention),
            std::slice::from_ref(&p.choice),
            None,
            "link",
            CONFIRM,
        )
        .is_ok()
    } else if let Some((host, _)) = links::remote_of(env, &link) {
        answer_remote(env, &host, &link, &p.choice)
    } else {
        return gone("the session is gone");
    };
    if given {
        let _ = links::answered(env, token, &p.choice);
        return page(
            StatusCode::OK,
            "Answered",
            &format!("<p>Answered: <b>{}</b>.</p>", html(&p.choice)),
        );
    }
    // Refused by the runtime (answered elsewhere first, or the dialog went): what the link
    // says now.
    match links::check(env, token, expect, &p.choice) {
        Ok((Verdict::Answer, _)) => page(
            StatusCode::CONFLICT,
            "Not answered",
            "<p>The session did not take the answer.</p>",
        ),
        Ok((v, link)) => after(v, link.as_ref()),
        Err(_) => unknown(),
    }
}

/// Answers a remote session's attention through the spex on its machine (`spex answer` there,
/// through the protocol's `run` over ssh), which confirms it as it confirms a local one.
fn answer_remote(env: &Env, host: &str, link: &Link, choice: &str) -> bool {
    let Ok(remote) = crate::remote::find(env, host) else {
        return false;
    };
    let args = [
        "answer",
        link.session.as_str(),
        choice,
        "--attention",
        link.attention.as_str(),
        // Recorded there as what it is: answered through a link, not that machine's CLI.
        "--by",
        "link",
        "--json",
    ];
    crate::remote::run(env, &remote, &args, None).is_ok_and(|ran| ran.exit == Some(0))
}

/// The response to a POST whose verdict is not to answer.
fn after(v: Verdict, link: Option<&Link>) -> Response {
    let status = StatusCode::from_u16(v.status()).unwrap_or(StatusCode::FORBIDDEN);
    match (v, link) {
        (Verdict::Again, Some(link)) => again(link),
        (Verdict::Conflict { given }, _) => page(
            status,
            "Already answered",
            &format!(
                "<p>This link already answered <b>{}</b>; nothing changed.</p>",
                html(&given)
            ),
        ),
        (Verdict::Gone { why }, _) => gone(why),
        (Verdict::Refused, Some(_)) => {
            page(status, "Refused", "<p>This link does not answer that.</p>")
        }
        _ => unknown(),
    }
}

/// Runs `show` or `answer` off the async runtime (they read the store and wait on the
/// harness), refusing a request from inside a session as the board's actions do.
pub async fn serve(
    shared: Arc<Shared>,
    peer: SocketAddr,
    token: String,
    post: Option<Posted>,
) -> Response {
    let done = tokio::task::spawn_blocking(move || {
        let env = &shared.env;
        if post.is_some() && super::actions::from_a_session(env, peer, shared.local).is_some() {
            return page(
                StatusCode::FORBIDDEN,
                "Refused",
                "<p>A session cannot answer through a link.</p>",
            );
        }
        match post {
            None => show(env, &token),
            Some(p) => answer(env, &token, &p),
        }
    })
    .await;
    done.unwrap_or_else(|_| (StatusCode::INTERNAL_SERVER_ERROR, "failed\n").into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_post_is_read_as_a_form_or_json() {
        assert_eq!(
            posted(
                "application/x-www-form-urlencoded",
                b"choice=allow%2Dsession&session=s1&attention=a+1"
            ),
            Posted {
                choice: "allow-session".into(),
                session: Some("s1".into()),
                attention: Some("a 1".into()),
            }
        );
        assert_eq!(posted("", b"choice=deny").choice, "deny");
        assert_eq!(
            posted("application/json", br#"{"choice":"allow"}"#).choice,
            "allow"
        );
        assert_eq!(form_decode("100%"), "100%");
        assert_eq!(form_decode("%zz"), "%zz");
    }

    #[test]
    fn text_is_escaped_and_control_characters_shown() {
        let h = html("<script>\u{1b}[31m\"x\"&");
        assert!(!h.contains('<') && !h.contains('\u{1b}'), "{h}");
        assert!(h.contains("&lt;script&gt;") && h.contains("&amp;"), "{h}");
    }
}
