//! `spex check`: the harness binary the user has installed, run offline in a throwaway HOME and
//! repository against the fake model server of its adapter, through a fixed set of scenarios;
//! one line per promise spex makes, each passed or failed with the fallback and the evidence.
//! The result is kept per binary and version (`store::checks`). Names no harness: each
//! adapter's kit (`adapters::common::check`) gives its fake, its home and its prompts.

mod error;
mod hooks;
mod line;
mod sandbox;
mod scenarios;

pub use error::CheckError;
pub use line::{Capability, Line, Verdict};

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::seam::Harness;
use crate::store::checks;

/// One harness checked.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub harness: &'static str,
    pub binary: PathBuf,
    pub version: String,
    pub lines: Vec<Line>,
    pub seconds: f64,
    /// Where the recordings were kept (`--keep`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept: Option<PathBuf>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.lines.iter().all(|l| l.verdict != Verdict::Fail)
    }

    /// The result as the store keeps it.
    pub fn stored(&self) -> checks::Result {
        checks::Result {
            harness: self.harness.to_owned(),
            binary: self.binary.clone(),
            version: self.version.clone(),
            checked_at: crate::store::now_rfc3339(),
            passed: self
                .lines
                .iter()
                .filter(|l| l.verdict == Verdict::Pass)
                .count(),
            failed: self
                .lines
                .iter()
                .filter(|l| l.verdict == Verdict::Fail)
                .map(|l| checks::Failed {
                    capability: l.capability.name().to_owned(),
                    promise: l.promise.clone(),
                    fallback: l.capability.fallback().to_owned(),
                })
                .collect(),
        }
    }
}

/// What to check one harness with.
pub struct Target<'a> {
    pub harness: &'static dyn Harness,
    /// The installed binary (on PATH or the configured `command`), resolved.
    pub binary: &'a Path,
    /// This spex, which the sandbox runs.
    pub spex: &'a Path,
    /// The user's `PATH` (the harness's runtime, `git`).
    pub path: Option<&'a OsString>,
    /// Keep the sandbox and the recordings (`--keep`): where they are goes in the report.
    pub keep: bool,
}

/// Checks one harness: sets up the sandbox and its fake, runs every scenario, each line
/// handed to `progress` as it is judged.
pub fn run(t: &Target, progress: &mut dyn FnMut(&Line)) -> Result<Report, CheckError> {
    let started = Instant::now();
    let id = t.harness.id();
    let kit = crate::adapters::check_kit(id).ok_or_else(|| CheckError::NoKit(id.to_owned()))?;
    let mut path = OsString::from(t.binary.parent().unwrap_or(Path::new("/")));
    if let Some(p) = t.path {
        path.push(":");
        path.push(p);
    }
    let mut sb = sandbox::Sandbox::new(t.spex, path)?;
    // Asked in the sandbox: a harness's `--version` may write into its HOME.
    let version = sb
        .version_output(t.binary)
        .and_then(|o| (t.harness.identity().parse_version)(&o))
        .unwrap_or_else(|| "unknown".to_owned());
    let adapter_sandbox = crate::adapters::common::check::Sandbox {
        home: &sb.home,
        repo: &sb.repo,
    };
    let prepared = kit
        .prepare(&adapter_sandbox)
        .map_err(|error| CheckError::Fake {
            harness: id.to_owned(),
            error,
        })?;
    sb.env = prepared.env;
    let config = serde_json::json!({
        "harnesses": [id],
        "harness": {id: {"command": t.binary}},
    });
    fs_err::write(sb.repo.join("spex.jsonc"), format!("{config}\n"))
        .map_err(CheckError::Sandbox)?;
    sb.git(&["add", "-A"])?;
    sb.git(&["commit", "-q", "-m", "spex check"])?;
    let materialized = sb.run(&["materialize", "--json"]);
    if !materialized.ok {
        return Err(CheckError::Setup(materialized.evidence()));
    }
    let bound = hooks::bound(&materialized.json().unwrap_or_default(), &sb.repo, id);
    let kept = t.keep.then(|| sb.base.join("cassettes"));
    let mut run = scenarios::Run {
        sb: &sb,
        kit,
        harness: id,
        lines: Vec::new(),
        keep: kept.as_deref(),
    };
    let mut shown = 0;
    let mut show = |run: &scenarios::Run| {
        for l in &run.lines[shown..] {
            progress(l);
        }
        shown = run.lines.len();
    };
    let tool = run.tool();
    show(&run);
    let tool = tool.as_deref();
    // The scenarios that change nothing shared run side by side: each is a session of its own.
    let done = side_by_side(&sb, kit, id, kept.as_deref());
    for lines in done {
        run.lines.extend(lines);
    }
    show(&run);
    // After the others, not beside them: a prompt delivered to a Claude Code session resumed
    // while other sessions started was typed twice and never confirmed (seen under load).
    run.resume(tool);
    show(&run);
    run.hooks();
    show(&run);
    run.lines.extend(across(&sb, &bound, id));
    show(&run);
    let mut lines = run.lines;
    // What the harness asked the model, beside each failure: a request missing or repeated
    // tells a harness that changed from spex's misreading of it.
    if lines.iter().any(|l| l.verdict == Verdict::Fail) {
        let requests = prepared.fake.requests();
        let tail = requests[requests.len().saturating_sub(30)..].join("\n");
        for l in lines.iter_mut().filter(|l| l.verdict == Verdict::Fail) {
            l.evidence
                .push(format!("the fake model's last requests:\n{tail}"));
        }
    }
    drop(prepared.fake);
    if t.keep
        && let Some(dir) = sb.dir.take()
    {
        // Kept for a bug report: the recordings and the sandbox they ran in.
        let _ = dir.keep();
    }
    Ok(Report {
        harness: id,
        binary: t.binary.to_owned(),
        version,
        lines,
        seconds: started.elapsed().as_secs_f64(),
        kept,
    })
}

