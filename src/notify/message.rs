//! What one notification says: built from a stream line and the session's record, every text
//! of the session's made one line with control characters escaped (`crate::text`) and cut at
//! a character boundary.

use serde::Serialize;
use serde_json::Value;

use crate::store::session::{Attention, Session, ellipsis};

/// The longest a text field runs (characters).
pub const TEXT_MAX: usize = 300;
/// The longest one choice or option label runs.
pub const LABEL_MAX: usize = 60;

/// One notification, as a command gets it on stdin and the `json` webhook in its body.
#[expect(
    clippy::struct_field_names,
    reason = "ntfy and the webhook's readers call the body `message`"
)]
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Message {
    /// `needs_attention`, `failed`, `turn_end`, `exited`, `summary` or `test`.
    pub event: String,
    /// The project's folder name, and its key in the store.
    pub project: String,
    pub project_key: String,
    pub session: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handle: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub harness: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headline: Option<String>,
    pub title: String,
    pub message: String,
    /// The attention it is about (`a3`), its kind and what it asks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attention: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<ChoiceOut>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub questions: Vec<QuestionOut>,
    /// Answer links, one per choice offered (see `links`), when a public URL is configured
    /// (none for several questions: one answer must answer them all, on the board).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<LinkOut>,
    /// The board's page opened at this session (`<public-url>/#session=<key>`): where free text,
    /// several questions and the choices past a channel's limit are answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub view: Option<String>,
    /// The sessions a summary stands for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sessions: Vec<String>,
    pub time: String,
    /// The answers one tap gives ([`taps`]): what answer links and desktop buttons offer. Kept
    /// in this process, never sent.
    #[serde(skip)]
    pub taps: Vec<Tap>,
    /// The attention's [`super::links::digest`] when this was written: an answer given through
    /// it is refused once the attention asks something else. Never sent.
    #[serde(skip)]
    pub digest: Option<String>,
    /// About another machine's session (`notify::remote`): answered over SSH through a link,
    /// never in this process. Never sent.
    #[serde(skip)]
    pub remote: bool,
}

