//! The recorder: the tee sink that writes a cassette as a session runs, scrubbed as it goes.
//! Writes only; reading a cassette back is `read`'s.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use fs_err::os::unix::fs::OpenOptionsExt as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::format::{CassetteError, Manifest, io};
use super::scrub::Scrubber;
use crate::pty::tee::{Event, Observation, Sink};

/// The most output the recorder holds back to keep a text a rule replaces whole.
const MAX_HOLD: usize = 16 * 1024;

/// Bytes as JSON: text when they are UTF-8, else hex.
fn bytes_json(bytes: &[u8]) -> (&'static str, Value) {
    match std::str::from_utf8(bytes) {
        Ok(s) => ("text", Value::String(s.to_owned())),
        Err(_) => ("hex", Value::String(hex::encode(bytes))),
    }
}

/// The tee sink that writes a cassette. Write errors stop the recording (logged), never the
/// session.
pub struct Recorder {
    dir: PathBuf,
    manifest: Manifest,
    resolution_ms: u64,
    input: BufWriter<fs_err::File>,
    output_raw: BufWriter<fs_err::File>,
    output_index: BufWriter<fs_err::File>,
    frames: BufWriter<fs_err::File>,
    service: BufWriter<fs_err::File>,
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
    /// The tee's time of the first observation: a recording started mid-session still times
    /// from its own start.
    base: Option<u64>,
    /// The next record's number: the recorder numbers what it writes (a note it only reads,
    /// such as a process id to scrub, takes no number), from 0, without gaps.
    next_seq: u64,
    /// What the session's record said last about its turn (`final` notes), for `final.json`.
    last_turn: Option<Value>,
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
        crate::fsutil::create_private_dir_all(dir).map_err(CassetteError::File)?;
        let manifest_path = dir.join("manifest.json");
        if manifest_path.exists() {
            return Err(io(&manifest_path)(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "a recording is already there",
            )));
        }
        // Never over another recording: a file that holds anything makes this one fail, and
        // stays as it was (what is written to is new, empty, or not a file at all).
        let open = |name: &str| -> Result<BufWriter<fs_err::File>, CassetteError> {
            let p = dir.join(name);
            if fs_err::metadata(&p).is_ok_and(|m| m.is_file() && m.len() > 0) {
                return Err(io(&p)(std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "a recording is already there",
                )));
            }
            let file = fs_err::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(crate::fsutil::PRIVATE_FILE)
                .open(&p)?;
            Ok(BufWriter::new(file))
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
            next_seq: 0,
            last_turn: None,
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
        // Atomic: a reader waiting for `final.json` to appear must never read it half written.
        crate::fsutil::write_private(&p, &bytes)?;
        Ok(())
    }

    fn t_ms(&mut self, t_us: u64) -> u64 {
        let t = t_us / 1000 / self.resolution_ms * self.resolution_ms;
        // Monotonic even if quantization or a clock oddity says otherwise.
        self.last_t = self.last_t.max(t);
        self.last_t
    }

    fn line(w: &mut BufWriter<fs_err::File>, v: &Value) -> std::io::Result<()> {
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
        if flush {
            return self.release(self.carry.len());
        }
        let release = self.carry.len().saturating_sub(self.scrubber.longest());
        // Never split what a rule replaces across the release point (its first part would go
        // out unscrubbed: a path drawn in many one-byte chunks), nor a UTF-8 character.
        // Bounded: a text that goes on and on (a path-like run of megabytes) is released in
        // pieces rather than held whole and scanned again at every chunk.
        let floor = self.carry.len().saturating_sub(MAX_HOLD);
        let mut cut = self.scrubber.safe_cut(&self.carry, release).max(floor);
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
        let base_t = *self.base.get_or_insert(o.t_us);
        let t = self.t_ms(o.t_us.saturating_sub(base_t));
        if let Event::Mark { stream, data } = &o.event
            && self.note(stream, data)
        {
            return Ok(());
        }
        let seq = self.next_seq;
        self.next_seq += 1;
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
                    // A text cut by the row's wrap is found across the rows first: scrubbed
                    // row by row before, its first part could take another rule's placeholder
                    // (the checkout's path cut after its temp folder reads as `$TMP`) and
                    // leave the rest of it on the next row.
                    let mut data = data.clone();
                    if let Some(lines) = data["screen"]["lines"].as_array_mut() {
                        let mut rows: Vec<String> = lines
                            .iter()
                            .map(|l| l.as_str().unwrap_or_default().to_owned())
                            .collect();
                        self.scrubber.scrub_wrapped_literals(&mut rows);
                        *lines = rows.into_iter().map(Value::from).collect();
                    }
                    self.scrubber.scrub_screen_str(&data.to_string())
                } else {
                    let mut data = data.clone();
                    pids_as_text(&mut data, &mut self.scrubber);
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

    /// Takes in a note meant for the recorder itself rather than a stream (`process`: a pid
    /// of the session, to scrub; `final`: the session's last turn; `capture`: the recording
    /// misses part of the session, and why; `start`: nothing but the clock's start); whether
    /// `stream` was one.
    fn note(&mut self, stream: &str, data: &Value) -> bool {
        match stream {
            "process" => {
                if let Some(pid) = data["pid"].as_u64().and_then(|p| u32::try_from(p).ok()) {
                    self.scrubber.add_pid(pid);
                }
            }
            "final" => {
                let text = self.scrubber.scrub_str(&data.to_string());
                self.last_turn = serde_json::from_str(&text).ok();
            }
            // The recording's clock starts (it times from its first observation).
            "start" => {}
            "capture" => {
                let reason = self
                    .scrubber
                    .scrub_str(data["reason"].as_str().unwrap_or("unknown"));
                self.set_partial(&reason);
            }
            _ => return false,
        }
        true
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
        let report = self.scrubber.report();
        let done = self
            .write_json("manifest.json", &manifest)
            .and_then(|()| self.write_json("scrub-report.json", &report))
            .and_then(|()| {
                self.write_json(
                    "final.json",
                    &json!({"exit": {"code": code, "signal": signal}, "duration_ms": t,
                        "screen": self.last_screen,
                        "status": self.last_turn.as_ref().map(|f| f["status"].clone()),
                        "turn": self.last_turn.as_ref().map(|f| f["turn"].clone()),
                        "usage": self.last_turn.as_ref().map(|f| f["usage"].clone())}),
                )
            });
        done.map_err(|e| std::io::Error::other(e.to_string()))
    }

    /// Marks the capture partial, saying why (the recording did not see the session from its
    /// start, or to its end; the launch failed); the first reason stays, later ones join it.
    pub fn set_partial(&mut self, reason: &str) {
        self.manifest.capture = "partial".into();
        let reason = match self.manifest.capture_reason.take() {
            Some(first) if first != reason => format!("{first}; {reason}"),
            _ => reason.to_owned(),
        };
        self.manifest.capture_reason = Some(reason);
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

/// A `pid` field anywhere in a service event (a hook's process, not one of the session's) is a
/// pid to scrub too: it becomes text, so its `$PID<n>` placeholder keeps the event valid JSON.
fn pids_as_text(v: &mut Value, scrubber: &mut Scrubber) {
    match v {
        Value::Object(map) => {
            for (key, field) in map.iter_mut() {
                if key == "pid"
                    && let Some(pid) = field.as_u64().and_then(|p| u32::try_from(p).ok())
                {
                    scrubber.add_pid(pid);
                    *field = Value::String(pid.to_string());
                } else {
                    pids_as_text(field, scrubber);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| pids_as_text(i, scrubber)),
        _ => {}
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::path::Path;

    use serde_json::{Value, json};

    use super::Recorder;
    use crate::pty::cassette::format::{Manifest, REQUIRED, VERSION};
    use crate::pty::cassette::scrub::Scrubber;
    use crate::pty::tee::{Event, Tee};

    pub(crate) fn manifest() -> Manifest {
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
            capture_reason: None,
            clock: None,
            replay_default: None,
            permission_mode: None,
            project: None,
        }
    }

    /// A cassette of a few records, closed.
    pub(crate) fn small_cassette(dir: &Path) {
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
            .map(|n| fs_err::read(dir.path().join(n)).unwrap())
            .collect();
        let again = Recorder::create(dir.path(), manifest(), Scrubber::new(Vec::new()));
        assert!(again.is_err());
        // Nor over a cassette's streams when its manifest is missing.
        fs_err::remove_file(dir.path().join("manifest.json")).unwrap();
        assert!(Recorder::create(dir.path(), manifest(), Scrubber::new(Vec::new())).is_err());
        for (name, bytes) in REQUIRED.iter().zip(before).skip(1) {
            assert_eq!(
                fs_err::read(dir.path().join(name)).unwrap(),
                bytes,
                "{name}"
            );
        }
    }

    #[test]
    fn a_failing_recorder_stops_and_the_session_goes_on() {
        use crate::pty::session::{Session, Size, Spawn};
        let dir = tempfile::tempdir().unwrap();
        // Every write to `output.raw` fails (ENOSPC) once its buffer fills.
        fs_err::os::unix::fs::symlink("/dev/full", dir.path().join("output.raw")).unwrap();
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
        let indexed: u64 = fs_err::read_to_string(dir.path().join("output.jsonl"))
            .unwrap()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok()?["len"].as_u64())
            .sum();
        assert!(indexed < 64 * 1000, "indexed {indexed} bytes");
    }
}
