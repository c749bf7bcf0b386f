//! Answering Claude Code's dialogs (docs/harnesses/facts/answering-claude.md): what a `PermissionRequest`
//! payload says the dialog offers, and the keys that answer it in the terminal spex hosts. A
//! digit alone picks an option, never followed by Enter (a late Enter approves the NEXT dialog,
//! §1.4); deny with a message walks to `No` with Down keys sent one at a time, Tab, the text,
//! Enter (§1.2). Every step is guarded by what the screen must show.

use std::time::Duration;

use serde_json::{Value, json};

use super::transcript;
use crate::adapters::common::wire::{choice, question_ask};
use crate::env::Env;
use crate::seam::answer::{Answering, KeyStep, Response, dialog_on_screen};
use crate::seam::event::Reply;
use crate::store::answers::Posted;
use crate::store::session::{AnswerWay, Attention, AttentionKind, LaunchedBy, Session, Via};

pub struct ClaudeAnswering;

/// The attention a `PermissionRequest` opens: a question's options (`AskUserQuestion`), a plan
/// to approve (`ExitPlanMode`), or a tool's permission; allow-for-the-session only where the
/// payload carries `permission_suggestions` (the dialog's option 2 is built from them, §1.1).
pub fn ask(tool: &str, input: &Value, payload: &Value) -> Attention {
    match tool {
        "AskUserQuestion" => question_ask(input, None),
        "ExitPlanMode" => Attention {
            kind: Some(AttentionKind::Plan),
            choices: vec![
                choice("allow", "Yes, manually approve edits", false),
                choice("deny", "Tell Claude what to change", true),
            ],
            ..Attention::default()
        },
        _ => {
            let mut choices = vec![choice("allow", "Yes", false)];
            if payload
                .get("permission_suggestions")
                .and_then(Value::as_array)
                .is_some_and(|s| !s.is_empty())
            {
                choices.push(choice(
                    "allow-session",
                    "Yes, and don't ask again (the dialog's option 2)",
                    false,
                ));
            }
            choices.push(choice(
                "deny",
                "No, and tell Claude what to do differently",
                true,
            ));
            Attention {
                kind: Some(AttentionKind::Permission),
                choices,
                ..Attention::default()
            }
        }
    }
}

/// The dialog's footer: every one of the three dialogs shows it (§1.1, §2.1, §3).
const DIALOG_MARK: &str = "Esc to cancel";
/// How long the dialog needs between navigation keys (§1.2: 0.6-0.8 s verified).
const NAV_PAUSE: Duration = Duration::from_millis(600);

/// The numbered options the screen shows: (number, text, under the cursor).
fn options(screen: &str) -> Vec<(u32, String, bool)> {
    screen
        .lines()
        .filter_map(|l| {
            let t = l.trim_start();
            let (cursor, t) = match t.strip_prefix('❯') {
                Some(rest) => (true, rest.trim_start()),
                None => (false, t),
            };
            let (n, rest) = t.split_once(". ")?;
            let n: u32 = n.parse().ok().filter(|n| (1..=9).contains(n))?;
            Some((n, rest.trim().to_owned(), cursor))
        })
        .collect()
}

/// Texts that tell this attention's dialog from any other: the footer, and what it asks about
/// (the command's first line, a question's text, the plan's heading).
fn marks(a: &Attention) -> Vec<String> {
    let mut out = vec![DIALOG_MARK.to_owned()];
    match a.kind {
        Some(AttentionKind::Question) => {
            if let Some(q) = a.questions.first() {
                out.push(q.question.chars().take(40).collect());
            }
        }
        Some(AttentionKind::Plan) => out.push("Would you like to proceed?".into()),
        _ => {
            // `Bash: <command>`: the command as the dialog prints it, its first 30 characters
            // (a long one wraps).
            let subject = a.text.split_once(": ").map_or(a.text.as_str(), |(_, s)| s);
            let head: String = subject
                .lines()
                .next()
                .unwrap_or_default()
                .chars()
                .take(30)
                .collect();
            if !head.trim().is_empty() {
                out.push(head.trim().to_owned());
            }
        }
    }
    out
}

fn digit(n: u32, expect: &[String]) -> KeyStep {
    KeyStep {
        expect: expect.to_vec(),
        keys: n.to_string().into_bytes(),
        pause: Duration::ZERO,
    }
}

/// The hook that waits for an answer: it runs while the dialog is drawn and does not hold it,
/// and whoever decides first wins, a key at the terminal or the hook's decision (§0.1).
const WAITING_HOOK: &str = "PermissionRequest";

