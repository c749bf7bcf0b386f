//! `HOME` seeding for the real Claude Code (port of facts/claude-seed-home.py), and running it.
//!
//! Print mode (`-p`) needs no seeding; the interactive TUI does, or it stops at onboarding (which
//! contacts api.anthropic.com directly), the workspace-trust dialog and the API-key approval.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::fake_anthropic::FakeAnthropic;
use super::peers::{claude_bin, hermetic, run_logged};

/// The API key the tests give Claude; the fake accepts anything.
pub const DUMMY_API_KEY: &str = "sk-ant-dummy-key-for-spex-tests-0000";

/// What to pre-accept in `~/.claude.json`.
#[derive(Clone, Copy, Debug)]
pub struct SeedOptions {
    /// `projects[p].hasTrustDialogAccepted` (skips the workspace-trust dialog).
    pub trust: bool,
    /// `customApiKeyResponses.approved` holds the key's last 20 chars (skips the key dialog).
    pub approve_key: bool,
    /// `bypassPermissionsModeAccepted` (skips the `--dangerously-skip-permissions` warning).
    pub bypass: bool,
}

impl Default for SeedOptions {
    fn default() -> Self {
        SeedOptions {
            trust: true,
            approve_key: true,
            bypass: false,
        }
    }
}

/// Writes `<home>/.claude.json` (and creates `<home>/.claude/`) so the TUI starts straight into
/// the prompt for each of `projects`. Returns the path written.
///
/// Each project is recorded under the given path and, when different, its canonical path:
/// Claude keys projects by the directory it runs in, and a symlinked temp dir (macOS `/tmp`)
/// would otherwise miss.
pub fn seed_claude_home(
    home: &Path,
    api_key: &str,
    projects: &[&Path],
    opts: SeedOptions,
) -> PathBuf {
    fs::create_dir_all(home.join(".claude")).expect("create ~/.claude");
    let mut cfg = json!({
        // Skips the theme picker, login and the connectivity check against api.anthropic.com.
        "hasCompletedOnboarding": true,
        "lastOnboardingVersion": "2.1.197",
        "theme": "dark",
        "numStartups": 1,
    });
    if opts.approve_key {
        let tail: String = {
            let chars: Vec<char> = api_key.chars().collect();
            chars[chars.len().saturating_sub(20)..].iter().collect()
        };
        cfg["customApiKeyResponses"] = json!({"approved": [tail], "rejected": []});
    }
    if opts.bypass {
        cfg["bypassPermissionsModeAccepted"] = true.into();
    }
    let mut projs = Map::new();
    for p in projects {
        let entry = json!({"hasTrustDialogAccepted": opts.trust,
            "hasCompletedProjectOnboarding": true, "allowedTools": []});
        projs.insert(p.to_string_lossy().into_owned(), entry.clone());
        if let Ok(c) = p.canonicalize() {
            projs.insert(c.to_string_lossy().into_owned(), entry);
        }
    }
    cfg["projects"] = Value::Object(projs);
    let path = home.join(".claude.json");
    let text = serde_json::to_string_pretty(&cfg).expect("serialize");
    fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path
}

/// The real `claude` in a hermetic env aimed at a fake Messages API: `HOME=home`,
/// `ANTHROPIC_BASE_URL`, [`DUMMY_API_KEY`], no auto-updater.
pub fn claude_command(home: &Path, fake_base_url: &str) -> Command {
    let mut cmd = hermetic(&claude_bin(), home);
    cmd.env("ANTHROPIC_BASE_URL", fake_base_url)
        .env("ANTHROPIC_API_KEY", DUMMY_API_KEY)
        .env("DISABLE_AUTOUPDATER", "1")
        .env("TERM", "xterm-256color");
    cmd
}

/// What one print-mode turn left behind.
pub struct PrintTurn {
    /// Its stream-json stdout.
    pub stdout: String,
    /// Its stdout, stderr and the fake's answers, for failure messages.
    pub diag: String,
}

/// Runs `cmd` (a [`claude_command`] aimed at `fake`, with its env set) in `repo` as one
/// print-mode turn, `claude -p "Please create the file. TARGET_DIR=<repo>"` with stream-json
/// output and `acceptEdits`; its output streams go to `<dir>/<tag>.stdout.txt` and
/// `<dir>/<tag>.stderr.txt`. Panics unless it exits 0 within `timeout`.
pub fn print_turn(
    cmd: &mut Command,
    fake: &FakeAnthropic,
    repo: &Path,
    dir: &Path,
    tag: &str,
    timeout: Duration,
) -> PrintTurn {
    let prompt = format!("Please create the file. TARGET_DIR={}", repo.display());
    print_prompt(cmd, fake, repo, dir, tag, &prompt, timeout)
}

/// [`print_turn`] with the prompt `prompt` (its keywords choose the fake's script).
pub fn print_prompt(
    cmd: &mut Command,
    fake: &FakeAnthropic,
    repo: &Path,
    dir: &Path,
    tag: &str,
    prompt: &str,
    timeout: Duration,
) -> PrintTurn {
    cmd.current_dir(repo)
        .args(["-p", prompt, "--output-format", "stream-json", "--verbose"])
        .args(["--permission-mode", "acceptEdits"]);
    let run = run_logged(cmd, dir, tag, timeout);
    let stdout = run.stdout;
    let diag = format!(
        "claude ({tag}) stdout:\n{stdout}\nstderr:\n{}\nrequests answered: {:?}",
        run.stderr,
        fake.request_lines()
    );
    let status = run
        .status
        .unwrap_or_else(|| panic!("claude did not finish in time\n{diag}"));
    assert!(status.success(), "claude exited with {status}\n{diag}");
    PrintTurn { stdout, diag }
}
