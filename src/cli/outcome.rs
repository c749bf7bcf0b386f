//! How a command ended, for `main` to turn into an exit code.

/// The exit codes `main` maps these to: 0, 1, 3, 4 and 130.
pub enum Outcome {
    Ok,
    /// Ran fine but reports a negative answer (e.g. `materialize --check` found changes).
    Differs,
    /// The session waited on has exited (or its process is gone): exit code 3.
    Gone,
    /// The turn waited on ended other than `completed` (failed, interrupted, ...): exit code 4.
    TurnNotCompleted,
    /// The person pressed Ctrl-C and the command undid what it had started: exit code 130.
    Interrupted,
}
