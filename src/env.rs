//! The process environment, read once. Everything downstream takes values from `Env`, so tests
//! inject their own and no module reads `std::env` ad hoc. Env knows the system's variables and
//! spex's own; the variables a harness reads (its state folder, its session id) are named by
//! the caller, which asks the adapters, and read here with the rest: env knows no harness.

use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Debug, Clone, Default)]
pub struct Env {
    pub home: Option<PathBuf>,
    pub xdg_config_home: Option<PathBuf>,
    pub xdg_state_home: Option<PathBuf>,
    /// `XDG_RUNTIME_DIR`: where the per-session sockets go when set.
    pub xdg_runtime_dir: Option<PathBuf>,
    /// `DBUS_SESSION_BUS_ADDRESS`: the user's D-Bus session bus (desktop notifications).
    pub dbus_session_bus_address: Option<String>,
    pub spex_home: Option<PathBuf>,
    /// `PWD`: the working folder as the user's shell spells it, which may go through symlinks
    /// (the process's own working folder is always the resolved path).
    pub pwd: Option<PathBuf>,
    pub path: Option<OsString>,
    pub no_color: bool,
    /// `VISUAL` and `EDITOR`: the editor command lines `spex open` falls back on.
    pub visual: Option<String>,
    pub editor: Option<String>,
    pub spex_session_id: Option<String>,
    /// `SPEX_TRACE_DISPATCH`: log every hook invocation to the project's `dispatch.log`.
    pub trace_dispatch: bool,
    /// `SPEX_BOOT_ID_FILE`, FOR TESTS ONLY: the file read as the kernel's boot id instead of
    /// `/proc/sys/kernel/random/boot_id`, so a test can make spex believe the machine
    /// restarted (see [`Env::boot_id_file`]).
    pub boot_id_file: Option<PathBuf>,
    /// The `ssh` config file a caller injects in place of `SPEX_SSH_CONFIG` (see
    /// [`Env::ssh_config`]); `from_process` leaves it unset.
    pub ssh_config: Option<PathBuf>,
    /// The variables the caller named to `from_process`, each with its value when set.
    pub vars: Vec<(&'static str, Option<OsString>)>,
}

fn path_var(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

impl Env {
    /// Reads the environment, including the variables in `named` (those the adapters read).
    pub fn from_process(named: impl IntoIterator<Item = &'static str>) -> Self {
        Env {
            home: path_var("HOME"),
            xdg_config_home: path_var("XDG_CONFIG_HOME"),
            xdg_state_home: path_var("XDG_STATE_HOME"),
            xdg_runtime_dir: path_var("XDG_RUNTIME_DIR"),
            dbus_session_bus_address: std::env::var("DBUS_SESSION_BUS_ADDRESS")
                .ok()
                .filter(|v| !v.is_empty()),
            spex_home: path_var("SPEX_HOME"),
            pwd: path_var("PWD"),
            path: std::env::var_os("PATH"),
            no_color: std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
            visual: std::env::var("VISUAL")
                .ok()
                .filter(|v| !v.trim().is_empty()),
            editor: std::env::var("EDITOR")
                .ok()
                .filter(|v| !v.trim().is_empty()),
            spex_session_id: std::env::var("SPEX_SESSION_ID")
                .ok()
                .filter(|v| !v.is_empty()),
            vars: named
                .into_iter()
                .map(|name| (name, std::env::var_os(name)))
                .collect(),
            trace_dispatch: std::env::var_os("SPEX_TRACE_DISPATCH")
                .is_some_and(|v| !v.is_empty() && v != "0"),
            boot_id_file: path_var("SPEX_BOOT_ID_FILE"),
            // Read when asked (`ssh_config`): the hook path builds an `Env` and never asks.
            ssh_config: None,
        }
    }

    /// Values of this process's variables that look like secrets (`*API_KEY*`, `*TOKEN*`,
    /// `*SECRET*`, `*PASSWORD*`), by name, for scrubbing recordings.
    pub fn secret_values() -> Vec<(String, String)> {
        std::env::vars()
            .filter(|(k, v)| {
                let k = k.to_ascii_uppercase();
                v.len() >= 8
                    && ["API_KEY", "TOKEN", "SECRET", "PASSWORD"]
                        .iter()
                        .any(|s| k.contains(s))
            })
            .collect()
    }

    /// A variable a configuration names to hold a secret (`notify.webhook.headers`'s
    /// `{"env": NAME}`): read when it is used, never stored.
    pub fn secret(name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }

    /// What a recording says of this process's environment: the variables of
    /// [`RECORDED_VARS`] that are set, by name, each with its value where that is one of
    /// [`RECORDED_VALUES`] (a terminal or locale setting, never a path or a secret), else
    /// `None` (set, value not recorded). Every other variable goes unnamed.
    pub fn recorded_environment() -> Vec<(String, Option<String>)> {
        RECORDED_VARS
            .iter()
            .filter_map(|&name| {
                let value = std::env::var_os(name)?;
                let safe = RECORDED_VALUES.contains(&name) || name.starts_with("LC_");
                let value = safe.then(|| value.to_str().map(str::to_owned)).flatten();
                Some((name.to_owned(), value))
            })
            .collect()
    }

    fn named(&self, name: &str) -> Option<&OsString> {
        let found = self.vars.iter().find(|(k, _)| *k == name);
        debug_assert!(
            found.is_some(),
            "`{name}` was not named to `Env::from_process` (add it to the adapter's `env_vars`)"
        );
        found?.1.as_ref()
    }

    /// A variable named to `from_process`, as text; `None` when unset or not UTF-8.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.named(name)?.to_str()
    }

    /// A variable named to `from_process`, as a path; `None` when unset or empty.
    pub fn path_var(&self, name: &str) -> Option<PathBuf> {
        self.named(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    }

    /// `SPEX_SSH_CONFIG`, FOR TESTS ONLY: the file `ssh` reads as its configuration (`ssh -F`)
    /// instead of `~/.ssh/config`, which `ssh` finds through the password database, never
    /// `$HOME`, so a test's throwaway home cannot hold it
    /// (`docs/harnesses/facts/remote-and-notify.md`). Read when asked, not by `from_process`.
    pub fn ssh_config(&self) -> Option<PathBuf> {
        self.ssh_config
            .clone()
            .or_else(|| path_var("SPEX_SSH_CONFIG"))
    }

    /// The D-Bus session bus's address: the variable, else the socket systemd's user manager
    /// makes in the runtime folder (where the variable is not passed on, e.g. to a service).
    pub fn dbus_address(&self) -> Option<String> {
        if let Some(a) = &self.dbus_session_bus_address {
            return Some(a.clone());
        }
        let bus = self.xdg_runtime_dir.as_ref()?.join("bus");
        bus.exists().then(|| format!("unix:path={}", bus.display()))
    }

    /// `$HOME`, else `/`.
    pub fn home_or_root(&self) -> PathBuf {
        self.home.clone().unwrap_or_else(|| PathBuf::from("/"))
    }

    /// `$SPEX_HOME`, else `$XDG_STATE_HOME/spex`, else `~/.local/state/spex`.
    pub fn spex_home(&self) -> PathBuf {
        if let Some(p) = &self.spex_home {
            return p.clone();
        }
        match &self.xdg_state_home {
            Some(p) => p.join("spex"),
            None => self.home_or_root().join(".local/state/spex"),
        }
    }

    /// The file naming this boot of the machine: `/proc/sys/kernel/random/boot_id`, or for
    /// tests only `$SPEX_BOOT_ID_FILE` (a test rewrites it to simulate a reboot; nothing else
    /// should set it).
    pub fn boot_id_file(&self) -> PathBuf {
        self.boot_id_file
            .clone()
            .unwrap_or_else(|| PathBuf::from("/proc/sys/kernel/random/boot_id"))
    }

    /// `$XDG_CONFIG_HOME/spex/config.jsonc`, else `~/.config/spex/config.jsonc`.
    pub fn user_config_file(&self) -> PathBuf {
        match &self.xdg_config_home {
            Some(p) => p.join("spex/config.jsonc"),
            None => self.home_or_root().join(".config/spex/config.jsonc"),
        }
    }

    /// Finds an executable on `PATH` (or returns an explicit path as is when it exists).
    pub fn which(&self, program: &str) -> Option<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        let is_exec = |p: &std::path::Path| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        };
        if program.contains('/') {
            let p = PathBuf::from(program);
            return is_exec(&p).then_some(p);
        }
        std::env::split_paths(self.path.as_ref()?)
            .map(|dir| dir.join(program))
            .find(|p| is_exec(p))
    }
}

