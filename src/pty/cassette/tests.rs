//! The cassette's round trip: what the recorder writes, read back and checked.

use std::path::Path;

use serde_json::{Value, json};

use super::format::{CassetteError, STREAMS};
use super::read::Cassette;
use super::record::Recorder;
use super::record::tests::{manifest, small_cassette};
use super::scrub::{Rule, Scrubber};
use crate::pty::tee::{Event, Observation, Sink, Tee};
use crate::pty::terminal::Terminal;

#[test]
fn scrubs_paths_and_keys_even_across_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let scrub = Scrubber::new(vec![Rule {
        name: "home".into(),
        find: "/home/dev".into(),
        replace: "$HOME".into(),
    }]);
    let tee = Tee::new();
    tee.add_sink(Box::new(
        Recorder::create(dir.path(), manifest(), scrub).unwrap(),
    ));
    tee.record(Event::Input {
        bytes: b"\x1b[200~key sk-ant-0123456789abcdefXYZ\x1b[201~".to_vec(),
    });
    tee.record(Event::Output {
        bytes: b"cd /home/d".to_vec(),
    });
    tee.record(Event::Output {
        bytes: b"ev/x Bearer abcdefgh12345 \xe2\x9c\x93".to_vec(),
    });
    tee.record(Event::Mark {
        stream: "service".into(),
        data: json!({"kind": "turn.started", "prompt": "in /home/dev"}),
    });
    tee.record(Event::Exit {
        code: Some(0),
        signal: None,
    });
    // Output after the exit (a terminal reset) and the last screen still go in.
    tee.record(Event::Output {
        bytes: b"\x1b[?25h".to_vec(),
    });
    tee.record(Event::Mark {
        stream: "frames".into(),
        data: json!({"reason": "end", "screen": {"lines": ["cd /home/dev/x", "bye", ""]}}),
    });
    tee.close_sinks();
    let c = Cassette::open(dir.path()).unwrap();
    assert_eq!(c.problems(), Vec::<String>::new());
    let raw = String::from_utf8(c.output.clone()).unwrap();
    // Each placeholder keeps the width of what it replaced (a terminal's geometry).
    assert_eq!(raw, "cd $HOME    /x Bearer <scrubbed>    ✓\x1b[?25h");
    let all: String = STREAMS
        .iter()
        .map(|s| fs_err::read_to_string(dir.path().join(s)).unwrap())
        .collect();
    assert!(
        !all.contains("/home/dev") && !all.contains("0123456789abcdef"),
        "{all}"
    );
    assert!(all.contains("\"kind\":\"paste\""), "{all}");
    // Seven observations, one record each: what was held back until the close went out
    // under the numbers of the chunks it came in.
    assert_eq!(c.records.len(), 7);
    let last: Value =
        serde_json::from_str(&fs_err::read_to_string(dir.path().join("final.json")).unwrap())
            .unwrap();
    assert_eq!(last["exit"], json!({"code": 0, "signal": null}));
    assert_eq!(last["screen"], "cd $HOME    /x\nbye");
    let report = fs_err::read_to_string(dir.path().join("scrub-report.json")).unwrap();
    // The home folder in the output, the service event and the last screen.
    assert!(report.contains("\"hits\": 3"), "{report}");
    assert!(c.asciicast().starts_with("{\"env\""));
}

/// An observation at `ms` milliseconds, numbered `seq`.
fn at(seq: u64, ms: u64, event: Event) -> Observation {
    Observation {
        seq,
        t_us: ms * 1000,
        event,
    }
}

/// A TUI that redraws only the cells that changed: it drew `loading`, then the checkout's
/// path over it. The placeholder keeps the path's width, so the recording
/// replays to the screen its frame shows (a shorter one left `$TREEng`, and the check
/// found a frame the output never drew).
#[test]
fn a_placeholder_keeps_the_width_of_what_a_terminal_drew() {
    let dir = tempfile::tempdir().unwrap();
    let scrub = Scrubber::new(vec![Rule {
        name: "tree path".into(),
        find: "/tmp/project/tree".into(),
        replace: "$TREE".into(),
    }]);
    let mut r = Recorder::create(dir.path(), manifest(), scrub).unwrap();
    let out = |bytes: &[u8]| Event::Output {
        bytes: bytes.to_vec(),
    };
    r.observe(&at(0, 0, out(b"\x1b[3;6Hloading")));
    r.observe(&at(1, 100, out(b"\x1b[3;6H/tmp/project/tree")));
    r.observe(&at(
        2,
        200,
        Event::Mark {
            stream: "frames".into(),
            data: json!({"reason": "quiet", "screen": {"rows": 24, "cols": 80,
                "lines": ["", "", "     /tmp/project/tree"]}}),
        },
    ));
    r.close();
    let c = Cassette::open(dir.path()).unwrap();
    assert_eq!(c.problems(), Vec::<String>::new());
    let mut term = Terminal::new(24, 80);
    term.feed(&c.output);
    assert_eq!(term.snapshot().lines[2].trim_end(), "     $TREE");
}

