//! `spex server`: the project's harness servers (for harnesses whose sessions are threads of
//! one server per project): what each runs and holds, and stopping it.

use super::outcome::Outcome;
use super::output;
use crate::env::Env;
use crate::runtime::harness_server::{self, ServerStatus};

/// The project's server: whether it runs, its pid, uptime and the threads it holds; or stop it.
///
/// spex starts one server per project for a harness whose sessions are threads of a server (the
/// first `spex launch` starts it, under a `spex serve` supervisor). `spex server` says whether it
/// runs and answers, its pid, uptime, supervisor, socket and log, and the threads it holds with the
/// session (handle, status) each belongs to. `spex server stop` stops it (SIGTERM to its process
/// group, SIGKILL after 5 s) and every session on it reads `exited` (`server gone`).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Option<Action>,
    /// Print the result as JSON.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, clap::Subcommand)]
pub enum Action {
    /// What the project's server runs and holds (the default).
    Status,
    /// Stop the project's server; the sessions on it exit.
    Stop,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let tree = super::args::current_tree()?;
    let store = crate::store::ProjectStore::new(&env.spex_home(), &tree.main);
    let servers = harness_server::of_project(env, &store, &tree.main)?;
    let action = args.action.unwrap_or(Action::Status);
    let mut report = Vec::new();
    let mut text = String::new();
    for s in &servers {
        match action {
            Action::Status => {
                let st = s.status();
                text.push_str(&describe(&st));
                report.push(serde_json::to_value(&st)?);
            }
            Action::Stop => {
                let before = s.status();
                let stopped = s.shutdown();
                let exited: Vec<String> = before
                    .threads
                    .iter()
                    .filter(|t| t.status.as_deref().is_some_and(|st| st != "exited"))
                    .filter_map(|t| t.handle.clone().or_else(|| t.session.clone()))
                    .collect();
                text.push_str(&format!(
                    "the project's {} server: {}\n",
                    before.harness,
                    match (stopped, before.pid) {
                        (true, Some(pid)) => format!(
                            "stopped (pid {pid}){}",
                            if exited.is_empty() {
                                String::new()
                            } else {
                                format!("; sessions exited: {}", exited.join(", "))
                            }
                        ),
                        _ => "was not running".to_owned(),
                    }
                ));
                report.push(serde_json::json!({
                    "harness": before.harness,
                    "stopped": stopped,
                    "pid": before.pid,
                    "sessions_exited": exited,
                }));
            }
        }
    }
    if args.json {
        output::json(&report);
    } else if servers.is_empty() {
        output::print("no harness of this spex runs its sessions on a server\n");
    } else {
        output::print(&text);
    }
    Ok(Outcome::Ok)
}

/// A status for people: one line, then the socket, the log and the sessions it holds.
fn describe(st: &ServerStatus) -> String {
    let head = format!("the project's {} server: ", st.harness);
    let Some(pid) = st.pid.filter(|_| st.running) else {
        return format!("{head}not running (the first `spex launch` starts it)\n");
    };
    let mut out = format!("{head}running, pid {pid}");
    if let Some(up) = st.uptime_s {
        out.push_str(&format!(", up {}", harness_server::duration_words(up)));
    }
    if !st.answers {
        out.push_str(", NOT answering on its socket");
    }
    match st.supervisor_pid {
        Some(sup) if st.supervised => out.push_str(&format!(", supervised by pid {sup}")),
        _ => out.push_str(", its supervisor is gone (`spex server stop` stops it)"),
    }
    out.push('\n');
    out.push_str(&format!("  socket  {}\n", st.socket.display()));
    out.push_str(&format!("  log     {}\n", st.log.display()));
    if st.threads.is_empty() {
        out.push_str("  holds no thread\n");
        return out;
    }
    out.push_str(&format!("  holds {} thread(s):\n", st.threads.len()));
    for t in &st.threads {
        // People read handles; a thread no record names has only its own id to show.
        out.push_str(&match (&t.handle, &t.status) {
            (Some(h), Some(s)) => format!("    session {h} ({s})\n"),
            _ => format!("    thread {} (no session record)\n", t.thread),
        });
    }
    out
}
