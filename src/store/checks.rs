//! What `spex check` found, per harness binary and version: `$SPEX_HOME/checks.json`. `doctor`
//! and `launch` read it to say when the installed version is unchecked or failed, and a
//! capability whose check failed for that version is switched off with the reason.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file's name under `$SPEX_HOME`.
const FILE: &str = "checks.json";

/// Every result kept, keyed by [`key`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Checks {
    #[serde(default)]
    pub results: BTreeMap<String, Result>,
}

/// One check of one harness binary at one version.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Result {
    pub harness: String,
    pub binary: PathBuf,
    pub version: String,
    /// When it ran, RFC 3339.
    pub checked_at: String,
    pub passed: usize,
    /// The promises that failed, each with what spex does about it.
    #[serde(default)]
    pub failed: Vec<Failed>,
}

/// A promise that did not hold for a version.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Failed {
    /// The capability switched off (`launch`, `deliver`, `events`, `answer.permission`,
    /// `answer.question`, `interrupt`, `resume`).
    pub capability: String,
    pub promise: String,
    /// What spex does instead.
    pub fallback: String,
}

/// What the store knows of an installed harness binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// `spex check` never ran against this binary at this version.
    Unchecked,
    Passed(Result),
    Failed(Result),
}

fn file(spex_home: &Path) -> PathBuf {
    spex_home.join(FILE)
}

/// The key of a binary at a version: its path and version, so two installs are told apart.
pub fn key(binary: &Path, version: &str) -> String {
    format!("{}@{version}", binary.display())
}

/// Every result kept (none when the file is missing or unreadable: a check is then asked for
/// again, never assumed).
pub fn load(spex_home: &Path) -> Checks {
    fs_err::read(file(spex_home))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Keeps `result`, replacing an earlier one of the same binary and version.
pub fn save(spex_home: &Path, result: Result) -> std::io::Result<()> {
    fs_err::create_dir_all(spex_home)?;
    super::lock::with(&spex_home.join("checks.lock"), || {
        let mut all = load(spex_home);
        all.results
            .insert(key(&result.binary, &result.version), result);
        crate::fsutil::write_atomic(&file(spex_home), &super::json_bytes(&all)).map(|_| ())
    })?
}

/// What is known of `binary` at `version`.
pub fn verdict(spex_home: &Path, binary: &Path, version: &str) -> Verdict {
    match load(spex_home).results.remove(&key(binary, version)) {
        None => Verdict::Unchecked,
        Some(r) if r.failed.is_empty() => Verdict::Passed(r),
        Some(r) => Verdict::Failed(r),
    }
}

/// The failures that switched `capability` off for `binary` at `version` (none: it is on).
pub fn switched_off(
    spex_home: &Path,
    binary: &Path,
    version: &str,
    capability: &str,
) -> Vec<Failed> {
    match verdict(spex_home, binary, version) {
        Verdict::Failed(r) => r
            .failed
            .into_iter()
            .filter(|f| f.capability == capability)
            .collect(),
        _ => Vec::new(),
    }
}

/// `--version` of a binary as it was last read, while the file is the same (size, mtime).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Probed {
    #[serde(default)]
    versions: BTreeMap<String, (u64, u128, String)>,
}

