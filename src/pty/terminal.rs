//! The terminal model: what a screen attached to the program would show (text, cursor, title),
//! and the replies to the queries a TUI sends at start (device attributes, version, cursor
//! position, colors), so a program with no terminal attached never stalls waiting for them.

use serde::{Deserialize, Serialize};

/// How spex identifies itself to `XTVERSION`.
const VERSION_REPLY: &str = concat!("\x1bP>|spex(", env!("CARGO_PKG_VERSION"), ")\x1b\\");

#[derive(Debug, Default)]
struct Callbacks {
    /// How many times the program rang the bell (`BEL`).
    bells: u64,
    /// Answer queries (no real terminal is attached to answer them).
    answering: bool,
    replies: Vec<u8>,
    title: String,
    /// Take `CSI 8 ; rows ; cols t` as the size of the screen watched (a watcher's model of
    /// a session: the host says so when the session is resized).
    follow_resize: bool,
}

fn param(params: &[&[u16]], i: usize) -> Option<u16> {
    params.get(i).and_then(|p| p.first()).copied()
}

impl vt100::Callbacks for Callbacks {
    fn resize(&mut self, screen: &mut vt100::Screen, (rows, cols): (u16, u16)) {
        if self.follow_resize && rows > 0 && cols > 0 {
            screen.set_size(rows, cols);
        }
    }

    fn set_window_title(&mut self, _: &mut vt100::Screen, title: &[u8]) {
        self.title = String::from_utf8_lossy(title).into_owned();
    }

    fn unhandled_csi(
        &mut self,
        screen: &mut vt100::Screen,
        i1: Option<u8>,
        i2: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        if !self.answering {
            return;
        }
        let reply = match (i1, i2, c, param(params, 0)) {
            // DA1: a VT220 with ANSI color.
            (None, None, 'c', None | Some(0)) => "\x1b[?62;22c".to_owned(),
            // DA2
            (Some(b'>'), None, 'c', None | Some(0)) => "\x1b[>0;0;0c".to_owned(),
            (Some(b'>'), None, 'q', None | Some(0)) => VERSION_REPLY.to_owned(),
            (None, None, 'n', Some(5)) => "\x1b[0n".to_owned(),
            (None | Some(b'?'), None, 'n', Some(6)) => {
                let (row, col) = screen.cursor_position();
                let private = if i1.is_some() { "?" } else { "" };
                format!("\x1b[{private}{};{}R", row + 1, col + 1)
            }
            // Kitty keyboard protocol: none of its flags.
            (Some(b'?'), None, 'u', _) => "\x1b[?0u".to_owned(),
            // DECRQM: every private mode reads "not recognized".
            (Some(b'?'), Some(b'$'), 'p', Some(mode)) => format!("\x1b[?{mode};0$y"),
            _ => return,
        };
        self.replies.extend_from_slice(reply.as_bytes());
    }

    fn unhandled_osc(&mut self, _: &mut vt100::Screen, params: &[&[u8]]) {
        if !self.answering || params.get(1) != Some(&&b"?"[..]) {
            return;
        }
        // Foreground and background color queries: white on black.
        let color = match params.first() {
            Some(&b"10") => "10;rgb:ffff/ffff/ffff",
            Some(&b"11") => "11;rgb:0000/0000/0000",
            _ => return,
        };
        self.replies
            .extend_from_slice(format!("\x1b]{color}\x1b\\").as_bytes());
    }

    fn audible_bell(&mut self, _: &mut vt100::Screen) {
        self.bells += 1;
    }
}

/// The screen as data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub rows: u16,
    pub cols: u16,
    /// `(row, col)`, zero-based.
    pub cursor: (u16, u16),
    pub title: String,
    /// Each row's text, trailing blanks removed.
    pub lines: Vec<String>,
    /// Rows that scrolled off the top, oldest first (only when asked for).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scrollback: Vec<String>,
}

pub struct Terminal {
    parser: vt100::Parser<Callbacks>,
}

