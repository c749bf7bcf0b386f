//! Assertion specs: `assertions.json` beside a cassette, bound to the recording it was written
//! against (`manifest.id` + `content_digest`), a list of typed predicates over the replayed
//! screen, the timing, the input, the service events and the end. `timeline` replays a cassette
//! into the states predicates read, `eval` judges them, `starter` drafts a spec from a recording.
//! Reads cassettes; never writes one (a starter spec is the caller's to write).

pub mod eval;
pub mod starter;
#[cfg(test)]
mod tests;
pub mod timeline;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::hint::Hint;

/// The spec's file name, inside the cassette folder.
pub const FILE: &str = "assertions.json";

#[derive(Debug, thiserror::Error)]
pub enum AssertionsError {
    #[error(transparent)]
    File(#[from] std::io::Error),
    #[error("`{path}`: {message}")]
    Bad { path: PathBuf, message: String },
    #[error("`{path}` assertion {index}: {message}")]
    BadAssertion {
        path: PathBuf,
        index: usize,
        message: String,
    },
    #[error("`{path}` marks `{name}`: {message}")]
    BadMark {
        path: PathBuf,
        name: String,
        message: String,
    },
    #[error("`{0}` holds an `assertions.json` already")]
    Exists(PathBuf),
}

impl Hint for AssertionsError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            AssertionsError::Bad { .. }
            | AssertionsError::BadAssertion { .. }
            | AssertionsError::BadMark { .. } => {
                "the spec format is in docs/reference/assertions.md".to_owned()
            }
            AssertionsError::Exists(..) => {
                "`spex cassette spec --force` replaces it (what it holds is lost)".to_owned()
            }
            AssertionsError::File(_) => return None,
        })
    }
}

/// A spec as written: the recording it is bound to, named moments, and the predicates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    pub cassette: Binding,
    /// Named moments predicates refer to as `{"mark": NAME}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub marks: BTreeMap<String, Anchor>,
    pub assertions: Vec<Assertion>,
}

/// The recording a spec was written against: a spec for another recording fails whatever its
/// predicates say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Binding {
    pub id: String,
    pub content_digest: String,
}

/// A moment of the recording: the state once every record up to it was replayed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Anchor {
    /// Before anything was recorded.
    Start,
    /// After the last record.
    End,
    /// After every record stamped at or before this many ms.
    TMs(u64),
    /// After the record numbered `seq` (any stream).
    Seq(u64),
    /// A name from the spec's `marks`.
    Mark(String),
    /// The first service event of this kind.
    Event(String),
    /// The last service event of this kind.
    LastEvent(String),
    /// The first frame noted for this reason (`idle`, `busy`, ...).
    Frame(String),
    /// The first input of this kind (`keys`, `paste`, `resize`, `signal`).
    Input(String),
}

/// One predicate, tagged by `assert`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "assert", rename_all = "snake_case", deny_unknown_fields)]
pub enum Assertion {
    /// The screen at `at` shows `text`.
    ScreenContains { text: String, at: Anchor },
    /// Some screen from `from` (the start unless given) shows `text`, within `within_ms` of
    /// `from` or before `to`, whichever ends first.
    ScreenEventually {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<Anchor>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        within_ms: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to: Option<Anchor>,
    },
    /// No screen from `from` to `to` (the whole recording unless given) shows `text`.
    ScreenNever {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<Anchor>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to: Option<Anchor>,
    },
    /// The screen's text does not change from `from` for `for_ms`, or until `to`.
    ScreenStable {
        from: Anchor,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        for_ms: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to: Option<Anchor>,
    },
    /// The screen's text at `to` is not what it was at `from` (a refresh, a redraw, a
    /// layout that changed).
    ScreenChanges { from: Anchor, to: Anchor },
    /// The screen's size, cursor and modes at `at`; only the fields `expect` gives are
    /// checked.
    ScreenState { at: Anchor, expect: ScreenState },
    /// No two consecutive output chunks between `from` and `to` are more than `ms` apart.
    MaxGap {
        ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<Anchor>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to: Option<Anchor>,
    },
    /// `first` appears on the screen before `then` does (both must appear).
    OutputOrder { first: String, then: String },
    /// The bytes written to the program (keys and pastes, in order) hold `text`.
    InputBytes { text: String },
    /// A bracketed paste carried exactly `text` between its `ESC [200~` and `ESC [201~`.
    Paste { text: String },
    /// These keys were written to the program in this order (others may come between): names
    /// such as `Enter`, `Esc`, `Tab`, `Up`, `C-c`, or literal text.
    Keys { keys: Vec<String> },
    /// Service events matching these, in this order (others may come between). Each is an
    /// object whose every field must equal the event's (nested objects compare the same way).
    ServiceEvents { in_order: Vec<Value> },
    /// No service event matches this.
    NoServiceEvent { matching: Value },
    /// How the program ended (`final.json`); only the fields given are checked.
    Exit {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
    },
    /// The session's status at the end: `final.json`'s `status` when the recording has it,
    /// else as its service events left it.
    Status { is: String },
    /// How the last turn ended: `final.json`'s `turn.state` when the recording has it, else
    /// the kind of the last turn-ending event (`completed`, `failed`, `interrupted`, ...).
    Outcome { is: String },
}

