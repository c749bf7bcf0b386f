//! The watcher as a user service: a systemd user unit spex writes, enables and removes (only a
//! unit file it wrote), or, where systemd's user manager does not run, the command to run at
//! login; and whether a watcher works now.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::env::Env;
use crate::fsutil;
use crate::hint::Hint;

/// The unit's name.
const UNIT: &str = "spex-watch.service";

/// The line that says spex wrote the unit file: spex rewrites and removes only a file with it.
const STAMP: &str = "# Written by `spex service install`; `spex service uninstall` removes it.";

/// Why the service could not be installed or removed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("`{}` exists and spex did not write it", .0.display())]
    NotOurs(PathBuf),
    #[error("`systemctl --user {args}` failed: {message}")]
    Systemctl { args: String, message: String },
}

impl Hint for ServiceError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            ServiceError::NotOurs(path) => format!(
                "spex leaves it as it is; remove or rename `{}` yourself, then `spex service install`",
                path.display()
            ),
            ServiceError::Systemctl { .. } => {
                "`systemctl --user status spex-watch.service` says more; `spex watch` runs the watcher in the foreground".to_owned()
            }
        })
    }
}

/// What a service action did, for a person and as JSON.
pub struct Report {
    pub text: String,
    pub json: serde_json::Value,
}

/// `$XDG_CONFIG_HOME/systemd/user/spex-watch.service` (systemd reads user units there).
fn unit_path(env: &Env) -> PathBuf {
    env.xdg_config_home
        .clone()
        .unwrap_or_else(|| env.home_or_root().join(".config"))
        .join("systemd/user")
        .join(UNIT)
}

/// Whether systemd's user manager runs for this user (its runtime folder is known and
/// `systemctl --user` reaches it).
fn systemd_runs(env: &Env) -> bool {
    env.xdg_runtime_dir.is_some()
        && env.which("systemctl").is_some()
        && systemctl(&["show-environment"]).is_ok()
}

