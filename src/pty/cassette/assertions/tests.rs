//! Unit cases for assertion specs: every predicate family holds and fails on a small cassette
//! written record by record (so its times are exact), the spec's errors name the file and the
//! assertion, and a spec bound to another recording fails whatever it says.

use std::path::Path;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::eval::{Report, judge};
use super::{Binding, Spec};
use crate::pty::cassette::Cassette;

/// A cassette written record by record, each at the time given.
#[derive(Default)]
struct Build {
    lines: Vec<(&'static str, Value)>,
    output: Vec<u8>,
}

impl Build {
    fn push(&mut self, stream: &'static str, t: u64, mut v: Value) {
        v["seq"] = self.lines.len().into();
        v["t_ms"] = t.into();
        self.lines.push((stream, v));
    }

    fn out(mut self, t: u64, bytes: &str) -> Self {
        let offset = self.output.len();
        self.output.extend_from_slice(bytes.as_bytes());
        self.push(
            "output.jsonl",
            t,
            json!({"offset": offset, "len": bytes.len()}),
        );
        self
    }

    fn input(mut self, t: u64, kind: &str, text: &str) -> Self {
        self.push("input.jsonl", t, json!({"kind": kind, "text": text}));
        self
    }

    fn resize(mut self, t: u64, rows: u16, cols: u16) -> Self {
        self.push(
            "input.jsonl",
            t,
            json!({"kind": "resize", "rows": rows, "cols": cols}),
        );
        self
    }

    fn event(mut self, t: u64, v: Value) -> Self {
        self.push("service-events.jsonl", t, v);
        self
    }

