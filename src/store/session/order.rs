//! The order people read sessions in: those that need a person first (the oldest attention
//! first), then working, then idle, then exited; the newest change first inside each group.
//! Decides an order only: it reads records and writes nothing.

use std::cmp::Ordering;

use super::record::{Session, Status};

/// The groups of [`attention_first`], in their order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Group {
    /// Waiting for a person: an open attention (a question, a permission, a failed turn).
    NeedsYou,
    /// Running a turn, or starting.
    Working,
    Idle,
    Exited,
}

impl Group {
    pub fn of(s: &Session) -> Group {
        match s.status {
            Status::Exited => Group::Exited,
            Status::NeedsAttention => Group::NeedsYou,
            _ if s.attention.is_some() => Group::NeedsYou,
            Status::Working | Status::Starting => Group::Working,
            Status::Idle => Group::Idle,
        }
    }
}

/// When a session that needs a person began to: its attention's opening, else its state's.
fn waiting_since(s: &Session) -> &str {
    s.attention
        .as_ref()
        .map(|a| a.since.as_str())
        .or(s.since.as_deref())
        .unwrap_or(&s.updated_at)
}

/// Attention first (see the module): sessions that wait for a person, the longest waiting
/// first; then working, idle and exited ones, each the most recently changed first.
pub fn attention_first(a: &Session, b: &Session) -> Ordering {
    let (ga, gb) = (Group::of(a), Group::of(b));
    ga.cmp(&gb).then_with(|| {
        if ga == Group::NeedsYou {
            waiting_since(a).cmp(waiting_since(b))
        } else {
            b.updated_at.cmp(&a.updated_at)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::attention::Attention;
    use super::super::vocab::AttentionKind;
    use super::*;

    fn session(id: &str, status: Status, updated: &str, attention: Option<&str>) -> Session {
        Session {
            id: id.into(),
            status,
            updated_at: updated.into(),
            attention: attention.map(|since| Attention::new(AttentionKind::Question, "?", since)),
            ..Session::default()
        }
    }

    #[test]
    #[expect(
        clippy::large_stack_arrays,
        reason = "a handful of records in a test; each record grew past the lint's bound with the answer's origin"
    )]
    fn needs_you_oldest_first_then_working_idle_exited_newest_first() {
        let mut all = [
            session("exited", Status::Exited, "2026-01-01T00:00:09Z", None),
            session("idle-old", Status::Idle, "2026-01-01T00:00:01Z", None),
            session(
                "ask-new",
                Status::NeedsAttention,
                "2026-01-01T00:00:08Z",
                Some("2026-01-01T00:00:07Z"),
            ),
            session("working", Status::Working, "2026-01-01T00:00:02Z", None),
            session("idle-new", Status::Idle, "2026-01-01T00:00:05Z", None),
            session(
                "ask-old",
                Status::NeedsAttention,
                "2026-01-01T00:00:09Z",
                Some("2026-01-01T00:00:03Z"),
            ),
            session(
                "failed",
                Status::Idle,
                "2026-01-01T00:00:06Z",
                Some("2026-01-01T00:00:05Z"),
            ),
            session("starting", Status::Starting, "2026-01-01T00:00:01Z", None),
        ];
        all.sort_by(attention_first);
        let ids: Vec<&str> = all.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "ask-old", "failed", "ask-new", "working", "starting", "idle-new", "idle-old",
                "exited"
            ]
        );
    }
}
