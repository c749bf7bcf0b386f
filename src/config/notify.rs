//! The `notify` key: what the notifier announces, through which channels, after what dwell (see
//! `docs/guides/notifications.md`). Parsed here with the other keys, so a wrong key or value is
//! an error naming the file, line and key.

use std::time::Duration;

use jsonc_parser::ast::Value as Ast;
use jsonc_parser::common::Ranged;

use super::jsonc::name_of;
use super::prices::Bad;

/// What can be announced (`notify.on`).
pub const EVENTS: &[&str] = &["needs_attention", "turn_end", "failed", "exited"];

/// The default dwell: an attention answered within it is never announced.
pub const DWELL: Duration = Duration::from_secs(5);

/// How long a user command may run before it is killed.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an answer link lives at most (it dies with its attention before that).
pub const LINK_TTL: Duration = Duration::from_hours(1);

/// The webhook's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// The event as spex's own JSON.
    #[default]
    Json,
    /// ntfy's JSON publish (title, message, priority, tags, click, actions).
    Ntfy,
}

/// A header's value: the text itself, or the name of an environment variable that holds it
/// (so a token need not be written in a file).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Secret {
    Text(String),
    Env(String),
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Webhook {
    pub url: String,
    pub format: Format,
    /// Values are not shown (they may be secrets).
    #[serde(skip_serializing)]
    pub headers: Vec<(String, Secret)>,
}

/// The `notify` key, resolved over the layers (a later layer replaces a field it sets).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Notify {
    /// What is announced, of [`EVENTS`].
    pub on: Vec<String>,
    /// argv of the user's command (no shell).
    pub command: Option<Vec<String>>,
    pub webhook: Option<Webhook>,
    pub desktop: bool,
    pub terminal: bool,
    pub dwell: Duration,
    /// Where a phone reaches the board's server (answer links are built from it).
    pub public_url: Option<String>,
    /// How long an answer link lives at most (`linkTtl`).
    pub link_ttl: Duration,
    /// Used percents of a rate-limit window to announce when a window rises past one
    /// (`limits`; empty: none).
    pub limits: Vec<u8>,
}

impl Default for Notify {
    fn default() -> Self {
        Notify {
            on: vec!["needs_attention".into(), "failed".into()],
            command: None,
            webhook: None,
            desktop: false,
            terminal: false,
            dwell: DWELL,
            limits: Vec::new(),
            public_url: None,
            link_ttl: LINK_TTL,
        }
    }
}

impl Notify {
    /// Whether any channel is configured.
    pub fn any_channel(&self) -> bool {
        self.command.is_some() || self.webhook.is_some() || self.desktop || self.terminal
    }
}

const KEYS: &str = "keys: `on`, `command`, `webhook`, `desktop`, `terminal`, `dwell`, `publicUrl`, `linkTtl`, `limits`";

fn bad(at: usize, message: impl Into<String>, hint: impl Into<String>) -> Bad {
    Bad {
        at,
        message: message.into(),
        hint: hint.into(),
    }
}

fn text(v: &Ast, key: &str, hint: &str) -> Result<String, Bad> {
    match v {
        Ast::StringLit(s) => Ok(s.value.to_string()),
        _ => Err(bad(v.start(), format!("`{key}` must be a string"), hint)),
    }
}

fn boolean(v: &Ast, key: &str) -> Result<bool, Bad> {
    match v {
        Ast::BooleanLit(b) => Ok(b.value),
        _ => Err(bad(
            v.start(),
            format!("`{key}` must be `true` or `false`"),
            format!("e.g. \"{}\": true", key.rsplit('.').next().unwrap_or(key)),
        )),
    }
}

fn duration(v: &Ast, key: &str) -> Result<Duration, Bad> {
    let hint = "a duration such as \"5s\", \"500ms\" or \"0s\"";
    let s = text(v, key, hint)?;
    humantime::parse_duration(&s).map_err(|e| {
        bad(
            v.start(),
            format!("`{key}`: `{s}` is not a duration ({e})"),
            hint,
        )
    })
}

/// The `notify` key of one layer, applied over what the lower layers set.
pub fn apply(n: &mut Notify, v: &Ast) -> Result<(), Bad> {
    let Ast::Object(fields) = v else {
        return Err(bad(v.start(), "`notify` must be an object", KEYS));
    };
    for f in &fields.properties {
        let key = name_of(&f.name);
        let v = &f.value;
        match key.as_str() {
            "on" => n.on = on(v)?,
            "command" => {
                let hint =
                    "e.g. [\"notify-send\", \"spex\"]: a program and its arguments, no shell";
                let Ast::Array(a) = v else {
                    return Err(bad(
                        v.start(),
                        "`notify.command` must be a list of strings",
                        hint,
                    ));
                };
                let argv: Vec<String> = a
                    .elements
                    .iter()
                    .map(|e| text(e, "notify.command", hint))
                    .collect::<Result<_, _>>()?;
                if argv.first().is_none_or(String::is_empty) {
                    return Err(bad(v.start(), "`notify.command` names no program", hint));
                }
                n.command = Some(argv);
            }
            "webhook" => n.webhook = Some(webhook(v)?),
            "desktop" => n.desktop = boolean(v, "notify.desktop")?,
            "terminal" => n.terminal = boolean(v, "notify.terminal")?,
            "dwell" => n.dwell = duration(v, "notify.dwell")?,
            "linkTtl" => n.link_ttl = duration(v, "notify.linkTtl")?,
            "limits" => n.limits = percents(v)?,
            "publicUrl" => {
                let hint = "e.g. \"http://127.0.0.1:7878\" (where the board's server is reached)";
                let url = text(v, "notify.publicUrl", hint)?;
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(bad(
                        v.start(),
                        format!("`notify.publicUrl`: `{url}` is not an http(s) URL"),
                        hint,
                    ));
                }
                n.public_url = Some(url.trim_end_matches('/').to_owned());
            }
            other => {
                return Err(bad(
                    f.start(),
                    format!("unknown key `notify.{other}`"),
                    KEYS,
                ));
            }
        }
    }
    Ok(())
}

