//! `spex board`: start, find, or end the live board (see `crate::board`).

use std::io::BufRead;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::outcome::Outcome;
use super::output;
use crate::board::{self, BoardError, gate::PublicUrl, state};
use crate::env::Env;

/// Serve the live board: every session of every project in a browser, with the CLI's actions.
///
/// Prints the address to open, with its token, as the first line of stdout, then serves until
/// stopped (Ctrl-C, or `spex board --stop`). It listens on 127.0.0.1 unless `--listen` says
/// otherwise (then it warns: reach it from a phone through an SSH tunnel or a private network,
/// never an open port). One board per user: a second `spex board` prints the running one's
/// address. The token is stored 0600 in the spex home; a request without it, from another
/// site, or under another host name is refused. docs/guides/board.md says more.
#[derive(Debug, clap::Args)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "each is one flag of the command line"
)]
pub struct Args {
    /// The address and port to listen on (`127.0.0.1:0`: any free port).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:4750")]
    pub listen: SocketAddr,
    /// The URL a browser reaches the board at (through a tunnel or a proxy): its host is
    /// accepted, and the printed address uses it.
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
    /// Run in the background: print the address once it listens, then exit.
    #[arg(long, conflicts_with_all = ["stop", "status"])]
    pub detach: bool,
    /// End the running board.
    #[arg(long, conflicts_with = "status")]
    pub stop: bool,
    /// Say where the running board listens (without its token).
    #[arg(long)]
    pub status: bool,
    /// One JSON object (`url`, `pid`, `address`, `port`) instead of the address alone.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let paths = state::Paths::new(&env.spex_home());
    if args.stop {
        return stop(args, &paths);
    }
    if args.status {
        return Ok(status(args, &paths));
    }
    let public_url = match &args.public_url {
        Some(u) => Some(PublicUrl::parse(u).ok_or_else(|| BoardError::PublicUrl(u.clone()))?),
        None => None,
    };
    if args.detach {
        return detach(args, &paths);
    }
    if state::take_lock(&paths)
        .map_err(|source| BoardError::Files {
            path: paths.dir.display().to_string(),
            source,
        })?
        .is_none()
    {
        return running_one(args, &paths);
    }
    let opts = board::Options {
        listen: args.listen,
        public_url,
    };
    let bound = board::bind(env, &opts, &paths)?;
    let local = bound.shared.local;
    let s = state::State {
        pid: std::process::id(),
        address: local.ip().to_string(),
        port: local.port(),
        url: board::url_of(local, opts.public_url.as_ref()),
        public_url: opts.public_url.as_ref().map(|p| p.base.clone()),
        started_at: crate::store::now_rfc3339(),
    };
    state::write_state(&paths, &s).map_err(|source| BoardError::Files {
        path: paths.dir.display().to_string(),
        source,
    })?;
    if !local.ip().is_loopback() {
        eprintln!(
            "warning: the board listens on {local}, reachable from other machines (still only with its token); reach it through an SSH tunnel or a private network, never an open port"
        );
    }
    print_url(args.json, &s, &bound.shared.token);
    super::notifier::beside(env, "spex board", s.public_url.as_deref());
    let served = board::serve(bound);
    let _ = crate::fsutil::remove_file(&paths.state());
    served?;
    Ok(Outcome::Ok)
}

fn print_url(json: bool, s: &state::State, token: &str) {
    let url = s.url_with(token);
    if json {
        output::print(&format!(
            "{}\n",
            serde_json::json!({"url": url, "pid": s.pid, "address": s.address, "port": s.port})
        ));
    } else {
        output::print(&format!("{url}\n"));
    }
}

