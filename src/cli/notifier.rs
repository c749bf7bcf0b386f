//! What `spex notify` and the long-lived commands that run the sender beside their own work
//! (`spex board`, `spex watch`) share: the `notify` key as the current folder sees it.

use crate::config::notify::Notify;
use crate::env::Env;
use crate::notify;

/// The `notify` key of this checkout's layers, or of the user's file outside a checkout.
pub fn config(env: &Env) -> anyhow::Result<Notify> {
    let known = crate::adapters::known();
    Ok(match super::args::current_tree() {
        Ok(t) => {
            let root = crate::config::source_root(&t.root, &t.main);
            crate::config::load(&env.user_config_file(), &root, &known)?.notify
        }
        Err(_) => crate::config::load_user(&env.user_config_file(), &known)?.notify,
    })
}

/// Runs the sender in a thread of this long-lived process (`by`: `spex board`, `spex watch`),
/// in standby while another sender works, when the `notify` key configures a channel; the
/// board's public URL builds the answer links when the key names none. A `notify` key that
/// does not parse stops only the sender, said in the log.
pub fn beside(env: &Env, by: &'static str, public_url: Option<&str>) {
    let mut cfg = match config(env) {
        Ok(c) => c,
        Err(e) => {
            crate::log::log!("notify: not sending: {e:#}");
            return;
        }
    };
    if !cfg.any_channel() {
        return;
    }
    if cfg.public_url.is_none() {
        cfg.public_url = public_url.map(|u| u.trim_end_matches('/').to_owned());
    }
    // The thread runs as long as the process.
    drop(notify::spawn(env.clone(), cfg, by));
}
