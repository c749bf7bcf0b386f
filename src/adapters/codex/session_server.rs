//! Codex's session-server facet: sessions as threads of one `codex app-server` per project
//! (docs/harnesses/facts/codex.md §5), the runtime's server protocol spoken through the one JSON-RPC client in
//! `rpc`.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::client::{client, error};
use super::rpc::{self, AppServer, AppServerConfig, Client, RpcError};
use crate::seam::answer::{Confirmed, Response};
use crate::seam::session_server::{
    DeliverMode, Delivered, ServerCtx, ServerError, ServerErrorKind, ServerEvent, SessionServer,
    TurnEnd,
};
use crate::store::session::Attention;

pub struct CodexServer;

/// `-32600` answers that mean the turn named is no longer the running one.
fn lost_race(e: &RpcError) -> bool {
    e.server_message()
        .is_some_and(|m| m.contains("no active turn") || m.contains("expected active turn id"))
}

/// Subscribes `c` to `thread`, loading it when the server does not hold it (an archived thread
/// is unarchived first: `spex stop` archives).
fn join(c: &mut Client, thread: &str) -> Result<(), RpcError> {
    match c.thread_resume(thread) {
        Err(e)
            if e.server_message()
                .is_some_and(|m| m.contains("is archived")) =>
        {
            c.thread_unarchive(thread)?;
            c.thread_resume(thread).map(drop)
        }
        other => other.map(drop),
    }
}

fn in_progress(c: &mut Client, thread: &str) -> Result<Option<String>, RpcError> {
    Ok(c.newest_turn(thread)?
        .filter(|(_, status)| status == "inProgress")
        .map(|(id, _)| id))
}

/// Subscribes the observer to `thread` once; a thread with no rollout yet fails quietly and is
/// joined at its next notification.
fn try_join(
    c: &mut Client,
    thread: &str,
    joined: &mut HashSet<String>,
    sink: &mut dyn FnMut(ServerEvent),
) {
    if !joined.contains(thread) && c.thread_resume(thread).is_ok() {
        joined.insert(thread.to_owned());
        sink(ServerEvent::ThreadLoaded {
            thread: thread.to_owned(),
        });
    }
}

impl SessionServer for CodexServer {
    fn start(&self, ctx: &ServerCtx, timeout: Duration) -> Result<u32, ServerError> {
        let mut config = AppServerConfig::new(
            ctx.binary,
            ctx.socket,
            super::home::codex_home(ctx.env),
            ctx.log,
        );
        config.cwd = Some(ctx.main.to_owned());
        config.startup_timeout = timeout;
        let server = AppServer::spawn(&config)
            .map_err(|e| ServerError::new(ServerErrorKind::Start, crate::hint::spelled(&e)))?;
        Ok(server.detach())
    }

    fn answers(&self, ctx: &ServerCtx, timeout: Duration) -> bool {
        rpc::probe(ctx.socket, timeout).is_ok()
    }

    fn start_thread(&self, ctx: &ServerCtx, cwd: &Path, name: &str) -> Result<String, ServerError> {
        let mut c = client(ctx)?;
        let thread = c.thread_start(cwd).map_err(|e| error(&e))?.thread_id;
        // A name writes the thread's rollout: without it no other client (the observer, the
        // TUI) can join a thread that has no turn yet.
        c.thread_name_set(&thread, name).map_err(|e| error(&e))?;
        c.close();
        Ok(thread)
    }

    fn loaded(&self, ctx: &ServerCtx, thread: &str) -> Result<bool, ServerError> {
        let mut c = client(ctx)?;
        let ids = c.thread_loaded_list().map_err(|e| error(&e))?;
        c.close();
        Ok(ids.iter().any(|t| t == thread))
    }

    fn resume_thread(&self, ctx: &ServerCtx, thread: &str) -> Result<(), ServerError> {
        let mut c = client(ctx)?;
        join(&mut c, thread).map_err(|e| error(&e))?;
        c.close();
        Ok(())
    }

    fn deliver(&self, ctx: &ServerCtx, thread: &str, text: &str) -> Result<Delivered, ServerError> {
        let mut c = client(ctx)?;
        let loaded = c.thread_loaded_list().map_err(|e| error(&e))?;
        if !loaded.iter().any(|t| t == thread) {
            join(&mut c, thread).map_err(|e| error(&e))?;
        }
        // A steer that loses the race to the turn's end (or to a newer turn) looks again once.
        for _ in 0..2 {
            let Some(turn) = in_progress(&mut c, thread).map_err(|e| error(&e))? else {
                break;
            };
            match c.turn_steer(thread, &turn, text) {
                Ok(turn_id) => {
                    c.close();
                    return Ok(Delivered {
                        mode: DeliverMode::Steer,
                        turn_id,
                    });
                }
                Err(e) if lost_race(&e) => {}
                Err(e) => return Err(error(&e)),
            }
        }
        let started = c.turn_start(thread, text).map_err(|e| error(&e))?;
        c.close();
        Ok(Delivered {
            mode: DeliverMode::Start,
            turn_id: started.turn_id,
        })
    }

