//! Cassettes, format version 1: what the observation tee saw, on disk, so a session can be
//! replayed without the program that produced it. A directory of append-only streams:
//! `manifest.json`, `input.jsonl`, `output.raw` (exact bytes after scrubbing), `output.jsonl`
//! (offset + length into `output.raw`), `frames.jsonl`, `service-events.jsonl`, `final.json`,
//! `scrub-report.json`. Every record carries `seq` (one counter over all streams, contiguous) and
//! `t_ms` (monotonic from the start, quantized to the resolution). Secrets and the user's paths
//! are scrubbed before anything is written. Knows no harness: the caller names what to scrub.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::tee::{Event, Observation, Sink};

pub const VERSION: u32 = 1;
pub const STREAMS: [&str; 4] = [
    "input.jsonl",
    "output.jsonl",
    "frames.jsonl",
    "service-events.jsonl",
];
const REQUIRED: [&str; 8] = [
    "manifest.json",
    "input.jsonl",
    "output.raw",
    "output.jsonl",
    "frames.jsonl",
    "service-events.jsonl",
    "final.json",
    "scrub-report.json",
];

#[derive(Debug, thiserror::Error)]
pub enum CassetteError {
    #[error("`{path}`: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "`{0}` is not a cassette: `{1}` is missing\nhint: a cassette is the folder spex recorded, with all of its files"
    )]
    Missing(PathBuf, &'static str),
    #[error(
        "`{path}` is cassette version {found}; this spex reads version {VERSION}\nhint: replay it with a newer spex"
    )]
    Version { path: PathBuf, found: u32 },
    #[error("`{path}` line {line}: {message}")]
    Bad {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CassetteError + '_ {
    move |source| CassetteError::Io {
        path: path.to_owned(),
        source,
    }
}

/// One scrubbing rule: every occurrence of `find` becomes `replace`.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub find: String,
    pub replace: String,
}

/// Replaces secrets and paths, counting hits per rule. Besides the literal rules, any token
/// that looks like an API key (`sk-…`) or follows `Bearer ` is replaced.
#[derive(Debug, Clone, Default)]
pub struct Scrubber {
    rules: Vec<Rule>,
    pub hits: Vec<(String, u64)>,
}

const KEY_RULE: &str = "api-key-shaped token";
const BEARER_RULE: &str = "bearer token";

impl Scrubber {
    pub fn new(mut rules: Vec<Rule>) -> Scrubber {
        rules.retain(|r| r.find.len() >= 4);
        // Longest first: a tree path inside the home folder keeps its own placeholder.
        rules.sort_by_key(|r| std::cmp::Reverse(r.find.len()));
        let mut hits: Vec<(String, u64)> = rules.iter().map(|r| (r.name.clone(), 0)).collect();
        hits.push((KEY_RULE.into(), 0));
        hits.push((BEARER_RULE.into(), 0));
        Scrubber { rules, hits }
    }

    fn hit(&mut self, name: &str, n: u64) {
        if let Some(h) = self.hits.iter_mut().find(|(k, _)| k == name) {
            h.1 += n;
        }
    }

    /// Longest literal any rule looks for: how much a streaming caller must hold back.
    pub fn longest(&self) -> usize {
        self.rules
            .iter()
            .map(|r| r.find.len())
            .max()
            .unwrap_or(0)
            .max(64)
    }

    pub fn scrub(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.scrub_mapped(bytes, &mut [], false)
    }

    /// `scrub`, also moving `positions` (offsets into `bytes`, ascending) to the matching
    /// offsets of the result. A position inside a replaced text moves to the end of its
    /// placeholder: the placeholder goes with the bytes before the position. With `pad`, a
    /// placeholder shorter than the text it replaces is followed by spaces up to that text's
    /// width: what a terminal draws keeps its geometry (a TUI that later redraws only the
    /// cells that changed, or moves the cursor to an absolute column, lands where it did,
    /// instead of leaving the tail of what the shorter placeholder did not cover).
    pub fn scrub_mapped(&mut self, bytes: &[u8], positions: &mut [usize], pad: bool) -> Vec<u8> {
        let mut out = bytes.to_vec();
        for i in 0..self.rules.len() {
            let (find, replace) = (
                self.rules[i].find.as_bytes().to_vec(),
                self.rules[i].replace.as_bytes().to_vec(),
            );
            let (next, n) = replace_all(&out, &find, &replace, positions, pad);
            out = next;
            let name = self.rules[i].name.clone();
            self.hit(&name, n);
        }
        let (next, n) = replace_tokens(&out, b"sk-", 16, b"sk-<scrubbed>", positions, pad);
        out = next;
        self.hit(KEY_RULE, n);
        let (next, n) = replace_tokens(&out, b"Bearer ", 8, b"Bearer <scrubbed>", positions, pad);
        self.hit(BEARER_RULE, n);
        next
    }

