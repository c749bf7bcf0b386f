//! Answering: the facet a harness offers so spex can answer what a session waits on (a
//! permission, a question, a plan) from outside its terminal. What the choices are, how a
//! choice becomes keys at the hosted terminal or a response on the harness's server, and what
//! proves the harness took it are adapter facts; the engine (`runtime::answer`) only checks
//! that the attention is still the one named, sends, and waits for that proof.

use std::time::Duration;

use serde_json::Value;

use crate::env::Env;
use crate::seam::event::Reply;
use crate::store::answers::Posted;
use crate::store::session::{Attention, Session, Via};

/// An answer to one attention: a choice (`allow`, `allow-session`, `deny`, `cancel`, or a
/// question's option, by label or number) and an optional message for the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub choice: String,
    pub message: Option<String>,
    /// Where the answer came from (`cli`, `board`), recorded in the attention's closing event.
    pub by: &'static str,
    /// A question dialog's answers, one per question in order, as the harness takes them
    /// (option labels, several joined by `, `, or free text): see [`question_answers`].
    pub answers: Vec<String>,
}

/// One step of keys typed into the hosted terminal: sent only while the screen shows every
/// text in `expect` (the host checks and writes in one go), then a pause before the next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyStep {
    pub expect: Vec<String>,
    pub keys: Vec<u8>,
    pub pause: Duration,
}

/// What the harness's own evidence says became of an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmed {
    /// In a person's words: `the command ran`, `the request was declined`, `the dialog is gone`.
    pub what: String,
    /// When the harness said it took the answer, before what followed from it (a server's
    /// resolved request, before the command it allowed has run).
    pub taken: Option<std::time::Instant>,
}

pub trait Answering: Sync {
    /// How attention `a` of session `s` can be answered here.
    fn via(&self, a: &Attention, s: &Session) -> Via;
    /// The keys that give `response` to the dialog of `a` as `screen` (the hosted terminal's
    /// text) shows it, each step guarded by what the screen must show; an error says why the
    /// screen does not show that dialog, or why the choice does not fit it.
    fn keys(
        &self,
        a: &Attention,
        response: &Response,
        screen: &str,
    ) -> Result<Vec<KeyStep>, String> {
        let _ = (a, response, screen);
        Err("this harness is not answered with keys".into())
    }
    /// Whether `screen` still shows the dialog of `a` (so an answer has not yet been taken).
    fn shows_dialog(&self, a: &Attention, screen: &str) -> bool {
        let _ = (a, screen);
        false
    }
    /// Whether the hook for `event` waits for an answer from elsewhere to the attention it
    /// raises (see `dispatch::wait`). Called on every hook: keep it a comparison.
    fn hook_waits(&self, event: &str, env: &Env) -> bool {
        let _ = (event, env);
        false
    }
    /// Whether the hook for `event` waits for an answer from elsewhere only while the person
    /// is away (`spex away on`): for a dialog nothing else can answer, where a waiting hook
    /// holds the harness's own prompt back. `away` reads away mode (a file): call it last,
    /// after the comparisons, so the hook path pays for it only where it can matter.
    fn away_waits(&self, event: &str, env: &Env, away: &dyn Fn() -> bool) -> bool {
        let _ = (event, env, away);
        false
    }
    /// Whether a waiting hook can give the harness `response` to `a` (an error says why not,
    /// before anything is handed to it).
    fn hook_takes(&self, a: &Attention, response: &Response) -> Result<(), String> {
        let _ = (a, response);
        Ok(())
    }
    /// What the waiting hook for `event` (its payload `payload`) prints to give the harness
    /// `answer`; `None` when the answer does not fit (then nothing is printed).
    fn hook_reply(&self, event: &str, payload: &Value, answer: &Posted) -> Option<Reply> {
        let _ = (event, payload, answer);
        None
    }
    /// What the harness's own record (its transcript) says became of `answer` to `a`, once a
    /// waiting hook took it: `Some` with it in a person's words when it shows the harness
    /// applied it (the model got the denial, the answers), `None` while it does not.
    fn confirmed(&self, s: &Session, a: &Attention, answer: &Posted) -> Option<String> {
        let _ = (s, a, answer);
        None
    }
}

