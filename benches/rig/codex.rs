//! The world the Codex benchmarks run in: a git project materialized for Codex, a Codex home
//! on the tests' fake Responses API, and spex run against them (spex's app-server runtime with
//! the real pinned Codex). Included by `codex_deliver.rs` and `answer_codex.rs`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::support::codex_home::{FAKE_API_KEY_ENV, write_codex_config};
use super::support::fake_responses::FakeResponses;
use super::support::peers::{codex_bin, peers_path};

pub struct World {
    pub fake: FakeResponses,
    _dir: tempfile::TempDir,
    pub base: PathBuf,
}

impl World {
    pub fn repo(&self) -> PathBuf {
        self.base.join("repo")
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_spex"));
        c.args(args)
            .current_dir(self.repo())
            .env_clear()
            .env("PATH", peers_path())
            .env("HOME", self.base.join("home"))
            .env("LANG", "C.UTF-8")
            .env("SPEX_HOME", self.base.join("store"))
            .env("XDG_CONFIG_HOME", self.base.join("xdg"))
            .env("XDG_RUNTIME_DIR", self.base.join("run"))
            .env("CODEX_HOME", self.base.join("home/.codex"))
            .env(FAKE_API_KEY_ENV, "dummy")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null());
        c
    }

    /// Runs spex; its stdout as JSON, or everything it printed.
    pub fn try_spex(&self, args: &[&str]) -> Result<Value, String> {
        let out = self.cmd(args).output().expect("spex runs");
        if !out.status.success() {
            return Err(format!(
                "spex {args:?}: {}\nstdout:\n{}\nstderr:\n{}\n--- server log:\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                std::fs::read_to_string(self.project_dir().join("servers/codex.log"))
                    .unwrap_or_default()
            ));
        }
        Ok(serde_json::from_slice(&out.stdout).unwrap_or(Value::Null))
    }

    pub fn spex(&self, args: &[&str]) -> Value {
        self.try_spex(args).unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn project_dir(&self) -> PathBuf {
        std::fs::read_dir(self.base.join("store/projects"))
            .ok()
            .and_then(|mut d| d.next())
            .and_then(Result::ok)
            .map_or_else(|| self.base.join("store/projects/none"), |e| e.path())
    }

    /// `spex deliver <id> <text> --json`, timed from spawn to exit.
    pub fn deliver(&self, id: &str, text: &str) -> (Duration, Value) {
        let start = Instant::now();
        let out = self.cmd(&["deliver", id, text, "--json"]).output();
        let took = start.elapsed();
        let out = out.expect("spex runs");
        assert!(
            out.status.success(),
            "spex deliver {id} {text:?}: {}\nstdout:\n{}\nstderr:\n{}\n--- server log:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(self.project_dir().join("servers/codex.log"))
                .unwrap_or_default()
        );
        let d: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        assert_eq!(d["confirmed"], true, "{d}");
        (took, d)
    }

    pub fn until(&self, id: &str, what: &str, pred: impl Fn(&Value) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.spex(&["show", id, "--json"]);
            if pred(&s) {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: {s}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills whatever the project's supervisor and server left running (their process groups).
    pub fn kill_leftovers(&self) -> usize {
        let running: Value = std::fs::read_to_string(self.project_dir().join("servers/codex.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null);
        let mut killed = 0;
        for key in ["server_pid", "supervisor_pid"] {
            if let Some(pid) = running[key].as_u64()
                && Path::new(&format!("/proc/{pid}")).exists()
            {
                killed += 1;
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &format!("-{pid}"), &pid.to_string()])
                    .stderr(Stdio::null())
                    .status();
            }
        }
        killed
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.kill_leftovers();
    }
}

fn git(repo: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(args)
        .current_dir(repo)
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@b")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@b")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

pub fn world(approval: &str, sandbox: &str) -> World {
    use std::os::unix::fs::PermissionsExt;
    assert!(codex_bin().exists());
    let dir = tempfile::Builder::new()
        .prefix("spxc")
        .tempdir_in("/tmp")
        .unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let repo = base.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::create_dir_all(base.join("home/.codex")).unwrap();
    std::fs::create_dir_all(base.join("run")).unwrap();
    std::fs::set_permissions(base.join("run"), std::fs::Permissions::from_mode(0o700)).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "base"]);
    std::fs::write(repo.join("spex.jsonc"), "{ \"harnesses\": [\"codex\"] }\n").unwrap();
    // Long enough that the hanging turn outlives the benchmark.
    let fake = FakeResponses::start_with_hang_limit(Duration::from_mins(10));
    write_codex_config(
        &base.join("home/.codex"),
        &fake.base_url(),
        approval,
        sandbox,
    );
    let w = World {
        fake,
        _dir: dir,
        base,
    };
    w.spex(&["materialize", "--json"]);
    w
}

pub fn report(what: &str, took: &mut [Duration], modes: &[String]) {
    took.sort();
    let ms = |d: Duration| format!("{:.1}", d.as_secs_f64() * 1000.0);
    let p = |q: usize| took[((took.len() - 1) * q).div_ceil(100)];
    let mut counts: Vec<(String, usize)> = Vec::new();
    for m in modes {
        match counts.iter_mut().find(|(k, _)| k == m) {
            Some((_, n)) => *n += 1,
            None => counts.push((m.clone(), 1)),
        }
    }
    let counts: Vec<String> = counts.iter().map(|(m, n)| format!("{m} x{n}")).collect();
    let modes = if counts.is_empty() {
        String::new()
    } else {
        format!(" (modes: {})", counts.join(", "))
    };
    println!(
        "{what}, {} runs: p50 {} ms, p90 {} ms, p99 {} ms, max {} ms{modes}",
        took.len(),
        ms(p(50)),
        ms(p(90)),
        ms(p(99)),
        ms(took[took.len() - 1]),
    );
}
