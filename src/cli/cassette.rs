//! `spex cassette check|export|test|spec`: verify a recording, turn it into an asciicast, judge
//! it against its assertion spec, or draft that spec.

use std::path::{Path, PathBuf};

use super::args::cassette_dir;
use super::outcome::{Failed, Outcome};
use super::output;
use crate::env::Env;
use crate::hint::Hinted;
use crate::pty::cassette::Cassette;
use crate::pty::cassette::assertions::eval::{self, Report};
use crate::pty::cassette::assertions::{AssertionsError, FILE, starter};

/// Check, export or test a recorded session.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Verify a cassette: required files, version, digest, `seq` order, output tiling.
    Check {
        /// A cassette folder, or a recorded session's handle, name, id, or a unique prefix of
        /// a handle or id.
        #[arg(add = super::complete::sessions())]
        cassette: String,
    },
    /// Write an asciicast v2 file (`asciinema play FILE` plays it).
    Export {
        /// A cassette folder, or a recorded session's handle, name, id, or a unique prefix of
        /// a handle or id.
        #[arg(add = super::complete::sessions())]
        cassette: String,
        /// The asciicast file to write.
        #[arg(long, value_name = "FILE")]
        cast: PathBuf,
    },
    /// Replay cassettes collapsed and judge each against the `assertions.json` beside it.
    ///
    /// Prints a line per cassette that passes and, per failed predicate, the predicate, the
    /// screen nearest to the failure (its time and rows) and the service events around it.
    /// Exits 1 when any predicate fails or a spec is bound to another recording. The spec
    /// format is in docs/reference/assertions.md.
    Test {
        /// Cassette folders, recorded sessions, or folders to search for every cassette with an
        /// `assertions.json`.
        #[arg(required = true, add = super::complete::sessions())]
        cassettes: Vec<String>,
        /// Print the reports as JSON: a list of `{cassette, id, assertions, binding,
        /// failures: [{index, predicate, message, seq, t_ms, excerpt, frame, events}]}`.
        #[arg(long)]
        json: bool,
    },
    /// Record a program (not a harness) as a cassette, driven by a script of steps: how the
    /// terminal conformance set and `top`, `less`, `vim` are recorded
    /// (`scripts/record-cassettes.sh`).
    ///
    /// The program runs under spex's PTY host with `TERM=xterm-256color` and `LANG=C.UTF-8`; the
    /// terminal model answers its queries. The script is a JSON list of steps: `{"wait": TEXT}`
    /// (until the screen shows it, at most 20 s), `{"keys": TEXT}`, `{"paste": TEXT}` (one
    /// bracketed paste), `{"resize": [ROWS, COLS]}`, `{"sleep_ms": N}`, `{"frame": REASON}`
    /// (notes the screen, an anchor for specs). After the last step the program has 20 s to
    /// exit before it is killed. The folder, the home folder and the store are scrubbed.
    Record {
        /// The cassette folder to create (it must not hold a recording).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// The script of steps (none: the program runs until it exits).
        #[arg(long, value_name = "FILE")]
        script: Option<PathBuf>,
        /// Terminal rows.
        #[arg(long, default_value_t = 24)]
        rows: u16,
        /// Terminal columns.
        #[arg(long, default_value_t = 80)]
        cols: u16,
        /// The program and its arguments.
        #[arg(required = true, last = true, value_name = "PROGRAM")]
        argv: Vec<String>,
    },
    /// Write a starter `assertions.json` from a recording, for a person to tighten: its
    /// service events (as marks and in order), final screen, state, exit and outcome.
    Spec {
        /// A cassette folder, or a recorded session's handle, name, id, or a unique prefix of
        /// a handle or id.
        #[arg(add = super::complete::sessions())]
        cassette: String,
        /// Replace an `assertions.json` that is there already.
        #[arg(long, conflicts_with = "rebind")]
        force: bool,
        /// Keep the `assertions.json` there and bind it to this recording (after a new
        /// recording or a rescrub of the same session), only when every predicate holds for
        /// it; otherwise print the failures and change nothing.
        #[arg(long)]
        rebind: bool,
    },
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    match &args.action {
        Action::Check { cassette } => {
            let dir = cassette_dir(cassette, env)?;
            let c = Cassette::open(&dir)?;
            let problems = c.problems();
            if problems.is_empty() {
                output::print(&format!(
                    "{}: ok ({} records, {} output bytes)\n",
                    dir.display(),
                    c.records.len(),
                    c.output.len()
                ));
                Ok(Outcome::Ok)
            } else {
                // One problem a line, each naming the cassette, as a check lists them.
                let problems: Vec<String> = problems
                    .iter()
                    .map(|p| format!("{}: {p}", dir.display()))
                    .collect();
                Err(Failed::with(
                    Outcome::Differs,
                    anyhow::anyhow!(problems.join("\n")),
                ))
            }
        }
        Action::Test { cassettes, json } => test(cassettes, *json, env),
        Action::Spec {
            cassette,
            force,
            rebind,
        } => {
            let dir = cassette_dir(cassette, env)?;
            if *rebind {
                rebind_spec(&dir)
            } else {
                draft_spec(&dir, *force)
            }
        }
        Action::Record {
            out,
            script,
            rows,
            cols,
            argv,
        } => record_program(out, script.as_deref(), (*rows, *cols), argv, env),
        Action::Export { cassette, cast } => {
            let c = Cassette::open(&cassette_dir(cassette, env)?)?;
            crate::fsutil::write_atomic(cast, c.asciicast().as_bytes())
                .map_err(|e| anyhow::anyhow!("`{}`: {e}", cast.display()))?;
            output::print(&format!("wrote {}\n", cast.display()));
            Ok(Outcome::Ok)
        }
    }
}

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

