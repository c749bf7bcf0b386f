//! The notifier's files in spex's home (`notify/`): what was sent (`sent.json`), how far each
//! project's stream was read (`cursor.txt`), each channel's last delivery (`status.json`), the
//! answer links minted (`links.json`). Each is replaced by rename under `state.lock`, so a
//! reader never sees a torn file and two writers never lose each other's change.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::env::Env;
use crate::fsutil;

/// How many sent keys are kept (the oldest go first): far more than one burst ever holds.
const SENT_KEPT: usize = 4096;

pub fn dir(env: &Env) -> PathBuf {
    env.spex_home().join("notify")
}

fn lock_file(env: &Env) -> PathBuf {
    dir(env).join("state.lock")
}

/// Runs `f` under the notifier's state lock.
pub fn locked<R>(env: &Env, f: impl FnOnce() -> R) -> std::io::Result<R> {
    fsutil::create_private_dir_all(&dir(env))?;
    crate::store::lock::with(&lock_file(env), f)
}

pub(super) fn read<T: for<'de> Deserialize<'de> + Default>(path: &Path) -> T {
    fsutil::read_opt(path)
        .ok()
        .flatten()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

pub(super) fn write<T: Serialize>(path: &Path, v: &T) -> std::io::Result<()> {
    fsutil::replace(path, &crate::store::json_bytes(v))
}

/// What was sent: key (`<project key>/<session>/<attention or seq>`) -> when.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Sent {
    sent: BTreeMap<String, String>,
}

/// Claims `key` for sending: `true` when it was not sent before, and it is now recorded as
/// sent (before anything goes out: a crash after this sends it never, not twice).
pub fn claim(env: &Env, key: &str) -> std::io::Result<bool> {
    let path = dir(env).join("sent.json");
    locked(env, || {
        let mut s: Sent = read(&path);
        if s.sent.contains_key(key) {
            return Ok(false);
        }
        s.sent.insert(key.to_owned(), crate::store::now_rfc3339());
        if s.sent.len() > SENT_KEPT {
            let mut by_time: Vec<(String, String)> =
                s.sent.iter().map(|(k, t)| (t.clone(), k.clone())).collect();
            by_time.sort();
            for (_, k) in by_time.iter().take(s.sent.len() - SENT_KEPT) {
                s.sent.remove(k);
            }
        }
        write(&path, &s).map(|()| true)
    })?
}

/// Whether `key` was sent.
pub fn was_sent(env: &Env, key: &str) -> bool {
    read::<Sent>(&dir(env).join("sent.json"))
        .sent
        .contains_key(key)
}

/// The saved stream cursor (`None`: never saved, the sender starts at the streams' ends).
pub fn cursor(env: &Env) -> Option<crate::store::stream::Cursor> {
    let text = fs_err::read_to_string(dir(env).join("cursor.txt")).ok()?;
    crate::store::stream::Cursor::parse(text.trim()).ok()
}

pub fn save_cursor(env: &Env, c: &crate::store::stream::Cursor) -> std::io::Result<()> {
    fsutil::create_private_dir_all(&dir(env))?;
    fsutil::replace(&dir(env).join("cursor.txt"), format!("{c}\n").as_bytes())
}

/// Which process sends (`sender.json`, written by the lock's holder when it takes it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SenderInfo {
    pub pid: u32,
    /// The command that runs it: `spex notify --watch`, `spex board`, `spex watch`.
    pub by: String,
    pub since: String,
}

pub fn save_sender(env: &Env, by: &str) -> std::io::Result<()> {
    let info = SenderInfo {
        pid: std::process::id(),
        by: by.to_owned(),
        since: crate::store::now_rfc3339(),
    };
    fsutil::create_private_dir_all(&dir(env))?;
    write(&dir(env).join("sender.json"), &info)
}

/// What the process with `pid` (the lock's holder) said of itself; `None` when the file is of
/// another (an older holder that died before the new one wrote it).
pub fn sender(env: &Env, pid: u32) -> Option<SenderInfo> {
    let info: SenderInfo = read(&dir(env).join("sender.json"));
    (info.pid == pid).then_some(info)
}

/// One channel's last delivery.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    pub at: String,
    /// `accepted`, `failed`, or `retrying` while a failed attempt waits for the next.
    pub outcome: String,
    pub detail: String,
    /// Attempts the last delivery took.
    pub attempts: u32,
    /// Failed deliveries since the last accepted one.
    pub failures: u32,
    /// The last failure, kept after a later success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<String>,
}

pub type Status = BTreeMap<String, Delivery>;

pub fn status(env: &Env) -> Status {
    read(&dir(env).join("status.json"))
}

/// Records a delivery through `channel`.
pub fn note(env: &Env, channel: &str, ok: bool, detail: &str, attempts: u32) {
    let path = dir(env).join("status.json");
    let r = locked(env, || {
        let mut all: Status = read(&path);
        let d = all.entry(channel.to_owned()).or_default();
        d.at = crate::store::now_rfc3339();
        d.outcome = if ok { "accepted" } else { "failed" }.into();
        detail.clone_into(&mut d.detail);
        d.attempts = attempts;
        if ok {
            d.failures = 0;
        } else {
            d.failures += 1;
            d.last_failure = Some(format!("{}: {detail}", d.at));
        }
        write(&path, &all)
    });
    if let Err(e) | Ok(Err(e)) = r {
        crate::log::log!("notify: cannot record the delivery through {channel}: {e}");
    }
}

/// Records that attempt `attempt` of `of` through `channel` failed and another follows: the
/// outcome reads `retrying` until the delivery ends ([`note`]).
pub fn retrying(env: &Env, channel: &str, attempt: u32, of: u32, detail: &str) {
    let path = dir(env).join("status.json");
    let r = locked(env, || {
        let mut all: Status = read(&path);
        let d = all.entry(channel.to_owned()).or_default();
        d.at = crate::store::now_rfc3339();
        d.outcome = "retrying".into();
        d.detail = format!("attempt {attempt} of {of} failed: {detail}");
        d.attempts = attempt;
        write(&path, &all)
    });
    if let Err(e) | Ok(Err(e)) = r {
        crate::log::log!("notify: cannot record the delivery through {channel}: {e}");
    }
}

/// The marker the board's page writes while it shows session `id` with the page visible
/// (`notify/viewing/<id>`, touched at least every [`VIEWING_FRESH`]): the sender sends nothing
/// for a session a person looks at.
pub fn viewing_file(env: &Env, id: &str) -> PathBuf {
    dir(env).join("viewing").join(id)
}

/// How recent a viewing marker must be to count.
pub const VIEWING_FRESH: std::time::Duration = std::time::Duration::from_secs(30);

/// Whether a person looks at session `id` on the board now.
pub fn viewed(env: &Env, id: &str) -> bool {
    fs_err::metadata(viewing_file(env, id))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age < VIEWING_FRESH)
}
