//! Harness-neutral PTY library: the raw session (spawn, size, process group, input, resize,
//! output, wait, kill), the terminal model (screen, title, replies to terminal queries) and the
//! observation tee (every event with one `seq`), the cassettes the tee writes to disk, and the
//! normalizer that makes their volatile screen content stable for assertions. It knows no harness and no spex state.

pub mod cassette;
pub mod normalize;
pub mod session;
pub mod tee;
pub mod terminal;
