//! Whether the machine stopped since a session last ran: harness-neutral evidence read from
//! the kernel (its boot id, its boot time), never from a harness's files. A session that was
//! live when the machine stopped (a reboot, a crash, power lost) says `exited`, reason
//! `machine stopped`, never `process gone` or `host gone`, so `spex resume --all-stopped` can
//! bring back exactly those.

use std::time::{Duration, SystemTime};

use crate::env::Env;
use crate::store::ProjectStore;
use crate::store::session::{Session, Status};

/// The exit reason of a session the machine's stop ended.
pub const MACHINE_STOPPED: &str = "machine stopped";

/// What the records name as the source of the conclusion.
const SOURCE: &str = "boot id";

/// How much earlier than the boot a record with no boot id must have been written last to be
/// taken for one of an earlier boot: the boot time is read as "now minus uptime", which moves
/// with every step of the wall clock (a machine's clock set by NTP after it booted).
const BOOT_TIME_SLACK: Duration = Duration::from_mins(2);

/// This boot of the machine, as the kernel names it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Boot {
    /// `/proc/sys/kernel/random/boot_id` (see [`Env::boot_id_file`]).
    pub id: Option<String>,
    /// When it booted (`btime` of `/proc/stat`).
    pub at: Option<SystemTime>,
}

impl Boot {
    /// Reads this boot's id and time (one small file each).
    pub fn now(env: &Env) -> Boot {
        let id = fs_err::read_to_string(env.boot_id_file())
            .ok()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty());
        let at = fs_err::read_to_string("/proc/stat").ok().and_then(|stat| {
            let secs = stat
                .lines()
                .find_map(|l| l.strip_prefix("btime "))?
                .trim()
                .parse()
                .ok()?;
            SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(secs))
        });
        Boot { id, at }
    }

    /// Why record `s`, which says the session runs, was live in an earlier boot of this
    /// machine, so the machine's stop ended it: its recorded boot id is not this boot's; or,
    /// recorded with none, it was last written well before this boot and the process it names
    /// (if any) does not run. `None` for an exited record and for one of this boot.
    pub fn stopped(&self, s: &Session) -> Option<String> {
        if s.status == Status::Exited {
            return None;
        }
        match (&s.boot_id, &self.id) {
            (Some(then), Some(now)) => (then != now).then(|| {
                format!("the machine restarted since the session ran (boot id {then}, now {now})")
            }),
            (Some(_), None) => None,
            (None, _) => {
                let booted = self.at?;
                let written = crate::store::parse_time(&s.updated_at)?;
                let runs = s.process_id().is_some_and(super::evidence::alive);
                (written + BOOT_TIME_SLACK < booted && !runs).then(|| {
                    format!(
                        "the machine restarted at {} after the session's record was last written",
                        humantime::format_rfc3339_seconds(booted)
                    )
                })
            }
        }
    }
}