/// `notify.limits`: used percents, 1 to 100.
fn percents(v: &Ast) -> Result<Vec<u8>, Bad> {
    let hint = "e.g. [80, 95]: used percents of a rate-limit window, 1 to 100";
    let Ast::Array(a) = v else {
        return Err(bad(
            v.start(),
            "`notify.limits` must be a list of percents",
            hint,
        ));
    };
    let mut out = Vec::new();
    for e in &a.elements {
        let n = match e {
            Ast::NumberLit(n) => n.value.parse::<u8>().ok().filter(|n| (1..=100).contains(n)),
            _ => None,
        };
        let Some(n) = n else {
            return Err(bad(
                e.start(),
                "`notify.limits`: each entry must be a whole percent from 1 to 100",
                hint,
            ));
        };
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Ok(out)
}

fn on(v: &Ast) -> Result<Vec<String>, Bad> {
    let hint = format!(
        "a list of: {}",
        EVENTS
            .iter()
            .map(|e| format!("`{e}`"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let Ast::Array(a) = v else {
        return Err(bad(v.start(), "`notify.on` must be a list", hint));
    };
    let mut out = Vec::new();
    for e in &a.elements {
        let s = text(e, "notify.on", &hint)?;
        if !EVENTS.contains(&s.as_str()) {
            return Err(bad(
                e.start(),
                format!("`notify.on`: unknown event `{s}`"),
                hint,
            ));
        }
        if !out.contains(&s) {
            out.push(s);
        }
    }
    Ok(out)
}

fn webhook(v: &Ast) -> Result<Webhook, Bad> {
    let keys = "keys: `url`, `format`, `headers`";
    let Ast::Object(fields) = v else {
        return Err(bad(v.start(), "`notify.webhook` must be an object", keys));
    };
    let (mut url, mut format, mut headers) = (None, Format::Json, Vec::new());
    for f in &fields.properties {
        let key = name_of(&f.name);
        match key.as_str() {
            "url" => {
                let hint = "e.g. \"https://ntfy.sh/my-topic\"";
                let u = text(&f.value, "notify.webhook.url", hint)?;
                if !(u.starts_with("http://") || u.starts_with("https://")) {
                    return Err(bad(
                        f.value.start(),
                        format!("`notify.webhook.url`: `{u}` is not an http(s) URL"),
                        hint,
                    ));
                }
                url = Some(u);
            }
            "format" => {
                let hint = "`json` (spex's event) or `ntfy` (an ntfy publish)";
                format = match text(&f.value, "notify.webhook.format", hint)?.as_str() {
                    "json" => Format::Json,
                    "ntfy" => Format::Ntfy,
                    other => {
                        return Err(bad(
                            f.value.start(),
                            format!("`notify.webhook.format`: unknown format `{other}`"),
                            hint,
                        ));
                    }
                };
            }
            "headers" => headers = header_map(&f.value)?,
            other => {
                return Err(bad(
                    f.start(),
                    format!("unknown key `notify.webhook.{other}`"),
                    keys,
                ));
            }
        }
    }
    let url = url.ok_or_else(|| {
        bad(
            v.start(),
            "`notify.webhook` needs a `url`",
            "e.g. {\"url\": \"https://ntfy.sh/my-topic\", \"format\": \"ntfy\"}",
        )
    })?;
    Ok(Webhook {
        url,
        format,
        headers,
    })
}

fn header_map(v: &Ast) -> Result<Vec<(String, Secret)>, Bad> {
    let hint = "e.g. {\"Authorization\": {\"env\": \"NTFY_TOKEN\"}, \"X-Tag\": \"spex\"}";
    let Ast::Object(h) = v else {
        return Err(bad(
            v.start(),
            "`notify.webhook.headers` must be an object",
            hint,
        ));
    };
    let mut out = Vec::new();
    for p in &h.properties {
        let name = name_of(&p.name);
        let key = format!("notify.webhook.headers.{name}");
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(bad(
                p.start(),
                format!("`{key}` is not a header name"),
                hint,
            ));
        }
        let value = match &p.value {
            Ast::StringLit(s) => Secret::Text(s.value.to_string()),
            Ast::Object(o)
                if o.properties.len() == 1 && name_of(&o.properties[0].name) == "env" =>
            {
                Secret::Env(text(&o.properties[0].value, &format!("{key}.env"), hint)?)
            }
            other => {
                return Err(bad(
                    other.start(),
                    format!("`{key}` must be a string or {{\"env\": \"VARIABLE\"}}"),
                    hint,
                ));
            }
        };
        if let Secret::Text(t) | Secret::Env(t) = &value
            && t.chars().any(char::is_control)
        {
            return Err(bad(
                p.value.start(),
                format!("`{key}` holds a control character"),
                hint,
            ));
        }
        out.push((name, value));
    }
    Ok(out)
}
