//! What the benchmarks of spex's readers share (`board`, `notify`, `sessions`): hooks
//! dispatched through the real `spex dispatch` as a harness fires them, fake live Claude sessions
//! (a `sleep` standing in for Claude, with its registry file), a git repository to work in (the
//! Claude rig's too), and percentiles (`remote`'s too).

#![allow(dead_code, reason = "each benchmark uses a different part")]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

/// `spex dispatch <harness> <event>` with `payload` on stdin, as the harness's hook runs it.
pub fn dispatch(
    spex: &Path,
    env: &[(&str, &Path)],
    repo: &Path,
    harness: &str,
    event: &str,
    payload: &Value,
) {
    let mut child = Command::new(spex)
        .args(["dispatch", harness, event])
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .current_dir(repo)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn spex");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(payload.to_string().as_bytes())
        .expect("write payload");
    assert!(child.wait().expect("wait").success(), "{harness} {event}");
}

/// `base` (a hook payload's common fields) as the `UserPromptSubmit` of prompt `i`.
pub fn prompt(base: &Value, i: usize) -> Value {
    let mut ups = base.clone();
    ups["prompt"] = format!("prompt {i}").into();
    ups["prompt_id"] = format!("p-{i}").into();
    ups
}

/// Where fake live Claude sessions are made: spex and its env, the repo, and `~/.claude`.
pub struct ClaudeEnv<'a> {
    pub spex: &'a Path,
    pub env: &'a [(&'a str, &'a Path)],
    pub repo: &'a Path,
    pub config: &'a Path,
}

impl ClaudeEnv<'_> {
    /// A `sleep` process standing in for Claude session `sid`, its `SessionStart` dispatched:
    /// the process (for the caller to kill) and the hooks' common fields.
    pub fn start(&self, sid: &str) -> (Child, Value) {
        let child = Command::new("sleep")
            .arg("3600")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn sleep");
        let transcript = self.config.join(format!("projects/-repo/{sid}.jsonl"));
        let base = json!({"session_id": sid, "cwd": self.repo, "transcript_path": transcript});
        dispatch(
            self.spex,
            self.env,
            self.repo,
            "claude",
            "SessionStart",
            &base,
        );
        (child, base)
    }

    /// Claude's registry file `sessions/<pid>.json` for session `sid` run by process `pid`.
    pub fn register(&self, pid: u32, sid: &str, idle: bool) {
        let now_ms = SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis();
        let reg = json!({"pid": pid, "sessionId": sid, "cwd": self.repo,
            "procStart": proc_start(pid), "kind": "interactive",
            "status": if idle { "idle" } else { "busy" },
            "updatedAt": now_ms, "statusUpdatedAt": now_ms});
        std::fs::write(
            self.config.join(format!("sessions/{pid}.json")),
            reg.to_string(),
        )
        .unwrap();
    }

    /// A fake live Claude session `sid` ([`ClaudeEnv::start`]), prompt `i` submitted (and its
    /// turn stopped when `idle`), and registered. Returns the process, for the caller to kill.
    pub fn live_session(&self, sid: &str, i: usize, idle: bool) -> Child {
        let (child, base) = self.start(sid);
        let (spex, env, repo) = (self.spex, self.env, self.repo);
        dispatch(
            spex,
            env,
            repo,
            "claude",
            "UserPromptSubmit",
            &prompt(&base, i),
        );
        if idle {
            dispatch(spex, env, repo, "claude", "Stop", &base);
        }
        self.register(child.id(), sid, idle);
        child
    }
}

/// Field 22 of `/proc/<pid>/stat`: what Claude writes as `procStart`.
pub fn proc_start(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("proc stat");
    let rest = &stat[stat.rfind(')').expect("comm") + 1..];
    rest.split_whitespace()
        .nth(19)
        .expect("field 22")
        .to_owned()
}

/// A git repository at `dir/repo`.
pub fn repo_in(dir: &Path) -> PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    assert!(
        Command::new("git")
            .args(["init", "-q"])
            .current_dir(&repo)
            .status()
            .unwrap()
            .success()
    );
    repo
}

/// The `per_mille`th of `sorted` (500: the median).
pub fn percentile(sorted: &[Duration], per_mille: usize) -> Duration {
    sorted[((sorted.len() - 1) * per_mille).div_ceil(1000)]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
