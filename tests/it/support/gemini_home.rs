//! `HOME` seeding for the real Gemini CLI, and running it against [`FakeGemini`].
//!
//! Without seeding the CLI opens its auth dialog (the env alone selects auth type `gateway`,
//! which headless mode refuses with exit 41), asks whether to trust the folder (headless exits
//! 55, and project hooks never run), and reaches for the network (usage statistics, update
//! checks). facts/gemini.md §2 and §4.

use std::ffi::OsString;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::fake_gemini::FakeGemini;
use super::peers::{gemini_bin, hermetic, peers_path, run_logged};
use super::term::Term;

/// The API key the tests give Gemini (sent as `x-goog-api-key`); the fake accepts anything.
pub const FAKE_GEMINI_KEY: &str = "fake-gemini-key-for-spex-tests";
/// The model the seeded home pins: the default (`auto`) adds a router request to every turn,
/// and `gemini-3*` models may want thought signatures the fake does not make.
pub const GEMINI_MODEL: &str = "gemini-2.5-flash";

/// Reads the JSON object in `path` (an empty one when the file is missing), lets `edit` change
/// it, and writes it back pretty-printed; creates the parent folder.
pub fn edit_json(path: &Path, edit: impl FnOnce(&mut Value)) {
    let mut v = match fs::read_to_string(path) {
        Ok(t) => serde_json::from_str(&t)
            .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display())),
        Err(e) if e.kind() == ErrorKind::NotFound => json!({}),
        Err(e) => panic!("read {}: {e}", path.display()),
    };
    edit(&mut v);
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    }
    let text = serde_json::to_string_pretty(&v).expect("serialize");
    fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// `<home>/.gemini/settings.json`, the user settings.
pub fn user_settings(home: &Path) -> PathBuf {
    home.join(".gemini/settings.json")
}

/// Sets the user settings the tests need in `<home>/.gemini/settings.json`, keeping whatever
/// else is there: API-key auth (no auth dialog), the model [`GEMINI_MODEL`], and no usage
/// statistics, telemetry or update checks (nothing leaves the machine). Returns the path.
pub fn seed_gemini_home(home: &Path) -> PathBuf {
    let path = user_settings(home);
    edit_json(&path, |v| {
        v["security"]["auth"]["selectedType"] = "gemini-api-key".into();
        v["model"]["name"] = GEMINI_MODEL.into();
        v["privacy"]["usageStatisticsEnabled"] = false.into();
        v["telemetry"]["enabled"] = false.into();
        v["general"]["enableAutoUpdate"] = false.into();
        v["general"]["enableAutoUpdateNotification"] = false.into();
    });
    path
}

/// Trusts `dir` (`TRUST_FOLDER` in `<home>/.gemini/trustedFolders.json`, under the path given
/// and its canonical path), as the TUI's trust dialog would; other entries are kept. Project
/// hooks, commands and settings load only in a trusted folder, and headless mode refuses to
/// start anywhere else.
pub fn trust_folder(home: &Path, dir: &Path) {
    let mut keys = vec![dir.to_path_buf()];
    if let Ok(c) = dir.canonicalize()
        && c != dir
    {
        keys.push(c);
    }
    edit_json(&home.join(".gemini/trustedFolders.json"), |v| {
        for k in keys {
            v[k.to_string_lossy().as_ref()] = "TRUST_FOLDER".into();
        }
    });
}

/// Where the tests tell Gemini its system settings are: nowhere, so a machine's
/// `/etc/gemini-cli/settings.json` (and `system-defaults.json` beside it) cannot change a test.
pub const NO_SYSTEM_SETTINGS: &str = "/nonexistent/spex-tests/gemini-cli/settings.json";

/// The environment the tests run Gemini with (besides `HOME`, `PATH`, `LANG`, `SHELL`): the
/// fake's URL, [`FAKE_GEMINI_KEY`], a terminal type and [`NO_SYSTEM_SETTINGS`]. Also what a
/// test sets on `spex` when spex starts Gemini.
pub fn gemini_env(fake_base_url: &str) -> [(&'static str, OsString); 4] {
    [
        ("GOOGLE_GEMINI_BASE_URL", fake_base_url.into()),
        ("GEMINI_API_KEY", FAKE_GEMINI_KEY.into()),
        ("TERM", "xterm-256color".into()),
        ("GEMINI_CLI_SYSTEM_SETTINGS_PATH", NO_SYSTEM_SETTINGS.into()),
    ]
}

/// The real `gemini` in a hermetic env (see [`hermetic`]) aimed at a fake Gemini API:
/// `HOME=home`, the pinned peers first on `PATH`, and [`gemini_env`]. Seed the home first
/// ([`seed_gemini_home`], [`trust_folder`]). The CLI relaunches itself and its launcher ignores
/// SIGTERM: spawn it with [`super::peers::GroupChild`] or [`super::term::Term`], both of which
/// end its whole process group.
pub fn gemini_command(home: &Path, fake_base_url: &str) -> Command {
    let mut cmd = hermetic(&gemini_bin(), home);
    cmd.env("PATH", peers_path())
        .envs(gemini_env(fake_base_url));
    cmd
}

/// What one headless turn did.
pub struct HeadlessTurn {
    /// `None` when it had not exited within the timeout (it was then killed).
    pub status: Option<ExitStatus>,
    /// The `session_id` of its stream-json `init` event.
    pub session_id: Option<String>,
    /// Its stream-json stdout, one event per line.
    pub stdout: String,
    pub stderr: String,
    /// Its output and the fake's requests, for failure messages.
    pub diag: String,
}

impl HeadlessTurn {
    /// The stream-json events it printed (`init`, `message`, `tool_use`, `tool_result`,
    /// `result`).
    pub fn events(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The exit code (`None` when it was killed or timed out).
    pub fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }

    /// Panics with [`HeadlessTurn::diag`] unless it exited 0.
    pub fn assert_success(&self) -> &HeadlessTurn {
        assert_eq!(self.code(), Some(0), "gemini failed\n{}", self.diag);
        self
    }
}

/// Runs `cmd` (a [`gemini_command`] aimed at `fake`, plus any arguments of the test, e.g.
/// `--yolo` or `--resume <id>`) in `repo` as one headless turn: `-p <prompt> -o stream-json`.
/// Its output streams go to `<dir>/<tag>.stdout.txt` and `<dir>/<tag>.stderr.txt`. Whatever the
/// exit, the turn is returned (an API failure exits 144, an untrusted folder 55).
pub fn headless_turn(
    cmd: &mut Command,
    fake: &FakeGemini,
    repo: &Path,
    dir: &Path,
    tag: &str,
    prompt: &str,
    timeout: Duration,
) -> HeadlessTurn {
    cmd.current_dir(repo)
        .args(["-p", prompt, "-o", "stream-json"]);
    let run = run_logged(cmd, dir, tag, timeout);
    let session_id = run
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "init")
        .and_then(|v| v["session_id"].as_str().map(str::to_owned));
    let diag = format!(
        "gemini ({tag}) exit: {:?}\nstdout:\n{}\nstderr:\n{}\nrequests: {:#?}",
        run.status,
        run.stdout,
        run.stderr,
        fake.request_lines()
    );
    HeadlessTurn {
        status: run.status,
        session_id,
        stdout: run.stdout,
        stderr: run.stderr,
        diag,
    }
}

