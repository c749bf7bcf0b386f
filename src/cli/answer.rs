//! `spex answer`, `spex approve`, `spex deny`: answer what a session waits on (a permission, a
//! question, a plan), confirmed by the harness's own evidence.

use std::time::Duration;

use super::outcome::{Failed, Outcome};
use super::output;
use crate::env::Env;
use crate::runtime;

/// Answer the attention a session waits on: a permission (`allow`, `allow-session`, `deny`,
/// `cancel`), a question (an option's label or number), a plan (`allow`, `deny`).
///
/// Applied only to the open attention (the one `--attention` names, when given: an attention
/// that closed meanwhile is refused, never applied to the next one), and confirmed by the
/// harness: the dialog is gone and the session moved on (keys into a session spex hosts), or
/// the server resolved the request (a session on the harness's server). A session cannot
/// answer its own attention. `spex show <session>` lists the choices.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(value_name = "ID", help = super::args::ID_HELP, add = super::complete::sessions())]
    pub id: String,
    /// The choice: `allow`, `allow-session`, `deny`, `cancel`; for a question, one answer per
    /// question in order: an option's label or number, several comma-separated for a
    /// multi-select (`Cheese,Basil`), or free text where the question takes it.
    #[arg(required = true, num_args = 1.., value_name = "CHOICE")]
    pub choice: Vec<String>,
    #[command(flatten)]
    pub common: Common,
}

/// Allow what the session asks (`--always`: for the rest of the session).
#[derive(Debug, clap::Args)]
pub struct ApproveArgs {
    #[arg(value_name = "ID", help = super::args::ID_HELP, add = super::complete::sessions())]
    pub id: String,
    /// Allow it for the rest of the session (where the harness offers that).
    #[arg(long)]
    pub always: bool,
    #[command(flatten)]
    pub common: Common,
}

/// Deny what the session asks, with a message for the agent where the harness takes one.
#[derive(Debug, clap::Args)]
pub struct DenyArgs {
    #[arg(value_name = "ID", help = super::args::ID_HELP, add = super::complete::sessions())]
    pub id: String,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, clap::Args)]
pub struct Common {
    /// A message for the agent (with `deny`: what to do instead).
    #[arg(long)]
    pub message: Option<String>,
    /// The attention to answer (`a3`, as `spex show` prints it): refused when it is not the
    /// open one.
    #[arg(long, value_name = "ATT")]
    pub attention: Option<String>,
    /// Seconds to wait for the harness to confirm.
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
    /// Print `{attention, choice, message, via, confirmed, elapsed_ms, taken_ms}` as JSON.
    #[arg(long)]
    pub json: bool,
    /// Who answered, as the closing event records it: another machine's board or answer link
    /// runs this command here over ssh, and the record says it was that, not this command line.
    #[arg(long, hide = true, value_enum, default_value_t = By::Cli)]
    pub by: By,
}

/// Who gave an answer (the closing event's `by`).
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum By {
    Cli,
    Board,
    Link,
    Desktop,
}

impl By {
    fn as_str(self) -> &'static str {
        match self {
            By::Cli => "cli",
            By::Board => "board",
            By::Link => "link",
            By::Desktop => "desktop",
        }
    }
}

pub fn run(args: &Args, env: &Env) -> anyhow::Result<Outcome> {
    answer(env, &args.id, &args.choice, &args.common)
}

pub fn approve(args: &ApproveArgs, env: &Env) -> anyhow::Result<Outcome> {
    let choice = if args.always {
        "allow-session"
    } else {
        "allow"
    };
    answer(env, &args.id, &[choice.to_owned()], &args.common)
}

pub fn deny(args: &DenyArgs, env: &Env) -> anyhow::Result<Outcome> {
    answer(env, &args.id, &["deny".to_owned()], &args.common)
}

fn answer(env: &Env, arg: &str, choices: &[String], c: &Common) -> anyhow::Result<Outcome> {
    let (store, id) = super::args::project_and_id(env, arg)?;
    let result = runtime::transport::answer(
        env,
        &store,
        &id,
        c.attention.as_deref(),
        choices,
        c.message.clone(),
        c.by.as_str(),
        Duration::from_secs(c.timeout),
    );
    match result {
        Ok(done) => {
            if c.json {
                output::json(&done);
            } else {
                output::print(&format!(
                    "answered {} of {} with {} ({}; confirmed in {} ms: {})\n",
                    done.attention,
                    store.label_of(&id),
                    done.choice,
                    done.via,
                    done.elapsed_ms,
                    done.confirmed
                ));
            }
            Ok(Outcome::Ok)
        }
        Err(e) => {
            if c.json {
                output::json(&serde_json::json!({
                    "answered": false,
                    "reason": e.reason(),
                    "error": crate::hint::spelled(&e),
                }));
            }
            if e.gone() {
                return Err(Failed::with(Outcome::Gone, e));
            }
            Err(e.into())
        }
    }
}
