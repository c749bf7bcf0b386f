//! The Gemini CLI process a hook runs under, told by the hook's ancestry (facts/gemini.md §1):
//! the CLI relaunches itself as a child that runs the session and starts its hooks (`bash -c`,
//! which runs a lone command in its own place), and the launcher waits for that child. The
//! child is the session's process: it is what works, and it outlives a killed launcher.

use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use crate::seam::evidence::{parent_of, process_name, process_start};
use crate::store::session::ProcessId;

/// Shells that may stand between the CLI and the hook's command.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "busybox",
];

/// How far up the hook's ancestry the CLI may be (the hook itself, a shell, a shim's shell).
const MAX_HOPS: usize = 3;

/// The Gemini CLI process this hook runs under: the nearest ancestor that is not a shell, if
/// its command line names Gemini (a hook run by hand from a terminal names no process).
pub(super) fn cli_process() -> Option<ProcessId> {
    let mut pid = std::os::unix::process::parent_id();
    for _ in 0..MAX_HOPS {
        if !SHELLS.contains(&process_name(pid)?.as_str()) {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            return runs_gemini(&cmdline)
                .then(|| process_start(pid))
                .flatten()
                .map(|start| ProcessId { pid, start });
        }
        pid = parent_of(pid)?;
    }
    None
}

/// Whether a command line (`/proc/<pid>/cmdline`) runs Gemini CLI: its program, or the
/// script its interpreter runs (`node [--options] .../bin/gemini`), is named `gemini...`.
fn runs_gemini(cmdline: &[u8]) -> bool {
    let mut args = cmdline.split(|b| *b == 0);
    let program = args.next().unwrap_or_default();
    let script = args.find(|a| !a.starts_with(b"-")).unwrap_or_default();
    [program, script].iter().any(|a| {
        Path::new(std::ffi::OsStr::from_bytes(a))
            .file_name()
            .is_some_and(|n| n.as_bytes().starts_with(b"gemini"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn gemini_is_the_program_or_the_script_its_interpreter_runs() {
        let runs = |args: &[&str]| runs_gemini((args.join("\0") + "\0").as_bytes());
        assert!(runs(&[
            "/usr/bin/node",
            "--max-old-space-size=12052",
            "/p/node_modules/.bin/gemini",
            "-p",
            "x"
        ]));
        assert!(runs(&["node", "/p/bundle/gemini.js"]));
        assert!(runs(&["/opt/gemini"]));
        assert!(!runs(&["cargo", "test", "--bin", "spex", "gemini"]));
        assert!(!runs(&["bash"]));
        assert!(!runs(&[]));
    }

    #[test]
    fn a_hook_names_the_gemini_process_above_its_shell_and_nothing_else() {
        // Run by the test harness (no Gemini above it): no process.
        assert_eq!(cli_process(), None);
        // A process whose command line names gemini, running a shell that runs this test's
        // binary as the hook: found through the shell.
        let me = std::env::current_exe().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("gemini-cli-fake");
        std::fs::copy("/bin/sh", &fake).unwrap();
        let out = Command::new(&fake)
            .args([
                "-c",
                &format!(
                    "sh -c '{} --exact adapters::gemini::process::tests::probe --nocapture --include-ignored; true'; true",
                    me.display()
                ),
            ])
            .env("SPEX_PROBE_CLI", "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("cli process: Some("), "{text}");
    }

    #[test]
    #[ignore = "run by the test above, under a process named like Gemini"]
    fn probe() {
        if std::env::var_os("SPEX_PROBE_CLI").is_some() {
            // The outer test reads what this prints.
            #[expect(clippy::print_stdout, reason = "the probe's answer to the test above")]
            {
                println!("cli process: {:?}", cli_process());
            }
        }
    }
}
