//! The host's recordings: the recorder it starts for a session (what to scrub, the manifest),
//! the screens it notes as frames, and the record events it copies in. Knows nothing of the
//! socket.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::log::log;
use crate::pty::cassette::scrub::Pattern;
use crate::pty::cassette::{self, Manifest, Recorder, Rule, Scrubber};
use crate::pty::session::Spawn;
use crate::pty::tee::{Event as TeeEvent, Tee};
use crate::pty::terminal::Terminal;
use crate::seam::Harness;
use crate::store::ProjectStore;

/// The recorder writing a cassette into `dir`, or `None` (logged) when it cannot start: a
/// recording never stands in the session's way. `pids` are the session's processes known so
/// far (the host's; the program's once it runs), scrubbed wherever they show.
pub(super) fn recorder(
    harness: &dyn Harness,
    spawn: &Spawn,
    scrub: &[String],
    dir: &std::path::Path,
    pids: &[u32],
) -> Option<Recorder> {
    let mut scrubber = scrubber(harness, spawn, scrub);
    for &pid in pids {
        scrubber.add_pid(pid);
    }
    let argv: Vec<String> = spawn
        .argv
        .iter()
        .map(|a| scrubber.scrub_str(&a.to_string_lossy()))
        .collect();
    let args: Vec<String> = argv.iter().skip(1).cloned().collect();
    let binary = spawn.argv.first().map(PathBuf::from).unwrap_or_default();
    // What the binary says it is (its `--version`), beside the version spex was verified with.
    let version =
        crate::env::version_output(&binary).and_then(|o| (harness.identity().parse_version)(&o));
    let fingerprint = fs_err::metadata(&binary).ok().map(|m| {
        use std::os::unix::fs::MetadataExt;
        format!("size {} mtime {}", m.len(), m.mtime())
    });
    let env: serde_json::Map<String, serde_json::Value> = crate::env::Env::recorded_environment()
        .into_iter()
        .map(|(k, v)| (k, v.map(|v| scrubber.scrub_str(&v)).into()))
        .collect();
    let environment = |name: &str| env.get(name).and_then(|v| v.as_str().map(str::to_owned));
    let resolution_ms = 100;
    let manifest = Manifest {
        version: cassette::VERSION,
        id: crate::runtime::start::new_id().unwrap_or_default(),
        content_digest: None,
        harness: serde_json::json!({"id": harness.id(), "binary": scrubber.scrub_str(&binary.to_string_lossy()), "fingerprint": fingerprint, "version": version, "pinned_version": harness.identity().version}),
        command: serde_json::json!({"argv": argv, "cwd": "$TREE", "env": env}),
        terminal: serde_json::json!({"rows": spawn.size.rows, "cols": spawn.size.cols,
            "term": environment("TERM"), "locale": environment("LANG"),
            "model": cassette::format::EMULATOR, "model_version": cassette::format::EMULATOR_VERSION}),
        timing: serde_json::json!({"resolution_ms": resolution_ms}),
        provenance: serde_json::json!({"spex_version": env!("CARGO_PKG_VERSION"),
            "os": std::env::consts::OS, "arch": std::env::consts::ARCH,
            "recorded_on": crate::store::now_rfc3339().get(..10)}),
        capture: "full".into(),
        capture_reason: None,
        clock: Some(
            serde_json::json!({"source": "monotonic", "resolution_ms": resolution_ms,
            "zero": "first record", "wall_time": "scrubbed"}),
        ),
        replay_default: Some("real-time".into()),
        permission_mode: harness.terminal().and_then(|t| t.permission_mode(&args)),
        project: project_state(&spawn.cwd),
    };
    for (field, why) in KEPT {
        scrubber.keep(field, why);
    }
    match Recorder::create(dir, manifest, scrubber) {
        Ok(r) => Some(r),
        Err(e) => {
            log!("error: not recording: {e}");
            None
        }
    }
}

/// The volatile fields a cassette keeps on purpose, and why (listed in `scrub-report.json`).
const KEPT: &[(&str, &str)] = &[
    (
        "manifest.id",
        "the cassette's own id: assertion specs are bound to it",
    ),
    (
        "manifest.content_digest",
        "the digest of output.raw: assertion specs are bound to it",
    ),
    (
        "manifest.provenance.recorded_on",
        "the day of the recording (no time of day)",
    ),
    (
        "manifest.harness.fingerprint",
        "the binary's size and modification time: tells harness builds apart",
    ),
    (
        "manifest.project.commit",
        "the commit the checkout was at: what the session worked on",
    ),
    (
        "*.t_ms, final.json duration_ms",
        "times from the recording's start, quantized: replay and timing assertions read them",
    ),
    ("final.json exit", "the program's exit code or signal"),
    (
        "final.json usage",
        "token counts the harness reported: assertions on a turn's cost read them",
    ),
];