/// How long `<binary> --version` may take: a program that ignores the flag and starts its
/// interface instead must not hold up `launch` or `doctor`.
const VERSION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs `<binary> --version` and returns its first line; `None` when it cannot start or has
/// not finished within [`VERSION_TIMEOUT`] (it is killed then).
pub fn version_output(binary: &std::path::Path) -> Option<String> {
    use std::io::Read as _;
    let mut child = std::process::Command::new(binary)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let deadline = std::time::Instant::now() + VERSION_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let text = reader.join().ok()?;
    text.lines().next().map(str::to_owned)
}

/// The variables a recording names when set: what changes how a program draws or behaves in a
/// terminal (`Env::recorded_environment`).
pub const RECORDED_VARS: &[&str] = &[
    "TERM",
    "COLORTERM",
    "TERM_PROGRAM",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "NO_COLOR",
    "FORCE_COLOR",
    "CLICOLOR",
    "CI",
    "COLUMNS",
    "LINES",
    "SHELL",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "HOME",
    "PATH",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
];

/// The variables of [`RECORDED_VARS`] whose values a recording keeps (they hold a setting,
/// never a path, a name or a secret).
pub const RECORDED_VALUES: &[&str] = &[
    "TERM",
    "COLORTERM",
    "TERM_PROGRAM",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "NO_COLOR",
    "FORCE_COLOR",
    "CLICOLOR",
    "CI",
    "COLUMNS",
    "LINES",
];
