//! A cassette replayed collapsed, under its own clock (the recorded `t_ms`, never the wall
//! clock): the screen after every output chunk and resize, and the moments a spec names
//! resolved to a place in it.

use serde_json::Value;

use super::Anchor;
use crate::pty::cassette::Cassette;
use crate::pty::cassette::read::Record;
use crate::pty::terminal::{Modes, Terminal};

/// The screen once every record up to `seq` was replayed.
#[derive(Debug, Clone)]
pub struct State {
    /// The record that made this state; `None` for the blank screen before anything.
    pub seq: Option<u64>,
    pub t_ms: u64,
    pub rows: u16,
    pub cols: u16,
    pub cursor: (u16, u16),
    pub title: String,
    pub lines: Vec<String>,
    pub modes: Modes,
}

impl State {
    /// The screen's text, rows joined by `\n`.
    pub fn text(&self) -> String {
        self.lines.join("\n")
    }

    pub fn shows(&self, text: &str) -> bool {
        self.text().contains(text)
    }
}

/// A place in the recording: after record `seq` (`None`: before the first), at `t_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moment {
    pub seq: Option<u64>,
    pub t_ms: u64,
}

/// The replayed screens of a cassette, in order.
pub struct Timeline<'a> {
    pub cassette: &'a Cassette,
    /// `states[0]` is the blank screen; one more per output chunk or resize.
    pub states: Vec<State>,
}

fn size_of(v: &Value, key: &str, default: u16) -> u16 {
    v.get(key)
        .and_then(Value::as_u64)
        .and_then(|n| u16::try_from(n).ok())
        .unwrap_or(default)
}

fn state(term: &Terminal, seq: Option<u64>, t_ms: u64) -> State {
    let s = term.snapshot();
    State {
        seq,
        t_ms,
        rows: s.rows,
        cols: s.cols,
        cursor: s.cursor,
        title: s.title,
        lines: s.lines,
        modes: term.modes(),
    }
}

impl<'a> Timeline<'a> {
    /// Replays `cassette` through the terminal model at its recorded size, with its recorded
    /// resizes; the model does not answer queries (the recording holds the replies).
    pub fn replay(cassette: &'a Cassette) -> Timeline<'a> {
        let terminal = &cassette.manifest.terminal;
        let mut term = Terminal::new(size_of(terminal, "rows", 24), size_of(terminal, "cols", 80));
        term.set_answering(false);
        let mut states = vec![state(&term, None, 0)];
        for r in &cassette.records {
            match r.stream {
                "output.jsonl" => {
                    let at = r.value["offset"]
                        .as_u64()
                        .and_then(|n| usize::try_from(n).ok());
                    let len = r.value["len"]
                        .as_u64()
                        .and_then(|n| usize::try_from(n).ok());
                    let bytes = at
                        .zip(len)
                        .and_then(|(at, len)| cassette.output.get(at..at + len));
                    term.feed(bytes.unwrap_or_default());
                }
                "input.jsonl" if r.value["kind"] == "resize" => {
                    term.resize(size_of(&r.value, "rows", 24), size_of(&r.value, "cols", 80));
                }
                _ => continue,
            }
            states.push(state(&term, Some(r.seq), r.t_ms));
        }
        Timeline { cassette, states }
    }

    /// The last record's moment (the start for an empty recording).
    pub fn end(&self) -> Moment {
        self.cassette
            .records
            .last()
            .map_or(Moment { seq: None, t_ms: 0 }, |r| Moment {
                seq: Some(r.seq),
                t_ms: r.t_ms,
            })
    }

    /// The moment after every record stamped at or before `t_ms`.
    pub fn at_time(&self, t_ms: u64) -> Moment {
        let seq = self
            .cassette
            .records
            .iter()
            .take_while(|r| r.t_ms <= t_ms)
            .last()
            .map(|r| r.seq);
        Moment { seq, t_ms }
    }

    fn first(&self, stream: &str, field: &str, value: &str) -> Option<&Record> {
        self.cassette
            .records
            .iter()
            .find(|r| r.stream == stream && r.value[field] == value)
    }

    /// Where `anchor` is (a mark already replaced by its moment), or why it names none.
    pub fn resolve(&self, anchor: &Anchor) -> Result<Moment, String> {
        let at = |r: &Record| Moment {
            seq: Some(r.seq),
            t_ms: r.t_ms,
        };
        let found =
            match anchor {
                Anchor::Start => {
                    return Ok(Moment { seq: None, t_ms: 0 });
                }
                Anchor::End => return Ok(self.end()),
                Anchor::TMs(t) => return Ok(self.at_time(*t)),
                Anchor::Seq(seq) => self.cassette.records.iter().find(|r| r.seq == *seq),
                Anchor::Event(kind) => self.first("service-events.jsonl", "kind", kind),
                Anchor::LastEvent(kind) => self.cassette.records.iter().rev().find(|r| {
                    r.stream == "service-events.jsonl" && r.value["kind"] == kind.as_str()
                }),
                Anchor::Frame(reason) => self.first("frames.jsonl", "reason", reason),
                Anchor::Input(kind) => self.first("input.jsonl", "kind", kind),
                Anchor::Mark(name) => return Err(format!("mark `{name}` is not resolved")),
            };
        found.map(at).ok_or_else(|| {
            let what = match anchor {
                Anchor::Seq(seq) => format!("no record has seq {seq}"),
                Anchor::Event(k) | Anchor::LastEvent(k) => format!("no service event `{k}`"),
                Anchor::Frame(r) => format!("no frame noted as `{r}`"),
                Anchor::Input(k) => format!("no input of kind `{k}`"),
                _ => String::new(),
            };
            format!("the recording has {what}")
        })
    }

    /// The index of the state the screen shows at `m`.
    pub fn index_at(&self, m: Moment) -> usize {
        match m.seq {
            None => 0,
            Some(seq) => self
                .states
                .iter()
                .rposition(|s| s.seq.is_none_or(|s| s <= seq))
                .unwrap_or(0),
        }
    }

    /// The states from the one shown at `from` to the one shown at `to`, both included.
    pub fn between(&self, from: Moment, to: Moment) -> &[State] {
        let (a, b) = (self.index_at(from), self.index_at(to));
        if a > b { &[] } else { &self.states[a..=b] }
    }

    /// The service events around `seq` (`before` earlier ones, `after` later ones), for a
    /// report.
    pub fn events_near(&self, seq: Option<u64>, before: usize, after: usize) -> Vec<&Value> {
        let events: Vec<&Record> = self
            .cassette
            .records
            .iter()
            .filter(|r| r.stream == "service-events.jsonl")
            .collect();
        let split = events.partition_point(|r| seq.is_some_and(|s| r.seq <= s));
        let lo = split.saturating_sub(before);
        let hi = (split + after).min(events.len());
        events[lo..hi].iter().map(|r| &r.value).collect()
    }

    /// The service events, in order.
    pub fn events(&self) -> impl Iterator<Item = &Value> {
        self.cassette
            .records
            .iter()
            .filter(|r| r.stream == "service-events.jsonl")
            .map(|r| &r.value)
    }

    /// The input records, in order.
    pub fn inputs(&self) -> impl Iterator<Item = &Record> {
        self.cassette
            .records
            .iter()
            .filter(|r| r.stream == "input.jsonl")
    }
}
