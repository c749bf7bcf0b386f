//! What the board shows of a session: the record's fields a person reads, as the page takes
//! them (plain JSON; the page sets every text with `textContent`).

use serde_json::{Value, json};

use crate::store::ProjectStore;
use crate::store::remotes::{Known, Reach};
use crate::store::session::{Session, Status};

/// The group a session is shown in, in the board's order (as `sessions` orders them).
pub fn group(s: &Session) -> &'static str {
    match s.status {
        Status::NeedsAttention => "needs_you",
        Status::Working | Status::Starting => "working",
        Status::Idle => "idle",
        Status::Exited => "exited",
    }
}

/// The project's name as the board shows it: its checkout's folder name.
pub fn project_name(store: &ProjectStore, s: Option<&Session>) -> String {
    let name = s
        .and_then(|s| s.project.file_name())
        .or_else(|| store.dir.file_name());
    name.map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The board's key of a session: its project's stream key and its id (ids are per project).
pub fn key_of(store: &ProjectStore, id: &str) -> String {
    format!("{}/{id}", store.stream_key())
}

/// One session as the page shows it; `live`: whether its process runs, where known.
pub fn session(store: &ProjectStore, s: &Session, live: Option<bool>) -> Value {
    let attention = s.attention.as_ref().map(|a| {
        json!({
            "id": a.id,
            "reason": a.reason,
            "kind": a.kind,
            "text": a.text,
            "since": a.since,
            "tool": a.tool,
            "choices": a.choices,
            "questions": a.questions,
            "via": a.via,
            "answering": a.answering.is_some(),
        })
    });
    let turn = s.turn.as_ref().map(|t| {
        json!({
            "id": t.id,
            "state": t.state,
            "prompt": t.prompt.as_deref().map(|p| crate::store::session::ellipsis(p, 400)),
            "started_at": t.started_at,
            "ended_at": t.ended_at,
            "note": t.note,
            "next": t.next,
        })
    });
    let usage = s.usage.as_ref().map(|u| {
        json!({
            "input": u.input_tokens,
            "cached": u.cached_input_tokens,
            "output": u.output_tokens,
            "model": u.model,
        })
    });
    json!({
        "key": key_of(store, &s.id),
        "id": s.id,
        "project": project_name(store, Some(s)),
        "project_key": store.stream_key(),
        "project_dir": s.project,
        "harness": s.harness,
        "tree": s.tree,
        "branch": s.branch,
        "handle": s.handle,
        "name": s.name,
        "label": s.label(),
        "headline": s.headline,
        "status": s.status.as_str(),
        "group": group(s),
        "since": s.since,
        "source": s.source,
        "why": s.why,
        "exit_reason": s.exit_reason,
        "attention": attention,
        "turn": turn,
        "turn_phrase": s.turn_phrase(),
        "usage": usage,
        "launched_by": s.launched_by,
        "live": live,
        "updated_at": s.updated_at,
    })
}

/// The board's key of a remote session: `<host>:<project>/<id>` (a local key has no `:`).
pub fn remote_key(host: &str, k: &Known) -> String {
    format!(
        "{host}:{}/{}",
        k.project.as_deref().unwrap_or_default(),
        k.session
    )
}

/// A remote session as the page shows it, from its last known state: `host` names its
/// machine, and `stale` says the host does not answer now (the state is the last one heard).
pub fn remote_session(host: &str, host_key: &str, k: &Known, reach: &Reach) -> Value {
    let status = k.status.clone().unwrap_or_else(|| "starting".to_owned());
    let group = match status.as_str() {
        "needs_attention" => "needs_you",
        "idle" => "idle",
        "exited" => "exited",
        _ => "working",
    };
    // Its choices and questions from the line that opened it, so the card offers the same
    // answers as a local one (the spex there checks and confirms them).
    let opened = k.open_attention();
    let attention = k.attention.as_ref().map(|reason| {
        json!({"id": k.attention_id, "reason": reason, "kind": reason,
            "text": k.attention_text, "since": k.updated_at,
            "tool": opened.as_ref().and_then(|a| a.tool.clone()),
            "choices": opened.as_ref().map_or_else(Vec::new, |a| a.choices.clone()),
            "questions": opened.as_ref().map_or_else(Vec::new, |a| a.questions.clone()),
            "answering": false})
    });
    let (stale, unreachable) = match reach {
        Reach::Unreachable { since, error } => {
            (true, Some(json!({"since": since, "error": error})))
        }
        Reach::Reachable { .. } => (false, None),
        Reach::Unknown => (true, None),
    };
    let project = k
        .project
        .as_deref()
        .map(|p| p.rsplit_once('-').map_or(p, |(name, _)| name).to_owned());
    json!({
        "key": remote_key(host, k),
        "id": k.session,
        "host": host,
        "stale": stale,
        "unreachable": unreachable,
        "project": project,
        "project_key": host_key,
        "harness": k.harness,
        "handle": k.handle,
        "name": k.name,
        "label": k.label(host),
        "status": status,
        "group": group,
        "since": k.updated_at,
        "source": if stale { "last known" } else { "remote" },
        "attention": attention,
        "turn": k.turn.as_ref().map(|t| json!({"state": t})),
        "updated_at": k.updated_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_session_is_stale_unless_its_host_answers_and_keeps_its_state() {
        let k = Known {
            project: Some("api-0a1b2c3d4e5f".into()),
            session: "s1".into(),
            handle: Some("0007".into()),
            status: Some("needs_attention".into()),
            attention: Some("permission".into()),
            attention_id: Some("a2".into()),
            ..Known::default()
        };
        let down = Reach::Unreachable {
            since: "t".into(),
            error: "Connection refused".into(),
        };
        let v = remote_session("devbox", "ffff", &k, &down);
        assert_eq!(v["key"], "devbox:api-0a1b2c3d4e5f/s1");
        assert_eq!(v["label"], "devbox:0007");
        assert_eq!(v["project"], "api");
        assert_eq!(v["group"], "needs_you");
        assert_eq!(v["stale"], true);
        assert_eq!(v["unreachable"]["error"], "Connection refused");
        assert_eq!(v["attention"]["id"], "a2");
        let up = Reach::Reachable { since: "t".into() };
        assert_eq!(remote_session("devbox", "ffff", &k, &up)["stale"], false);
        assert_eq!(
            remote_session("devbox", "ffff", &k, &Reach::Unknown)["stale"],
            true
        );
    }

    #[test]
    fn a_remote_attention_offers_the_choices_and_questions_of_the_line_that_opened_it() {
        let opened = json!({"kind": "attention.opened", "attention": "a2",
            "attention_kind": "permission", "reason": "permission", "text": "Bash: ls",
            "time": "t", "tool": "Bash",
            "choices": [{"id": "allow", "label": "Yes"}, {"id": "deny", "label": "No", "message": true}]});
        let k = Known {
            session: "s1".into(),
            status: Some("needs_attention".into()),
            attention: Some("permission".into()),
            attention_id: Some("a2".into()),
            attention_line: Some(opened),
            ..Known::default()
        };
        let up = Reach::Reachable { since: "t".into() };
        let a = &remote_session("devbox", "ffff", &k, &up)["attention"];
        assert_eq!(
            a["choices"],
            json!([{"id": "allow", "label": "Yes"}, {"id": "deny", "label": "No", "message": true}])
        );
        assert_eq!(a["tool"], "Bash");
        assert_eq!(a["questions"], json!([]));
        // A line this version cannot read still shows the attention, with nothing to pick.
        let odd = Known {
            attention_line: Some(json!({"attention": "a2"})),
            ..k
        };
        let a = &remote_session("devbox", "ffff", &odd, &up)["attention"];
        assert_eq!((&a["id"], &a["choices"]), (&json!("a2"), &json!([])));
    }
}