/// Screen facts a `screen_state` predicate checks; absent fields are not checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScreenState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<u16>,
    /// `[row, col]`, zero-based.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<(u16, u16)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor_visible: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alternate_screen: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bracketed_paste: Option<bool>,
    /// `none`, `press`, `press_release`, `button_motion` or `any_motion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mouse: Option<String>,
    /// How many bells rang up to then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bells: Option<u64>,
}

impl Spec {
    /// Reads `path`, naming the file and the assertion's index on an error (an unknown
    /// predicate, a missing field) and every mark that names no moment.
    pub fn load(path: &Path) -> Result<Spec, AssertionsError> {
        let text = fs_err::read_to_string(path)?;
        Spec::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Spec, AssertionsError> {
        let bad = |message: String| AssertionsError::Bad {
            path: path.to_owned(),
            message,
        };
        let mut raw: Value = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        // Each assertion on its own, so an error says which one.
        let items = match raw.get_mut("assertions").map(Value::take) {
            Some(Value::Array(items)) => items,
            Some(_) => return Err(bad("`assertions` is not a list".into())),
            None => return Err(bad("missing field `assertions`".into())),
        };
        let mut assertions = Vec::with_capacity(items.len());
        for (index, item) in items.into_iter().enumerate() {
            let a = serde_json::from_value(item).map_err(|e| AssertionsError::BadAssertion {
                path: path.to_owned(),
                index,
                message: e.to_string(),
            })?;
            assertions.push(a);
        }
        raw["assertions"] = Value::Array(Vec::new());
        let mut spec: Spec = serde_json::from_value(raw).map_err(|e| bad(e.to_string()))?;
        spec.assertions = assertions;
        for (name, anchor) in &spec.marks {
            if let Anchor::Mark(_) = anchor {
                return Err(AssertionsError::BadMark {
                    path: path.to_owned(),
                    name: name.clone(),
                    message: "a mark names a moment, not another mark".into(),
                });
            }
        }
        if let Some((index, why)) = spec
            .assertions
            .iter()
            .enumerate()
            .find_map(|(i, a)| a.empty().map(|why| (i, why)))
        {
            return Err(AssertionsError::BadAssertion {
                path: path.to_owned(),
                index,
                message: why.to_owned(),
            });
        }
        let unknown = spec.assertions.iter().enumerate().find_map(|(i, a)| {
            a.marks()
                .find(|m| !spec.marks.contains_key(*m))
                .map(|m| (i, m))
        });
        if let Some((index, mark)) = unknown {
            return Err(AssertionsError::BadAssertion {
                path: path.to_owned(),
                index,
                message: format!("no mark `{mark}` in the spec's `marks`"),
            });
        }
        Ok(spec)
    }

    /// The spec as its file holds it, pretty, ending in a line feed.
    pub fn to_json(&self) -> String {
        let mut out = serde_json::to_string_pretty(self).expect("a spec serializes");
        out.push('\n');
        out
    }
}

impl Assertion {
    /// The anchors this predicate names.
    fn anchors(&self) -> Vec<&Anchor> {
        match self {
            Assertion::ScreenContains { at, .. } | Assertion::ScreenState { at, .. } => vec![at],
            Assertion::ScreenEventually { from, to, .. }
            | Assertion::ScreenNever { from, to, .. }
            | Assertion::MaxGap { from, to, .. } => from.iter().chain(to).collect(),
            Assertion::ScreenStable { from, to, .. } => std::iter::once(from).chain(to).collect(),
            Assertion::ScreenChanges { from, to } => vec![from, to],
            _ => Vec::new(),
        }
    }

    /// Why this predicate would check nothing, if it would.
    fn empty(&self) -> Option<&'static str> {
        match self {
            Assertion::Exit {
                code: None,
                signal: None,
            } => Some("`exit` needs `code` or `signal`"),
            Assertion::ScreenState { expect, .. } if *expect == ScreenState::default() => {
                Some("`screen_state` needs at least one field in `expect`")
            }
            Assertion::ScreenStable {
                for_ms: None,
                to: None,
                ..
            } => Some("`screen_stable` needs `for_ms` or `to`"),
            Assertion::Keys { keys } if keys.is_empty() => Some("`keys` names no key"),
            Assertion::ServiceEvents { in_order } if in_order.is_empty() => {
                Some("`service_events` lists no event")
            }
            _ => None,
        }
    }

    /// The marks this predicate names.
    fn marks(&self) -> impl Iterator<Item = &str> {
        self.anchors().into_iter().filter_map(|a| match a {
            Anchor::Mark(m) => Some(m.as_str()),
            _ => None,
        })
    }

    /// The predicate as one line of JSON, as a report quotes it.
    pub fn quoted(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}
