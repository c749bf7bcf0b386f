//! Gemini CLI's interactive terminal as spex hosts it (docs/harnesses/facts/gemini.md §11, §12): its argv, its
//! input box and the dialogs it stops at before it, what its window title says, the keys that
//! interrupt, clear, exit and submit.

use std::path::Path;
use std::time::Duration;

use crate::seam::terminal::{
    Activity, Blocker, ScrubRule, TerminalHost, bracketed_paste, option_value,
};

pub struct GeminiTerminal;

impl TerminalHost for GeminiTerminal {
    fn host_argv(&self, binary: &Path, args: &[String], id: &str) -> Option<Vec<String>> {
        // `--session-id` makes the CLI adopt spex's id (its hooks' `session_id`, §11).
        Some(argv(binary, "--session-id", id, args))
    }

    fn resume_argv(&self, binary: &Path, args: &[String], id: &str) -> Option<Vec<String>> {
        Some(argv(binary, "--resume", id, args))
    }

    fn ready_for_input(&self, screen: &str) -> bool {
        input_box(screen).is_some_and(|text| text == Input::Empty)
    }

    fn blocking_screen(&self, screen: &str) -> Option<Blocker> {
        if input_box(screen).is_some() {
            return None;
        }
        DIALOGS
            .iter()
            .find(|(marks, _, _)| marks.iter().any(|m| screen.contains(m)))
            .map(|(_, what, hint)| Blocker {
                what: (*what).to_owned(),
                hint: (*hint).to_owned(),
            })
    }

    fn screen_activity(&self, title: &str, screen: &str) -> Option<Activity> {
        // The OSC 0 title (`computeTerminalTitle`, §12): `✋  Action Required` at a permission
        // or question dialog, `✦  Working…` (or, with `ui.showStatusInTitle`, the thought
        // subject) and `⏲  Working…` while a turn runs, `◇  Ready` otherwise. The setup dialogs
        // before the prompt (trust, auth, API key) keep `◇  Ready` and hide the input box.
        match title.trim_start().chars().next() {
            Some(ACTION_REQUIRED) => Some(Activity::Waiting),
            Some(WORKING | SILENT_WORKING) => Some(Activity::Busy),
            Some(READY) if input_box(screen).is_some() => Some(Activity::Idle),
            Some(READY) if self.blocking_screen(screen).is_some() => Some(Activity::Waiting),
            _ => None,
        }
    }

    // No `title_summary`: the title says what the CLI does now (Ready, Working, a thought's
    // subject of the moment with `ui.showStatusInTitle`), never what the session is about.

    fn spinner_glyphs(&self) -> &'static [char] {
        // The status line's spinner (`⠋ Thinking... (esc to cancel, 3s)`) is braille; the
        // leading `✦` of a model's answer and the title's glyphs do not spin.
        &['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏']
    }

    fn interrupt_keys(&self) -> Option<&'static [u8]> {
        // Esc cancels the request (`ℹ Request cancelled.`): while the model streams, the turn
        // ends with an `AfterAgent` of the partial answer; at a permission dialog with none
        // (§5), the title going back to `◇  Ready` is then the only sign.
        Some(b"\x1b")
    }

    fn clear_input_key(&self) -> Option<&'static [u8]> {
        // Ctrl-K kills to the end of the line (at its end it joins the next), Ctrl-U to its
        // start, Backspace at a line's start joins it to the line above: each round removes
        // a line whatever the cursor's place; a `[Pasted Text: N lines]` chip goes whole, and
        // on an empty box all three do nothing (seen live with 0.61.0). Not Ctrl-C: it clears
        // the box at once, but on an empty one it counts towards exiting.
        Some(b"\x0b\x15\x7f")
    }

    fn exit_keys(&self) -> &'static [&'static [u8]] {
        // Ctrl-D twice at the prompt (`Press Ctrl+D again to exit.`) exits with code 0 and
        // kills a shell command it still runs (seen live); with text in the box Ctrl-D deletes
        // to the right instead, never submitting it. `/quit` + Enter would need the box empty
        // and the Enter 30 ms past the last key.
        &[b"\x04", b"\x04"]
    }

    fn normalize_prompt(&self, text: &str) -> String {
        // How `BeforeAgent.prompt` reports a pasted prompt (seen live with 0.61.0): line
        // breaks as `\n` (CR LF and a lone CR too), tabs and inner blanks kept, the whole text
        // trimmed at both ends (JavaScript's `trim`, which also takes NBSP and BOM).
        text.replace("\r\n", "\n")
            .replace('\r', "\n")
            .trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
            .to_owned()
    }

    fn paste(&self, text: &str) -> Option<(Vec<u8>, Duration, Vec<u8>)> {
        // Enter as a separate write, well past the CLI's guards: an Enter within 30 ms of the
        // last key, or 40 ms of a paste it does not trust (before it has seen the kitty
        // keyboard protocol answer), becomes a newline in the box.
        Some(bracketed_paste(text, PASTE_PAUSE))
    }

    fn scrub_rules(&self, _tree: &Path) -> Vec<ScrubRule> {
        // Its chat files are named after the minute they started and the session's first
        // eight hex digits (`session-<YYYY-MM-DDTHH-MM>-<id8>.jsonl`,
        // docs/harnesses/facts/gemini.md).
        vec![ScrubRule {
            name: "gemini chat file".into(),
            regex: r"session-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-[0-9a-f]{8}".into(),
            replace: "session-$TIME-$ID".into(),
            numbered: false,
        }]
    }

    fn permission_mode(&self, args: &[String]) -> Option<String> {
        if args.iter().any(|a| a == "--yolo" || a == "-y") {
            return Some("yolo".into());
        }
        Some(
            option_value(args, "--approval-mode")
                .unwrap_or("default")
                .to_owned(),
        )
    }
}