/// Folds the machine's stop into record `s` (read just before): a session live in an earlier
/// boot ends `exited`, `machine stopped` (a running turn ends `interrupted` with it); a live one
/// of this boot with no boot id yet gets this boot's. The record as it is now, when changed.
pub fn fold(store: &ProjectStore, boot: &Boot, s: &Session) -> Option<Session> {
    if s.status == Status::Exited {
        return None;
    }
    let why = boot.stopped(s);
    if why.is_none() && (s.boot_id.is_some() || boot.id.is_none()) {
        return None;
    }
    store
        .update(&s.id, |cur| {
            let Some(mut cur) = cur.filter(|c| c.status != Status::Exited) else {
                return (None, Vec::new(), None);
            };
            let now = crate::store::now_rfc3339();
            let mut events = Vec::new();
            match boot.stopped(&cur) {
                Some(why) => {
                    let before = cur.state_key();
                    events = cur.exit(MACHINE_STOPPED, &now, SOURCE);
                    if let Some((_, _, fields)) = events.last_mut() {
                        fields.insert("why".into(), why.clone().into());
                    }
                    cur.stamp(before, &now, SOURCE, Some(why));
                    cur.updated_at = now;
                }
                // A note beside the process, no change of state: `updated_at` stays.
                None if cur.boot_id.is_none() => cur.boot_id.clone_from(&boot.id),
                None => return (None, Vec::new(), None),
            }
            (Some(cur.clone()), events, Some(cur))
        })
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(boot_id: Option<&str>, updated_at: &str) -> Session {
        Session {
            status: Status::Idle,
            boot_id: boot_id.map(str::to_owned),
            updated_at: updated_at.into(),
            ..Session::default()
        }
    }

    #[test]
    fn a_live_record_of_an_earlier_boot_was_stopped_with_the_machine() {
        let boot = Boot {
            id: Some("b2".into()),
            at: crate::store::parse_time("2026-11-27T08:00:00.000Z"),
        };
        let after = "2026-11-27T09:00:00.000Z";
        let before = "2026-11-27T07:00:00.000Z";
        let just_before = "2026-11-27T07:59:00.000Z";
        for (s, stopped) in [
            (live(Some("b2"), before), false),
            (live(Some("b1"), after), true),
            (live(None, after), false),
            (live(None, before), true),
            // Within the slack of a boot time read from a clock that may have moved.
            (live(None, just_before), false),
            (
                Session {
                    status: Status::Exited,
                    ..live(Some("b1"), before)
                },
                false,
            ),
        ] {
            assert_eq!(boot.stopped(&s).is_some(), stopped, "{s:?}");
        }
        // This process, recorded and running: not stopped, however old the record.
        let mut s = live(None, before);
        let pid = std::process::id();
        s.set_process(Some(crate::store::session::ProcessId {
            pid,
            start: super::super::evidence::process_start(pid).unwrap(),
        }));
        assert_eq!(boot.stopped(&s), None);
        // Nothing known of this boot's id: a recorded one is not contradicted.
        let unknown = Boot {
            id: None,
            at: boot.at,
        };
        assert_eq!(unknown.stopped(&live(Some("b1"), after)), None);
    }

    #[test]
    fn folding_ends_a_record_of_an_earlier_boot_once_and_notes_this_boot_on_a_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProjectStore::new(dir.path(), dir.path());
        let boot = Boot {
            id: Some("b2".into()),
            at: crate::store::parse_time("2026-11-27T08:00:00.000Z"),
        };
        let now = crate::store::now_rfc3339();
        let mut old = live(Some("b1"), &now);
        old.id = "old".into();
        old.status = Status::Working;
        old.turn = Some(crate::store::session::Turn {
            started_at: now.clone(),
            ..crate::store::session::Turn::default()
        });
        let mut new = live(None, &now);
        new.id = "new".into();
        for s in [&old, &new] {
            store
                .update(&s.id, |_| (Some(s.clone()), Vec::new(), ()))
                .unwrap();
        }
        let ended = fold(&store, &boot, &old).expect("ended");
        assert_eq!(
            (ended.status, ended.exit_reason.as_deref()),
            (Status::Exited, Some(MACHINE_STOPPED))
        );
        let kinds: Vec<String> = store
            .events("old", None)
            .unwrap()
            .into_iter()
            .map(|e| e.kind)
            .collect();
        assert_eq!(kinds, ["turn.interrupted", "session.exited"]);
        assert_eq!(fold(&store, &boot, &ended), None, "once");
        let noted = fold(&store, &boot, &new).expect("noted");
        assert_eq!(
            (noted.status, noted.boot_id.as_deref()),
            (Status::Idle, Some("b2"))
        );
        assert_eq!(noted.updated_at, now, "a note, no change of state");
        assert_eq!(fold(&store, &boot, &noted), None);
    }

    #[test]
    fn this_machine_has_a_boot_id_and_a_boot_time() {
        let boot = Boot::now(&Env::default());
        assert_eq!(boot.id.as_deref().map(str::len), Some(36), "{boot:?}");
        assert!(boot.at.is_some_and(|at| at < SystemTime::now()), "{boot:?}");
    }
}