/// The scrubber of a recording of `spawn`: the tree, home and store paths, secret values and
/// the configuration's texts (literal), the adapter's rules, then the standard patterns.
fn scrubber(harness: &dyn Harness, spawn: &Spawn, scrub: &[String]) -> Scrubber {
    let env = crate::env::Env::from_process(crate::adapters::env_vars());
    let rule = |name: &str, find: &std::path::Path, replace: &str| Rule {
        name: name.to_owned(),
        find: find.to_string_lossy().into_owned(),
        replace: replace.to_owned(),
    };
    let mut rules = vec![rule("tree path", &spawn.cwd, "$TREE")];
    if let Some(home) = &env.home {
        rules.push(rule("home path", home, "$HOME"));
    }
    rules.push(rule("spex store", &env.spex_home(), "$SPEX_HOME"));
    // Where the programs live on this machine: the harness names its binary (argv, the
    // manifest) and prints the hook commands it runs, which start with spex's own path.
    if let Some(binary) = spawn
        .argv
        .first()
        .filter(|b| b.to_string_lossy().contains('/'))
    {
        rules.push(rule(
            "harness binary",
            std::path::Path::new(binary),
            "$HARNESS_BIN",
        ));
    }
    if let Ok(exe) = std::env::current_exe() {
        rules.push(rule("spex binary", &exe, "$SPEX"));
    }
    for (name, value) in crate::env::Env::secret_values() {
        rules.push(Rule {
            name: format!("${name}"),
            find: value,
            replace: format!("${name}"),
        });
    }
    for (i, text) in scrub.iter().enumerate() {
        rules.push(Rule {
            name: format!("config scrub[{i}]"),
            find: text.clone(),
            replace: "<scrubbed>".into(),
        });
    }
    let mut patterns: Vec<Pattern> = harness
        .terminal()
        .map(|t| t.scrub_rules(&spawn.cwd))
        .unwrap_or_default()
        .into_iter()
        .map(|r| Pattern {
            name: r.name,
            regex: r.regex,
            replace: r.replace,
            numbered: r.numbered,
            guard: cassette::scrub::Guard::None,
        })
        .collect();
    patterns.extend(cassette::scrub::standard_patterns());
    Scrubber::with_patterns(rules, patterns)
}

/// The checkout's commit and whether it has changes, when it is a git checkout.
fn project_state(tree: &std::path::Path) -> Option<serde_json::Value> {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(tree)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "--verify", "-q", "HEAD"])?;
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).map(|s| !s.is_empty());
    Some(serde_json::json!({"commit": commit, "dirty": dirty}))
}

/// Notes, for the recording's `final.json`, what the session's record says now: its status,
/// its last turn (id, state) and the model usage of that turn and of the session.
pub(super) fn note_final(tee: &Tee, store: &ProjectStore, id: &str) {
    if !tee.has_sinks() {
        return;
    }
    let Some(s) = store.load(id).ok().flatten() else {
        return;
    };
    let turn = s
        .turn
        .as_ref()
        .map(|t| serde_json::json!({"id": t.id, "state": t.state.as_str(), "usage": t.usage}));
    tee.record(TeeEvent::Mark {
        stream: "final".into(),
        data: serde_json::json!({"status": s.status.as_str(), "turn": turn, "usage": s.usage}),
    });
}

/// Copies the session's new record events into the recording as they are appended (inotify on
/// the session folder), so they are numbered in the order they happened, each followed by a
/// frame: the screen when the event was seen. An event is copied once the record written with
/// it is saved (the store appends the events first); the last one copied carries the state the
/// record reached (`record`: status and turn state), so a replay reads spex's own state
/// instead of deriving it from the event kinds.
pub(super) fn follow_events(store: &ProjectStore, id: &str, frames: Arc<Frames>) {
    let dir = store.session_dir(id);
    let store = store.clone();
    let id = id.to_owned();
    let _ = std::thread::Builder::new()
        .name("host-events".into())
        .spawn(move || {
            let mut seen = store.events(&id, None).map_or(0, |e| e.len());
            let forever = std::time::Instant::now() + Duration::from_secs(u64::from(u32::MAX));
            let _ = crate::runtime::wait::wait_for(&dir, forever, || -> Option<()> {
                let (record, events) = store.committed(&id).ok()?;
                let done = events.len();
                for (i, e) in events.iter().enumerate().skip(seen) {
                    if !frames.tee.has_sinks() {
                        break;
                    }
                    let mut data = serde_json::to_value(e).unwrap_or_default();
                    if let Some(r) = record.as_ref().filter(|r| i + 1 == done && r.seq == e.seq) {
                        data["record"] = serde_json::json!({
                            "status": r.status.as_str(),
                            "turn": r.turn.as_ref().map(|t| t.state.as_str()),
                        });
                    }
                    frames.tee.record(TeeEvent::Mark {
                        stream: "service".into(),
                        data,
                    });
                    frames.note(&e.kind, false);
                }
                seen = seen.max(done);
                None
            });
        });
}

