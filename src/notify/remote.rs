//! Remote sessions' attentions, announced by this machine's sender: read from the other
//! machines' journals (`store::remotes`, kept by the followers of `crate::remote::follow`),
//! each announced once after the dwell while it is still open in the host's last known state,
//! under the same sent record as local ones (its key names the host). Not touched: how local
//! attentions are found and sent.

use std::time::{Duration, Instant};

use rustix::fs::inotify;
use serde_json::Value;

use crate::store::remotes::{self, HostStore, JournalReader};
use crate::store::session::Session;

/// One host's journal followed.
struct Host {
    store: HostStore,
    reader: JournalReader,
}

/// An attention waiting out its dwell.
struct Pending {
    due: Instant,
    host: usize,
    /// The sent record's key: `remote:<host>/<project>/<session>/<attention>`.
    key: String,
    /// `<project>/<session>` in the host's state.
    session: String,
    attention: Value,
}

/// The remote attentions the sender follows.
#[derive(Default)]
pub struct Remotes {
    hosts: Vec<Host>,
    pending: Vec<Pending>,
}

impl Remotes {
    /// Follows the journals of the remotes in `names` that are not followed yet (from their
    /// ends: what they held before the sender started was for the sender that ran then).
    pub fn add(
        &mut self,
        spex_home: &std::path::Path,
        names: &[String],
        fd: &impl rustix::fd::AsFd,
    ) {
        for name in names {
            if self.hosts.iter().any(|h| &h.store.name == name) {
                continue;
            }
            let Some(store) = remotes::host(spex_home, name) else {
                continue;
            };
            let _ = crate::fsutil::create_private_dir_all(&store.dir);
            // Its appends wake the sender (the journal's lines are read on every wake).
            let _ = inotify::add_watch(
                fd,
                &store.dir,
                inotify::WatchFlags::MODIFY | inotify::WatchFlags::CREATE,
            );
            let reader = JournalReader::new(store.state().last);
            self.hosts.push(Host { store, reader });
        }
    }

    /// Reads what the journals took in: an attention opened is noted (unless old news or sent
    /// already), one closed before its dwell ended is dropped.
    pub fn read(&mut self, dwell: Duration, fresh: Duration, sent: impl Fn(&str) -> bool) {
        for (i, h) in self.hosts.iter_mut().enumerate() {
            for line in h.reader.next(&h.store) {
                let (Some(session), Some(att)) =
                    (line["session"].as_str(), line["attention"].as_str())
                else {
                    continue;
                };
                let project = line["project"].as_str().unwrap_or_default();
                let id = format!("{project}/{session}");
                let key = format!("remote:{}/{id}/{att}", h.store.name);
                match line["kind"].as_str() {
                    Some("attention.opened") => {
                        let age = line["time"]
                            .as_str()
                            .and_then(crate::store::parse_time)
                            .and_then(|t| t.elapsed().ok())
                            .unwrap_or_default();
                        if age > fresh || sent(&key) {
                            continue;
                        }
                        self.pending.push(Pending {
                            due: Instant::now() + dwell.saturating_sub(age),
                            host: i,
                            key,
                            session: id,
                            attention: line,
                        });
                    }
                    Some("attention.closed") => self.pending.retain(|p| p.key != key),
                    _ => {}
                }
            }
        }
    }

    /// When the next pending attention is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.pending.iter().map(|p| p.due).min()
    }

    /// What is due now, for attentions the host's last known state still holds open: each
    /// with its sent record's key, the host's stream key (the project key its links name) and
    /// the session as a local record would read (its attention in it).
    pub fn due(&mut self) -> Vec<(String, String, Session)> {
        let now = Instant::now();
        let (due, rest): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| p.due <= now);
        self.pending = rest;
        let mut out = Vec::new();
        for p in due {
            let h = &self.hosts[p.host];
            let state = h.store.state();
            let Some(known) = state.sessions.get(&p.session) else {
                continue;
            };
            if known.attention_id.as_deref() != p.attention["attention"].as_str() {
                continue;
            }
            if let Some(s) = session_of(&h.store, known) {
                out.push((p.key, h.store.stream_key(), s));
            }
        }
        out
    }
}

/// A remote session as a local record reads, from its last known state, its open attention
/// in it (`None`: no attention open); its handle is `host:handle`.
pub fn session_of(host: &HostStore, known: &remotes::Known) -> Option<Session> {
    let a = known.open_attention()?;
    let project = known
        .project
        .as_deref()
        .map(|p| p.rsplit_once('-').map_or(p, |(name, _)| name).to_owned())
        .unwrap_or_default();
    Some(Session {
        id: known.session.clone(),
        handle: Some(known.label(&host.name)),
        name: known.name.clone(),
        harness: known.harness.clone().unwrap_or_default(),
        project: std::path::PathBuf::from(project),
        updated_at: crate::store::now_rfc3339(),
        attention: Some(a),
        ..Session::default()
    })
}

/// The host and session an answer link names when its project key is a remote's journal
/// (`remotes`: the configured names).
pub fn link_session(
    spex_home: &std::path::Path,
    remotes: &[String],
    project: &str,
    session: &str,
) -> Option<(String, Session)> {
    let host = remotes
        .iter()
        .filter_map(|n| remotes::host(spex_home, n))
        .find(|h| h.stream_key() == project)?;
    let state = host.state();
    let known = state.sessions.values().find(|k| k.session == session)?;
    let s = session_of(&host, known)?;
    Some((host.name, s))
}