    pub fn scrub_str(&mut self, s: &str) -> String {
        String::from_utf8_lossy(&self.scrub(s.as_bytes())).into_owned()
    }

    /// `scrub_str` for text that is a terminal's screen: placeholders padded (see
    /// [`Scrubber::scrub_mapped`]).
    pub fn scrub_screen_str(&mut self, s: &str) -> String {
        String::from_utf8_lossy(&self.scrub_mapped(s.as_bytes(), &mut [], true)).into_owned()
    }

    /// A screen's rows, scrubbed also where a rule's text runs from one row on into the next
    /// (a long line the terminal wrapped: a path or a key cut at the right edge, which no row
    /// holds whole). The placeholder, padded to the text's width, takes the text's cells, row
    /// by row, as the output scrubbed whole draws it. Run after the rows were scrubbed one by
    /// one.
    pub fn scrub_wrapped_rows(&mut self, rows: &mut [String]) {
        for i in 0..self.rules.len() {
            let (find, replace) = (self.rules[i].find.clone(), self.rules[i].replace.clone());
            let mut n = 0;
            // Each pass takes one match; a placeholder holding the text cannot loop forever.
            for _ in 0..rows.len() {
                let joined = rows.concat();
                // Where each row starts in the joined text.
                let starts: Vec<usize> = rows
                    .iter()
                    .scan(0, |at, r| {
                        let start = *at;
                        *at += r.len();
                        Some(start)
                    })
                    .collect();
                let row_of = |at: usize| starts.iter().rposition(|&s| s <= at).unwrap_or(0);
                let Some(at) = joined
                    .match_indices(&find)
                    .map(|(at, _)| at)
                    .find(|&at| row_of(at) != row_of(at + find.len() - 1))
                else {
                    break;
                };
                let mut cells: Vec<char> = replace.chars().collect();
                let width = find.chars().count();
                cells.resize(width.max(cells.len()), ' ');
                let mut cells = cells.into_iter();
                let (first, last) = (row_of(at), row_of(at + find.len() - 1));
                for row in first..=last {
                    let r = &rows[row];
                    let from = at.saturating_sub(starts[row]);
                    let to = (at + find.len() - starts[row]).min(r.len());
                    let taken = r[from..to].chars().count();
                    let mut part: String = cells.by_ref().take(taken).collect();
                    if row == last {
                        part.extend(cells.by_ref());
                    }
                    rows[row] = format!("{}{part}{}", &r[..from], &r[to..]);
                }
                n += 1;
            }
            let name = self.rules[i].name.clone();
            self.hit(&name, n);
        }
    }
}

/// Moves positions (ascending offsets into a pass's input) to the same places in its output,
/// as the pass goes: a position at the start of a replaced text stays before its placeholder;
/// one inside it moves past it.
struct Mover<'a> {
    positions: &'a mut [usize],
    next: usize,
}

impl Mover<'_> {
    /// Every position up to `at` (of the input) lands at `out_len` (of the output).
    fn upto(&mut self, at: usize, out_len: usize) {
        while self.next < self.positions.len() && self.positions[self.next] <= at {
            self.positions[self.next] = out_len;
            self.next += 1;
        }
    }

    /// Every position before `at` lands at `out_len`.
    fn before(&mut self, at: usize, out_len: usize) {
        while self.next < self.positions.len() && self.positions[self.next] < at {
            self.positions[self.next] = out_len;
            self.next += 1;
        }
    }
}

/// `placeholder`, followed with `pad` by spaces up to the width (in characters) of `replaced`.
fn placeholder(out: &mut Vec<u8>, placeholder: &[u8], replaced: &[u8], pad: bool) {
    out.extend_from_slice(placeholder);
    if pad {
        let width = |b: &[u8]| String::from_utf8_lossy(b).chars().count();
        let missing = width(replaced).saturating_sub(width(placeholder));
        out.resize(out.len() + missing, b' ');
    }
}

