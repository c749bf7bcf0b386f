//! Where Gemini CLI keeps its user-level state: `$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`
//! (facts/gemini.md §3.1).

/// Replaces `$HOME` for everything Gemini CLI keeps under `.gemini/`.
pub const HOME_VAR: &str = "GEMINI_CLI_HOME";
