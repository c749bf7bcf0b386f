//! A cassette read back: its records merged in `seq` order, checked (digest, numbering, time,
//! output tiling, frames the output explains), and exported. Reads only; never writes one.

use std::path::Path;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::format::{CassetteError, EMULATOR, Manifest, REQUIRED, STREAMS, VERSION, same_emulator};
use crate::pty::terminal::Terminal;

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
            Ok(fs_err::read_to_string(dir.join(name))?)
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
            path: mpath.clone(),
            line: 1,
            message: e.to_string(),
        })?;
        // Frames are re-derived from `output.raw`: by the emulator that derived them or not at
        // all (another draws some screens differently, and a check would blame the recording).
        if let Some(version) = manifest.terminal["model_version"].as_str() {
            let model = manifest.terminal["model"].as_str().unwrap_or(EMULATOR);
            if model != EMULATOR || !same_emulator(version) {
                return Err(CassetteError::Emulator {
                    path: mpath,
                    recorded: format!("{model} {version}"),
                });
            }
        }
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
        let output = fs_err::read(dir.join("output.raw"))?;
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
        let mut term = Terminal::new(
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