/// The decision a `PermissionRequest` hook prints for `answer` (§4.2): allow (for the session:
/// with the payload's own `permission_suggestions`, what the dialog's option 2 applies),
/// deny with a message (the turn goes on and the model gets it) or without one (the turn
/// stops, as the dialog's `No`), a question's answers as `updatedInput` (the tool's input,
/// `questions` included, plus `answers`: question text to label, labels joined `, `).
fn decision(payload: &Value, answer: &Posted) -> Option<Value> {
    let input = payload.get("tool_input").cloned().unwrap_or(Value::Null);
    let tool = payload.get("tool_name").and_then(Value::as_str);
    if tool == Some("AskUserQuestion") && !answer.answers.is_empty() {
        let questions = input.get("questions")?.as_array()?;
        if questions.len() != answer.answers.len() {
            return None;
        }
        let answers: serde_json::Map<String, Value> = questions
            .iter()
            .zip(&answer.answers)
            .map(|(q, a)| Some((q.get("question")?.as_str()?.to_owned(), a.clone().into())))
            .collect::<Option<_>>()?;
        let mut updated = input.as_object()?.clone();
        updated.insert("answers".into(), answers.into());
        return Some(json!({ "behavior": "allow", "updatedInput": updated }));
    }
    Some(match (answer.choice.as_str(), &answer.message) {
        ("allow", _) => json!({ "behavior": "allow" }),
        ("allow-session", _) => {
            let suggestions = payload.get("permission_suggestions")?.as_array()?;
            json!({ "behavior": "allow", "updatedPermissions": suggestions })
        }
        ("deny", Some(m)) => json!({ "behavior": "deny", "message": m }),
        ("deny", None) => {
            json!({ "behavior": "deny", "message": "denied with `spex deny`", "interrupt": true })
        }
        _ => return None,
    })
}

/// Whether the hook for `event` may wait for an answer.
pub(super) fn waits(event: &str) -> bool {
    event == WAITING_HOOK
}

impl Answering for ClaudeAnswering {
    fn hook_waits(&self, event: &str, _env: &Env) -> bool {
        waits(event)
    }

    fn hook_reply(&self, event: &str, payload: &Value, answer: &Posted) -> Option<Reply> {
        let decision = decision(payload, answer)?;
        let out = json!({ "hookSpecificOutput": { "hookEventName": event, "decision": decision } });
        Some(Reply {
            stdout: out.to_string(),
            ..Reply::default()
        })
    }

    fn confirmed(&self, s: &Session, a: &Attention, answer: &Posted) -> Option<String> {
        let (error, text) = transcript::result_of(s.transcript.as_deref()?, a.call_id.as_deref()?)?;
        let tool = a.tool.as_deref().unwrap_or("the tool");
        Some(match (answer.choice.as_str(), &answer.message) {
            _ if a.kind == Some(AttentionKind::Question) && !error => {
                "Claude got the answers".to_owned()
            }
            ("deny", Some(m)) if error && text.contains(m.as_str()) => {
                "Claude got the denial and its message".to_owned()
            }
            ("deny", _) if error => "the call was denied".to_owned(),
            ("allow" | "allow-session", _) => {
                if error {
                    format!("{tool} ran and failed")
                } else {
                    format!("{tool} ran")
                }
            }
            _ => return None,
        })
    }

