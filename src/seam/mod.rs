//! The seam's vocabulary: the `Harness` trait every adapter implements and the types its
//! methods speak (contexts, checks, `/` menu entries; hook events and answers in `event`; the
//! byte-exact edit primitives adapters plan with in `edit`). It sits beneath the engines and
//! the adapters, holds no harness-specific code, and imports only the ground.

pub mod answer;
pub mod edit;
pub mod event;
pub mod evidence;
pub mod server;

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::env::Env;
use crate::repo::Tree;
use crate::spec::SpecNode;
use crate::store::session::Session;
use edit::MaterializeError;
use edit::workspace::Workspace;
use event::{Answer, HookEvent, Reply};

/// What an adapter needs to plan its shims for one tree.
pub struct ShimCtx<'a> {
    pub env: &'a Env,
    pub tree: &'a Tree,
    /// Other spellings of the main checkout (absolute paths through symlinks that resolve to
    /// it), which a harness may be handed as its working folder; `tree.main` is not among them.
    pub main_spellings: &'a [PathBuf],
    /// This tree selected the harness.
    pub here: bool,
    /// Some tree of the project (this one included) selected the harness.
    pub anywhere: bool,
    /// The spex binary, quoted for a shell.
    pub spex: &'a str,
    pub nodes: &'a [SpecNode],
    /// How long a hook that may wait for an answer waits (`answering.hookWaitSecs`): its
    /// shim's timeout must outlast it.
    pub answer_wait_secs: u64,
}

impl ShimCtx<'_> {
    /// The hook command for one event: identical across runs, so Codex trust stays valid.
    pub fn hook_command(&self, harness: &str, event: &str) -> String {
        format!("{} dispatch {harness} {event}", self.spex)
    }
}

/// One entry of a harness's `/` menu.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SlashEntry {
    pub name: String,
    /// `built-in`, `bundled skill`, `project command`, `user command`, `project skill`, ...
    pub kind: String,
    pub description: String,
}

/// Outcome of one doctor check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Check {
    pub name: String,
    pub status: Status,
    pub detail: String,
}

impl Check {
    pub fn new(name: &str, status: Status, detail: impl Into<String>) -> Check {
        Check {
            name: name.to_owned(),
            status,
            detail: detail.into(),
        }
    }
}

/// What doctor needs to inspect one harness in one tree.
pub struct DoctorCtx<'a> {
    pub env: &'a Env,
    pub tree: &'a Tree,
    /// Other spellings of the main checkout, as for [`ShimCtx::main_spellings`].
    pub main_spellings: &'a [PathBuf],
    /// This tree's receipt selects the harness.
    pub selected: bool,
    /// Some checkout of the project selects the harness (shared shims are wanted).
    pub selected_anywhere: bool,
    /// The hook command prefix this spex writes (`<spex> dispatch`).
    pub spex: &'a str,
    /// The harness binary to run (config `harness.<id>.command`, else the default name).
    pub binary: Option<PathBuf>,
}

/// What a hosted harness's terminal shows it doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// A turn runs.
    Busy,
    /// A dialog waits for the person (permission, question).
    Waiting,
    /// The prompt waits for input.
    Idle,
}

/// A screen the harness stopped at that spex cannot answer for the person (a login, an
/// approval, a warning to accept): what it asks and what to do so the next start skips it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocker {
    /// What the screen asks, in a few words.
    pub what: String,
    /// What the person can do about it.
    pub hint: String,
}

/// A prompt's text made safe to type as ONE bracketed paste: every control character a
/// terminal program would act on (ESC, which opens the paste-end `ESC[201~`, Shift+Tab `ESC[Z`
/// and every other key sequence; the other C0 controls; DEL; the C1 controls, among them the
/// one-byte CSI) becomes its visible Unicode picture (`␛`, `␄`, ...; C1 as `�`). Line breaks
/// and tabs stay: inside a paste they are text. Returns the text and whether anything changed.
pub fn neutralize_paste(text: &str) -> (std::borrow::Cow<'_, str>, bool) {
    let acts = |c: char| (c.is_control() && !matches!(c, '\n' | '\r' | '\t')) || c == '\u{7f}';
    if !text.chars().any(acts) {
        return (std::borrow::Cow::Borrowed(text), false);
    }
    let safe = text
        .chars()
        .map(|c| match c {
            '\u{7f}' => '\u{2421}',
            c if acts(c) && u32::from(c) < 0x20 => {
                char::from_u32(0x2400 + u32::from(c)).unwrap_or('\u{fffd}')
            }
            c if acts(c) => '\u{fffd}',
            c => c,
        })
        .collect();
    (std::borrow::Cow::Owned(safe), true)
}

