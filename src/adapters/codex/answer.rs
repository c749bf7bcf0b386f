//! Answering Codex's approvals and questions (facts/answering-codex.md): what a
//! `PermissionRequest` payload opens, and how an attention of a thread on spex's own
//! app-server is answered as a client of that server (`server.rs` sends the response).

use serde_json::Value;

use crate::adapters::choice;
use crate::seam::answer::Answering;
use crate::store::session::{Attention, Session, Via};

pub struct CodexAnswering;

/// The attention a `PermissionRequest` opens: a command or patch approval with the decisions
/// the app-server takes for it (§1.3: `accept`, `acceptForSession`, `decline`, `cancel`; never
/// the permanent execpolicy amendment). A decline carries no message to the model.
pub fn ask(tool: Option<&str>, _input: &Value) -> Attention {
    Attention {
        kind: Some("permission".into()),
        tool: tool.map(str::to_owned),
        choices: vec![
            choice("allow", "accept", false),
            choice("allow-session", "acceptForSession", false),
            choice("deny", "decline", false),
            choice("cancel", "cancel (decline and end the turn)", false),
        ],
        ..Attention::default()
    }
}

impl Answering for CodexAnswering {
    fn via(&self, _a: &Attention, s: &Session) -> Via {
        if s.launched_by == "spex" {
            Via {
                how: "server".into(),
                why: None,
            }
        } else {
            Via {
                how: "terminal only".into(),
                why: Some("a Codex TUI started outside spex: answering it through its background server or its hook is not built yet".into()),
            }
        }
    }
}