    fn write(self, dir: &Path, fin: &Value) -> Cassette {
        let mut manifest =
            serde_json::to_value(crate::pty::cassette::record::tests::manifest()).unwrap();
        manifest["content_digest"] =
            format!("sha256:{}", hex::encode(Sha256::digest(&self.output))).into();
        let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap();
        fs_err::write(dir.join("manifest.json"), pretty(&manifest)).unwrap();
        fs_err::write(dir.join("output.raw"), &self.output).unwrap();
        fs_err::write(dir.join("final.json"), pretty(fin)).unwrap();
        fs_err::write(dir.join("scrub-report.json"), r#"{"rules": []}"#).unwrap();
        for stream in crate::pty::cassette::format::STREAMS {
            let text: String = self.lines.iter().filter(|(s, _)| *s == stream).fold(
                String::new(),
                |mut text, (_, v)| {
                    text.push_str(&v.to_string());
                    text.push('\n');
                    text
                },
            );
            fs_err::write(dir.join(stream), text).unwrap();
        }
        Cassette::open(dir).unwrap()
    }
}

/// A shell-like session: a title, a command, a paste, a full-screen program (alternate screen,
/// hidden cursor, mouse, bracketed paste, a bell), a resize, a turn, an exit.
fn session(dir: &Path) -> (Cassette, Value) {
    let fin = json!({"exit": {"code": 0, "signal": null}, "duration_ms": 1000});
    let c = Build::default()
        .out(0, "\x1b]0;demo\x07hello\r\n")
        .event(100, json!({"kind": "session.started", "source": "host"}))
        .input(200, "keys", "ls\r")
        .out(300, "listing\r\n")
        .event(
            300,
            json!({"kind": "turn.started", "turn_id": "t1", "record": {"status": "working"}}),
        )
        .input(400, "paste", "\x1b[200~pasted text\x1b[201~")
        .out(
            500,
            "\x1b[?1049h\x1b[?25l\x1b[?1000h\x1b[?2004h\x1b[Hfull screen\x07",
        )
        .resize(600, 30, 100)
        .input(650, "keys", "\x1b[Aq")
        .out(900, "\x1b[?1049l\x1b[?25h\x1b[?1000l\x1b[?2004ldone\r\n")
        .event(
            900,
            json!({"kind": "turn.completed", "turn_id": "t1", "record": {"status": "idle"}}),
        )
        .event(
            1000,
            json!({"kind": "session.exited", "record": {"status": "exited"}}),
        )
        .write(dir, &fin);
    (c, fin)
}

fn spec_for(c: &Cassette, marks: &Value, assertions: &[Value]) -> Result<Spec, String> {
    let text = json!({
        "cassette": {"id": c.manifest.id, "content_digest": c.manifest.content_digest},
        "marks": marks,
        "assertions": assertions,
    })
    .to_string();
    Spec::parse(&text, Path::new("x/assertions.json")).map_err(|e| e.to_string())
}

fn run(assertion: &Value) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let (c, fin) = session(dir.path());
    let marks = json!({"turn": {"event": "turn.started"}, "done": {"event": "turn.completed"}});
    let spec = spec_for(&c, &marks, std::slice::from_ref(assertion)).unwrap();
    judge(dir.path(), &c, &fin, &spec)
}

/// Every family: predicates that hold for the session, and predicates that do not.
#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one table of cases, read top to bottom"
)]
fn each_predicate_family_passes_and_fails() {
    let cases = [
        // Screen contains, at a time, a seq, a mark.
        (
            json!({"assert": "screen_contains", "text": "listing", "at": {"t_ms": 300}}),
            true,
        ),
        (
            json!({"assert": "screen_contains", "text": "listing", "at": {"t_ms": 299}}),
            false,
        ),
        (
            json!({"assert": "screen_contains", "text": "hello", "at": {"seq": 0}}),
            true,
        ),
        (
            json!({"assert": "screen_contains", "text": "full screen", "at": {"mark": "done"}}),
            false,
        ),
        (
            json!({"assert": "screen_contains", "text": "done", "at": {"mark": "done"}}),
            true,
        ),
        // Eventually, within a window.
        (
            json!({"assert": "screen_eventually", "text": "full screen", "from": {"mark": "turn"}, "within_ms": 200}),
            true,
        ),
        (
            json!({"assert": "screen_eventually", "text": "full screen", "from": {"mark": "turn"}, "within_ms": 100}),
            false,
        ),
        (
            json!({"assert": "screen_eventually", "text": "done", "to": {"input": "resize"}}),
            false,
        ),
        // Never.
        (json!({"assert": "screen_never", "text": "error"}), true),
        (
            json!({"assert": "screen_never", "text": "full screen", "from": {"mark": "turn"}, "to": {"mark": "done"}}),
            false,
        ),
        (
            json!({"assert": "screen_never", "text": "full screen", "from": {"mark": "done"}}),
            true,
        ),
        // Stable.
        (
            json!({"assert": "screen_stable", "from": {"t_ms": 0}, "for_ms": 200}),
            true,
        ),
        (
            json!({"assert": "screen_stable", "from": {"t_ms": 0}, "for_ms": 300}),
            false,
        ),
        (
            json!({"assert": "screen_stable", "from": {"mark": "done"}, "for_ms": 500}),
            false,
        ),
        (
            json!({"assert": "screen_changes", "from": {"t_ms": 0}, "to": {"t_ms": 300}}),
            true,
        ),
        (
            json!({"assert": "screen_changes", "from": {"t_ms": 0}, "to": {"t_ms": 200}}),
            false,
        ),
        // Screen state: size, alternate screen, cursor, title, modes, bells.
        (
            json!({"assert": "screen_state", "at": {"t_ms": 500}, "expect": {"alternate_screen": true, "cursor_visible": false, "mouse": "press_release", "bracketed_paste": true, "bells": 1, "title": "demo", "rows": 24}}),
            true,
        ),
        (
            json!({"assert": "screen_state", "at": {"t_ms": 600}, "expect": {"rows": 30, "cols": 100}}),
            true,
        ),
        (
            json!({"assert": "screen_state", "at": "end", "expect": {"alternate_screen": true}}),
            false,
        ),
        (
            json!({"assert": "screen_state", "at": "end", "expect": {"cursor_visible": false, "title": "other"}}),
            false,
        ),
        // Timing: the longest pause, and which text came first.
        (json!({"assert": "max_gap", "ms": 400}), true),
        (json!({"assert": "max_gap", "ms": 300}), false),
        (
            json!({"assert": "max_gap", "ms": 200, "from": {"t_ms": 300}, "to": {"t_ms": 500}}),
            true,
        ),
        (
            json!({"assert": "output_order", "first": "hello", "then": "listing"}),
            true,
        ),
        (
            json!({"assert": "output_order", "first": "done", "then": "listing"}),
            false,
        ),
        (
            json!({"assert": "output_order", "first": "hello", "then": "never drawn"}),
            false,
        ),
        // Input: bytes, paste boundaries, keys.
        (json!({"assert": "input_bytes", "text": "ls\r"}), true),
        (json!({"assert": "input_bytes", "text": "rm"}), false),
        (json!({"assert": "paste", "text": "pasted text"}), true),
        (json!({"assert": "paste", "text": "pasted"}), false),
        (
            json!({"assert": "keys", "keys": ["l", "s", "Enter", "Up", "q"]}),
            true,
        ),
        (json!({"assert": "keys", "keys": ["Up", "Enter"]}), false),
        // Service events, in order, with fields.
        (
            json!({"assert": "service_events", "in_order": [{"kind": "session.started"}, {"kind": "turn.started", "turn_id": "t1"}, {"kind": "turn.completed", "record": {"status": "idle"}}]}),
            true,
        ),
        (
            json!({"assert": "service_events", "in_order": [{"kind": "turn.completed"}, {"kind": "turn.started"}]}),
            false,
        ),
        (
            json!({"assert": "service_events", "in_order": [{"kind": "turn.started", "turn_id": "t2"}]}),
            false,
        ),
        (
            json!({"assert": "no_service_event", "matching": {"kind": "turn.failed"}}),
            true,
        ),
        (
            json!({"assert": "no_service_event", "matching": {"kind": "turn.started"}}),
            false,
        ),
        // Lifecycle: exit, status, outcome.
        (json!({"assert": "exit", "code": 0}), true),
        (json!({"assert": "exit", "code": 1}), false),
        (json!({"assert": "exit", "signal": 15}), false),
        (json!({"assert": "status", "is": "exited"}), true),
        (json!({"assert": "status", "is": "idle"}), false),
        (json!({"assert": "outcome", "is": "completed"}), true),
        (json!({"assert": "outcome", "is": "failed"}), false),
        // A moment the recording does not have fails the predicate that names it.
        (
            json!({"assert": "screen_contains", "text": "hello", "at": {"event": "turn.failed"}}),
            false,
        ),
    ];
    for (assertion, holds) in cases {
        let report = run(&assertion);
        assert!(report.binding.is_none(), "{report:?}");
        assert_eq!(
            report.failures.is_empty(),
            holds,
            "{assertion}: {:?}",
            report.failures
        );
    }
}