fn test(args: &[String], json: bool, env: &Env) -> anyhow::Result<Outcome> {
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
        if let Some(frame) = &f.frame {
            out.push_str(&format!(
                "    nearest recorded frame: `{}` at t_ms {} (seq {})\n",
                frame["reason"].as_str().unwrap_or("?"),
                frame["t_ms"],
                frame["seq"]
            ));
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
fn draft_spec(dir: &Path, force: bool) -> anyhow::Result<Outcome> {
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

/// Records `argv` into `out`, driven by the steps in `script`.
fn record_program(
    out: &Path,
    script: Option<&Path>,
    (rows, cols): (u16, u16),
    argv: &[String],
    env: &Env,
) -> anyhow::Result<Outcome> {
    use crate::pty::cassette::program;
    let steps = script.map(program::script).transpose()?.unwrap_or_default();
    let cwd = std::env::current_dir()?;
    let mut scrub = vec![(
        "tree path".to_owned(),
        cwd.to_string_lossy().into_owned(),
        "$TREE".to_owned(),
    )];
    if let Some(home) = &env.home {
        scrub.push((
            "home path".to_owned(),
            home.to_string_lossy().into_owned(),
            "$HOME".to_owned(),
        ));
    }
    scrub.push((
        "spex store".to_owned(),
        env.spex_home().to_string_lossy().into_owned(),
        "$SPEX_HOME".to_owned(),
    ));
    let term = "xterm-256color".to_owned();
    program::record(&program::Recording {
        argv: argv.to_vec(),
        cwd,
        size: crate::pty::session::Size { rows, cols },
        env: vec![
            ("TERM".to_owned(), term.clone()),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ],
        steps: &steps,
        out: out.to_owned(),
        id: crate::runtime::start::new_id()?,
        scrub,
        term: Some(term),
    })?;
    output::print(&format!("recorded {}\n", out.display()));
    Ok(Outcome::Ok)
}

/// Binds the spec in `dir` to the cassette there, when every predicate holds for it.
fn rebind_spec(dir: &Path) -> anyhow::Result<Outcome> {
    use crate::pty::cassette::assertions::{Binding, Spec};
    let path = dir.join(FILE);
    let mut spec = Spec::load(&path)?;
    let cassette = Cassette::open(dir)?;
    let fin: serde_json::Value =
        serde_json::from_str(&fs_err::read_to_string(dir.join("final.json"))?)?;
    let before = spec.cassette.clone();
    spec.cassette = Binding {
        id: cassette.manifest.id.clone(),
        content_digest: cassette.manifest.content_digest.clone().unwrap_or_default(),
    };
    let report = eval::judge(dir, &cassette, &fin, &spec);
    if !report.passed() {
        output::print(&render(&report));
        output::print(&format!(
            "{} stays bound to `{}` ({})\n",
            path.display(),
            before.id,
            before.content_digest
        ));
        return Ok(Outcome::Differs);
    }
    crate::fsutil::write_atomic(&path, spec.to_json().as_bytes())
        .map_err(|e| anyhow::anyhow!("`{}`: {e}", path.display()))?;
    output::print(&format!(
        "{} is bound to `{}` ({}): {} assertions hold\n",
        path.display(),
        spec.cassette.id,
        spec.cassette.content_digest,
        spec.assertions.len()
    ));
    Ok(Outcome::Ok)
}