    fn via(&self, a: &Attention, s: &Session) -> Via {
        if s.launched_by != LaunchedBy::Spex {
            return Via {
                how: AnswerWay::TerminalOnly,
                why: Some("the session runs in a terminal spex does not host, and no `PermissionRequest` hook waits for this answer (one waits `answering.hookWaitSecs` while its dialog is open)".into()),
            };
        }
        if a.kind == Some(AttentionKind::Question)
            && (a.questions.len() != 1 || a.questions.iter().any(|q| q.multi_select))
        {
            return Via {
                how: AnswerWay::TerminalOnly,
                why: Some("several questions or a multi-select: spex answers one single-choice question with keys".into()),
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

    #[expect(
        clippy::too_many_lines,
        reason = "the keys for each kind of dialog and each answer, one arm apiece, checked against the same screen"
    )]
    fn keys(&self, a: &Attention, r: &Response, screen: &str) -> Result<Vec<KeyStep>, String> {
        let expect = marks(a);
        dialog_on_screen(&expect, screen)?;
        let opts = options(screen);
        let find = |pred: &dyn Fn(&str) -> bool| opts.iter().find(|(_, t, _)| pred(t)).map(|o| o.0);
        if a.kind == Some(AttentionKind::Question) {
            let q = a.questions.first().ok_or("the question has no options")?;
            let n = r
                .choice
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=q.options.len()).contains(&(*n as usize)))
                .or_else(|| {
                    q.options
                        .iter()
                        .position(|o| o.eq_ignore_ascii_case(&r.choice))
                        .and_then(|i| u32::try_from(i + 1).ok())
                });
            let Some(n) = n else {
                return Err(format!(
                    "`{}` is none of the options: {}",
                    r.choice,
                    q.options.join(", ")
                ));
            };
            // The screen numbers the options in the order the tool gave them (§2.1).
            let label = &q.options[n as usize - 1];
            if !opts
                .iter()
                .any(|(m, t, _)| *m == n && t.starts_with(label.as_str()))
            {
                return Err(format!("the screen does not show option {n}. {label}"));
            }
            return Ok(vec![digit(n, &expect)]);
        }
        let yes = find(&|t| t == "Yes" || t.starts_with("Yes"))
            .ok_or("the screen shows no `Yes` option")?;
        match (r.choice.as_str(), &r.message) {
            ("allow", None) => {
                let n = if a.kind == Some(AttentionKind::Plan) {
                    find(&|t| t.contains("manually approve")).unwrap_or(yes)
                } else {
                    yes
                };
                Ok(vec![digit(n, &expect)])
            }
            ("allow-session", None) => {
                let n = find(&|t| t.starts_with("Yes,") && !t.contains("manually"))
                    .filter(|n| *n != yes || a.kind == Some(AttentionKind::Plan))
                    .ok_or("the dialog offers no allow-for-the-session option")?;
                Ok(vec![digit(n, &expect)])
            }
            ("deny", None) if a.kind != Some(AttentionKind::Plan) => {
                let n = find(&|t| t == "No" || t.starts_with("No"))
                    .ok_or("the screen shows no `No` option")?;
                Ok(vec![digit(n, &expect)])
            }
            ("deny", message) => {
                let message = message.as_deref().unwrap_or("no");
                let (n, label) = opts
                    .iter()
                    .find(|(_, t, _)| {
                        t == "No" || t.starts_with("No") || t.starts_with("Tell Claude")
                    })
                    .map(|(n, t, _)| (*n, t.clone()))
                    .ok_or("the screen shows no option to deny with a message")?;
                let cursor = opts.iter().find(|o| o.2).map_or(1, |o| o.0);
                let mut steps = Vec::new();
                // Navigation keys one at a time, each once the screen has caught up (§1.2).
                for at in cursor..n {
                    steps.push(KeyStep {
                        expect: [expect.clone(), vec![format!("❯ {at}.")]].concat(),
                        keys: b"\x1b[B".to_vec(),
                        pause: NAV_PAUSE,
                    });
                }
                let text = crate::seam::terminal::neutralize_paste(message)
                    .0
                    .replace(['\n', '\r'], " ");
                if label.starts_with("Tell Claude") {
                    // The plan dialog's option 3 takes the text in place (§3).
                    steps.push(KeyStep {
                        expect: vec![format!("❯ {n}.")],
                        keys: text.into_bytes(),
                        pause: NAV_PAUSE,
                    });
                } else {
                    steps.push(KeyStep {
                        expect: [expect.clone(), vec![format!("❯ {n}. No")]].concat(),
                        keys: b"\t".to_vec(),
                        pause: NAV_PAUSE,
                    });
                    steps.push(KeyStep {
                        expect: vec!["tell Claude what to do differently".into()],
                        keys: text.into_bytes(),
                        pause: NAV_PAUSE,
                    });
                }
                steps.push(KeyStep {
                    expect: vec![DIALOG_MARK.into()],
                    keys: b"\r".to_vec(),
                    pause: Duration::ZERO,
                });
                Ok(steps)
            }
            (other, Some(_)) if other != "deny" => Err(format!("`{other}` takes no message here")),
            (other, _) => Err(format!("`{other}` is not a choice of this dialog")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::session::Question;

    const BASH: &str = " Bash command\n\n   touch made_by_a.txt\n   Run the requested command\n\n Do you want to proceed?\n ❯ 1. Yes\n   2. Yes, and always allow access to proj/ from this project\n   3. No\n\n Esc to cancel · Tab to amend · ctrl+e to explain";

    fn bash() -> Attention {
        let mut a = ask(
            "Bash",
            &serde_json::json!({"command": "touch made_by_a.txt"}),
            &serde_json::json!({"permission_suggestions": [{"type": "setMode"}]}),
        );
        a.text = "Bash: touch made_by_a.txt".into();
        a
    }

    fn resp(choice: &str, message: Option<&str>) -> Response {
        Response {
            choice: choice.into(),
            message: message.map(str::to_owned),
            by: "cli",
            answers: Vec::new(),
        }
    }

    #[test]
    fn a_digit_alone_answers_and_only_the_dialog_it_names() {
        let c = ClaudeAnswering;
        let a = bash();
        let keys = |r| {
            c.keys(&a, &r, BASH)
                .map(|s| s.iter().map(|k| k.keys.clone()).collect::<Vec<_>>())
        };
        assert_eq!(keys(resp("allow", None)), Ok(vec![b"1".to_vec()]));
        assert_eq!(keys(resp("allow-session", None)), Ok(vec![b"2".to_vec()]));
        assert_eq!(keys(resp("deny", None)), Ok(vec![b"3".to_vec()]));
        let with = keys(resp("deny", Some("use make"))).unwrap();
        assert_eq!(
            with,
            vec![
                b"\x1b[B".to_vec(),
                b"\x1b[B".to_vec(),
                b"\t".to_vec(),
                b"use make".to_vec(),
                b"\r".to_vec()
            ]
        );
        let other = BASH.replace("touch made_by_a.txt", "rm -rf build");
        assert!(c.keys(&a, &resp("allow", None), &other).is_err());
        assert!(
            c.keys(&a, &resp("allow", None), "❯ 1\n? for shortcuts")
                .is_err()
        );
        assert!(c.shows_dialog(&a, BASH) && !c.shows_dialog(&a, &other));
    }

    #[test]
    fn the_waiting_hook_prints_claudes_decision_for_each_answer() {
        let posted = |choice: &str, message: Option<&str>, answers: &[&str]| Posted {
            attention: "a1".into(),
            choice: choice.into(),
            message: message.map(str::to_owned),
            answers: answers.iter().map(|a| (*a).to_owned()).collect(),
            ..Posted::default()
        };
        let bash = serde_json::json!({"tool_name": "Bash", "tool_input": {"command": "ls"},
            "permission_suggestions": [{"type": "addDirectories", "directories": ["/p"], "destination": "session"}]});
        let d = |p: &Value, a: &Posted| decision(p, a).map(|d| d.to_string());
        assert_eq!(
            d(&bash, &posted("allow", None, &[])).as_deref(),
            Some(r#"{"behavior":"allow"}"#)
        );
        assert_eq!(
            decision(&bash, &posted("allow-session", None, &[])).unwrap()["updatedPermissions"],
            bash["permission_suggestions"]
        );
        // Deny with a message keeps the turn going (the model gets it); without one the turn
        // stops, as the dialog's `No` (§4.2).
        assert_eq!(
            d(&bash, &posted("deny", Some("use make"), &[])).as_deref(),
            Some(r#"{"behavior":"deny","message":"use make"}"#)
        );
        assert_eq!(
            decision(&bash, &posted("deny", None, &[])).unwrap()["interrupt"],
            true
        );
        let ask = serde_json::json!({"tool_name": "AskUserQuestion", "tool_input": {"questions": [
            {"question": "Color?", "options": [{"label": "Red"}]},
            {"question": "Toppings?", "multiSelect": true, "options": [{"label": "Cheese"}]}]}});
        let got = decision(&ask, &posted("answer", None, &["Red", "Cheese, Olives"])).unwrap();
        // `questions` must stay in `updatedInput`, or Claude rejects it (§4.2).
        assert_eq!(
            got["updatedInput"]["questions"],
            ask["tool_input"]["questions"]
        );
        assert_eq!(
            got["updatedInput"]["answers"],
            serde_json::json!({"Color?": "Red", "Toppings?": "Cheese, Olives"})
        );
        assert_eq!(decision(&ask, &posted("answer", None, &["Red"])), None);
    }

    #[test]
    fn a_question_is_answered_by_its_options_number() {
        let screen = " ☐ Color\nWhich color do you prefer?\n❯ 1. Red\n     The color red\n  2. Blue\n     The color blue\n  3. Type something.\n  4. Chat about this\nEnter to select · ↑/↓ to navigate · Esc to cancel";
        let a = Attention {
            kind: Some("question".into()),
            questions: vec![Question {
                question: "Which color do you prefer?".into(),
                options: vec!["Red".into(), "Blue".into()],
                free_text: true,
                ..Question::default()
            }],
            ..Attention::default()
        };
        let c = ClaudeAnswering;
        assert_eq!(
            c.keys(&a, &resp("blue", None), screen).unwrap()[0].keys,
            b"2"
        );
        assert_eq!(c.keys(&a, &resp("1", None), screen).unwrap()[0].keys, b"1");
        assert!(c.keys(&a, &resp("green", None), screen).is_err());
    }
}
