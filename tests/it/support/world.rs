//! A hermetic world for running the real `spex` binary: temp `HOME`, `CODEX_HOME`, `SPEX_HOME` and
//! XDG dirs, git repositories with linked worktrees, and snapshots of every file spex may touch.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use serde_json::Value;

pub struct World {
    pub dir: tempfile::TempDir,
    pub home: PathBuf,
    pub codex_home: PathBuf,
    pub spex_home: PathBuf,
    pub xdg_config: PathBuf,
    pub repo: PathBuf,
    /// Whether dropping the world checks the event-log grammar of every session in its store.
    grammar: std::cell::Cell<bool>,
}

pub fn spex_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_spex"))
}

pub fn git(cwd: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(cwd)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn write(path: &Path, bytes: impl AsRef<[u8]>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// Writes `text` to `path` as an executable file.
pub fn executable(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    write(path, text);
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The file's text, or `""` when it is missing or unreadable (for diagnostics and polling).
pub fn read_or_empty(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The strings of the JSON array `lines`, one per line (a snapshot's screen).
pub fn screen_text(lines: &Value) -> String {
    lines
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// The object `base` with the fields of the object `extra` added (or replaced).
pub fn merged(base: &Value, extra: &Value) -> Value {
    let mut v = base.clone();
    v.as_object_mut()
        .expect("base is an object")
        .extend(extra.as_object().expect("extra is an object").clone());
    v
}

/// Spawns `cmd` with every stdio stream piped.
pub fn spawn_piped(cmd: &mut Command) -> Child {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", Path::new(cmd.get_program()).display()))
}

/// Feeds `input` to a child spawned by [`spawn_piped`] (from a thread, so a child that stops
/// reading early cannot deadlock the test) and collects its output.
pub fn finish(mut child: Child, input: Vec<u8>) -> Output {
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let writer = std::thread::spawn(move || {
        // A child that stops reading (payload cap) closes the pipe: EPIPE is expected.
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().expect("child runs");
    writer.join().expect("writer thread");
    out
}

/// Runs `cmd` with `input` on stdin; its output.
pub fn feed(cmd: &mut Command, input: &[u8]) -> Output {
    finish(spawn_piped(cmd), input.to_vec())
}

/// The stdout of `spex args` (which printed `out`) as JSON; or, unless it exited 0 and printed
/// JSON, a message with its status and everything it printed.
pub fn json_result(args: &[&str], out: &Output) -> Result<Value, String> {
    let text = format!(
        "spex {args:?}: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        return Err(text);
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("{e}\n{text}"))
}

impl World {
    /// A world with an empty git repository at `<tmp>/repo`.
    pub fn new() -> World {
        // Short base path: sockets live under it in some tests.
        let dir = tempfile::Builder::new()
            .prefix("spx")
            .tempdir_in("/tmp")
            .unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let w = World {
            home: base.join("home"),
            codex_home: base.join("codex"),
            spex_home: base.join("store"),
            xdg_config: base.join("xdg"),
            repo: base.join("repo"),
            dir,
            grammar: std::cell::Cell::new(true),
        };
        std::fs::create_dir_all(&w.home).unwrap();
        std::fs::create_dir_all(&w.repo).unwrap();
        git(&w.repo, &["init", "-q", "-b", "main"]);
        w
    }

    /// Commits everything and adds a linked worktree `<tmp>/<name>` on a new branch.
    pub fn add_worktree(&self, name: &str) -> PathBuf {
        git(&self.repo, &["add", "-A"]);
        git(&self.repo, &["commit", "-q", "--allow-empty", "-m", "base"]);
        let path = self.dir.path().join(name);
        git(
            &self.repo,
            &["worktree", "add", "-q", "-b", name, path.to_str().unwrap()],
        );
        std::fs::canonicalize(path).unwrap()
    }

    pub fn cmd(&self, cwd: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(spex_bin());
        c.args(args)
            .current_dir(cwd)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("CODEX_HOME", &self.codex_home)
            .env("SPEX_HOME", &self.spex_home)
            .env("XDG_CONFIG_HOME", &self.xdg_config)
            .stdin(Stdio::null());
        c
    }

    pub fn spex(&self, cwd: &Path, args: &[&str]) -> Output {
        self.cmd(cwd, args).output().expect("spex runs")
    }

    /// Runs spex and asserts exit code 0.
    pub fn ok(&self, cwd: &Path, args: &[&str]) -> String {
        let out = self.spex(cwd, args);
        assert!(
            out.status.success(),
            "spex {args:?} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `spex dispatch <harness> <event>` in `cwd` with `payload` on stdin, as a harness's hook
    /// runs it.
    pub fn dispatch(&self, cwd: &Path, harness: &str, event: &str, payload: &Value) -> Output {
        feed(
            &mut self.cmd(cwd, &["dispatch", harness, event]),
            payload.to_string().as_bytes(),
        )
    }

    /// [`World::dispatch`], or `None` (the process killed) when it has not answered within
    /// `limit`: a hung hook fails its test instead of hanging it.
    pub fn dispatch_within(
        &self,
        cwd: &Path,
        harness: &str,
        event: &str,
        payload: &Value,
        limit: Duration,
    ) -> Option<Output> {
        let child = spawn_piped(&mut self.cmd(cwd, &["dispatch", harness, event]));
        let pid = child.id().to_string();
        let input = payload.to_string().into_bytes();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || tx.send(finish(child, input)));
        let out = rx.recv_timeout(limit).ok();
        if out.is_none() {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
        }
        out
    }

    // -----------------------------------------------------------------------------------------
    // Reading the store (`$SPEX_HOME`)

    /// The one project folder in the store: `$SPEX_HOME/projects/<name>-<hash>`.
    pub fn project_dir(&self) -> PathBuf {
        let projects = self.spex_home.join("projects");
        // Every entry counts: spex keeps nothing but project folders there.
        let dirs: Vec<PathBuf> = std::fs::read_dir(&projects)
            .map(|rd| rd.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        assert_eq!(
            dirs.len(),
            1,
            "expected one project store in {}: {dirs:?}",
            projects.display()
        );
        dirs.into_iter().next().expect("one project")
    }

    /// Session ids with a folder in the project's store, sorted (empty before there is a store).
    pub fn session_ids(&self) -> Vec<String> {
        if !self.spex_home.join("projects").exists() {
            return Vec::new();
        }
        let mut ids: Vec<String> = std::fs::read_dir(self.project_dir().join("sessions"))
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        ids.sort();
        ids
    }

    pub fn session_dir(&self, id: &str) -> PathBuf {
        self.project_dir().join("sessions").join(id)
    }

    /// `session.json` of `id`, or `None` while there is none; panics when it is not JSON.
    pub fn record_if_any(&self, id: &str) -> Option<Value> {
        let path = self.session_dir(id).join("session.json");
        let text = std::fs::read_to_string(&path).ok()?;
        Some(
            serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{} is not JSON ({e}):\n{text}", path.display())),
        )
    }

    /// `session.json` of `id`, which must exist.
    pub fn record(&self, id: &str) -> Value {
        self.record_if_any(id)
            .unwrap_or_else(|| panic!("no session.json for {id}: {:?}", self.session_ids()))
    }

    /// `events.jsonl` of `id`, line by line (empty while there is none; every line must parse).
    pub fn events(&self, id: &str) -> Vec<Value> {
        let path = self.session_dir(id).join("events.jsonl");
        read_or_empty(&path)
            .lines()
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("{}: bad line ({e}): {l}", path.display()))
            })
            .collect()
    }

    /// The spex id `aliases/<harness>-<harness id>` names.
    pub fn alias(&self, harness: &str, harness_id: &str) -> Option<String> {
        let path = self
            .project_dir()
            .join("aliases")
            .join(format!("{harness}-{harness_id}"));
        let text = std::fs::read_to_string(path).ok()?;
        Some(text.trim().to_owned())
    }

    /// `$SPEX_HOME/dispatch-errors.log` (empty when there is none).
    pub fn errors_log(&self) -> String {
        read_or_empty(&self.spex_home.join("dispatch-errors.log"))
    }

    /// Every file and folder spex may touch, with bytes and mtime: the trees (without `.git`),
    /// the git files spex edits, `HOME` and `CODEX_HOME`.
    pub fn snapshot(&self, extra_roots: &[&Path]) -> Snapshot {
        let mut entries = BTreeMap::new();
        let mut roots: Vec<&Path> = vec![&self.repo, &self.home, &self.codex_home];
        roots.extend_from_slice(extra_roots);
        for root in roots {
            for e in walkdir::WalkDir::new(root)
                .into_iter()
                .filter_entry(|e| e.file_name() != ".git")
                .filter_map(Result::ok)
            {
                let meta = e.metadata().unwrap();
                let bytes = if meta.is_file() {
                    Some(std::fs::read(e.path()).unwrap())
                } else {
                    None
                };
                entries.insert(e.path().to_owned(), (bytes, meta.modified().ok()));
            }
        }
        // The git files spex edits: the shared exclude and config, and each checkout's own
        // config and exclude file (a worktree's while they exist: a new one shows as new).
        let git = self.repo.join(".git");
        let mut files: Vec<PathBuf> = ["info/exclude", "config", "config.worktree", "spex-exclude"]
            .iter()
            .map(|f| git.join(f))
            .collect();
        for wt in std::fs::read_dir(git.join("worktrees"))
            .into_iter()
            .flatten()
        {
            let dir = wt.unwrap().path();
            files.extend(
                ["config.worktree", "spex-exclude"]
                    .map(|f| dir.join(f))
                    .into_iter()
                    .filter(|f| f.exists()),
            );
        }
        for file in files {
            let meta = std::fs::metadata(&file).ok();
            entries.insert(
                file.clone(),
                (
                    std::fs::read(&file).ok(),
                    meta.and_then(|m| m.modified().ok()),
                ),
            );
        }
        Snapshot { entries }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub entries: BTreeMap<PathBuf, (Option<Vec<u8>>, Option<SystemTime>)>,
}

impl Snapshot {
    /// Differences in content (and existence), ignoring mtimes.
    pub fn content_diff(&self, other: &Snapshot) -> Vec<String> {
        let mut out = Vec::new();
        for (p, (b, _)) in &self.entries {
            match other.entries.get(p) {
                None => out.push(format!("gone: {}", p.display())),
                Some((b2, _)) if b2 != b => out.push(format!(
                    "changed: {}\n--- before\n{}\n--- after\n{}",
                    p.display(),
                    String::from_utf8_lossy(b.as_deref().unwrap_or_default()),
                    String::from_utf8_lossy(b2.as_deref().unwrap_or_default())
                )),
                _ => {}
            }
        }
        for p in other.entries.keys() {
            if !self.entries.contains_key(p) {
                out.push(format!("new: {}", p.display()));
            }
        }
        out
    }
}

/// The event log's grammar: `seq` contiguous; every `turn.started` has exactly one ending
/// event (`turn.completed|failed|interrupted|timed_out`) before the next `turn.started`, or the
/// exit closes it (an ending event right before `session.exited`), and a turn still open at
/// the end of the log is the record's running turn; attention is opened (`attention.opened`)
/// and closed (`attention.closed`) in pairs, and the
/// record holds attention exactly when the last one was a raise; once `session.exited`, nothing
/// that only a live session does (a start, a turn, a tool call, a question) comes before a
/// `session.resumed`, and the record is exited (with its `exit_reason`) exactly when the log's
/// last lifecycle word is `session.exited`. Every sub-agent started (`subagent.started`) ends
/// once (`subagent.completed|failed|interrupted|timed_out`), none ends that did not start, its
/// own tool calls (`agent_id`) end before it does, a turn does not complete while a sub-agent
/// it started runs, and none runs once the session exited. A `turn.amended` only completes a
/// failure (`failed` -> `partial_failed`): no ending is taken back.
///
/// A log whose head rotated out (its first `seq` is above 1) counts contiguity from its first
/// `seq`; whether a turn was open or attention raised before it is unknown, so until the log
/// first starts a turn (raises attention) it may end one (clear it) once, and while it never
/// says, the record's turn (attention) is not compared with it.
/// The ending events of a session's turns, in order (a stall is no ending).
pub fn turn_endings(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .filter(|k| {
            k.starts_with("turn.")
                && ![
                    "turn.started",
                    "turn.steered",
                    "turn.stalled",
                    "turn.resumed",
                ]
                .contains(k)
        })
        .map(str::to_owned)
        .collect()
}

pub fn assert_grammar(rec: &Value, events: &[Value], diag: &dyn Fn() -> String) {
    let first = events.first().and_then(|e| e["seq"].as_u64()).unwrap_or(1);
    let rotated = first > 1;
    // `None`: unknown (before the first word about it in a rotated log).
    let mut open_turn = (!rotated).then_some(false);
    let mut attention = (!rotated).then_some(false);
    // Whether the session has exited (and not been resumed since).
    let mut exited = (!rotated).then_some(false);
    // Tool calls started in the open turn and not yet ended.
    let mut open_calls: Vec<String> = Vec::new();
    // Sub-agents started and not ended: (agent id, its turn, its open tool calls).
    let mut children: Vec<(String, Value, Vec<String>)> = Vec::new();
    let mut ended_children: Vec<String> = Vec::new();
    let mut turn_id = Value::Null;
    // The open turn is marked stalled (`turn.stalled`, until `turn.resumed` or its ending).
    let mut stalled = false;
    for (i, e) in events.iter().enumerate() {
        assert_eq!(
            e["seq"].as_u64(),
            Some(first + i as u64),
            "seq gap at {e}\n{}",
            diag()
        );
        let kind = e["kind"].as_str().unwrap_or_default();
        // Every tool call started in a turn ends before the turn's ending event: its own
        // `tool.completed`, or `tool.interrupted` written by the ending.
        let call = || {
            e["call_id"]
                .as_str()
                .or_else(|| e["tool"].as_str())
                .unwrap_or_default()
                .to_owned()
        };
        let agent = e["agent_id"].as_str().unwrap_or_default().to_owned();
        let child = children
            .iter_mut()
            .find(|c| !agent.is_empty() && c.0 == agent);
        match (kind, child) {
            ("tool.started", Some(c)) => c.2.push(call()),
            ("tool.completed" | "tool.interrupted", Some(c)) => c.2.retain(|o| *o != call()),
            ("subagent.started", Some(_)) => {
                panic!("{agent} started twice: {e}\n{}", diag())
            }
            ("subagent.started", None) => {
                assert!(
                    !ended_children.contains(&agent),
                    "{agent} started again after it ended: {e}\n{}",
                    diag()
                );
                children.push((agent.clone(), e["turn_id"].clone(), Vec::new()));
            }
            (k, c) if k.starts_with("subagent.") => {
                match c {
                    Some(c) => assert!(
                        c.2.is_empty(),
                        "{k} leaves its tool calls {:?} with no ending: {e}\n{}",
                        c.2,
                        diag()
                    ),
                    None => assert!(
                        rotated,
                        "{k} of a sub-agent that is not running: {e}\n{}",
                        diag()
                    ),
                }
                children.retain(|c| c.0 != agent);
                ended_children.push(agent.clone());
            }
            _ => {}
        }
        match kind {
            "tool.started" if open_turn == Some(true) && agent.is_empty() => {
                open_calls.push(call());
            }
            "tool.completed" | "tool.interrupted" => {
                let c = call();
                if let Some(i) = open_calls.iter().position(|o| *o == c) {
                    open_calls.remove(i);
                }
            }
            _ => {}
        }
        match kind {
            "turn.started" => {
                assert!(
                    open_turn != Some(true),
                    "turn.started while a turn is open: {e}\n{}",
                    diag()
                );
                open_turn = Some(true);
                turn_id = e["turn_id"].clone();
                stalled = false;
            }
            // A stall is no ending: marked once in an open turn, then resumed or ended.
            "turn.stalled" => {
                assert!(
                    open_turn != Some(false) && !stalled,
                    "turn.stalled outside an open turn, or twice: {e}\n{}",
                    diag()
                );
                stalled = true;
            }
            "turn.resumed" => {
                assert!(
                    open_turn != Some(false) && (stalled || open_turn.is_none()),
                    "turn.resumed with no stall before it: {e}\n{}",
                    diag()
                );
                stalled = false;
            }
            // An ending is never taken back: a later correction completes a failure's detail
            // (`failed` -> `partial_failed`) and never changes what the turn came to, so a
            // waiter that took the ending is never contradicted.
            "turn.amended" => {
                assert!(
                    e["was"] == "failed" && e["state"] == "partial_failed",
                    "turn.amended changes the turn's outcome: {e}\n{}",
                    diag()
                );
            }
            "turn.completed"
            | "turn.partial_failed"
            | "turn.failed"
            | "turn.interrupted"
            | "turn.timed_out" => {
                assert!(
                    open_turn != Some(false),
                    "{kind} with no open turn: {e}\n{}",
                    diag()
                );
                assert!(
                    open_calls.is_empty(),
                    "{kind} leaves tool calls {open_calls:?} with no ending: {e}\n{}",
                    diag()
                );
                let mine: Vec<&String> = children
                    .iter()
                    .filter(|c| c.1 == turn_id)
                    .map(|c| &c.0)
                    .collect();
                // Only a new prompt ends a turn that waits on its sub-agents (they work on).
                assert!(
                    mine.is_empty()
                        || kind == "turn.completed" && e["source"] == "UserPromptSubmit",
                    "{kind} while its sub-agents {mine:?} run: {e}\n{}",
                    diag()
                );
                open_turn = Some(false);
                stalled = false;
            }
            "session.exited" => {
                assert!(
                    open_turn != Some(true),
                    "session.exited with a turn still open: {e}\n{}",
                    diag()
                );
                assert!(
                    children.is_empty(),
                    "session.exited with sub-agents running: {children:?}\n{}",
                    diag()
                );
                exited = Some(true);
            }
            "session.resumed" => exited = Some(false),
            _ => {}
        }
        // After an exit, only a resume brings the session back: no hook moves an exited one.
        let live_only = [
            "session.started",
            "turn.started",
            "turn.steered",
            "turn.stalled",
            "turn.resumed",
            "tool.started",
            "tool.completed",
            "input.required",
            "attention.opened",
            "model.failed",
            "declared",
        ];
        assert!(
            !(exited == Some(true) && live_only.contains(&kind)),
            "{kind} after session.exited with no session.resumed: {e}\n{}",
            diag()
        );
        let raises = kind == "attention.opened";
        if raises {
            assert!(
                attention != Some(true),
                "{kind} raises attention already raised: {e}\n{}",
                diag()
            );
            attention = Some(true);
        }
        if kind == "attention.closed" {
            assert!(
                attention != Some(false),
                "attention.closed with none raised: {e}\n{}",
                diag()
            );
            attention = Some(false);
        }
    }
    if let Some(open_turn) = open_turn {
        assert_eq!(
            open_turn,
            rec["turn"]["state"] == "running",
            "an open turn in the log is the record's running turn\n{}",
            diag()
        );
    }
    if let Some(exited) = exited {
        assert_eq!(
            exited,
            rec["status"] == "exited",
            "the record is exited exactly when the log's last lifecycle word is session.exited\n{}",
            diag()
        );
    }
    assert_eq!(
        rec["status"] == "exited",
        !rec["exit_reason"].is_null(),
        "an exit reason exactly on an exited record\n{}",
        diag()
    );
    if let Some(attention) = attention {
        assert_eq!(
            attention,
            !rec["attention"].is_null(),
            "the record holds attention exactly when the log's last word raised it\n{}",
            diag()
        );
    }
}

impl World {
    /// Drops the grammar check for a world whose store a test breaks on purpose.
    pub fn skip_grammar(&self) {
        self.grammar.set(false);
    }

    /// Every session folder of every project in the store.
    pub fn all_session_dirs(&self) -> Vec<PathBuf> {
        let list = |dir: &Path| -> Vec<PathBuf> {
            std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
                .map(|e| e.path())
                .collect()
        };
        let mut dirs: Vec<PathBuf> = list(&self.spex_home.join("projects"))
            .iter()
            .flat_map(|p| list(&p.join("sessions")))
            .collect();
        dirs.sort();
        dirs
    }
}

impl World {
    /// [`assert_grammar`] over every session in the world's store, with `diag` in a failure.
    pub fn assert_grammar(&self, diag: &dyn Fn() -> String) {
        for dir in self.all_session_dirs() {
            let record = dir.join("session.json");
            let rec: Value = serde_json::from_str(&read(&record))
                .unwrap_or_else(|e| panic!("{}: {e}", record.display()));
            let log = dir.join("events.jsonl");
            // The store keeps the segment before the current one in `events.jsonl.1`.
            let text = read_or_empty(&dir.join("events.jsonl.1")) + &read_or_empty(&log);
            let events: Vec<Value> = text
                .lines()
                .map(|l| {
                    serde_json::from_str(l)
                        .unwrap_or_else(|e| panic!("{}: bad line ({e}): {l}", log.display()))
                })
                .collect();
            assert_grammar(&rec, &events, &|| {
                format!("{}\n{text}\n{}", pretty(&rec), diag())
            });
        }
    }
}

/// Every session a test leaves in its world's store keeps the event-log grammar
/// ([`assert_grammar`]), unless the test failed already or broke the store on purpose.
impl Drop for World {
    fn drop(&mut self) {
        if !std::thread::panicking() && self.grammar.get() {
            self.assert_grammar(&String::new);
        }
    }
}

/// Waits until the record of `id` has `status`, and returns it; fails the test on timeout,
/// naming the status, the wait and the record, events and dispatch errors it last saw.
pub fn wait_status(w: &World, id: &str, status: &str, timeout: Duration) -> Value {
    status_within(w, id, status, timeout).unwrap_or_else(|last| {
        let dir = w.session_dir(id);
        panic!(
            "session {id} not `{status}` within {timeout:?}; its record:\n{}\nevents:\n{}\n\
             host.log:\n{}\ndispatch errors:\n{}",
            pretty(&last),
            read_or_empty(&dir.join("events.jsonl")),
            read_or_empty(&dir.join("host.log")),
            w.errors_log()
        )
    })
}

/// The record of `id` once it has `status` within `timeout`, or the last record seen: for a
/// caller that tries again when the status does not come (a key a person would press twice).
pub fn status_within(w: &World, id: &str, status: &str, timeout: Duration) -> Result<Value, Value> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let r = w.record(id);
        if r["status"] == status {
            return Ok(r);
        }
        if std::time::Instant::now() >= deadline {
            return Err(r);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
