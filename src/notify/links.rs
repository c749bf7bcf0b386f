//! Answer links: a capability to answer ONE attention, carried in a notification's action
//! buttons (`<public-url>/a/<token>`). The token is 256 random bits; the store keeps only its
//! SHA-256 (a leaked store answers nothing), bound to the session, the attention id (ids
//! repeat across sessions) and a digest of the question and its choices (an attention reopened
//! with other choices under a reused id is not the one the link was minted for). Verified in
//! constant time. The board's server routes `GET /a/<token>` (a confirmation page, never an
//! answer: link scanners fetch URLs) and `POST /a/<token>` (the answer) through [`judge`].

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

use super::state;
use crate::env::Env;
use crate::store::ProjectStore;
use crate::store::session::{Attention, Session};

/// What the store keeps of one minted link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    /// SHA-256 of the token, hex.
    pub hash: String,
    pub project: String,
    pub session: String,
    pub attention: String,
    /// [`digest`] of the attention when the link was minted.
    pub digest: String,
    /// Unix seconds after which the link is dead whatever its attention does.
    pub expires: u64,
    /// The answer given through it, once one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered: Option<String>,
}

/// A digest of what the attention asks: its question text, the choices' ids and labels, each
/// question with its options (length-prefixed, so no two attentions share one by accident).
pub fn digest(a: &Attention) -> String {
    let mut h = Sha256::new();
    let mut put = |s: &str| {
        h.update((s.len() as u64).to_le_bytes());
        h.update(s.as_bytes());
    };
    put(a.reason.as_str());
    put(&a.text);
    for c in &a.choices {
        put(&c.id);
        put(&c.label);
    }
    for q in &a.questions {
        put(&q.question);
        for o in &q.options {
            put(o);
        }
    }
    hex::encode(h.finalize())
}

/// A new token (64 hex characters: 256 bits from the OS) and what the store keeps of it.
pub fn mint(
    project: &str,
    s: &Session,
    a: &Attention,
    ttl: Duration,
    now: SystemTime,
) -> std::io::Result<(String, Link)> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    let token = hex::encode(bytes);
    let link = Link {
        hash: hash(&token),
        ..held(
            project,
            &s.id,
            a.id.as_deref().unwrap_or_default(),
            digest(a),
            ttl,
            now,
        )
    };
    Ok((token, link))
}

/// A link with no token (`hash` empty), for a holder that keeps it in memory and hands nothing
/// out: a desktop notification's buttons. `digest` is the attention's [`digest`].
pub fn held(
    project: &str,
    session: &str,
    attention: &str,
    digest: String,
    ttl: Duration,
    now: SystemTime,
) -> Link {
    Link {
        hash: String::new(),
        project: project.to_owned(),
        session: session.to_owned(),
        attention: attention.to_owned(),
        digest,
        expires: unix(now) + ttl.as_secs(),
        answered: None,
    }
}

/// SHA-256 of a token, hex.
pub fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

fn unix(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The link `token` names among `links`, compared in constant time over every stored hash
/// (no early exit: the time says nothing of which one, or how much of it, matched).
pub fn find<'a>(links: &'a BTreeMap<String, Link>, token: &str) -> Option<&'a Link> {
    let want = hash(token);
    let mut found = None;
    for l in links.values() {
        if bool::from(l.hash.as_bytes().ct_eq(want.as_bytes())) {
            found = Some(l);
        }
    }
    found
}

/// What a request through a link comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Answer the attention with this choice (the caller goes through the runtime's answer
    /// path, then [`record_answer`]).
    Answer,
    /// 200, asked with no choice (a GET): the attention is open and the link answers it: show
    /// the confirmation page.
    Open,
    /// 200: the same answer was already given through this link; nothing changes.
    Again,
    /// 409: another answer was given through this link already.
    Conflict { given: String },
    /// 410: the attention closed another way, changed, or the link expired.
    Gone { why: &'static str },
    /// 403 (or 404): no such link, or it is for another session or attention than asked.
    Refused,
}

impl Verdict {
    /// The HTTP status the board answers with.
    pub fn status(&self) -> u16 {
        match self {
            Verdict::Answer | Verdict::Open | Verdict::Again => 200,
            Verdict::Conflict { .. } => 409,
            Verdict::Gone { .. } => 410,
            Verdict::Refused => 403,
        }
    }
}