#[test]
fn held_back_output_keeps_the_time_it_was_received() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = Recorder::create(dir.path(), manifest(), Scrubber::new(Vec::new())).unwrap();
    let out = |bytes: &[u8]| Event::Output {
        bytes: bytes.to_vec(),
    };
    // A key split across two chunks 600 ms apart, then a short tail, then a minute of
    // nothing but a frame.
    let first = [vec![b'x'; 100], b" key sk-ant-0123".to_vec()].concat();
    let second = [b"456789abcdefXYZ done ".to_vec(), vec![b'y'; 100]].concat();
    r.observe(&at(0, 0, out(b"")));
    r.observe(&at(1, 1100, out(&first)));
    r.observe(&at(2, 1700, out(&second)));
    r.observe(&at(3, 2000, out(b"tail")));
    r.observe(&at(
        4,
        62_000,
        Event::Mark {
            stream: "frames".into(),
            data: json!({"reason": "quiet", "screen": {"lines": ["tail"]}}),
        },
    ));
    r.close();
    let c = Cassette::open(dir.path()).unwrap();
    assert_eq!(c.problems(), Vec::<String>::new());
    let chunks: Vec<(u64, String)> = c
        .output_chunks()
        .into_iter()
        .map(|(t, b)| (t, String::from_utf8(b.to_vec()).unwrap()))
        .collect();
    let want = [
        (0, String::new()),
        // The placeholder (as wide as the key) goes with the chunk the key started in, at
        // that chunk's time.
        (
            1100,
            format!("{} key sk-<scrubbed>{}", "x".repeat(100), " ".repeat(13)),
        ),
        (1700, format!(" done {}", "y".repeat(100))),
        // Held until the close a minute later, stamped when it came.
        (2000, "tail".to_owned()),
    ];
    assert_eq!(chunks, want);
    assert_eq!(
        c.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4]
    );
    assert!(!String::from_utf8_lossy(&c.output).contains("0123456789"));
}

#[test]
fn refuses_newer_versions_and_missing_files() {
    let dir = tempfile::tempdir().unwrap();
    let tee = Tee::new();
    tee.add_sink(Box::new(
        Recorder::create(dir.path(), manifest(), Scrubber::new(Vec::new())).unwrap(),
    ));
    tee.record(Event::Exit {
        code: Some(0),
        signal: None,
    });
    tee.close_sinks();
    assert!(Cassette::open(dir.path()).is_ok());
    let m = dir.path().join("manifest.json");
    let text = fs_err::read_to_string(&m)
        .unwrap()
        .replace("\"version\": 1", "\"version\": 2");
    fs_err::write(&m, text).unwrap();
    assert!(matches!(
        Cassette::open(dir.path()),
        Err(CassetteError::Version { found: 2, .. })
    ));
    fs_err::remove_file(dir.path().join("final.json")).unwrap();
    assert!(matches!(
        Cassette::open(dir.path()),
        Err(CassetteError::Missing(_, "final.json"))
    ));
}

/// A recorder that missed the program's first bytes: its frames show a screen that its
/// `output.raw` never drew. The same screen, drawn, checks clean.
#[test]
fn check_finds_a_frame_whose_output_the_recording_lacks() {
    let record = |draw: &[u8]| {
        let dir = tempfile::tempdir().unwrap();
        let tee = Tee::new();
        tee.add_sink(Box::new(
            Recorder::create(dir.path(), manifest(), Scrubber::new(Vec::new())).unwrap(),
        ));
        if !draw.is_empty() {
            tee.record(Event::Output {
                bytes: draw.to_vec(),
            });
        }
        let mut lines = vec![String::new(); 24];
        lines[0] = "Welcome   to the app".into();
        lines[2] = "> ".into();
        tee.record(Event::Mark {
            stream: "frames".into(),
            data: json!({"reason": "idle", "screen": {"rows": 24, "cols": 80,
                "cursor": [2, 2], "title": "", "lines": lines}}),
        });
        tee.record(Event::Output {
            bytes: b"\x1b[3;3Hx".to_vec(),
        });
        tee.close_sinks();
        Cassette::open(dir.path()).unwrap().problems()
    };
    assert_eq!(
        record(b"Welcome\x1b[11Gto the app\r\n\r\n> "),
        Vec::<String>::new()
    );
    let lost = record(b"");
    assert!(
        lost.iter()
            .any(|p| p.contains("shows `Welcome to the app`, which output.raw never drew")),
        "{lost:?}"
    );
}

