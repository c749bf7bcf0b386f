//! Answering Gemini CLI's dialogs (docs/harnesses/facts/gemini.md §12, §14) in the terminal spex hosts: a
//! digit picks a permission dialog's option at once (Allow once, Allow for this session, No),
//! and a question's option; a question's free text goes through its `Enter a custom value`
//! option, typed, then Enter. Every step is guarded by what the screen must show. Its hooks
//! cannot answer (a `Notification` hook's output is ignored, and `BeforeTool`'s `allow` does not
//! skip the dialog, §7), so a session in a terminal spex does not host is answered there only.

use std::time::Duration;

use crate::seam::answer::{Answering, KeyStep, Response, dialog_on_screen};
use crate::store::session::{AnswerWay, Attention, AttentionKind, LaunchedBy, Session, Via};

pub struct GeminiAnswering;

/// What every permission dialog offers first (the shell, edit and MCP variants).
const PERMISSION_MARK: &str = "1. Allow once";
/// The question dialog's heading.
const QUESTION_MARK: &str = "Answer Questions";
/// The question dialog's option that takes free text, and its footer while it does.
const CUSTOM_OPTION: &str = "Enter a custom value";
const CUSTOM_FOOTER: &str = "Enter to submit";
/// Between typed text and its Enter: Gemini takes an Enter within 30 ms of a key as a newline.
const ENTER_PAUSE: Duration = Duration::from_millis(300);
/// Between picking the free-text option and typing into it.
const FIELD_PAUSE: Duration = Duration::from_millis(300);

/// The numbered options the screen shows inside the dialog's box: (number, text). An option
/// reads `│ ● 1. Allow once │` (the dot marks the highlighted one); a nested box (a diff, a
/// command) draws its own `│` inside, which no option has.
fn options(screen: &str) -> Vec<(u32, String)> {
    screen
        .lines()
        .filter_map(|l| {
            let t = l.trim();
            let t = t.strip_prefix('│').unwrap_or(t);
            let t = t.strip_suffix('│').unwrap_or(t).trim();
            let t = t.strip_prefix('●').unwrap_or(t).trim_start();
            let (n, rest) = t.split_once(". ")?;
            let n: u32 = n.parse().ok().filter(|n| (1..=9).contains(n))?;
            Some((n, rest.trim().to_owned()))
        })
        .collect()
}

/// Texts that tell this attention's dialog from any other: the dialog's own mark and what it
/// asks about (the command's first 30 characters, the file's name, the question's first 40).
fn marks(a: &Attention) -> Vec<String> {
    if a.kind == Some(AttentionKind::Question) {
        let mut out = vec![QUESTION_MARK.to_owned()];
        if let Some(q) = a.questions.first() {
            out.push(q.question.chars().take(40).collect());
        }
        return out;
    }
    let mut out = vec![PERMISSION_MARK.to_owned()];
    let subject = a.text.lines().next().unwrap_or_default().trim();
    // An edit's attention names the file's path; the dialog its name (`Writing to hello.txt`).
    let subject = if subject.starts_with('/') {
        subject.rsplit('/').next().unwrap_or(subject)
    } else {
        subject
    };
    let head: String = subject.chars().take(30).collect();
    if !head.trim().is_empty() {
        out.push(head.trim().to_owned());
    }
    out
}

fn step(expect: &[String], keys: Vec<u8>, pause: Duration) -> KeyStep {
    KeyStep {
        expect: expect.to_vec(),
        keys,
        pause,
    }
}

/// Whether spex answers this question with keys: one question offering options.
fn keys_answer(a: &Attention) -> bool {
    a.questions.len() == 1
        && a.questions
            .iter()
            .all(|q| !q.multi_select && !q.options.is_empty())
}

impl Answering for GeminiAnswering {
    fn via(&self, a: &Attention, s: &Session) -> Via {
        if s.launched_by != LaunchedBy::Spex {
            return Via {
                how: AnswerWay::TerminalOnly,
                why: Some("the session runs in a terminal spex does not host, and Gemini CLI's hooks cannot answer its dialogs".into()),
            };
        }
        if a.kind == Some(AttentionKind::Question) && !keys_answer(a) {
            return Via {
                how: AnswerWay::TerminalOnly,
                why: Some("several questions, a multi-select or a question without options: spex answers one question with options with keys".into()),
            };
        }
        Via {
            how: AnswerWay::Keys,
            why: None,
        }
    }

