//! Claude Code's interactive terminal as spex hosts it: its argv, its input box and dialogs,
//! what its title says, the keys that interrupt, clear, exit and submit.

use std::path::Path;
use std::time::Duration;

use crate::seam::terminal::{
    Activity, Blocker, ScrubRule, TerminalHost, bracketed_paste, option_value,
};

pub struct ClaudeTerminal;

impl TerminalHost for ClaudeTerminal {
    fn host_argv(&self, binary: &Path, args: &[String], id: &str) -> Option<Vec<String>> {
        let mut argv = vec![
            binary.to_string_lossy().into_owned(),
            "--session-id".to_owned(),
            id.to_owned(),
        ];
        argv.extend(args.iter().cloned());
        Some(argv)
    }

    fn resume_argv(&self, binary: &Path, args: &[String], id: &str) -> Option<Vec<String>> {
        let mut argv = vec![
            binary.to_string_lossy().into_owned(),
            "--resume".to_owned(),
            id.to_owned(),
        ];
        argv.extend(args.iter().cloned());
        Some(argv)
    }

    fn ready_for_input(&self, screen: &str) -> bool {
        // The input box, empty. Its footer changes with the permission mode (`? for shortcuts`
        // only in the default mode; `⏵⏵ accept edits on`, `⏸ plan mode on`, `⏵⏵ bypass
        // permissions on` in the others, seen live), so the box itself is what tells.
        input_box(screen).is_some_and(|text| text.trim().is_empty())
            || screen.contains(PROMPT_FOOTER)
    }

    fn blocking_screen(&self, screen: &str) -> Option<Blocker> {
        blocking_screen(screen)
    }

    fn screen_activity(&self, title: &str, screen: &str) -> Option<Activity> {
        // The title's glyph is a braille spinner while a turn runs and `✳` otherwise; a dialog
        // keeps `✳` but shows its own footer (docs/harnesses/facts/claude.md "Terminal title", seen live).
        if title
            .chars()
            .next()
            .is_some_and(|c| ('\u{2800}'..='\u{28ff}').contains(&c))
        {
            Some(Activity::Busy)
        } else if screen.contains("Esc to cancel") {
            Some(Activity::Waiting)
        } else if title.starts_with('✳')
            || screen.contains(PROMPT_FOOTER)
            || input_box(screen).is_some()
        {
            // An interrupted first prompt goes back into the input box, which hides the
            // footer: the title's idle glyph still tells.
            Some(Activity::Idle)
        } else {
            None
        }
    }

    fn title_summary(&self, title: &str) -> Option<String> {
        // `<glyph> <summary>`; the title is `Claude Code` until the first prompt is summarized.
        let summary = match title.split_once(' ') {
            Some((glyph, rest))
                if glyph.chars().count() == 1 && !glyph.chars().all(char::is_alphanumeric) =>
            {
                rest
            }
            _ => title,
        }
        .trim();
        (!summary.is_empty() && summary != "Claude Code").then(|| summary.to_owned())
    }