/// The version of `binary`, read with `probe` only when the file changed since it was last
/// read: `launch` and answering ask on every call, and a harness's `--version` starts a whole
/// runtime.
pub fn version_of(
    spex_home: &Path,
    binary: &Path,
    probe: impl FnOnce(&Path) -> Option<String>,
) -> Option<String> {
    let meta = fs_err::metadata(binary).ok()?;
    let stamp = (
        meta.len(),
        meta.modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos()),
    );
    let path = spex_home.join("versions.json");
    let read = || -> Probed {
        fs_err::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    };
    let key = binary.display().to_string();
    if let Some((len, mtime, v)) = read().versions.get(&key)
        && (*len, *mtime) == stamp
    {
        return Some(v.clone());
    }
    // Probed outside the lock (it may take seconds); the file is read again under it, so two
    // processes probing two harnesses at once both keep their entry.
    let v = probe(binary)?;
    // A cache: a failed write only means the next call probes again.
    let _ = super::lock::with(&spex_home.join("versions.lock"), || {
        let mut cache = read();
        cache.versions.insert(key, (stamp.0, stamp.1, v.clone()));
        crate::fsutil::write_atomic(&path, &super::json_bytes(&cache))
    });
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(failed: Vec<Failed>) -> Result {
        Result {
            harness: "h".into(),
            binary: PathBuf::from("/opt/bin/h"),
            version: "2.0.0".into(),
            checked_at: "2026-11-27T00:00:00Z".into(),
            passed: 3,
            failed,
        }
    }

    #[test]
    fn a_result_is_kept_per_binary_and_version_and_replaced_by_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let bin = Path::new("/opt/bin/h");
        assert_eq!(verdict(dir.path(), bin, "2.0.0"), Verdict::Unchecked);
        let off = Failed {
            capability: "answer.permission".into(),
            promise: "p".into(),
            fallback: "f".into(),
        };
        save(dir.path(), result(vec![off.clone()])).unwrap();
        assert!(matches!(
            verdict(dir.path(), bin, "2.0.0"),
            Verdict::Failed(_)
        ));
        assert_eq!(verdict(dir.path(), bin, "2.0.1"), Verdict::Unchecked);
        assert_eq!(
            verdict(dir.path(), Path::new("/usr/bin/h"), "2.0.0"),
            Verdict::Unchecked
        );
        assert_eq!(
            switched_off(dir.path(), bin, "2.0.0", "answer.permission"),
            vec![off]
        );
        assert!(switched_off(dir.path(), bin, "2.0.0", "interrupt").is_empty());
        save(dir.path(), result(Vec::new())).unwrap();
        assert!(matches!(
            verdict(dir.path(), bin, "2.0.0"),
            Verdict::Passed(_)
        ));
        assert!(switched_off(dir.path(), bin, "2.0.0", "answer.permission").is_empty());
    }

    #[test]
    fn a_version_is_probed_again_only_when_the_binary_changed() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("h");
        fs_err::write(&bin, "one").unwrap();
        let probes = std::cell::Cell::new(0);
        let probe = |_: &Path| {
            probes.set(probes.get() + 1);
            Some(format!("v{}", probes.get()))
        };
        assert_eq!(version_of(dir.path(), &bin, probe).as_deref(), Some("v1"));
        assert_eq!(version_of(dir.path(), &bin, probe).as_deref(), Some("v1"));
        assert_eq!(probes.get(), 1);
        fs_err::write(&bin, "a new build").unwrap();
        assert_eq!(version_of(dir.path(), &bin, probe).as_deref(), Some("v2"));
        assert_eq!(
            version_of(dir.path(), &dir.path().join("absent"), probe),
            None
        );
    }

    /// Processes probing different harnesses at once each keep their entry: the file is
    /// rewritten under a lock from what is in it then, not from what each read before probing.
    #[test]
    fn versions_probed_at_once_are_all_kept() {
        let dir = tempfile::tempdir().unwrap();
        let bins: Vec<PathBuf> = (0..8)
            .map(|i| {
                let bin = dir.path().join(format!("h{i}"));
                fs_err::write(&bin, format!("build {i}")).unwrap();
                bin
            })
            .collect();
        let barrier = std::sync::Barrier::new(bins.len());
        std::thread::scope(|s| {
            for bin in &bins {
                let (home, barrier) = (dir.path(), &barrier);
                s.spawn(move || {
                    version_of(home, bin, |_| {
                        // Every probe is done before any writes: each read an empty cache.
                        barrier.wait();
                        Some(bin.display().to_string())
                    })
                });
            }
        });
        let never = |b: &Path| -> Option<String> { panic!("{} probed again", b.display()) };
        for bin in &bins {
            let v = version_of(dir.path(), bin, never);
            assert_eq!(v, Some(bin.display().to_string()));
        }
    }
}
