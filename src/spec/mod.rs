//! The `.spec` tree: every `.spec/**/spec.md` with YAML front matter, parsed into nodes, and
//! governance (which spec node owns a file). Knows nothing of harnesses.

pub mod automaton;
pub mod keys;

use std::path::{Path, PathBuf};

use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Surface {
    System,
    Skill,
    Agent,
    Hook,
    Command,
}

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("`{file}`: {message}")]
    Invalid {
        file: PathBuf,
        message: String,
        hint: &'static str,
    },
    #[error("`{file}`, line {line}: {message}")]
    Yaml {
        file: PathBuf,
        line: usize,
        message: String,
    },
    /// `fs_err`'s error, which names the file.
    #[error("cannot read the spec tree: {0}")]
    Io(#[source] std::io::Error),
}

impl crate::hint::Hint for SpecError {
    fn hint(&self) -> Option<String> {
        match self {
            SpecError::Invalid { hint, .. } => Some((*hint).to_owned()),
            SpecError::Yaml { .. } => {
                Some("fix the YAML front matter between the `---` lines".to_owned())
            }
            SpecError::Io { .. } => None,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => s
                .split(',')
                .map(|p| p.trim().to_owned())
                .filter(|p| !p.is_empty())
                .collect(),
            OneOrMany::Many(v) => v,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FrontMatter {
    title: Option<String>,
    surface: Option<serde_yaml_ng::Value>,
    status: Option<String>,
    desc: Option<String>,
    tools: Option<OneOrMany>,
    code: Option<OneOrMany>,
    events: Option<OneOrMany>,
    order: Option<i64>,
    block: Option<bool>,
}

/// One active spec node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecNode {
    /// `spec.md`, relative to the tree root.
    pub file: PathBuf,
    /// Node name: its folder's name (`.spec/skills/review/spec.md` -> `review`).
    pub name: String,
    pub title: String,
    pub surfaces: Vec<Surface>,
    pub desc: Option<String>,
    pub tools: Vec<String>,
    pub code: Vec<String>,
    pub events: Vec<String>,
    pub order: i64,
    pub block: bool,
    pub body: String,
    /// The hook node's `.sh` handler, relative to the tree root.
    pub handler: Option<PathBuf>,
}

impl SpecNode {
    pub fn has(&self, s: Surface) -> bool {
        self.surfaces.contains(&s)
    }
}

/// Splits `---\n<yaml>\n---\n<body>` into (yaml, body).
pub fn split_front_matter(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let mut pos = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((&rest[..pos], &rest[pos + line.len()..]));
        }
        pos += line.len();
    }
    None
}

fn parse_surfaces(file: &Path, v: Option<serde_yaml_ng::Value>) -> Result<Vec<Surface>, SpecError> {
    let invalid = |message: String| SpecError::Invalid {
        file: file.to_owned(),
        message,
        hint: "`surface` is one of system, skill, agent, hook, command, or a list of them",
    };
    let items = match v {
        None => return Err(invalid("front matter has no `surface`".into())),
        Some(serde_yaml_ng::Value::String(s)) => vec![s],
        Some(serde_yaml_ng::Value::Sequence(seq)) => seq
            .into_iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| invalid("`surface` lists a non-string".into()))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(invalid("`surface` must be a string or a list".into())),
    };
    items
        .iter()
        .map(|s| {
            serde_yaml_ng::from_str::<Surface>(s)
                .map_err(|_| invalid(format!("unknown surface `{s}`")))
        })
        .collect()
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Parses one `spec.md`; `None` for a `pending` node.
pub fn parse_node(root: &Path, rel: &Path, text: &str) -> Result<Option<SpecNode>, SpecError> {
    let file = rel.to_owned();
    let Some((yaml, body)) = split_front_matter(text) else {
        return Err(SpecError::Invalid {
            file,
            message: "no YAML front matter".into(),
            hint: "start the file with `---`, the keys (title, surface, ...), and a closing `---` line",
        });
    };
    let fm: FrontMatter = serde_yaml_ng::from_str(yaml).map_err(|e| SpecError::Yaml {
        file: file.clone(),
        // +1 for the opening `---` line.
        line: e.location().map_or(1, |l| l.line() + 1),
        message: e
            .to_string()
            .split(" at line ")
            .next()
            .unwrap_or_default()
            .to_owned(),
    })?;
    if fm.status.as_deref() == Some("pending") {
        return Ok(None);
    }
    let surfaces = parse_surfaces(&file, fm.surface)?;
    let name = rel
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let needs_name = surfaces
        .iter()
        .any(|s| matches!(s, Surface::Skill | Surface::Agent | Surface::Command));
    if needs_name && !valid_name(&name) {
        return Err(SpecError::Invalid {
            file,
            message: format!("folder name `{name}` is not a valid skill/agent/command name"),
            hint: "name the folder with lowercase letters, digits, `-` or `_` (at most 64)",
        });
    }
    if needs_name && fm.desc.as_deref().is_none_or(|d| d.trim().is_empty()) {
        return Err(SpecError::Invalid {
            file,
            message: "a skill, agent or command node needs `desc`".into(),
            hint: "add `desc: <one line saying when to use it>` to the front matter",
        });
    }
    let handler = if surfaces.contains(&Surface::Hook) {
        let dir = root.join(rel.parent().unwrap_or(Path::new("")));
        let mut shs: Vec<PathBuf> = fs_err::read_dir(&dir)
            .map_err(SpecError::Io)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "sh") && p.is_file())
            .collect();
        if shs.len() != 1 {
            return Err(SpecError::Invalid {
                file,
                message: format!(
                    "a hook node needs exactly one `.sh` handler beside it, found {}",
                    shs.len()
                ),
                hint: "put one executable `<name>.sh` in the node's folder",
            });
        }
        let sh = shs.remove(0);
        Some(sh.strip_prefix(root).map(Path::to_path_buf).unwrap_or(sh))
    } else {
        None
    };
    Ok(Some(SpecNode {
        title: fm.title.unwrap_or_else(|| name.clone()),
        name,
        surfaces,
        desc: fm.desc,
        tools: fm.tools.map(OneOrMany::into_vec).unwrap_or_default(),
        code: fm.code.map(OneOrMany::into_vec).unwrap_or_default(),
        events: fm.events.map(OneOrMany::into_vec).unwrap_or_default(),
        order: fm.order.unwrap_or(0),
        block: fm.block.unwrap_or(false),
        body: body.trim_matches(['\n', '\r']).to_owned(),
        handler,
        file,
    }))
}

