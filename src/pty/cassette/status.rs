//! The session's status at a moment of a recording, read from its service events: what
//! `spex replay --at` shows and what an assertion spec's `status` predicate checks.

/// The session's status after `events` (its service events up to a moment, in order).
/// A recording made by this spex carries the state the record reached with the last event of
/// each update (`record.status`): that is the answer, as spex's own code reached it.
/// `recorded` says whether the cassette carries it at all; an older one is read through
/// `status_from_kinds`.
pub fn status_after(events: &[serde_json::Value], recorded: bool) -> String {
    if recorded {
        return events
            .iter()
            .rev()
            .find_map(|e| e["record"]["status"].as_str())
            .unwrap_or("starting")
            .to_owned();
    }
    status_from_kinds(events.iter().filter_map(|e| e["kind"].as_str())).to_owned()
}

/// For cassettes recorded before service events carried the record's state: the status the
/// event kinds imply, a copy of the transitions the dispatcher, the host and the evidence
/// readers make (it can drift from them; `status_after` prefers the recorded state).
pub fn status_from_kinds<'a>(events: impl Iterator<Item = &'a str>) -> &'static str {
    let mut status = "starting";
    let mut turn_running = false;
    for kind in events {
        status = match kind {
            "turn.started" => {
                turn_running = true;
                "working"
            }
            "turn.completed"
            | "turn.partial_failed"
            | "turn.failed"
            | "turn.interrupted"
            | "turn.timed_out" => {
                turn_running = false;
                "idle"
            }
            "tool.started" | "tool.completed" => "working",
            "attention.cleared" | "attention.closed" if turn_running => "working",
            // Cleared with a turn's end (or a dialog answered while none runs): idle.
            "session.started" | "attention.cleared" | "attention.closed" => "idle",
            "input.required" | "attention.opened" => "needs_attention",
            "session.exited" => "exited",
            _ => status,
        };
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_status_is_the_recorded_record_state_when_the_cassette_has_it() {
        // A dialog interrupted with Esc: the turn ends and its attention is cleared in one
        // update; the record is idle. The event kinds alone used to read `working`.
        let events = [
            json!({"kind": "turn.started", "record": {"status": "working"}}),
            json!({"kind": "input.required", "record": {"status": "needs_attention"}}),
            json!({"kind": "turn.interrupted"}),
            json!({"kind": "attention.cleared", "record": {"status": "idle"}}),
        ];
        assert_eq!(status_after(&events, true), "idle");
        assert_eq!(status_after(&events[..2], true), "needs_attention");
        // Nothing recorded yet at this moment of a recording that has it.
        assert_eq!(status_after(&events[..0], true), "starting");
        // A state only the record knows: a turn that ended while the agent declared it was
        // asking stays needing attention (no kind says so).
        let declared = [
            json!({"kind": "turn.started", "record": {"status": "working"}}),
            json!({"kind": "declared", "state": "asking", "record": {"status": "needs_attention"}}),
            json!({"kind": "turn.completed", "record": {"status": "needs_attention"}}),
        ];
        assert_eq!(status_after(&declared, true), "needs_attention");
    }

    #[test]
    fn an_older_cassette_reads_its_status_from_the_event_kinds() {
        let kinds = |k: &[&str]| -> Vec<serde_json::Value> {
            k.iter().map(|k| json!({ "kind": k })).collect()
        };
        let cases: &[(&[&str], &str)] = &[
            (&[], "starting"),
            (&["session.started"], "idle"),
            (
                &["session.started", "turn.started", "tool.started"],
                "working",
            ),
            (&["turn.started", "input.required"], "needs_attention"),
            (
                &["turn.started", "input.required", "attention.cleared"],
                "working",
            ),
            (
                &[
                    "turn.started",
                    "input.required",
                    "turn.interrupted",
                    "attention.cleared",
                ],
                "idle",
            ),
            (
                &["turn.started", "turn.completed", "session.exited"],
                "exited",
            ),
        ];
        for (k, want) in cases {
            assert_eq!(status_after(&kinds(k), false), *want, "{k:?}");
        }
    }
}
