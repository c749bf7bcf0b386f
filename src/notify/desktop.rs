//! The desktop channel: the freedesktop notification service (`org.freedesktop.Notifications`)
//! on the user's D-Bus session bus, spoken to through `zbus` (never a spawned program). Where
//! the server offers action buttons (`GetCapabilities` says `actions`), an attention's
//! notification carries one per choice; an invoked one answers the attention through the
//! runtime's answer path (`spex answer`'s), recorded as answered by `desktop`. Only a signal
//! from the server the notification was given to counts (any client of the bus may emit one),
//! and only for the attention the notification was about, still open and asking the same
//! (`links::judge` over a link kept in memory, never stored: no URL carries it).
//!
//! zbus runs on a tokio runtime of its own here (one worker, parked in the kernel while nothing
//! comes: no timer), in the sender's long-lived process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures_util::StreamExt as _;
use zbus::zvariant::Value as Variant;

use super::links::{self, Link, Verdict};
use super::message::Message;
use crate::env::Env;
use crate::log::log;

const NAME: &str = "org.freedesktop.Notifications";
const PATH: &str = "/org/freedesktop/Notifications";

/// How long one call to the notification server may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// How long an answer waits for the harness to confirm (the CLI's default).
const CONFIRM: Duration = Duration::from_secs(30);
/// The most action buttons one notification carries (servers show three or four).
pub const ACTIONS_MAX: usize = 4;
/// How long an action button answers at most (it dies with its attention before that).
const ACTION_TTL: Duration = Duration::from_hours(1);

/// The channel: connected on its first delivery, again after the bus went away.
pub struct Desktop {
    env: Env,
    /// Started on the first delivery (`spex notify --status` lists the channel, runs nothing).
    rt: std::sync::OnceLock<tokio::runtime::Runtime>,
    conn: Mutex<Option<Bus>>,
    /// Notification id -> the attention its buttons answer (kept in memory only).
    shown: Arc<Mutex<HashMap<u32, Link>>>,
}

impl std::fmt::Debug for Desktop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Desktop")
    }
}

/// One connection to the session bus, and what its notification server offers.
#[derive(Clone)]
struct Bus {
    conn: zbus::Connection,
    actions: bool,
    markup: bool,
}

