//! The terminal-host facet: how spex runs a harness's interactive TUI under its own PTY host
//! and reads its screen (the argv that starts and resumes it, when it is ready, what its title
//! and screen say it does, the keys that interrupt, clear, exit and submit).

use std::path::Path;
use std::time::Duration;

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

/// A scrubbing rule an adapter adds to a recording of its terminal, for text of its own
/// formats that spex's standard rules do not know (a folder named after the checkout, a file
/// name with a time in it): every match of `regex` becomes `replace`, or with `numbered` each
/// distinct match its own `replace` + number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScrubRule {
    pub name: String,
    /// A regular expression (the `regex` crate's syntax, ASCII classes).
    pub regex: String,
    pub replace: String,
    pub numbered: bool,
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

/// A harness's interactive terminal as spex hosts it. A method whose default is `None` or
/// empty is one the harness does not offer; how a prompt is typed and compared has no default.
pub trait TerminalHost: Sync {
    /// The argv that starts an interactive session whose id is `id` (the harness adopts the
    /// id spex chose), with the user's configured `args`, or `None` when spex starts this
    /// harness's sessions another way (its server) and hosts only a client of them.
    fn host_argv(&self, binary: &Path, args: &[String], id: &str) -> Option<Vec<String>>;
    /// The argv that resumes session `id` (its conversation) in a new terminal.
    fn resume_argv(&self, binary: &Path, args: &[String], id: &str) -> Option<Vec<String>>;
    /// Whether `screen` (the terminal's text) shows the harness ready for a prompt.
    fn ready_for_input(&self, screen: &str) -> bool;
    /// Whether `screen` (the terminal's text, or the last screen of a program that ended) is one
    /// of the harness's known screens that keep a session from taking prompts, and which.
    fn blocking_screen(&self, _screen: &str) -> Option<Blocker> {
        None
    }
    /// What the harness's terminal says it is doing, where its screen shows it.
    fn screen_activity(&self, title: &str, screen: &str) -> Option<Activity>;
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
    /// A prompt as the harness's prompt hook reports it once typed (its own normalisation:
    /// line breaks, tabs, trailing blanks), so a delivery is confirmed by comparing both sides
    /// through this.
    fn normalize_prompt(&self, text: &str) -> String;
    /// How to type a prompt: the bytes, the pause, then the bytes that submit it (for most,
    /// [`bracketed_paste`]); `None` where prompts are never typed into this terminal (they
    /// reach the session another way, such as its server, which confirms them).
    fn paste(&self, text: &str) -> Option<(Vec<u8>, Duration, Vec<u8>)>;
    /// Rules a recording of a session in checkout `tree` scrubs besides spex's own (run
    /// before the standard ones).
    fn scrub_rules(&self, _tree: &Path) -> Vec<ScrubRule> {
        Vec::new()
    }
    /// The permission mode the harness starts in with arguments `args` (after the binary),
    /// in the harness's own words; `None` when it does not say.
    fn permission_mode(&self, _args: &[String]) -> Option<String> {
        None
    }
}

/// The value of option `name` in `args` (`name value` or `name=value`).
pub fn option_value<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter().enumerate().find_map(|(i, a)| {
        if a == name {
            args.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix(name)?.strip_prefix('=')
        }
    })
}

/// A prompt typed as one bracketed paste (its text neutralised, see [`neutralize_paste`]),
/// `pause`, then Enter.
pub fn bracketed_paste(text: &str, pause: Duration) -> (Vec<u8>, Duration, Vec<u8>) {
    let mut bytes = b"\x1b[200~".to_vec();
    bytes.extend_from_slice(neutralize_paste(text).0.as_bytes());
    bytes.extend_from_slice(b"\x1b[201~");
    (bytes, pause, b"\r".to_vec())
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