/// The modes a program left the screen in, and the bells it rang, as a terminal would show them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Modes {
    pub alternate_screen: bool,
    pub cursor_visible: bool,
    pub bracketed_paste: bool,
    /// `none`, `press`, `press_release`, `button_motion` or `any_motion`.
    pub mouse: &'static str,
    pub bells: u64,
}

impl Terminal {
    /// A screen of `rows` x `cols` that answers queries.
    pub fn new(rows: u16, cols: u16) -> Terminal {
        Terminal::with_scrollback(rows, cols, 0)
    }

    /// [`Terminal::new`] that also keeps the last `lines` rows that scrolled off the top.
    pub fn with_scrollback(rows: u16, cols: u16, lines: usize) -> Terminal {
        Terminal {
            parser: vt100::Parser::new_with_callbacks(
                rows,
                cols,
                lines,
                Callbacks {
                    answering: true,
                    ..Callbacks::default()
                },
            ),
        }
    }

    /// Feeds program output; returns the replies to write back to the program (none while a
    /// real terminal answers for itself).
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.parser.process(bytes);
        std::mem::take(&mut self.parser.callbacks_mut().replies)
    }

    /// Whether this model answers queries (it should exactly while no terminal is attached).
    pub fn set_answering(&mut self, answering: bool) {
        self.parser.callbacks_mut().answering = answering;
    }

    pub fn resize(&mut self, rows: u16, cols: u16) {
        self.parser.screen_mut().set_size(rows, cols);
    }

    pub fn title(&self) -> &str {
        &self.parser.callbacks().title
    }

    /// Whether the program asked for bracketed paste.
    #[cfg(test)]
    pub fn bracketed_paste(&self) -> bool {
        self.parser.screen().bracketed_paste()
    }

    /// The modes the program set and the bells it rang so far.
    pub fn modes(&self) -> Modes {
        let screen = self.parser.screen();
        Modes {
            alternate_screen: screen.alternate_screen(),
            cursor_visible: !screen.hide_cursor(),
            bracketed_paste: screen.bracketed_paste(),
            mouse: match screen.mouse_protocol_mode() {
                vt100::MouseProtocolMode::None => "none",
                vt100::MouseProtocolMode::Press => "press",
                vt100::MouseProtocolMode::PressRelease => "press_release",
                vt100::MouseProtocolMode::ButtonMotion => "button_motion",
                vt100::MouseProtocolMode::AnyMotion => "any_motion",
            },
            bells: self.parser.callbacks().bells,
        }
    }

    /// The screen's text, rows joined by `\n`, trailing blanks removed.
    pub fn text(&self) -> String {
        self.snapshot().lines.join("\n").trim_end().to_owned()
    }

    pub fn snapshot(&self) -> Snapshot {
        let screen = self.parser.screen();
        let (rows, cols) = screen.size();
        Snapshot {
            rows,
            cols,
            cursor: screen.cursor_position(),
            title: self.title().to_owned(),
            lines: screen
                .rows(0, cols)
                .map(|r| r.trim_end().to_owned())
                .collect(),
            scrollback: Vec::new(),
        }
    }

    /// The last `n` (at most) rows that scrolled off the top, oldest first, trailing blanks
    /// removed.
    pub fn scrollback(&mut self, n: usize) -> Vec<String> {
        let screen = self.parser.screen_mut();
        let (rows, cols) = screen.size();
        let rows = usize::from(rows);
        // Scrolling the view back by `k` rows shows scrollback row `len - k` at the top.
        screen.set_scrollback(usize::MAX);
        let n = n.min(screen.scrollback());
        let mut out = Vec::with_capacity(n);
        let mut back = n;
        while back > 0 {
            screen.set_scrollback(back);
            let take = back.min(rows);
            out.extend(
                screen
                    .rows(0, cols)
                    .take(take)
                    .map(|r| r.trim_end().to_owned()),
            );
            back -= take;
        }
        screen.set_scrollback(0);
        out
    }

    /// The text of the row the cursor is on.
    pub fn cursor_line(&self) -> String {
        let screen = self.parser.screen();
        let (row, _) = screen.cursor_position();
        let cols = screen.size().1;
        screen
            .rows(0, cols)
            .nth(usize::from(row))
            .unwrap_or_default()
    }

    /// A model of a screen watched from elsewhere: `CSI 8 ; rows ; cols t` in what it is fed
    /// resizes it (see [`crate::runtime::protocol`]'s read-only `attach`); it answers nothing.
    pub fn watching(rows: u16, cols: u16) -> Terminal {
        let mut t = Terminal::new(rows, cols);
        t.set_answering(false);
        t.parser.callbacks_mut().follow_resize = true;
        t
    }

    /// Bytes that draw this screen on a terminal of `rows` x `cols` from its top left corner,
    /// as it is: cropped where that terminal is smaller, blank beyond it where larger; the
    /// cursor where this screen has it (hidden when that is outside, or this screen hides it).
    pub fn render(&self, rows: u16, cols: u16) -> Vec<u8> {
        let screen = self.parser.screen();
        let (own_rows, own_cols) = screen.size();
        let mut out = b"\x1b[?25l".to_vec();
        let mut drawn = screen.rows_formatted(0, own_cols.min(cols));
        for row in 0..rows {
            // The row blanked first: what this screen does not cover stays blank.
            out.extend_from_slice(format!("\x1b[{};1H\x1b[0m\x1b[2K", row + 1).as_bytes());
            if row < own_rows
                && let Some(line) = drawn.next()
            {
                out.extend_from_slice(&line);
                out.extend_from_slice(b"\x1b[0m");
            }
        }
        let (row, col) = screen.cursor_position();
        if row < rows && col < cols {
            out.extend_from_slice(format!("\x1b[{};{}H", row + 1, col + 1).as_bytes());
            if !screen.hide_cursor() {
                out.extend_from_slice(b"\x1b[?25h");
            }
        }
        out
    }

    /// Bytes that redraw the current screen on a terminal that attaches now.
    pub fn redraw(&self) -> Vec<u8> {
        self.parser.screen().state_formatted()
    }

    /// Bytes that give a terminal showing this screen back to the shell: every mode a program
    /// can leave set is reset (whatever this model saw, since a terminal may have been set
    /// before it was watched), the alternate screen is left, and the cursor, visible, waits at
    /// the start of a clean line below what the program drew, so a message printed next
    /// covers none of it. The model itself is left as the terminal then is.
    pub fn leave(&mut self) -> Vec<u8> {
        let mut out = LEAVE_MODES.to_vec();
        self.parser.process(LEAVE_MODES);
        let screen = self.parser.screen();
        let (rows, cols) = screen.size();
        let last_drawn = screen
            .rows(0, cols)
            .enumerate()
            .filter(|(_, text)| !text.trim().is_empty())
            .map(|(i, _)| u16::try_from(i).unwrap_or(u16::MAX))
            .last();
        let below = last_drawn
            .map_or(0, |r| r + 1)
            .max(screen.cursor_position().0);
        let place = if below < rows {
            format!("\x1b[{};1H", below + 1)
        } else {
            // Below the last row: scroll one line up, so the last row the program drew stays.
            format!("\x1b[{rows};1H\r\n")
        };
        self.parser.process(place.as_bytes());
        out.extend_from_slice(place.as_bytes());
        out
    }
}