/// The running board's state and token, once it has written them (it may be starting).
fn wait_running(paths: &state::Paths, within: Duration) -> Option<(state::State, String)> {
    let until = Instant::now() + within;
    loop {
        if let (Some(s), Some(t)) = (state::read_state(paths), state::read_token(paths))
            && state::running(paths)
        {
            return Some((s, t));
        }
        if Instant::now() >= until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Another board runs: its address is printed, as if this one had started.
fn running_one(args: &Args, paths: &state::Paths) -> anyhow::Result<Outcome> {
    let (s, token) = wait_running(paths, Duration::from_secs(5)).ok_or_else(|| {
        BoardError::NotStarted("another board holds the lock but says nowhere it listens".into())
    })?;
    print_url(args.json, &s, &token);
    Ok(Outcome::Ok)
}

fn status(args: &Args, paths: &state::Paths) -> Outcome {
    let found = state::read_state(paths).filter(|_| state::running(paths));
    match (&found, args.json) {
        (Some(s), true) => output::print(&format!(
            "{}\n",
            serde_json::json!({"running": true, "url": s.url, "pid": s.pid, "address": s.address, "port": s.port, "started_at": s.started_at})
        )),
        (Some(s), false) => output::print(&format!(
            "the board listens on {}:{} ({}; pid {}, since {})\n",
            s.address, s.port, s.url, s.pid, s.started_at
        )),
        (None, true) => output::print("{\"running\":false}\n"),
        (None, false) => output::print("no board runs\n"),
    }
    if found.is_some() {
        Outcome::Ok
    } else {
        Outcome::Differs
    }
}

fn stop(args: &Args, paths: &state::Paths) -> anyhow::Result<Outcome> {
    let Some(s) = state::read_state(paths).filter(|_| state::running(paths)) else {
        if args.json {
            output::print("{\"stopped\":false,\"running\":false}\n");
        } else {
            output::print("no board runs\n");
        }
        return Ok(Outcome::Ok);
    };
    let pid = rustix::process::Pid::from_raw(i32::try_from(s.pid).unwrap_or(0))
        .ok_or(BoardError::NotRunning)?;
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    let until = Instant::now() + Duration::from_secs(10);
    while state::running(paths) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let stopped = !state::running(paths);
    if args.json {
        output::print(&format!(
            "{}\n",
            serde_json::json!({"stopped": stopped, "pid": s.pid})
        ));
    } else if stopped {
        output::print(&format!("stopped the board (pid {})\n", s.pid));
    }
    anyhow::ensure!(
        stopped,
        BoardError::NotStarted(format!("the board (pid {}) did not end within 10 s", s.pid))
    );
    Ok(Outcome::Ok)
}

/// Starts the board as a process of its own (this command without `--detach`), waits until
/// it listens, and prints its first line.
fn detach(args: &Args, paths: &state::Paths) -> anyhow::Result<Outcome> {
    if state::running(paths) {
        return running_one(args, paths);
    }
    let files = |source| BoardError::Files {
        path: paths.dir.display().to_string(),
        source,
    };
    crate::fsutil::create_private_dir_all(&paths.dir).map_err(files)?;
    let log = fs_err::File::create(paths.log()).map_err(files)?;
    crate::fsutil::make_private(&paths.log()).map_err(files)?;
    let mut cmd = std::process::Command::new(std::env::current_exe()?);
    cmd.arg("board")
        .arg("--listen")
        .arg(args.listen.to_string());
    if let Some(u) = &args.public_url {
        cmd.arg("--public-url").arg(u);
    }
    if args.json {
        cmd.arg("--json");
    }
    let mut child = std::os::unix::process::CommandExt::process_group(&mut cmd, 0)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::from(log.into_file()))
        .spawn()?;
    let out = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufReader::new(out).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(Duration::from_secs(20)).unwrap_or_default();
    if line.trim().is_empty() {
        let log = fs_err::read_to_string(paths.log()).unwrap_or_default();
        return Err(BoardError::NotStarted(log.trim().to_owned()).into());
    }
    output::print(&line);
    Ok(Outcome::Ok)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Board {
        #[command(flatten)]
        args: super::Args,
    }

    #[test]
    fn the_default_address_is_loopback() {
        let b = Board::try_parse_from(["board"]).unwrap();
        assert!(b.args.listen.ip().is_loopback());
        assert!(!b.args.detach && !b.args.stop && !b.args.status);
    }
}
