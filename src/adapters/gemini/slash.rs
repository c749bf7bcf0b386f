//! Gemini CLI 0.61.0's `/` menu: its built-in commands as the real TUI's `/help` lists them
//! (with default settings), then the skills and custom commands it finds (0.61.0
//! `BuiltinCommandLoader`, `SkillCommandLoader`, `FileCommandLoader`).

use std::path::Path;

use crate::seam::files::SlashEntry;

/// `(name, description)`, in the order of `/help`.
pub const BUILTINS: &[(&str, &str)] = &[
    ("about", "Show version info"),
    ("agents", "Manage agents"),
    ("auth", "Manage authentication"),
    ("bug", "Submit a bug report"),
    (
        "bug-memory",
        "Capture a V8 heap snapshot to disk to attach to a bug report",
    ),
    (
        "chat",
        "Browse auto-saved conversations and manage chat checkpoints",
    ),
    ("clear", "Clear the screen and start a new session"),
    (
        "commands",
        "Manage custom slash commands. Usage: /commands [list|reload]",
    ),
    (
        "compress",
        "Compresses the context by replacing it with a summary",
    ),
    ("copy", "Copy the last result or code snippet to clipboard"),
    ("docs", "Open full Gemini CLI documentation in your browser"),
    (
        "export-session",
        "Export the current session to a JSON file",
    ),
    ("directory", "Manage workspace directories"),
    ("editor", "Set external editor preference"),
    ("extensions", "Manage extensions"),
    ("help", "For help on gemini-cli"),
    (
        "footer",
        "Configure which items appear in the footer (statusline)",
    ),
    ("shortcuts", "Toggle the shortcuts panel above the input"),
    ("hooks", "Manage hooks"),
    (
        "rewind",
        "Jump back to a specific message and restart the conversation",
    ),
    ("ide", "Manage IDE integration"),
    (
        "init",
        "Analyzes the project and creates a tailored GEMINI.md file",
    ),
    (
        "mcp",
        "Manage configured Model Context Protocol (MCP) servers",
    ),
    ("memory", "Commands for interacting with memory"),
    ("model", "Manage model configuration"),
    (
        "permissions",
        "Manage folder trust settings and other permissions",
    ),
    ("plan", "Switch to Plan Mode and view current plan"),
    ("policies", "Manage policies"),
    ("privacy", "Display the privacy notice"),
    ("quit", "Exit the cli"),
    (
        "resume",
        "Browse auto-saved conversations and manage chat checkpoints",
    ),
    (
        "stats",
        "Check session stats. Usage: /stats [session|model|tools]",
    ),
    ("theme", "Change the theme"),
    (
        "tools",
        "List available Gemini CLI tools. Use /tools desc to include descriptions.",
    ),
    (
        "skills",
        "List, enable, disable, or reload Gemini CLI agent skills. Usage: /skills [list | disable <name> | enable <name> | reload]",
    ),
    ("settings", "View and edit Gemini CLI settings"),
    ("gemma", "Check local Gemma model routing status"),
    ("tasks", "Toggle background tasks view"),
    ("vim", "Toggle vim mode on/off"),
    ("setup-github", "Set up GitHub Actions"),
    (
        "terminal-setup",
        "Configure terminal keybindings for multiline input (VS Code, Cursor, Windsurf)",
    ),
];

/// Listed only while Gemini takes its release channel for `nightly`: it reads the version of
/// the nearest `package.json` at or above the launch folder, and none (or an empty version)
/// counts as nightly (0.61.0 `getReleaseChannel`).
pub const NIGHTLY_ONLY: (&str, &str) = ("oncall", "Oncall related commands");

/// Whether Gemini launched in `tree` shows [`NIGHTLY_ONLY`].
pub fn nightly_channel(tree: &Path) -> bool {
    let version = tree
        .ancestors()
        .map(|d| d.join("package.json"))
        .find(|p| p.is_file())
        .and_then(|p| fs_err::read(p).ok())
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["version"].as_str().map(str::to_owned))
        .unwrap_or_default();
    version.is_empty() || version.contains("nightly")
}

/// The built-ins Gemini shows in `tree`, in `/help` order.
pub fn builtins(tree: &Path) -> Vec<SlashEntry> {
    let nightly = nightly_channel(tree);
    BUILTINS
        .iter()
        .flat_map(|&entry| {
            // `/oncall` comes right after `/init`.
            let extra = (nightly && entry.0 == "init").then_some(NIGHTLY_ONLY);
            std::iter::once(entry).chain(extra)
        })
        .map(|(name, description)| SlashEntry {
            name: name.to_owned(),
            kind: "built-in".into(),
            description: description.to_owned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oncall_shows_only_on_the_nightly_channel_of_the_nearest_package_json() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("repo");
        fs_err::create_dir_all(&tree).unwrap();
        let has_oncall = |t: &Path| builtins(t).iter().any(|e| e.name == "oncall");
        // No package.json up to `/` (a temp dir has none) counts as nightly.
        assert!(has_oncall(&tree));
        fs_err::write(dir.path().join("package.json"), r#"{"version": "1.2.0"}"#).unwrap();
        assert!(!has_oncall(&tree));
        fs_err::write(
            tree.join("package.json"),
            r#"{"version": "0.1.0-nightly.1"}"#,
        )
        .unwrap();
        assert!(has_oncall(&tree));
        assert_eq!(builtins(&tree).len(), BUILTINS.len() + 1);
    }
}
