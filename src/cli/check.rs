//! `spex check`: prove spex's promises against the harness versions installed here.

use super::args::spex_binary;
use super::outcome::Outcome;
use super::output::{self, Style};
use crate::adapters;
use crate::check::{self, CheckError, Line, Report, Verdict};
use crate::env::Env;

/// Check what spex promises against the installed harness versions, offline.
///
/// Runs each harness binary you have installed (the one on PATH, or the configured
/// `harness.<id>.command`) in a throwaway HOME and git repository, against a fake model server
/// built into spex, through fixed scenarios: a turn with a tool call, a permission dialog
/// answered with `spex approve`, a question answered with `spex answer`, a turn interrupted
/// with `spex interrupt`, a failed turn, launch readiness, and resume. Prints one line per
/// promise, passed or failed; a failed line says what spex does instead and shows the evidence
/// (the payload, the command's output or the screen). It never reads your credentials,
/// contacts a provider, or touches your HOME, config or projects.
///
/// The result is kept per binary and version: `spex doctor` and `spex launch` say when the
/// installed version was not checked or failed, and a capability whose check failed is
/// switched off for that version with its reason. Exits 1 when a promise failed.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Check this harness only (default: every harness installed).
    #[arg(long, value_name = "ID")]
    pub harness: Option<String>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    /// Keep the throwaway folder and the cassettes recorded, for a bug report.
    #[arg(long)]
    pub keep: bool,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let harnesses = match &args.harness {
        Some(id) => vec![adapters::lookup(id).ok_or_else(|| CheckError::Unknown(id.clone()))?],
        None => adapters::all().to_vec(),
    };
    let cfg = crate::config::load_user(&env.user_config_file(), &adapters::known())?;
    let spex = spex_binary()?;
    let style = Style::detect(env.no_color);
    let mut reports: Vec<Report> = Vec::new();
    for h in harnesses {
        let command = cfg.harness.get(h.id()).and_then(|c| c.command.as_deref());
        let found = env.which(command.unwrap_or(h.identity().binary));
        let Some(binary) = found else {
            if args.harness.is_some() {
                return Err(CheckError::Missing(h.id().to_owned()).into());
            }
            if !args.json {
                output::print(&format!("{}: not installed, skipped\n", h.id()));
            }
            continue;
        };
        if !args.json {
            output::print(&format!("{} ({})\n", h.id(), binary.display()));
        }
        let target = check::Target {
            harness: h,
            binary: &binary,
            spex: &spex,
            path: env.path.as_ref(),
            keep: args.keep,
        };
        let mut progress = |l: &Line| {
            if !args.json {
                output::print(&line_text(style, l));
            }
        };
        let report = check::run(&target, &mut progress)?;
        crate::store::checks::save(&env.spex_home(), report.stored())?;
        if !args.json {
            let failed = report
                .lines
                .iter()
                .filter(|l| l.verdict == Verdict::Fail)
                .count();
            output::print(&format!(
                "{} {}: {} promise(s) held, {failed} failed, in {:.0} s{}\n\n",
                h.id(),
                report.version,
                report
                    .lines
                    .iter()
                    .filter(|l| l.verdict == Verdict::Pass)
                    .count(),
                report.seconds,
                report
                    .kept
                    .as_ref()
                    .map(|k| format!("; cassettes kept in {}", k.display()))
                    .unwrap_or_default()
            ));
        }
        reports.push(report);
    }
    if args.json {
        output::json(&serde_json::json!({ "harnesses": reports }));
    }
    Ok(if reports.iter().all(Report::passed) {
        Outcome::Ok
    } else {
        Outcome::Differs
    })
}

/// `  ok    scenario  promise`, and for a failure its fallback and evidence, indented.
fn line_text(style: Style, l: &Line) -> String {
    let mark = match l.verdict {
        Verdict::Pass => style.green("ok  "),
        Verdict::Fail => style.red("FAIL"),
        Verdict::NotChecked => style.yellow("n/a "),
    };
    let mut out = format!("  {mark}  {:<10}  {}\n", l.scenario, l.promise);
    if let Some(f) = l.fallback {
        out.push_str(&format!("        fallback: {f}\n"));
    }
    for e in &l.evidence {
        for (i, row) in e.lines().take(30).enumerate() {
            let lead = if i == 0 { "evidence: " } else { "          " };
            out.push_str(&format!("        {lead}{row}\n"));
        }
    }
    out
}