pub trait Harness: Sync {
    /// Stable id used in hook commands, config and session records.
    fn id(&self) -> &'static str;
    /// Other ids that route to this adapter.
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }
    /// The harness's executable name.
    fn binary_name(&self) -> &'static str;
    /// The version spex's facts were verified against.
    fn pinned_version(&self) -> &'static str;
    /// Extracts the version number from `<binary> --version` output.
    fn parse_version(&self, output: &str) -> Option<String>;
    /// Environment variable carrying the harness's own session id inside its processes.
    fn session_env_var(&self) -> Option<&'static str>;
    /// Other environment variables the adapter reads (e.g. where the harness keeps its state).
    /// `Env` reads exactly these and the session variables, so the ground names no harness.
    fn env_vars(&self) -> &'static [&'static str];
    /// Hook events spex binds (all known to the pinned version).
    fn hook_events(&self) -> &'static [&'static str];
    /// Contract file in each tree (`CLAUDE.md`, `AGENTS.md`).
    fn contract_file(&self) -> &'static str;
    /// Folders (relative to a tree) holding files spex generates whole.
    fn generated_dirs(&self) -> &'static [&'static str];
    /// Files rendered from one spec node (skills, agents, commands), relative to the tree.
    fn render_node(&self, node: &SpecNode) -> Vec<(PathBuf, String)>;
    /// Hook shims and trust for one tree.
    fn plan_shims(&self, ctx: &ShimCtx, ws: &mut Workspace) -> Result<(), MaterializeError>;
    /// The `/` menu: built-ins of the pinned version, then project and user entries.
    fn slash_menu(&self, tree: &Path, env: &Env) -> Vec<SlashEntry>;
    /// Installation checks for this harness.
    fn doctor(&self, ctx: &DoctorCtx) -> Vec<Check>;

    /// Decodes one hook payload (tolerantly: unknown events and fields are skipped).
    fn decode(&self, event: &str, payload: &Value) -> HookEvent;
    /// Encodes spex's answer in the harness's hook output protocol.
    fn encode(&self, event: &str, answer: &Answer) -> Reply;
    /// Whether `SPEX_SESSION_ID` in a hook's environment names the session. False where hooks
    /// run in a process shared by many sessions (the Codex app-server).
    fn hook_env_names_session(&self) -> bool;

    // The terminal runtime: how spex runs the harness's interactive TUI under its own PTY
    // host. A harness spex does not host that way keeps the defaults (`host_argv` = `None`).

    /// The argv that starts an interactive session whose id is `id` (the harness adopts the
    /// id spex chose), with the user's configured `args`, or `None` when spex does not host
    /// this harness in a PTY.
    fn host_argv(&self, _binary: &Path, _args: &[String], _id: &str) -> Option<Vec<String>> {
        None
    }
    /// Whether `screen` (the terminal's text) shows the harness ready for a prompt.
    fn ready_for_input(&self, _screen: &str) -> bool {
        false
    }
    /// Whether `screen` (the terminal's text, or the last screen of a program that ended) is one
    /// of the harness's known screens that keep a session from taking prompts, and which.
    fn blocking_screen(&self, _screen: &str) -> Option<Blocker> {
        None
    }
    /// The argv that resumes session `id` (its conversation) in a new terminal.
    fn resume_argv(&self, _binary: &Path, _args: &[String], _id: &str) -> Option<Vec<String>> {
        None
    }
    /// What the harness's terminal says it is doing, where its screen shows it.
    fn screen_activity(&self, _title: &str, _screen: &str) -> Option<Activity> {
        None
    }
    /// The live self-summary in the terminal title, where the harness keeps one.
    fn title_summary(&self, _title: &str) -> Option<String> {
        None
    }
    /// The glyphs the harness spins at the start of a status line while it works, which a
    /// recording's screens normalize for assertions.
    fn spinner_glyphs(&self) -> &'static [char] {
        &[]
    }
    /// The keys that interrupt a running turn.
    fn interrupt_keys(&self) -> Option<&'static [u8]> {
        None
    }
    /// The key that deletes the text before the cursor in the harness's input box, a piece at a
    /// time. Before typing a prompt into an idle session whose screen is not `ready_for_input`
    /// (its input box holds text), the host sends it until the box is empty, so that text does
    /// not join the prompt. None: the host types into whatever the box holds.
    fn clear_input_key(&self) -> Option<&'static [u8]> {
        None
    }
    /// The keystrokes that make the harness exit on its own from an idle prompt (each written
    /// separately, a moment apart): `stop` tries them before any signal. Empty: signals only.
    fn exit_keys(&self) -> &'static [&'static [u8]] {
        &[]
    }
    /// The pause between a pasted prompt and the Enter that submits it.
    fn submit_pause(&self) -> std::time::Duration {
        std::time::Duration::from_millis(200)
    }
    /// A prompt as the harness's prompt hook reports it once typed (its own normalisation:
    /// line breaks, tabs, trailing blanks), so a delivery is confirmed by comparing both sides
    /// through this.
    fn normalize_prompt(&self, text: &str) -> String {
        text.replace("\r\n", "\n").replace('\r', "\n")
    }
    /// How to type a prompt: one bracketed paste (its text neutralised, see
    /// [`neutralize_paste`]), the pause, then Enter.
    fn paste(&self, text: &str) -> (Vec<u8>, std::time::Duration, Vec<u8>) {
        let mut bytes = b"\x1b[200~".to_vec();
        bytes.extend_from_slice(neutralize_paste(text).0.as_bytes());
        bytes.extend_from_slice(b"\x1b[201~");
        (bytes, self.submit_pause(), b"\r".to_vec())
    }

    /// Answering what a session waits on from outside its terminal, where the harness allows.
    fn answering(&self) -> Option<&'static dyn answer::Answering> {
        None
    }

    /// The server runtime, for a harness whose sessions spex runs as threads of one server per
    /// project instead of terminals under its own host.
    fn server(&self) -> Option<&'static dyn server::SessionServer> {
        None
    }

    /// Evidence beyond hooks for the given live sessions of this harness (its own state files,
    /// its processes): one entry per session it has something to say about, by index into
    /// `sessions`. Read once per reader call, so an adapter may scan a folder once for all of
    /// them. Default: a harness with no such evidence.
    fn observe(&self, _env: &Env, _sessions: &[&Session]) -> Vec<(usize, evidence::Evidence)> {
        Vec::new()
    }

    /// Folders whose changes may change what `observe` says about `session` (`wait` watches
    /// them besides the record).
    fn evidence_dirs(&self, _env: &Env, _session: &Session) -> evidence::Watch {
        Vec::new()
    }

    /// What the harness's own log of `session` adds since the readers last read it (usage,
    /// the text a failed turn wrote), for a session live or exited; `None` when there is
    /// nothing to read. Called by the readers only, never on the hook path. Default: a harness
    /// whose hooks carry all of it.
    fn read_log(&self, _session: &Session) -> Option<evidence::LogReading> {
        None
    }
}

#[cfg(test)]
mod paste_tests {
    use super::neutralize_paste;

    #[test]
    fn a_paste_cannot_end_itself_or_carry_keys() {
        let cases = [
            (
                "plain\nlines\tand tabs\r\n",
                "plain\nlines\tand tabs\r\n",
                false,
            ),
            ("head\x1b[201~tail", "head\u{241b}[201~tail", true),
            ("mode\x1b[Z switch", "mode\u{241b}[Z switch", true),
            (
                "eof\x04 bell\x07 del\x7f",
                "eof\u{2404} bell\u{2407} del\u{2421}",
                true,
            ),
            ("c1 csi\u{9b}201~", "c1 csi\u{fffd}201~", true),
            ("unicode ✓ stays", "unicode ✓ stays", false),
        ];
        for (text, want, changed) in cases {
            let (got, did) = neutralize_paste(text);
            assert_eq!((got.as_ref(), did), (want, changed), "{text:?}");
            assert!(!got.contains('\x1b'), "{text:?}");
        }
    }
}