/// All active nodes under `<root>/.spec`, in path order.
pub fn load(root: &Path) -> Result<Vec<SpecNode>, SpecError> {
    let spec_dir = root.join(".spec");
    if !spec_dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut files: Vec<PathBuf> = walkdir::WalkDir::new(&spec_dir)
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file() && e.file_name() == "spec.md")
        .map(walkdir::DirEntry::into_path)
        .collect();
    files.sort();
    let mut nodes = Vec::new();
    for path in files {
        let rel = path.strip_prefix(root).unwrap_or(&path).to_owned();
        let text = fs_err::read_to_string(&path).map_err(SpecError::Io)?;
        if let Some(node) = parse_node(root, &rel, &text)? {
            nodes.push(node);
        }
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_skips_pending() {
        let text = "---\ntitle: Review\nsurface: [skill, system]\ndesc: Review code\ntools: Read, Grep\ncode: src/**\n---\nBody\n";
        let n = parse_node(Path::new("/r"), Path::new(".spec/review/spec.md"), text)
            .unwrap()
            .unwrap();
        assert_eq!(n.name, "review");
        assert_eq!(n.surfaces, vec![Surface::Skill, Surface::System]);
        assert_eq!(n.tools, vec!["Read", "Grep"]);
        assert_eq!(n.code, vec!["src/**"]);
        assert_eq!(n.body, "Body");
        let pending = "---\nsurface: system\nstatus: pending\n---\nx";
        assert!(
            parse_node(Path::new("/r"), Path::new(".spec/a/spec.md"), pending)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn errors_name_file_and_line() {
        let bad = "---\ntitle: x\nsurface: [system\n---\n";
        let err = parse_node(Path::new("/r"), Path::new(".spec/a/spec.md"), bad).unwrap_err();
        assert!(matches!(err, SpecError::Yaml { line: 3.., .. }), "{err}");
        assert!(err.to_string().contains(".spec/a/spec.md"));
        let unknown = "---\nsurface: system\ntitel: x\n---\n";
        let err = parse_node(Path::new("/r"), Path::new(".spec/a/spec.md"), unknown).unwrap_err();
        assert!(err.to_string().contains("titel"), "{err}");
        let no_fm = "just text";
        assert!(parse_node(Path::new("/r"), Path::new(".spec/a/spec.md"), no_fm).is_err());
        let bad_surface = "---\nsurface: wiki\n---\n";
        let err =
            parse_node(Path::new("/r"), Path::new(".spec/a/spec.md"), bad_surface).unwrap_err();
        assert!(err.to_string().contains("unknown surface `wiki`"), "{err}");
    }
}