/// The placeholder of the TUI's empty input box: on screen when the CLI takes a prompt.
pub const INPUT_PLACEHOLDER: &str = "Type your message";

/// Screens the seeded home must never show (auth dialog, folder-trust dialog).
const SETUP_DIALOGS: [&str; 3] = [
    "Existing API key detected",
    "Select Auth Method",
    "Do you trust the files in this folder",
];

/// Waits until the Gemini TUI in `t` shows its input box ([`INPUT_PLACEHOLDER`]); an error
/// with the screen on timeout, or at once when it stops at its auth or folder-trust dialog
/// (the home was not seeded, or the folder not trusted).
pub fn wait_tui_ready(t: &Term, timeout: Duration) -> Result<(), String> {
    t.wait_until(timeout, |v| {
        let text = v.text();
        text.contains(INPUT_PLACEHOLDER)
            || v.closed
            || SETUP_DIALOGS.iter().any(|d| text.contains(d))
    })?;
    let text = t.text();
    match SETUP_DIALOGS.iter().find(|d| text.contains(*d)) {
        Some(d) => Err(format!("gemini stopped at `{d}`\n{}", t.diag())),
        None if text.contains(INPUT_PLACEHOLDER) => Ok(()),
        None => Err(format!("gemini exited before its input box\n{}", t.diag())),
    }
}

/// Gemini takes an Enter as a newline when it comes within 30 ms of a typed key (its guard
/// against pastes in terminals without bracketed paste) or within 40 ms of a paste it does not
/// trust; this is far past both, counted from when the screen showed what came before.
const ENTER_GAP: Duration = Duration::from_millis(200);

/// Types `text` into the Gemini TUI in `t` key by key (a `/` command), waits until the screen
/// shows it, then presses Enter.
pub fn type_and_enter(t: &Term, text: &str, timeout: Duration) -> Result<(), String> {
    t.send(text.as_bytes());
    t.wait_for(text, timeout)
        .map_err(|e| format!("`{text}` was not typed: {e}"))?;
    std::thread::sleep(ENTER_GAP);
    t.send(b"\r");
    Ok(())
}

/// Types `prompt` into the Gemini TUI running in `t` as one bracketed paste and submits it with
/// Enter, until `submitted` says it went in (e.g. [`FakeGemini::wait_for_prompt`] with a zero
/// timeout); an error (with the screen) when it has not within `timeout`.
///
/// Gemini takes an Enter that comes within 40 ms of a paste it does not trust (the kitty
/// keyboard protocol was not detected when its input box mounted, a race at startup) as a
/// newline. Enter waits [`ENTER_GAP`] after the paste shows, but a CLI starved of CPU that long
/// runs its guard's timer and reads the Enter in one go; so an Enter that did not submit is
/// taken back with a Backspace and sent again (an extra Enter or Backspace in an empty box does
/// nothing).
pub fn submit_prompt(
    t: &Term,
    prompt: &str,
    timeout: Duration,
    submitted: impl Fn() -> bool,
) -> Result<(), String> {
    let end = Instant::now() + timeout;
    t.send(format!("\x1b[200~{prompt}\x1b[201~").as_bytes());
    let first_line: String = prompt
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(40)
        .collect();
    t.wait_for(&first_line, timeout)
        .map_err(|e| format!("the paste did not land: {e}"))?;
    loop {
        std::thread::sleep(ENTER_GAP);
        t.send(b"\r");
        let retry = Instant::now() + Duration::from_secs(3);
        while Instant::now() < retry.min(end) {
            if submitted() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if Instant::now() >= end {
            return Err(format!("not submitted in {timeout:?}\n{}", t.diag()));
        }
        eprintln!("gemini took Enter after the paste as a newline; taking it back, sending again");
        t.send(b"\x7f");
    }
}
