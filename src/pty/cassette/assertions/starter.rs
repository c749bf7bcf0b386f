//! A starter spec drafted from a recording, for a person to tighten: bound to the recording,
//! its service events as marks and as an ordered list, the final screen's rows, its state and
//! modes, the exit, the final status and the last turn's outcome. Everything it asserts holds
//! for the recording it was drafted from.

use serde_json::{Value, json};

use super::timeline::Timeline;
use super::{Anchor, Assertion, Binding, ScreenState, Spec};
use crate::pty::cassette::Cassette;

/// At most this many of the final screen's rows become `screen_contains` predicates.
const FINAL_ROWS: usize = 8;

/// The starter spec for `cassette`, whose `final.json` is `fin`.
pub fn draft(cassette: &Cassette, fin: &Value) -> Spec {
    let timeline = Timeline::replay(cassette);
    let mut marks = std::collections::BTreeMap::new();
    let mut kinds = Vec::new();
    for e in timeline.events() {
        let Some(kind) = e["kind"].as_str() else {
            continue;
        };
        marks
            .entry(kind.to_owned())
            .or_insert_with(|| Anchor::Event(kind.to_owned()));
        kinds.push(json!({ "kind": kind }));
    }
    let mut assertions = Vec::new();
    let last = timeline
        .states
        .last()
        .expect("a timeline has its blank screen");
    let rows: Vec<&String> = last.lines.iter().filter(|l| !l.trim().is_empty()).collect();
    for line in rows.iter().skip(rows.len().saturating_sub(FINAL_ROWS)) {
        assertions.push(Assertion::ScreenContains {
            text: line.trim().to_owned(),
            at: Anchor::End,
        });
    }
    assertions.push(Assertion::ScreenState {
        at: Anchor::End,
        expect: ScreenState {
            rows: Some(last.rows),
            cols: Some(last.cols),
            cursor_visible: Some(last.modes.cursor_visible),
            alternate_screen: Some(last.modes.alternate_screen),
            ..ScreenState::default()
        },
    });
    if !kinds.is_empty() {
        let events: Vec<Value> = timeline.events().cloned().collect();
        assertions.push(Assertion::ServiceEvents { in_order: kinds });
        assertions.push(Assertion::Status {
            is: super::eval::final_status(fin, &events),
        });
    }
    if let Some(outcome) = super::eval::last_outcome(fin, timeline.events()) {
        assertions.push(Assertion::Outcome { is: outcome });
    }
    let exit = &fin["exit"];
    let code = exit["code"].as_i64().and_then(|c| i32::try_from(c).ok());
    let signal = exit["signal"].as_i64().and_then(|s| i32::try_from(s).ok());
    if code.is_some() || signal.is_some() {
        assertions.push(Assertion::Exit { code, signal });
    }
    Spec {
        cassette: Binding {
            id: cassette.manifest.id.clone(),
            content_digest: cassette.manifest.content_digest.clone().unwrap_or_default(),
        },
        marks,
        assertions,
    }
}
