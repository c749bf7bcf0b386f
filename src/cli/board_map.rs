//! A test that the board's actions are the CLI's commands: each action the board offers
//! names a subcommand that exists, with the flags it names, and the board's guide lists it.

use clap::CommandFactory;

/// Every board action runs a command that exists, with the flags it names, and the guide
/// lists each one with that command.
#[test]
fn every_board_action_maps_to_a_documented_cli_command() {
    let cli = super::Cli::command();
    let guide = include_str!("../../docs/guides/board.md");
    for (action, command) in crate::board::actions::ACTIONS {
        let words: Vec<&str> = command.split_whitespace().collect();
        assert_eq!(words[0], "spex", "{command}");
        let sub = cli
            .find_subcommand(words[1])
            .unwrap_or_else(|| panic!("`{action}` maps to `{command}`: no such subcommand"));
        for flag in words
            .iter()
            .filter_map(|w| w.trim_start_matches('[').strip_prefix("--"))
        {
            let flag = flag.trim_end_matches(']');
            if flag.is_empty() {
                // `--` before paths.
                continue;
            }
            assert!(
                sub.get_arguments().any(|a| a.get_long() == Some(flag)),
                "`{command}`: `{}` takes no `--{flag}`",
                words[1]
            );
        }
        let row = format!("| `{action}` | `{command}` |");
        assert!(guide.contains(&row), "docs/guides/board.md lacks {row}");
    }
    let section = guide
        .split("\n## Actions")
        .nth(1)
        .expect("an Actions section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let rows = section
        .lines()
        .filter(|l| l.starts_with("| `") && l.contains("| `spex "))
        .count();
    assert_eq!(
        rows,
        crate::board::actions::ACTIONS.len(),
        "the guide lists an action the board lacks"
    );
}
