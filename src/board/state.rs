//! The board's files in the spex home (a 0700 folder): the lock one board per user holds,
//! the state file saying where it listens (pid, address, port), and its token, each 0600.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fsutil;

/// Where the board keeps its files.
#[derive(Debug, Clone)]
pub struct Paths {
    pub dir: PathBuf,
}

impl Paths {
    pub fn new(spex_home: &Path) -> Paths {
        Paths {
            dir: spex_home.join("board"),
        }
    }

    pub fn lock(&self) -> PathBuf {
        self.dir.join("board.lock")
    }

    pub fn state(&self) -> PathBuf {
        self.dir.join("state.json")
    }

    pub fn token(&self) -> PathBuf {
        self.dir.join("token")
    }

    /// Where a detached board writes what it says on stderr.
    pub fn log(&self) -> PathBuf {
        self.dir.join("board.log")
    }
}

/// What a running board says about itself.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct State {
    pub pid: u32,
    pub address: String,
    pub port: u16,
    /// The address to open, without the token.
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_url: Option<String>,
    pub started_at: String,
}

impl State {
    /// The address with its token: what `spex board` prints first.
    pub fn url_with(&self, token: &str) -> String {
        format!("{}/?token={token}", self.url.trim_end_matches('/'))
    }
}

/// 256 random bits from the system's generator, as hex.
pub fn new_secret() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(hex::encode(bytes))
}

/// The lock that makes one board per user: `None` while another process holds it. Held as
/// long as the process runs (the system drops it when the process ends, however it ends).
pub fn take_lock(paths: &Paths) -> std::io::Result<Option<()>> {
    fsutil::create_private_dir_all(&paths.dir)?;
    let file = fs_err::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(paths.lock())?;
    fsutil::make_private(&paths.lock())?;
    let lock: &'static mut fd_lock::RwLock<fs_err::File> =
        Box::leak(Box::new(fd_lock::RwLock::new(file)));
    match lock.try_write() {
        Ok(guard) => {
            std::mem::forget(guard);
            Ok(Some(()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether a board holds the lock now.
pub fn running(paths: &Paths) -> bool {
    let Ok(file) = fs_err::OpenOptions::new().write(true).open(paths.lock()) else {
        return false;
    };
    let mut lock = fd_lock::RwLock::new(file);
    lock.try_write().is_err()
}

pub fn write_state(paths: &Paths, s: &State) -> std::io::Result<()> {
    fsutil::write_private(&paths.state(), &crate::store::json_bytes(s)).map(|_| ())
}

pub fn read_state(paths: &Paths) -> Option<State> {
    let bytes = fsutil::read_opt(&paths.state()).ok().flatten()?;
    serde_json::from_slice(&bytes).ok()
}

pub fn write_token(paths: &Paths, token: &str) -> std::io::Result<()> {
    fsutil::write_private(&paths.token(), token.as_bytes()).map(|_| ())
}

pub fn read_token(paths: &Paths) -> Option<String> {
    let mut text = String::new();
    fs_err::File::open(paths.token())
        .ok()?
        .read_to_string(&mut text)
        .ok()?;
    Some(text.trim().to_owned()).filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn secrets_are_256_bits_and_differ() {
        let a = new_secret().unwrap();
        let b = new_secret().unwrap();
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }

    #[test]
    fn one_lock_holder_and_private_files() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::new(dir.path());
        assert!(!running(&paths));
        assert_eq!(take_lock(&paths).unwrap(), Some(()));
        write_token(&paths, "abc").unwrap();
        let mode = |p: &Path| fs_err::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&paths.token()), 0o600);
        assert_eq!(mode(&paths.dir), 0o700);
        assert_eq!(read_token(&paths).as_deref(), Some("abc"));
    }
}
