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

use std::io::{BufRead as _, BufReader, Read as _};
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
}

impl Drop for Followers {
    fn drop(&mut self) {
        self.control.stop();
    }
}

/// Starts a follower thread for every configured remote (each in standby while another
/// process follows that host).
pub fn spawn_all(env: &Env) -> Followers {
    let control = Arc::new(Control::default());
    for remote in super::remotes(env).unwrap_or_default() {
        let Some(store) = remotes::host(&env.spex_home(), &remote.name) else {
            continue;
        };
        let (env, control) = (env.clone(), Arc::clone(&control));
        let spawned = std::thread::Builder::new()
            .name(format!("spex-follow-{}", remote.name))
            .spawn(move || follow(&env, &remote, &store, &control));
        if let Err(e) = spawned {
            log!("remote: cannot start the follower of a host: {e}");
        }
    }
    Followers { control }
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
    let mut words = vec!["events", "--json", "--all-projects", "--since", &cursor];
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
    fn the_error_shown_is_sshs_last_word_not_a_hint() {
        let text = "Warning: Permanently added '[127.0.0.1]:2222'\r\nssh: connect to host 127.0.0.1 port 2222: Connection refused\r\n";
        assert_eq!(
            one_line(text),
            "ssh: connect to host 127.0.0.1 port 2222: Connection refused"
        );
        assert_eq!(one_line("error: no\nhint: do this\n"), "error: no");
    }
}
