//! The host's socket: binding it (again, when its folder was removed), and serving each
//! client its requests (ping, inject, keys, snapshot, resize, record, interrupt, stop) or the
//! raw terminal after `attach`. Acts through the hosted session; holds no state of its own.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::time::Duration;

use super::session::{Attached, Shared, lock};
use crate::hint::Hinted;
use crate::log::log;
use crate::pty::session::Size;
use crate::pty::tee::Event as TeeEvent;
use crate::runtime::protocol::{Envelope, Request, Response, VERSION};
use crate::seam::terminal::Activity;

/// On SIGUSR1 (spex sends it when it finds this host alive and its socket gone, e.g. the
/// runtime folder was removed at logout), binds the socket again, re-creating its folder.
pub(super) fn listen_again_on_request(
    socket: &std::path::Path,
    shared: &Arc<Shared>,
) -> std::io::Result<()> {
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGUSR1])?;
    let (socket, shared) = (socket.to_owned(), Arc::clone(shared));
    std::thread::Builder::new()
        .name("host-rebind".into())
        .spawn(move || {
            for _ in signals.forever() {
                if UnixStream::connect(&socket).is_ok() {
                    continue;
                }
                let listener = socket
                    .parent()
                    .map_or(Ok(()), crate::fsutil::create_private_dir)
                    .map_err(anyhow::Error::from)
                    .and_then(|()| bind(&socket));
                match listener {
                    Ok(listener) => {
                        log!(
                            "socket `{}` was gone: listening there again",
                            socket.display()
                        );
                        let shared = Arc::clone(&shared);
                        let _ = std::thread::Builder::new()
                            .name("host-accept".into())
                            .spawn(move || accept(&listener, &shared));
                    }
                    Err(e) => log!(
                        "socket `{}` is gone and cannot be bound again: {e}",
                        socket.display()
                    ),
                }
            }
        })?;
    Ok(())
}

/// Binds the session's socket, replacing a stale file (one nobody answers on), never a live one.
pub(super) fn bind(path: &std::path::Path) -> anyhow::Result<UnixListener> {
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            anyhow::bail!(Hinted::new(
                format!("`{}` is served by a running host", path.display()),
                "this session already runs; `spex attach` to it"
            ));
        }
        fs_err::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    fs_err::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

pub(super) fn accept(listener: &UnixListener, shared: &Arc<Shared>) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        // Only the user who owns the session may drive it.
        let same_user = rustix::net::sockopt::socket_peercred(&stream)
            .is_ok_and(|cred| cred.uid == rustix::process::getuid());
        if !same_user {
            continue;
        }
        let shared = Arc::clone(shared);
        let _ = std::thread::Builder::new()
            .name("host-client".into())
            .spawn(move || serve(stream, &shared));
    }
}

fn respond(stream: &mut UnixStream, r: &Response) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(r).expect("a response serializes");
    line.push(b'\n');
    stream.write_all(&line)
}

/// One client connection: requests until it closes, or the raw stream after `attach`.
fn serve(stream: UnixStream, shared: &Shared) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let request = match serde_json::from_str::<Envelope>(&line) {
            Ok(e) if e.v == VERSION => e.request,
            Ok(e) => {
                let _ = respond(
                    &mut writer,
                    &Response::fail(format!(
                        "protocol version {} is not served (this host speaks {VERSION})",
                        e.v
                    )),
                );
                continue;
            }
            Err(e) => {
                let _ = respond(&mut writer, &Response::fail(format!("bad request: {e}")));
                continue;
            }
        };
        if let Request::Attach {
            rows,
            cols,
            read_only,
        } = request
        {
            attach(reader, writer, shared, Size { rows, cols }, read_only);
            return;
        }
        let response = handle(shared, request);
        if respond(&mut writer, &response).is_err() {
            return;
        }
    }
}

