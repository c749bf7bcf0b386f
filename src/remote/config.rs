//! The remotes as the user's config file holds them (`remotes`: `{NAME: {"dest", "spex"?}}`),
//! read from that file alone (a repository's `spex.jsonc` never names where spex connects),
//! and the surgical edits `spex remote add` and `remove` make to it: one member inserted or
//! removed as text, every other byte of the file left as it was.

use serde_json::{Value, json};

use super::error::RemoteError;
use crate::config::remotes::{dest_problem, valid_name};
use crate::env::Env;
use crate::seam::edit::json_edit::JsonDoc;

/// A machine spex reaches over SSH.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Remote {
    /// Its name: what `host:handle` starts with.
    pub name: String,
    /// What `ssh` connects to.
    pub dest: String,
    /// The spex program there, when not `spex` on the login `PATH`.
    pub spex: Option<String>,
}

impl Remote {
    /// The program run on the other machine.
    pub fn program(&self) -> &str {
        self.spex.as_deref().unwrap_or("spex")
    }
}

/// The remotes of the user's config file, sorted by name.
pub fn remotes(env: &Env) -> Result<Vec<Remote>, RemoteError> {
    let cfg = crate::config::load_user(&env.user_config_file(), &crate::adapters::known())?;
    Ok(cfg
        .remotes
        .into_iter()
        .map(|(name, e)| Remote {
            name,
            dest: e.dest,
            spex: e.spex,
        })
        .collect())
}

/// The remote named `name`.
pub fn find(env: &Env, name: &str) -> Result<Remote, RemoteError> {
    let all = remotes(env)?;
    let known = all.iter().map(|r| r.name.clone()).collect();
    all.into_iter()
        .find(|r| r.name == name)
        .ok_or_else(|| RemoteError::Unknown {
            name: name.to_owned(),
            known,
        })
}

fn read_doc(env: &Env) -> Result<(std::path::PathBuf, JsonDoc), RemoteError> {
    let path = env.user_config_file();
    let bytes = crate::fsutil::read_opt(&path)
        .map_err(RemoteError::Io)?
        .unwrap_or_default();
    let doc = JsonDoc::parse(&bytes).map_err(|source| RemoteError::Edit {
        path: path.clone(),
        source,
    })?;
    Ok((path, doc))
}

/// Adds `remote` to the user's config file (creating it), refusing a name already there.
pub fn add(env: &Env, remote: &Remote) -> Result<(), RemoteError> {
    if !valid_name(&remote.name) {
        return Err(RemoteError::BadName {
            name: remote.name.clone(),
        });
    }
    if let Some(problem) = dest_problem(&remote.dest) {
        return Err(RemoteError::BadDest {
            dest: remote.dest.clone(),
            problem,
        });
    }
    // Through the loader first: a file it refuses is not edited further.
    if remotes(env)?.iter().any(|r| r.name == remote.name) {
        return Err(RemoteError::Exists(remote.name.clone()));
    }
    let (path, mut doc) = read_doc(env)?;
    let edit = |e| RemoteError::Edit {
        path: path.clone(),
        source: e,
    };
    let key = ["remotes".to_owned()];
    if doc.get(&key).is_none() {
        doc.insert_member(&[], "remotes", &json!({}))
            .map_err(edit)?;
    }
    let mut entry = json!({"dest": remote.dest});
    if let Some(spex) = &remote.spex {
        entry["spex"] = Value::from(spex.as_str());
    }
    doc.insert_member(&key, &remote.name, &entry)
        .map_err(edit)?;
    crate::fsutil::write_atomic(&path, &doc.to_bytes()).map_err(RemoteError::Io)?;
    Ok(())
}

/// Removes the remote named `name` from the user's config file.
pub fn remove(env: &Env, name: &str) -> Result<Remote, RemoteError> {
    let remote = find(env, name)?;
    let (path, mut doc) = read_doc(env)?;
    doc.remove_member(&["remotes".to_owned()], name)
        .map_err(|source| RemoteError::Edit {
            path: path.clone(),
            source,
        })?;
    crate::fsutil::write_atomic(&path, &doc.to_bytes()).map_err(RemoteError::Io)?;
    Ok(remote)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_in(dir: &std::path::Path) -> Env {
        Env {
            xdg_config_home: Some(dir.to_owned()),
            home: Some(dir.to_owned()),
            ..Env::default()
        }
    }

    #[test]
    fn add_and_remove_keep_every_other_byte_of_the_users_file() {
        let dir = tempfile::tempdir().unwrap();
        let env = env_in(dir.path());
        let original = "// mine\n{\n  \"record\": true, // keep\n}\n";
        crate::fsutil::write_atomic(&env.user_config_file(), original.as_bytes()).unwrap();
        let box_ = Remote {
            name: "devbox".into(),
            dest: "me@devbox".into(),
            spex: Some("~/bin/spex".into()),
        };
        add(&env, &box_).unwrap();
        let text = fs_err::read_to_string(env.user_config_file()).unwrap();
        assert!(text.starts_with("// mine\n"), "{text}");
        assert!(text.contains("// keep"), "{text}");
        assert_eq!(remotes(&env).unwrap(), vec![box_.clone()]);
        assert!(matches!(add(&env, &box_), Err(RemoteError::Exists(_))));
        remove(&env, "devbox").unwrap();
        assert_eq!(remotes(&env).unwrap(), vec![]);
        assert!(matches!(
            find(&env, "devbox"),
            Err(RemoteError::Unknown { .. })
        ));
    }

    #[test]
    fn a_destination_ssh_would_read_as_an_option_is_never_written() {
        let dir = tempfile::tempdir().unwrap();
        let env = env_in(dir.path());
        let r = Remote {
            name: "x".into(),
            dest: "-oProxyCommand=touch /tmp/pwned".into(),
            spex: None,
        };
        assert!(matches!(add(&env, &r), Err(RemoteError::BadDest { .. })));
        assert!(!env.user_config_file().exists());
    }
}
