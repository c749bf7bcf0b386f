//! The hand-off of an answer from `spex answer` to a hook that waits for it (harness-neutral).
//! An answer is one private file in the session's folder, named by the attention it answers
//! and carrying the harness's id of the call it is for: a hook waits on one attention and
//! takes only its own answer, so a stale hook (its dialog answered at the terminal) never
//! takes the answer meant for the next dialog. The hook's side is `dispatch::wait`; the
//! answerer's is `runtime::answer::by_hook`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::ProjectStore;
use super::session::{StoreError, is_valid_id};
use crate::fsutil;

/// An answer posted for a waiting hook. Fields in alphabetical order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Posted {
    /// Per question of a question dialog, in the harness's order: the option labels picked
    /// (several joined by `, `) or free text, as the harness takes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<String>,
    /// The attention it answers (`a3`).
    pub attention: String,
    /// The harness's id of the call the attention asks about, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// `allow`, `allow-session`, `deny`, ... (a question's: `answer`).
    pub choice: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl ProjectStore {
    /// Where the answer to attention `att` of session `id` waits to be taken.
    pub fn answer_file(&self, id: &str, att: &str) -> PathBuf {
        self.session_dir(id).join(format!("answer-{att}.json"))
    }

    /// Posts `p` for the hook waiting on its attention (atomic, private).
    pub fn post_answer(&self, id: &str, p: &Posted) -> Result<(), StoreError> {
        super::session::check_id(&p.attention, "attention")?;
        let path = self.answer_file(id, &p.attention);
        fsutil::write_private(&path, &super::json_bytes(p))
            .map(drop)
            .map_err(|source| StoreError::Io { path, source })
    }

    /// Takes the answer posted for attention `att`, only when it is for call `call_id` (an
    /// answer for another call stays where it is). Taken means removed: the answerer sees the
    /// file gone.
    pub fn take_answer(&self, id: &str, att: &str, call_id: Option<&str>) -> Option<Posted> {
        if !is_valid_id(att) {
            return None;
        }
        let path = self.answer_file(id, att);
        let bytes = fsutil::read_opt(&path).ok()??;
        let p: Posted = serde_json::from_slice(&bytes).ok()?;
        if p.attention != att || p.call_id.as_deref() != call_id {
            return None;
        }
        fs_err::remove_file(&path).ok()?;
        Some(p)
    }

    /// Whether an answer for `att` still waits to be taken.
    pub fn answer_pending(&self, id: &str, att: &str) -> bool {
        is_valid_id(att) && self.answer_file(id, att).exists()
    }

    /// Takes back an answer no hook took; true when there was one.
    pub fn withdraw_answer(&self, id: &str, att: &str) -> bool {
        is_valid_id(att) && fs_err::remove_file(self.answer_file(id, att)).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn a_hook_takes_only_the_answer_for_its_attention_and_call() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProjectStore::new(dir.path(), dir.path());
        let p = Posted {
            attention: "a2".into(),
            call_id: Some("toolu_2".into()),
            choice: "allow".into(),
            ..Posted::default()
        };
        store.post_answer("s1", &p).unwrap();
        let file = store.answer_file("s1", "a2");
        assert_eq!(
            fs_err::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // The stale hook of the last dialog (a1), and a hook of a2 for another call: nothing.
        assert_eq!(store.take_answer("s1", "a1", Some("toolu_1")), None);
        assert_eq!(store.take_answer("s1", "a2", Some("toolu_1")), None);
        assert_eq!(store.take_answer("s1", "a2", None), None);
        assert!(store.answer_pending("s1", "a2"));
        assert_eq!(store.take_answer("s1", "a2", Some("toolu_2")), Some(p));
        assert!(!store.answer_pending("s1", "a2"));
        assert!(!store.withdraw_answer("s1", "a2"));
    }
}
