//! The channels a notification goes out through: the user's command, an HTTP webhook (plain
//! JSON or ntfy's format), the desktop's notification service (`super::desktop`), the
//! attached terminals. Each runs in a thread of its own fed by a queue, so a hung command
//! or a webhook that times out never holds up another channel, the stream or the watcher.

use std::io::Write as _;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::message::{LinkOut, Message};
use super::state;
use crate::config::notify::{COMMAND_TIMEOUT, Format, Notify, Secret, Webhook};
use crate::env::Env;

/// Attempts per webhook delivery, and the wait before each retry (doubling).
pub const ATTEMPTS: u32 = 3;
pub const BACKOFF: Duration = Duration::from_millis(250);
/// How long one webhook request may take, connecting included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// ntfy shows at most three action buttons.
const NTFY_ACTIONS: usize = 3;

/// One configured channel.
#[derive(Debug, Clone)]
pub enum Channel {
    Command(Vec<String>),
    Webhook(Webhook),
    /// OSC 9 / OSC 777 to the `spex attach` terminals of every other session.
    Terminal(Box<Env>),
    /// The freedesktop notification service on the D-Bus session bus.
    Desktop(Arc<super::desktop::Desktop>),
}

impl Channel {
    pub fn name(&self) -> &'static str {
        match self {
            Channel::Command(_) => "command",
            Channel::Webhook(_) => "webhook",
            Channel::Terminal(_) => "terminal",
            Channel::Desktop(_) => "desktop",
        }
    }

    /// Takes back what was shown of an attention that closed (`m` a [`RETRACT`] message): a
    /// desktop notification whose buttons would answer nothing now is closed; what the other
    /// channels sent stays where it went.
    pub fn retract(&self, m: &Message) {
        if let Channel::Desktop(d) = self {
            d.retract(m);
        }
    }

    /// Delivers `m`: `Ok(detail)` when accepted, `Err(detail)` when not; and the attempts made.
    pub fn deliver(&self, m: &Message) -> (Result<String, String>, u32) {
        match self {
            Channel::Command(argv) => (command(argv, m, COMMAND_TIMEOUT), 1),
            Channel::Webhook(w) => webhook(w, m),
            Channel::Terminal(env) => (terminal(env, m), 1),
            Channel::Desktop(d) => (d.deliver(m), 1),
        }
    }
}

/// The event of the message the sender queues when an attention it announced closed: never
/// delivered, only [`Channel::retract`]ed.
pub const RETRACT: &str = "closed";

/// The channels `n` configures.
pub fn configured(env: &Env, n: &Notify) -> Vec<Channel> {
    let mut out = Vec::new();
    if let Some(argv) = &n.command {
        out.push(Channel::Command(argv.clone()));
    }
    if let Some(w) = &n.webhook {
        out.push(Channel::Webhook(w.clone()));
    }
    if n.terminal {
        out.push(Channel::Terminal(Box::new(env.clone())));
    }
    if n.desktop {
        out.push(Channel::Desktop(Arc::new(super::desktop::Desktop::new(
            env,
        ))));
    }
    out
}

/// Starts one thread per channel; the returned senders feed them.
pub fn start(env: &Env, channels: Vec<Channel>) -> Vec<mpsc::Sender<Message>> {
    channels
        .into_iter()
        .map(|ch| {
            let (tx, rx) = mpsc::channel::<Message>();
            let env = env.clone();
            std::thread::Builder::new()
                .name(format!("spex-notify-{}", ch.name()))
                .spawn(move || {
                    for m in rx {
                        if m.event == RETRACT {
                            ch.retract(&m);
                            continue;
                        }
                        let (r, attempts) = match &ch {
                            // Each failed attempt shows in `--status` while the next waits (a
                            // hanging webhook takes up to 16 s to fail for good).
                            Channel::Webhook(w) => webhook_noting(w, &m, &|n, e| {
                                state::retrying(&env, ch.name(), n, ATTEMPTS, e);
                            }),
                            _ => ch.deliver(&m),
                        };
                        let (ok, detail) = match r {
                            Ok(d) => (true, d),
                            Err(d) => (false, d),
                        };
                        if !ok {
                            crate::log::log!("notify: {} failed: {detail}", ch.name());
                        }
                        state::note(&env, ch.name(), ok, &detail, attempts);
                    }
                })
                .expect("a thread starts");
            tx
        })
        .collect()
}