fn handle(shared: &Shared, request: Request) -> Response {
    let ok = Response {
        ok: true,
        host_pid: Some(std::process::id()),
        child_pid: Some(shared.child_pid),
        ..Response::default()
    };
    let result = match request {
        Request::Ping => Ok(()),
        Request::Snapshot => {
            return Response {
                snapshot: Some(lock(&shared.term).snapshot()),
                ..ok
            };
        }
        Request::Scrollback { lines } => {
            let mut term = lock(&shared.term);
            let snapshot = crate::pty::terminal::Snapshot {
                scrollback: term.scrollback(lines),
                ..term.snapshot()
            };
            return Response {
                snapshot: Some(snapshot),
                ..ok
            };
        }
        Request::Inject {
            text,
            submit,
            clear,
        } => match inject(shared, &text, submit, clear) {
            Ok(landed) => {
                return Response { landed, ..ok };
            }
            Err(e) => Err(e),
        },
        Request::Keys { expect, keys } => {
            // The screen is checked and the keys written under the terminal's lock, so no
            // redraw slips between the check and the keys.
            let term = lock(&shared.term);
            let screen = term.snapshot().lines.join("\n");
            if let Some(missing) = expect.iter().find(|e| !screen.contains(e.as_str())) {
                Err(std::io::Error::other(format!(
                    "the screen does not show `{missing}`"
                )))
            } else {
                log!("keys {} bytes", keys.len());
                let written = shared.write_input_by(&keys, "spex answer");
                drop(term);
                written
            }
        }
        Request::Resize { rows, cols } => resize(shared, rows, cols),
        Request::Stop { grace_ms } => stop(shared, Duration::from_millis(grace_ms)),
        Request::Record { dir: Some(dir) } => shared.start_recording(&dir),
        Request::Record { dir: None } => {
            shared.frame("end");
            super::recording::note_final(&shared.tee, &shared.store, &shared.id);
            shared.tee.close_sinks();
            Ok(())
        }
        Request::Incomplete { reason } => {
            shared.tee.record(TeeEvent::Mark {
                stream: "capture".into(),
                data: serde_json::json!({ "reason": reason }),
            });
            Ok(())
        }
        Request::Interrupt => match shared.terminal.interrupt_keys() {
            Some(keys) => shared.write_input_by(keys, "spex interrupt"),
            None => Err(std::io::Error::other("this harness has no interrupt key")),
        },
        Request::Notice { title, body } => {
            notice(shared, &title, &body);
            Ok(())
        }
        Request::Attach { .. } => unreachable!("handled by serve"),
    };
    match result {
        Ok(()) => ok,
        Err(e) => Response::fail(e.to_string()),
    }
}

/// Types `text` as one paste (over a box cleared as `clear` says), then with `submit` its
/// Enter: whether the paste showed in the box before the Enter, where the screen can tell.
fn inject(shared: &Shared, text: &str, submit: bool, clear: bool) -> std::io::Result<Option<bool>> {
    log!(
        "inject {} bytes{}",
        text.len(),
        if submit { " + submit" } else { "" }
    );
    let mut one_at_a_time = shared.start_typing();
    let Some((paste, pause, enter)) = shared.terminal.paste(text) else {
        return Err(std::io::Error::other(
            "prompts are not typed into this harness's terminal",
        ));
    };
    let mut landed = None;
    if !text.is_empty() {
        if clear {
            // Typed again: the first copy may have been taken while this waited its turn to
            // type (a harness that read no keys for a while takes them all at once).
            let now = lock(&shared.term).snapshot();
            let screen = now.lines.join("\n");
            let idle = shared.terminal.screen_activity(&now.title, &screen) == Some(Activity::Idle);
            if !idle
                || !shared.terminal.ready_for_input(&screen)
                || crate::runtime::shown_since(&lock(&shared.before_paste), &screen, text)
            {
                // Only its Enter, which a copy taken together with its Enter may still need
                // (nothing on an empty box).
                log!("not typed again: the screen shows the harness took the first copy");
                if submit {
                    let seen = lock(&shared.chunks.0).count;
                    shared.write(&enter)?;
                    *one_at_a_time = Some(seen);
                }
                return Ok(Some(true));
            }
            shared.clear_blindly(text)?;
        } else {
            shared.clear_input()?;
            *lock(&shared.before_paste) = lock(&shared.term).text();
        }
        let empty = shared.terminal.ready_for_input(&lock(&shared.term).text());
        shared.write(&paste)?;
        if submit {
            std::thread::sleep(pause);
            landed = empty.then(|| shared.shows_typed_text());
        }
    }
    if submit {
        let seen = lock(&shared.chunks.0).count;
        shared.write(&enter)?;
        *one_at_a_time = Some(seen);
    }
    if landed == Some(false) {
        log!("the paste never showed in the input box before its Enter");
    }
    Ok(landed)
}