/// A path the terminal wrapped at the right edge: the output that drew it is scrubbed whole,
/// and the frame of that screen, whose rows hold the path in two pieces, is too; the
/// recording checks, and neither piece is in it.
#[test]
fn a_path_wrapped_over_two_rows_is_scrubbed_in_the_frame_too() {
    let dir = tempfile::tempdir().unwrap();
    let tee = Tee::new();
    let rule = Rule {
        name: "tree path".into(),
        find: "/tmp/spxOnYLnU/repo".into(),
        replace: "$TREE".into(),
    };
    tee.add_sink(Box::new(
        Recorder::create(dir.path(), manifest(), Scrubber::new(vec![rule])).unwrap(),
    ));
    // 80 columns: the path starts 6 cells before the edge.
    let line = format!("{}(cwd: /tmp/spxOnYLnU/repo)", "x".repeat(68));
    let mut term = Terminal::new(24, 80);
    term.feed(line.as_bytes());
    tee.record(Event::Output {
        bytes: line.into_bytes(),
    });
    let screen = term.snapshot();
    assert!(
        screen.lines[0].ends_with("(cwd: /tmp/s"),
        "{:?}",
        screen.lines
    );
    tee.record(Event::Mark {
        stream: "frames".into(),
        data: json!({ "reason": "idle", "screen": screen }),
    });
    tee.close_sinks();
    let frames = fs_err::read_to_string(dir.path().join("frames.jsonl")).unwrap();
    assert!(
        !frames.contains("/tmp/s") && !frames.contains("pxOnYLnU"),
        "{frames}"
    );
    assert!(frames.contains("(cwd: $TREE "), "{frames}");
    assert_eq!(
        Cassette::open(dir.path()).unwrap().problems(),
        Vec::<String>::new()
    );
}

#[test]
fn check_finds_a_changed_digest_a_seq_gap_and_untiled_output() {
    let fresh = || {
        let dir = tempfile::tempdir().unwrap();
        small_cassette(dir.path());
        assert_eq!(
            Cassette::open(dir.path()).unwrap().problems(),
            Vec::<String>::new()
        );
        dir
    };
    let has = |dir: &Path, needle: &str| {
        let problems = Cassette::open(dir).unwrap().problems();
        assert!(problems.iter().any(|p| p.contains(needle)), "{problems:?}");
    };
    // One byte of the output changed.
    let d = fresh();
    let raw = d.path().join("output.raw");
    let mut bytes = fs_err::read(&raw).unwrap();
    bytes[0] = b'z';
    fs_err::write(&raw, bytes).unwrap();
    has(d.path(), "content_digest");
    // A record dropped from a stream.
    let d = fresh();
    fs_err::write(d.path().join("input.jsonl"), "").unwrap();
    has(d.path(), "without gaps");
    // A chunk that does not start where the previous one ended.
    let d = fresh();
    let index = d.path().join("output.jsonl");
    let mut chunks: Vec<Value> = fs_err::read_to_string(&index)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let second = chunks[1]["offset"].as_u64().unwrap();
    assert!(second > 0);
    chunks[1]["offset"] = (second - 1).into();
    let text = chunks
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    fs_err::write(&index, text).unwrap();
    has(d.path(), &format!("starts at Some({})", second - 1));
    // A record without its number is refused when read.
    let d = fresh();
    fs_err::write(d.path().join("input.jsonl"), "{\"t_ms\":0}\n").unwrap();
    assert!(matches!(
        Cassette::open(d.path()),
        Err(CassetteError::Bad { line: 1, .. })
    ));
}