    fn shows_dialog(&self, a: &Attention, screen: &str) -> bool {
        dialog_on_screen(&marks(a), screen).is_ok()
    }

    fn keys(&self, a: &Attention, r: &Response, screen: &str) -> Result<Vec<KeyStep>, String> {
        let expect = marks(a);
        dialog_on_screen(&expect, screen)?;
        let opts = options(screen);
        let find = |label: &str| {
            opts.iter()
                .find(|(_, t)| t.starts_with(label))
                .map(|(n, _)| *n)
        };
        if a.kind == Some(AttentionKind::Question) {
            let q = a.questions.first().ok_or("the question has no options")?;
            if r.choice == "deny" {
                return Err("a question is answered, or cancelled at its terminal (Esc)".into());
            }
            let answer = r.answers.first().ok_or("no answer was given")?;
            if let Some(i) = q.options.iter().position(|o| o == answer) {
                // The screen numbers the options in the order the tool gave them.
                let n = u32::try_from(i + 1).map_err(|e| e.to_string())?;
                if find(answer) != Some(n) {
                    return Err(format!("the screen does not show option {n}. {answer}"));
                }
                return Ok(vec![step(
                    &expect,
                    n.to_string().into_bytes(),
                    Duration::ZERO,
                )]);
            }
            let n = find(CUSTOM_OPTION).ok_or("the screen shows no option for free text")?;
            let text = crate::seam::terminal::neutralize_paste(answer)
                .0
                .replace(['\n', '\r', '\t'], " ");
            return Ok(vec![
                step(&expect, n.to_string().into_bytes(), FIELD_PAUSE),
                step(
                    &[CUSTOM_FOOTER.to_owned()],
                    text.clone().into_bytes(),
                    ENTER_PAUSE,
                ),
                step(
                    &[CUSTOM_FOOTER.to_owned(), text],
                    b"\r".to_vec(),
                    Duration::ZERO,
                ),
            ]);
        }
        if r.message.is_some() {
            return Err("Gemini CLI's dialog takes no message: answer it, then `spex deliver` what the agent should do".into());
        }
        let label = match r.choice.as_str() {
            "allow" => "Allow once",
            "allow-session" => "Allow for this session",
            "deny" => "No, suggest changes",
            other => {
                return Err(format!(
                    "`{other}` is not answered from outside the terminal (spex answers allow, allow-session and deny)"
                ));
            }
        };
        let n = find(label).ok_or_else(|| format!("the screen shows no `{label}` option"))?;
        Ok(vec![step(
            &expect,
            n.to_string().into_bytes(),
            Duration::ZERO,
        )])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::common::wire::choice;
    use crate::store::session::Question;

    /// The dialogs as 0.61.0 draws them at 110 columns (captured under spex's host).
    const SHELL: &str = "│ ? Shell  echo shell-ran > shell_out.txt; cat shell_out.txt      │\n│ ╭──────────╮ │\n│ │ echo shell-ran > shell_out.txt; cat shell_out.txt │ │\n│ ╰──────────╯ │\n│ Allow execution of [Shell]?     │\n│ Redirection detected. To auto-accept, press Shift+Tab     │\n│                    │\n│ ● 1. Allow once          │\n│   2. Allow for this session       │\n│   3. No, suggest changes (esc)       │\n╰──────────╯";
    const EDIT: &str = "│ ? WriteFile  Writing to hello.txt     │\n│ ╭──────╮ │\n│ │ 1 hello from fake model   │ │\n│ ╰──────╯ │\n│ Apply this change?    │\n│                       │\n│ ● 1. Allow once       │\n│   2. Allow for this session   │\n│   3. Modify with external editor   │\n│   4. No, suggest changes (esc)    │\n╰──────╯";
    const ASK: &str = "│ Answer Questions       │\n│                        │\n│ Which colour?          │\n│                        │\n│ ● 1.  red              │\n│       warm             │\n│   2.  blue             │\n│       cold             │\n│   3.  Enter a custom value     │\n│                        │\n│ Enter to select · ↑/↓ to navigate · Esc to cancel     │";

    fn permission(text: &str, edit: bool) -> Attention {
        let mut choices = vec![
            choice("allow", "Allow once", false),
            choice("allow-session", "Allow for this session", false),
        ];
        if edit {
            choices.push(choice("edit", "Modify with external editor", false));
        }
        choices.push(choice("deny", "No, suggest changes", false));
        Attention {
            kind: Some("permission".into()),
            text: text.into(),
            choices,
            ..Attention::default()
        }
    }

    fn resp(choice: &str, answers: &[&str]) -> Response {
        Response {
            choice: choice.into(),
            message: None,
            by: "cli",
            answers: answers.iter().map(|a| (*a).to_owned()).collect(),
        }
    }

    fn keys(a: &Attention, r: &Response, screen: &str) -> Result<Vec<Vec<u8>>, String> {
        GeminiAnswering
            .keys(a, r, screen)
            .map(|s| s.into_iter().map(|k| k.keys).collect())
    }

    #[test]
    fn a_digit_answers_the_permission_dialog_it_names() {
        let shell = permission("echo shell-ran > shell_out.txt; cat shell_out.txt", false);
        assert_eq!(
            keys(&shell, &resp("allow", &[]), SHELL),
            Ok(vec![b"1".to_vec()])
        );
        assert_eq!(
            keys(&shell, &resp("allow-session", &[]), SHELL),
            Ok(vec![b"2".to_vec()])
        );
        assert_eq!(
            keys(&shell, &resp("deny", &[]), SHELL),
            Ok(vec![b"3".to_vec()])
        );
        let edit = permission("/home/dev/proj/hello.txt", true);
        assert_eq!(
            keys(&edit, &resp("deny", &[]), EDIT),
            Ok(vec![b"4".to_vec()])
        );
        assert_eq!(
            keys(&edit, &resp("allow", &[]), EDIT),
            Ok(vec![b"1".to_vec()])
        );
        assert!(keys(&edit, &resp("edit", &[]), EDIT).is_err());
        // Another dialog, or none: nothing is typed.
        assert!(keys(&shell, &resp("allow", &[]), EDIT).is_err());
        assert!(keys(&edit, &resp("allow", &[]), SHELL).is_err());
        let idle = " >   Type your message or @path/to/file";
        assert!(keys(&shell, &resp("allow", &[]), idle).is_err());
        let with_message = Response {
            message: Some("use make".into()),
            ..resp("deny", &[])
        };
        assert!(GeminiAnswering.keys(&shell, &with_message, SHELL).is_err());
        let g = GeminiAnswering;
        assert!(g.shows_dialog(&shell, SHELL) && !g.shows_dialog(&shell, EDIT));
        assert!(g.shows_dialog(&edit, EDIT) && !g.shows_dialog(&edit, idle));
    }

    #[test]
    fn a_question_takes_its_options_number_or_free_text() {
        let a = Attention {
            kind: Some("question".into()),
            questions: vec![Question {
                question: "Which colour?".into(),
                options: vec!["red".into(), "blue".into()],
                free_text: true,
                ..Question::default()
            }],
            ..Attention::default()
        };
        assert_eq!(
            keys(&a, &resp("2", &["blue"]), ASK),
            Ok(vec![b"2".to_vec()])
        );
        assert_eq!(
            keys(&a, &resp("red", &["red"]), ASK),
            Ok(vec![b"1".to_vec()])
        );
        let steps = GeminiAnswering
            .keys(&a, &resp("green\nplease", &["green\nplease"]), ASK)
            .unwrap();
        let typed: Vec<&[u8]> = steps.iter().map(|s| s.keys.as_slice()).collect();
        assert_eq!(typed, [b"3".as_slice(), b"green please", b"\r"]);
        // The Enter waits until the field shows the text, well after the last key.
        assert!(steps[2].expect.contains(&"green please".to_owned()));
        assert!(steps[1].pause >= Duration::from_millis(100));
        assert!(keys(&a, &resp("blue", &["blue"]), SHELL).is_err());
    }

    #[test]
    fn only_a_hosted_session_is_answered_with_keys() {
        let g = GeminiAnswering;
        let shell = permission("ls", false);
        let hosted = Session {
            launched_by: "spex".into(),
            ..Session::default()
        };
        let own = Session {
            launched_by: "user".into(),
            ..Session::default()
        };
        assert_eq!(g.via(&shell, &hosted).how, AnswerWay::Keys);
        let v = g.via(&shell, &own);
        assert_eq!(v.how, AnswerWay::TerminalOnly);
        assert!(v.why.is_some_and(|w| w.contains("hooks cannot answer")));
        let two = Attention {
            kind: Some("question".into()),
            questions: vec![Question::default(), Question::default()],
            ..Attention::default()
        };
        assert_eq!(g.via(&two, &hosted).how, AnswerWay::TerminalOnly);
    }
}
