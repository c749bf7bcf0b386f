//! `spex cassette test` and `spex cassette spec`: finds the cassettes named (a folder is searched
//! for every cassette with an `assertions.json`), has each judged against its spec, and prints
//! the reports; drafts a starter spec.

use std::path::{Path, PathBuf};

use super::args::cassette_dir;
use super::outcome::Outcome;
use super::output;
use crate::env::Env;
use crate::hint::Hinted;
use crate::pty::cassette::Cassette;
use crate::pty::cassette::assertions::eval::{self, Report};
use crate::pty::cassette::assertions::{AssertionsError, FILE, starter};

/// The cassette folders `args` name: a cassette, a folder holding cassettes with specs, or a
/// recorded session.
fn cassettes(args: &[String], env: &Env) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for arg in args {
        let path = Path::new(arg);
        if path.join("manifest.json").is_file() {
            out.push(path.to_owned());
            continue;
        }
        if path.is_dir() {
            let mut found: Vec<PathBuf> = walkdir::WalkDir::new(path)
                .sort_by_file_name()
                .into_iter()
                .filter_map(Result::ok)
                .filter(|e| e.file_name() == FILE)
                .filter_map(|e| e.path().parent().map(Path::to_owned))
                .filter(|d| d.join("manifest.json").is_file())
                .collect();
            if found.is_empty() {
                anyhow::bail!(Hinted::new(
                    format!("no cassette with an `{FILE}` under `{arg}`"),
                    "`spex cassette spec CASSETTE` drafts one"
                ));
            }
            out.append(&mut found);
            continue;
        }
        out.push(cassette_dir(arg, env)?);
    }
    Ok(out)
}

pub fn run(args: &[String], json: bool, env: &Env) -> anyhow::Result<Outcome> {
    let mut reports = Vec::new();
    for dir in cassettes(args, env)? {
        if !dir.join(FILE).is_file() {
            anyhow::bail!(Hinted::new(
                format!("`{}` has no `{FILE}`", dir.display()),
                format!("`spex cassette spec {}` drafts one", dir.display())
            ));
        }
        reports.push(eval::test(&dir)?);
    }
    let failed = reports.iter().filter(|r| !r.passed()).count();
    if json {
        output::json(&reports);
    } else {
        let text: String = reports.iter().map(render).collect();
        output::print(&text);
        if reports.len() > 1 {
            output::print(&format!(
                "{} of {} cassettes passed\n",
                reports.len() - failed,
                reports.len()
            ));
        }
    }
    Ok(if failed == 0 {
        Outcome::Ok
    } else {
        Outcome::Differs
    })
}

/// One cassette's report as text: a pass line, or every failure with its evidence.
fn render(r: &Report) -> String {
    let name = r.cassette.display();
    if r.passed() {
        return format!("ok {name}: {} assertions passed\n", r.assertions);
    }
    if let Some(binding) = &r.binding {
        return format!("FAIL {name}: {binding}\n");
    }
    let mut out = format!(
        "FAIL {name}: {} of {} assertions failed\n",
        r.failures.len(),
        r.assertions
    );
    for f in &r.failures {
        out.push_str(&format!("  assertion {}: {}\n", f.index, f.predicate));
        out.push_str(&format!("    {}\n", f.message));
        let at = match f.seq {
            Some(seq) => format!("t_ms {} (seq {seq})", f.t_ms),
            None => format!("t_ms {} (before any output)", f.t_ms),
        };
        if f.excerpt.is_empty() {
            out.push_str(&format!("    screen at {at}: blank\n"));
        } else {
            out.push_str(&format!("    screen at {at}:\n"));
            for row in &f.excerpt {
                out.push_str(&format!("      {row}\n"));
            }
        }
        if f.events.is_empty() {
            out.push_str("    no service events nearby\n");
        } else {
            out.push_str("    service events nearby:\n");
            for e in &f.events {
                out.push_str(&format!(
                    "      t_ms {} seq {} {}\n",
                    e["t_ms"],
                    e["seq"],
                    e["kind"].as_str().unwrap_or("?")
                ));
            }
        }
    }
    out
}

/// Writes the starter spec for the cassette in `dir`.
pub fn starter(dir: &Path, force: bool) -> anyhow::Result<Outcome> {
    let path = dir.join(FILE);
    if path.exists() && !force {
        return Err(AssertionsError::Exists(dir.to_owned()).into());
    }
    let cassette = Cassette::open(dir)?;
    let fin: serde_json::Value =
        serde_json::from_str(&fs_err::read_to_string(dir.join("final.json"))?)?;
    let spec = starter::draft(&cassette, &fin);
    crate::fsutil::write_atomic(&path, spec.to_json().as_bytes())
        .map_err(|e| anyhow::anyhow!("`{}`: {e}", path.display()))?;
    output::print(&format!(
        "wrote {} ({} assertions): tighten it, then `spex cassette test {}`\n",
        path.display(),
        spec.assertions.len(),
        dir.display()
    ));
    Ok(Outcome::Ok)
}