    fn interrupt_keys(&self) -> Option<&'static [u8]> {
        Some(b"\x1b")
    }

    fn spinner_glyphs(&self) -> &'static [char] {
        &['*', '·', '✢', '✳', '✶', '✻', '✽']
    }

    fn clear_input_key(&self) -> Option<&'static [u8]> {
        // Ctrl-U deletes to the start of the line, and at a line's start the line break; many
        // in one write clear a multi-line box. An interrupted prompt comes back into the box
        // (seen live); Ctrl-U on an empty box does nothing (the footer offers Ctrl+Y to paste
        // the deleted text back). Not Esc Esc: on an empty box it opens the Rewind dialog.
        Some(b"\x15")
    }

    fn exit_keys(&self) -> &'static [&'static [u8]] {
        // Ctrl-D twice at the prompt exits like `/exit` (SessionEnd `prompt_input_exit`,
        // docs/harnesses/facts/claude.md §7.4 "Interrupting and exiting").
        &[b"\x04", b"\x04"]
    }

    fn normalize_prompt(&self, text: &str) -> String {
        // How `UserPromptSubmit` reports a pasted prompt (seen live with 2.1.197): line breaks
        // as `\n`, a tab as four spaces, and trailing whitespace trimmed, except in a paste
        // long enough to be kept as a `[Pasted text]` block, which keeps it. Both sides are
        // compared trimmed, which holds either way.
        text.replace("\r\n", "\n")
            .replace('\r', "\n")
            .replace('\t', "    ")
            .trim_end_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
            .to_owned()
    }

    fn paste(&self, text: &str) -> Option<(Vec<u8>, Duration, Vec<u8>)> {
        // Enter as a separate write: the first prompt after start stays unsubmitted with no
        // gap; 100-300 ms always worked (docs/harnesses/facts/claude.md §7.4).
        Some(bracketed_paste(text, Duration::from_millis(250)))
    }

    fn scrub_rules(&self, tree: &Path) -> Vec<ScrubRule> {
        // Its projects folder is named after the checkout, every `/` and `.` a `-`
        // (docs/harnesses/facts/claude.md, `transcript_path`).
        let slug: String = tree
            .to_string_lossy()
            .chars()
            .map(|c| if c == '/' || c == '.' { '-' } else { c })
            .collect();
        vec![ScrubRule {
            name: "claude projects folder".into(),
            regex: regex::escape(&slug),
            replace: "$TREE_SLUG".into(),
            numbered: false,
        }]
    }

    fn permission_mode(&self, args: &[String]) -> Option<String> {
        if args.iter().any(|a| a == "--dangerously-skip-permissions") {
            return Some("bypassPermissions".into());
        }
        Some(
            option_value(args, "--permission-mode")
                .unwrap_or("default")
                .to_owned(),
        )
    }
}

/// The prompt box's footer (`ready_for_input`).
const PROMPT_FOOTER: &str = "? for shortcuts";

/// The text in Claude's input box, when the screen shows the box: a line that opens with `❯`
/// right under a horizontal rule, up to the rule that closes the box. Dialogs draw their `❯`
/// indented and not under a rule, so a dialog is no input box.
fn input_box(screen: &str) -> Option<String> {
    let lines: Vec<&str> = screen.lines().collect();
    let rule = |l: &str| {
        let l = l.trim_end();
        l.chars().count() >= 10 && l.chars().all(|c| c == '─')
    };
    let start = (1..lines.len())
        .rev()
        .find(|&i| lines[i].starts_with('❯') && rule(lines[i - 1]))?;
    let end = (start + 1..lines.len()).find(|&i| rule(lines[i]))?;
    let mut text = lines[start]['❯'.len_utf8()..].trim().to_owned();
    for l in &lines[start + 1..end] {
        text.push('\n');
        text.push_str(l.trim());
    }
    Some(text)
}

/// Screens 2.1.197 stops at before its prompt, each seen live under spex's host (offline, fake
/// Messages API, docs/harnesses/facts/claude.md §7.3): (texts any of which marks the screen, what it asks,
/// what to do). A dialog counts only while the prompt box is not on screen, so a resumed
/// conversation quoting one of these texts is no dialog.
const DIALOGS: &[(&[&str], &str, &str)] = &[
    (
        &[
            "Do you want to use this API key?",
            "Detected a custom API key",
        ],
        "Claude Code asks whether to use the API key in `ANTHROPIC_API_KEY` (its default answer is No)",
        "approve the key once: add its last 20 characters to `customApiKeyResponses.approved` in `~/.claude.json` (or run `claude` and pick `1. Yes`), or pass it as `ANTHROPIC_AUTH_TOKEN`, which asks nothing",
    ),
    (
        &["Yes, I trust this folder", "Accessing workspace:"],
        "Claude Code asks whether to trust this folder",
        "`spex materialize` in the main checkout records the trust (`projects.<path>.hasTrustDialogAccepted` in `~/.claude.json`); worktrees inherit it",
    ),
    (
        &["running in Bypass Permissions mode"],
        "Claude Code asks to accept Bypass Permissions mode (`--dangerously-skip-permissions`; its default answer is No, exit)",
        "accept it once: `bypassPermissionsModeAccepted: true` in `~/.claude.json`, or drop the flag from `harness.claude.args`",
    ),
    (
        &["Settings Warning"],
        "Claude Code warns about entries in its settings that it skipped",
        "fix the settings file the screen names (an unknown hook event name is the usual cause)",
    ),
    (
        // The first-run setup checks api.anthropic.com itself, whatever `ANTHROPIC_BASE_URL`
        // says; offline it shows this and exits.
        &["Unable to connect to Anthropic services"],
        "Claude Code's first-run setup could not reach Anthropic",
        "finish Claude Code's setup once (run `claude` online), or mark it done: `hasCompletedOnboarding: true` in `~/.claude.json`",
    ),
];