/// Writes a notification to every attached terminal: OSC 9 (`iTerm2`, Windows Terminal, kitty,
/// `WezTerm`, Ghostty) and OSC 777 (VTE terminals, foot, urxvt), text with no control character
/// (nothing in it can end the sequence or start another), `;` kept out of OSC 777's fields.
fn notice(shared: &Shared, title: &str, body: &str) {
    let plain = |s: &str, max: usize| -> String {
        s.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(max)
            .collect()
    };
    let (title, body) = (plain(title, 120), plain(body, 240));
    let bytes = format!(
        "\x1b]9;{title}: {body}\x1b\\\x1b]777;notify;{};{}\x1b\\",
        title.replace(';', ","),
        body.replace(';', ",")
    );
    let mut clients = lock(&shared.clients);
    clients.retain_mut(|c| c.stream.write_all(bytes.as_bytes()).is_ok());
    shared.set_clients(&clients);
}

/// Resizes the session and its model; a watching terminal is told the new size in its stream
/// (`CSI 8 ; rows ; cols t`) and gets the screen redrawn at it.
fn resize(shared: &Shared, rows: u16, cols: u16) -> std::io::Result<()> {
    let mut clients = lock(&shared.clients);
    let redraw = {
        let mut term = lock(&shared.term);
        term.resize(rows, cols);
        term.redraw()
    };
    let resized = lock(&shared.session).resize(Size { rows, cols });
    let notice = [
        format!("\x1b[8;{rows};{cols}t\x1b[H\x1b[2J").into_bytes(),
        redraw,
    ]
    .concat();
    clients.retain_mut(|c| !c.read_only || c.stream.write_all(&notice).is_ok());
    resized
}

