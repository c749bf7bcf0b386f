//! Tests of `on_remote`'s reading of a command line against the real subcommands' arguments
//! (apart from `on_remote`, which the command line's definition imports).

use std::ffi::OsString;

use super::on_remote::rewrite;

fn rewritten(line: &[&str], sessions: usize, drop: &[&str]) -> Vec<String> {
    let argv: Vec<OsString> = line.iter().map(OsString::from).collect();
    let cli = <super::Cli as clap::CommandFactory>::command();
    let sub = cli.find_subcommand(line[0]).unwrap();
    let mut names = ["a3", "b7"].into_iter().map(String::from);
    rewrite(&argv, sub, sessions, &mut || names.next(), drop)
        .into_iter()
        .map(|a| a.into_string().unwrap())
        .collect()
}

#[test]
fn only_the_session_arguments_are_renamed_for_the_remote() {
    // A text equal to the session's name, an option's value: as given.
    assert_eq!(
        rewritten(
            &["deliver", "--timeout", "5", "dev:x", "dev:x", "--json"],
            1,
            &[]
        ),
        ["deliver", "--timeout", "5", "a3", "dev:x", "--json"]
    );
    assert_eq!(
        rewritten(
            &[
                "answer",
                "--message=dev:x",
                "dev:x",
                "1",
                "--attention",
                "a1"
            ],
            1,
            &[]
        ),
        ["answer", "--message=dev:x", "a3", "1", "--attention", "a1"]
    );
    assert_eq!(
        rewritten(
            &["events", "-f", "dev:x", "dev:y", "--json"],
            usize::MAX,
            &[]
        ),
        ["events", "-f", "a3", "b7", "--json"]
    );
    assert_eq!(
        rewritten(&["diff", "dev:x", "--", "dev:x"], 1, &[]),
        ["diff", "a3", "--", "dev:x"]
    );
}

#[test]
fn the_options_that_chose_the_machine_stay_here() {
    assert_eq!(
        rewritten(
            &[
                "launch",
                "--remote",
                "dev",
                "--repo=/srv/app",
                "--detach",
                "hi",
                "--",
                "--x"
            ],
            0,
            &["remote", "repo"]
        ),
        ["launch", "--detach", "hi", "--", "--x"]
    );
    assert_eq!(
        rewritten(&["usage", "--remote=dev", "--by", "day"], 0, &["remote"]),
        ["usage", "--by", "day"]
    );
}