/// The prompt box's footer when no key or login is usable: the prompt is there, but every
/// prompt fails until the person logs in (seen live with no `ANTHROPIC_API_KEY`).
const NOT_LOGGED_IN: &str = "Not logged in · Run /login";

fn blocking_screen(screen: &str) -> Option<Blocker> {
    let blocker = |what: &str, hint: &str| Blocker {
        what: what.to_owned(),
        hint: hint.to_owned(),
    };
    if screen.contains(NOT_LOGGED_IN) {
        return Some(blocker(
            "Claude Code is not logged in (no API key or login it may use)",
            "set `ANTHROPIC_API_KEY` (approved in `~/.claude.json`) or `ANTHROPIC_AUTH_TOKEN`, or run `claude` and `/login` once",
        ));
    }
    if screen.contains(PROMPT_FOOTER) || input_box(screen).is_some() {
        return None;
    }
    DIALOGS
        .iter()
        .find(|(marks, _, _)| marks.iter().any(|m| screen.contains(m)))
        .map(|(_, what, hint)| blocker(what, hint))
}

#[cfg(test)]
mod screen_tests {
    use super::*;

    /// A recording scrubs Claude's projects folder, named after the checkout
    /// (docs/harnesses/facts/claude.md, `transcript_path`); the permission mode comes from its
    /// arguments.
    #[test]
    fn a_recording_scrubs_the_projects_folder_and_names_the_permission_mode() {
        let t = ClaudeTerminal;
        let rules = t.scrub_rules(Path::new("/home/dev/src/my.app"));
        let re = regex::Regex::new(&rules[0].regex).unwrap();
        assert!(re.is_match("~/.claude/projects/-home-dev-src-my-app/x.jsonl"));
        assert!(!re.is_match("/home/dev/src/my.app"));
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(t.permission_mode(&args(&[])).as_deref(), Some("default"));
        assert_eq!(
            t.permission_mode(&args(&["--permission-mode", "plan"]))
                .as_deref(),
            Some("plan")
        );
        assert_eq!(
            t.permission_mode(&args(&["--permission-mode=acceptEdits"]))
                .as_deref(),
            Some("acceptEdits")
        );
        assert_eq!(
            t.permission_mode(&args(&["--dangerously-skip-permissions"]))
                .as_deref(),
            Some("bypassPermissions")
        );
    }

    #[test]
    fn reads_activity_and_summary_from_the_terminal() {
        let c = ClaudeTerminal;
        let cases = [
            ("⠂ Fix the bug", "", Some(Activity::Busy)),
            (
                "✳ Fix the bug",
                " Do you want to proceed?\n Esc to cancel",
                Some(Activity::Waiting),
            ),
            ("✳ Fix the bug", "❯ half-typed prompt", Some(Activity::Idle)),
            ("Claude Code", "? for shortcuts", Some(Activity::Idle)),
            (
                "Claude Code",
                "Do you trust the files in this folder?",
                None,
            ),
        ];
        for (title, screen, want) in cases {
            assert_eq!(
                c.screen_activity(title, screen),
                want,
                "{title:?} {screen:?}"
            );
        }
        assert_eq!(
            c.title_summary("⠐ Fix the bug").as_deref(),
            Some("Fix the bug")
        );
        assert_eq!(c.title_summary("✳ Claude Code"), None);
        assert_eq!(c.title_summary(""), None);
    }

