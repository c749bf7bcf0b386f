//! Judging a spec against its cassette: the binding first (a spec written against another
//! recording fails whatever its predicates say), then every predicate over the replayed
//! timeline, each failure with the screen nearest to it and the service events around it.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::timeline::{Moment, State, Timeline};
use super::{Anchor, Assertion, AssertionsError, FILE, ScreenState, Spec};
use crate::pty::cassette::Cassette;
use crate::pty::cassette::format::CassetteError;

/// At most this many screen rows go into a failure's excerpt.
const EXCERPT_ROWS: usize = 16;
/// Service events shown before and after a failure's moment.
const NEARBY_EVENTS: usize = 3;

#[derive(Debug, thiserror::Error)]
pub enum TestError {
    #[error(transparent)]
    Cassette(#[from] CassetteError),
    #[error(transparent)]
    Spec(#[from] AssertionsError),
}

impl crate::hint::Hint for TestError {
    fn hint(&self) -> Option<String> {
        match self {
            TestError::Cassette(e) => e.hint(),
            TestError::Spec(e) => e.hint(),
        }
    }
}

/// One predicate that did not hold, with what a person needs to see why.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    /// Its place in the spec's `assertions`, from 0.
    pub index: usize,
    /// The predicate as the spec says it, one line of JSON.
    pub predicate: String,
    pub message: String,
    /// The screen nearest to the failure: the record that made it (`None`: the blank screen
    /// before the first) and its time.
    pub seq: Option<u64>,
    pub t_ms: u64,
    /// That screen's non-blank rows, `row: text`, control characters made visible.
    pub excerpt: Vec<String>,
    /// The recorded frame nearest to that moment (`frames.jsonl`): its reason, `seq`, `t_ms`.
    pub frame: Option<Value>,
    /// The service events around that moment.
    pub events: Vec<Value>,
}

/// The result of one cassette's spec.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub cassette: PathBuf,
    pub id: String,
    pub assertions: usize,
    /// Why the spec does not belong to this recording, when it does not.
    pub binding: Option<String>,
    pub failures: Vec<Failure>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.binding.is_none() && self.failures.is_empty()
    }
}

/// Reads the cassette in `dir` and its `assertions.json`, and judges them.
pub fn test(dir: &Path) -> Result<Report, TestError> {
    let cassette = Cassette::open(dir)?;
    let spec = Spec::load(&dir.join(FILE))?;
    let fin: Value = serde_json::from_str(
        &fs_err::read_to_string(dir.join("final.json")).map_err(CassetteError::File)?,
    )
    .map_err(|e| CassetteError::Bad {
        path: dir.join("final.json"),
        line: e.line(),
        message: e.to_string(),
    })?;
    Ok(judge(dir, &cassette, &fin, &spec))
}

/// Why `spec` is not bound to `cassette`, naming both recordings, or `None`.
pub fn binding_mismatch(cassette: &Cassette, spec: &Spec) -> Option<String> {
    let digest = format!("sha256:{}", hex::encode(Sha256::digest(&cassette.output)));
    let manifest = cassette
        .manifest
        .content_digest
        .as_deref()
        .unwrap_or("none");
    let bound = &spec.cassette;
    if bound.id != cassette.manifest.id || bound.content_digest != manifest {
        return Some(format!(
            "the spec is bound to cassette `{}` (content_digest `{}`), this cassette is `{}` \
             (content_digest `{manifest}`)",
            bound.id, bound.content_digest, cassette.manifest.id
        ));
    }
    (digest != manifest).then(|| {
        format!(
            "output.raw has content_digest `{digest}`, not the `{manifest}` its manifest and \
             the spec name (the recording was changed)"
        )
    })
}

