//! The real harness binaries installed by `scripts/install-peers.sh`, and hermetic ways to run them.

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// `<repo>/.peers/node_modules/.bin`.
pub fn peers_bin_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".peers/node_modules/.bin")
}

/// `PATH` with the pinned peers first (then the inherited `PATH`), so spex finds the real
/// `claude`, `codex` and `gemini`.
pub fn peers_path() -> OsString {
    let mut dirs = vec![peers_bin_dir()];
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(dirs).expect("PATH joins")
}

fn peer(name: &str) -> PathBuf {
    let p = peers_bin_dir().join(name);
    // Tests must fail loudly, never skip, when the real harness is absent: a skipped test
    // would pass CI without proving anything against the real binary.
    assert!(
        p.exists(),
        "{} not found: run scripts/install-peers.sh (installs the pinned real harnesses into .peers/)",
        p.display()
    );
    p
}

/// The pinned real Codex CLI.
pub fn codex_bin() -> PathBuf {
    peer("codex")
}

/// The pinned real Claude Code CLI.
pub fn claude_bin() -> PathBuf {
    peer("claude")
}

/// The pinned real Gemini CLI (a node launcher that relaunches itself: spawn it in its own
/// process group, [`GroupChild`], and stop the group).
pub fn gemini_bin() -> PathBuf {
    peer("gemini")
}

/// The pinned asciinema (its own virtual environment under `.peers/`).
pub fn asciinema_bin() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(".peers/asciinema/bin/asciinema");
    assert!(
        p.exists(),
        "{} not found: run scripts/install-peers.sh (installs the pinned asciinema into .peers/)",
        p.display()
    );
    p
}

/// A command with an EMPTY environment except `PATH` (inherited: the harnesses need node, git,
/// bash), `HOME` and `LANG`. Nothing from the developer's shell (API keys, `CLAUDE_*`,
/// `CODEX_*`, `SPEX_*`) leaks into the harness under test.
pub fn hermetic(program: &Path, home: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into()),
        )
        .env("HOME", home)
        .env("LANG", "C.UTF-8")
        .env("SHELL", "/bin/bash");
    cmd
}

/// What a run of [`run_logged`] left: its exit status (`None` when it was still running at
/// the timeout, and then killed with its group) and its output streams.
pub struct Logged {
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd` in its own process group with stdin closed, stdout and stderr going to
/// `<dir>/<tag>.stdout.txt` and `<dir>/<tag>.stderr.txt` (kept for a failure message), waiting
/// up to `timeout`; whatever is left of its group is killed afterwards.
pub fn run_logged(cmd: &mut Command, dir: &Path, tag: &str, timeout: Duration) -> Logged {
    let out_path = dir.join(format!("{tag}.stdout.txt"));
    let err_path = dir.join(format!("{tag}.stderr.txt"));
    let create =
        |p: &Path| File::create(p).unwrap_or_else(|e| panic!("create {}: {e}", p.display()));
    cmd.stdin(Stdio::null())
        .stdout(create(&out_path))
        .stderr(create(&err_path));
    let mut child = GroupChild::spawn(cmd);
    let status = child.exit_within(timeout);
    drop(child);
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    Logged {
        status,
        stdout: read(&out_path),
        stderr: read(&err_path),
    }
}

/// The processes running in folder `dir` (their `/proc/<pid>/cwd`), each as its pid and its
/// command line (arguments joined by spaces): what a tool call the harness started left
/// running, whatever process group it put it in.
pub fn processes_in(dir: &Path) -> Vec<(u32, String)> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c == dir))
        .map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<String> = cmdline
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            (pid, args.join(" "))
        })
        .collect()
}

/// The processes of process group `pgid` still running (`pgrep -g`), one line each.
pub fn group_members(pgid: u32) -> String {
    let out = Command::new("pgrep")
        .args(["-a", "-g", &pgid.to_string()])
        .output()
        .expect("run pgrep");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A child in its own process group, killed with its whole group on Drop.
///
/// Needed because `.bin/codex` is a node launcher that (on node < 22) keeps the native binary as
/// a child: killing only the launcher would orphan the real server.
pub struct GroupChild {
    child: Child,
}

impl GroupChild {
    pub fn spawn(cmd: &mut Command) -> GroupChild {
        use std::os::unix::process::CommandExt;
        let child = cmd
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", Path::new(cmd.get_program()).display()));
        GroupChild { child }
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The launcher's exit status once it exited within `timeout`; `None` if it still runs.
    pub fn exit_within(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let end = Instant::now() + timeout;
        loop {
            if let Some(st) = self.try_wait() {
                return Some(st);
            }
            if Instant::now() >= end {
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal_group(&self, sig: &str) {
        // No libc (unsafe is denied); procps `kill` takes a negative pid as a process group.
        let _ = Command::new("kill")
            .args([sig, "--", &format!("-{}", self.child.id())])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .stderr(std::process::Stdio::null())
            .status();
    }

    /// SIGKILL to the whole group (no `SessionEnd`, nothing cleaned up), then reaps.
    pub fn kill(&mut self) {
        self.signal_group("-KILL");
        let _ = self.child.wait();
    }

    /// SIGTERM to the group (lets Codex remove its socket and fire `SessionEnd`), SIGKILL after
    /// `grace`. Idempotent.
    pub fn stop(&mut self, grace: Duration) {
        if self.try_wait().is_none() {
            self.signal_group("-TERM");
            if self.exit_within(grace).is_none() {
                self.signal_group("-KILL");
                let _ = self.child.wait();
            }
        }
        // The launcher may be gone while group members linger (e.g. a hook's child).
        self.signal_group("-KILL");
    }
}

impl Drop for GroupChild {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(5));
    }
}