/// Judges an answer `choice` through `link` against the session's record now (`""`: a GET,
/// which answers nothing). `expect`: the
/// (session, attention) the request names, when it names one (a form posting to the
/// attention's own URL); a link never answers another.
pub fn judge(
    link: &Link,
    expect: Option<(&str, &str)>,
    record: Option<&Session>,
    choice: &str,
    now: SystemTime,
) -> Verdict {
    if let Some((s, a)) = expect
        && (s != link.session || a != link.attention)
    {
        return Verdict::Refused;
    }
    if let Some(given) = &link.answered {
        return if choice.is_empty() || given == choice {
            Verdict::Again
        } else {
            Verdict::Conflict {
                given: given.clone(),
            }
        };
    }
    if unix(now) >= link.expires {
        return Verdict::Gone {
            why: "the link expired",
        };
    }
    let Some(s) = record.filter(|s| s.id == link.session) else {
        return Verdict::Gone {
            why: "the session is gone",
        };
    };
    let Some(a) = s
        .attention
        .as_ref()
        .filter(|a| a.id.as_deref() == Some(link.attention.as_str()))
    else {
        return Verdict::Gone {
            why: "the attention closed",
        };
    };
    if !bool::from(digest(a).as_bytes().ct_eq(link.digest.as_bytes())) {
        return Verdict::Gone {
            why: "the attention asks something else now",
        };
    }
    if choice.is_empty() {
        return Verdict::Open;
    }
    let offered = a.choices.iter().any(|c| c.id == choice)
        || a.questions
            .iter()
            .any(|q| q.options.iter().any(|o| o == choice));
    if !offered {
        return Verdict::Refused;
    }
    Verdict::Answer
}

/// Marks the link answered with `choice` (after the runtime confirmed the answer), so a second
/// use is [`Verdict::Again`] or [`Verdict::Conflict`].
pub fn record_answer(link: &mut Link, choice: &str) {
    link.answered.get_or_insert_with(|| choice.to_owned());
}

/// Links past their expiry (and a day of grace for 409/200 on a late second tap) are dropped.
pub fn prune(links: &mut BTreeMap<String, Link>, now: SystemTime) {
    let now = unix(now);
    links.retain(|_, l| l.expires + 86_400 > now);
}

/// The project store and record of the session `link` is for, when they still exist (the
/// board's confirmation page shows the question and choices from them).
pub fn record_of(env: &Env, link: &Link) -> Option<(ProjectStore, Session)> {
    let store = crate::store::all_projects(&env.spex_home())
        .into_iter()
        .find(|s| s.stream_key() == link.project)?;
    let record = store.load(&link.session).ok().flatten()?;
    Some((store, record))
}

/// The remote (its name) and session a link for another machine's attention names, from the
/// host's last known state (`notify::remote`).
pub fn remote_of(env: &Env, link: &Link) -> Option<(String, Session)> {
    let names: Vec<String> = crate::remote::remotes(env)
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.name)
        .collect();
    super::remote::link_session(&env.spex_home(), &names, &link.project, &link.session)
}

/// What an answer `choice` through link `token` comes to now (see [`judge`]), and the link
/// (`None`: no such link, [`Verdict::Refused`]). Read under the notifier's state lock.
pub fn check(
    env: &Env,
    token: &str,
    expect: Option<(&str, &str)>,
    choice: &str,
) -> std::io::Result<(Verdict, Option<Link>)> {
    let link = update(env, |all| find(all, token).cloned())?;
    let Some(link) = link else {
        return Ok((Verdict::Refused, None));
    };
    let record = record_of(env, &link)
        .map(|(_, s)| s)
        .or_else(|| remote_of(env, &link).map(|(_, s)| s));
    let v = judge(&link, expect, record.as_ref(), choice, SystemTime::now());
    Ok((v, Some(link)))
}

/// Records that the runtime confirmed answer `choice` through link `token`.
pub fn answered(env: &Env, token: &str, choice: &str) -> std::io::Result<()> {
    let h = hash(token);
    update(env, |all| {
        if let Some(l) = all.get_mut(&h) {
            record_answer(l, choice);
        }
    })
}

/// Reads and changes the answer links (by their token's hash) under the lock: the board finds,
/// judges and records an answer in one call, so two taps never both answer.
pub fn update<R>(
    env: &Env,
    f: impl FnOnce(&mut BTreeMap<String, Link>) -> R,
) -> std::io::Result<R> {
    let path = state::dir(env).join("links.json");
    state::locked(env, || {
        let mut all: BTreeMap<String, Link> = state::read(&path);
        let r = f(&mut all);
        state::write(&path, &all).map(|()| r)
    })?
}

