//! A client of spex's Codex server, for the parts that speak to it (sessions, answers).

use std::time::Duration;

use super::rpc::{Client, RpcError};
use crate::seam::session_server::{ServerCtx, ServerError, ServerErrorKind};

/// How long one request may take; a turn start or steer answers in milliseconds.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

pub fn error(e: &RpcError) -> ServerError {
    let kind = match e {
        RpcError::Connect { .. } | RpcError::Handshake { .. } | RpcError::Closed { .. } => {
            ServerErrorKind::Down
        }
        RpcError::Timeout { .. } => ServerErrorKind::Timeout,
        RpcError::Server { message, .. }
            if message.contains("no rollout found") || message.contains("not found") =>
        {
            ServerErrorKind::UnknownThread
        }
        _ => ServerErrorKind::Refused,
    };
    ServerError::new(kind, e.to_string())
}

pub fn client(ctx: &ServerCtx) -> Result<Client, ServerError> {
    Client::open(ctx.socket, "spex", CALL_TIMEOUT).map_err(|e| error(&e))
}