/// Turns off what a TUI turns on: bracketed paste, mouse reporting (every protocol and
/// encoding), focus and color-scheme reports, application cursor keys and keypad, the kitty
/// keyboard protocol's pushed flags, text attributes; leaves the alternate screen; shows the
/// cursor.
const LEAVE_MODES: &[u8] = b"\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1015l\x1b[?1004l\x1b[?2031l\x1b[?1l\x1b>\x1b[<u\x1b[0m\x1b[?1049l\x1b[?25h";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_the_queries_a_tui_sends_at_start() {
        let mut t = Terminal::new(24, 80);
        let cases: [(&[u8], &str); 7] = [
            (b"\x1b[c", "\x1b[?62;22c"),
            (b"\x1b[>c", "\x1b[>0;0;0c"),
            (b"\x1b[>0q", VERSION_REPLY),
            (b"abc\x1b[6n", "\x1b[1;4R"),
            (b"\x1b[5n", "\x1b[0n"),
            (b"\x1b]11;?\x07", "\x1b]11;rgb:0000/0000/0000\x1b\\"),
            (b"\x1b[?2026$p", "\x1b[?2026;0$y"),
        ];
        for (query, reply) in cases {
            assert_eq!(
                String::from_utf8(t.feed(query)).unwrap(),
                reply,
                "{query:?}"
            );
        }
        t.set_answering(false);
        assert!(t.feed(b"\x1b[c").is_empty());
    }

    #[test]
    fn a_query_split_across_chunks_is_answered_once() {
        let mut t = Terminal::new(24, 80);
        assert!(t.feed(b"\x1b[").is_empty());
        assert_eq!(t.feed(b"c"), b"\x1b[?62;22c");
    }

    #[test]
    fn leaving_resets_every_mode_and_puts_the_cursor_on_a_clean_line() {
        let mut t = Terminal::new(6, 20);
        t.set_answering(false);
        // A program on the main screen: two lines drawn, the cursor moved back up into them.
        t.feed(b"one\r\ntwo\x1b[?25l\x1b[?2004h\x1b[?1000h\x1b[?1006h\x1b=\x1b[?1h\x1b[1;2H");
        let out = t.leave();
        let mut fresh = vt100::Parser::new(6, 20, 0);
        fresh
            .process(b"one\r\ntwo\x1b[?25l\x1b[?2004h\x1b[?1000h\x1b[?1006h\x1b=\x1b[?1h\x1b[1;2H");
        fresh.process(&out);
        let s = fresh.screen();
        assert!(!s.hide_cursor() && !s.bracketed_paste() && !s.application_keypad());
        assert!(!s.application_cursor() && !s.alternate_screen());
        assert_eq!(s.mouse_protocol_mode(), vt100::MouseProtocolMode::None);
        assert_eq!(s.cursor_position(), (2, 0), "the row below `two`");
        assert_eq!(t.snapshot().cursor, (2, 0));

        // A full screen: the cursor goes below the last row, which scrolls one line.
        let mut t = Terminal::new(3, 20);
        t.feed(b"a\r\nb\r\nc\x1b[H");
        let out = String::from_utf8(t.leave()).unwrap();
        assert!(out.ends_with("\x1b[3;1H\r\n"), "{out:?}");
        assert_eq!(t.snapshot().lines, ["b", "c", ""]);

        // A program on the alternate screen: left, back to the shell's screen below its text.
        let mut t = Terminal::new(5, 20);
        t.feed(b"$ spex attach\r\n\x1b[?1049h\x1b[2Jfull screen app\r\nmore");
        t.leave();
        assert_eq!(t.snapshot().lines[0], "$ spex attach");
        assert_eq!(t.snapshot().cursor, (1, 0));
    }

    #[test]
    fn keeps_what_scrolled_off_bounded() {
        let mut t = Terminal::with_scrollback(3, 20, 5);
        for i in 1..=10 {
            t.feed(format!("line {i}\r\n").as_bytes());
        }
        // Rows 9, 10 and the empty cursor row are on screen; 8 lines scrolled off, 5 kept.
        assert_eq!(t.snapshot().lines, ["line 9", "line 10", ""]);
        assert_eq!(t.scrollback(2), ["line 7", "line 8"]);
        assert_eq!(
            t.scrollback(100),
            ["line 4", "line 5", "line 6", "line 7", "line 8"]
        );
        // The view is back at the screen afterwards.
        assert_eq!(t.snapshot().lines, ["line 9", "line 10", ""]);
        assert!(Terminal::new(3, 20).scrollback(10).is_empty());
    }

    #[test]
    fn keeps_title_text_and_cursor() {
        let mut t = Terminal::new(5, 20);
        t.feed(b"\x1b]0;\xe2\x9c\xb3 Fix the bug\x07hello\r\n  world\x1b[?2004h");
        let s = t.snapshot();
        assert_eq!(s.title, "✳ Fix the bug");
        assert_eq!(s.lines[0], "hello");
        assert_eq!(s.lines[1], "  world");
        assert_eq!(s.cursor, (1, 7));
        assert!(t.bracketed_paste());
        assert_eq!(t.text(), "hello\n  world");
    }
}
