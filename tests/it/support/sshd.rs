//! "The other machine" for the remote tests: a real OpenSSH server (`sshd -D`) on a free
//! loopback port, with a host key and a client key made for the test, whose key logs in to a
//! separate spex world (`World`: its own `HOME`, `SPEX_HOME`, XDG config) through the key's
//! `environment=` options (`PermitUserEnvironment yes`). The client side is an `ssh` config
//! file handed to the local spex through `SPEX_SSH_CONFIG` (ssh reads `~/.ssh/config` from the
//! password database's home, never `$HOME`). Facts: `docs/harnesses/facts/remote-and-notify.md`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::world::{World, spex_bin, write};

pub struct Sshd {
    /// The test's folder: keys, config, `known_hosts`, the server's pid file and log.
    pub dir: tempfile::TempDir,
    pub port: u16,
    /// The `ssh` config file the local spex is given (`SPEX_SSH_CONFIG`).
    pub client_config: PathBuf,
    child: Option<Child>,
}

fn keygen(path: &Path) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "spex-test", "-f"])
        .arg(path)
        .output()
        .expect("ssh-keygen runs (scripts/install-test-tools.sh installs openssh)");
    assert!(out.status.success(), "ssh-keygen: {out:?}");
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn user() -> String {
    let out = Command::new("id").arg("-un").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

impl Sshd {
    /// An sshd whose test key logs in to `other`'s world, with the spex under test on its
    /// `PATH`.
    pub fn start(other: &World) -> Sshd {
        let dir = tempfile::Builder::new()
            .prefix("sshd")
            .tempdir_in("/tmp")
            .unwrap();
        let d = std::fs::canonicalize(dir.path()).unwrap();
        // sshd's privilege-separation folder; Debian's service would make it.
        std::fs::create_dir_all("/run/sshd").unwrap();
        keygen(&d.join("host_key"));
        keygen(&d.join("client_key"));
        let spex_dir = spex_bin().parent().unwrap().to_owned();
        let path = format!(
            "{}:{}",
            spex_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let env_opts = [
            ("HOME", other.home.display().to_string()),
            ("SPEX_HOME", other.spex_home.display().to_string()),
            ("XDG_CONFIG_HOME", other.xdg_config.display().to_string()),
            ("CODEX_HOME", other.codex_home.display().to_string()),
            ("PATH", path),
        ]
        .iter()
        .map(|(k, v)| format!("environment=\"{k}={v}\""))
        .collect::<Vec<_>>()
        .join(",");
        let pubkey = std::fs::read_to_string(d.join("client_key.pub")).unwrap();
        write(&d.join("authorized_keys"), format!("{env_opts} {pubkey}"));
        let port = free_port();
        write(
            &d.join("sshd_config"),
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n\
                 AuthorizedKeysFile {d}/authorized_keys\nPidFile {d}/sshd.pid\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
                 StrictModes no\nPermitRootLogin prohibit-password\nPermitUserEnvironment yes\n\
                 LogLevel VERBOSE\n",
                d = d.display()
            ),
        );
        let client_config = d.join("ssh_config");
        write(
            &client_config,
            format!(
                "Host other\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n\n\
                 Host *\n  IdentityFile {d}/client_key\n  IdentitiesOnly yes\n\
                 UserKnownHostsFile {d}/known_hosts\n  StrictHostKeyChecking accept-new\n\
                 LogLevel ERROR\n",
                user = user(),
                d = d.display()
            ),
        );
        let log = std::fs::File::create(d.join("sshd.log")).unwrap();
        let child = Command::new("/usr/sbin/sshd")
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("sshd starts (scripts/install-test-tools.sh installs openssh-server)");
        let mut s = Sshd {
            dir,
            port,
            client_config,
            child: Some(child),
        };
        s.wait_listening();
        s
    }

    fn wait_listening(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("sshd exited ({status}):\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "sshd never listened:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's log (`-e`: what it would send to syslog).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }

    /// The destination as an alias of the client config (`Host other`).
    pub const ALIAS: &'static str = "other";

    /// The destination as an `ssh://` URI.
    pub fn uri(&self) -> String {
        format!("ssh://{}@127.0.0.1:{}", user(), self.port)
    }

    /// `spex` in `local`'s world, with this server's client config.
    pub fn cmd(&self, local: &World, args: &[&str]) -> Command {
        let mut c = local.cmd(&local.repo, args);
        c.env("SPEX_SSH_CONFIG", &self.client_config);
        c
    }

    pub fn spex(&self, local: &World, args: &[&str]) -> Output {
        self.cmd(local, args).output().expect("spex runs")
    }

    /// Runs spex and asserts exit code 0; its stdout.
    pub fn ok(&self, local: &World, args: &[&str]) -> String {
        let out = self.spex(local, args);
        assert!(
            out.status.success(),
            "spex {args:?} failed ({}):\n{}{}\nsshd log:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The listener's pid.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The per-connection sshd processes: the listener's descendants (sshd rewrites their
    /// titles, so they are found by parent).
    pub fn connection_pids(&self) -> Vec<i32> {
        let Some(listener) = self.pid() else {
            return Vec::new();
        };
        let mut parents: Vec<(i32, i32)> = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let status = std::fs::read_to_string(e.path().join("status")).unwrap_or_default();
            if let Some(ppid) = status
                .lines()
                .find_map(|l| l.strip_prefix("PPid:"))
                .and_then(|v| v.trim().parse::<i32>().ok())
            {
                parents.push((pid, ppid));
            }
        }
        let mut found = vec![i32::try_from(listener).unwrap()];
        let mut i = 0;
        while i < found.len() {
            let parent = found[i];
            found.extend(parents.iter().filter(|p| p.1 == parent).map(|p| p.0));
            i += 1;
        }
        found.remove(0);
        found
    }

    fn signal(&self, signal: &str, with_listener: bool) {
        let mut pids = self.connection_pids();
        if with_listener && let Some(pid) = self.pid() {
            pids.push(i32::try_from(pid).unwrap());
        }
        for pid in pids {
            let _ = Command::new("kill")
                .args([signal, &pid.to_string()])
                .status();
        }
    }

    /// A hung machine: the listener and every connection stopped (SIGSTOP), their sockets
    /// open, nothing answering.
    pub fn hang(&self) {
        self.signal("-STOP", true);
    }

    /// Undoes [`Sshd::hang`].
    pub fn resume(&self) {
        self.signal("-CONT", true);
    }

    /// Cuts every open connection (the listener stays up).
    pub fn kill_connections(&self) {
        for pid in self.connection_pids() {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }

    /// Stops the listener and its connections: the host refuses connections from now on.
    pub fn stop(&mut self) {
        self.resume();
        self.kill_connections();
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.stop();
    }
}
