//! What the board's handlers share: the environment, where it is reached, its secrets, and
//! the channel its changes go out on.

use std::net::SocketAddr;

use tokio::sync::broadcast;

use super::gate::Site;
use super::hub::Push;
use crate::env::Env;

/// What every handler shares.
pub struct Shared {
    pub env: Env,
    pub site: Site,
    pub token: String,
    pub tx: broadcast::Sender<Push>,
    /// The address the board listens on (the other end of every client's connection).
    pub local: SocketAddr,
    /// The sessions the pages show with the page visible (the notifier's viewing markers).
    pub viewing: super::viewing::Viewing,
}