    /// The prompt as 2.1.197 draws it in each permission mode (captured live under spex's
    /// host), empty and holding text, and a dialog's options, which are no input box.
    #[test]
    fn the_empty_prompt_is_ready_in_every_permission_mode() {
        let rule = "─".repeat(40);
        let at = |input: &str, footer: &str| {
            format!(" ▐▛███▜▌   Claude Code v2.1.197\n\n{rule}\n{input}\n{rule}\n  {footer}")
        };
        let c = ClaudeTerminal;
        for footer in [
            "? for shortcuts · ← for agents",
            "⏵⏵ accept edits on (shift+tab to cycle) · ← for agents",
            "⏸ plan mode on (shift+tab to cycle) · ← for agents",
            "⏵⏵ bypass permissions on (shift+tab to cycle) · ← for agents",
        ] {
            assert!(c.ready_for_input(&at("❯", footer)), "{footer}");
            assert!(c.ready_for_input(&at("❯ ", footer)), "{footer}");
            // With text in the box the footer keeps the mode and drops its hints (seen live).
            let typed = footer
                .split(" · ")
                .next()
                .filter(|f| !f.starts_with('?'))
                .unwrap_or("");
            assert!(!c.ready_for_input(&at("❯ hello there", typed)), "{footer}");
            assert_eq!(c.blocking_screen(&at("❯", footer)), None);
        }
        let multi = format!("{rule}\n❯ first line\n  second line\n{rule}\n  ⏵⏵ accept edits on");
        assert!(!c.ready_for_input(&multi));
        let dialog = format!(
            "{rule}\n Bash command\n\n Do you want to proceed?\n ❯ 1. Yes\n   2. No\n\n Esc to cancel"
        );
        assert!(!c.ready_for_input(&dialog));
        assert_eq!(
            c.screen_activity("✳ Claude Code", &dialog),
            Some(Activity::Waiting)
        );
    }

    #[test]
    fn a_prompt_compares_as_claude_reports_it() {
        let c = ClaudeTerminal;
        for (typed, reported) in [
            ("USE_NONE one\n", "USE_NONE one"),
            ("  two  \n\n", "  two"),
            ("a\tb\t \n", "a    b"),
            ("four\r\nline2 \n  ", "four\nline2"),
            ("kept\nas\na block \n", "kept\nas\na block \n"),
            ("nbsp\u{a0}", "nbsp"),
        ] {
            assert_eq!(
                c.normalize_prompt(typed),
                c.normalize_prompt(reported),
                "{typed:?}"
            );
        }
        assert_ne!(c.normalize_prompt("  lead"), c.normalize_prompt("lead"));
    }

    /// Screens captured from 2.1.197 under spex's host (the live launches that stopped there).
    #[test]
    fn knows_the_screens_that_block_a_start_and_not_the_prompt() {
        let api_key = "  Detected a custom API key in your environment\n\n  ANTHROPIC_API_KEY: sk-ant-...-for-spex-tests-0000\n\n  Do you want to use this API key?\n\n    1. Yes\n  ❯ 2. No (recommended)\n\n  Enter to confirm · Esc to cancel";
        let trust = " Accessing workspace:\n\n /tmp/probe/trust/repo\n\n ❯ 1. Yes, I trust this folder\n   2. No, exit\n\n Enter to confirm · Esc to cancel";
        let bypass = "  WARNING: Claude Code running in Bypass Permissions mode\n\n  ❯ 1. No, exit\n    2. Yes, I accept";
        let settings = "  Settings Warning\n\n  └ hooks.FooBarEvent: Unknown hook event \"FooBarEvent\" was ignored.\n  ❯ 1. Continue";
        let onboarding = "Welcome to Claude Code v2.1.197\n Unable to connect to Anthropic services\n\n Failed to connect to api.anthropic.com: ENOTFOUND";
        let no_login = "❯\n  ? for shortcuts · ← for agents          Not logged in · Run /login";
        let prompt = "❯\n  ? for shortcuts · ← for agents          ● high · /effort";
        let resumed = "> tell me about the Settings Warning dialog\n❯\n  ? for shortcuts";
        let c = ClaudeTerminal;
        for (screen, want) in [
            (api_key, Some("API key")),
            (trust, Some("trust this folder")),
            (bypass, Some("Bypass Permissions")),
            (settings, Some("settings")),
            (onboarding, Some("first-run setup")),
            (no_login, Some("not logged in")),
            (prompt, None),
            (resumed, None),
        ] {
            let got = c.blocking_screen(screen);
            match want {
                Some(w) => assert!(
                    got.as_ref()
                        .is_some_and(|b| b.what.contains(w) && !b.hint.is_empty()),
                    "{screen:?}: {got:?}"
                ),
                None => assert_eq!(got, None, "{screen:?}"),
            }
        }
    }
}
