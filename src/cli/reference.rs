//! The command-line reference, `docs/reference/cli.md`, written from the clap definitions: every
//! subcommand's long help (the `Args` doc comments) as Markdown, so the page and
//! `spex <command> --help` say the same because they are the same text. Test-only: it reads the
//! command tree and writes one file; it runs nothing.

use std::fmt::Write as _;
use std::path::Path;

use clap::CommandFactory as _;

/// Where the page lives, and the variable that rewrites it instead of comparing.
const PAGE: &str = "docs/reference/cli.md";
const UPDATE: &str = "SPEX_UPDATE_DOCS";

/// The whole page.
fn page() -> String {
    let mut root = super::Cli::command();
    // Building gives every subcommand its full name (`spex cassette check`) and its usage.
    root.build();
    let mut out = format!(
        "<!-- Generated from the clap definitions in src/cli/ by `{UPDATE}=1 cargo test --bin spex cli::reference`; edit the doc comments there, not this file. -->\n\n\
         # Command-line reference\n\n\
         Every command's help, as `spex <command> --help` prints it. Exit codes: see the \
         [README](../../README.md#exit-codes).\n\n"
    );
    let mut all = Vec::new();
    walk(&root, &mut all);
    for cmd in &all {
        let name = full_name(cmd);
        let about = cmd.get_about().map(ToString::to_string).unwrap_or_default();
        let _ = writeln!(out, "- [`{name}`](#{}): {about}", anchor(&name));
    }
    out.push('\n');
    for cmd in &all {
        section(cmd, &mut out);
    }
    out
}

/// The command and its visible subcommands, depth first, in their declared order.
fn walk<'a>(cmd: &'a clap::Command, out: &mut Vec<&'a clap::Command>) {
    out.push(cmd);
    for sub in cmd.get_subcommands() {
        if !sub.is_hide_set() && sub.get_name() != "help" {
            walk(sub, out);
        }
    }
}

fn full_name(cmd: &clap::Command) -> String {
    cmd.get_bin_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_owned()
}

/// GitHub's anchor for a heading `` `spex cassette check` ``.
fn anchor(name: &str) -> String {
    name.replace(' ', "-")
}

fn section(cmd: &clap::Command, out: &mut String) {
    let name = full_name(cmd);
    let _ = writeln!(out, "## `{name}`\n");
    if let Some(text) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(out, "{text}\n");
    }
    let usage = cmd.clone().render_usage().to_string();
    let usage = usage.trim().trim_start_matches("Usage:").trim();
    let _ = writeln!(out, "Usage: `{usage}`\n");
    let subs: Vec<_> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .collect();
    if !subs.is_empty() {
        out.push_str("Commands:\n\n");
        for s in subs {
            let about = s.get_about().map(ToString::to_string).unwrap_or_default();
            let _ = writeln!(
                out,
                "- [`{}`](#{}): {about}",
                s.get_name(),
                anchor(&full_name(s))
            );
        }
        out.push('\n');
    }
    let visible =
        |a: &&clap::Arg| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version");
    let positionals: Vec<_> = cmd.get_positionals().filter(visible).collect();
    if !positionals.is_empty() {
        out.push_str("Arguments:\n\n");
        for a in positionals {
            item(a, out);
        }
        out.push('\n');
    }
    let options: Vec<_> = cmd
        .get_arguments()
        .filter(|a| !a.is_positional())
        .filter(visible)
        .collect();
    if !options.is_empty() {
        out.push_str("Options:\n\n");
        for a in options {
            item(a, out);
        }
        out.push('\n');
    }
}

/// One argument: its spelling, its help, and the values and default its `--help` lists.
fn item(arg: &clap::Arg, out: &mut String) {
    let spelled = match (arg.get_short(), arg.get_long()) {
        (Some(s), Some(_)) => format!("-{s}, {arg}"),
        _ => arg.to_string(),
    };
    let help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(ToString::to_string)
        .unwrap_or_default();
    let _ = write!(out, "- `{spelled}`: {help}");
    if !help.is_empty() && !help.ends_with('.') {
        out.push('.');
    }
    let defaults = arg.get_default_values();
    if !defaults.is_empty() && arg.get_action().takes_values() && !arg.is_hide_default_value_set() {
        let d: Vec<_> = defaults.iter().map(|d| d.to_string_lossy()).collect();
        let _ = write!(out, " Default: `{}`.", d.join(","));
    }
    let values: Vec<_> = arg
        .get_possible_values()
        .into_iter()
        .filter(|v| !v.is_hide_set())
        .collect();
    if !values.is_empty() && arg.get_action().takes_values() {
        if values.iter().any(|v| v.get_help().is_some()) {
            out.push_str(
                " Values:
",
            );
            for v in &values {
                let _ = write!(out, "  - `{}`", v.get_name());
                if let Some(h) = v.get_help() {
                    let _ = write!(out, ": {h}");
                }
                out.push('\n');
            }
            return;
        }
        let names: Vec<String> = values
            .iter()
            .map(|v| format!("`{}`", v.get_name()))
            .collect();
        let _ = write!(out, " Values: {}.", names.join(", "));
    }
    out.push('\n');
}

#[test]
fn cli_reference_is_generated_from_the_help() {
    let want = page();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(PAGE);
    if std::env::var_os(UPDATE).is_some() {
        fs_err::write(&path, &want).unwrap();
        return;
    }
    let have = fs_err::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{PAGE} differs from the help the clap definitions give\nhint: run `{UPDATE}=1 cargo test --bin spex cli::reference` and commit the page"
    );
}