/// One answer a single tap gives: the choice `spex answer` takes, and its label (cleaned).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tap {
    pub choice: String,
    pub label: String,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct ChoiceOut {
    pub id: String,
    pub label: String,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct QuestionOut {
    pub question: String,
    pub options: Vec<String>,
    /// An answer of one's own is accepted besides the options.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub free_text: bool,
    /// Several options may be picked together.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub multi_select: bool,
}

impl Message {
    /// Whether the attention takes more than one tap on one option: several questions, an
    /// answer of one's own, or several options together (the board answers those).
    pub fn needs_board(&self) -> bool {
        self.questions.len() > 1 || self.questions.iter().any(|q| q.free_text || q.multi_select)
    }
}

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct LinkOut {
    pub label: String,
    pub choice: String,
    pub url: String,
}

/// `text` as one safe line: line breaks and tabs become spaces, other control characters
/// visible escapes, cut to `max` characters.
pub fn clean(text: &str, max: usize) -> String {
    let flat: String = text
        .trim()
        .chars()
        .map(|c| {
            if matches!(c, '\n' | '\r' | '\t') {
                ' '
            } else {
                c
            }
        })
        .collect();
    ellipsis(&crate::text::visible(&flat), max)
}

/// The project's name as people know it: its main checkout's folder name.
pub fn project_name(s: &Session) -> String {
    s.project.file_name().map_or_else(
        || s.project.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// `handle (name)`, or the handle alone.
fn who(s: &Session) -> String {
    let label = clean(s.label(), 40);
    match &s.name {
        Some(n) => format!("{label} ({})", clean(n, 40)),
        None => label,
    }
}

/// A message about session `s` (its fields filled), with this title and body.
fn base(event: &str, key: &str, s: &Session, title: String, body: String) -> Message {
    Message {
        event: event.into(),
        project: clean(&project_name(s), 80),
        project_key: key.into(),
        session: s.id.clone(),
        handle: s.handle.as_deref().map(|h| clean(h, 40)),
        name: s.name.as_deref().map(|n| clean(n, 80)),
        harness: s.harness.clone(),
        headline: s.headline.as_deref().map(|h| clean(h, TEXT_MAX)),
        title,
        message: body,
        time: crate::store::now_rfc3339(),
        ..Message::default()
    }
}

/// The notification for attention `a` of session `s`: what it asks, with its real choices.
pub fn attention(key: &str, s: &Session, a: &Attention) -> Message {
    let failed = a.reason.as_str() == "turn_failed";
    let (event, verb) = if failed {
        ("failed", "turn failed")
    } else {
        ("needs_attention", a.reason.as_str())
    };
    let title = format!(
        "{} · {} needs you: {verb}",
        clean(&project_name(s), 40),
        who(s)
    );
    let question = clean(&a.text, TEXT_MAX);
    let choices: Vec<ChoiceOut> = a
        .choices
        .iter()
        .map(|c| ChoiceOut {
            id: clean(&c.id, LABEL_MAX),
            label: clean(&c.label, LABEL_MAX),
        })
        .collect();
    let questions: Vec<QuestionOut> = a
        .questions
        .iter()
        .map(|q| QuestionOut {
            question: clean(&q.question, TEXT_MAX),
            options: q.options.iter().map(|o| clean(o, LABEL_MAX)).collect(),
            free_text: q.free_text,
            multi_select: q.multi_select,
        })
        .collect();
    let mut body = question.clone();
    for q in &questions {
        if q.question != question {
            body.push_str(&format!("\n{}", q.question));
        }
        if !q.options.is_empty() {
            body.push_str(&format!("\n[{}]", q.options.join(" | ")));
        }
    }
    if !choices.is_empty() {
        let labels: Vec<&str> = choices.iter().map(|c| c.label.as_str()).collect();
        body.push_str(&format!("\n[{}]", labels.join(" | ")));
    }
    if let Some(h) = s.headline.as_deref().filter(|h| !h.trim().is_empty()) {
        body.push_str(&format!("\n— {}", clean(h, 120)));
    }
    Message {
        attention: a.id.clone(),
        kind: a.kind.as_ref().map(|k| k.as_str().to_owned()),
        question: Some(question),
        choices,
        questions,
        taps: taps(a),
        digest: Some(super::links::digest(a)),
        ..base(event, key, s, title, body)
    }
}

/// The answers one tap gives to `a`: its choices, else its one question's options; none for
/// several questions (one answer must answer them all: the board or the CLI does).
fn taps(a: &Attention) -> Vec<Tap> {
    let raw: Vec<(&str, &str)> = match (a.choices.as_slice(), a.questions.as_slice()) {
        ([], [q]) => q.options.iter().map(|o| (o.as_str(), o.as_str())).collect(),
        (_, [_, _, ..]) => Vec::new(),
        (choices, _) => choices
            .iter()
            .map(|c| (c.id.as_str(), c.label.as_str()))
            .collect(),
    };
    raw.into_iter()
        .map(|(choice, label)| Tap {
            choice: choice.to_owned(),
            label: clean(label, LABEL_MAX),
        })
        .collect()
}

/// The notification for a stream line of kind `turn.completed` or `session.exited`.
pub fn lifecycle(event: &str, key: &str, s: &Session, line: &Value) -> Message {
    let what = match event {
        "exited" => format!(
            "exited{}",
            line["reason"]
                .as_str()
                .map(|r| format!(" ({})", clean(r, 60)))
                .unwrap_or_default()
        ),
        _ => "finished its turn".to_owned(),
    };
    let title = format!("{} · {} {what}", clean(&project_name(s), 40), who(s));
    let body = s
        .headline
        .as_deref()
        .map_or_else(|| what.clone(), |h| clean(h, TEXT_MAX));
    base(event, key, s, title, body)
}

/// The notification that a rate-limit window of `s`'s harness rose past a threshold
/// (`text` says which and how far).
pub fn limits(key: &str, s: &Session, text: &str) -> Message {
    let title = format!(
        "{} · {} rate limit: {}",
        clean(&project_name(s), 40),
        clean(&s.harness, 20),
        clean(text, 80)
    );
    base("limits", key, s, title, clean(text, TEXT_MAX))
}

/// One message for several turn ends that came within the dwell.
pub fn summary(parts: &[Message]) -> Message {
    let names: Vec<String> = parts
        .iter()
        .map(|m| {
            format!(
                "{}/{}",
                m.project,
                m.handle.as_deref().unwrap_or(&m.session)
            )
        })
        .collect();
    Message {
        event: "summary".into(),
        title: format!("{} sessions finished their turns", parts.len()),
        message: names.join(", "),
        sessions: parts.iter().map(|m| m.session.clone()).collect(),
        time: crate::store::now_rfc3339(),
        ..Message::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::session::{AttentionKind, Choice};

    #[test]
    fn a_permission_names_the_session_and_its_choices_with_control_characters_escaped() {
        let mut a = Attention::new(
            AttentionKind::Permission,
            "Bash: echo \u{1b}]0;pwned\u{7}\nrm -rf x",
            "t",
        );
        a.id = Some("a1".into());
        a.choices = vec![
            Choice {
                id: "allow".into(),
                label: "Yes".into(),
                message: false,
            },
            Choice {
                id: "deny".into(),
                label: "No".into(),
                message: false,
            },
        ];
        let s = Session {
            id: "0123".into(),
            handle: Some("k7".into()),
            name: Some("fixer".into()),
            project: "/src/webapp".into(),
            ..Session::default()
        };
        let m = attention("key", &s, &a);
        assert!(
            m.title.contains("webapp") && m.title.contains("k7 (fixer)"),
            "{}",
            m.title
        );
        assert!(
            !m.message.contains('\u{1b}') && !m.message.contains('\u{7}'),
            "{}",
            m.message
        );
        assert!(m.message.contains("[Yes | No]"), "{}", m.message);
        assert_eq!(m.choices.len(), 2);
        let long = "é".repeat(1000);
        let c = clean(&long, 10);
        assert_eq!(c.chars().count(), 10);
    }

    fn question(options: &[&str]) -> crate::store::session::Question {
        crate::store::session::Question {
            options: options.iter().map(|o| (*o).to_owned()).collect(),
            question: "Which?".into(),
            ..Default::default()
        }
    }

    /// What answer links and desktop buttons offer: the choices, else the one question's
    /// options, none for several questions; labels cleaned, choices as the harness names them.
    #[test]
    fn one_tap_answers_are_the_choices_else_the_one_questions_options() {
        let mut a = Attention::new(AttentionKind::Question, "Which?", "t");
        a.questions = vec![question(&["Blue", "Red\nish"])];
        let got: Vec<(String, String)> =
            taps(&a).into_iter().map(|t| (t.choice, t.label)).collect();
        assert_eq!(
            got,
            [
                ("Blue".to_owned(), "Blue".to_owned()),
                ("Red\nish".to_owned(), "Red ish".to_owned())
            ]
        );
        a.questions.push(question(&["Small"]));
        assert!(
            taps(&a).is_empty(),
            "several questions: one tap answers none"
        );
        a.questions.clear();
        a.choices = vec![Choice {
            id: "allow_always".into(),
            label: "Yes, and don't ask again".into(),
            message: false,
        }];
        let t = &taps(&a)[0];
        assert_eq!(
            (t.choice.as_str(), t.label.as_str()),
            ("allow_always", "Yes, and don't ask again")
        );
    }
}
