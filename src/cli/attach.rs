//! `spex attach`: this terminal becomes the session's terminal until the detach key (`Ctrl-\`
//! unless the configuration's `detachKey` names another) detaches.

use std::io::{Read, Write};
use std::path::Path;

use super::Outcome;
use crate::env::Env;
use crate::runtime::protocol::Request;
use crate::runtime::{Client, RuntimeError};

/// Attach this terminal to a hosted session; `Ctrl-\` (or the configured `detachKey`) detaches
/// and leaves it running.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id or a unique prefix of it.
    pub id: String,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let (store, id) = super::sessions::project_and_id(env, &args.id)?;
    let record = store
        .load(&id)?
        .ok_or_else(|| crate::store::session::StoreError::NotFound(id.clone()))?;
    if let Some(server) = super::launch::server_of(env, &store, &record, true)? {
        server.attach(&id)?;
    } else {
        // A host that does not answer is explained: the session ended, or runs in a terminal
        // of its own, or its host died.
        crate::runtime::explained(
            env,
            &store,
            &id,
            crate::runtime::Act::Attach,
            crate::runtime::call(env, &id, Request::Ping),
        )?;
        attach(env, &id, detach_key(env, &record.tree))?;
    }
    Ok(Outcome::Ok)
}

/// Sends this terminal's new size to the session whenever the window changes (SIGWINCH), on a
/// connection of its own: the attached one carries raw bytes.
fn forward_resizes(env: &Env, id: &str) {
    let Ok(mut signals) = signal_hook::iterator::Signals::new([signal_hook::consts::SIGWINCH])
    else {
        return;
    };
    let (env, id) = (env.clone(), id.to_owned());
    std::thread::spawn(move || {
        for _ in signals.forever() {
            let Ok(size) = rustix::termios::tcgetwinsize(std::io::stdout()) else {
                continue;
            };
            let _ = crate::runtime::call(
                &env,
                &id,
                Request::Resize {
                    rows: size.ws_row,
                    cols: size.ws_col,
                },
            );
        }
    });
}

/// The detach key the configuration of the checkout at `tree` names (`Ctrl-\` by default, and
/// when the configuration cannot be read: attaching must not fail on it).
pub fn detach_key(env: &Env, tree: &Path) -> u8 {
    crate::config::load(&env.user_config_file(), tree, &crate::adapters::known())
        .map_or(crate::config::DETACH_KEY, |c| c.detach_key)
}

/// Streams session `id` to this terminal (raw mode) until the user types `detach` or it ends.
pub fn attach(env: &Env, id: &str, detach: u8) -> anyhow::Result<()> {
    use rustix::termios;
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let size = termios::tcgetwinsize(&stdout).ok();
    let mut client = Client::connect(env, id)?;
    let answer = client.call(
        Request::Attach {
            rows: size.map_or(0, |s| s.ws_row),
            cols: size.map_or(0, |s| s.ws_col),
        },
        std::time::Duration::from_secs(10),
    )?;
    if !answer.ok {
        return Err(RuntimeError::Refused {
            id: id.to_owned(),
            message: answer.error.unwrap_or_default(),
        }
        .into());
    }
    let (mut reader, mut writer) = client.into_parts();
    forward_resizes(env, id);
    let original = termios::tcgetattr(&stdin).ok();
    if let Some(orig) = &original {
        let mut raw = orig.clone();
        raw.make_raw();
        let _ = termios::tcsetattr(&stdin, termios::OptionalActions::Now, &raw);
    }
    eprint!(
        "[attached to {id}: {} detaches]\r\n",
        crate::config::control_key_name(detach)
    );
    let restore = original.clone();
    let id_out = id.to_owned();
    std::thread::spawn(move || {
        let mut out = std::io::stdout();
        let mut buf = [0u8; 8192];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || out.write_all(&buf[..n]).and_then(|()| out.flush()).is_err() {
                break;
            }
        }
        // The session ended (or its host went away): give the terminal back and leave.
        if let Some(orig) = &restore {
            let _ = termios::tcsetattr(std::io::stdin(), termios::OptionalActions::Now, orig);
        }
        eprint!("\r\n[session {id_out} ended]\r\n");
        std::process::exit(0);
    });
    let mut buf = [0u8; 1024];
    let mut input = stdin.lock();
    while let Ok(n) = input.read(&mut buf) {
        if n == 0 {
            break;
        }
        let chunk = &buf[..n];
        let (send, detached) = match chunk.iter().position(|&b| b == detach) {
            Some(i) => (&chunk[..i], true),
            None => (chunk, false),
        };
        if writer.write_all(send).is_err() || detached {
            break;
        }
    }
    if let Some(orig) = &original {
        let _ = termios::tcsetattr(&stdin, termios::OptionalActions::Now, orig);
    }
    let _ = writer.shutdown(std::net::Shutdown::Both);
    eprint!("\r\n[detached from {id}; it keeps running]\r\n");
    Ok(())
}
