//! `spex board`: a web page served by spex itself with every session of every project, live,
//! and the CLI's actions on them. Security first: the gate ([`gate`]) runs before every
//! handler; the token never leaves the store or the first line of `spex board`'s output.

pub mod actions;
pub mod assets;
pub mod gate;
pub mod hub;
pub mod links;
pub mod peer;
pub mod screen;
pub mod server;
pub mod shared;
pub mod state;
pub mod view;
pub mod viewing;

use std::net::SocketAddr;
use std::sync::Arc;

use crate::env::Env;
use crate::hint::Hint;

/// How the board is started.
#[derive(Debug, Clone)]
pub struct Options {
    pub listen: SocketAddr,
    pub public_url: Option<gate::PublicUrl>,
}

#[derive(Debug, thiserror::Error)]
pub enum BoardError {
    #[error("cannot listen on `{addr}`: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(
        "`{0}` is not a URL the board can be reached at (an `http://` or `https://` URL with a host)"
    )]
    PublicUrl(String),
    #[error("the board's files in `{path}`: {source}")]
    Files {
        path: String,
        source: std::io::Error,
    },
    #[error("no board runs")]
    NotRunning,
    #[error("the board did not start: {0}")]
    NotStarted(String),
}

impl Hint for BoardError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            BoardError::Listen { .. } => {
                "another program holds the port: `spex board --listen 127.0.0.1:0` takes a free one"
                    .into()
            }
            BoardError::PublicUrl(_) => {
                "`--public-url https://board.example` (the address a browser opens)".into()
            }
            BoardError::Files { path, .. } => format!("check that `{path}` is yours and writable"),
            BoardError::NotRunning => "`spex board` starts one".into(),
            BoardError::NotStarted(_) => "run `spex board` in the foreground to see why".into(),
        })
    }
}

/// A bound listener with everything the server needs.
pub struct Bound {
    pub listener: std::net::TcpListener,
    pub shared: Arc<shared::Shared>,
}

/// Binds the board's address and makes its token (written 0600 to the store).
pub fn bind(env: &Env, opts: &Options, paths: &state::Paths) -> Result<Bound, BoardError> {
    let listener =
        std::net::TcpListener::bind(opts.listen).map_err(|source| BoardError::Listen {
            addr: opts.listen,
            source,
        })?;
    let files = |source| BoardError::Files {
        path: paths.dir.display().to_string(),
        source,
    };
    listener.set_nonblocking(true).map_err(files)?;
    let local = listener.local_addr().map_err(files)?;
    let token = state::new_secret().map_err(files)?;
    state::write_token(paths, &token).map_err(files)?;
    let (tx, _) = tokio::sync::broadcast::channel(1024);
    let shared = Arc::new(shared::Shared {
        env: env.clone(),
        site: gate::Site::new(local, opts.public_url.as_ref()),
        token,
        tx,
        local,
        viewing: viewing::Viewing::default(),
    });
    Ok(Bound { listener, shared })
}

/// The address a person opens: the public URL when given, else the loopback address (a
/// board on every interface is still opened here as `127.0.0.1`).
pub fn url_of(local: SocketAddr, public: Option<&gate::PublicUrl>) -> String {
    if let Some(p) = public {
        return p.base.clone();
    }
    let ip = local.ip();
    if ip.is_unspecified() || ip.is_loopback() {
        if ip.is_ipv6() {
            return format!("http://[::1]:{}", local.port());
        }
        return format!("http://127.0.0.1:{}", local.port());
    }
    format!("http://{local}")
}

/// Serves until SIGINT or SIGTERM; the follower of the streams runs in a thread beside.
pub fn serve(bound: Bound) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let shared = bound.shared.clone();
    // The watcher folds in what no hook reports (a killed harness, an Esc at the terminal),
    // so the stream the board follows is complete; in standby while another one runs.
    let _watcher = crate::watch::spawn(shared.env.clone());
    {
        let env = shared.env.clone();
        let tx = shared.tx.clone();
        std::thread::Builder::new()
            .name("board-follow".into())
            .spawn(move || {
                if let Err(e) = hub::follow(&env, &tx) {
                    eprintln!("spex board: the event stream is not followed: {e:#}");
                }
            })?;
    }
    let kept = shared.clone();
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(bound.listener)?;
        let app = server::router(shared).into_make_service_with_connect_info::<SocketAddr>();
        // Not a graceful shutdown: the pages' sockets never close on their own.
        tokio::select! {
            r = axum::serve(listener, app) => r?,
            () = stopped() => {}
        }
        anyhow::Ok(())
    })?;
    // Sockets the page keeps open do not hold the process: it ends here.
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
    // No page shows anything once the board stops: the notifier sends again at once.
    kept.viewing.clear(&kept.env);
    Ok(())
}

/// SIGINT or SIGTERM (`spex board --stop`).
async fn stopped() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = async {
            match term.as_mut() {
                Some(t) => { t.recv().await; }
                None => std::future::pending::<()>().await,
            }
        } => {}
    }
}