/// The lines judged across every scenario: every bound hook fired, every payload decoded.
fn across(
    sb: &sandbox::Sandbox,
    bound: &std::collections::BTreeMap<String, PathBuf>,
    id: &str,
) -> [Line; 2] {
    let errors = sb.dispatch_errors();
    [
        Line::judged(
            "all",
            Capability::Events,
            "every hook spex binds fires across the scenarios".into(),
            hooks::judge(bound, &hooks::fired(&sb.projects(), id)),
        ),
        Line::judged(
            "all",
            Capability::Events,
            "every hook payload decodes".into(),
            if errors.is_empty() {
                Ok(())
            } else {
                Err(errors)
            },
        ),
    ]
}

/// The harness binary a user runs, and its version when `--version` tells it.
#[derive(Debug, Clone)]
pub struct Installed {
    pub binary: PathBuf,
    pub version: Option<String>,
}

/// What `doctor` and `launch` say of an installed version: nothing for the pinned version or
/// one that passed, else that it is unchecked or which promises failed, with the fallbacks.
pub fn standing_note(spex_home: &Path, h: &dyn Harness, inst: &Installed) -> Option<String> {
    let version = inst.version.as_deref()?;
    match checks::verdict(spex_home, &inst.binary, version) {
        checks::Verdict::Passed(_) => None,
        checks::Verdict::Unchecked if version == h.identity().version => None,
        checks::Verdict::Unchecked => Some(format!(
            "{} {version} was not checked (spex was verified against {}): run `spex check --harness {}`",
            inst.binary.display(),
            h.identity().version,
            h.id()
        )),
        checks::Verdict::Failed(r) => {
            let mut out = format!(
                "{} {version} failed `spex check` ({}):",
                inst.binary.display(),
                r.checked_at
            );
            for f in &r.failed {
                out.push_str(&format!("\n  - {}: {}", f.promise, f.fallback));
            }
            Some(out)
        }
    }
}

/// A scenario that runs beside others.
type Scenario<'s> = &'s (dyn Fn(&mut scenarios::Run) -> Option<()> + Sync);

/// Permission, question, interrupt and failed turn, each in a thread of its own: their lines,
/// in that order.
fn side_by_side(
    sb: &sandbox::Sandbox,
    kit: &'static dyn crate::adapters::common::check::CheckKit,
    id: &'static str,
    keep: Option<&Path>,
) -> Vec<Vec<Line>> {
    let all: [Scenario; 4] = [
        &|r| r.permission(),
        &|r| r.question(),
        &|r| r.interrupt(),
        &|r| r.failed(),
    ];
    std::thread::scope(|scope| {
        let handles: Vec<_> = all
            .iter()
            .map(|scenario| {
                let mut own = scenarios::Run {
                    sb,
                    kit,
                    harness: id,
                    lines: Vec::new(),
                    keep,
                };
                scope.spawn(move || {
                    scenario(&mut own);
                    own.lines
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    })
}
