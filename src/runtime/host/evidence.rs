//! What the host reports in the session's folder: its process and the program's (the
//! evidence the session runs), and the record's transitions it makes, under the record's lock.
//! Knows nothing of the terminal or the socket.

use crate::log::log;
use crate::pty::session::Exit;
use crate::store::ProjectStore;
use crate::store::session::{ExitStatus, NewEvent, Status};

/// What host-made transitions name as their source.
pub(super) const SOURCE: &str = "host";

/// Records this host's process and the program's (pid and start time) in the session's folder:
/// the evidence that the session runs, whatever happens to the socket.
pub(super) fn write_host_record(store: &ProjectStore, id: &str, child_pid: u32) {
    let me = std::process::id();
    let process = |pid: u32| {
        crate::seam::evidence::process_start(pid)
            .map(|start| crate::store::session::ProcessId { pid, start })
    };
    let (Some(host), Some(child)) = (process(me), process(child_pid)) else {
        log!("error: no start time for the host ({me}) or the program ({child_pid})");
        return;
    };
    let path = crate::runtime::host_record_path(store, id);
    let bytes =
        serde_json::to_vec(&crate::runtime::HostRecord { host, child }).expect("serializes");
    if let Err(e) = crate::fsutil::write_private(&path, &bytes) {
        log!("error: writing `{}`: {e}", path.display());
    }
}

/// Read-modify-write of the record under its lock; `f` may change it and add events.
pub(super) fn record(
    store: &ProjectStore,
    id: &str,
    f: impl FnOnce(&mut crate::store::session::Session, &mut Vec<NewEvent>, &str),
) {
    let result = store.update(id, |current| {
        let Some(mut s) = current else {
            return (None, Vec::new(), ());
        };
        let before = s.clone();
        let mut events = Vec::new();
        let now = crate::store::now_rfc3339();
        f(&mut s, &mut events, &now);
        if s == before {
            return (None, Vec::new(), ());
        }
        s.updated_at = now;
        (Some(s), events, ())
    });
    if let Err(e) = result {
        log!("error: updating session {id}: {}", crate::hint::spelled(&e));
    }
}

/// The program ended: the record says so, with its exit, and a running turn ends with it.
pub(super) fn record_exit(store: &ProjectStore, id: &str, exit: Exit) {
    record(store, id, |s, events, now| {
        s.exit_status = Some(
            ExitStatus {
                code: exit.code,
                signal: exit.signal,
            }
            .into(),
        );
        if s.status != Status::Exited {
            let before = s.state_key();
            let mut ended = s.exit("process exited", now, SOURCE);
            if let Some((_, _, fields)) = ended.last_mut() {
                fields.insert("code".into(), exit.code.into());
                fields.insert("signal".into(), exit.signal.into());
            }
            events.extend(ended);
            s.stamp(before, now, SOURCE, None);
        }
    });
}
