//! The federated stream's follower: for each remote, `spex events --follow --json
//! --all-projects --since CURSOR` run over the host's SSH connection, every line it prints taken
//! into the host's journal in this store (`store::remotes`, which keeps the cursor inside each
//! line), and on a drop a reconnection with backoff that resumes after the last line taken in:
//! no remote event lost, none repeated. A host that refuses, stops answering (ssh's keepalives
//! end the connection within 10 s) or whose spex fails is marked unreachable with ssh's words;
//! its sessions keep their last known state, which readers show as stale.
//!
//! One follower per host: it holds the host's `follow.lock`; another process's follower waits on
//! it in standby (blocked in the kernel) and takes over when the holder ends.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::{Remote, ssh};
use crate::env::Env;
use crate::log::log;
use crate::store::remotes::{self, HostStore};

/// The protocol feature a remote offers when its `spex events` follows every project from a
/// cursor (what this follower runs there).
pub const FEATURE: &str = "events.follow";

/// The first wait before reconnecting, doubled after each failed attempt up to [`BACKOFF_MAX`].
pub const BACKOFF_MIN: Duration = Duration::from_millis(250);
pub const BACKOFF_MAX: Duration = Duration::from_secs(15);

/// Stops the followers of one process: wakes their waits and ends their `ssh` runs.
#[derive(Default)]
struct Control {
    stopped: Mutex<bool>,
    wake: Condvar,
    /// The `ssh` processes running now, by host.
    children: Mutex<Vec<(String, u32)>>,
}