/// Runs the user's command (no shell): the message as JSON on stdin, a few `SPEX_*` variables;
/// killed when it runs past `timeout`.
pub fn command(argv: &[String], m: &Message, timeout: Duration) -> Result<String, String> {
    let Some((program, args)) = argv.split_first() else {
        return Err("no program".into());
    };
    let mut child = std::process::Command::new(program)
        .args(args)
        .env("SPEX_EVENT", &m.event)
        .env("SPEX_PROJECT", &m.project)
        .env("SPEX_SESSION", &m.session)
        .env("SPEX_HANDLE", m.handle.as_deref().unwrap_or_default())
        .env("SPEX_TITLE", &m.title)
        .env("SPEX_MESSAGE", &m.message)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start `{program}`: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A command that does not read its stdin is no failure.
        let _ = stdin.write_all(&serde_json::to_vec(m).unwrap_or_default());
    }
    let end = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(format!("`{program}` exited 0")),
            Ok(Some(status)) => {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                return Err(format!(
                    "`{program}` {status}: {}",
                    super::message::clean(&err, 200)
                ));
            }
            Ok(None) if Instant::now() >= end => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`{program}` ran past {}s and was killed",
                    timeout.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for `{program}`: {e}")),
        }
    }
}

/// Shows `m` in the terminals attached to every session but its own (a person attached to
/// the session it is about sees it already).
fn terminal(env: &Env, m: &Message) -> Result<String, String> {
    let (mut shown, mut failed) = (0, Vec::new());
    for store in crate::store::all_projects(&env.spex_home()) {
        for id in store.session_ids() {
            if id == m.session || !store.attached(&id) {
                continue;
            }
            let notice = crate::runtime::protocol::Request::Notice {
                title: m.title.clone(),
                body: m.message.clone(),
            };
            match crate::runtime::client::call(env, &id, notice) {
                Ok(_) => shown += 1,
                Err(e) => failed.push(format!("{}: {e}", store.label_of(&id))),
            }
        }
    }
    if failed.is_empty() {
        Ok(format!("shown in {shown} attached terminal(s)"))
    } else {
        Err(format!(
            "shown in {shown} attached terminal(s), not in {}",
            failed.join("; ")
        ))
    }
}

/// The webhook's body and headers for `m`.
pub fn body(w: &Webhook, m: &Message) -> Value {
    match w.format {
        Format::Json => serde_json::to_value(m).unwrap_or(Value::Null),
        Format::Ntfy => ntfy(&w.url, m),
    }
}

/// ntfy's JSON publish: posted to the server's root with the topic inside (the URL's last
/// segment). Priority 4 for what waits on a person. One `http` action per option posting to
/// its answer link, up to ntfy's limit of three actions; when the options do not fit, or the
/// attention takes more than one tap (free text, several questions, several options together),
/// the last action is a `view` one: the board at the session ([`Message::needs_board`]), or the
/// link's confirmation page with every choice.
pub fn ntfy(url: &str, m: &Message) -> Value {
    let topic = url
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default();
    let waits = matches!(m.event.as_str(), "needs_attention" | "failed");
    let tags = match m.event.as_str() {
        "needs_attention" => vec!["bell"],
        "failed" => vec!["x"],
        "exited" => vec!["stop_sign"],
        _ => vec!["white_check_mark"],
    };
    let (buttons, view) = actions_of(m, NTFY_ACTIONS);
    let mut actions: Vec<Value> = buttons
        .iter()
        .map(|l| {
            json!({
                "action": "http", "label": l.label, "url": l.url, "method": "POST",
                "headers": {"Content-Type": "application/x-www-form-urlencoded"},
                "body": format!("choice={}", form_escape(&l.choice)), "clear": true,
            })
        })
        .collect();
    if let Some((label, url)) = &view {
        actions.push(json!({"action": "view", "label": label, "url": url}));
    }
    let mut v = json!({
        "topic": topic,
        "title": m.title,
        "message": m.message,
        "priority": if waits { 4 } else { 3 },
        "tags": tags,
    });
    if !actions.is_empty() {
        v["actions"] = Value::Array(actions);
    }
    // A tap on the notification itself: the board for what only it answers, else the
    // confirmation page.
    let click = if m.needs_board() || m.links.is_empty() {
        m.view
            .clone()
            .or_else(|| m.links.first().map(|l| l.url.clone()))
    } else {
        m.links.first().map(|l| l.url.clone())
    };
    if let Some(c) = click {
        v["click"] = c.into();
    }
    v
}