/// How long the host waits between a prompt's paste and its Enter.
const PASTE_PAUSE: Duration = Duration::from_millis(250);

/// The title's leading glyphs (§12).
const ACTION_REQUIRED: char = '✋';
const WORKING: char = '✦';
const SILENT_WORKING: char = '⏲';
const READY: char = '◇';

/// The placeholder of the empty input box (0.61.0 `InputPrompt`).
const PLACEHOLDER: &str = "Type your message or @path/to/file";

fn argv(binary: &Path, flag: &str, id: &str, args: &[String]) -> Vec<String> {
    let mut argv = vec![
        binary.to_string_lossy().into_owned(),
        flag.to_owned(),
        id.to_owned(),
    ];
    argv.extend(args.iter().cloned());
    argv
}

/// What the input box holds.
#[derive(Debug, PartialEq, Eq)]
enum Input {
    Empty,
    Text,
}

/// The input box, when the screen shows it: the last line that opens with ` > ` right under
/// the box's rule and its hint line (` Shift+Tab to accept edits`, or a mode's), its
/// placeholder when empty. The prompts echoed above it (` > SCENARIO:…`) have no rule above.
fn input_box(screen: &str) -> Option<Input> {
    let lines: Vec<&str> = screen.lines().collect();
    let rule = |l: &str| {
        let l = l.trim();
        l.chars().count() >= 10 && l.chars().all(|c| c == '─')
    };
    let start = (0..lines.len()).rev().find(|&i| {
        lines[i].trim_start().starts_with('>') && lines[..i].iter().rev().take(3).any(|l| rule(l))
    })?;
    let text = lines[start].trim_start()['>'.len_utf8()..].trim();
    Some(if text == PLACEHOLDER {
        Input::Empty
    } else {
        Input::Text
    })
}