fn systemctl(args: &[&str]) -> Result<String, ServiceError> {
    let failed = |message: String| ServiceError::Systemctl {
        args: args.join(" "),
        message,
    };
    let out = Command::new("systemctl")
        .arg("--user")
        .args(args)
        .output()
        .map_err(|e| failed(e.to_string()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        return Err(failed(if err.is_empty() {
            format!("exit status {}", out.status)
        } else {
            err
        }));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// This binary, by its canonical path (a symlink's target may move; the unit must not).
fn this_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    Ok(fs_err::canonicalize(&exe)?)
}

/// An argument of a unit's `ExecStart=` or `Environment=` as systemd reads it: quoted when it
/// holds a space or a quote, `%` doubled (systemd's specifier character).
fn unit_word(s: &str) -> String {
    let s = s.replace('%', "%%");
    if s.chars()
        .any(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '\\' | ';'))
    {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        s
    }
}

fn unit_text(env: &Env, exe: &Path) -> String {
    let mut text = format!(
        "{STAMP}\n[Unit]\nDescription=spex watcher: keeps the agent sessions' event stream complete\n\n[Service]\nType=simple\nExecStart={} watch\nRestart=on-failure\nRestartSec=2\n",
        unit_word(&exe.display().to_string())
    );
    // The store this spex uses, when it is not the default one the service would find.
    if let Some(home) = &env.spex_home {
        text.push_str(&format!(
            "Environment={}\n",
            unit_word(&format!("SPEX_HOME={}", home.display()))
        ));
    }
    text.push_str("\n[Install]\nWantedBy=default.target\n");
    text
}

/// Whether the unit file at `path` is spex's (`None`: there is none).
fn ours(path: &Path) -> anyhow::Result<Option<bool>> {
    Ok(fsutil::read_opt(path)?.map(|b| String::from_utf8_lossy(&b).contains(STAMP)))
}

/// Writes, enables and starts the unit (or says what to run at login).
pub fn install(env: &Env) -> anyhow::Result<Report> {
    let (unit, systemd) = (&unit_path(env), systemd_runs(env));
    let exe = this_binary()?;
    if !systemd {
        let command = format!("{} watch", unit_word(&exe.display().to_string()));
        let log = env.spex_home().join("watch.log");
        let text = format!(
            "systemd's user manager does not run here: nothing installed.\nRun the watcher at login yourself, e.g. add this line to `~/.profile`:\n\n  (nohup {command} >>{} 2>&1 &)\n\nA second watcher waits in standby, so starting it at every login is safe.\n",
            unit_word(&log.display().to_string())
        );
        return Ok(Report {
            text,
            json: serde_json::json!({
                "installed": false, "systemd": false, "command": command,
                "log": log,
            }),
        });
    }
    if ours(unit)? == Some(false) {
        return Err(ServiceError::NotOurs(unit.to_owned()).into());
    }
    if let Some(dir) = unit.parent() {
        fs_err::create_dir_all(dir)?;
    }
    let wrote = fsutil::write_atomic(unit, unit_text(env, &exe).as_bytes())?;
    systemctl(&["daemon-reload"])?;
    systemctl(&["enable", "--now", UNIT])?;
    if wrote {
        // A unit rewritten (a new binary path) restarts on it.
        let _ = systemctl(&["try-restart", UNIT]);
    }
    Ok(Report {
        text: format!(
            "installed `{}` and started it (`systemctl --user status {UNIT}`)\n",
            unit.display()
        ),
        json: serde_json::json!({"installed": true, "systemd": true, "unit": unit}),
    })
}

/// Stops, disables and removes the unit spex wrote.
pub fn uninstall(env: &Env) -> anyhow::Result<Report> {
    let (unit, systemd) = (&unit_path(env), systemd_runs(env));
    match ours(unit)? {
        None => {
            return Ok(Report {
                text: format!("not installed (no `{}`)\n", unit.display()),
                json: serde_json::json!({"removed": false, "unit": unit}),
            });
        }
        Some(false) => return Err(ServiceError::NotOurs(unit.to_owned()).into()),
        Some(true) => {}
    }
    if systemd {
        systemctl(&["disable", "--now", UNIT])?;
    }
    fs_err::remove_file(unit)?;
    if systemd {
        systemctl(&["daemon-reload"])?;
    }
    Ok(Report {
        text: format!("removed `{}`\n", unit.display()),
        json: serde_json::json!({"removed": true, "unit": unit}),
    })
}

/// Whether a watcher works (its pid) and whether the unit is installed.
pub fn status(env: &Env) -> anyhow::Result<Report> {
    let (unit, systemd) = (&unit_path(env), systemd_runs(env));
    let holder = super::holder(env)?;
    let installed = ours(unit)?;
    let active = if systemd && installed.is_some() {
        // `is-active` exits non-zero for any state but `active`; its word is what counts.
        Command::new("systemctl")
            .args(["--user", "is-active", UNIT])
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .filter(|word| !word.is_empty())
    } else {
        None
    };
    let mut text = match holder {
        super::Holder::Held(Some(pid)) => format!("watcher: running (pid {pid})\n"),
        super::Holder::Held(None) => "watcher: running (pid not known yet)\n".to_owned(),
        super::Holder::Free => {
            "watcher: not running (`spex watch` or `spex service install` starts one)\n".to_owned()
        }
    };
    text.push_str(&match installed {
        Some(true) => format!(
            "service: installed (`{}`){}\n",
            unit.display(),
            active.as_deref().map(|a| format!(", {a}")).unwrap_or_default()
        ),
        Some(false) => format!(
            "service: `{}` exists but spex did not write it\n",
            unit.display()
        ),
        None if systemd => "service: not installed (`spex service install`)\n".to_owned(),
        None => "service: not installed; systemd's user manager does not run here (`spex service install` prints the command to run at login)\n".to_owned(),
    });
    Ok(Report {
        text,
        json: serde_json::json!({
            "running": holder != super::Holder::Free,
            "pid": match holder {
                super::Holder::Held(pid) => pid,
                super::Holder::Free => None,
            },
            "unit": unit,
            "installed": installed == Some(true),
            "unit_not_ours": installed == Some(false),
            "systemd": systemd,
            "active": active,
        }),
    })
}
