//! The one place a session's transport is chosen: a thread of its harness's server, when the
//! harness runs its sessions on one (its adapter offers the session-server facet), else the spex
//! host of its terminal. The commands take a [`Transport`] for a session and act through it,
//! and never name either way. (Inside the runtime, `live` and `judge` still ask the harness's
//! server directly what it knows of a thread.)

use std::time::Duration;

use super::answer::{self, Answered};
use super::client::call;
use super::delivery::Delivery;
use super::error::RuntimeError;
use super::harness_server::Server;
use super::protocol::Request;
use super::start::{Launch, Launched};
use crate::adapters;
use crate::env::Env;
use crate::seam::answer::Response;
use crate::store::ProjectStore;
use crate::store::session::{Attention, Session};

/// Starts a new session as `l` says: a thread of the harness's server when the harness runs
/// its sessions on one, else its terminal under a spex host; `prompt` becomes its first turn.
/// `started` runs once the session exists (on a host before the prompt is typed, on a server
/// after the server took it). A Ctrl-C meanwhile ends it with [`RuntimeError::Cancelled`].
pub fn launch(
    l: &Launch,
    store: &ProjectStore,
    prompt: Option<&str>,
    started: impl FnOnce(&Launched) -> Result<(), RuntimeError>,
) -> Result<(Launched, Option<Delivery>), RuntimeError> {
    if let Some(server) = Server::new(
        l.env,
        l.harness,
        store,
        &l.tree.main,
        l.binary.clone(),
        l.args.clone(),
    )? {
        let (launched, delivery) = server.launch(l, prompt)?;
        started(&launched)?;
        return Ok((launched, delivery));
    }
    let launched = super::launch(l)?;
    started(&launched)?;
    let delivery = prompt
        .map(|text| {
            super::deliver(
                l.env,
                store,
                &launched.id,
                text,
                false,
                Duration::from_secs(30),
            )
        })
        .transpose()?;
    if super::interrupted() {
        return Err(RuntimeError::Cancelled {
            id: launched.id.clone(),
        });
    }
    Ok((launched, delivery))
}

/// How spex reaches one session: chosen once, from the session's harness, by [`of`].
pub struct Transport<'e> {
    env: &'e Env,
    store: ProjectStore,
    /// The session's id.
    id: String,
    via: Via<'e>,
}

enum Via<'e> {
    /// A thread of the project's harness server (the harness binary not resolved: enough to
    /// reach a thread, not to start the server or its terminal UI).
    Server(Server<'e>),
    /// The spex host of the session's terminal.
    Host,
}

/// The transport of `record`'s session.
pub fn of<'e>(
    env: &'e Env,
    store: &ProjectStore,
    record: &Session,
) -> Result<Transport<'e>, RuntimeError> {
    let harness =
        adapters::lookup(&record.harness).ok_or_else(|| RuntimeError::UnknownHarness {
            id: record.id.clone(),
            harness: record.harness.clone(),
        })?;
    let via = match Server::new(
        env,
        harness,
        store,
        &record.project,
        std::path::PathBuf::new(),
        Vec::new(),
    )? {
        Some(server) => Via::Server(server),
        None => Via::Host,
    };
    Ok(Transport {
        env,
        store: store.clone(),
        id: record.id.clone(),
        via,
    })
}

