//! The Gemini CLI process a hook runs under, told by the hook's ancestry (docs/harnesses/facts/gemini.md §1):
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
            let cmdline = fs_err::read(format!("/proc/{pid}/cmdline")).ok()?;
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

/// A child of the CLI process `cli` that runs `command` (a shell the CLI started whose script
/// holds it as whole lines: 0.61.0 wraps it as `(\n<command>\n)` in `bash -c`; docs/harnesses/facts/gemini.md
/// §12), by its pid. Gemini starts a shell command only once it may run (the person allowed it),
/// and fires no hook then; its hooks are children too, but their script is a `spex` command.
pub(super) fn running_command(cli: u32, command: &str) -> Option<u32> {
    let command = command.trim();
    if command.is_empty() {
        return None;
    }
    children(cli).into_iter().find(|child| {
        fs_err::read(format!("/proc/{child}/cmdline")).is_ok_and(|cmdline| {
            let mut args = cmdline.split(|b| *b == 0);
            args.next()
                .and_then(|p| Path::new(std::ffi::OsStr::from_bytes(p)).file_name())
                .is_some_and(|n| SHELLS.iter().any(|s| n.as_bytes() == s.as_bytes()))
                && args
                    .skip_while(|a| *a != b"-c")
                    .nth(1)
                    .is_some_and(|script| holds_lines(&String::from_utf8_lossy(script), command))
        })
    })
}

/// The children of process `pid`, by the parent field of every process's `stat` (the kernel's
/// per-thread `children` lists are not built everywhere); on the readers' path only.
fn children(pid: u32) -> Vec<u32> {
    let Ok(procs) = fs_err::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|c| parent_of(*c) == Some(pid))
        .collect()
}

/// Whether `script` holds `text` as whole lines (only blanks beside it on its first and last
/// line), so a short command does not match inside another.
fn holds_lines(script: &str, text: &str) -> bool {
    script.match_indices(text).any(|(at, _)| {
        let before = &script[..at];
        let after = &script[at + text.len()..];
        let line_start = before.rsplit('\n').next().unwrap_or_default();
        let line_end = after.split('\n').next().unwrap_or_default();
        line_start.trim().is_empty() && line_end.trim().is_empty()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt as _;
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
    fn a_command_is_whole_lines_of_the_script() {
        let script = "shopt -u promptvars; _bgpids_file=/tmp/x\n(\n  trap 'jobs -p' EXIT\nsleep 20; echo slow > slow_out.txt\n)\n__code=$?\nexit $__code";
        assert!(holds_lines(script, "sleep 20; echo slow > slow_out.txt"));
        assert!(holds_lines("ls", "ls"));
        assert!(holds_lines("a\n  two\nlines \nb", "two\nlines"));
        assert!(!holds_lines(script, "sleep 20"));
        assert!(!holds_lines(script, "ls"));
    }

    #[test]
    fn a_child_shell_running_the_command_is_found_and_no_other() {
        let command = "sleep 30; echo done";
        let mut child = Command::new("bash")
            .args(["-c", &format!("(\n{command}\n)\nexit $?")])
            .process_group(0)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let me = std::process::id();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut found = None;
        while found.is_none() && std::time::Instant::now() < end {
            found = running_command(me, command);
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(found, Some(child.id()));
        assert_eq!(running_command(me, "sleep 30"), None);
        assert_eq!(running_command(me, "  "), None);
        // The group: the subshell and its `sleep` too.
        std::process::Command::new("kill")
            .args(["-9", "--", &format!("-{}", child.id())])
            .status()
            .unwrap();
        child.wait().unwrap();
        assert_eq!(running_command(me, command), None);
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
        fs_err::copy("/bin/sh", &fake).unwrap();
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
