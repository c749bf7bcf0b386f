//! Scrubbing a cassette again with other rules (rules added since it was recorded): its
//! records are played, in `seq` order, into a new recorder, which writes the cassette anew
//! under the same id, the output chunks as they came, the frames and events as they were.

use std::path::Path;

use serde_json::{Value, json};

use super::format::CassetteError;
use super::read::Cassette;
use super::record::Recorder;
use super::scrub::Scrubber;
use crate::pty::tee::{Event, Observation, Sink};

/// Scrubs the cassette in `dir` again with `scrubber`, in place; its manifest keeps its id and
/// gains what a recording now says (an environment allowlist instead of every name, the clock
/// and the replay default). A cassette that does not read is left alone.
pub fn rescrub(dir: &Path, scrubber: Scrubber) -> Result<(), CassetteError> {
    let old = Cassette::open(dir)?;
    let last: Value = serde_json::from_str(&fs_err::read_to_string(dir.join("final.json"))?)
        .unwrap_or(Value::Null);
    let mut manifest = old.manifest.clone();
    manifest.content_digest = None;
    let mut scrubber = scrubber;
    if let Some(names) = manifest.command.get("env_names").and_then(Value::as_array) {
        let env: serde_json::Map<String, Value> = names
            .iter()
            .filter_map(Value::as_str)
            .filter(|n| crate::env::RECORDED_VARS.contains(n))
            .map(|n| (n.to_owned(), Value::Null))
            .collect();
        manifest.command["env"] = Value::Object(env);
        if let Some(c) = manifest.command.as_object_mut() {
            c.remove("env_names");
        }
    }
    if let Some(argv) = manifest.command["argv"].as_array_mut() {
        for a in argv {
            if let Some(s) = a.as_str() {
                *a = scrubber.scrub_str(s).into();
            }
        }
    }
    if let Some(p) = manifest.provenance.as_object_mut()
        && let Some(at) = p.remove("recorded_at")
    {
        p.insert(
            "recorded_on".into(),
            at.as_str().and_then(|t| t.get(..10)).into(),
        );
    }
    manifest.clock.get_or_insert_with(|| {
        json!({"source": "monotonic", "resolution_ms": manifest.timing["resolution_ms"],
            "zero": "first record", "wall_time": "scrubbed"})
    });
    manifest
        .replay_default
        .get_or_insert_with(|| "real-time".into());
    let fresh = tempfile::Builder::new()
        .prefix(".rescrub")
        .tempdir_in(dir.parent().unwrap_or(Path::new(".")))?;
    let mut r = Recorder::create(fresh.path(), manifest, scrubber)?;
    for (i, o) in observations(&old, &last).into_iter().enumerate() {
        r.observe(&Observation {
            seq: i as u64,
            t_us: o.0 * 1000,
            event: o.1,
        });
    }
    r.close();
    for name in super::format::REQUIRED {
        fs_err::rename(fresh.path().join(name), dir.join(name))?;
    }
    Ok(())
}

/// The cassette's records as the observations that made them, with their times (ms).
fn observations(c: &Cassette, last: &Value) -> Vec<(u64, Event)> {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("seq");
            o.remove("t_ms");
        }
        v
    };
    // The clock starts where the first recording's did, which may be before its first record.
    let mut out = vec![(
        0,
        Event::Mark {
            stream: "start".into(),
            data: Value::Null,
        },
    )];
    let mut last_turn: Option<Value> = None;
    let mut turn_id = Value::Null;
    let exited = !last["exit"]["code"].is_null() || !last["exit"]["signal"].is_null();
    let end = c
        .records
        .iter()
        .rfind(|r| r.stream == "output.jsonl")
        .filter(|r| exited && r.value["len"].as_u64() == Some(0))
        .map(|r| r.seq);
    for rec in &c.records {
        let v = &rec.value;
        if v["turn_id"].is_string() {
            turn_id = v["turn_id"].clone();
        }
        // A cassette from before events carried the record's state: the last turn ending's
        // kind says how the turn ended.
        let ending = v["kind"]
            .as_str()
            .and_then(|k| k.strip_prefix("turn."))
            .filter(|k| ["completed", "interrupted", "failed", "timed_out"].contains(k));
        if let Some(state) = ending
            && !v["record"].is_object()
        {
            last_turn = Some(json!({"status": null,
                "turn": {"id": v["turn_id"], "state": state}, "usage": null}));
        }
        let event = match rec.stream {
            "output.jsonl" => {
                let at = usize::try_from(v["offset"].as_u64().unwrap_or(0)).unwrap_or(0);
                let len = usize::try_from(v["len"].as_u64().unwrap_or(0)).unwrap_or(0);
                if len == 0 && Some(rec.seq) == end {
                    // The program's end: the last output record, with no bytes.
                    let code = last["exit"]["code"]
                        .as_i64()
                        .and_then(|c| i32::try_from(c).ok());
                    let signal = last["exit"]["signal"]
                        .as_i64()
                        .and_then(|s| i32::try_from(s).ok());
                    Event::Exit { code, signal }
                } else {
                    Event::Output {
                        bytes: c.output.get(at..at + len).unwrap_or_default().to_vec(),
                    }
                }
            }
            "input.jsonl" => input(v),
            stream => {
                if v["record"].is_object() {
                    last_turn = Some(json!({"status": v["record"]["status"],
                        "turn": {"id": turn_id, "state": v["record"]["turn"]},
                        "usage": null}));
                }
                Event::Mark {
                    stream: if stream == "frames.jsonl" {
                        "frames"
                    } else {
                        "service"
                    }
                    .into(),
                    data: strip(v),
                }
            }
        };
        out.push((rec.t_ms, event));
    }
    // A recording whose program's end had no empty output record of its own ends with it.
    if exited && end.is_none() {
        let code = last["exit"]["code"]
            .as_i64()
            .and_then(|c| i32::try_from(c).ok());
        let signal = last["exit"]["signal"]
            .as_i64()
            .and_then(|s| i32::try_from(s).ok());
        let at = out.last().map_or(0, |(t, _)| *t);
        out.push((at, Event::Exit { code, signal }));
    }
    // What the session's record said last, for `final.json` (a note: no record of its own).
    // At the recording's end, which may come after its last record.
    let t = out
        .last()
        .map_or(0, |o| o.0)
        .max(last["duration_ms"].as_u64().unwrap_or(0));
    out.push((
        t,
        Event::Mark {
            stream: "final".into(),
            data: last_turn.unwrap_or_else(|| json!({})),
        },
    ));
    out
}

/// The observation an `input.jsonl` record was made from.
fn input(v: &Value) -> Event {
    match v["kind"].as_str() {
        Some("resize") => Event::Resize {
            rows: u16::try_from(v["rows"].as_u64().unwrap_or(24)).unwrap_or(24),
            cols: u16::try_from(v["cols"].as_u64().unwrap_or(80)).unwrap_or(80),
        },
        Some("signal") => Event::Signal {
            signal: i32::try_from(v["signal"].as_i64().unwrap_or(0)).unwrap_or(0),
        },
        _ => Event::Input {
            bytes: v["text"].as_str().map_or_else(
                || hex::decode(v["hex"].as_str().unwrap_or_default()).unwrap_or_default(),
                |t| t.as_bytes().to_vec(),
            ),
        },
    }
}