/// Screens 0.61.0 stops at before its prompt, each seen live under spex's host (offline, fake
/// Gemini API, docs/harnesses/facts/gemini.md §2, §4; the agents' one with a `.gemini/agents/<n>.md`): (texts any of which marks the screen, what it asks,
/// what to do). They count only while the input box is not on screen.
const DIALOGS: &[(&[&str], &str, &str)] = &[
    (
        &["Do you trust the files in this folder?"],
        "Gemini CLI asks whether to trust this folder (its project hooks, commands and settings load only in a trusted folder)",
        "`spex materialize` in this checkout records the trust (`~/.gemini/trustedFolders.json`, under `$GEMINI_CLI_HOME` when set); or answer `1. Trust folder` once on `spex attach`",
    ),
    (
        &[
            "How would you like to authenticate for this project?",
            "Existing API key detected",
        ],
        "Gemini CLI asks how to authenticate (`security.auth.selectedType` is not set)",
        "choose it once: `\"security\": {\"auth\": {\"selectedType\": \"gemini-api-key\"}}` in `~/.gemini/settings.json` with `GEMINI_API_KEY` set (or run `gemini` and pick one)",
    ),
    (
        &["New Agents Discovered"],
        "Gemini CLI asks to acknowledge the project's agents (`.gemini/agents/`) it has not seen before",
        "acknowledge them once: run `gemini` in this checkout and pick `1. Acknowledge and Enable` (it records them in `~/.gemini/acknowledgments/agents.json`), or move them out of `.gemini/agents/`",
    ),
    (
        &["Enter Gemini API Key", "Paste your API key here"],
        "Gemini CLI asks for its API key (`GEMINI_API_KEY` is not set)",
        "set `GEMINI_API_KEY` where spex runs (or run `gemini` once and enter the key)",
    ),
];

#[cfg(test)]
mod screen_tests {
    use super::*;

    /// The bottom of the screen as 0.61.0 draws it at 110 columns (captured under spex's host).
    fn prompt(input: &[&str]) -> String {
        let rule = "─".repeat(110);
        let mut s = format!(
            " ▝▜▄     Gemini CLI v0.61.0\n\nTips for getting started:\n\n{}? for shortcuts\n{rule}\n Shift+Tab to accept edits\n\n",
            " ".repeat(94)
        );
        for (i, l) in input.iter().enumerate() {
            s.push_str(if i == 0 { " > " } else { "   " });
            s.push_str(l);
            s.push('\n');
        }
        s.push_str("\n workspace (/directory)      sandbox      /model\n /tmp/repo      no sandbox      gemini-2.5-flash");
        s
    }

    const SHELL_DIALOG: &str = " > SCENARIO:both go\n\n╭──────────────────────────────╮\n│ ? Shell  echo shell-ran > shell_out.txt; cat shell_out.txt │\n│ Allow execution of [Shell]? │\n│ ● 1. Allow once │\n│   2. Allow for this session │\n│   3. No, suggest changes (esc) │\n╰──────────────────────────────╯";

    const TRUST: &str = " ▝▜▄     Gemini CLI v0.61.0\n ╭──────────╮\n │ Do you trust the files in this folder? │\n │ ● 1. Trust folder (ra) │\n │   2. Trust parent folder (gterm) │\n │   3. Don't trust │\n ╰──────────╯";
    const AUTH: &str = "│ ? Get started │\n│   How would you like to authenticate for this project? │\n│     1. Sign in with Google │\n│   ● 2. Use Gemini API Key │\n│   Existing API key detected (GEMINI_API_KEY). Select \"Gemini API Key\" option to use it. │";
    const AGENTS: &str = " │ New Agents Discovered │\n │ The following agents were found in this project. Please review them: │\n │ │ - helper:  A helper agent for tests. │ │\n │ ● 1. Acknowledge and Enable │\n │   2. Do not enable (Ask again next time) │";
    const API_KEY: &str = "│ Enter Gemini API Key │\n│ Please enter your Gemini API key. │\n│ │ Paste your API key here │ │\n│ (Press Enter to submit, Esc to cancel, Ctrl+C to clear stored key) │";

    #[test]
    fn the_empty_input_box_is_ready_and_one_holding_text_is_not() {
        let g = GeminiTerminal;
        assert!(g.ready_for_input(&prompt(&["  Type your message or @path/to/file"])));
        assert!(!g.ready_for_input(&prompt(&["hello there", "second line"])));
        assert!(!g.ready_for_input(&prompt(&["[Pasted Text: 7 lines]"])));
        // The echo of a submitted prompt above the box is no box.
        assert!(!g.ready_for_input(SHELL_DIALOG));
        assert!(!g.ready_for_input(TRUST));
        // Even a prompt echoing the placeholder: only the box under the rule counts.
        let echoed = format!(" > Type your message or @path/to/file\n{}", prompt(&["x"]));
        assert!(!g.ready_for_input(&echoed));
    }