fn replace_all(
    hay: &[u8],
    find: &[u8],
    replace: &[u8],
    positions: &mut [usize],
    pad: bool,
) -> (Vec<u8>, u64) {
    let mut out = Vec::with_capacity(hay.len());
    let mut moved = Mover { positions, next: 0 };
    let mut n = 0;
    let mut i = 0;
    while i < hay.len() {
        moved.upto(i, out.len());
        if hay[i..].starts_with(find) {
            placeholder(&mut out, replace, find, pad);
            i += find.len();
            moved.before(i, out.len());
            n += 1;
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    moved.upto(usize::MAX, out.len());
    (out, n)
}

/// Replaces `prefix` + a run of at least `min` token characters.
fn replace_tokens(
    hay: &[u8],
    prefix: &[u8],
    min: usize,
    with: &[u8],
    positions: &mut [usize],
    pad: bool,
) -> (Vec<u8>, u64) {
    let token = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.';
    let mut out = Vec::with_capacity(hay.len());
    let mut moved = Mover { positions, next: 0 };
    let mut n = 0;
    let mut i = 0;
    while i < hay.len() {
        moved.upto(i, out.len());
        if hay[i..].starts_with(prefix) && !hay[i + prefix.len()..].starts_with(b"<scrubbed>") {
            let rest = &hay[i + prefix.len()..];
            let len = rest.iter().take_while(|&&b| token(b)).count();
            if len >= min {
                placeholder(&mut out, with, &hay[i..i + prefix.len() + len], pad);
                i += prefix.len() + len;
                moved.before(i, out.len());
                n += 1;
                continue;
            }
        }
        out.push(hay[i]);
        i += 1;
    }
    moved.upto(usize::MAX, out.len());
    (out, n)
}

/// Bytes as JSON: text when they are UTF-8, else hex.
fn bytes_json(bytes: &[u8]) -> (&'static str, Value) {
    match std::str::from_utf8(bytes) {
        Ok(s) => ("text", Value::String(s.to_owned())),
        Err(_) => ("hex", Value::String(hex::encode(bytes))),
    }
}

/// The fixed facts of a recording, written to `manifest.json` at the start and completed at
/// the end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u32,
    pub id: String,
    /// `sha256:<hex>` of `output.raw`, filled in when the recording ends.
    pub content_digest: Option<String>,
    pub harness: Value,
    pub command: Value,
    pub terminal: Value,
    pub timing: Value,
    pub provenance: Value,
    /// `full` when every input byte went through the recorder's session, `partial` otherwise.
    pub capture: String,
}

/// The tee sink that writes a cassette. Write errors stop the recording (logged), never the
/// session.
pub struct Recorder {
    dir: PathBuf,
    manifest: Manifest,
    resolution_ms: u64,
    input: BufWriter<File>,
    output_raw: BufWriter<File>,
    output_index: BufWriter<File>,
    frames: BufWriter<File>,
    service: BufWriter<File>,
    offset: u64,
    /// Output held back so a secret split across chunks is still found.
    carry: Vec<u8>,
    /// The output chunks whose bytes are not all out of `carry` yet, oldest first: each is
    /// indexed once its last byte is written, under its own `seq` and `t_ms` (when it was
    /// received, not when the next chunk let its held bytes go).
    pending: std::collections::VecDeque<Pending>,
    digest: Sha256,
    scrubber: Scrubber,
    failed: bool,
    last_t: u64,
    /// `final.json` is written: nothing more goes in.
    finished: bool,
    /// How the program ended, once it has (the recording goes on until it is closed, so the
    /// output the program wrote last and the final screen still go in).
    exit: Option<(Option<i32>, Option<i32>)>,
    /// The text of the last screen noted in `frames.jsonl` (scrubbed), for `final.json`.
    last_screen: Option<String>,
    /// The tee's number and time of the first observation: a recording started mid-session
    /// still numbers from 0 and times from its own start.
    base: Option<(u64, u64)>,
}

/// An output chunk not yet indexed: its bytes still in `carry` and those written so far.
struct Pending {
    seq: u64,
    t: u64,
    /// Its bytes still held in `carry`.
    raw: usize,
    /// Its bytes written to `output.raw` so far, scrubbed.
    clean: u64,
}

impl Recorder {
    pub fn create(
        dir: &Path,
        manifest: Manifest,
        scrubber: Scrubber,
    ) -> Result<Recorder, CassetteError> {
        crate::fsutil::create_private_dir_all(dir).map_err(io(dir))?;
        let manifest_path = dir.join("manifest.json");
        if manifest_path.exists() {
            return Err(io(&manifest_path)(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "a recording is already there",
            )));
        }
        // Never over another recording: a file that holds anything makes this one fail, and
        // stays as it was (what is written to is new, empty, or not a file at all).
        let open = |name: &str| -> Result<BufWriter<File>, CassetteError> {
            let p = dir.join(name);
            if std::fs::metadata(&p).is_ok_and(|m| m.is_file() && m.len() > 0) {
                return Err(io(&p)(std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "a recording is already there",
                )));
            }
            std::os::unix::fs::OpenOptionsExt::mode(
                std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true),
                crate::fsutil::PRIVATE_FILE,
            )
            .open(&p)
            .map(BufWriter::new)
            .map_err(io(&p))
        };
        let resolution_ms = manifest
            .timing
            .get("resolution_ms")
            .and_then(Value::as_u64)
            .unwrap_or(100)
            .max(1);
        let r = Recorder {
            dir: dir.to_owned(),
            input: open("input.jsonl")?,
            output_raw: open("output.raw")?,
            output_index: open("output.jsonl")?,
            frames: open("frames.jsonl")?,
            service: open("service-events.jsonl")?,
            manifest,
            resolution_ms,
            offset: 0,
            carry: Vec::new(),
            pending: std::collections::VecDeque::new(),
            digest: Sha256::new(),
            scrubber,
            failed: false,
            last_t: 0,
            finished: false,
            exit: None,
            last_screen: None,
            base: None,
        };
        r.write_json(
            "manifest.json",
            &serde_json::to_value(&r.manifest).unwrap_or_default(),
        )?;
        Ok(r)
    }

    fn write_json(&self, name: &str, v: &Value) -> Result<(), CassetteError> {
        let p = self.dir.join(name);
        let mut bytes = serde_json::to_vec_pretty(v).expect("JSON serializes");
        bytes.push(b'\n');
        std::fs::write(&p, bytes).map_err(io(&p))
    }

    fn t_ms(&mut self, t_us: u64) -> u64 {
        let t = t_us / 1000 / self.resolution_ms * self.resolution_ms;
        // Monotonic even if quantization or a clock oddity says otherwise.
        self.last_t = self.last_t.max(t);
        self.last_t
    }

    fn line(w: &mut BufWriter<File>, v: &Value) -> std::io::Result<()> {
        serde_json::to_writer(&mut *w, v)?;
        w.write_all(b"\n")
    }

    fn output(&mut self, seq: u64, t: u64, bytes: &[u8], flush: bool) -> std::io::Result<()> {
        self.carry.extend_from_slice(bytes);
        self.pending.push_back(Pending {
            seq,
            t,
            raw: bytes.len(),
            clean: 0,
        });
        let keep = if flush { 0 } else { self.scrubber.longest() };
        let release = self.carry.len().saturating_sub(keep);
        // Never split a UTF-8 character (or a placeholder) across the release point.
        let mut cut = release;
        while cut > 0 && cut < self.carry.len() && (self.carry[cut] & 0xC0) == 0x80 {
            cut -= 1;
        }
        self.release(cut)
    }

    /// Scrubs and writes the first `cut` bytes of `carry`, then indexes every chunk whose
    /// bytes are now all out. A secret split across two chunks goes, as its placeholder, with
    /// the chunk it started in.
    fn release(&mut self, cut: usize) -> std::io::Result<()> {
        let out: Vec<u8> = self.carry.drain(..cut).collect();
        // Where each pending chunk's bytes end in `out`, moved to where they end once scrubbed.
        let mut ends = Vec::with_capacity(self.pending.len());
        let mut end = 0;
        for p in &self.pending {
            end += p.raw;
            ends.push(end.min(cut));
        }
        // What the program drew: placeholders keep the width of what they replace.
        let clean = self.scrubber.scrub_mapped(&out, &mut ends, true);
        self.output_raw.write_all(&clean)?;
        self.digest.update(&clean);
        let base = self.offset;
        self.offset += clean.len() as u64;
        let (mut from, mut left) = (0, cut);
        for (p, &to) in self.pending.iter_mut().zip(&ends) {
            p.clean += (to - from) as u64;
            from = to;
            let took = p.raw.min(left);
            p.raw -= took;
            left -= took;
        }
        // A finished chunk's bytes end where its end moved to; some may have gone out before.
        for end in ends {
            let Some(p) = self.pending.front().filter(|p| p.raw == 0) else {
                break;
            };
            let end = base + end as u64;
            Self::line(
                &mut self.output_index,
                &json!({"seq": p.seq, "t_ms": p.t, "offset": end - p.clean, "len": p.clean}),
            )?;
            self.pending.pop_front();
        }
        Ok(())
    }

    fn observe_inner(&mut self, o: &Observation) -> std::io::Result<()> {
        let (base_seq, base_t) = *self.base.get_or_insert((o.seq, o.t_us));
        let t = self.t_ms(o.t_us.saturating_sub(base_t));
        let seq = o.seq - base_seq;
        match &o.event {
            Event::Output { bytes } => self.output(seq, t, bytes, false)?,
            Event::Input { bytes } => {
                let clean = self.scrubber.scrub(bytes);
                let kind = if clean.starts_with(b"\x1b[200~") && clean.ends_with(b"\x1b[201~") {
                    "paste"
                } else {
                    "keys"
                };
                let (field, data) = bytes_json(&clean);
                let mut v = json!({"seq": seq, "t_ms": t, "kind": kind});
                v[field] = data;
                Self::line(&mut self.input, &v)?;
            }
            Event::Resize { rows, cols } => Self::line(
                &mut self.input,
                &json!({"seq": seq, "t_ms": t, "kind": "resize", "rows": rows, "cols": cols}),
            )?,
            Event::Signal { signal } => Self::line(
                &mut self.input,
                &json!({"seq": seq, "t_ms": t, "kind": "signal", "signal": signal}),
            )?,
            Event::Mark { stream, data } => {
                // A frame is a screen: scrubbed as the output that drew it was.
                let text = if stream == "frames" {
                    self.scrubber.scrub_screen_str(&data.to_string())
                } else {
                    self.scrubber.scrub_str(&data.to_string())
                };
                let mut v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                if !v.is_object() {
                    v = json!({ "data": v });
                }
                if let Some(lines) = v["screen"]["lines"].as_array_mut() {
                    let mut rows: Vec<String> = lines
                        .iter()
                        .map(|l| l.as_str().unwrap_or_default().to_owned())
                        .collect();
                    self.scrubber.scrub_wrapped_rows(&mut rows);
                    *lines = rows.into_iter().map(Value::from).collect();
                }
                v["seq"] = seq.into();
                v["t_ms"] = t.into();
                if let Some(lines) = v["screen"]["lines"].as_array() {
                    let lines: Vec<&str> = lines.iter().filter_map(Value::as_str).collect();
                    self.last_screen = Some(lines.join("\n").trim_end().to_owned());
                }
                let w = if stream == "frames" {
                    &mut self.frames
                } else {
                    &mut self.service
                };
                Self::line(w, &v)?;
            }
            Event::Exit { code, signal } => {
                // The output held back so far goes out, each chunk under its own number, and
                // the exit as an empty chunk; the recording ends when it is closed.
                self.output(seq, t, &[], true)?;
                self.exit = Some((*code, *signal));
            }
        }
        Ok(())
    }

    fn finish(&mut self, t: u64) -> std::io::Result<()> {
        let (code, signal) = self.exit.unwrap_or_default();
        self.finished = true;
        for w in [
            &mut self.input,
            &mut self.output_raw,
            &mut self.output_index,
            &mut self.frames,
            &mut self.service,
        ] {
            w.flush()?;
        }
        let digest = format!("sha256:{}", hex::encode(self.digest.clone().finalize()));
        self.manifest.content_digest = Some(digest);
        let manifest = serde_json::to_value(&self.manifest).unwrap_or_default();
        let report: Vec<Value> = self
            .scrubber
            .hits
            .iter()
            .map(|(rule, hits)| json!({"rule": rule, "hits": hits}))
            .collect();
        let done = self
            .write_json("manifest.json", &manifest)
            .and_then(|()| self.write_json("scrub-report.json", &json!({ "rules": report })))
            .and_then(|()| {
                self.write_json(
                    "final.json",
                    &json!({"exit": {"code": code, "signal": signal}, "duration_ms": t,
                        "screen": self.last_screen}),
                )
            });
        done.map_err(|e| std::io::Error::other(e.to_string()))
    }

    /// Marks the capture partial: the recording did not see the session from its start.
    pub fn set_partial(&mut self) {
        self.manifest.capture = "partial".into();
    }
}