/// Judges every predicate of `spec` (none when the spec is bound to another recording).
pub fn judge(dir: &Path, cassette: &Cassette, fin: &Value, spec: &Spec) -> Report {
    let mut report = Report {
        cassette: dir.to_owned(),
        id: cassette.manifest.id.clone(),
        assertions: spec.assertions.len(),
        binding: binding_mismatch(cassette, spec),
        failures: Vec::new(),
    };
    if report.binding.is_some() {
        return report;
    }
    let timeline = Timeline::replay(cassette);
    let judge = Judge {
        t: &timeline,
        spec,
        fin,
    };
    for (index, a) in spec.assertions.iter().enumerate() {
        if let Err(miss) = judge.check(a) {
            let state = &timeline.states[miss.state.min(timeline.states.len() - 1)];
            report.failures.push(Failure {
                index,
                predicate: a.quoted(),
                message: miss.message,
                seq: state.seq,
                t_ms: state.t_ms,
                excerpt: excerpt(state),
                frame: nearest_frame(cassette, miss.seq.or(state.seq)),
                events: timeline
                    .events_near(miss.seq.or(state.seq), NEARBY_EVENTS, NEARBY_EVENTS)
                    .into_iter()
                    .cloned()
                    .collect(),
            });
        }
    }
    report
}

/// The recorded frame nearest to record `seq` (the first one for the start).
fn nearest_frame(cassette: &Cassette, seq: Option<u64>) -> Option<Value> {
    let at = seq.unwrap_or(0);
    cassette
        .records
        .iter()
        .filter(|r| r.stream == "frames.jsonl")
        .min_by_key(|r| r.seq.abs_diff(at))
        .map(|r| serde_json::json!({"reason": r.value["reason"], "seq": r.seq, "t_ms": r.t_ms}))
}

/// A screen's non-blank rows, numbered, control characters made visible.
fn excerpt(state: &State) -> Vec<String> {
    let rows: Vec<String> = state
        .lines
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| format!("{i:>3}: {}", crate::text::visible(l)))
        .collect();
    let skip = rows.len().saturating_sub(EXCERPT_ROWS);
    rows.into_iter().skip(skip).collect()
}

/// Why a predicate failed, and where: the state to show, and the moment whose events to show
/// when that is not the state's.
struct Miss {
    message: String,
    state: usize,
    seq: Option<u64>,
}

struct Judge<'a> {
    t: &'a Timeline<'a>,
    spec: &'a Spec,
    fin: &'a Value,
}

type Verdict = Result<(), Miss>;

fn when(m: Moment) -> String {
    match m.seq {
        Some(seq) => format!("t_ms {} (seq {seq})", m.t_ms),
        None => format!("t_ms {} (the start)", m.t_ms),
    }
}

