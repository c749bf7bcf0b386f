//! Away mode, per user: `$SPEX_HOME/away.json` (0600) says whether the person is away from
//! their terminals, so a hook that can only answer by holding the harness's prompt back (a
//! Codex TUI with no server another client can join) waits a while for `spex answer` first.
//! Written by `spex away on|off`; read by the hook path only for the event that may wait (one
//! read of a small file; a missing file is the configured default).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What `away.json` holds. Fields in alphabetical order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Away {
    pub on: bool,
    /// When it was last set (RFC 3339).
    pub since: String,
}

pub fn file(spex_home: &Path) -> PathBuf {
    spex_home.join("away.json")
}

/// What `spex away` last set, if anything; a file that is not this shape counts as unset.
pub fn read(spex_home: &Path) -> Option<Away> {
    let bytes = fs_err::read(file(spex_home)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Sets away mode `on` (atomically, under a lock, the file private).
pub fn set(spex_home: &Path, on: bool) -> std::io::Result<Away> {
    let path = file(spex_home);
    crate::fsutil::create_private_dir_all(spex_home)?;
    let lock = spex_home.join("away.lock");
    super::lock::with(&lock, || {
        let away = Away {
            on,
            since: super::now_rfc3339(),
        };
        let mut text = serde_json::to_string_pretty(&away).expect("a struct serializes");
        text.push('\n');
        crate::fsutil::write_private(&path, text.as_bytes())?;
        Ok(away)
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_reads_back_private_and_garbage_is_unset() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("spex");
        assert_eq!(read(&home), None);
        let on = set(&home, true).unwrap();
        assert_eq!(read(&home), Some(on));
        let mode = fs_err::metadata(file(&home)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!set(&home, false).unwrap().on);
        assert!(!read(&home).unwrap().on);
        fs_err::write(file(&home), "{not json").unwrap();
        assert_eq!(read(&home), None);
    }
}
