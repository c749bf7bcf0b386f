//! The model usage of pruned sessions, kept as daily totals (per day, project, harness and
//! model) in `usage-daily.json` beside the sessions, so `spex usage` totals survive `spex prune`.
//! The session totals are the records' own (`usage`, and each sub-agent's); this file adds
//! nothing to them.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ProjectStore;
use super::session::{Session, StoreError, Usage};

/// How many pruned session ids the file remembers (see [`Daily::folded`]).
pub const FOLDED_KEPT: usize = 4096;

/// One day's usage of one project's pruned sessions of one harness and model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DayUsage {
    /// `YYYY-MM-DD` (UTC) of the sessions' last change.
    pub day: String,
    pub project: PathBuf,
    pub harness: String,
    /// How many sessions it sums.
    pub sessions: u64,
    /// Their usage; `usage.model` is the model it was priced by, when known.
    pub usage: Usage,
}

/// `usage-daily.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Daily {
    #[serde(default)]
    pub days: Vec<DayUsage>,
    /// The ids of the sessions folded in last (the most recent [`FOLDED_KEPT`]): a prune that
    /// stopped between folding a session and removing it does not fold it twice, and a reader
    /// that finds the record still there does not count it twice.
    #[serde(default)]
    pub folded: Vec<String>,
}

/// A session's usage, one part per model: its own requests', then each sub-agent's (a
/// sub-agent without a model of its own is priced as the session's).
pub fn parts(s: &Session) -> Vec<Usage> {
    let own = s.usage.clone();
    let model = own.as_ref().and_then(|u| u.model.clone());
    let mut parts: Vec<Usage> = Vec::new();
    for u in own.into_iter().chain(s.children.iter().filter_map(|c| {
        let mut u = c.usage.clone()?;
        if u.model.is_none() {
            u.model.clone_from(&model);
        }
        Some(u)
    })) {
        match parts.iter_mut().find(|p| p.model == u.model) {
            Some(p) => p.add(&u),
            None => parts.push(u),
        }
    }
    parts
}

/// The day (`YYYY-MM-DD`, UTC) of an RFC 3339 time spex wrote.
pub fn day_of(time: &str) -> String {
    time.get(..10).unwrap_or(time).to_owned()
}

impl ProjectStore {
    fn daily_file(&self) -> PathBuf {
        self.dir.join("usage-daily.json")
    }

    /// The daily totals of the pruned sessions (empty when none was pruned).
    pub fn daily_usage(&self) -> Daily {
        read(&self.daily_file())
    }

    /// Adds `s`'s usage to its day's totals, once (see [`Daily::folded`]).
    pub(super) fn fold_usage(&self, s: &Session) -> Result<(), StoreError> {
        let file = self.daily_file();
        let lock = self.dir.join("usage-daily.lock");
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| StoreError::Io { path, source }
        };
        super::lock::with(&lock, || -> Result<(), StoreError> {
            // A file this spex cannot read is left as it is, never replaced by a fresh one.
            let mut daily = match crate::fsutil::read_opt(&file).map_err(io(&file))? {
                None => Daily::default(),
                Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| StoreError::Io {
                    path: file.clone(),
                    source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
                })?,
            };
            if daily.folded.contains(&s.id) {
                return Ok(());
            }
            let day = day_of(&s.updated_at);
            for (i, part) in parts(s).into_iter().enumerate() {
                // A session is counted once, in the row of its own model.
                let one = u64::from(i == 0);
                let same = |d: &&mut DayUsage| {
                    d.day == day
                        && d.project == s.project
                        && d.harness == s.harness
                        && d.usage.model == part.model
                };
                match daily.days.iter_mut().find(same) {
                    Some(d) => {
                        d.usage.add(&part);
                        d.sessions += one;
                    }
                    None => daily.days.push(DayUsage {
                        day: day.clone(),
                        project: s.project.clone(),
                        harness: s.harness.clone(),
                        sessions: one,
                        usage: part,
                    }),
                }
            }
            daily.folded.push(s.id.clone());
            let over = daily.folded.len().saturating_sub(FOLDED_KEPT);
            daily.folded.drain(..over);
            crate::fsutil::write_private(&file, &super::json_bytes(&daily)).map_err(io(&file))?;
            Ok(())
        })
        .map_err(io(&lock))?
    }
}

fn read(file: &Path) -> Daily {
    crate::fsutil::read_opt(file)
        .ok()
        .flatten()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}
