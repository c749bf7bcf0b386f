//! Cassettes, format version 1: what the observation tee saw, on disk, so a session can be
//! replayed without the program that produced it. A directory of append-only streams:
//! `manifest.json`, `input.jsonl`, `output.raw` (exact bytes after scrubbing), `output.jsonl`
//! (offset + length into `output.raw`), `frames.jsonl`, `service-events.jsonl`, `final.json`,
//! `scrub-report.json`. Every record carries `seq` (one counter over all streams, contiguous) and
//! `t_ms` (monotonic from the start, quantized to the resolution). Secrets and the user's paths
//! are scrubbed before anything is written. Knows no harness: the caller names what to scrub.
//!
//! `format` is the vocabulary both sides share (files, manifest, errors); `scrub` the scrubber;
//! `record` writes a cassette, `read` reads one back and checks it. The children never import
//! this file; it only re-exports them, so callers keep their `pty::cassette::` paths.

pub mod assertions;
pub mod format;
pub mod program;
pub mod read;
pub mod record;
// Scrubs the committed cassettes again under new rules (a test writes them): no command uses it.
#[cfg(test)]
pub mod rescrub;
pub mod scrub;
pub mod status;
#[cfg(test)]
mod tests;

pub use format::{Manifest, VERSION};
pub use read::Cassette;
pub use record::Recorder;
pub use scrub::{Rule, Scrubber};
