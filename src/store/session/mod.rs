//! Sessions in the store: a session's record and its event log, the state machine every writer
//! of a record shares, reading and writing them under the session's lock, and the names a person
//! finds a session by. It knows no harness. Its files, by job: the record's types (`record`,
//! `turn`, `attention`, `usage`, `process`), the transitions (`state`, `budgets`), storage
//! (`storage`), name lookup (`lookup`) and the order people read them in (`order`), the id and text helpers (`ids`, `text`, with
//! `error`), and the words a record holds that spex decides by (`vocab`). Every public item is
//! re-exported here, so callers name `store::session::X`; the files import each other by their
//! own paths, never through this one.

mod attention;
mod budgets;
mod error;
mod ids;
mod lookup;
mod order;
mod process;
mod record;
mod state;
mod storage;
mod text;
mod turn;
mod usage;
mod vocab;

pub use attention::{Answering, Attention, Choice, Question, Via};
pub use error::{StoreError, check_id};
pub use ids::is_valid_id;
pub use lookup::Found;
pub use order::attention_first;
pub use process::{ExitStatus, Kept, ProcessId};
// The type `ProjectStore::events` returns: only tests name it outside the store.
#[cfg(test)]
pub use record::Event;
pub use record::{Declared, DeclaredState, Flags, Session, Status};
pub use state::{NewEvent, new_event};
pub use text::{elapsed_ms, ellipsis};
pub use turn::{Child, ChildState, ErrorKind, Failure, INTERRUPT_SETTLE, Timeout, Turn, TurnState};
pub use usage::{Usage, UsageCursor, count};
pub use vocab::{AnswerWay, AttentionKind, LaunchedBy};