    fn interrupt(&self, ctx: &ServerCtx, thread: &str) -> Result<Option<String>, ServerError> {
        let mut c = client(ctx)?;
        // Right after `turn/start` the turn is listed but not yet interruptible ("no active turn
        // to interrupt" until it has started): try again for a moment.
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            let Some(turn) = in_progress(&mut c, thread).map_err(|e| error(&e))? else {
                c.close();
                return Ok(None);
            };
            match c.turn_interrupt(thread, &turn) {
                Ok(()) => {
                    c.close();
                    return Ok(Some(turn));
                }
                Err(e) if lost_race(&e) && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(error(&e)),
            }
        }
    }

    fn close_thread(&self, ctx: &ServerCtx, thread: &str) -> Result<(), ServerError> {
        let mut c = client(ctx)?;
        if let Some(turn) = in_progress(&mut c, thread).map_err(|e| error(&e))? {
            let _ = c.turn_interrupt(thread, &turn);
        }
        // Archiving is the one request that makes the server let go of a thread at once
        // (`thread/unsubscribe` leaves it loaded while any client, or an idle timer, holds it).
        c.thread_archive(thread).map_err(|e| error(&e))?;
        c.close();
        Ok(())
    }

    fn threads(&self, ctx: &ServerCtx) -> Result<Vec<String>, ServerError> {
        let mut c = client(ctx)?;
        let ids = c.thread_loaded_list().map_err(|e| error(&e))?;
        c.close();
        Ok(ids)
    }

    fn answer(
        &self,
        ctx: &ServerCtx,
        thread: &str,
        a: &Attention,
        r: &Response,
    ) -> Result<Confirmed, ServerError> {
        super::answer::answer(ctx, thread, a, r)
    }

    fn own_server(
        &self,
        env: &crate::env::Env,
        s: &crate::store::session::Session,
    ) -> Option<std::path::PathBuf> {
        super::answer::daemon_socket(env, s)
    }

    fn tui_argv(&self, ctx: &ServerCtx, thread: &str) -> Vec<String> {
        let mut argv = vec![ctx.binary.to_string_lossy().into_owned()];
        argv.extend(ctx.args.iter().cloned());
        argv.push("--remote".into());
        argv.push(format!("unix://{}", ctx.socket.display()));
        argv.push("resume".into());
        argv.push(thread.to_owned());
        argv
    }

    fn observe(
        &self,
        ctx: &ServerCtx,
        sink: &mut dyn FnMut(ServerEvent),
    ) -> Result<(), ServerError> {
        let mut c = client(ctx)?;
        let mut joined: HashSet<String> = HashSet::new();
        for thread in c.thread_loaded_list().map_err(|e| error(&e))? {
            try_join(&mut c, &thread, &mut joined, sink);
        }
        let mut limits = super::limits::LimitsOwner::default();
        loop {
            let n = match c.next_notification(Duration::from_hours(1)) {
                Ok(n) => n,
                Err(RpcError::Timeout { .. }) => continue,
                Err(_) => return Ok(()),
            };
            let thread = n.params["threadId"].as_str().map(str::to_owned);
            limits.heard(&n.method, thread.as_deref(), &n.params, sink);
            match n.method.as_str() {
                // A new thread has no rollout until it is named or takes a prompt: join on
                // whichever comes first.
                "thread/started" => {
                    if let Some(t) = n.params.pointer("/thread/id").and_then(Value::as_str) {
                        try_join(&mut c, t, &mut joined, sink);
                    }
                }
                "thread/name/updated" | "thread/status/changed"
                    if n.params.pointer("/status/type").and_then(Value::as_str)
                        != Some("notLoaded") =>
                {
                    if let Some(t) = &thread {
                        try_join(&mut c, t, &mut joined, sink);
                    }
                }
                "thread/status/changed" | "thread/closed" | "thread/archived" => {
                    if let Some(t) = thread
                        && joined.remove(&t)
                    {
                        sink(ServerEvent::ThreadClosed { thread: t });
                    }
                }
                "turn/started" => {
                    if let Some(thread) = thread {
                        sink(ServerEvent::TurnStarted { thread });
                    }
                }
                "turn/completed" => {
                    let turn = &n.params["turn"];
                    let end = match turn["status"].as_str() {
                        Some("completed") => TurnEnd::Completed,
                        Some("interrupted") => TurnEnd::Interrupted,
                        Some("failed") => TurnEnd::Failed(super::evidence::turn_failure(turn)),
                        _ => continue,
                    };
                    if let (Some(thread), Some(turn)) = (thread, turn["id"].as_str()) {
                        sink(ServerEvent::TurnEnded {
                            thread,
                            turn: turn.to_owned(),
                            end,
                        });
                    }
                }
                "item/completed" => {
                    if let Some(t) = &thread {
                        sink(ServerEvent::Activity { thread: t.clone() });
                    }
                    let item = &n.params["item"];
                    let code = item["exitCode"].as_i64();
                    if item["type"] == "commandExecution"
                        && let (Some(thread), Some(call_id), Some(code)) =
                            (thread, item["id"].as_str(), code)
                        && code != 0
                    {
                        sink(ServerEvent::CommandFailed {
                            thread,
                            call_id: call_id.to_owned(),
                            exit_code: code,
                        });
                    }
                }
                // Every other word about a thread's items (deltas, starts, output) is
                // progress.
                m if m.starts_with("item/") => {
                    if let Some(thread) = thread {
                        sink(ServerEvent::Activity { thread });
                    }
                }
                _ => {}
            }
        }
    }
}