impl Control {
    fn stopped(&self) -> bool {
        *self
            .stopped
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits `d`, or less when stopped; returns whether stopped.
    fn sleep(&self, d: Duration) -> bool {
        let guard = self
            .stopped
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (guard, _) = self
            .wake
            .wait_timeout_while(guard, d, |s| !*s)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *guard
    }

    fn stop(&self) {
        *self
            .stopped
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        self.wake.notify_all();
        let children = self
            .children
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (_, pid) in children.iter() {
            if let Some(pid) = rustix::process::Pid::from_raw((*pid).cast_signed()) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
        }
    }
}

/// The followers this process runs; dropping it stops them (their `ssh` runs end with it).
pub struct Followers {
    control: Arc<Control>,
    hosts: Arc<Hosts>,
    /// Wakes the supervisor out of its wait on the config file.
    waker: Option<UnixStream>,
}

/// The host followers running now: each host's remote as configured when it started, and
/// what stops that one alone.
type Hosts = Mutex<BTreeMap<String, (Remote, Arc<Control>)>>;

impl Drop for Followers {
    fn drop(&mut self) {
        self.control.stop();
        for (_, host) in lock(&self.hosts).values() {
            host.stop();
        }
        if let Some(w) = &mut self.waker {
            let _ = w.write_all(b"x");
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts a follower thread for every configured remote (each in standby while another
/// process follows that host), and a supervisor that follows a remote added to the user's
/// config file and drops one removed (or changed: followed again as it is now) while this
/// process runs.
pub fn spawn_all(env: &Env) -> Followers {
    let control = Arc::new(Control::default());
    let hosts: Arc<Hosts> = Arc::default();
    reconcile(env, &control, &hosts);
    let waker = UnixStream::pair().ok().and_then(|(rx, tx)| {
        let (env, control, hosts) = (env.clone(), Arc::clone(&control), Arc::clone(&hosts));
        let spawned = std::thread::Builder::new()
            .name("spex-follow".into())
            .spawn(move || supervise(&env, &control, &hosts, &rx));
        match spawned {
            Ok(_) => Some(tx),
            Err(e) => {
                log!("remote: cannot follow the config file's remotes: {e}");
                None
            }
        }
    });
    Followers {
        control,
        hosts,
        waker,
    }
}

/// The followers brought to the config file's remotes: one started for each new (or changed)
/// remote, the one of a remote no longer there stopped. A config file that cannot be read
/// right now (half written by an editor) changes nothing.
fn reconcile(env: &Env, control: &Control, hosts: &Hosts) {
    let Ok(wanted) = super::remotes(env) else {
        return;
    };
    let mut hosts = lock(hosts);
    // Stopped while the file was read: `Followers::drop` stopped the hosts under this lock.
    if control.stopped() {
        return;
    }
    hosts.retain(|name, (remote, control)| {
        let keep = wanted.contains(remote);
        if !keep {
            control.stop();
            log!("remote `{name}`: removed from the config file (or changed): no longer followed");
        }
        keep
    });
    for remote in wanted {
        if hosts.contains_key(&remote.name) {
            continue;
        }
        let Some(store) = remotes::host(&env.spex_home(), &remote.name) else {
            continue;
        };
        let control = Arc::new(Control::default());
        let (env, ctl, r) = (env.clone(), Arc::clone(&control), remote.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("spex-follow-{}", remote.name))
            .spawn(move || follow(&env, &r, &store, &ctl));
        match spawned {
            Ok(_) => {
                hosts.insert(remote.name.clone(), (remote, control));
            }
            Err(e) => log!("remote: cannot start the follower of a host: {e}"),
        }
    }
}

/// Waits on the user's config file (its folder, or the nearest folder above it that exists,
/// for the folder appearing) and reconciles the followers on each change, until stopped. Where
/// nothing can be watched it looks again every few seconds.
fn supervise(env: &Env, control: &Control, hosts: &Hosts, wake: &UnixStream) {
    use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
    let Ok(fd) = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK) else {
        log!("remote: cannot watch the config file: inotify_init failed");
        return;
    };
    let file = env.user_config_file();
    let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
    let flags = WatchFlags::CREATE
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::MOVED_TO
        | WatchFlags::MOVED_FROM
        | WatchFlags::DELETE;
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
    while !control.stopped() {
        // Added again each round: the folder (or one above it) may have appeared since. The
        // config's folder is watched for the file; the nearest folder above that exists, for
        // the way down to it appearing.
        let mut watched = inotify::add_watch(&fd, &dir, flags).is_ok();
        for up in dir.ancestors().skip(1) {
            if watched {
                break;
            }
            watched =
                inotify::add_watch(&fd, up, WatchFlags::CREATE | WatchFlags::MOVED_TO).is_ok();
        }
        // After the watches are in place: a change made before them is read here.
        reconcile(env, control, hosts);
        let timeout = (!watched).then_some(rustix::event::Timespec {
            tv_sec: 5,
            tv_nsec: 0,
        });
        let mut fds = [
            rustix::event::PollFd::new(&fd, rustix::event::PollFlags::IN),
            rustix::event::PollFd::new(wake, rustix::event::PollFlags::IN),
        ];
        let _ = rustix::event::poll(&mut fds, timeout.as_ref());
        if control.stopped() {
            return;
        }
        let mut reader = inotify::Reader::new(&fd, &mut buf);
        while reader.next().is_ok() {}
    }
}

/// Follows `remote` into `store` until stopped: standby on the host's lock, then connect,
/// take lines in, and reconnect with backoff when the connection ends.
fn follow(env: &Env, remote: &Remote, store: &HostStore, control: &Control) {
    if let Err(e) = crate::fsutil::create_private_dir_all(&store.dir) {
        log!("remote `{}`: {e}", remote.name);
        return;
    }
    let file = {
        use fs_err::os::unix::fs::OpenOptionsExt as _;
        fs_err::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(crate::fsutil::PRIVATE_FILE)
            .open(store.follow_lock())
    };
    let Ok(file) = file else {
        log!("remote `{}`: cannot open its follow lock", remote.name);
        return;
    };
    let mut lock = fd_lock::RwLock::new(file.into_parts().0);
    let Ok(_guard) = lock.write() else {
        return;
    };
    if control.stopped() {
        return;
    }
    log!("remote `{}`: following its events", remote.name);
    let mut backoff = BACKOFF_MIN;
    while !control.stopped() {
        match run_once(env, remote, store, control, true) {
            Ok(took) => {
                if took {
                    backoff = BACKOFF_MIN;
                }
            }
            Err(Lost { error, .. }) if error.contains(TOO_OLD) => {
                if control.stopped() {
                    return;
                }
                match resync(env, remote, store, &error) {
                    Ok(()) => {
                        backoff = BACKOFF_MIN;
                        continue;
                    }
                    Err(e) => log!("remote `{}`: cannot resynchronize: {e}", remote.name),
                }
            }
            Err(Lost { error, reached }) => {
                if control.stopped() {
                    return;
                }
                if reached {
                    backoff = BACKOFF_MIN;
                }
                log!("remote `{}`: {error}", remote.name);
                if let Err(e) = store.set_reach(false, &error) {
                    log!("remote `{}`: {e}", remote.name);
                }
            }
        }
        if control.sleep(backoff) {
            return;
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// Takes in what `remote` printed since the host's cursor, once (no follow), when no follower
/// holds the host: for a plain `spex events --all-hosts`. Returns the error that made the host
/// unreachable, if any.
pub fn catch_up(env: &Env, remote: &Remote) -> Option<String> {
    let store = remotes::host(&env.spex_home(), &remote.name)?;
    crate::fsutil::create_private_dir_all(&store.dir).ok()?;
    let file = fs_err::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(store.follow_lock())
        .ok()?;
    let mut lock = fd_lock::RwLock::new(file.into_parts().0);
    // A follower holds it: the journal is as fresh as it gets.
    let _guard = lock.try_write().ok()?;
    match run_once(env, remote, &store, &Control::default(), false) {
        Ok(_) => None,
        Err(Lost { error, .. }) => {
            let _ = store.set_reach(false, &error);
            Some(error)
        }
    }
}

/// What the remote's `spex events` says when its stream rotated past this host's cursor
/// (`store::stream::CursorError::TooOld`; a test keeps the two the same).
const TOO_OLD: &str = "is older than the events kept";

/// The remote's stream rotated past this host's cursor: says so in the log and in the host's
/// journal (a `stream.gap` line), and puts the remote's sessions as a fresh `spex sessions
/// --all-projects --all --json` there shows them in place of what was kept; the next run
/// follows the stream from its end (the line's empty cursor). Events between the snapshot and
/// that run's start are not seen one by one; their sessions' state is in the snapshot or
/// comes with their next event.
fn resync(env: &Env, remote: &Remote, store: &HostStore, why: &str) -> Result<(), String> {
    log!(
        "remote `{}`: its stream rotated past this machine's cursor ({why}); resynchronizing its sessions from a snapshot",
        remote.name
    );
    let args: Vec<std::ffi::OsString> = ["sessions", "--all-projects", "--all", "--json"]
        .iter()
        .map(Into::into)
        .collect();
    let (code, out) =
        super::forward::output(env, remote, &args).map_err(|e| one_line(&e.to_string()))?;
    if code != 0 {
        return Err(format!("`spex sessions` there exited {code}"));
    }
    let rows: Vec<Value> =
        serde_json::from_slice(&out).map_err(|e| format!("`spex sessions` there: {e}"))?;
    let snapshot: Vec<Value> = rows.iter().filter_map(known_of).collect();
    let line = serde_json::json!({
        "kind": "stream.gap", "time": crate::store::now_rfc3339(), "why": why,
        "remote_cursor": "", "snapshot": snapshot,
    });
    store.append(vec![line]).map_err(|e| e.to_string())?;
    log!(
        "remote `{}`: {} sessions taken from the snapshot; following its stream from its end",
        remote.name,
        snapshot.len()
    );
    Ok(())
}

/// A remote session record (`spex sessions --json`) as the journal keeps it
/// ([`remotes::Known`]): its project named as the remote's stream names it (its store's folder).
fn known_of(row: &Value) -> Option<Value> {
    let text = |v: &Value| v.as_str().map(str::to_owned);
    let project =
        crate::store::ProjectStore::new(Path::new("/"), Path::new(row["project"].as_str()?))
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
    let attention = &row["attention"];
    let attention_line = attention.is_object().then(|| {
        let mut line = attention.clone();
        line["kind"] = "attention.opened".into();
        line["attention"] = attention["id"].clone();
        line["session"] = row["id"].clone();
        line
    });
    let known = remotes::Known {
        project,
        session: text(&row["id"])?,
        handle: text(&row["handle"]),
        name: text(&row["name"]),
        harness: text(&row["harness"]),
        status: text(&row["status"]),
        turn: text(&row["turn"]["state"]),
        attention: text(&attention["reason"]),
        attention_id: text(&attention["id"]),
        attention_text: text(&attention["text"]),
        attention_line,
        updated_at: text(&row["updated_at"]),
    };
    serde_json::to_value(known).ok()
}

/// Why a run ended: ssh's (or the remote spex's) words, and whether the host had answered.
struct Lost {
    error: String,
    reached: bool,
}

/// One connection: the remote's `hello` (the host answers, and its spex offers the stream),
/// then its events from the host's cursor into the journal until the connection ends. Returns
/// whether any line was taken in.
fn run_once(
    env: &Env,
    remote: &Remote,
    store: &HostStore,
    control: &Control,
    follow: bool,
) -> Result<bool, Lost> {
    let lost = |error: String, reached: bool| Lost { error, reached };
    super::require(env, remote, FEATURE).map_err(|e| lost(one_line(&e.to_string()), false))?;
    store
        .set_reach(true, "")
        .map_err(|e| lost(e.to_string(), true))?;
    let cursor = store.state().cursor.unwrap_or_else(|| "0".to_owned());
    let mut words = vec!["events", "--json", "--all-projects"];
    // An empty cursor: resynchronized from a snapshot, the stream is followed from its end
    // (a plain catch-up has nothing to read until the follower took a line in).
    if !cursor.is_empty() {
        words.extend(["--since", &cursor]);
    } else if !follow {
        return Ok(false);
    }
    if follow {
        words.push("--follow");
    }
    let mut child = ssh::command(env, remote)
        .arg(ssh::spex_words(remote, &words))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| lost(format!("cannot run `ssh`: {e}"), false))?;
    let pid = child.id();
    control
        .children
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push((remote.name.clone(), pid));
    let result = take_lines(store, &mut child);
    control
        .children
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .retain(|(_, p)| *p != pid);
    result.map_err(|e| lost(e, true))
}

/// Reads the remote's lines into the journal, each before the next is read, until its output
/// ends; then its exit says whether that was a loss.
fn take_lines(store: &HostStore, child: &mut Child) -> Result<bool, String> {
    let stderr = child.stderr.take().map(|mut s| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = s.read_to_string(&mut text);
            text
        })
    });
    let mut took = false;
    let mut failed = None;
    if let Some(out) = child.stdout.take() {
        let mut out = BufReader::new(out);
        let mut line = Vec::new();
        loop {
            line.clear();
            match out.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            // A line cut short by the drop is no line: it comes again after the cursor.
            if line.last() != Some(&b'\n') {
                break;
            }
            let Ok(Value::Object(mut v)) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            let (Some(pos), Some(cursor)) = (v.remove("pos"), v.remove("cursor")) else {
                continue;
            };
            v.insert("remote_pos".into(), pos);
            v.insert("remote_cursor".into(), cursor);
            if let Err(e) = store.append(vec![Value::Object(v)]) {
                failed = Some(format!("cannot keep its events: {e}"));
                let _ = child.kill();
                break;
            }
            took = true;
        }
    }
    let status = child.wait();
    let words = stderr
        .and_then(|t| t.join().ok())
        .map(|t| one_line(&t))
        .unwrap_or_default();
    if let Some(f) = failed {
        return Err(f);
    }
    match status.map(|s| s.code()) {
        Ok(Some(0)) => Ok(took),
        // ssh's own failures exit 255: the connection.
        Ok(Some(255)) if words.is_empty() => Err("the connection was lost".to_owned()),
        Ok(_) if words.is_empty() => Err("`spex events` there ended".to_owned()),
        _ => Err(words),
    }
}

/// The last non-empty line of what ssh or the remote spex said (their final word), prefixes
/// such as `error: ` kept.
fn one_line(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with("hint:"))
        .unwrap_or_default();
    crate::text::visible(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_too_old_is_told_by_the_words_the_follower_looks_for() {
        let e = crate::store::stream::CursorError::TooOld {
            cursor: "ab:3".into(),
            after: 3,
            oldest: 10,
        };
        assert!(e.to_string().contains(TOO_OLD), "{e}");
    }

    #[test]
    fn a_session_record_becomes_what_the_journal_keeps() {
        let row = serde_json::json!({
            "id": "s1", "handle": "k3", "harness": "h1", "project": "projects/my app",
            "status": "waiting", "turn": {"state": "running"}, "updated_at": "t",
            "attention": {"id": "a1", "reason": "permission", "text": "Bash ls", "choices": []},
        });
        let k: remotes::Known = serde_json::from_value(known_of(&row).unwrap()).unwrap();
        let store =
            crate::store::ProjectStore::new(Path::new("store"), Path::new("projects/my app"));
        assert_eq!(
            k.project.as_deref(),
            store.dir.file_name().and_then(|n| n.to_str())
        );
        assert_eq!(
            (
                k.status.as_deref(),
                k.turn.as_deref(),
                k.attention.as_deref()
            ),
            (Some("waiting"), Some("running"), Some("permission"))
        );
        assert_eq!(k.attention_line.unwrap()["attention"], "a1");
    }

    #[test]
    fn the_error_shown_is_sshs_last_word_not_a_hint() {
        let text = "Warning: Permanently added '[127.0.0.1]:2222'\r\nssh: connect to host 127.0.0.1 port 2222: Connection refused\r\n";
        assert_eq!(
            one_line(text),
            "ssh: connect to host 127.0.0.1 port 2222: Connection refused"
        );
        assert_eq!(one_line("error: no\nhint: do this\n"), "error: no");
    }
}