/// `<public-url>/a/<token>`.
pub fn url(public_url: &str, token: &str) -> String {
    format!("{}/a/{token}", public_url.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::session::{AttentionKind, Choice};

    fn session(att: &str, choices: &[&str]) -> Session {
        let mut a = Attention::new(AttentionKind::Permission, "Bash: rm -rf build", "t");
        a.id = Some(att.into());
        a.choices = choices
            .iter()
            .map(|c| Choice {
                id: (*c).into(),
                label: (*c).into(),
                message: false,
            })
            .collect();
        Session {
            id: "s1".into(),
            attention: Some(a),
            ..Session::default()
        }
    }

    #[test]
    fn a_link_answers_its_attention_once_and_never_another() {
        let now = SystemTime::now();
        let s = session("a1", &["allow", "deny"]);
        let (token, mut link) = mint(
            "p",
            &s,
            s.attention.as_ref().unwrap(),
            Duration::from_mins(1),
            now,
        )
        .unwrap();
        assert_eq!(token.len(), 64);
        assert_ne!(link.hash, token, "only the hash is kept");
        let mut links = BTreeMap::new();
        links.insert(link.hash.clone(), link.clone());
        assert!(find(&links, &token).is_some());
        assert!(find(&links, &"0".repeat(64)).is_none());

        assert_eq!(judge(&link, None, Some(&s), "allow", now), Verdict::Answer);
        assert_eq!(judge(&link, None, Some(&s), "", now), Verdict::Open);
        assert_eq!(judge(&link, None, Some(&s), "maybe", now), Verdict::Refused);
        // Named against another attention or session: refused.
        assert_eq!(
            judge(&link, Some(("s1", "a2")), Some(&s), "allow", now),
            Verdict::Refused
        );
        assert_eq!(
            judge(&link, Some(("s2", "a1")), Some(&s), "allow", now),
            Verdict::Refused
        );
        record_answer(&mut link, "allow");
        assert_eq!(judge(&link, None, Some(&s), "allow", now), Verdict::Again);
        assert_eq!(judge(&link, None, Some(&s), "", now), Verdict::Again);
        assert_eq!(judge(&link, None, Some(&s), "allow", now).status(), 200);
        let v = judge(&link, None, Some(&s), "deny", now);
        assert_eq!(v.status(), 409, "{v:?}");
    }

    #[test]
    fn a_link_is_gone_once_its_attention_closed_changed_or_it_expired() {
        let now = SystemTime::now();
        let s = session("a1", &["allow", "deny"]);
        let (_, link) = mint(
            "p",
            &s,
            s.attention.as_ref().unwrap(),
            Duration::from_mins(1),
            now,
        )
        .unwrap();
        let later = now + Duration::from_secs(61);
        assert_eq!(judge(&link, None, Some(&s), "allow", later).status(), 410);
        let mut closed = s.clone();
        closed.attention = None;
        assert_eq!(
            judge(&link, None, Some(&closed), "allow", now).status(),
            410
        );
        // The next attention reuses nothing: a2 is not a1.
        let next = session("a2", &["allow", "deny"]);
        assert_eq!(judge(&link, None, Some(&next), "allow", now).status(), 410);
        // Same id, other choices (a store rewound): not the question the link was minted for.
        let other = session("a1", &["allow", "allow-session", "deny"]);
        assert_eq!(judge(&link, None, Some(&other), "allow", now).status(), 410);
        assert_eq!(judge(&link, None, None, "allow", now).status(), 410);
    }

    /// What the board calls: `check` finds the link by its token in the store, judges it
    /// against the live record; `answered` makes a second use 200 or 409.
    #[test]
    fn the_board_checks_a_token_against_the_store_and_records_its_answer() {
        let dir = tempfile::tempdir().unwrap();
        let env = Env {
            spex_home: Some(dir.path().join("store")),
            home: Some(dir.path().to_path_buf()),
            ..Env::default()
        };
        let store = ProjectStore::new(&env.spex_home(), &dir.path().join("repo"));
        let s = session("a1", &["allow", "deny"]);
        store
            .update("s1", |_| (Some(s.clone()), Vec::new(), ()))
            .unwrap();
        let (token, link) = mint(
            &store.stream_key(),
            &s,
            s.attention.as_ref().unwrap(),
            Duration::from_mins(1),
            SystemTime::now(),
        )
        .unwrap();
        update(&env, |all| all.insert(link.hash.clone(), link)).unwrap();
        let (v, found) = check(&env, &token, Some(("s1", "a1")), "allow").unwrap();
        assert_eq!(v, Verdict::Answer);
        assert_eq!(found.unwrap().session, "s1");
        assert_eq!(
            check(&env, &"f".repeat(64), None, "allow").unwrap().0,
            Verdict::Refused
        );
        answered(&env, &token, "allow").unwrap();
        assert_eq!(check(&env, &token, None, "allow").unwrap().0.status(), 200);
        assert_eq!(check(&env, &token, None, "deny").unwrap().0.status(), 409);
    }
}
