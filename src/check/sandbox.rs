//! The throwaway world one harness is checked in: a HOME, a spex store, a config folder, a
//! runtime folder and a git repository under one temporary folder, and `spex` run there with
//! nothing of the user's environment but `PATH`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::error::CheckError;

pub struct Sandbox {
    /// Removed on drop unless kept (`--keep`).
    pub dir: Option<tempfile::TempDir>,
    pub base: PathBuf,
    pub home: PathBuf,
    pub repo: PathBuf,
    spex_home: PathBuf,
    spex: PathBuf,
    path: OsString,
    /// What the kit adds: the fake's address and the harness's offline switches.
    pub env: Vec<(&'static str, OsString)>,
}

/// What one `spex` run printed, for a failure's evidence.
#[derive(Debug)]
pub struct Ran {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.stdout).ok()
    }

    /// The output as evidence: stdout, then stderr, trimmed.
    pub fn evidence(&self) -> String {
        format!("{}{}", self.stdout.trim(), self.stderr.trim())
    }
}

impl Sandbox {
    /// A new sandbox: `spex` is this binary, `path` the user's `PATH` with the harness's folder
    /// first. A short base under `/tmp`: session sockets live under it.
    pub fn new(spex: &Path, path: OsString) -> Result<Sandbox, CheckError> {
        let dir = tempfile::Builder::new()
            .prefix("spx-check")
            .tempdir_in("/tmp")
            .map_err(CheckError::Sandbox)?;
        let base = fs_err::canonicalize(dir.path()).map_err(CheckError::Sandbox)?;
        let s = Sandbox {
            home: base.join("home"),
            repo: base.join("repo"),
            spex_home: base.join("store"),
            base,
            dir: Some(dir),
            spex: spex.to_owned(),
            path,
            env: Vec::new(),
        };
        for d in [&s.home, &s.repo] {
            fs_err::create_dir_all(d).map_err(CheckError::Sandbox)?;
        }
        crate::fsutil::create_private_dir_all(&s.base.join("run")).map_err(CheckError::Sandbox)?;
        s.git(&["init", "-q", "-b", "main"])?;
        s.git(&["config", "user.email", "check@spex.invalid"])?;
        s.git(&["config", "user.name", "spex check"])?;
        Ok(s)
    }

    pub fn git(&self, args: &[&str]) -> Result<(), CheckError> {
        let out = Command::new("git")
            .args(args)
            .current_dir(&self.repo)
            .env_clear()
            .env("PATH", &self.path)
            .env("HOME", &self.home)
            .stdin(Stdio::null())
            .output()
            .map_err(CheckError::Sandbox)?;
        if out.status.success() {
            Ok(())
        } else {
            Err(CheckError::Setup(format!(
                "`git {}`: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }

    /// The first line `binary --version` prints, run with the sandbox's HOME.
    pub fn version_output(&self, binary: &Path) -> Option<String> {
        let out = Command::new(binary)
            .arg("--version")
            .current_dir(&self.repo)
            .env_clear()
            .env("PATH", &self.path)
            .env("HOME", &self.home)
            .env("LANG", "C.UTF-8")
            .envs(self.env.iter().cloned())
            .stdin(Stdio::null())
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .map(str::to_owned)
    }

    /// `spex ARGS` in the repository, with the sandbox's environment only.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.spex);
        c.args(args)
            .current_dir(&self.repo)
            .env_clear()
            .env("PATH", &self.path)
            .env("HOME", &self.home)
            .env("SPEX_HOME", &self.spex_home)
            .env("XDG_CONFIG_HOME", self.base.join("xdg"))
            .env("XDG_RUNTIME_DIR", self.base.join("run"))
            .env("LANG", "C.UTF-8")
            .env("SHELL", "/bin/bash")
            .env("TERM", "xterm-256color")
            // Every hook call logged to the project's `dispatch.log`: which bound hooks fired.
            .env("SPEX_TRACE_DISPATCH", "1")
            .envs(self.env.iter().cloned())
            .stdin(Stdio::null());
        c
    }

    pub fn run(&self, args: &[&str]) -> Ran {
        match self.cmd(args).output() {
            Ok(Output {
                status,
                stdout,
                stderr,
            }) => Ran {
                ok: status.success(),
                stdout: String::from_utf8_lossy(&stdout).into_owned(),
                stderr: String::from_utf8_lossy(&stderr).into_owned(),
            },
            Err(e) => Ran {
                ok: false,
                stdout: String::new(),
                stderr: format!("cannot run `{}`: {e}", self.spex.display()),
            },
        }
    }

    /// The projects' folder of the sandbox's store.
    pub fn projects(&self) -> PathBuf {
        self.spex_home.join("projects")
    }

    /// The project's folder in the sandbox's store (the only one there).
    fn project_dir(&self) -> Option<PathBuf> {
        fs_err::read_dir(self.projects())
            .ok()?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .next()
    }

    pub fn session_dir(&self, id: &str) -> Option<PathBuf> {
        Some(self.project_dir()?.join("sessions").join(id))
    }

    /// `session.json` of `id`, when there is one.
    pub fn record(&self, id: &str) -> Option<Value> {
        let text = fs_err::read_to_string(self.session_dir(id)?.join("session.json")).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Waits up to `limit` for the record of `id` to satisfy `pred`; the last record seen as
    /// the error.
    pub fn until(
        &self,
        id: &str,
        limit: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Result<Value, Value> {
        let deadline = Instant::now() + limit;
        loop {
            let r = self.record(id).unwrap_or(Value::Null);
            if pred(&r) {
                return Ok(r);
            }
            if Instant::now() >= deadline {
                return Err(r);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The screen of `id` as text, for evidence.
    pub fn screen(&self, id: &str) -> String {
        let Some(v) = self.run(&["snapshot", id, "--json"]).json() else {
            return String::new();
        };
        v["lines"]
            .as_array()
            .map(|rows| {
                rows.iter()
                    .filter_map(|r| r.as_str().or_else(|| r["text"].as_str()))
                    .map(str::trim_end)
                    .filter(|r| !r.is_empty())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    }

    /// Lines `spex dispatch` logged as failures (a payload it could not read, a panic).
    pub fn dispatch_errors(&self) -> Vec<String> {
        fs_err::read_to_string(self.spex_home.join("dispatch-errors.log"))
            .map(|t| t.lines().map(str::to_owned).collect())
            .unwrap_or_default()
    }
}
