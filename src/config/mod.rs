//! Project configuration: `$XDG_CONFIG_HOME/spex/config.jsonc`, under the repo's `spex.jsonc`,
//! under the git-excluded `spex.local.jsonc` (later layers win key by key). Validates every key
//! with its file, line and column. Knows no harness: the ids it accepts are handed in (`Known`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use jsonc_parser::ast::Value as Ast;
use jsonc_parser::common::Ranged;

pub mod editor;
mod jsonc;
pub mod notify;
pub mod prices;
pub mod remotes;

use jsonc::name_of;

pub const PROJECT_FILE: &str = "spex.jsonc";
pub const LOCAL_FILE: &str = "spex.local.jsonc";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("`{file}`, line {line}, column {column}: {message}")]
    Invalid {
        file: PathBuf,
        line: usize,
        column: usize,
        message: String,
        hint: String,
    },
    /// `fs_err`'s error, which names the file.
    #[error("cannot read the configuration: {0}")]
    Io(#[source] std::io::Error),
}

impl crate::hint::Hint for ConfigError {
    fn hint(&self) -> Option<String> {
        match self {
            ConfigError::Invalid { hint, .. } => Some(hint.clone()),
            ConfigError::Io { .. } => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Off,
    #[default]
    Nudge,
    Block,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StopGate {
    #[default]
    Off,
    Ask,
}

/// What happens to a turn past its budget (`onTimeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnTimeout {
    /// The turn ends `timed_out`; the harness goes on with it.
    #[default]
    Mark,
    /// The turn ends `timed_out` and the session is interrupted through its own transport
    /// (where spex hosts it).
    Interrupt,
}

/// A turn's budgets (`turnTimeout`, `stallTimeout`, `onTimeout`): off unless set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Budgets {
    /// The longest a turn may run before it ends `timed_out`.
    pub turn: Option<std::time::Duration>,
    /// The longest a working turn may show no progress before it is marked stalled.
    pub stall: Option<std::time::Duration>,
    pub on_timeout: OnTimeout,
}

/// A budget as people write it: `45m`, `1h30m`, `90s` (humantime's units).
pub fn duration_words(d: std::time::Duration) -> String {
    humantime::format_duration(std::time::Duration::from_secs(d.as_secs().max(1))).to_string()
}

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct HarnessCommand {
    pub command: Option<String>,
    pub args: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    /// Adapter ids to materialize, canonical and deduplicated.
    pub harnesses: Vec<&'static str>,
    pub default_harness: &'static str,
    pub harness: BTreeMap<&'static str, HarnessCommand>,
    pub spec_first: Policy,
    pub stop_gate: StopGate,
    /// Record every session `spex launch` starts as a cassette.
    pub record: bool,
    /// Literal text a recording replaces with `<scrubbed>` (besides spex's own rules).
    pub scrub: Vec<String>,
    /// The byte `spex attach` detaches on (`detachKey`, e.g. `"ctrl-]"`; default `Ctrl-\`).
    pub detach_key: u8,
    /// `store.eventLogBytes`: the bound of one session's event log.
    pub event_log_bytes: u64,
    /// `turnTimeout`, `stallTimeout`, `onTimeout`.
    pub budgets: Budgets,
    /// `answering.hookWaitSecs`: how long a hook that may wait for an answer from elsewhere
    /// (`spex answer`) waits; 0: never.
    pub answer_wait_secs: u64,
    /// `answering.away`: away mode while `spex away` was never run (see `store::away`).
    pub away: bool,
    /// `editor`: the command line `spex open` runs (see `editor`), before `$VISUAL`/`$EDITOR`.
    pub editor: Option<String>,
    /// `usage.prices`: per model, per million tokens (see `prices`).
    pub prices: prices::Prices,
    /// `notify`: the notifier's events, channels and dwell (see `notify`).
    pub notify: notify::Notify,
    /// `remotes`: the other machines, by name (see `remotes`; `crate::remote` reads them from
    /// the user's file alone).
    pub remotes: BTreeMap<String, remotes::RemoteEntry>,
    /// The files that were read, lowest layer first.
    pub sources: Vec<PathBuf>,
}

/// `Ctrl-\\`: the default detach key.
pub const DETACH_KEY: u8 = 0x1c;

/// The control byte a key name like `ctrl-]` or `ctrl-a` sends.
pub fn control_key(name: &str) -> Option<u8> {
    let key = name.to_ascii_lowercase();
    let c = key
        .strip_prefix("ctrl-")
        .or_else(|| key.strip_prefix("c-"))?;
    let mut chars = c.chars();
    let (Some(c), None) = (chars.next(), chars.next()) else {
        return None;
    };
    match c {
        'a'..='z' => Some(c as u8 - b'a' + 1),
        '@' | '[' | '\\' | ']' | '^' | '_' => Some(c as u8 ^ 0x40),
        _ => None,
    }
}

/// How a control byte is written (`Ctrl-\\`).
pub fn control_key_name(byte: u8) -> String {
    format!("Ctrl-{}", char::from((byte ^ 0x40).to_ascii_uppercase()))
}

/// Default bound of one session's event log (`store.eventLogBytes`).
pub const EVENT_LOG_BYTES: u64 = 8 * 1024 * 1024;

/// Default of `answering.hookWaitSecs`: Claude Code's own default hook timeout, so a waiting
/// hook outlives a person's absence of a few minutes.
pub const ANSWER_WAIT_SECS: u64 = 600;

/// The harness ids a configuration may name, handed in by the caller (from the adapter
/// registry), so this module validates ids without knowing any.
#[derive(Debug, Clone)]
pub struct Known {
    /// Canonical ids in the default order; the first is the default harness.
    pub ids: Vec<&'static str>,
    /// The canonical id of an id or alias, `None` when unknown.
    pub canonical: fn(&str) -> Option<&'static str>,
}

impl Known {
    /// The ids as a hint lists them: `` `a`, `b` ``.
    fn list(&self) -> String {
        self.ids
            .iter()
            .map(|id| format!("`{id}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The ids as a JSON list's items: `"a", "b"`.
    fn json_items(&self) -> String {
        self.ids
            .iter()
            .map(|id| format!("\"{id}\""))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Config {
    /// The defaults: every known harness selected, the first one the default.
    pub fn new(known: &Known) -> Self {
        Config {
            default_harness: known.ids.first().copied().unwrap_or_default(),
            harnesses: known.ids.clone(),
            harness: BTreeMap::new(),
            spec_first: Policy::default(),
            stop_gate: StopGate::default(),
            record: false,
            scrub: Vec::new(),
            detach_key: DETACH_KEY,
            event_log_bytes: EVENT_LOG_BYTES,
            answer_wait_secs: ANSWER_WAIT_SECS,
            away: false,
            editor: None,
            prices: prices::Prices::default(),
            notify: notify::Notify::default(),
            remotes: BTreeMap::new(),
            budgets: Budgets::default(),
            sources: Vec::new(),
        }
    }
}

struct Layer<'a> {
    file: &'a Path,
    text: &'a str,
}

impl Layer<'_> {
    fn err(&self, pos: usize, message: impl Into<String>, hint: impl Into<String>) -> ConfigError {
        let before = &self.text[..pos.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        ConfigError::Invalid {
            file: self.file.to_owned(),
            line,
            column,
            message: message.into(),
            hint: hint.into(),
        }
    }
}

fn harness_id(
    layer: &Layer,
    known: &Known,
    v: &Ast,
    key: &str,
) -> Result<&'static str, ConfigError> {
    let Ast::StringLit(s) = v else {
        return Err(layer.err(
            v.start(),
            format!("`{key}` must be a string"),
            format!("use one of {}", known.list()),
        ));
    };
    (known.canonical)(&s.value).ok_or_else(|| {
        layer.err(
            v.start(),
            format!("`{key}`: unknown harness `{}`", s.value),
            format!("use one of {}", known.list()),
        )
    })
}

fn string(layer: &Layer, v: &Ast, key: &str) -> Result<String, ConfigError> {
    match v {
        Ast::StringLit(s) => Ok(s.value.to_string()),
        _ => Err(layer.err(
            v.start(),
            format!("`{key}` must be a string"),
            "quote the value",
        )),
    }
}

/// A budget (`turnTimeout`, `stallTimeout`): a duration in humantime's words, more than zero.
fn budget(layer: &Layer, v: &Ast, key: &str) -> Result<std::time::Duration, ConfigError> {
    let hint =
        "a duration such as \"45m\", \"1h30m\" or \"90s\" (leave the key out to have no budget)";
    let Ast::StringLit(s) = v else {
        return Err(layer.err(v.start(), format!("`{key}` must be a string"), hint));
    };
    match humantime::parse_duration(&s.value) {
        Ok(d) if d >= std::time::Duration::from_secs(1) => Ok(d),
        Ok(_) => Err(layer.err(
            v.start(),
            format!("`{key}`: `{}` is shorter than a second", s.value),
            hint,
        )),
        Err(e) => Err(layer.err(
            v.start(),
            format!("`{key}`: `{}` is not a duration ({e})", s.value),
            hint,
        )),
    }
}

fn apply_layer(cfg: &mut Config, layer: &Layer, known: &Known) -> Result<(), ConfigError> {
    let parsed = jsonc_parser::parse_to_ast(
        layer.text,
        &jsonc_parser::CollectOptions::default(),
        &jsonc_parser::ParseOptions::default(),
    )
    .map_err(|e| {
        let pos = e.range().start;
        layer.err(
            pos,
            e.kind().to_string(),
            "fix the JSON syntax (comments and trailing commas are allowed)",
        )
    })?;
    let Some(root) = parsed.value else {
        return Ok(());
    };
    let Ast::Object(obj) = root else {
        return Err(layer.err(
            root.start(),
            "the configuration must be a JSON object",
            "wrap the keys in `{ }`",
        ));
    };
    for prop in &obj.properties {
        let key = name_of(&prop.name);
        let v = &prop.value;
        match key.as_str() {
            "$schema" => {}
            "harnesses" => apply_harnesses(cfg, layer, v, known)?,
            "defaultHarness" => {
                cfg.default_harness = harness_id(layer, known, v, "defaultHarness")?;
            }
            "harness" => apply_harness(cfg, layer, v, known)?,
            "policies" => apply_policies(cfg, layer, v)?,
            "store" => apply_store(cfg, layer, v)?,
            "answering" => apply_answering(cfg, layer, v)?,
            "usage" => prices::apply_usage(&mut cfg.prices, v)
                .map_err(|b| layer.err(b.at, b.message, b.hint))?,
            "editor" => cfg.editor = Some(editor_line(layer, v)?),
            "notify" => {
                notify::apply(&mut cfg.notify, v)
                    .map_err(|b| layer.err(b.at, b.message, b.hint))?;
            }
            "remotes" => remotes::apply(&mut cfg.remotes, v)
                .map_err(|b| layer.err(b.at, b.message, b.hint))?,
            "record" => {
                let Ast::BooleanLit(b) = v else {
                    return Err(layer.err(
                        v.start(),
                        "`record` must be `true` or `false`",
                        "e.g. \"record\": true",
                    ));
                };
                cfg.record = b.value;
            }
            "scrub" => apply_scrub(cfg, layer, v)?,
            "detachKey" => {
                let name = string(layer, v, "detachKey")?;
                cfg.detach_key = control_key(&name).filter(|b| ![0x03, 0x0d].contains(b)).ok_or_else(|| {
                    layer.err(
                        v.start(),
                        format!("`detachKey`: `{name}` is not a control key spex can detach on"),
                        "e.g. \"ctrl-]\" or \"ctrl-q\" (`ctrl-` and a letter or one of @ [ \\ ] ^ _, not ctrl-c or ctrl-m)",
                    )
                })?;
            }
            "turnTimeout" | "stallTimeout" => {
                let budget = Some(budget(layer, v, &key)?);
                if key == "turnTimeout" {
                    cfg.budgets.turn = budget;
                } else {
                    cfg.budgets.stall = budget;
                }
            }
            "onTimeout" => {
                cfg.budgets.on_timeout = match string(layer, v, "onTimeout")?.as_str() {
                    "mark" => OnTimeout::Mark,
                    "interrupt" => OnTimeout::Interrupt,
                    other => {
                        return Err(layer.err(
                            v.start(),
                            format!("`onTimeout`: unknown value `{other}`"),
                            "use `mark` (the turn is marked `timed_out`) or `interrupt` (marked, and the session interrupted)",
                        ));
                    }
                };
            }
            other => {
                return Err(layer.err(
                    prop.start(),
                    format!("unknown key `{other}`"),
                    "keys: `harnesses`, `defaultHarness`, `harness`, `policies`, `record`, `scrub`, `detachKey`, `store`, `turnTimeout`, `stallTimeout`, `onTimeout`, `answering`, `editor`, `usage`, `notify`, `remotes`",
                ));
            }
        }
    }
    Ok(())
}
/// The `editor` key: a command line that splits into words.
fn editor_line(layer: &Layer, v: &Ast) -> Result<String, ConfigError> {
    let line = string(layer, v, "editor")?;
    editor::split(&line).map_err(|e| {
        layer.err(
            v.start(),
            format!("`editor`: {e}"),
            "e.g. \"code --goto {path}:{line}\" or \"vim +{line} {path}\"",
        )
    })?;
    Ok(line)
}

/// The `scrub` key: literal text a recording replaces with `<scrubbed>`, each once.
fn apply_scrub(cfg: &mut Config, layer: &Layer, v: &Ast) -> Result<(), ConfigError> {
    let hint = "e.g. [\"internal.example.com\"]: literal text, 4 characters or more";
    let Ast::Array(a) = v else {
        return Err(layer.err(v.start(), "`scrub` must be a list of strings", hint));
    };
    for e in &a.elements {
        let text = string(layer, e, "scrub")?;
        if text.len() < 4 {
            return Err(layer.err(
                e.start(),
                "a `scrub` entry must be at least 4 characters long",
                hint,
            ));
        }
        if !cfg.scrub.contains(&text) {
            cfg.scrub.push(text);
        }
    }
    Ok(())
}

/// The `harnesses` key: the adapters to materialize, each once.
fn apply_harnesses(
    cfg: &mut Config,
    layer: &Layer,
    v: &Ast,
    known: &Known,
) -> Result<(), ConfigError> {
    let Ast::Array(arr) = v else {
        return Err(layer.err(
            v.start(),
            "`harnesses` must be a list",
            format!("e.g. [{}]; known: {}", known.json_items(), known.list()),
        ));
    };
    let mut ids = Vec::new();
    for el in &arr.elements {
        let id = harness_id(layer, known, el, "harnesses")?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    cfg.harnesses = ids;
    Ok(())
}

/// The `harness` key: per harness, the `command` that starts it and its `args`.
fn apply_harness(
    cfg: &mut Config,
    layer: &Layer,
    v: &Ast,
    known: &Known,
) -> Result<(), ConfigError> {
    let Ast::Object(per) = v else {
        return Err(layer.err(
            v.start(),
            "`harness` must be an object",
            format!(
                "e.g. {{\"{id}\": {{\"command\": \"/opt/bin/{id}\"}}}}",
                id = known.ids.first().copied().unwrap_or("<id>")
            ),
        ));
    };
    for p in &per.properties {
        let id_name = name_of(&p.name);
        let id = (known.canonical)(&id_name).ok_or_else(|| {
            layer.err(
                p.start(),
                format!("`harness.{id_name}`: unknown harness"),
                format!("use one of {}", known.list()),
            )
        })?;
        let Ast::Object(fields) = &p.value else {
            return Err(layer.err(
                p.value.start(),
                format!("`harness.{id_name}` must be an object"),
                "keys: `command`, `args`",
            ));
        };
        let entry = cfg.harness.entry(id).or_default();
        for f in &fields.properties {
            let fk = name_of(&f.name);
            match fk.as_str() {
                "command" => {
                    entry.command = Some(string(
                        layer,
                        &f.value,
                        &format!("harness.{id_name}.command"),
                    )?);
                }
                "args" => {
                    let Ast::Array(a) = &f.value else {
                        return Err(layer.err(
                            f.value.start(),
                            format!("`harness.{id_name}.args` must be a list of strings"),
                            "e.g. [\"--model\", \"x\"]",
                        ));
                    };
                    entry.args = a
                        .elements
                        .iter()
                        .map(|e| string(layer, e, &format!("harness.{id_name}.args")))
                        .collect::<Result<_, _>>()?;
                }
                other => {
                    return Err(layer.err(
                        f.start(),
                        format!("unknown key `harness.{id_name}.{other}`"),
                        "keys: `command`, `args`",
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The `policies` key: `specFirst` and `stopGate`.
fn apply_policies(cfg: &mut Config, layer: &Layer, v: &Ast) -> Result<(), ConfigError> {
    let Ast::Object(pol) = v else {
        return Err(layer.err(
            v.start(),
            "`policies` must be an object",
            "keys: `specFirst`, `stopGate`",
        ));
    };
    for p in &pol.properties {
        let pk = name_of(&p.name);
        let val = string(layer, &p.value, &format!("policies.{pk}"))?;
        match (pk.as_str(), val.as_str()) {
            ("specFirst", "off") => cfg.spec_first = Policy::Off,
            ("specFirst", "nudge") => cfg.spec_first = Policy::Nudge,
            ("specFirst", "block") => cfg.spec_first = Policy::Block,
            ("specFirst", _) => {
                return Err(layer.err(
                    p.value.start(),
                    format!("`policies.specFirst`: unknown value `{val}`"),
                    "use `off`, `nudge` or `block`",
                ));
            }
            ("stopGate", "off") => cfg.stop_gate = StopGate::Off,
            ("stopGate", "ask") => cfg.stop_gate = StopGate::Ask,
            ("stopGate", _) => {
                return Err(layer.err(
                    p.value.start(),
                    format!("`policies.stopGate`: unknown value `{val}`"),
                    "use `off` or `ask`",
                ));
            }
            _ => {
                return Err(layer.err(
                    p.start(),
                    format!("unknown key `policies.{pk}`"),
                    "keys: `specFirst`, `stopGate`",
                ));
            }
        }
    }
    Ok(())
}

/// The `store` key: `eventLogBytes`.
fn apply_store(cfg: &mut Config, layer: &Layer, v: &Ast) -> Result<(), ConfigError> {
    let Ast::Object(fields) = v else {
        return Err(layer.err(
            v.start(),
            "`store` must be an object",
            "keys: `eventLogBytes`",
        ));
    };
    for f in &fields.properties {
        let fk = name_of(&f.name);
        let parsed = match (fk.as_str(), &f.value) {
            ("eventLogBytes", Ast::NumberLit(n)) => n.value.parse::<u64>().ok(),
            ("eventLogBytes", _) => None,
            (other, _) => {
                return Err(layer.err(
                    f.start(),
                    format!("unknown key `store.{other}`"),
                    "keys: `eventLogBytes`",
                ));
            }
        };
        cfg.event_log_bytes = parsed.filter(|b| *b >= 4096).ok_or_else(|| {
            layer.err(
                f.value.start(),
                "`store.eventLogBytes` must be a whole number of bytes, at least 4096",
                "e.g. 8388608 (8 MiB, the default)",
            )
        })?;
    }
    Ok(())
}

/// The `answering` key: `hookWaitSecs` and `away`.
fn apply_answering(cfg: &mut Config, layer: &Layer, v: &Ast) -> Result<(), ConfigError> {
    let Ast::Object(fields) = v else {
        return Err(layer.err(
            v.start(),
            "`answering` must be an object",
            "keys: `hookWaitSecs`, `away`",
        ));
    };
    for f in &fields.properties {
        let fk = name_of(&f.name);
        if fk == "away" {
            let Ast::BooleanLit(b) = &f.value else {
                return Err(layer.err(
                    f.value.start(),
                    "`answering.away` must be true or false",
                    "e.g. false (the default): `spex away on|off` sets it for now",
                ));
            };
            cfg.away = b.value;
            continue;
        }
        let parsed = match (fk.as_str(), &f.value) {
            ("hookWaitSecs", Ast::NumberLit(n)) => n.value.parse::<u64>().ok(),
            ("hookWaitSecs", _) => None,
            (other, _) => {
                return Err(layer.err(
                    f.start(),
                    format!("unknown key `answering.{other}`"),
                    "keys: `hookWaitSecs`, `away`",
                ));
            }
        };
        cfg.answer_wait_secs = parsed.filter(|s| *s <= 86_400).ok_or_else(|| {
            layer.err(
                f.value.start(),
                "`answering.hookWaitSecs` must be a whole number of seconds, 0 to 86400",
                "e.g. 600 (the default); 0 turns the waiting hook off",
            )
        })?;
    }
    Ok(())
}

/// Where a checkout's project files (`spex.jsonc`, `spex.local.jsonc`, `.spec/`) are read
/// from: the checkout itself, unless it is a linked worktree whose branch has none of them
/// while the main checkout has (set up but not committed, or an older branch): then the main
/// checkout's, so every worktree of the project gets its contract.
pub fn source_root(tree_root: &Path, main: &Path) -> PathBuf {
    let has = |root: &Path| {
        root.join(PROJECT_FILE).is_file()
            || root.join(LOCAL_FILE).is_file()
            || root.join(".spec").is_dir()
    };
    if tree_root != main && !has(tree_root) && has(main) {
        main.to_owned()
    } else {
        tree_root.to_owned()
    }
}

/// Loads the layered configuration for a checkout rooted at `tree_root` (see `source_root`),
/// accepting the harness ids in `known`.
pub fn load(user_file: &Path, tree_root: &Path, known: &Known) -> Result<Config, ConfigError> {
    load_layers(
        [
            user_file.to_owned(),
            tree_root.join(PROJECT_FILE),
            tree_root.join(LOCAL_FILE),
        ],
        known,
    )
}

/// The user's configuration alone, for a command run outside any checkout.
pub fn load_user(user_file: &Path, known: &Known) -> Result<Config, ConfigError> {
    load_layers([user_file.to_owned()], known)
}

fn load_layers(
    files: impl IntoIterator<Item = PathBuf>,
    known: &Known,
) -> Result<Config, ConfigError> {
    let mut cfg = Config::new(known);
    for file in files {
        let text = match fs_err::read_to_string(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(ConfigError::Io(e)),
        };
        // Editors on some systems save with a byte-order mark; it is not JSON, but not an error
        // either (spex never rewrites these files, so the mark stays).
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        apply_layer(&mut cfg, &Layer { file: &file, text }, known)?;
        cfg.sources.push(file);
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the adapter registry hands in: two harnesses, one alias. Made-up ids: the
    /// config knows harnesses only through what it is handed.
    fn known() -> Known {
        Known {
            ids: vec!["alpha", "beta"],
            canonical: |id| match id {
                "alpha" | "alpha-alias" => Some("alpha"),
                "beta" => Some("beta"),
                _ => None,
            },
        }
    }

    fn parse(text: &str) -> Result<Config, ConfigError> {
        let known = known();
        let mut cfg = Config::new(&known);
        apply_layer(
            &mut cfg,
            &Layer {
                file: Path::new("spex.jsonc"),
                text,
            },
            &known,
        )?;
        Ok(cfg)
    }

    #[test]
    fn reads_keys_with_comments() {
        let cfg = parse("// mine\n{\n  \"harnesses\": [\"beta\"], // only beta\n  \"policies\": {\"specFirst\": \"block\"},\n}").unwrap();
        assert_eq!(cfg.harnesses, vec!["beta"]);
        assert_eq!(cfg.spec_first, Policy::Block);
    }

    #[test]
    fn reads_scrub_rules_and_the_detach_key() {
        let cfg =
            parse("{\"scrub\": [\"corp.example\", \"corp.example\"], \"detachKey\": \"Ctrl-]\"}")
                .unwrap();
        assert_eq!(cfg.scrub, vec!["corp.example".to_owned()]);
        assert_eq!(cfg.detach_key, 0x1d);
        assert_eq!(parse("{}").unwrap().detach_key, 0x1c);
        for (name, byte) in [
            ("ctrl-a", 1),
            ("ctrl-q", 0x11),
            ("ctrl-\\", 0x1c),
            ("ctrl-^", 0x1e),
        ] {
            assert_eq!(control_key(name), Some(byte), "{name}");
            assert_eq!(control_key(&control_key_name(byte)), Some(byte));
        }
        for (bad, says) in [
            ("{\"detachKey\": \"q\"}", "`q` is not a control key"),
            (
                "{\"detachKey\": \"ctrl-c\"}",
                "`ctrl-c` is not a control key",
            ),
            ("{\"scrub\": [\"ab\"]}", "at least 4 characters"),
            ("{\"scrub\": \"x\"}", "must be a list of strings"),
        ] {
            let err = parse(bad).unwrap_err().to_string();
            assert!(err.contains("line 1") && err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn budgets_are_off_unless_set_and_checked() {
        let cfg = parse("{}").unwrap();
        assert_eq!(cfg.budgets, Budgets::default());
        let cfg = parse(
            "{\"turnTimeout\": \"45m\", \"stallTimeout\": \"1h 30s\", \"onTimeout\": \"interrupt\"}",
        )
        .unwrap();
        assert_eq!(cfg.budgets.turn, Some(std::time::Duration::from_mins(45)));
        assert_eq!(
            cfg.budgets.stall,
            Some(std::time::Duration::from_secs(3630))
        );
        assert_eq!(cfg.budgets.on_timeout, OnTimeout::Interrupt);
        for (bad, says) in [
            ("{\"turnTimeout\": 45}", "`turnTimeout` must be a string"),
            (
                "{\"turnTimeout\": \"soon\"}",
                "`turnTimeout`: `soon` is not a duration",
            ),
            (
                "{\"stallTimeout\": \"0s\"}",
                "`stallTimeout`: `0s` is shorter than a second",
            ),
            (
                "{\"onTimeout\": \"kill\"}",
                "`onTimeout`: unknown value `kill`",
            ),
        ] {
            let err = parse(bad).unwrap_err();
            let hint = crate::hint::Hint::hint(&err);
            let err = err.to_string();
            assert!(
                err.starts_with("`spex.jsonc`, line 1")
                    && err.contains(says)
                    && hint.is_some_and(|h| !h.is_empty()),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn away_is_off_unless_set_and_takes_only_a_boolean() {
        assert!(!parse("{}").unwrap().away);
        let cfg = parse("{\"answering\": {\"away\": true, \"hookWaitSecs\": 20}}").unwrap();
        assert!(cfg.away);
        assert_eq!(cfg.answer_wait_secs, 20);
        let err = parse("{\"answering\": {\"away\": \"yes\"}}")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`answering.away` must be true or false"),
            "{err}"
        );
    }

    #[test]
    fn editor_and_prices_are_read_and_checked() {
        let cfg = parse(
            "{\"editor\": \"code --goto '{path}:{line}'\", \"usage\": {\"prices\": {\"m-*\": {\"input\": 3, \"output\": 15.5}}}}",
        )
        .unwrap();
        assert_eq!(cfg.editor.as_deref(), Some("code --goto '{path}:{line}'"));
        let p = cfg.prices.of("m-1").unwrap();
        assert_eq!((p.input, p.cached, p.output), (3.0, 3.0, 15.5));
        for (bad, says) in [
            ("{\"editor\": \"ed 'x\"}", "unterminated quote"),
            ("{\"editor\": 1}", "`editor` must be a string"),
            ("{\"usage\": {\"price\": {}}}", "unknown key `usage.price`"),
            (
                "{\"usage\": {\"prices\": {\"m\": {\"input\": -1, \"output\": 1}}}}",
                "`usage.prices.m.input` must be a number",
            ),
            (
                "{\"usage\": {\"prices\": {\"m\": {\"input\": 1}}}}",
                "needs `input` and `output`",
            ),
        ] {
            let err = parse(bad).unwrap_err().to_string();
            assert!(err.contains("line 1") && err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn errors_name_line_and_key() {
        let err = parse("{\n  \"harnesses\": [\"alpha\",\n    \"vim\"]\n}")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("`spex.jsonc`, line 3, column 5: `harnesses`: unknown harness `vim`"),
            "{err}"
        );
        let err = parse("{\n  \"harness\": 1\n}").unwrap_err().to_string();
        assert!(
            err.contains("line 2") && err.contains("`harness` must be an object"),
            "{err}"
        );
        let err = parse("{\"harnesess\": []}").unwrap_err().to_string();
        assert!(err.contains("unknown key `harnesess`"), "{err}");
        let err = parse("{\"a\": }").unwrap_err().to_string();
        assert!(err.contains("line 1"), "{err}");
    }
}