impl Sink for Recorder {
    fn close(&mut self) {
        if self.failed || self.finished {
            return;
        }
        // What was held back goes out under the numbers and times of the chunks it came in.
        let t = self.last_t;
        let flushed = self.release(self.carry.len());
        let result = flushed.and_then(|()| self.finish(t));
        if let Err(e) = result {
            eprintln!(
                "error: finishing the recording in `{}`: {e}",
                self.dir.display()
            );
        }
    }

    fn observe(&mut self, o: &Observation) {
        if self.failed || self.finished {
            return;
        }
        let result = self.observe_inner(o);
        if let Err(e) = result {
            self.failed = true;
            eprintln!(
                "error: recording to `{}` stopped: {e} (the session goes on)",
                self.dir.display()
            );
        }
    }
}

/// How many output records after a frame may still hold bytes the frame shows (the
/// scrubber's held-back tail goes out with the next chunk).
const FRAME_SPILL: usize = 2;

/// One line of a stream, with its number and time.
#[derive(Debug, Clone)]
pub struct Record {
    pub stream: &'static str,
    pub seq: u64,
    pub t_ms: u64,
    pub value: Value,
}

/// A cassette read back: every stream's records merged in `seq` order, and `output.raw`.
#[derive(Debug)]
pub struct Cassette {
    pub manifest: Manifest,
    pub records: Vec<Record>,
    pub output: Vec<u8>,
}

