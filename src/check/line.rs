//! One promise's result: its capability, pass or fail, the fallback and the evidence.

use serde::Serialize;

/// What a failed promise switches off; each has its fallback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    Launch,
    Deliver,
    Events,
    AnswerPermission,
    AnswerQuestion,
    Interrupt,
    Resume,
}

impl Capability {
    /// Its name in the store and in `--json`.
    pub fn name(self) -> &'static str {
        match self {
            Capability::Launch => "launch",
            Capability::Deliver => "deliver",
            Capability::Events => "events",
            Capability::AnswerPermission => "answer.permission",
            Capability::AnswerQuestion => "answer.question",
            Capability::Interrupt => "interrupt",
            Capability::Resume => "resume",
        }
    }

    /// What spex does when this capability's check failed for the installed version.
    pub fn fallback(self) -> &'static str {
        match self {
            Capability::Launch => {
                "`spex launch` warns; run the harness in your own terminal (spex follows it through its hooks)"
            }
            Capability::Deliver => {
                "a delivered prompt is typed without confirmation: look at the session (`spex attach`)"
            }
            Capability::Events => {
                "`spex show` marks the session's state unverified: trust its screen (`spex attach`)"
            }
            Capability::AnswerPermission => {
                "`spex approve`/`deny` refuse for this version: answer the dialog in the terminal (`spex attach`)"
            }
            Capability::AnswerQuestion => {
                "`spex answer` refuses questions for this version: answer in the terminal (`spex attach`)"
            }
            Capability::Interrupt => {
                "`spex interrupt` refuses for this version: press Esc in the terminal (`spex attach`)"
            }
            Capability::Resume => {
                "`spex resume` refuses for this version: resume the session in the harness itself"
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    Fail,
    /// This harness cannot be driven into the scenario (the reason is the evidence).
    NotChecked,
}

/// One promise's result.
#[derive(Debug, Clone, Serialize)]
pub struct Line {
    pub scenario: &'static str,
    pub capability: Capability,
    pub promise: String,
    pub verdict: Verdict,
    /// What spex does about a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<&'static str>,
    /// The payload, the screen excerpt or the command output that shows the failure.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<String>,
}

impl Line {
    pub(super) fn judged(
        scenario: &'static str,
        capability: Capability,
        promise: String,
        result: Result<(), Vec<String>>,
    ) -> Line {
        let (verdict, evidence) = match result {
            Ok(()) => (Verdict::Pass, Vec::new()),
            Err(e) => (Verdict::Fail, e),
        };
        Line {
            scenario,
            capability,
            promise,
            fallback: (verdict == Verdict::Fail).then(|| capability.fallback()),
            verdict,
            evidence,
        }
    }

    pub(super) fn unchecked(
        scenario: &'static str,
        capability: Capability,
        promise: String,
        why: &str,
    ) -> Line {
        Line {
            scenario,
            capability,
            promise,
            verdict: Verdict::NotChecked,
            fallback: None,
            evidence: vec![why.to_owned()],
        }
    }
}