/// Notes the screen in a recording as a frame, remembering the text of the last one.
pub(super) struct Frames {
    pub(super) tee: Tee,
    pub(super) term: Arc<Mutex<Terminal>>,
    /// The lines of the last frame noted in the current recording.
    pub(super) last: Mutex<Option<Vec<String>>>,
}

impl Frames {
    /// Notes the screen with `reason` while recording; with `if_changed`, only when its text
    /// differs from the last frame's.
    pub(super) fn note(&self, reason: &str, if_changed: bool) {
        if !self.tee.has_sinks() {
            return;
        }
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let snapshot = self
            .term
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .snapshot();
        if if_changed && last.as_ref() == Some(&snapshot.lines) {
            return;
        }
        *last = Some(snapshot.lines.clone());
        self.tee.record(TeeEvent::Mark {
            stream: "frames".into(),
            data: serde_json::json!({ "reason": reason, "screen": snapshot }),
        });
    }
}

#[cfg(test)]
mod tests {
    /// The committed cassettes keep no id, time or process id but what `KEPT` lists: scrubbed
    /// again by the standard rules (with `SPEX_UPDATE_CASSETTES=1` this rewrites them in
    /// place: their digests change, their ids stay), no UUID, RFC3339 time or clock time is
    /// left in any file but the manifest's own id, and each still checks clean.
    #[test]
    fn the_committed_cassettes_keep_no_id_or_time() {
        use crate::pty::cassette::scrub::standard_patterns;
        use crate::pty::cassette::{Cassette, Scrubber, rescrub::rescrub};
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cassettes");
        let update = std::env::var_os("SPEX_UPDATE_CASSETTES").is_some();
        let volatile = regex::Regex::new(
            r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}|\b\d{1,2}:\d{2}:\d{2}\b",
        )
        .unwrap();
        for entry in fs_err::read_dir(&root).unwrap() {
            let dir = entry.unwrap().path();
            if !dir.join("manifest.json").is_file() {
                continue;
            }
            if update {
                let mut scrubber = Scrubber::with_patterns(Vec::new(), standard_patterns());
                for (field, why) in super::KEPT {
                    scrubber.keep(field, why);
                }
                rescrub(&dir, scrubber).unwrap();
            }
            let c = Cassette::open(&dir).unwrap();
            assert_eq!(c.problems(), Vec::<String>::new(), "{}", dir.display());
            for e in fs_err::read_dir(&dir).unwrap() {
                let path = e.unwrap().path();
                let mut text = String::from_utf8_lossy(&fs_err::read(&path).unwrap()).into_owned();
                text = text.replace(&c.manifest.id, "");
                let found: Vec<&str> = volatile.find_iter(&text).map(|m| m.as_str()).collect();
                assert!(
                    found.is_empty(),
                    "{} keeps {found:?} (SPEX_UPDATE_CASSETTES=1 scrubs it again)",
                    path.display()
                );
            }
        }
    }

    use std::sync::{Arc, Mutex};

    use super::Frames;
    use crate::pty::tee::{Event as TeeEvent, Memory, Tee};
    use crate::pty::terminal::Terminal;

    #[test]
    fn a_quiet_frame_of_an_unchanged_screen_is_not_written() {
        let tee = Tee::new();
        let memory = Memory::default();
        tee.add_sink(Box::new(memory.clone()));
        let term = Arc::new(Mutex::new(Terminal::new(4, 20)));
        let frames = Frames {
            tee: tee.clone(),
            term: Arc::clone(&term),
            last: Mutex::new(None),
        };
        let reasons = || -> Vec<String> {
            memory
                .observations()
                .iter()
                .filter_map(|o| match &o.event {
                    TeeEvent::Mark { data, .. } => data["reason"].as_str().map(str::to_owned),
                    _ => None,
                })
                .collect()
        };
        term.lock().unwrap().feed(b"hello");
        frames.note("turn.started", false);
        // The same text, redrawn (the cursor moved): nothing new to note.
        term.lock().unwrap().feed(b"\rhello\x1b[H");
        frames.note("quiet", true);
        assert_eq!(reasons(), ["turn.started"]);
        term.lock().unwrap().feed(b"\r\nworld");
        frames.note("quiet", true);
        frames.note("quiet", true);
        // A frame of any other reason is written even when nothing changed.
        frames.note("end", false);
        assert_eq!(reasons(), ["turn.started", "quiet", "end"]);
    }
}