impl Desktop {
    pub fn new(env: &Env) -> Self {
        Desktop {
            env: env.clone(),
            rt: std::sync::OnceLock::new(),
            conn: Mutex::new(None),
            shown: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn rt(&self) -> Result<&tokio::runtime::Runtime, String> {
        if let Some(rt) = self.rt.get() {
            return Ok(rt);
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("spex-notify-dbus")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the D-Bus runtime: {e}"))?;
        // Only the channel's own thread delivers: no other can have set it meanwhile.
        Ok(self.rt.get_or_init(|| rt))
    }

    /// Shows `m`: `Ok(detail)` once the server took it.
    pub fn deliver(&self, m: &Message) -> Result<String, String> {
        let bus = self.bus()?;
        let (buttons, link) = if bus.actions {
            buttons(m)
        } else {
            (Vec::new(), None)
        };
        let r = self.rt()?.block_on(async {
            tokio::time::timeout(CALL_TIMEOUT, notify(&bus, m, &buttons))
                .await
                .unwrap_or_else(|_| Err(format!("no answer within {}s", CALL_TIMEOUT.as_secs())))
        });
        let id = match r {
            Ok(id) => id,
            Err(e) => {
                // The next delivery connects again (the server or the bus may have restarted).
                *self
                    .conn
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
                return Err(e);
            }
        };
        if let Some(link) = link {
            self.shown
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(id, link);
        }
        Ok(if buttons.is_empty() {
            format!("shown (notification {id})")
        } else {
            format!(
                "shown (notification {id}) with {} action button(s)",
                buttons.len()
            )
        })
    }

    /// Closes the notification shown for the attention `m` names (it closed another way: its
    /// buttons would answer nothing).
    pub fn retract(&self, m: &Message) {
        let id = {
            let mut shown = self
                .shown
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let Some(id) = shown.iter().find_map(|(id, l)| {
                (l.project == m.project_key
                    && l.session == m.session
                    && Some(l.attention.as_str()) == m.attention.as_deref())
                .then_some(*id)
            }) else {
                return;
            };
            shown.remove(&id);
            id
        };
        let Some(bus) = self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
        else {
            return;
        };
        let Ok(rt) = self.rt() else {
            return;
        };
        let r = rt.block_on(async {
            let call = async {
                proxy(&bus.conn)
                    .await?
                    .call::<_, _, ()>("CloseNotification", &(id,))
                    .await
                    .map_err(|e| e.to_string())
            };
            tokio::time::timeout(CALL_TIMEOUT, call)
                .await
                .unwrap_or_else(|_| Err("no answer".to_owned()))
        });
        if let Err(e) = r {
            log!("notify: desktop: cannot close notification {id}: {e}");
        }
    }

    /// The connection, made (and its listener started) when there is none.
    fn bus(&self) -> Result<Bus, String> {
        let mut held = self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(b) = held.as_ref() {
            return Ok(b.clone());
        }
        let address = self.env.dbus_address().ok_or_else(|| {
            "no D-Bus session bus: neither `DBUS_SESSION_BUS_ADDRESS` nor `XDG_RUNTIME_DIR` is set"
                .to_owned()
        })?;
        let (env, shown) = (self.env.clone(), Arc::clone(&self.shown));
        let b = self.rt()?.block_on(async move {
            tokio::time::timeout(CALL_TIMEOUT, connect(&address, env, shown))
                .await
                .unwrap_or_else(|_| Err(format!("`{address}` did not answer within 5s")))
        })?;
        *held = Some(b.clone());
        Ok(b)
    }
}

/// Connects to the bus at `address`, asks the server what it offers, and starts listening
/// for its action signals.
async fn connect(
    address: &str,
    env: Env,
    shown: Arc<Mutex<HashMap<u32, Link>>>,
) -> Result<Bus, String> {
    let conn = zbus::connection::Builder::address(address)
        .map_err(|e| format!("`{address}`: {e}"))?
        .build()
        .await
        .map_err(|e| format!("cannot reach the session bus at `{address}`: {e}"))?;
    // Subscribed before the first notification goes out, so no click is missed.
    let rule = zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .interface(NAME)
        .and_then(|r| r.path(PATH))
        .map_err(|e| e.to_string())?
        .build();
    let stream = zbus::MessageStream::for_match_rule(rule, &conn, Some(64))
        .await
        .map_err(|e| format!("cannot listen for the notification server's signals: {e}"))?;
    let caps: Vec<String> = proxy(&conn)
        .await?
        .call("GetCapabilities", &())
        .await
        .map_err(|e| format!("no notification server on the session bus: {e}"))?;
    tokio::spawn(listen(stream, conn.clone(), env, shown));
    Ok(Bus {
        conn,
        actions: caps.iter().any(|c| c == "actions"),
        markup: caps.iter().any(|c| c == "body-markup"),
    })
}

async fn proxy(conn: &zbus::Connection) -> Result<zbus::Proxy<'static>, String> {
    zbus::Proxy::new(conn, NAME, PATH, NAME)
        .await
        .map_err(|e| e.to_string())
}

/// One `Notify` call: the id the server gave the notification.
async fn notify(bus: &Bus, m: &Message, buttons: &[(String, String)]) -> Result<u32, String> {
    let waits = matches!(m.event.as_str(), "needs_attention" | "failed");
    let mut actions: Vec<&str> = Vec::new();
    for (key, label) in buttons {
        actions.push(key);
        actions.push(label);
    }
    let mut hints: HashMap<&str, Variant<'_>> = HashMap::new();
    // Critical stays until dismissed: a session waits on it.
    hints.insert("urgency", Variant::U8(if waits { 2 } else { 1 }));
    hints.insert("category", Variant::from("im.received"));
    hints.insert("desktop-entry", Variant::from("spex"));
    let body = if bus.markup {
        markup_escape(&m.message)
    } else {
        m.message.clone()
    };
    proxy(&bus.conn)
        .await?
        .call(
            "Notify",
            &(
                "spex",
                0u32,
                "",
                m.title.as_str(),
                body,
                actions,
                hints,
                -1i32,
            ),
        )
        .await
        .map_err(|e| format!("the notification server refused it: {e}"))
}

/// A server that reads markup would take `<`, `>` and `&` in a session's text for tags.
fn markup_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The action buttons for `m` (key = the choice `spex answer` takes, label = what the harness
/// calls it: the message's one-tap answers) and the attention they answer; none when `m` is
/// about no attention, or another machine's (a click answers here). A click is judged against
/// the session's record then (`invoked`).
fn buttons(m: &Message) -> (Vec<(String, String)>, Option<Link>) {
    let none = (Vec::new(), None);
    let (Some(att), Some(digest)) = (m.attention.as_deref(), m.digest.clone()) else {
        return none;
    };
    if m.remote {
        return none;
    }
    // One tap picks one option: several together are picked on the board or the CLI.
    if m.questions.iter().any(|q| q.multi_select) {
        return none;
    }
    let out: Vec<(String, String)> = m
        .taps
        .iter()
        // `default` is the server's click on the notification itself, not a button.
        .filter(|t| t.choice != "default" && !t.choice.is_empty())
        .take(ACTIONS_MAX)
        .map(|t| (t.choice.clone(), t.label.clone()))
        .collect();
    if out.is_empty() {
        return none;
    }
    let link = links::held(
        &m.project_key,
        &m.session,
        att,
        digest,
        ACTION_TTL,
        SystemTime::now(),
    );
    (out, Some(link))
}

/// Follows the server's signals: an invoked action answers its attention, a closed
/// notification forgets its buttons.
async fn listen(
    mut stream: zbus::MessageStream,
    conn: zbus::Connection,
    env: Env,
    shown: Arc<Mutex<HashMap<u32, Link>>>,
) {
    while let Some(Ok(msg)) = stream.next().await {
        let header = msg.header();
        let member = header.member().map(|m| m.as_str().to_owned());
        let sender = header.sender().map(|s| s.as_str().to_owned());
        let take = |id: u32| {
            shown
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(&id)
        };
        match member.as_deref() {
            Some("ActionInvoked") => {
                let Ok((id, key)) = msg.body().deserialize::<(u32, String)>() else {
                    continue;
                };
                if !from_server(&conn, sender.as_deref()).await {
                    log!(
                        "notify: desktop: an action signal not from the notification server, ignored"
                    );
                    continue;
                }
                let Some(link) = take(id) else {
                    continue;
                };
                let env = env.clone();
                // The answer waits on the harness: off the runtime's worker.
                tokio::task::spawn_blocking(move || invoked(&env, &link, &key));
            }
            Some("NotificationClosed") => {
                if let Ok((id, _reason)) = msg.body().deserialize::<(u32, u32)>()
                    && from_server(&conn, sender.as_deref()).await
                {
                    take(id);
                }
            }
            _ => {}
        }
    }
}

/// Whether `sender` (a unique bus name) owns the notification service now.
async fn from_server(conn: &zbus::Connection, sender: Option<&str>) -> bool {
    let Some(sender) = sender else {
        return false;
    };
    let Ok(dbus) = zbus::fdo::DBusProxy::new(conn).await else {
        return false;
    };
    let Ok(name) = zbus::names::BusName::try_from(NAME) else {
        return false;
    };
    dbus.get_name_owner(name)
        .await
        .is_ok_and(|owner| owner.as_str() == sender)
}

/// Answers the attention `link` is for with `choice`, as `spex answer` would, recorded as
/// answered by `desktop`.
fn invoked(env: &Env, link: &Link, choice: &str) {
    let Some((store, record)) = links::record_of(env, link) else {
        log!("notify: desktop: `{choice}` clicked, but the session is gone");
        return;
    };
    match links::judge(link, None, Some(&record), choice, SystemTime::now()) {
        Verdict::Answer => {}
        Verdict::Gone { why } => {
            log!("notify: desktop: `{choice}` clicked, not answered: {why}");
            return;
        }
        v => {
            log!("notify: desktop: `{choice}` clicked, not answered ({v:?})");
            return;
        }
    }
    let r = crate::runtime::transport::answer(
        env,
        &store,
        &link.session,
        Some(&link.attention),
        &[choice.to_owned()],
        None,
        "desktop",
        CONFIRM,
    );
    match r {
        Ok(_) => log!(
            "notify: desktop: answered `{choice}` to {} of {}",
            link.attention,
            store.label_of(&link.session)
        ),
        Err(e) => log!(
            "notify: desktop: `{choice}` for {} of {} not answered: {e}",
            link.attention,
            store.label_of(&link.session)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_escaped_for_a_server_that_reads_it() {
        assert_eq!(markup_escape("a<b>&c"), "a&lt;b&gt;&amp;c");
    }

    /// A question's notification with these options, as the sender builds it.
    fn asking(options: &[&str], multi_select: bool) -> Message {
        use crate::store::session::{Attention, AttentionKind, Question, Session};
        let mut a = Attention::new(AttentionKind::Question, "Which?", "t");
        a.id = Some("a2".into());
        a.questions = vec![Question {
            options: options.iter().map(|o| (*o).to_owned()).collect(),
            question: "Which?".into(),
            multi_select,
            ..Question::default()
        }];
        let s = Session {
            id: "0123".into(),
            project: "/src/webapp".into(),
            ..Session::default()
        };
        crate::notify::message::attention("key", &s, &a)
    }

    /// The buttons are the message's one-tap answers, `default` (the server's own click) left
    /// out, at most [`ACTIONS_MAX`]; the link they answer is bound to that attention as asked.
    #[test]
    fn buttons_are_the_messages_one_tap_answers_within_the_servers_limit() {
        let m = asking(&["default", "A", "B", "C", "D", "E"], false);
        let (shown, link) = buttons(&m);
        let keys: Vec<&str> = shown.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["A", "B", "C", "D"]);
        let link = link.expect("a link for the buttons");
        assert_eq!(
            (
                link.project.as_str(),
                link.session.as_str(),
                link.attention.as_str()
            ),
            ("key", "0123", "a2")
        );
        assert_eq!(Some(link.digest), m.digest);
        assert!(
            link.hash.is_empty(),
            "no token is handed out: {}",
            link.hash
        );

        let (none, link) = buttons(&asking(&["A", "B"], true));
        assert!(none.is_empty() && link.is_none(), "multi-select: {none:?}");
        let remote = Message {
            remote: true,
            ..asking(&["A", "B"], false)
        };
        let (none, link) = buttons(&remote);
        assert!(
            none.is_empty() && link.is_none(),
            "another machine's: {none:?}"
        );
    }
}
