//! Answering: the facet a harness offers so spex can answer what a session waits on (a
//! permission, a question, a plan) from outside its terminal. What the choices are, how a
//! choice becomes keys at the hosted terminal or a response on the harness's server, and what
//! proves the harness took it are adapter facts; the engine (`runtime::answer`) only checks
//! that the attention is still the one named, sends, and waits for that proof.

use std::time::Duration;

use crate::store::session::{Attention, Session, Via};

/// An answer to one attention: a choice (`allow`, `allow-session`, `deny`, `cancel`, or a
/// question's option, by label or number) and an optional message for the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub choice: String,
    pub message: Option<String>,
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
}

/// The choice of `a` that `arg` names: its id, its label, or its number (1-based), as the
/// person reads them in `spex show`.
pub fn pick<'a>(a: &'a Attention, arg: &str) -> Option<&'a crate::store::session::Choice> {
    let n: Option<usize> = arg.parse().ok();
    a.choices.iter().enumerate().find_map(|(i, c)| {
        (c.id == arg || c.label.eq_ignore_ascii_case(arg) || n == Some(i + 1)).then_some(c)
    })
}