/// Ends the program and its whole process group: at an idle prompt first as a person would
/// (the harness's exit keys), then SIGTERM to the group, then SIGKILL after `grace`; and once
/// the program has ended, whatever of its group it left running (a process that ignores
/// SIGTERM would hold the terminal open and the session would never read exited).
fn stop(shared: &Shared, grace: Duration) -> std::io::Result<()> {
    let deadline = std::time::Instant::now() + grace;
    if stop_program(shared, grace)? {
        // SIGKILL went to the whole group: nothing of it is left to wait for.
        return Ok(());
    }
    // What it started may still be finishing on its own (a hook of its exit).
    let settled = std::time::Instant::now() + LEFTOVER_WAIT.min(grace);
    while lock(&shared.session).group_alive() && std::time::Instant::now() < settled {
        std::thread::sleep(Duration::from_millis(10));
    }
    if !lock(&shared.session).group_alive() {
        return Ok(());
    }
    let deadline = deadline.max(std::time::Instant::now() + LEFTOVER_WAIT.min(grace));
    log!("stop: the program ended, its process group did not: SIGTERM");
    lock(&shared.session).signal(rustix::process::Signal::TERM)?;
    while lock(&shared.session).group_alive() {
        if std::time::Instant::now() >= deadline {
            log!("stop: SIGKILL to the group");
            return lock(&shared.session).signal(rustix::process::Signal::KILL);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// Ends the program itself (see [`stop`]); whether that took SIGKILL of its group.
fn stop_program(shared: &Shared, grace: Duration) -> std::io::Result<bool> {
    let keys = shared.terminal.exit_keys();
    // A turn that just ended can still be drawing its last lines (Claude runs its Stop hook
    // under a spinner): give the prompt a moment to come back.
    let idle = || lock(&shared.watch).activity == Some(Activity::Idle);
    let deadline = std::time::Instant::now() + IDLE_WAIT.min(grace);
    while !keys.is_empty() && !idle() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if idle() && !keys.is_empty() {
        log!("stop: typing the exit keys");
        {
            let _typing = shared.start_typing();
            for key in keys {
                shared.write(key)?;
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        if ended_within(shared, EXIT_KEYS_WAIT.min(grace))? {
            return Ok(false);
        }
    }
    log!("stop: SIGTERM");
    lock(&shared.session).signal(rustix::process::Signal::TERM)?;
    if ended_within(shared, grace)? {
        return Ok(false);
    }
    lock(&shared.session).signal(rustix::process::Signal::KILL)?;
    Ok(true)
}

/// Whether the program ends within `limit`; the session lock is held only for each look, so
/// the pump can still answer the program's terminal queries meanwhile.
fn ended_within(shared: &Shared, limit: Duration) -> std::io::Result<bool> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if lock(&shared.session).try_wait()?.is_some() {
            return Ok(true);
        }
        if std::time::Instant::now() >= deadline {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Streams the terminal to one client: a redraw of the screen, then every chunk (the pump
/// writes them); a typing client's bytes go to the program until it disconnects, a watching
/// one's (`read_only`) are read and dropped, and the session keeps its size.
fn attach(
    mut reader: BufReader<UnixStream>,
    mut writer: UnixStream,
    shared: &Shared,
    size: Size,
    read_only: bool,
) {
    let answer = Response {
        ok: true,
        // A watcher draws the session's screen at the session's size: it needs that size.
        snapshot: read_only.then(|| lock(&shared.term).snapshot()),
        ..Response::default()
    };
    if respond(&mut writer, &answer).is_err() {
        return;
    }
    // A stalled client must not stall the program: its writes time out and it is dropped.
    let _ = writer.set_write_timeout(Some(Duration::from_secs(2)));
    if !read_only && size.rows > 0 && size.cols > 0 {
        let _ = resize(shared, size.rows, size.cols);
    }
    let me = shared
        .next_client
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    {
        let mut clients = lock(&shared.clients);
        let redraw = lock(&shared.term).redraw();
        if writer.write_all(&redraw).is_err() {
            return;
        }
        let Ok(clone) = writer.try_clone() else {
            return;
        };
        clients.push(Attached {
            id: me,
            stream: clone,
            read_only,
        });
        shared.set_clients(&clients);
    }
    if read_only {
        observer(shared, "observer.joined", me, Some(size));
        log!(
            "a terminal watches (read-only, {}x{})",
            size.rows,
            size.cols
        );
    }
    let mut buf = [0u8; 4096];
    loop {
        match reader.read(&mut buf) {
            Ok(0) | Err(_) => break,
            // What a watcher types goes nowhere: not to the program, not to the recording.
            Ok(_) if read_only => {}
            Ok(n) => {
                if shared.write_input(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = writer.shutdown(std::net::Shutdown::Both);
    let mut clients = lock(&shared.clients);
    clients.retain(|c| c.id != me);
    shared.set_clients(&clients);
    drop(clients);
    if read_only {
        observer(shared, "observer.left", me, None);
    }
}

/// Notes a watcher joining or leaving in the recording, as a service event.
fn observer(shared: &Shared, kind: &str, id: u64, size: Option<Size>) {
    let mut data = serde_json::json!({ "kind": kind, "observer": id });
    if let Some(size) = size {
        data["rows"] = size.rows.into();
        data["cols"] = size.cols.into();
    }
    shared.tee.record(TeeEvent::Mark {
        stream: "service".into(),
        data,
    });
}

/// How long `stop` waits for a session's screen to come back to its prompt before it signals.
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// How long `stop` lets what the program left in its process group end on its own (and then
/// at least, after SIGTERM, before SIGKILL).
const LEFTOVER_WAIT: Duration = Duration::from_secs(1);

/// How long `stop` waits for the harness to exit on its own exit keys before signalling.
const EXIT_KEYS_WAIT: Duration = Duration::from_secs(3);
