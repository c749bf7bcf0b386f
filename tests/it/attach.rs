//! A person at the terminal: `spex attach` and an attached `spex launch` through a PTY the test
//! owns (support/term.rs), reading the screen and the modes left set, for as long as a person
//! would stay.

use std::process::Command;
use std::time::Duration;

use crate::support::term::{Modes, Term};

/// The test terminal itself: it answers a cursor-position query from where the cursor is,
/// types what the test sends, and reads back the modes and the line discipline a program left.
#[test]
fn term_driver_answers_queries_types_and_reads_modes() {
    let script = r#"printf 'abc\033[?25l\033[?2004h\033[?1000h\033=\033[?1h\033[?1049h'
stty raw -echo
printf 'abc\033[6n'
r=$(dd bs=1 count=6 2>/dev/null)
stty sane
printf 'got %s\r\n' "${r#?}"
read line
printf 'read %s\r\n' "$line"
stty raw
sleep 30"#;
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script])
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    let mut t = Term::spawn(&cmd, 10, 40);
    t.wait_for("got [1;4R", Duration::from_secs(10)).unwrap();
    t.send(b"hello\r");
    t.wait_for("read hello", Duration::from_secs(10)).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !t.modes().raw_termios && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        t.modes(),
        Modes {
            cursor_hidden: true,
            bracketed_paste: true,
            alternate_screen: true,
            mouse_reporting: true,
            application_keypad: true,
            application_cursor: true,
            raw_termios: true,
        },
        "{}",
        t.diag()
    );
    assert!(t.running());
    t.resize(20, 60);
    assert!(t.wait_exit(Duration::from_millis(100)).is_none());
}