impl Transport<'_> {
    fn id(&self) -> &str {
        &self.id
    }

    /// Delivers `text`: steered into the running turn or a new turn on a server; typed into
    /// the terminal and confirmed by the prompt hook on a host (`wait_queued`: a prompt the
    /// busy harness queued is waited for until it starts).
    pub fn deliver(
        &self,
        text: &str,
        wait_queued: bool,
        timeout: Duration,
    ) -> Result<Delivery, RuntimeError> {
        match &self.via {
            Via::Server(server) => server.deliver(self.id(), text),
            Via::Host => {
                super::deliver(self.env, &self.store, self.id(), text, wait_queued, timeout)
            }
        }
    }

    /// Interrupts the running turn and waits (at most `timeout`) until the record says it
    /// ended.
    pub fn interrupt(&self, timeout: Duration) -> Result<Session, RuntimeError> {
        match &self.via {
            Via::Server(server) => server.interrupt(self.id(), timeout),
            Via::Host => super::interrupt(self.env, &self.store, self.id(), timeout),
        }
    }

    /// Ends the session (`grace`: between SIGTERM and SIGKILL of a hosted program; a thread
    /// is closed at once).
    pub fn stop(&self, grace: Duration) -> Result<Session, RuntimeError> {
        match &self.via {
            Via::Server(server) => server.stop(self.id()),
            Via::Host => super::stop(self.env, &self.store, self.id(), grace),
        }
    }

    /// Answers attention `a` of session `s` with `r` where no hook waits for it: as a client
    /// of the server, else by keys into the terminal spex hosts (`host_pids`: its host's
    /// processes, none when spex hosts no terminal for it).
    pub fn answer(
        &self,
        s: &Session,
        a: &Attention,
        r: &Response,
        host_pids: &[u32],
        timeout: Duration,
    ) -> Result<Answered, RuntimeError> {
        match &self.via {
            Via::Server(server) => server.answer(self.id(), a, r),
            Via::Host if host_pids.is_empty() => Err(answer::terminal_only(s, a)),
            Via::Host => answer::by_keys(self.env, &self.store, s, a, r, timeout),
        }
    }

    /// Brings the exited session back with its conversation, its terminal under a spex host
    /// started as `l` says.
    pub fn resume(&self, l: &Launch) -> Result<Launched, RuntimeError> {
        match &self.via {
            Via::Server(server) => server
                .with_binary(l.binary.clone(), l.args.clone())
                .resume(l, self.id()),
            Via::Host => super::resume(l, &self.store, self.id()),
        }
    }

    /// Makes sure a terminal answers for the session before `spex attach` joins it: a session
    /// on a server gets its terminal UI back under a host if it was closed (started as
    /// `relaunch` says, asked only then); a hosted session's host must answer, else why not is
    /// explained.
    pub fn open_terminal<'l, E: From<RuntimeError>>(
        &self,
        relaunch: impl FnOnce() -> Result<Launch<'l>, E>,
    ) -> Result<(), E> {
        if let Via::Server(server) = &self.via {
            let l = relaunch()?;
            server
                .with_binary(l.binary.clone(), l.args.clone())
                .host(&l, self.id())?;
            return Ok(());
        }
        super::reach_if_alive(self.env, &self.store, self.id())?;
        // A host that does not answer is explained: the session ended, or runs in a terminal
        // of its own, or its host died.
        super::explained(
            self.env,
            &self.store,
            self.id(),
            super::Act::Attach,
            call(self.env, self.id(), Request::Ping),
        )?;
        Ok(())
    }
}

/// Answers session `id`'s open attention (the one `named`, when given) with `choices`: the
/// whole path of `spex answer`, for each caller (`by`: `cli`, `board`), recorded in the
/// attention's closing event. Confirmed by the harness within `timeout`.
#[expect(
    clippy::too_many_arguments,
    reason = "each is one of `spex answer`'s own options; a struct would only rename them"
)]
pub fn answer(
    env: &Env,
    store: &ProjectStore,
    id: &str,
    named: Option<&str>,
    choices: &[String],
    message: Option<String>,
    by: &'static str,
    timeout: Duration,
) -> Result<Answered, RuntimeError> {
    let record = store
        .load(id)?
        .ok_or_else(|| crate::store::session::StoreError::NotFound(id.to_owned()))?;
    let host_pids = super::host_pids(store, id);
    let (s, a) = answer::target(env, store, id, named, &host_pids)?;
    // A version whose check found this answering path broken is not answered blind.
    if let Some((message, hint)) =
        super::checked::answer_switched_off(env, &record, a.kind.as_ref())
    {
        return Err(RuntimeError::NotAnswered {
            id: id.to_owned(),
            message,
            hint,
        });
    }
    let mut r = answer::response(id, &a, choices, message)?;
    r.by = by;
    // A hook waiting for the answer takes it first, whatever else could answer (a Codex
    // TUI in away mode has a server, but not one other clients can join).
    if answer::hook_waiting(&a) {
        return answer::by_hook(store, &s, &a, &r, timeout);
    }
    of(env, store, &record)
        .map_err(|e| RuntimeError::NoWayToAnswer(Box::new(e)))?
        .answer(&s, &a, &r, &host_pids, timeout)
}
