//! `spex notify`: the notifier (see `crate::notify`): `--watch` runs the sender in the
//! foreground, `--test` sends one notification through every channel, `--status` shows the
//! channels and their last deliveries.

use super::notifier::config;
use super::outcome::Outcome;
use super::output;
use crate::config::notify::Notify;
use crate::env::Env;
use crate::notify::{self, message::Message, state};

/// Tell a person when a session needs them: a permission, a question, a plan, a failed turn,
/// a turn's end or an exit, through the channels the `notify` key configures (a command, a
/// webhook in plain JSON or ntfy's format).
///
/// Each attention is announced once, after the dwell (`notify.dwell`, default 5s), and only
/// while it is still open and nobody is attached to its session; turn ends that come together
/// are one summary. One sender runs per user: `spex board` and `spex watch` (the user service)
/// run it too when a channel is configured, a second one standing by until the first ends;
/// `--status` names the process that sends. See docs/guides/notifications.md.
#[expect(
    clippy::struct_excessive_bools,
    reason = "clap's flags: one mode of three, and `--json`"
)]
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("mode").required(true).args(["watch", "test", "status"])))]
pub struct Args {
    /// Run the sender in the foreground (and the watcher with it), logging to stderr.
    #[arg(long)]
    pub watch: bool,
    /// Send one test notification through every configured channel and say whether each
    /// accepted it.
    #[arg(long)]
    pub test: bool,
    /// Show the channels, the sending process (pid and command), and each channel's last
    /// delivery and outcome.
    #[arg(long)]
    pub status: bool,
    /// With `--status`: one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    let cfg = config(env)?;
    if args.watch {
        if !cfg.any_channel() {
            crate::log::log!(
                "notify: no channel is configured (`notify.command`, `notify.webhook`): nothing will be sent"
            );
        }
        notify::run(env, &cfg)?;
        return Ok(Outcome::Ok);
    }
    if args.test {
        return Ok(test(env, &cfg));
    }
    status(args, env, &cfg);
    Ok(Outcome::Ok)
}

fn test(env: &Env, cfg: &Notify) -> Outcome {
    let m = Message {
        event: "test".into(),
        project: "spex".into(),
        session: "test".into(),
        harness: "spex".into(),
        title: "spex: test notification".into(),
        message: "This channel works: spex will tell you here when a session needs you.".into(),
        time: crate::store::now_rfc3339(),
        ..Message::default()
    };
    let results = notify::test(env, cfg, &m);
    if results.is_empty() {
        output::print(
            "no channel is configured: set `notify.command` or `notify.webhook` (docs/guides/notifications.md)\n",
        );
        return Outcome::Differs;
    }
    let mut all = true;
    let mut text = String::new();
    for (name, r) in results {
        match r {
            Ok(d) => text.push_str(&format!("{name}: accepted ({d})\n")),
            Err(d) => {
                all = false;
                text.push_str(&format!("{name}: failed: {d}\n"));
            }
        }
    }
    output::print(&text);
    if all { Outcome::Ok } else { Outcome::Differs }
}

fn status(args: &Args, env: &Env, cfg: &Notify) {
    let channels: Vec<&str> = notify::channels::configured(env, cfg)
        .iter()
        .map(notify::channels::Channel::name)
        .collect();
    let deliveries = state::status(env);
    let sender = notify::holder(env);
    let by = sender.and_then(|pid| state::sender(env, pid));
    if args.json {
        output::json(&serde_json::json!({
            "sender": sender, "sender_by": by.as_ref().map(|i| &i.by),
            "sender_since": by.as_ref().map(|i| &i.since),
            "channels": channels, "on": cfg.on,
            "dwell_ms": u64::try_from(cfg.dwell.as_millis()).unwrap_or(u64::MAX),
            "deliveries": deliveries,
        }));
        return;
    }
    let mut text = match sender {
        Some(pid) => match &by {
            Some(i) => format!(
                "sender: running (pid {pid}, `{}`, since {})\n",
                i.by, i.since
            ),
            None => format!("sender: running (pid {pid})\n"),
        },
        None => "sender: not running (`spex notify --watch`)\n".to_owned(),
    };
    text.push_str(&format!(
        "announces: {} after {}\n",
        cfg.on.join(", "),
        humantime::format_duration(cfg.dwell)
    ));
    if channels.is_empty() {
        text.push_str("no channel is configured\n");
    }
    let mut rows = vec![vec![
        "CHANNEL".to_owned(),
        "LAST".to_owned(),
        "OUTCOME".to_owned(),
        "FAILURES".to_owned(),
        "DETAIL".to_owned(),
    ]];
    for name in &channels {
        let d = deliveries.get(*name).cloned().unwrap_or_default();
        rows.push(vec![
            (*name).to_owned(),
            if d.at.is_empty() {
                "never".into()
            } else {
                d.at.clone()
            },
            if d.outcome.is_empty() {
                "-".into()
            } else {
                d.outcome.clone()
            },
            d.failures.to_string(),
            crate::text::visible(
                d.last_failure
                    .as_deref()
                    .filter(|_| d.outcome == "failed")
                    .unwrap_or(&d.detail),
            ),
        ]);
    }
    text.push_str(&output::table(&rows));
    output::print(&text);
}