/// Whether `screen` shows every text of `expect` (a dialog's marks): an error naming the first
/// it lacks, for [`Answering::keys`].
pub fn dialog_on_screen(expect: &[String], screen: &str) -> Result<(), String> {
    match expect.iter().find(|m| !screen.contains(m.as_str())) {
        Some(missing) => Err(format!(
            "the session's screen does not show this dialog (no `{missing}` on it)"
        )),
        None => Ok(()),
    }
}

/// The choice of `a` that `arg` names: its id, its label, or its number (1-based), as the
/// person reads them in `spex show`.
pub fn pick<'a>(a: &'a Attention, arg: &str) -> Option<&'a crate::store::session::Choice> {
    let n: Option<usize> = arg.parse().ok();
    a.choices.iter().enumerate().find_map(|(i, c)| {
        (c.id == arg || c.label.eq_ignore_ascii_case(arg) || n == Some(i + 1)).then_some(c)
    })
}

/// The answers `args` give the questions of `a`, one argument per question in order: an
/// option by its label (any case) or number; for a multi-select several, comma-separated
/// (`Cheese,Basil` or `1,3`), joined `, ` as the harnesses take them; or free text where the
/// question takes it. An error says which argument fits no option.
pub fn question_answers(a: &Attention, args: &[String]) -> Result<Vec<String>, String> {
    if args.len() != a.questions.len() {
        let asked: Vec<String> = a
            .questions
            .iter()
            .map(|q| format!("\"{}\"", q.question))
            .collect();
        return Err(format!(
            "attention `{}` asks {} question(s), and {} answer(s) were given: one per question, in order ({})",
            a.id.as_deref().unwrap_or("?"),
            a.questions.len(),
            args.len(),
            asked.join(", ")
        ));
    }
    let option = |q: &crate::store::session::Question, arg: &str| -> Option<String> {
        let arg = arg.trim();
        let n: Option<usize> = arg.parse().ok();
        q.options
            .iter()
            .enumerate()
            .find(|(i, o)| o.eq_ignore_ascii_case(arg) || n == Some(i + 1))
            .map(|(_, o)| o.clone())
    };
    a.questions
        .iter()
        .zip(args)
        .map(|(q, arg)| {
            if q.multi_select {
                let picked: Option<Vec<String>> = arg.split(',').map(|p| option(q, p)).collect();
                return picked.filter(|p| !p.is_empty()).map(|p| p.join(", ")).ok_or_else(|| {
                    format!(
                        "`{arg}` is not among the options of \"{}\" (a multi-select: give options, comma-separated, from: {})",
                        q.question,
                        q.options.join(", ")
                    )
                });
            }
            match option(q, arg) {
                Some(o) => Ok(o),
                None if q.free_text && !arg.trim().is_empty() => Ok(arg.clone()),
                None => Err(format!(
                    "`{arg}` is none of the options of \"{}\": {}",
                    q.question,
                    q.options.join(", ")
                )),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::session::Question;

    #[test]
    fn question_answers_take_labels_numbers_several_and_free_text() {
        let q = |question: &str, multi: bool, free: bool| Question {
            question: question.into(),
            options: vec!["Cheese".into(), "Olives".into(), "Basil".into()],
            multi_select: multi,
            free_text: free,
            ..Question::default()
        };
        let a = Attention {
            questions: vec![
                q("One?", false, true),
                q("Many?", true, true),
                q("Strict?", false, false),
            ],
            ..Attention::default()
        };
        let args = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            question_answers(&a, &args(&["olives", "1, basil", "3"])),
            Ok(args(&["Olives", "Cheese, Basil", "Basil"]))
        );
        assert_eq!(
            question_answers(&a, &args(&["anything goes", "2", "Cheese"])),
            Ok(args(&["anything goes", "Olives", "Cheese"]))
        );
        // A multi-select takes options only; a question without free text too; one per question.
        assert!(question_answers(&a, &args(&["x", "Cheese,Ham", "1"])).is_err());
        assert!(question_answers(&a, &args(&["x", "1", "Ham"])).is_err());
        assert!(question_answers(&a, &args(&["x", "1"])).is_err());
    }
}
