//! The fake Gemini API that drives the REAL Gemini CLI offline: the one `spex check` ships,
//! `src/adapters/gemini/fake_api.rs` (its doc lists the endpoints and the script), compiled into
//! this rig by `tests/it/adapters/mod.rs`. Point Gemini at it with
//! [`super::gemini_home::gemini_command`] (or the env of [`super::gemini_home::gemini_env`]).

pub use crate::adapters::gemini::fake_api::*;