#[test]
fn a_failure_shows_the_predicate_the_nearest_screen_and_the_events_around_it() {
    let report = run(&json!({"assert": "screen_contains", "text": "nope", "at": {"t_ms": 300}}));
    let f = &report.failures[0];
    assert_eq!(f.index, 0);
    assert!(f.predicate.contains(r#""text":"nope""#), "{}", f.predicate);
    assert!(f.message.contains("t_ms 300"), "{}", f.message);
    assert_eq!((f.seq, f.t_ms), (Some(3), 300));
    assert_eq!(f.excerpt, ["  0: hello", "  1: listing"]);
    let kinds: Vec<&str> = f.events.iter().filter_map(|e| e["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "session.started",
            "turn.started",
            "turn.completed",
            "session.exited"
        ]
    );
}

#[test]
fn a_spec_bound_to_another_recording_fails_whatever_it_says() {
    let dir = tempfile::tempdir().unwrap();
    let (c, fin) = session(dir.path());
    let mut spec = spec_for(&c, &json!({}), &[json!({"assert": "exit", "code": 0})]).unwrap();
    assert!(judge(dir.path(), &c, &fin, &spec).passed());
    for binding in [
        Binding {
            id: "another".into(),
            content_digest: spec.cassette.content_digest.clone(),
        },
        Binding {
            id: spec.cassette.id.clone(),
            content_digest: "sha256:00".into(),
        },
    ] {
        spec.cassette = binding.clone();
        let report = judge(dir.path(), &c, &fin, &spec);
        assert!(!report.passed());
        let why = report.binding.unwrap();
        for named in [
            binding.id.as_str(),
            binding.content_digest.as_str(),
            c.manifest.id.as_str(),
            c.manifest.content_digest.as_deref().unwrap(),
        ] {
            assert!(why.contains(named), "{why} does not name {named}");
        }
        assert!(report.failures.is_empty(), "no predicate is judged");
    }
}

#[test]
fn a_spec_error_names_the_file_and_the_assertion() {
    let dir = tempfile::tempdir().unwrap();
    let (c, _) = session(dir.path());
    let cases = [
        (
            json!({"assert": "screen_sparkles", "text": "x"}),
            "unknown variant `screen_sparkles`",
        ),
        (
            json!({"assert": "screen_contains", "text": "x"}),
            "missing field `at`",
        ),
        (
            json!({"assert": "exit", "code": 0, "cdoe": 1}),
            "unknown field `cdoe`",
        ),
        (
            json!({"assert": "screen_contains", "text": "x", "at": {"mark": "nowhere"}}),
            "no mark `nowhere`",
        ),
        // A predicate that would check nothing is refused, not passed.
        (json!({"assert": "exit"}), "`exit` needs `code` or `signal`"),
        (
            json!({"assert": "screen_state", "at": "end", "expect": {}}),
            "at least one field",
        ),
        (
            json!({"assert": "screen_stable", "from": "start"}),
            "`for_ms` or `to`",
        ),
        (json!({"assert": "keys", "keys": []}), "names no key"),
        (
            json!({"assert": "service_events", "in_order": []}),
            "lists no event",
        ),
    ];
    for (bad, says) in cases {
        let ok = json!({"assert": "exit", "code": 0});
        let err = spec_for(&c, &json!({}), &[ok, bad]).unwrap_err();
        assert!(
            err.starts_with("`x/assertions.json` assertion 1: "),
            "{err}"
        );
        assert!(err.contains(says), "{err}");
    }
}

#[test]
fn a_starter_spec_holds_for_the_recording_it_was_drafted_from() {
    let dir = tempfile::tempdir().unwrap();
    let (c, fin) = session(dir.path());
    let spec = super::starter::draft(&c, &fin);
    let again = Spec::parse(&spec.to_json(), Path::new("assertions.json")).unwrap();
    assert_eq!(again, spec);
    let report = judge(dir.path(), &c, &fin, &spec);
    assert!(report.passed(), "{report:?}");
    let kinds: Vec<&str> = spec.marks.keys().map(String::as_str).collect();
    assert_eq!(
        kinds,
        [
            "session.exited",
            "session.started",
            "turn.completed",
            "turn.started"
        ]
    );
    let json = spec.to_json();
    for has in [r#""text": "done""#, r#""is": "completed""#, r#""code": 0"#] {
        assert!(json.contains(has), "{json}");
    }
}

#[test]
fn the_end_reads_final_json_when_the_recording_has_it() {
    let events = [
        json!({"kind": "turn.started"}),
        json!({"kind": "turn.completed", "record": {"status": "idle"}}),
    ];
    let bare = json!({"exit": {"code": 0}});
    assert_eq!(
        super::eval::last_outcome(&bare, events.iter()).as_deref(),
        Some("completed")
    );
    assert_eq!(super::eval::final_status(&bare, &events), "idle");
    let recorded = json!({"status": "exited", "turn": {"id": "$UUID2", "state": "interrupted"}});
    assert_eq!(
        super::eval::last_outcome(&recorded, events.iter()).as_deref(),
        Some("interrupted")
    );
    assert_eq!(super::eval::final_status(&recorded, &events), "exited");
    assert_eq!(super::eval::last_outcome(&bare, events[..1].iter()), None);
}