/// The answer buttons a channel that shows at most `limit` actions carries for `m`, and the
/// one `view` action (label, URL) after them when not everything fits in buttons.
pub fn actions_of(m: &Message, limit: usize) -> (Vec<&LinkOut>, Option<(&'static str, String)>) {
    let board = m
        .view
        .clone()
        .filter(|_| m.needs_board())
        .map(|u| ("Open on the board", u));
    let view = board.or_else(|| {
        // Every link of one attention leads to the same confirmation page.
        m.links
            .first()
            .filter(|_| m.links.len() > limit)
            .map(|l| ("More choices", l.url.clone()))
    });
    let fit = if view.is_some() {
        limit.saturating_sub(1)
    } else {
        limit
    };
    (m.links.iter().take(fit).collect(), view)
}

fn form_escape(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Where the body goes: ntfy's JSON publish goes to the server's root.
fn target(w: &Webhook) -> String {
    match w.format {
        Format::Json => w.url.clone(),
        Format::Ntfy => {
            let u = w.url.trim_end_matches('/');
            let scheme_end = u.find("://").map_or(0, |i| i + 3);
            match u[scheme_end..].find('/') {
                Some(i) => u[..scheme_end + i].to_owned() + "/",
                None => u.to_owned() + "/",
            }
        }
    }
}

/// Posts `m` to the webhook, retrying a refused connection, a timeout or a 5xx/429 answer
/// [`ATTEMPTS`] times in all with a doubling backoff; a 4xx other than 429 is not retried.
pub fn webhook(w: &Webhook, m: &Message) -> (Result<String, String>, u32) {
    webhook_noting(w, m, &|_, _| {})
}

/// [`webhook`], telling `retrying` of each failed attempt that another follows.
pub fn webhook_noting(
    w: &Webhook,
    m: &Message,
    retrying: &dyn Fn(u32, &str),
) -> (Result<String, String>, u32) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(REQUEST_TIMEOUT))
        .http_status_as_error(false)
        .build()
        .into();
    let payload = body(w, m).to_string();
    let url = target(w);
    let mut wait = BACKOFF;
    let mut last = String::new();
    for attempt in 1..=ATTEMPTS {
        let mut req = agent.post(&url).header("Content-Type", "application/json");
        for (name, value) in &w.headers {
            let v = match value {
                Secret::Text(t) => t.clone(),
                Secret::Env(var) => match Env::secret(var) {
                    Some(v) => v,
                    None => {
                        return (
                            Err(format!(
                                "header `{name}`: environment variable `{var}` is not set"
                            )),
                            attempt,
                        );
                    }
                },
            };
            req = req.header(name.as_str(), v.as_str());
        }
        match req.send(payload.as_bytes()) {
            Ok(resp) if resp.status().is_success() => {
                return (Ok(format!("HTTP {}", resp.status().as_u16())), attempt);
            }
            Ok(resp) => {
                let code = resp.status().as_u16();
                last = format!("HTTP {code} from {url}");
                if code != 429 && code < 500 {
                    return (Err(last), attempt);
                }
            }
            Err(e) => last = format!("{url}: {e}"),
        }
        if attempt < ATTEMPTS {
            retrying(attempt, &last);
            std::thread::sleep(wait);
            wait *= 2;
        }
    }
    (Err(format!("{last} (after {ATTEMPTS} attempts)")), ATTEMPTS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::message::QuestionOut;

    #[test]
    fn ntfy_carries_one_post_action_per_choice_up_to_three_and_posts_to_the_root() {
        let w = Webhook {
            url: "https://ntfy.example/mytopic".into(),
            format: Format::Ntfy,
            headers: Vec::new(),
        };
        assert_eq!(target(&w), "https://ntfy.example/");
        let mut m = Message {
            event: "needs_attention".into(),
            title: "t".into(),
            message: "m".into(),
            ..Message::default()
        };
        for c in ["allow", "deny"] {
            m.links.push(LinkOut {
                label: c.into(),
                choice: c.into(),
                url: "https://board/a/tok".into(),
            });
        }
        let v = body(&w, &m);
        assert_eq!(v["topic"], "mytopic");
        assert_eq!(v["priority"], 4);
        let actions = v["actions"].as_array().unwrap();
        assert_eq!(actions.len(), 2);
        assert_eq!(actions[0]["method"], "POST");
        assert_eq!(actions[1]["body"], "choice=deny");
        for c in ["a", "b"] {
            m.links.push(LinkOut {
                label: c.into(),
                choice: c.into(),
                url: "u".into(),
            });
        }
        // Four choices: two buttons and the confirmation page with all of them.
        let v = body(&w, &m);
        let actions = v["actions"].as_array().unwrap();
        assert_eq!(actions.len(), 3, "{v}");
        assert_eq!(actions[0]["body"], "choice=allow");
        assert_eq!(actions[1]["body"], "choice=deny");
        assert_eq!(actions[2]["action"], "view");
        assert_eq!(actions[2]["url"], "https://board/a/tok");
    }

    fn question(options: &[&str], free_text: bool) -> QuestionOut {
        QuestionOut {
            question: "Which color?".into(),
            options: options.iter().map(|o| (*o).to_owned()).collect(),
            free_text,
            multi_select: false,
        }
    }

    fn asked(questions: Vec<QuestionOut>, links: &[&str]) -> Message {
        Message {
            event: "needs_attention".into(),
            questions,
            links: links
                .iter()
                .map(|o| LinkOut {
                    label: (*o).into(),
                    choice: (*o).into(),
                    url: "https://board/a/tok".into(),
                })
                .collect(),
            view: Some("https://board/#session=p/s1".into()),
            ..Message::default()
        }
    }

    /// A question with free text: one button per option up to the limit, the last action the
    /// board at the session; several questions: the board only; a closed question with few
    /// options: buttons only.
    #[test]
    fn ntfy_gives_free_text_and_several_questions_a_view_of_the_session_on_the_board() {
        let w = Webhook {
            url: "https://ntfy.example/t".into(),
            format: Format::Ntfy,
            headers: Vec::new(),
        };
        let kinds = |v: &Value| -> Vec<String> {
            v["actions"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|x| {
                            format!(
                                "{} {}",
                                x["action"].as_str().unwrap(),
                                x["label"].as_str().unwrap()
                            )
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        let free = asked(vec![question(&["Red", "Blue"], true)], &["Red", "Blue"]);
        let v = body(&w, &free);
        assert_eq!(
            kinds(&v),
            ["http Red", "http Blue", "view Open on the board"],
            "{v}"
        );
        assert_eq!(v["actions"][2]["url"], "https://board/#session=p/s1");
        assert_eq!(v["click"], "https://board/#session=p/s1");

        let many = asked(
            vec![question(&["Red", "Blue", "Green", "Black"], true)],
            &["Red", "Blue", "Green", "Black"],
        );
        assert_eq!(
            kinds(&body(&w, &many)),
            ["http Red", "http Blue", "view Open on the board"]
        );

        let several = asked(
            vec![
                question(&["Red", "Blue"], false),
                question(&["Yes", "No"], false),
            ],
            &[],
        );
        let v = body(&w, &several);
        assert_eq!(kinds(&v), ["view Open on the board"], "{v}");
        assert_eq!(v["click"], "https://board/#session=p/s1");

        let closed = asked(
            vec![question(&["Red", "Blue", "Green"], false)],
            &["Red", "Blue", "Green"],
        );
        let v = body(&w, &closed);
        assert_eq!(kinds(&v), ["http Red", "http Blue", "http Green"], "{v}");
        assert_eq!(v["click"], "https://board/a/tok");
    }

    #[test]
    fn a_hung_command_is_killed_at_its_timeout() {
        let m = Message::default();
        let t = Instant::now();
        let r = command(
            &["sleep".into(), "30".into()],
            &m,
            Duration::from_millis(300),
        );
        assert!(r.unwrap_err().contains("killed"));
        assert!(t.elapsed() < Duration::from_secs(5));
        assert!(command(&["true".into()], &m, Duration::from_secs(5)).is_ok());
    }
}
