//! How a turn and a time read for people: the turn's state with who interrupted it, what spex
//! did about a budget, a stall, a failure's kind and next step (`sessions`, `show`, `wait`,
//! `deliver --wait-until`), and clock times.

use crate::store::session::TurnState;

/// `12:03:41` of an RFC 3339 time of today, `2026-11-24 12:03:41` of an earlier day.
pub fn clock(t: &str) -> String {
    clock_on(t, &crate::store::now_rfc3339())
}

fn clock_on(t: &str, now: &str) -> String {
    match (t.get(..10), t.get(11..19)) {
        (Some(day), Some(time)) if Some(day) == now.get(..10) => time.to_owned(),
        (Some(day), Some(time)) => format!("{day} {time}"),
        _ => t.to_owned(),
    }
}

/// A turn's state and why: `failed (model_error): API Error: 400 ...; next: ...`, a
/// `partial_failed` turn's kept text named apart, never as the answer.
pub fn turn_sentence(t: &crate::store::session::Turn) -> String {
    turn_sentence_with(t, "")
}

/// [`turn_sentence`] with what the turn's sub-agents did (`Session::children_phrase`) after
/// its state: `completed, 1 of 3 sub-agents failed`.
pub fn turn_sentence_with(t: &crate::store::session::Turn, children: &str) -> String {
    let mut out = t.state.as_str().to_owned();
    out.push_str(&turn_detail(t));
    out.push_str(children);
    if let Some(kind) = t.error_kind {
        out.push_str(&format!(" ({})", kind.as_str()));
    }
    if let Some(note) = &t.note {
        out.push_str(&format!(": {note}"));
    }
    if let Some(p) = &t.partial {
        out.push_str(&format!(
            "; partial text kept apart ({} chars, `spex show --json`)",
            p.chars().count()
        ));
    }
    if let Some(next) = &t.next {
        out.push_str(&format!("; next: {next}"));
    }
    out
}

/// What a turn's state alone does not say: who interrupted it, what spex did about a turn
/// past its budget, since when a running turn is stalled (" by spex interrupt").
pub fn turn_detail(t: &crate::store::session::Turn) -> String {
    let mut out = String::new();
    if let Some(by) =
        t.by.as_deref()
            .filter(|_| t.state == TurnState::Interrupted)
    {
        out.push_str(&format!(" by {by}"));
    }
    if let Some(x) = t
        .timeout
        .as_ref()
        .filter(|_| t.state == TurnState::TimedOut)
    {
        out.push_str(match (x.action.as_str(), &x.interrupt_sent_at) {
            ("interrupt", Some(_)) => ", interrupted by spex (onTimeout: interrupt)",
            ("interrupt", None) => ", to be interrupted by spex (onTimeout: interrupt)",
            _ => ", marked only (onTimeout: mark)",
        });
    }
    if let Some(at) = t
        .stalled_at
        .as_deref()
        .filter(|_| t.state == TurnState::Running)
    {
        out.push_str(&format!(", stalled since {}", clock(at)));
    }
    out
}

#[cfg(test)]
mod clock_tests {
    #[test]
    fn a_time_of_an_earlier_day_shows_its_date() {
        let now = "2026-11-25T09:00:00Z";
        assert_eq!(super::clock_on("2026-11-25T08:01:02Z", now), "08:01:02");
        assert_eq!(
            super::clock_on("2026-11-24T23:59:59Z", now),
            "2026-11-24 23:59:59"
        );
        assert_eq!(super::clock_on("garbage", now), "garbage");
    }
}
