//! Commands on another machine (a session named `host:handle`, `launch --remote`, `usage
//! --remote`): the remote spex runs the same command there, over that remote's SSH connection,
//! and its output, exit code and `--json` come back as it gave them (never parsed here). Decides
//! only which commands go and how their arguments read there.

use std::ffi::OsString;

use super::args::{RemoteSession, remote_session};
use super::outcome::Outcome;
use crate::env::Env;
use crate::hint::Hinted;
use crate::remote::{self, Remote, forward};

/// What a command sends to another machine.
pub struct Forward<'a> {
    /// The session arguments as given (`host:handle` ...).
    pub ids: Vec<&'a str>,
    /// How many leading positional arguments name sessions (the rest are texts).
    pub sessions: usize,
    /// `--remote NAME` (a command that names no session).
    pub remote: Option<&'a str>,
    /// The remote program gets a terminal (`ssh -t`).
    pub tty: bool,
    /// `launch --remote`: it runs in a checkout there (`--repo`, else this one's path).
    pub launch: bool,
    /// `launch --repo PATH`.
    pub repo: Option<&'a str>,
}

impl<'a> Forward<'a> {
    pub fn sessions(ids: impl IntoIterator<Item = &'a String>, sessions: usize) -> Self {
        Forward {
            ids: ids.into_iter().map(String::as_str).collect(),
            sessions,
            remote: None,
            tty: false,
            launch: false,
            repo: None,
        }
    }
}

/// Runs the command on the machine it names, when it names another one: `None` for a command
/// that runs here.
/// `cli` is the whole command line's definition.
pub fn run(f: &Forward<'_>, cli: &clap::Command, env: &Env) -> anyhow::Result<Option<Outcome>> {
    let Some((remote, rest)) = target(env, f)? else {
        return Ok(None);
    };
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    let sub = cli
        .find_subcommand(argv.first().and_then(|s| s.to_str()).unwrap_or_default())
        .ok_or_else(|| anyhow::anyhow!("cannot read this command's arguments again"))?
        .clone();
    let mut rest = rest.into_iter();
    let args = rewrite(
        &argv,
        &sub,
        f.sessions,
        &mut || rest.next(),
        &["remote", "repo"],
    );
    let dir = if f.launch {
        Some(remote_dir(env, f.repo)?)
    } else {
        None
    };
    // A terminal's keys, or a prompt read from `-`, go to the remote program.
    let stdin = f.tty || args.iter().any(|a| a == "-");
    let code = forward::run(
        env,
        &remote,
        &args,
        forward::Options {
            dir: dir.as_deref(),
            tty: f.tty,
            stdin,
        },
    )?;
    Ok(Some(Outcome::Relayed(u8::try_from(code).unwrap_or(2))))
}

/// The remote a command names, and its session arguments as that machine names them: `None`
/// when every session is this machine's.
fn target(env: &Env, f: &Forward<'_>) -> anyhow::Result<Option<(Remote, Vec<String>)>> {
    if let Some(name) = f.remote {
        return Ok(Some((remote::find(env, name)?, Vec::new())));
    }
    let parts: Vec<Option<RemoteSession>> = f
        .ids
        .iter()
        .map(|id| remote_session(env, id))
        .collect::<anyhow::Result<_>>()?;
    let Some(Some(first)) = parts.iter().find(|s| s.is_some()) else {
        return Ok(None);
    };
    let host = first.remote.clone();
    if parts
        .iter()
        .any(|s| s.as_ref().is_none_or(|r| r.remote.name != host.name))
    {
        anyhow::bail!(Hinted::new(
            "these sessions are not all on one machine",
            "name the sessions of one machine per command (`spex events devbox:a3 devbox:b1`)"
        ));
    }
    let rest = parts.into_iter().flatten().map(|r| r.id).collect();
    Ok(Some((host, rest)))
}

/// Where `launch --remote` runs there: `--repo`, else this checkout's path, as `~/...` when it
/// is under this machine's home (a dev box often mirrors the layout under another home).
fn remote_dir(env: &Env, repo: Option<&str>) -> anyhow::Result<String> {
    if let Some(repo) = repo {
        return Ok(repo.to_owned());
    }
    let tree = super::args::current_tree().map_err(|e| {
        anyhow::Error::new(Hinted::new(
            "`--remote` needs the checkout to run in on that machine",
            "pass `--repo PATH` (the checkout's path there)",
        ))
        .context(e)
    })?;
    let main = tree.main;
    if let Some(rest) = env.home.as_ref().and_then(|h| main.strip_prefix(h).ok()) {
        return Ok(format!("~/{}", rest.display()));
    }
    Ok(main.display().to_string())
}

/// `argv` (the subcommand and its arguments) as the remote spex reads it: the first `sessions`
/// positional arguments replaced by `next()` (their names there), the options named in `drop`
/// left out with their values; options, texts and everything after `--` as given.
pub(super) fn rewrite(
    argv: &[OsString],
    sub: &clap::Command,
    sessions: usize,
    next: &mut dyn FnMut() -> Option<String>,
    drop: &[&str],
) -> Vec<OsString> {
    let takes_value = |a: &clap::Arg| a.get_action().takes_values();
    let mut out: Vec<OsString> = argv.iter().take(1).cloned().collect();
    let mut positional = 0;
    let mut i = 1;
    while i < argv.len() {
        let word = &argv[i];
        let text = word.to_string_lossy();
        i += 1;
        if text == "--" {
            out.extend(argv[i - 1..].iter().cloned());
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            let (name, inline) = long
                .split_once('=')
                .map_or((long, false), |(n, _)| (n, true));
            let arg = sub.get_arguments().find(|a| a.get_long() == Some(name));
            let value = !inline && arg.is_some_and(takes_value) && i < argv.len();
            if drop.contains(&name) {
                i += usize::from(value);
                continue;
            }
            out.push(word.clone());
            if value {
                out.push(argv[i].clone());
                i += 1;
            }
            continue;
        }
        if text.len() > 1 && text.starts_with('-') {
            // A cluster of short flags: the first that takes a value takes the rest of the
            // word, or the next word when it ends the cluster.
            out.push(word.clone());
            for (k, c) in text.char_indices().skip(1) {
                let arg = sub.get_arguments().find(|a| a.get_short() == Some(c));
                if arg.is_some_and(takes_value) {
                    if k + c.len_utf8() == text.len() && i < argv.len() {
                        out.push(argv[i].clone());
                        i += 1;
                    }
                    break;
                }
            }
            continue;
        }
        if positional < sessions {
            positional += 1;
            out.push(next().map_or_else(|| word.clone(), OsString::from));
        } else {
            out.push(word.clone());
        }
    }
    out
}