impl Judge<'_> {
    fn last(&self) -> usize {
        self.t.states.len() - 1
    }

    fn miss(&self, message: String) -> Miss {
        Miss {
            message,
            state: self.last(),
            seq: None,
        }
    }

    fn moment(&self, anchor: &Anchor) -> Result<Moment, Miss> {
        let anchor = match anchor {
            Anchor::Mark(name) => self
                .spec
                .marks
                .get(name)
                .ok_or_else(|| self.miss(format!("the spec has no mark `{name}`")))?,
            a => a,
        };
        self.t.resolve(anchor).map_err(|e| self.miss(e))
    }

    /// `from` (the start unless given) to the earliest of `to` and `from` + `within_ms` (the
    /// end unless either is given).
    fn window(
        &self,
        from: Option<&Anchor>,
        to: Option<&Anchor>,
        within_ms: Option<u64>,
    ) -> Result<(Moment, Moment), Miss> {
        let from = self.moment(from.unwrap_or(&Anchor::Start))?;
        let mut end = match to {
            Some(to) => self.moment(to)?,
            None => self.t.end(),
        };
        if let Some(ms) = within_ms {
            let by = self.t.at_time(from.t_ms + ms);
            if by.seq < end.seq {
                end = by;
            }
        }
        Ok((from, end))
    }

    fn check(&self, a: &Assertion) -> Verdict {
        match a {
            Assertion::ScreenContains { text, at } => {
                let m = self.moment(at)?;
                let i = self.t.index_at(m);
                if self.t.states[i].shows(text) {
                    return Ok(());
                }
                Err(Miss {
                    message: format!("the screen at {} does not show `{text}`", when(m)),
                    state: i,
                    seq: m.seq,
                })
            }
            Assertion::ScreenEventually {
                text,
                from,
                within_ms,
                to,
            } => {
                let (from, end) = self.window(from.as_ref(), to.as_ref(), *within_ms)?;
                let states = self.t.between(from, end);
                if states.iter().any(|s| s.shows(text)) {
                    return Ok(());
                }
                Err(Miss {
                    message: format!(
                        "no screen from {} to {} shows `{text}`",
                        when(from),
                        when(end)
                    ),
                    state: self.t.index_at(end),
                    seq: end.seq,
                })
            }
            Assertion::ScreenNever { text, from, to } => {
                let (from, end) = self.window(from.as_ref(), to.as_ref(), None)?;
                let start = self.t.index_at(from);
                match self.t.between(from, end).iter().position(|s| s.shows(text)) {
                    None => Ok(()),
                    Some(k) => Err(Miss {
                        message: format!("the screen shows `{text}`"),
                        state: start + k,
                        seq: None,
                    }),
                }
            }
            Assertion::ScreenStable { from, for_ms, to } => self.stable(from, *for_ms, to.as_ref()),
            Assertion::ScreenChanges { from, to } => {
                let (from, to) = (self.moment(from)?, self.moment(to)?);
                let (a, b) = (self.t.index_at(from), self.t.index_at(to));
                if self.t.states[a].lines != self.t.states[b].lines {
                    return Ok(());
                }
                Err(Miss {
                    message: format!("the screen at {} is the one at {}", when(to), when(from)),
                    state: b,
                    seq: to.seq,
                })
            }
            Assertion::ScreenState { at, expect } => {
                let m = self.moment(at)?;
                let i = self.t.index_at(m);
                let wrong = state_mismatches(&self.t.states[i], expect);
                if wrong.is_empty() {
                    return Ok(());
                }
                Err(Miss {
                    message: format!("at {}: {}", when(m), wrong.join("; ")),
                    state: i,
                    seq: m.seq,
                })
            }
            Assertion::MaxGap { ms, from, to } => self.max_gap(*ms, from.as_ref(), to.as_ref()),
            Assertion::OutputOrder { first, then } => self.order(first, then),
            Assertion::InputBytes { .. } | Assertion::Paste { .. } | Assertion::Keys { .. } => {
                self.input(a)
            }
            Assertion::ServiceEvents { .. } | Assertion::NoServiceEvent { .. } => {
                self.service_events(a)
            }
            Assertion::Exit { .. } | Assertion::Status { .. } | Assertion::Outcome { .. } => {
                self.lifecycle(a)
            }
        }
    }

    fn stable(&self, from: &Anchor, for_ms: Option<u64>, to: Option<&Anchor>) -> Verdict {
        if for_ms.is_none() && to.is_none() {
            return Err(self.miss("`screen_stable` needs `for_ms` or `to`".into()));
        }
        let (from, end) = self.window(Some(from), to, for_ms)?;
        if let Some(ms) = for_ms
            && self.t.end().t_ms < from.t_ms + ms
            && to.is_none()
        {
            return Err(self.miss(format!(
                "the recording ends at t_ms {}, before {ms} ms after {}",
                self.t.end().t_ms,
                when(from)
            )));
        }
        let start = self.t.index_at(from);
        let states = self.t.between(from, end);
        let Some(first) = states.first() else {
            return Ok(());
        };
        match states.iter().position(|s| s.lines != first.lines) {
            None => Ok(()),
            Some(k) => Err(Miss {
                message: format!(
                    "the screen changed at t_ms {} (between {} and {})",
                    states[k].t_ms,
                    when(from),
                    when(end)
                ),
                state: start + k,
                seq: None,
            }),
        }
    }

    fn max_gap(&self, ms: u64, from: Option<&Anchor>, to: Option<&Anchor>) -> Verdict {
        let (from, end) = self.window(from, to, None)?;
        let in_window =
            |seq: u64| from.seq.is_none_or(|f| seq >= f) && end.seq.is_some_and(|e| seq <= e);
        let chunks: Vec<(u64, u64)> = self
            .t
            .cassette
            .records
            .iter()
            .filter(|r| r.stream == "output.jsonl" && r.value["len"].as_u64() > Some(0))
            .filter(|r| in_window(r.seq))
            .map(|r| (r.seq, r.t_ms))
            .collect();
        let worst = chunks
            .windows(2)
            .map(|w| (w[1].1 - w[0].1, w[0], w[1]))
            .max_by_key(|(gap, ..)| *gap);
        match worst {
            Some((gap, a, b)) if gap > ms => Err(Miss {
                message: format!(
                    "the output paused {gap} ms, from t_ms {} (seq {}) to t_ms {} (seq {}): more than {ms} ms",
                    a.1, a.0, b.1, b.0
                ),
                state: self.t.index_at(Moment {
                    seq: Some(b.0),
                    t_ms: b.1,
                }),
                seq: Some(b.0),
            }),
            _ => Ok(()),
        }
    }

    fn order(&self, first: &str, then: &str) -> Verdict {
        let seen = |text: &str| self.t.states.iter().position(|s| s.shows(text));
        let (a, b) = match (seen(first), seen(then)) {
            (Some(a), Some(b)) => (a, b),
            (None, _) => return Err(self.miss(format!("no screen shows `{first}`"))),
            (_, None) => return Err(self.miss(format!("no screen shows `{then}`"))),
        };
        // Drawn by one chunk: the order they read in on that screen.
        let before = if a == b {
            let text = self.t.states[a].text();
            text.find(first) < text.find(then)
        } else {
            a < b
        };
        if before {
            return Ok(());
        }
        Err(Miss {
            message: format!(
                "`{then}` appeared at t_ms {}, `{first}` only at t_ms {}",
                self.t.states[b].t_ms, self.t.states[a].t_ms
            ),
            state: a,
            seq: None,
        })
    }

    fn input(&self, a: &Assertion) -> Verdict {
        let bytes_of = |r: &crate::pty::cassette::read::Record| -> Vec<u8> {
            match (r.value["text"].as_str(), r.value["hex"].as_str()) {
                (Some(t), _) => t.as_bytes().to_vec(),
                (None, Some(h)) => hex::decode(h).unwrap_or_default(),
                _ => Vec::new(),
            }
        };
        let written = |kinds: &[&str]| -> Vec<u8> {
            self.t
                .inputs()
                .filter(|r| r.value["kind"].as_str().is_some_and(|k| kinds.contains(&k)))
                .flat_map(bytes_of)
                .collect()
        };
        match a {
            Assertion::InputBytes { text } => {
                if find(&written(&["keys", "paste"]), text.as_bytes(), 0).is_some() {
                    return Ok(());
                }
                Err(self.miss(format!(
                    "the input never holds `{}`",
                    crate::text::visible(text)
                )))
            }
            Assertion::Paste { text } => {
                let want = format!("\x1b[200~{text}\x1b[201~");
                let pastes: Vec<String> = self
                    .t
                    .inputs()
                    .filter(|r| r.value["kind"] == "paste")
                    .map(|r| String::from_utf8_lossy(&bytes_of(r)).into_owned())
                    .collect();
                if pastes.contains(&want) {
                    return Ok(());
                }
                let seen: Vec<String> = pastes.iter().map(|p| crate::text::visible(p)).collect();
                Err(self.miss(format!(
                    "no bracketed paste of `{}` (pastes: {seen:?})",
                    crate::text::visible(text)
                )))
            }
            Assertion::Keys { keys } => {
                let typed = written(&["keys"]);
                let mut from = 0;
                for key in keys {
                    let found = key_bytes(key)
                        .iter()
                        .filter_map(|k| find(&typed, k, from).map(|at| at + k.len()))
                        .min();
                    match found {
                        Some(next) => from = next,
                        None => {
                            return Err(self.miss(format!(
                                "key `{key}` was not written after the ones before it \
                                 (keys written: `{}`)",
                                crate::text::visible(&String::from_utf8_lossy(&typed))
                            )));
                        }
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn service_events(&self, a: &Assertion) -> Verdict {
        let events: Vec<&crate::pty::cassette::read::Record> = self
            .t
            .cassette
            .records
            .iter()
            .filter(|r| r.stream == "service-events.jsonl")
            .collect();
        let at = |r: &crate::pty::cassette::read::Record| Miss {
            message: String::new(),
            state: self.t.index_at(Moment {
                seq: Some(r.seq),
                t_ms: r.t_ms,
            }),
            seq: Some(r.seq),
        };
        match a {
            Assertion::ServiceEvents { in_order } => {
                let mut next = 0;
                let mut last: Option<&crate::pty::cassette::read::Record> = None;
                for want in in_order {
                    let Some(k) = events[next..].iter().position(|e| matches(&e.value, want))
                    else {
                        let after = last.map_or("from the start".to_owned(), |r| {
                            format!(
                                "after the `{}` at t_ms {}",
                                r.value["kind"].as_str().unwrap_or("?"),
                                r.t_ms
                            )
                        });
                        let mut miss = last.map_or_else(|| self.miss(String::new()), at);
                        miss.message = format!("no service event matches {want} {after}");
                        return Err(miss);
                    };
                    last = Some(events[next + k]);
                    next += k + 1;
                }
                Ok(())
            }
            Assertion::NoServiceEvent { matching } => {
                match events.iter().find(|e| matches(&e.value, matching)) {
                    None => Ok(()),
                    Some(e) => {
                        let mut miss = at(e);
                        miss.message =
                            format!("service event at t_ms {} matches {matching}", e.t_ms);
                        Err(miss)
                    }
                }
            }
            _ => Ok(()),
        }
    }

    fn lifecycle(&self, a: &Assertion) -> Verdict {
        match a {
            Assertion::Exit { code, signal } => {
                let exit = &self.fin["exit"];
                let got_code = exit["code"].as_i64();
                let got_signal = exit["signal"].as_i64();
                let mut wrong = Vec::new();
                if let Some(c) = code
                    && got_code != Some(i64::from(*c))
                {
                    wrong.push(format!("exit code {}, expected {c}", shown(got_code)));
                }
                if let Some(s) = signal
                    && got_signal != Some(i64::from(*s))
                {
                    wrong.push(format!("signal {}, expected {s}", shown(got_signal)));
                }
                if wrong.is_empty() {
                    return Ok(());
                }
                Err(self.miss(format!("final.json says {}", wrong.join("; "))))
            }
            Assertion::Status { is } => {
                let events: Vec<Value> = self.t.events().cloned().collect();
                let status = final_status(self.fin, &events);
                if &status == is {
                    return Ok(());
                }
                Err(self.miss(format!("the session ended `{status}`, not `{is}`")))
            }
            Assertion::Outcome { is } => match last_outcome(self.fin, self.t.events()) {
                Some(outcome) if &outcome == is => Ok(()),
                Some(outcome) => {
                    Err(self.miss(format!("the last turn ended `{outcome}`, not `{is}`")))
                }
                None => Err(self.miss("the recording has no turn that ended".into())),
            },
            _ => Ok(()),
        }
    }
}

/// How the last turn ended: `final.json`'s last turn (`turn.state`) when the recording has
/// it, else the kind of the last turn-ending service event without its `turn.` prefix.
pub fn last_outcome<'a>(fin: &Value, events: impl Iterator<Item = &'a Value>) -> Option<String> {
    if let Some(o) = fin["turn"]["state"].as_str() {
        return Some(o.to_owned());
    }
    events
        .filter_map(|e| e["kind"].as_str()?.strip_prefix("turn."))
        .filter(|k| !matches!(*k, "started" | "stalled"))
        .last()
        .map(str::to_owned)
}

/// The session's status at the end: `final.json`'s `status` when the recording has it, else
/// what its service events left.
pub fn final_status(fin: &Value, events: &[Value]) -> String {
    if let Some(s) = fin["status"].as_str() {
        return s.to_owned();
    }
    let recorded = events.iter().any(|e| e["record"]["status"].is_string());
    crate::pty::cassette::status::status_after(events, recorded)
}

/// A number from `final.json`, or `none`.
fn shown(n: Option<i64>) -> String {
    n.map_or_else(|| "none".to_owned(), |n| n.to_string())
}

/// Where `needle` first occurs in `hay` at or after `from`.
fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() {
        return Some(from);
    }
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| from + i)
}

/// The bytes a key name stands for (either form where a terminal mode changes them), or the
/// name itself as text.
pub fn key_bytes(name: &str) -> Vec<Vec<u8>> {
    let csi_or_ss3 = |c: u8| vec![vec![0x1b, b'[', c], vec![0x1b, b'O', c]];
    match name {
        "Enter" => vec![b"\r".to_vec()],
        "Esc" => vec![b"\x1b".to_vec()],
        "Tab" => vec![b"\t".to_vec()],
        "Backspace" => vec![b"\x7f".to_vec(), b"\x08".to_vec()],
        "Space" => vec![b" ".to_vec()],
        "Up" => csi_or_ss3(b'A'),
        "Down" => csi_or_ss3(b'B'),
        "Right" => csi_or_ss3(b'C'),
        "Left" => csi_or_ss3(b'D'),
        "Home" => csi_or_ss3(b'H'),
        "End" => csi_or_ss3(b'F'),
        "PageUp" => vec![b"\x1b[5~".to_vec()],
        "PageDown" => vec![b"\x1b[6~".to_vec()],
        "Delete" => vec![b"\x1b[3~".to_vec()],
        _ => match name.strip_prefix("C-").map(str::as_bytes) {
            Some(&[c]) if c.is_ascii_alphabetic() => vec![vec![c.to_ascii_lowercase() & 0x1f]],
            _ => vec![name.as_bytes().to_vec()],
        },
    }
}

/// Whether `event` has every field `want` gives, with the same value (objects compare the
/// same way, field by field).
pub fn matches(event: &Value, want: &Value) -> bool {
    match (event, want) {
        (Value::Object(e), Value::Object(w)) => w
            .iter()
            .all(|(k, v)| e.get(k).is_some_and(|ev| matches(ev, v))),
        (e, w) => e == w,
    }
}

/// What of `expect` the screen in `state` does not show.
fn state_mismatches(state: &State, expect: &ScreenState) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut check = |name: &str, got: String, want: Option<String>| {
        if let Some(want) = want
            && got != want
        {
            wrong.push(format!("{name} is {got}, expected {want}"));
        }
    };
    let fmt = |v: &dyn std::fmt::Debug| format!("{v:?}");
    check(
        "rows",
        state.rows.to_string(),
        expect.rows.map(|v| v.to_string()),
    );
    check(
        "cols",
        state.cols.to_string(),
        expect.cols.map(|v| v.to_string()),
    );
    check("cursor", fmt(&state.cursor), expect.cursor.map(|c| fmt(&c)));
    check(
        "cursor_visible",
        state.modes.cursor_visible.to_string(),
        expect.cursor_visible.map(|v| v.to_string()),
    );
    check(
        "alternate_screen",
        state.modes.alternate_screen.to_string(),
        expect.alternate_screen.map(|v| v.to_string()),
    );
    check(
        "title",
        fmt(&state.title),
        expect.title.as_ref().map(|t| fmt(t)),
    );
    check(
        "bracketed_paste",
        state.modes.bracketed_paste.to_string(),
        expect.bracketed_paste.map(|v| v.to_string()),
    );
    check("mouse", state.modes.mouse.to_owned(), expect.mouse.clone());
    check(
        "bells",
        state.modes.bells.to_string(),
        expect.bells.map(|v| v.to_string()),
    );
    wrong
}
