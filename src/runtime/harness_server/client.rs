//! The commands' side of a project's harness server: starting it (under the project's lock,
//! with its supervisor `spex serve` detached) and launch, deliver, answer, interrupt, stop,
//! resume and attach on a thread, its status, and stopping it. The supervisor itself is
//! `supervisor`.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::{HeldThread, START_TIMEOUT, Server, ServerStatus, stop_process};
use crate::runtime::answer::{self, Answered};
use crate::runtime::client::{call, socket_path};
use crate::runtime::delivery::{Delivery, Mode, StageAt, elapsed_ms};
use crate::runtime::error::{RuntimeError, io};
use crate::runtime::marks::mark_interrupting;
use crate::runtime::protocol::Request;
use crate::runtime::start::{Launch, Launched, identity_vars, start_host};
use crate::runtime::wait::{interrupted, wait_for};
use crate::seam::evidence::{self, Finding};
use crate::seam::session_server::{DeliverMode, ServerCtx, ServerError, ServerErrorKind};
use crate::store;
use crate::store::session::{LaunchedBy, Session, Status};

impl Server<'_> {
    /// Starts the server unless one answers, under the project's lock so two commands never
    /// start two; the supervisor (`spex serve`) runs detached and outlives this command.
    pub fn ensure(&self, spex_bin: &Path) -> Result<(), RuntimeError> {
        let dir = self.dir();
        let lock = dir.join(format!("{}.lock", self.harness.id()));
        store::lock::with(&lock, || self.ensure_locked(spex_bin)).map_err(io(&lock))?
    }

    fn ensure_locked(&self, spex_bin: &Path) -> Result<(), RuntimeError> {
        if self.answers() {
            return Ok(());
        }
        // A socket nothing answers on is left over from a killed server.
        if fs_err::symlink_metadata(&self.socket).is_ok() {
            fs_err::remove_file(&self.socket).map_err(RuntimeError::Fs)?;
        }
        let log = self.log.clone();
        let mut file = {
            use fs_err::os::unix::fs::OpenOptionsExt as _;
            fs_err::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(crate::fsutil::PRIVATE_FILE)
                .open(&log)
                .map_err(RuntimeError::Fs)?
        };
        let from = file.seek(SeekFrom::End(0)).map_err(RuntimeError::Fs)?;
        let mut cmd = self.serve_command(spex_bin, &[]);
        cmd.stdin(Stdio::null())
            .stdout(file.try_clone().map_err(RuntimeError::Fs)?.into_file())
            .stderr(file.into_file());
        // The server is shared by every thread: no session's identity may leak into it.
        for var in identity_vars() {
            cmd.env_remove(var);
        }
        cmd.env(crate::seam::session_server::SERVER_MARK, "1");
        let mut child = cmd.spawn().map_err(io(spex_bin))?;
        let deadline = Instant::now() + START_TIMEOUT + Duration::from_secs(5);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(RuntimeError::ServerWide {
                    harness: self.harness.id().to_owned(),
                    message: format!("it did not start ({status}):\n{}", tail(&log, from)),
                    hint: format!("see `{}`", log.display()),
                });
            }
            if self.running_file().is_file() && self.answers() {
                break;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                return Err(RuntimeError::ServerWide {
                    harness: self.harness.id().to_owned(),
                    message: format!("it did not answer within {} s", START_TIMEOUT.as_secs()),
                    hint: format!("see `{}`", log.display()),
                });
            }
            // Startup only: the supervisor announces readiness by a file; look 20 times a second.
            std::thread::sleep(Duration::from_millis(50));
        }
        // The supervisor leads its own session and outlives us; reap it if it ends first.
        std::thread::spawn(move || child.wait());
        Ok(())
    }

    /// A new thread in `l.tree`, its record (keyed by the thread id, `launched_by: spex`, bound
    /// to the server process by the pid and start time its supervisor recorded), the harness's
    /// terminal UI on it under a spex host, and `prompt` as its first turn.
    pub fn launch(
        &self,
        l: &Launch,
        prompt: Option<&str>,
    ) -> Result<(Launched, Option<Delivery>), RuntimeError> {
        self.ensure(&l.spex_bin)?;
        let tree = &l.tree;
        let name = format!("spex {}", tree.branch().as_deref().unwrap_or("session"));
        let thread = self
            .proto
            .start_thread(&self.ctx(), &tree.root, &name)
            .map_err(|e| self.failed_unbound(&e))?;
        let now = store::now_rfc3339();
        let server = self.running().map(|r| r.server());
        self.store.update(&thread, |cur| {
            // A hook may have made the record already; either way it is spex's now.
            let mut s = cur.unwrap_or_else(|| {
                Session::new(
                    &thread,
                    self.harness.id(),
                    Some(thread.clone()),
                    tree,
                    LaunchedBy::Spex,
                    &now,
                )
            });
            s.launched_by = LaunchedBy::Spex;
            s.set_process(server);
            s.boot_id = crate::seam::boot::Boot::now(l.env).id;
            if s.status == Status::Starting {
                s.status = Status::Idle;
            }
            s.updated_at.clone_from(&now);
            let mut f = serde_json::Map::new();
            f.insert("harness".into(), self.harness.id().into());
            f.insert("thread".into(), thread.clone().into());
            (
                Some(s),
                vec![("session.launched".to_owned(), "launch".to_owned(), f)],
                (),
            )
        })?;
        self.store.set_alias(self.harness.id(), &thread, &thread)?;
        // Ctrl-C (see `catch_interrupt`) ends the launch at the next step: the caller stops
        // the thread started here and says so.
        let cancelled = || interrupted().then(|| RuntimeError::Cancelled { id: thread.clone() });
        if let Some(e) = cancelled() {
            return Err(e);
        }
        let launched = self.host(l, &thread)?;
        if let Some(e) = cancelled() {
            return Err(e);
        }
        let delivery = prompt.map(|p| self.deliver(&thread, p)).transpose()?;
        if let Some(e) = cancelled() {
            return Err(e);
        }
        Ok((launched, delivery))
    }

    /// Runs the harness's terminal UI on session `id`'s thread under a spex host (as every
    /// hosted session runs), unless a host already answers for it; the host's program is a
    /// client of the thread, so its end does not end the session.
    pub fn host(&self, l: &Launch, id: &str) -> Result<Launched, RuntimeError> {
        let s = self.ours(id)?;
        if s.status == Status::Exited {
            return Err(RuntimeError::exited(&s));
        }
        if let Ok(r) = call(self.env, id, Request::Ping) {
            return Ok(Launched {
                id: id.to_owned(),
                socket: socket_path(self.env, id)?,
                host_pid: r.host_pid,
                child_pid: r.child_pid,
            });
        }
        let thread = Self::thread_of(&s);
        let loaded = self
            .proto
            .loaded(&self.ctx(), &thread)
            .map_err(|e| self.failed(id, &e))?;
        if !loaded {
            return Err(self.failed(
                id,
                &ServerError::new(
                    ServerErrorKind::UnknownThread,
                    "the server does not hold the session's thread",
                ),
            ));
        }
        let argv = self.proto.tui_argv(&self.ctx(), &thread);
        let store = self.store.clone();
        start_host(l, &store, id, &argv)
    }

    /// Whether the supervisor (`spex serve`, which also judges its threads' budgets) runs.
    pub fn supervised(&self) -> bool {
        self.running()
            .is_some_and(|r| evidence::alive(r.supervisor()))
    }

    /// Delivers `text` into session `id`'s thread: steered into its running turn, else a new
    /// turn; confirmed by the server's answer naming the turn.
    pub fn deliver(&self, id: &str, text: &str) -> Result<Delivery, RuntimeError> {
        let started = Instant::now();
        let s = self.ours(id)?;
        if s.status == Status::Exited {
            return Err(RuntimeError::exited(&s));
        }
        let d = self
            .proto
            .deliver(&self.ctx(), &Self::thread_of(&s), text)
            .map_err(|e| self.failed(id, &e))?;
        Ok(Delivery {
            delivered: true,
            mode: match d.mode {
                DeliverMode::Steer => Mode::Steer,
                DeliverMode::Start => Mode::Start,
            },
            turn_id: Some(d.turn_id),
            confirmed: true,
            elapsed_ms: elapsed_ms(started),
            // The text goes to the server as data, never typed into a terminal.
            sanitized: false,
            // The server's answer names the turn that runs with the text.
            stages: vec![
                StageAt::now("accepted", started),
                StageAt::now("started", started),
            ],
        })
    }

    /// Answers attention `a` of session `id` as a client of the server, confirmed by the
    /// server (the request resolved, the item's end); then the record closes it.
    pub fn answer(
        &self,
        id: &str,
        a: &crate::store::session::Attention,
        r: &crate::seam::answer::Response,
    ) -> Result<Answered, RuntimeError> {
        let started = Instant::now();
        let s = self.load(id)?;
        // A session the person started runs on the harness's own server, when it has one
        // other clients may join (Codex's per-user background server); else only its
        // terminal answers it.
        let own;
        let ctx = if self.on_server(&s) {
            self.ctx()
        } else {
            own = self.proto.own_server(self.env, &s).ok_or_else(|| RuntimeError::NotAnswered {
                id: id.to_owned(),
                message: format!(
                    "session `{}` runs in a {} terminal started outside spex whose server no other client can join; nothing was sent",
                    s.label(),
                    self.harness.id()
                ),
                hint: "answer it in its own terminal".to_owned(),
            })?;
            ServerCtx {
                socket: &own,
                ..self.ctx()
            }
        };
        let att = a.id.clone().unwrap_or_default();
        if !answer::mark(&self.store, id, &att, Some(r)) {
            return Err(RuntimeError::NotAnswered {
                id: id.to_owned(),
                message: format!(
                    "attention `{att}` of session `{}` closed before spex answered it; nothing was sent",
                    s.label()
                ),
                hint: format!("`spex show {}`", s.label()),
            });
        }
        let confirmed = self.proto.answer(&ctx, &Self::thread_of(&s), a, r);
        let confirmed = match confirmed {
            Ok(c) => c,
            Err(e) => {
                answer::mark(&self.store, id, &att, None);
                return Err(RuntimeError::NotAnswered {
                    id: id.to_owned(),
                    message: format!(
                        "attention `{att}` of session `{}` was not answered: {}",
                        s.label(),
                        e.message
                    ),
                    hint: format!("`spex show {}` says what it waits on", s.label()),
                });
            }
        };
        answer::close(&self.store, id, &att);
        Ok(Answered {
            attention: att,
            choice: r.choice.clone(),
            message: r.message.clone(),
            via: "server".into(),
            confirmed: confirmed.what,
            elapsed_ms: elapsed_ms(started),
            taken_ms: confirmed.taken.map(|t| {
                u64::try_from(t.saturating_duration_since(started).as_millis()).unwrap_or(u64::MAX)
            }),
        })
    }

    /// Interrupts the running turn and waits until the record says it ended.
    pub fn interrupt(&self, id: &str, timeout: Duration) -> Result<Session, RuntimeError> {
        let s = self.ours(id)?;
        if s.status == Status::Exited {
            return Err(RuntimeError::exited(&s));
        }
        mark_interrupting(&self.store, id, Some("spex interrupt"));
        let interrupted = self
            .proto
            .interrupt(&self.ctx(), &Self::thread_of(&s))
            .map_err(|e| self.failed(id, &e));
        let Some(_) = interrupted.inspect_err(|_| {
            mark_interrupting(&self.store, id, None);
        })?
        else {
            mark_interrupting(&self.store, id, None);
            return self.load(id);
        };
        let ended = wait_for(
            &self.store.session_dir(id),
            Instant::now() + timeout,
            || {
                self.store
                    .load(id)
                    .ok()
                    .flatten()
                    .filter(|s| !s.turn_running())
            },
        )?;
        ended.ok_or_else(|| RuntimeError::NotInterrupted {
            id: id.to_owned(),
            secs: timeout.as_secs(),
        })
    }

    /// Closes the thread, ends its terminal and records the session `exited`; the server
    /// stops once it holds no thread of a live session.
    pub fn stop(&self, id: &str) -> Result<Session, RuntimeError> {
        let s = self.ours(id)?;
        if s.status != Status::Exited {
            match self.proto.close_thread(&self.ctx(), &Self::thread_of(&s)) {
                Ok(()) => {}
                // A server that is gone holds no thread: the record only catches up.
                Err(e) if e.kind == ServerErrorKind::Down => {}
                Err(e) => return Err(self.failed(id, &e)),
            }
            self.conclude(
                id,
                Finding::Gone("stopped"),
                "`spex stop` closed the thread",
            );
        }
        let _ = call(self.env, id, Request::Stop { grace_ms: 2000 });
        // A thread no live session of spex's names (its record pruned, or exited while the
        // server kept it, or one another client started) does not keep the server running.
        if let Ok(threads) = self.proto.threads(&self.ctx())
            && !threads.iter().any(|t| {
                self.record_of(t)
                    .and_then(|id| self.store.load(&id).ok().flatten())
                    .is_some_and(|s| self.on_server(&s) && s.status != Status::Exited)
            })
        {
            self.shutdown();
        }
        self.load(id)
    }

    /// Stops the server and waits until it is gone (TERM to its process group, KILL after a
    /// grace); every session still live on it reads `exited` (`server gone`). False when no
    /// server of spex's ran.
    pub fn shutdown(&self) -> bool {
        let Some(r) = self.running() else {
            return false;
        };
        if !evidence::alive(r.server()) {
            return false;
        }
        stop_process(r.server());
        self.sessions_gone("the project's server was stopped");
        true
    }

    /// What the project's server is doing: whether it runs and answers, its pid, uptime and
    /// the threads it holds.
    pub fn status(&self) -> ServerStatus {
        let running = self.running().filter(|r| evidence::alive(r.server()));
        let answers = running.is_some() && self.answers();
        let threads = if answers {
            self.proto.threads(&self.ctx()).unwrap_or_default()
        } else {
            Vec::new()
        };
        let threads = threads
            .into_iter()
            .map(|thread| {
                let s = self
                    .record_of(&thread)
                    .and_then(|id| self.store.load(&id).ok().flatten());
                HeldThread {
                    session: s.as_ref().map(|s| s.id.clone()),
                    // People read handles: one is claimed now for a record that has none yet.
                    handle: s.as_ref().map(|s| self.store.label_of(&s.id)),
                    status: s.as_ref().map(|s| s.status.as_str().to_owned()),
                    thread,
                }
            })
            .collect();
        let uptime_s = running
            .as_ref()
            .and_then(|r| store::parse_time(r.started_at.as_deref()?))
            .and_then(|t| std::time::SystemTime::now().duration_since(t).ok())
            .map(|d| d.as_secs());
        ServerStatus {
            harness: self.harness.id().to_owned(),
            running: running.is_some(),
            answers,
            pid: running.as_ref().map(|r| r.server_pid),
            supervisor_pid: running.as_ref().map(|r| r.supervisor_pid),
            supervised: running
                .as_ref()
                .is_some_and(|r| evidence::alive(r.supervisor())),
            started_at: running.as_ref().and_then(|r| r.started_at.clone()),
            uptime_s,
            socket: self.socket.clone(),
            log: self.log.clone(),
            threads,
        }
    }

    /// Brings session `id`'s thread back on the server (starting it if needed) with its
    /// terminal UI under a spex host. Refuses a live session (`spex resume --force` no longer
    /// forces anything: a second client on its conversation would split it).
    pub fn resume(&self, l: &Launch, id: &str) -> Result<Launched, RuntimeError> {
        let s = self.load(id)?;
        let thread = Self::thread_of(&s);
        let live = if self.on_server(&s) {
            self.live(&s)
        } else {
            // Started outside spex: live until its record says it exited.
            true
        };
        if s.status != Status::Exited && live {
            return Err(RuntimeError::Refused {
                id: id.to_owned(),
                message: format!("it is running; `spex attach {id}` reaches it"),
            });
        }
        self.ensure(&l.spex_bin)?;
        self.proto
            .resume_thread(&self.ctx(), &thread)
            .map_err(|e| self.failed(id, &e))?;
        let server = self.running().map(|r| r.server());
        self.store.update(id, |cur| {
            let Some(mut s) = cur else {
                return (None, Vec::new(), ());
            };
            let now = store::now_rfc3339();
            let before = s.state_key();
            s.status = Status::Idle;
            s.exit_reason = None;
            s.forget_process();
            s.set_process(server);
            s.boot_id = crate::seam::boot::Boot::now(l.env).id;
            s.launched_by = LaunchedBy::Spex;
            s.stamp(before, &now, "resume", None);
            s.updated_at = now;
            let mut f = serde_json::Map::new();
            f.insert("harness".into(), self.harness.id().into());
            (
                Some(s),
                vec![("session.resumed".to_owned(), "resume".to_owned(), f)],
                (),
            )
        })?;
        self.host(l, id)
    }

    /// Whether session `s`'s thread is live: the server answers and holds it.
    pub fn live(&self, s: &Session) -> bool {
        self.proto
            .loaded(&self.ctx(), &Self::thread_of(s))
            .unwrap_or(false)
    }
}

/// The log written since `from`, for an error message.
fn tail(log: &Path, from: u64) -> String {
    let mut text = String::new();
    if let Ok(mut f) = fs_err::File::open(log)
        && f.seek(SeekFrom::Start(from)).is_ok()
    {
        let _ = f.take(8192).read_to_string(&mut text);
    }
    text.trim_end().to_owned()
}
