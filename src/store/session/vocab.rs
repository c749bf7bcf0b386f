//! The words a record holds that spex decides by: who launched a session, what kind of
//! attention it waits on, how that attention can be answered. Each is an enum that reads and
//! writes exactly the strings records and `--json` have always held; a value this spex does not
//! know (a harness, or an older or newer spex, wrote it) is kept as `Other` and written back as
//! it was. Types and their serde only.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, Visitor};
use serde::{Serialize, Serializer};

/// An enum over known strings with an `Other(String)` fallback: `as_str`, `From<&str>` (the
/// one way a string becomes a value, so a known string is never an `Other`), `Display`, and
/// serde as a plain string. `Default` is the empty string, what a missing member read as when
/// these were strings.
macro_rules! vocabulary {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
            /// A value this spex does not know: kept, and written back as it was.
            Other(String),
        }

        impl $name {
            /// Every known value, in the order declared.
            #[cfg(test)]
            pub const KNOWN: &[$name] = &[$($name::$variant),+];

            /// The string a record holds for it.
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$variant => $text,)+
                    $name::Other(s) => s,
                }
            }
        }

        impl Default for $name {
            fn default() -> $name {
                $name::Other(String::new())
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> $name {
                match s {
                    $($text => $name::$variant,)+
                    other => $name::Other(other.to_owned()),
                }
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> $name {
                match $name::from(s.as_str()) {
                    $name::Other(_) => $name::Other(s),
                    known => known,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                struct Words;
                impl Visitor<'_> for Words {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str("a string")
                    }
                    // A known value is matched without copying the string (`sessions --all`
                    // reads thousands of records).
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$name, E> {
                        Ok($name::from(v))
                    }
                    fn visit_string<E: de::Error>(self, v: String) -> Result<$name, E> {
                        Ok($name::from(v))
                    }
                }
                d.deserialize_str(Words)
            }
        }
    };
}

vocabulary! {
    /// Who started the session (`launched_by`).
    pub enum LaunchedBy {
        /// `spex launch` (or spex's own server for a thread it started).
        Spex = "spex",
        /// The harness was started outside spex (a person ran it); its first hook made the
        /// record.
        Itself = "self",
    }
}

vocabulary! {
    /// What kind of attention a session waits on: an attention's `reason` (why it waits) and
    /// its `kind` (what dialog answers it). A `kind` that is none of the dialogs spex knows is
    /// written `other`, which reads as `Other("other")`.
    pub enum AttentionKind {
        /// The harness asks leave to run a tool.
        Permission = "permission",
        /// The agent asks the person a question.
        Question = "question",
        /// The harness asks to go ahead with a plan.
        Plan = "plan",
        /// A turn failed: a new prompt answers it.
        TurnFailed = "turn_failed",
    }
}

impl AttentionKind {
    /// The kind of an attention that is none of the dialogs spex knows: `other`.
    pub fn other() -> AttentionKind {
        AttentionKind::Other("other".to_owned())
    }
}

vocabulary! {
    /// How an attention can be answered here (`via.how`).
    pub enum AnswerWay {
        /// Keys typed into the terminal spex hosts.
        Keys = "keys",
        /// A response sent as a client of the harness's server.
        Server = "server",
        /// The hook that waits for the answer takes it.
        Hook = "hook",
        /// The next prompt answers it (the agent asked through `spex session ask`).
        Prompt = "prompt",
        /// Nothing here can answer it; `why` says why.
        TerminalOnly = "terminal only",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each value reads from the string it writes, as a JSON member and on its own; an unknown
    /// one comes back as written.
    fn round_trips<T>(known: &[T], unknown: &str)
    where
        T: Serialize + for<'de> Deserialize<'de> + PartialEq + fmt::Debug + for<'a> From<&'a str>,
        T: AsRef<str>,
    {
        let words: Vec<&str> = known.iter().map(AsRef::as_ref).collect();
        for (value, word) in known.iter().zip(&words) {
            let json = serde_json::to_value(value).unwrap();
            assert_eq!(json, serde_json::Value::String((*word).to_owned()));
            assert_eq!(&serde_json::from_value::<T>(json).unwrap(), value);
            assert_eq!(&T::from(*word), value);
        }
        let other: T = serde_json::from_str(&serde_json::to_string(unknown).unwrap()).unwrap();
        assert!(!words.contains(&other.as_ref()), "{unknown} is unknown");
        assert_eq!(other.as_ref(), unknown);
        assert_eq!(
            serde_json::to_value(&other).unwrap(),
            serde_json::Value::String(unknown.to_owned())
        );
        // Escaped in the JSON, so serde hands over an owned string.
        let escaped: T = serde_json::from_str(r#""\u0073pex""#).unwrap();
        assert_eq!(escaped, T::from("spex"));
    }

    impl AsRef<str> for LaunchedBy {
        fn as_ref(&self) -> &str {
            self.as_str()
        }
    }

    impl AsRef<str> for AttentionKind {
        fn as_ref(&self) -> &str {
            self.as_str()
        }
    }

    impl AsRef<str> for AnswerWay {
        fn as_ref(&self) -> &str {
            self.as_str()
        }
    }

    #[test]
    fn launched_by_round_trips_every_value_and_keeps_an_unknown_one() {
        round_trips(LaunchedBy::KNOWN, "user");
        assert_eq!(
            LaunchedBy::KNOWN
                .iter()
                .map(LaunchedBy::as_str)
                .collect::<Vec<_>>(),
            ["spex", "self"]
        );
    }

    #[test]
    fn an_attention_kind_round_trips_every_value_and_keeps_an_unknown_one() {
        round_trips(AttentionKind::KNOWN, "idle_prompt");
        assert_eq!(
            AttentionKind::KNOWN
                .iter()
                .map(AttentionKind::as_str)
                .collect::<Vec<_>>(),
            ["permission", "question", "plan", "turn_failed"]
        );
        assert_eq!(AttentionKind::other().as_str(), "other");
        assert_eq!(AttentionKind::from("other"), AttentionKind::other());
    }

    #[test]
    fn an_answer_way_round_trips_every_value_and_keeps_an_unknown_one() {
        round_trips(AnswerWay::KNOWN, "carrier pigeon");
        assert_eq!(
            AnswerWay::KNOWN
                .iter()
                .map(AnswerWay::as_str)
                .collect::<Vec<_>>(),
            ["keys", "server", "hook", "prompt", "terminal only"]
        );
    }

    /// A member that was an empty string (or a record's default) reads and writes as before.
    #[test]
    fn the_default_is_the_empty_string() {
        assert_eq!(LaunchedBy::default().as_str(), "");
        assert_eq!(
            serde_json::from_str::<AnswerWay>(r#""""#).unwrap(),
            AnswerWay::default()
        );
    }
}