impl Cassette {
    /// Reads a cassette, refusing a missing file or a newer major version.
    pub fn open(dir: &Path) -> Result<Cassette, CassetteError> {
        for name in REQUIRED {
            if !dir.join(name).is_file() {
                return Err(CassetteError::Missing(dir.to_owned(), name));
            }
        }
        let read = |name: &str| -> Result<String, CassetteError> {
            let p = dir.join(name);
            std::fs::read_to_string(&p).map_err(io(&p))
        };
        let mpath = dir.join("manifest.json");
        let raw: Value =
            serde_json::from_str(&read("manifest.json")?).map_err(|e| CassetteError::Bad {
                path: mpath.clone(),
                line: e.line(),
                message: e.to_string(),
            })?;
        let found = raw.get("version").and_then(Value::as_u64).unwrap_or(0);
        if found != u64::from(VERSION) {
            return Err(CassetteError::Version {
                path: mpath,
                found: u32::try_from(found).unwrap_or(u32::MAX),
            });
        }
        let manifest: Manifest = serde_json::from_value(raw).map_err(|e| CassetteError::Bad {
            path: mpath,
            line: 1,
            message: e.to_string(),
        })?;
        let mut records = Vec::new();
        for stream in STREAMS {
            let path = dir.join(stream);
            for (i, line) in read(stream)?.lines().enumerate() {
                let bad = |message: String| CassetteError::Bad {
                    path: path.clone(),
                    line: i + 1,
                    message,
                };
                let value: Value = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
                let seq = value.get("seq").and_then(Value::as_u64);
                let t_ms = value.get("t_ms").and_then(Value::as_u64);
                let (Some(seq), Some(t_ms)) = (seq, t_ms) else {
                    return Err(bad("a record without `seq` or `t_ms`".into()));
                };
                records.push(Record {
                    stream,
                    seq,
                    t_ms,
                    value,
                });
            }
        }
        records.sort_by_key(|r| r.seq);
        let opath = dir.join("output.raw");
        let output = std::fs::read(&opath).map_err(io(&opath))?;
        Ok(Cassette {
            manifest,
            records,
            output,
        })
    }

