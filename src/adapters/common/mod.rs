//! What the adapters share, below every adapter and the registry: the common hook wire
//! format, the files facet's helpers, and reading a harness's logs.

pub mod check;
pub mod fake_http;
pub mod files;
pub mod log;
pub mod wire;

/// The version in `<binary> --version` output that starts with it (`2.1.197 (Claude Code)`,
/// `0.61.0`): its first word, when that starts with a digit.
pub fn leading_version(output: &str) -> Option<String> {
    output
        .split_whitespace()
        .next()
        .filter(|v| v.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .map(str::to_owned)
}