/// The scrubber of the split-point tests: a home folder, a checkout inside it, and the
/// standard patterns.
fn home_and_tree_scrubber() -> Scrubber {
    let rule = |name: &str, find: &str, replace: &str| Rule {
        name: name.into(),
        find: find.into(),
        replace: replace.into(),
    };
    Scrubber::with_patterns(
        vec![
            rule("home path", "/home/dev", "$HOME"),
            rule("tree path", "/home/dev/src/project", "$TREE"),
        ],
        super::scrub::standard_patterns(),
    )
}

/// What a TUI drew in many small redraws: paths, an id and a time, each of which may be cut
/// anywhere by the chunks it arrives in.
const DRAWN: &str = "\x1b[H\x1b[2Jcwd /home/dev/src/project\r\nhome /home/dev/.config\r\nid 0b6a2f3c-8d1e-4f5a-9b7c-1d2e3f4a5b6c at 2026-11-27T12:34:56.789Z\r\nagain 0B6A2F3C-8D1E-4F5A-9B7C-1D2E3F4A5B6C in /home/dev/src/project/src\r\n";

/// Records `text` cut at `cuts` (offsets, any order) as output chunks, then a frame of the
/// screen it drew, and closes the recording.
fn record_in_pieces(dir: &Path, text: &[u8], cuts: &[usize]) {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (text.len() + 1)).collect();
    cuts.push(0);
    cuts.push(text.len());
    cuts.sort_unstable();
    cuts.dedup();
    let tee = Tee::new();
    tee.add_sink(Box::new(
        Recorder::create(dir, manifest(), home_and_tree_scrubber()).unwrap(),
    ));
    for w in cuts.windows(2) {
        tee.record(Event::Output {
            bytes: text[w[0]..w[1]].to_vec(),
        });
    }
    let mut term = Terminal::new(24, 80);
    term.feed(text);
    tee.record(Event::Mark {
        stream: "frames".into(),
        data: json!({"reason": "quiet", "screen": term.snapshot()}),
    });
    tee.close_sinks();
}

/// Regression: the recorder held back only a tail of the output and released the first part
/// of a path that straddled its cut unscrubbed (a TUI redrawing in one-byte chunks left the
/// checkout's path in `output.raw`, and `cassette check` found a frame showing `$TREE` the
/// output never drew).
#[test]
fn a_path_drawn_one_byte_at_a_time_never_reaches_output_raw() {
    let dir = tempfile::tempdir().unwrap();
    let cuts: Vec<usize> = (0..DRAWN.len()).collect();
    record_in_pieces(dir.path(), DRAWN.as_bytes(), &cuts);
    let c = Cassette::open(dir.path()).unwrap();
    assert_eq!(c.problems(), Vec::<String>::new());
    let raw = String::from_utf8_lossy(&c.output);
    assert!(!raw.contains("/home/dev"), "{raw}");
    let whole = home_and_tree_scrubber().scrub_mapped(DRAWN.as_bytes(), &mut [], true);
    assert_eq!(c.output, whole);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Wherever the chunks cut the output, no path, id or time reaches `output.raw`, which
    /// holds exactly what scrubbing the whole output at once gives, and the cassette checks.
    #[test]
    fn no_split_point_lets_a_path_through(cuts in proptest::collection::vec(0usize..400, 0..40)) {
        let dir = tempfile::tempdir().unwrap();
        record_in_pieces(dir.path(), DRAWN.as_bytes(), &cuts);
        let c = Cassette::open(dir.path()).unwrap();
        proptest::prop_assert_eq!(c.problems(), Vec::<String>::new());
        let raw = String::from_utf8_lossy(&c.output).into_owned();
        for leak in ["/home/dev", "0b6a2f3c", "0B6A2F3C", "2026-11-27", "12:34:56"] {
            proptest::prop_assert!(!raw.contains(leak), "{} in {}", leak, raw);
        }
        let whole = home_and_tree_scrubber().scrub_mapped(DRAWN.as_bytes(), &mut [], true);
        proptest::prop_assert_eq!(c.output, whole);
    }
}