    #[test]
    fn the_title_says_what_gemini_does() {
        let g = GeminiTerminal;
        let pad = |t: &str| format!("{t:<80}");
        let idle = prompt(&["  Type your message or @path/to/file"]);
        let typed = prompt(&["half typed"]);
        for (title, screen, want) in [
            (pad("◇  Ready (repo)"), idle.as_str(), Some(Activity::Idle)),
            (pad("◇  Ready (repo)"), typed.as_str(), Some(Activity::Idle)),
            (
                pad("✦  Working… (repo)"),
                idle.as_str(),
                Some(Activity::Busy),
            ),
            (
                pad("✦  Reading the files (repo)"),
                idle.as_str(),
                Some(Activity::Busy),
            ),
            (
                pad("⏲  Working… (repo)"),
                idle.as_str(),
                Some(Activity::Busy),
            ),
            (
                pad("✋  Action Required (repo)"),
                SHELL_DIALOG,
                Some(Activity::Waiting),
            ),
            // The setup dialogs keep the title `Ready` and hide the box.
            (pad("◇  Ready (ra)"), TRUST, Some(Activity::Waiting)),
            (pad("◇  Ready (repo)"), "Loading…", None),
            (String::new(), idle.as_str(), None),
        ] {
            assert_eq!(g.screen_activity(&title, screen), want, "{title:?}");
        }
        assert_eq!(g.title_summary(&pad("✦  Reading the files (repo)")), None);
    }

    #[test]
    fn knows_the_screens_that_block_a_start_and_not_the_prompt() {
        let g = GeminiTerminal;
        for (screen, want) in [
            (TRUST, Some("trust this folder")),
            (AUTH, Some("how to authenticate")),
            (API_KEY, Some("API key")),
            (AGENTS, Some("project's agents")),
            (
                prompt(&["  Type your message or @path/to/file"]).as_str(),
                None,
            ),
        ] {
            let got = g.blocking_screen(screen);
            match want {
                Some(w) => assert!(
                    got.as_ref()
                        .is_some_and(|b| b.what.contains(w) && b.hint.contains('`')),
                    "{screen:?}: {got:?}"
                ),
                None => assert_eq!(got, None, "{screen:?}"),
            }
        }
        // A conversation quoting a dialog's words is no dialog while the box is there.
        let quoting = prompt(&["Do you trust the files in this folder?"]);
        assert_eq!(g.blocking_screen(&quoting), None);
    }

    #[test]
    fn a_prompt_compares_as_before_agent_reports_it() {
        let g = GeminiTerminal;
        // (typed, `BeforeAgent.prompt`), each pair seen live with 0.61.0.
        for (typed, reported) in [
            ("a\tb\t \n", "a\tb"),
            ("four\r\nline2 \n  ", "four\nline2"),
            ("  two  \n\n", "two"),
            ("x \ny", "x \ny"),
            ("a\rb", "a\nb"),
            ("\u{a0}nbsp ✓\u{a0}", "nbsp ✓"),
            ("1\n2\n3\n4\n5\n6\n7 seven", "1\n2\n3\n4\n5\n6\n7 seven"),
        ] {
            assert_eq!(g.normalize_prompt(typed), reported, "{typed:?}");
        }
        assert_ne!(g.normalize_prompt("a\tb"), g.normalize_prompt("a    b"));
    }

    #[test]
    fn argv_adopts_spex_id_and_resumes_it() {
        let g = GeminiTerminal;
        let args = vec!["-m".to_owned(), "gemini-2.5-flash".to_owned()];
        let bin = Path::new("/bin/gemini");
        assert_eq!(
            g.host_argv(bin, &args, "u-1").unwrap(),
            [
                "/bin/gemini",
                "--session-id",
                "u-1",
                "-m",
                "gemini-2.5-flash"
            ]
        );
        assert_eq!(
            g.resume_argv(bin, &args, "u-1").unwrap(),
            ["/bin/gemini", "--resume", "u-1", "-m", "gemini-2.5-flash"]
        );
        let (paste, pause, enter) = g.paste("hi\x1b[201~").unwrap();
        assert_eq!(paste, b"\x1b[200~hi\xe2\x90\x9b[201~\x1b[201~");
        assert!(pause >= Duration::from_millis(100));
        assert_eq!(enter, b"\r");
    }
}
