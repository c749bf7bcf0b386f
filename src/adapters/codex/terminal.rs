//! The Codex TUI as spex hosts it: a client of a thread on spex's server, whose screen says
//! what the thread does.

use std::path::Path;
use std::time::Duration;

use crate::seam::terminal::{Activity, ScrubRule, TerminalHost, option_value};

pub struct CodexTerminal;

impl TerminalHost for CodexTerminal {
    fn host_argv(&self, _binary: &Path, _args: &[String], _id: &str) -> Option<Vec<String>> {
        // Sessions start as threads of spex's server; the terminal hosts a client of one.
        None
    }

    fn resume_argv(&self, _binary: &Path, _args: &[String], _id: &str) -> Option<Vec<String>> {
        None
    }

    fn ready_for_input(&self, screen: &str) -> bool {
        // The composer's footer while it is empty (0.169.0, seen live); a dialog (trust, model
        // upgrade) shows its own footer instead.
        screen.contains(COMPOSER_FOOTER)
    }

    fn screen_activity(&self, title: &str, screen: &str) -> Option<Activity> {
        screen_activity(title, screen)
    }

    fn normalize_prompt(&self, text: &str) -> String {
        // Never typed (see `paste`): a prompt is compared as given.
        text.to_owned()
    }

    fn paste(&self, _text: &str) -> Option<(Vec<u8>, Duration, Vec<u8>)> {
        // Prompts reach a thread through the server (`turn/start`, `turn/steer`), which
        // confirms them; nothing is typed into the client's composer.
        None
    }

    fn scrub_rules(&self, _tree: &Path) -> Vec<ScrubRule> {
        // Its rollout files are named after the time they started
        // (`rollout-2026-11-22T01-53-40-<uuid>.jsonl`, as a hook payload's `transcript_path` shows:
        // tests/fixtures/payloads/codex/Interrupt.json).
        vec![ScrubRule {
            name: "codex rollout time".into(),
            regex: r"rollout-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}".into(),
            replace: "rollout-$TIME".into(),
            numbered: false,
        }]
    }

    fn permission_mode(&self, args: &[String]) -> Option<String> {
        if args
            .iter()
            .any(|a| a == "--dangerously-bypass-approvals-and-sandbox" || a == "--yolo")
        {
            return Some("never (no sandbox)".into());
        }
        if args.iter().any(|a| a == "--full-auto") {
            return Some("on-request (workspace-write)".into());
        }
        option_value(args, "--ask-for-approval")
            .or_else(|| option_value(args, "-a"))
            .map(str::to_owned)
    }
}

/// The footer under Codex's empty composer (0.169.0).
const COMPOSER_FOOTER: &str = "? for shortcuts";

/// What the Codex TUI's screen says it is doing (0.169.0, seen live under spex's host and in
/// docs/harnesses/facts/answering-codex.md): an approval dialog offers "Yes, proceed (y)" and "No, and tell
/// Codex what to do differently (esc)"; while a turn runs the title starts with a braille
/// spinner and the status line says "esc to interrupt"; the empty composer's footer is idle.
fn screen_activity(title: &str, screen: &str) -> Option<Activity> {
    if screen.contains("Yes, proceed (y)") || screen.contains("tell Codex what to do differently") {
        Some(Activity::Waiting)
    } else if title
        .chars()
        .next()
        .is_some_and(|c| ('\u{2800}'..='\u{28ff}').contains(&c))
        || screen.contains("esc to interrupt")
    {
        Some(Activity::Busy)
    } else if screen.contains(COMPOSER_FOOTER) {
        Some(Activity::Idle)
    } else {
        None
    }
}

#[cfg(test)]
mod screen_tests {
    use super::*;

    #[test]
    fn the_tui_screen_says_what_codex_does() {
        let idle =
            "› Ask Codex to do anything\n  GPT-5.5 default · /r · spex main\n  ? for shortcuts";
        let working =
            "• Working (0s • esc to interrupt)\n› Ask Codex to do anything\n  ? for shortcuts";
        let dialog = "Would you like to run the following command?\n› 1. Yes, proceed (y)\n  3. No, and tell Codex what to do differently (esc)";
        for (title, screen, want) in [
            ("spex main | repo", idle, Some(Activity::Idle)),
            ("⠋ spex main | repo", idle, Some(Activity::Busy)),
            ("spex main | repo", working, Some(Activity::Busy)),
            ("⠋ spex main | repo", dialog, Some(Activity::Waiting)),
            ("repo", "Loading…", None),
        ] {
            assert_eq!(screen_activity(title, screen), want, "{title:?} {screen:?}");
        }
    }
}
