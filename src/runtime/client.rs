//! The way to a session's host: the private runtime folder that holds the sockets, the
//! socket of a session, and one request with its response over it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use super::error::RuntimeError;
use super::protocol::{Envelope, Request, Response, VERSION};
use crate::env::Env;

/// The per-user folder for session sockets: `$XDG_RUNTIME_DIR/spex`, else `/tmp/spex-<uid>`;
/// mode 0700 and owned by this user, or refused.
pub fn runtime_dir(env: &Env) -> Result<PathBuf, RuntimeError> {
    let uid = rustix::process::getuid().as_raw();
    let dir = match &env.xdg_runtime_dir {
        Some(d) => d.join("spex"),
        None => PathBuf::from(format!("/tmp/spex-{uid}")),
    };
    crate::fsutil::create_private_dir(&dir).map_err(RuntimeError::Fs)?;
    let meta = fs_err::symlink_metadata(&dir).map_err(RuntimeError::Fs)?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(RuntimeError::RuntimeDir {
            path: dir,
            message: "is not a private folder of this user (want a directory, owner you, mode 0700)".into(),
            hint: "remove it or fix its owner and mode; spex will not put sockets where others can reach them".into(),
        });
    }
    Ok(dir)
}

/// The socket of session `id`.
pub fn socket_path(env: &Env, id: &str) -> Result<PathBuf, RuntimeError> {
    let path = runtime_dir(env)?.join(format!("{id}.sock"));
    // `sun_path` holds 108 bytes with its NUL.
    if path.as_os_str().len() > 100 {
        return Err(RuntimeError::RuntimeDir {
            message: "the socket path is too long for a Unix socket".into(),
            hint: "set XDG_RUNTIME_DIR to a shorter folder".into(),
            path,
        });
    }
    Ok(path)
}

/// A connection to a session's host.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Client {
    pub fn connect(env: &Env, id: &str) -> Result<Client, RuntimeError> {
        let socket = socket_path(env, id)?;
        let gone = || RuntimeError::HostGone {
            id: id.to_owned(),
            socket: socket.clone(),
        };
        let stream = UnixStream::connect(&socket).map_err(|_| gone())?;
        let writer = stream.try_clone().map_err(|_| gone())?;
        Ok(Client {
            reader: BufReader::new(stream),
            writer,
        })
    }

    /// One request and its response, within `timeout`.
    pub fn call(&mut self, request: Request, timeout: Duration) -> std::io::Result<Response> {
        self.writer.set_read_timeout(Some(timeout))?;
        let mut line = serde_json::to_vec(&Envelope {
            v: VERSION,
            request,
        })
        .expect("a request serializes");
        line.push(b'\n');
        self.writer.write_all(&line)?;
        let mut answer = String::new();
        self.reader.get_ref().set_read_timeout(Some(timeout))?;
        if self.reader.read_line(&mut answer)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the host closed the connection",
            ));
        }
        serde_json::from_str(&answer).map_err(std::io::Error::other)
    }

    /// The raw stream, after a successful `attach`.
    pub fn into_parts(self) -> (BufReader<UnixStream>, UnixStream) {
        (self.reader, self.writer)
    }
}

pub(super) const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// `request` to the host of `id`; a host that does not answer is `HostGone`.
pub fn call(env: &Env, id: &str, request: Request) -> Result<Response, RuntimeError> {
    let mut client = Client::connect(env, id)?;
    let response = client
        .call(request, CALL_TIMEOUT)
        .map_err(|_| RuntimeError::HostGone {
            id: id.to_owned(),
            socket: socket_path(env, id).unwrap_or_default(),
        })?;
    if response.ok {
        Ok(response)
    } else {
        Err(RuntimeError::Refused {
            id: id.to_owned(),
            message: response.error.unwrap_or_default(),
        })
    }
}
