//! `spex check`'s harness side: per adapter, the fake model server its harness talks to, the
//! throwaway home it starts in without a dialog, and the prompts of the fixed scenarios. The
//! checker (`src/check/`) runs the scenarios and judges them; it names no harness.

use std::ffi::OsString;
use std::io;
use std::path::Path;

/// The throwaway folders one check runs in: never the user's.
pub struct Sandbox<'a> {
    /// `HOME` for spex and the harness.
    pub home: &'a Path,
    /// The repository the sessions run in.
    pub repo: &'a Path,
}

/// A running fake model server; stopped when dropped.
pub trait Fake {
    /// One line per request it answered, for a failure's evidence.
    fn requests(&self) -> Vec<String>;
}

/// A harness ready to be checked: its fake, and the environment spex (and so the harness it
/// starts) runs with to reach it.
pub struct Prepared {
    pub fake: Box<dyn Fake>,
    pub env: Vec<(&'static str, OsString)>,
}

/// The prompts of the scenarios, in the language of the harness's fake.
pub struct Script {
    /// A turn that runs a tool without asking.
    pub tool: &'static str,
    /// A turn whose tool asks for permission.
    pub permission: &'static str,
    /// How spex learns of the permission dialog (`hook`, `server`, `keys`): the path its
    /// attention must come by.
    pub permission_via: &'static str,
    /// The hook event that reports the dialog, when one does (its attention's `source`).
    pub permission_source: Option<&'static str>,
    /// A turn that asks a question, and the option answered; or why a delivered prompt cannot
    /// ask one.
    pub question: Result<(&'static str, &'static str), &'static str>,
    /// A turn long enough to interrupt, and the text on screen once it runs.
    pub slow: (&'static str, &'static str),
    /// A turn whose model request fails.
    pub fail: &'static str,
    /// A turn the model answers in text, no tool.
    pub plain: &'static str,
    /// Turns, in one session after the other scenarios, that fire the bound hooks none of them
    /// fires (a sub-agent, a failing tool): every bound hook must be seen firing.
    pub hooks: &'static [&'static str],
}

/// What one adapter gives `spex check`.
pub trait CheckKit: Sync {
    /// Starts the fake model server and seeds the sandbox's home so the harness starts straight
    /// into its prompt, offline.
    fn prepare(&self, sandbox: &Sandbox) -> io::Result<Prepared>;

    fn script(&self) -> &'static Script;

    /// Sets up (`true`) and takes back (`false`) what lets the tool turn's tool run unasked.
    fn tool_unasked(&self, _sandbox: &Sandbox, _on: bool) -> io::Result<()> {
        Ok(())
    }

    /// Sets up (`true`) and takes back (`false`) what the [`Script::hooks`] turns need.
    fn hooks_turns(&self, _sandbox: &Sandbox, _on: bool) -> io::Result<()> {
        Ok(())
    }
}

/// `path` as JSON (an empty object when it does not exist), edited, written back pretty.
pub fn edit_json(path: &Path, edit: impl FnOnce(&mut serde_json::Value)) -> io::Result<()> {
    let mut v = match fs_err::read_to_string(path) {
        Ok(t) => serde_json::from_str(&t).map_err(io::Error::other)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => serde_json::json!({}),
        Err(e) => return Err(e),
    };
    edit(&mut v);
    if let Some(dir) = path.parent() {
        fs_err::create_dir_all(dir)?;
    }
    fs_err::write(
        path,
        serde_json::to_string_pretty(&v).map_err(io::Error::other)?,
    )
}