/// One id is one placeholder wherever it shows (any case, any file); another id gets the
/// next number; the session's pids and times go; the report lists every rule with its hits
/// and what was kept on purpose.
#[test]
fn ids_keep_one_placeholder_each_and_the_report_lists_every_rule() {
    let dir = tempfile::tempdir().unwrap();
    let mut scrub = home_and_tree_scrubber();
    scrub.add_pid(48_213);
    scrub.keep("manifest.id", "the cassette's own id");
    let tee = Tee::new();
    tee.add_sink(Box::new(
        Recorder::create(dir.path(), manifest(), scrub).unwrap(),
    ));
    let a = "6f1c1e0a-3b2d-4c5e-8f9a-0b1c2d3e4f5a";
    let b = "0b6a2f3c-8d1e-4f5a-9b7c-1d2e3f4a5b6c";
    tee.record(Event::Mark {
        stream: "process".into(),
        data: json!({"pid": 48_214}),
    });
    tee.record(Event::Output {
        bytes: format!("session {a} pid 48213 child 48214 at Fri Nov 27 12:00:01 2026\r\n")
            .into_bytes(),
    });
    tee.record(Event::Mark {
        stream: "service".into(),
        data: json!({"kind": "turn.started", "session_id": a.to_uppercase(), "thread": b,
            "at": "2026-11-27T12:00:01.123Z", "socket": "/run/user/1000/spex/ab12.sock"}),
    });
    tee.record(Event::Output {
        bytes: format!("thread {b} again {a} /tmp/.tmpAbC123/x.log\r\n").into_bytes(),
    });
    tee.close_sinks();
    let c = Cassette::open(dir.path()).unwrap();
    assert_eq!(c.problems(), Vec::<String>::new());
    let all: String = STREAMS
        .iter()
        .chain(["output.raw", "final.json"].iter())
        .map(|s| fs_err::read_to_string(dir.path().join(s)).unwrap())
        .collect();
    for leak in [
        a,
        b,
        &a.to_uppercase(),
        "48213",
        "48214",
        "12:00:01",
        "2026-11-27",
        "ab12.sock",
        ".tmpAbC123",
    ] {
        assert!(!all.contains(leak), "{leak} in {all}");
    }
    let raw = String::from_utf8_lossy(&c.output);
    assert!(raw.starts_with("session $UUID1 "), "{raw}");
    assert!(raw.contains("thread $UUID2 "), "{raw}");
    assert!(raw.contains("again $UUID1 "), "{raw}");
    let service = fs_err::read_to_string(dir.path().join("service-events.jsonl")).unwrap();
    assert!(service.contains("\"session_id\":\"$UUID1\""), "{service}");
    assert!(service.contains("\"thread\":\"$UUID2\""), "{service}");
    assert!(service.contains("\"socket\":\"$SOCKET\""), "{service}");
    let report: Value = serde_json::from_str(
        &fs_err::read_to_string(dir.path().join("scrub-report.json")).unwrap(),
    )
    .unwrap();
    let hits = |rule: &str| {
        report["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["rule"] == rule)
            .map(|r| r["hits"].as_u64().unwrap())
    };
    for rule in [
        "uuid",
        "rfc3339 timestamp",
        "local timestamp",
        "process id",
        "socket path",
        "temp path",
    ] {
        assert!(hits(rule).is_some_and(|n| n > 0), "{rule}: {report}");
    }
    assert_eq!(hits("home path"), Some(0));
    assert_eq!(
        report["distinct_ids"],
        json!([{"rule": "uuid", "count": 2}])
    );
    assert_eq!(report["kept"][0]["field"], "manifest.id");
}

/// A cassette whose frames another emulator version derived is refused with both versions
/// named; one of the same minor version (or from before the manifest named one) reads.
#[test]
fn a_cassette_from_another_emulator_version_is_refused_naming_both() {
    use super::format::{EMULATOR_VERSION, same_emulator};
    let dir = tempfile::tempdir().unwrap();
    small_cassette(dir.path());
    let path = dir.path().join("manifest.json");
    let set = |version: Option<&str>| {
        let mut m: Value = serde_json::from_str(&fs_err::read_to_string(&path).unwrap()).unwrap();
        m["terminal"]["model"] = json!("vt100");
        m["terminal"]["model_version"] = json!(version);
        if version.is_none() {
            m["terminal"]
                .as_object_mut()
                .unwrap()
                .remove("model_version");
        }
        fs_err::write(&path, serde_json::to_vec(&m).unwrap()).unwrap();
    };
    set(Some("0.15.2"));
    let err = Cassette::open(dir.path()).unwrap_err();
    let said = err.to_string();
    assert!(matches!(err, CassetteError::Emulator { .. }), "{said}");
    assert!(
        said.contains("vt100 0.15.2") && said.contains(&format!("vt100 {EMULATOR_VERSION}")),
        "{said}"
    );
    for fine in [Some("0.16"), Some(EMULATOR_VERSION), None] {
        set(fine);
        assert!(Cassette::open(dir.path()).is_ok(), "{fine:?}");
    }
    assert!(!same_emulator("1.16.2"));
}

/// The emulator version the manifest names is the one spex is built with (`Cargo.lock`).
#[test]
fn the_emulator_version_is_the_locked_one() {
    let lock =
        fs_err::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.lock")).unwrap();
    let locked = lock
        .split("[[package]]")
        .find(|p| p.contains("name = \"vt100\""))
        .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = ")))
        .map(|v| v.trim_matches('"').to_owned())
        .unwrap();
    assert_eq!(locked, super::format::EMULATOR_VERSION);
}

/// Regression: a TUI draws its session id right after a color escape
/// (`\x1b[38;5;231m<id>\x1b[39m`): a word boundary never held between the escape's `m` and the
/// id, and the id stayed in `output.raw` while the frame showed it scrubbed. Ids, times and
/// pids are found wherever no hex digit (an id) or digit (a number) touches them.
#[test]
fn an_id_or_time_right_after_a_color_escape_is_scrubbed() {
    let mut s = home_and_tree_scrubber();
    s.add_pid(4242);
    let drawn = b"\x1b[38;5;231m40f1a785-74ed-4e53-9c06-085ae8de9bdb\x1b[39m \x1b[1m12:00:01\x1b[0m pid\x1b[2m4242\x1b[0m 142424 a40f1a785-74ed-4e53-9c06-085ae8de9bdb";
    let out = String::from_utf8(s.scrub(drawn)).unwrap();
    assert_eq!(
        out,
        "\x1b[38;5;231m$UUID1\x1b[39m \x1b[1m$TIME\x1b[0m pid\x1b[2m$PID1\x1b[0m 142424 a40f1a785-74ed-4e53-9c06-085ae8de9bdb"
    );
}

/// Regression: a TUI (one harness does) draws its resume hint in a color gradient, the session id cut by a
/// color change every few characters; the id is found in the text as drawn, replaced whole,
/// and the color changes inside it follow the placeholder (what comes after is drawn in the
/// same colors). Streamed one byte at a time, the same.
#[test]
fn an_id_drawn_in_a_color_gradient_is_scrubbed_whole() {
    let drawn: &[u8] = b"agent\x1b[38;5;104m --re\x1b[38;5;140msume 8a5427f8-61\x1b[38;5;139m23-4fa2-b468-55\x1b[38;5;175medea38665\x1b[38;5;174md\x1b[39m end";
    let out = home_and_tree_scrubber().scrub_mapped(drawn, &mut [], true);
    let expected = format!(
        "agent\x1b[38;5;104m --re\x1b[38;5;140msume $UUID1{}\x1b[38;5;139m\x1b[38;5;175m\x1b[38;5;174m\x1b[39m end",
        " ".repeat(30)
    );
    assert_eq!(String::from_utf8(out.clone()).unwrap(), expected);
    let dir = tempfile::tempdir().unwrap();
    let cuts: Vec<usize> = (0..drawn.len()).collect();
    record_in_pieces(dir.path(), drawn, &cuts);
    let c = Cassette::open(dir.path()).unwrap();
    assert_eq!(c.problems(), Vec::<String>::new());
    assert_eq!(c.output, out);
}

/// A hook's pid in a service event is scrubbed (its field kept valid JSON); the number it is
/// elsewhere in the same recording gets the same placeholder.
#[test]
fn a_hooks_pid_in_a_service_event_is_scrubbed() {
    let dir = tempfile::tempdir().unwrap();
    let tee = Tee::new();
    tee.add_sink(Box::new(
        Recorder::create(dir.path(), manifest(), Scrubber::new(Vec::new())).unwrap(),
    ));
    tee.record(Event::Mark {
        stream: "service".into(),
        data: json!({"kind": "attention.opened", "hook": {"pid": 48_731, "start": 1}}),
    });
    tee.record(Event::Mark {
        stream: "service".into(),
        data: json!({"kind": "attention.closed", "text": "hook 48731 answered"}),
    });
    tee.close_sinks();
    let service = fs_err::read_to_string(dir.path().join("service-events.jsonl")).unwrap();
    assert!(!service.contains("48731"), "{service}");
    let events: Vec<Value> = service
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events[0]["hook"]["pid"], "$PID1", "{service}");
    assert_eq!(events[1]["text"], "hook $PID1 answered", "{service}");
}