    /// Every problem found: digest, `seq` contiguity, monotonic time, output tiling.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(&self.output)));
        if self.manifest.content_digest.as_deref() != Some(digest.as_str()) {
            out.push(format!(
                "content_digest {:?} does not match output.raw ({digest})",
                self.manifest.content_digest
            ));
        }
        for (i, r) in self.records.iter().enumerate() {
            if r.seq != i as u64 {
                out.push(format!(
                    "seq {} in {} where {i} was expected (streams must number 0.. without gaps)",
                    r.seq, r.stream
                ));
                break;
            }
        }
        let mut last_t = 0;
        for r in &self.records {
            if r.t_ms < last_t {
                out.push(format!("t_ms goes back at seq {} ({})", r.seq, r.stream));
                break;
            }
            last_t = r.t_ms;
        }
        let mut offset = 0u64;
        for r in self.records.iter().filter(|r| r.stream == "output.jsonl") {
            let at = r.value.get("offset").and_then(Value::as_u64);
            let len = r.value.get("len").and_then(Value::as_u64).unwrap_or(0);
            if at != Some(offset) {
                out.push(format!(
                    "output chunk seq {} starts at {at:?}, not at {offset}",
                    r.seq
                ));
                break;
            }
            offset += len;
        }
        if offset != self.output.len() as u64 {
            out.push(format!(
                "output chunks cover {offset} bytes, output.raw holds {}",
                self.output.len()
            ));
        }
        out.extend(self.unexplained_frame());
        out
    }

    /// The first frame showing a line that the recorded output never drew: output the
    /// recorder missed (a recorder attached after the program's first bytes once left
    /// `output.raw` empty under a drawn screen). The output is played through a terminal
    /// model, with the recorded resizes, and every line any screen showed is remembered;
    /// lines compare with runs of blanks collapsed. A frame may show the last bytes before it
    /// that the scrubber held back and wrote with a later chunk, so each frame is checked once
    /// the next [`FRAME_SPILL`] output records are in.
    fn unexplained_frame(&self) -> Option<String> {
        let collapse = |line: &str| line.split_whitespace().collect::<Vec<_>>().join(" ");
        let size = |v: &Value, key: &str, default: u16| {
            v.get(key)
                .and_then(Value::as_u64)
                .and_then(|n| u16::try_from(n).ok())
                .unwrap_or(default)
        };
        let mut term = super::terminal::Terminal::new(
            size(&self.manifest.terminal, "rows", 24),
            size(&self.manifest.terminal, "cols", 80),
        );
        term.set_answering(false);
        let mut drawn = std::collections::HashSet::new();
        // Frames not yet checked, with the output records seen since each.
        let mut waiting: Vec<(&Record, usize)> = Vec::new();
        let check = |frame: &Record, drawn: &std::collections::HashSet<String>| {
            // A screen that does not say its size was not taken from a terminal model.
            frame.value["screen"]["rows"].as_u64()?;
            let lines = frame.value["screen"]["lines"].as_array();
            let missing = lines
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(collapse)
                .find(|l| !l.is_empty() && !drawn.contains(l))?;
            Some(format!(
                "frame seq {} shows `{missing}`, which output.raw never drew (the recording lost output)",
                frame.seq
            ))
        };
        for r in &self.records {
            match r.stream {
                "output.jsonl" => {
                    let at = r.value.get("offset").and_then(Value::as_u64);
                    let len = r.value.get("len").and_then(Value::as_u64);
                    let bytes = at.zip(len).and_then(|(at, len)| {
                        let at = usize::try_from(at).ok()?;
                        self.output.get(at..at + usize::try_from(len).ok()?)
                    });
                    // A record may join the end of one write to the next: the row a write
                    // left is remembered at each line feed (a later write in the same record
                    // may redraw it).
                    for piece in bytes.unwrap_or_default().split_inclusive(|&b| b == b'\n') {
                        let (body, feed) =
                            piece.split_at(piece.len() - usize::from(piece.ends_with(b"\n")));
                        term.feed(body);
                        if !feed.is_empty() {
                            drawn.insert(collapse(&term.cursor_line()));
                            term.feed(feed);
                        }
                    }
                    drawn.extend(term.snapshot().lines.iter().map(|l| collapse(l)));
                    for (frame, seen) in &mut waiting {
                        *seen += 1;
                        if *seen >= FRAME_SPILL
                            && let Some(problem) = check(frame, &drawn)
                        {
                            return Some(problem);
                        }
                    }
                    waiting.retain(|(_, seen)| *seen < FRAME_SPILL);
                }
                "input.jsonl" if r.value["kind"] == "resize" => {
                    term.resize(size(&r.value, "rows", 24), size(&r.value, "cols", 80));
                }
                "frames.jsonl" => waiting.push((r, 0)),
                _ => {}
            }
        }
        waiting.iter().find_map(|(frame, _)| check(frame, &drawn))
    }

    /// The output chunks in order, each with its time.
    pub fn output_chunks(&self) -> Vec<(u64, &[u8])> {
        self.records
            .iter()
            .filter(|r| r.stream == "output.jsonl")
            .filter_map(|r| {
                let at = usize::try_from(r.value.get("offset")?.as_u64()?).ok()?;
                let len = usize::try_from(r.value.get("len")?.as_u64()?).ok()?;
                Some((r.t_ms, self.output.get(at..at + len)?))
            })
            .collect()
    }

    /// The recording as an asciicast v2 file: a header line, then `[t, "o", data]` events.
    pub fn asciicast(&self) -> String {
        let cols = self
            .manifest
            .terminal
            .get("cols")
            .and_then(Value::as_u64)
            .unwrap_or(80);
        let rows = self
            .manifest
            .terminal
            .get("rows")
            .and_then(Value::as_u64)
            .unwrap_or(24);
        let mut out = json!({"version": 2, "width": cols, "height": rows,
            "env": {"TERM": self.manifest.terminal.get("term").cloned().unwrap_or(Value::Null)}})
        .to_string();
        out.push('\n');
        for (t, bytes) in self.output_chunks() {
            if bytes.is_empty() {
                continue;
            }
            #[expect(clippy::cast_precision_loss, reason = "milliseconds of a recording")]
            let secs = t as f64 / 1000.0;
            out.push_str(&json!([secs, "o", String::from_utf8_lossy(bytes)]).to_string());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pty::tee::Tee;

    fn manifest() -> Manifest {
        Manifest {
            version: VERSION,
            id: "c1".into(),
            content_digest: None,
            harness: json!({"id": "test"}),
            command: json!({"argv": ["sh"]}),
            terminal: json!({"rows": 24, "cols": 80, "term": "xterm-256color"}),
            timing: json!({"resolution_ms": 100}),
            provenance: json!({}),
            capture: "full".into(),
        }
    }

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
            .map(|s| std::fs::read_to_string(dir.path().join(s)).unwrap())
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
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("final.json")).unwrap())
                .unwrap();
        assert_eq!(last["exit"], json!({"code": 0, "signal": null}));
        assert_eq!(last["screen"], "cd $HOME    /x\nbye");
        let report = std::fs::read_to_string(dir.path().join("scrub-report.json")).unwrap();
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
        let mut term = super::super::terminal::Terminal::new(24, 80);
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
        let text = std::fs::read_to_string(&m)
            .unwrap()
            .replace("\"version\": 1", "\"version\": 2");
        std::fs::write(&m, text).unwrap();
        assert!(matches!(
            Cassette::open(dir.path()),
            Err(CassetteError::Version { found: 2, .. })
        ));
        std::fs::remove_file(dir.path().join("final.json")).unwrap();
        assert!(matches!(
            Cassette::open(dir.path()),
            Err(CassetteError::Missing(_, "final.json"))
        ));
    }

    /// A cassette of a few records, closed.
    fn small_cassette(dir: &Path) {
        let tee = Tee::new();
        tee.add_sink(Box::new(
            Recorder::create(dir, manifest(), Scrubber::new(Vec::new())).unwrap(),
        ));
        tee.record(Event::Output {
            bytes: vec![b'a'; 100],
        });
        tee.record(Event::Input {
            bytes: b"x".to_vec(),
        });
        tee.record(Event::Output {
            bytes: vec![b'b'; 100],
        });
        tee.record(Event::Exit {
            code: Some(0),
            signal: None,
        });
        tee.close_sinks();
    }

    /// A recording never replaces another: a recorder for a folder that holds one fails and
    /// the cassette there stays byte for byte.
    #[test]
    fn a_recorder_never_writes_over_a_cassette() {
        let dir = tempfile::tempdir().unwrap();
        small_cassette(dir.path());
        let before: Vec<Vec<u8>> = REQUIRED
            .iter()
            .map(|n| std::fs::read(dir.path().join(n)).unwrap())
            .collect();
        let again = Recorder::create(dir.path(), manifest(), Scrubber::new(Vec::new()));
        assert!(again.is_err());
        // Nor over a cassette's streams when its manifest is missing.
        std::fs::remove_file(dir.path().join("manifest.json")).unwrap();
        assert!(Recorder::create(dir.path(), manifest(), Scrubber::new(Vec::new())).is_err());
        for (name, bytes) in REQUIRED.iter().zip(before).skip(1) {
            assert_eq!(
                std::fs::read(dir.path().join(name)).unwrap(),
                bytes,
                "{name}"
            );
        }
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
        let mut term = super::super::terminal::Terminal::new(24, 80);
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
        let frames = std::fs::read_to_string(dir.path().join("frames.jsonl")).unwrap();
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
        let mut bytes = std::fs::read(&raw).unwrap();
        bytes[0] = b'z';
        std::fs::write(&raw, bytes).unwrap();
        has(d.path(), "content_digest");
        // A record dropped from a stream.
        let d = fresh();
        std::fs::write(d.path().join("input.jsonl"), "").unwrap();
        has(d.path(), "without gaps");
        // A chunk that does not start where the previous one ended.
        let d = fresh();
        let index = d.path().join("output.jsonl");
        let mut chunks: Vec<Value> = std::fs::read_to_string(&index)
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
        std::fs::write(&index, text).unwrap();
        has(d.path(), &format!("starts at Some({})", second - 1));
        // A record without its number is refused when read.
        let d = fresh();
        std::fs::write(d.path().join("input.jsonl"), "{\"t_ms\":0}\n").unwrap();
        assert!(matches!(
            Cassette::open(d.path()),
            Err(CassetteError::Bad { line: 1, .. })
        ));
    }

    #[test]
    fn a_failing_recorder_stops_and_the_session_goes_on() {
        use crate::pty::session::{Session, Size, Spawn};
        let dir = tempfile::tempdir().unwrap();
        // Every write to `output.raw` fails (ENOSPC) once its buffer fills.
        std::os::unix::fs::symlink("/dev/full", dir.path().join("output.raw")).unwrap();
        let tee = Tee::new();
        tee.add_sink(Box::new(
            Recorder::create(dir.path(), manifest(), Scrubber::new(Vec::new())).unwrap(),
        ));
        let spawn = Spawn {
            argv: vec!["cat".into()],
            cwd: std::env::temp_dir(),
            env_clear: false,
            env: Vec::new(),
            env_remove: Vec::new(),
            size: Size { rows: 24, cols: 80 },
        };
        let mut s = Session::spawn(&spawn, Some(tee.clone())).unwrap();
        let output = s.take_output();
        let moved = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = moved.clone();
        std::thread::spawn(move || {
            for chunk in output {
                counter.fetch_add(chunk.len(), std::sync::atomic::Ordering::Relaxed);
            }
        });
        // 64 lines of 1,000 bytes, each echoed by the terminal and written back by `cat`
        // (2,004 bytes back), one after the other: all of it comes back although the recorder
        // failed on the first few.
        let line = [vec![b'y'; 1000], b"\r".to_vec()].concat();
        for i in 1..=64 {
            s.write(&line).unwrap();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while moved.load(std::sync::atomic::Ordering::Relaxed) < i * 2004 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "line {i}: the session stalled after {} bytes",
                    moved.load(std::sync::atomic::Ordering::Relaxed)
                );
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
        s.write(&[4]).unwrap();
        let exit = s
            .wait_timeout(std::time::Duration::from_secs(20))
            .unwrap()
            .expect("the session ended");
        assert_eq!(exit.code, Some(0));
        tee.close_sinks();
        // The recording stopped where it failed: it indexed a little of the output and never
        // finished (no `final.json`).
        assert!(!dir.path().join("final.json").exists());
        let indexed: u64 = std::fs::read_to_string(dir.path().join("output.jsonl"))
            .unwrap()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok()?["len"].as_u64())
            .sum();
        assert!(indexed < 64 * 1000, "indexed {indexed} bytes");
    }
}
