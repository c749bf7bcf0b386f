//! How a command ended, for `main` to turn into an exit code: an outcome, or a failure that
//! says which outcome's code it means.

/// The exit codes `main` maps these to: 0, 1, 3, 4 and 130 (and a remote spex's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// The command ran on another machine, which printed what it had to say (its error too):
    /// its exit code, as that spex gave it.
    Relayed(u8),
}

/// An error whose exit code is that of `outcome`, not 2: a delivery to a session that has
/// exited (3), a wait that timed out (1). `main` prints `error` as any other error and exits
/// with `outcome`'s code; shown on its own, it reads as `error`.
#[derive(Debug)]
pub struct Failed {
    pub outcome: Outcome,
    pub error: anyhow::Error,
}

impl Failed {
    pub fn with(outcome: Outcome, error: impl Into<anyhow::Error>) -> anyhow::Error {
        anyhow::Error::new(Failed {
            outcome,
            error: error.into(),
        })
    }
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for Failed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}
