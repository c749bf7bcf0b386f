//! The `remotes` key: the other machines spex reaches over SSH, by name (`{NAME: {"dest":
//! "user@host", "spex": "path"?}}`). Parsed here with the other keys so a wrong entry is an
//! error naming its file and line; `crate::remote` reads and edits it in the user's file.

use std::collections::BTreeMap;

use jsonc_parser::ast::Value as Ast;
use jsonc_parser::common::Ranged;

use super::jsonc::name_of;
use super::prices::Bad;

/// One machine: where `ssh` connects, and the `spex` it runs there.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RemoteEntry {
    /// Anything `ssh` accepts as its destination: `user@host`, an alias of `~/.ssh/config`,
    /// `ssh://user@host:port`.
    pub dest: String,
    /// The `spex` program on that machine, when it is not `spex` on the login `PATH`.
    pub spex: Option<String>,
}

const HINT: &str = "e.g. \"remotes\": {\"devbox\": {\"dest\": \"me@devbox\", \"spex\": \"~/.cargo/bin/spex\"}} (`spex remote add` writes it)";

/// Whether `name` can name a machine: 1 to 40 letters, digits, `-` or `_`, starting with a
/// letter (it is written before the `:` of `host:handle`, so never a `:` or `/`).
pub fn valid_name(name: &str) -> bool {
    name.len() <= 40
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Why `dest` cannot be handed to `ssh` as its destination, if it cannot: empty, or read as an
/// option (a leading `-`), or holding whitespace or control characters.
pub fn dest_problem(dest: &str) -> Option<&'static str> {
    if dest.is_empty() {
        Some("is empty")
    } else if dest.starts_with('-') {
        Some("starts with `-` (ssh would read it as an option)")
    } else if dest.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("holds a space or a control character")
    } else {
        None
    }
}

fn bad(at: usize, message: impl Into<String>) -> Bad {
    Bad {
        at,
        message: message.into(),
        hint: HINT.to_owned(),
    }
}

/// The `remotes` key of one layer, over what the lower layers set.
pub fn apply(remotes: &mut BTreeMap<String, RemoteEntry>, v: &Ast) -> Result<(), Bad> {
    let Ast::Object(obj) = v else {
        return Err(bad(v.start(), "`remotes` must be an object"));
    };
    for prop in &obj.properties {
        let name = name_of(&prop.name);
        if !valid_name(&name) {
            return Err(bad(
                prop.start(),
                format!(
                    "`remotes`: `{name}` is not a machine name (1 to 40 letters, digits, `-` or `_`, starting with a letter)"
                ),
            ));
        }
        let Ast::Object(fields) = &prop.value else {
            return Err(bad(
                prop.value.start(),
                format!("`remotes.{name}` must be an object"),
            ));
        };
        let (mut dest, mut spex) = (None, None);
        for f in &fields.properties {
            let key = name_of(&f.name);
            let Ast::StringLit(s) = &f.value else {
                return Err(bad(
                    f.value.start(),
                    format!("`remotes.{name}.{key}` must be a string"),
                ));
            };
            match key.as_str() {
                "dest" => dest = Some(s.value.to_string()),
                "spex" => spex = Some(s.value.to_string()).filter(|s| !s.is_empty()),
                other => {
                    return Err(bad(
                        f.start(),
                        format!("unknown key `remotes.{name}.{other}` (keys: `dest`, `spex`)"),
                    ));
                }
            }
        }
        let Some(dest) = dest else {
            return Err(bad(prop.start(), format!("`remotes.{name}` has no `dest`")));
        };
        if let Some(problem) = dest_problem(&dest) {
            return Err(bad(
                prop.start(),
                format!("`remotes.{name}.dest` {problem}"),
            ));
        }
        remotes.insert(name, RemoteEntry { dest, spex });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_machine_name_goes_before_a_colon_so_it_holds_none() {
        for ok in ["devbox", "build-2", "a_b"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "2box", "a:b", "a/b", "a b", &"x".repeat(41)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_destination_ssh_would_read_as_an_option_is_refused() {
        assert!(dest_problem("-oProxyCommand=x").is_some());
        assert!(dest_problem("me@host port").is_some());
        assert!(dest_problem("").is_some());
        assert_eq!(dest_problem("ssh://me@host:2222"), None);
    }
}
