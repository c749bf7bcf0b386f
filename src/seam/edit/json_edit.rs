//! Surgical edits of JSON files the user owns (`.claude/settings.json`, `.codex/hooks.json`,
//! `~/.claude.json`): insert or remove one member or array element as text, leaving every other
//! byte alone. Insertions go after the last element, preceded by `,` and a line break; removal
//! of an element spex inserted takes back exactly those bytes, so add-then-remove is identity.

use jsonc_parser::ast::{ObjectPropName, Value as Ast};
use jsonc_parser::common::Ranged;
use jsonc_parser::{CollectOptions, ParseOptions};
use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    #[error("line {line}, column {column}: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("`{key}` must be {expected}")]
    Shape { key: String, expected: &'static str },
    #[error(
        "line {line}: `{key}` appears more than once (a reader takes only one copy, so spex cannot edit it unambiguously)"
    )]
    Duplicate { key: String, line: usize },
}

impl crate::hint::Hint for JsonError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            JsonError::Syntax { .. } => "fix the JSON syntax (spex changed nothing)".to_owned(),
            JsonError::Shape { .. } => "fix or remove that key (spex changed nothing)".to_owned(),
            JsonError::Duplicate { key, .. } => format!(
                "merge the copies of `{key}` into one, then run again (spex changed nothing)"
            ),
        })
    }
}

/// One step of a path into a document: object keys only (arrays are addressed separately).
pub type KeyPath = [String];

#[derive(Debug, Clone)]
pub struct JsonDoc {
    bom: bool,
    text: String,
}

/// A located container: the byte just after its opening bracket, its children's byte ranges
/// (members include their key), and their keys.
struct Container {
    open: usize,
    children: Vec<(usize, usize)>,
    keys: Vec<String>,
    is_object: bool,
}

fn parse_opts() -> ParseOptions {
    ParseOptions::default()
}

fn collect_opts() -> CollectOptions {
    CollectOptions {
        comments: jsonc_parser::CommentCollectionStrategy::Off,
        tokens: false,
    }
}

fn parse(text: &str) -> Result<jsonc_parser::ParseResult<'_>, JsonError> {
    jsonc_parser::parse_to_ast(text, &collect_opts(), &parse_opts()).map_err(|e| {
        JsonError::Syntax {
            line: e.line_display(),
            column: e.column_display(),
            message: e.kind().to_string(),
        }
    })
}

fn prop_name(name: &ObjectPropName) -> String {
    match name {
        ObjectPropName::String(s) => s.value.to_string(),
        ObjectPropName::Word(w) => w.value.to_owned(),
    }
}

fn describe(path: &KeyPath) -> String {
    if path.is_empty() {
        "(top level)".to_owned()
    } else {
        path.join(".")
    }
}

impl JsonDoc {
    /// Parses a document; an empty or whitespace-only text reads as `{}`.
    pub fn parse(bytes: &[u8]) -> Result<JsonDoc, JsonError> {
        let (bom, body) = match bytes.strip_prefix(b"\xEF\xBB\xBF") {
            Some(rest) => (true, rest),
            None => (false, bytes),
        };
        let text = String::from_utf8(body.to_vec()).map_err(|e| JsonError::Syntax {
            line: 1 + String::from_utf8_lossy(&body[..e.utf8_error().valid_up_to()])
                .matches('\n')
                .count(),
            column: 1,
            message: "the file is not valid UTF-8".into(),
        })?;
        let doc = JsonDoc { bom, text };
        doc.root_check()?;
        Ok(doc)
    }

    fn root_check(&self) -> Result<(), JsonError> {
        if self.text.trim().is_empty() {
            return Ok(());
        }
        let parsed = parse(&self.text)?;
        if let Some(v) = &parsed.value {
            self.unique_keys(v, &mut Vec::new())?;
        }
        match parsed.value {
            Some(Ast::Object(_)) | None => Ok(()),
            Some(_) => Err(JsonError::Shape {
                key: "(top level)".into(),
                expected: "a JSON object",
            }),
        }
    }

    /// Refuses an object with a key twice anywhere: an edit of one copy would be an edit of
    /// the copy the harness ignores (`JSON.parse` and serde keep the last).
    fn unique_keys(&self, node: &Ast, path: &mut Vec<String>) -> Result<(), JsonError> {
        match node {
            Ast::Object(obj) => {
                let mut seen = std::collections::HashSet::new();
                for p in &obj.properties {
                    let name = prop_name(&p.name);
                    path.push(name.clone());
                    if !seen.insert(name) {
                        return Err(JsonError::Duplicate {
                            key: describe(path),
                            line: 1 + self.text[..p.start()].matches('\n').count(),
                        });
                    }
                    self.unique_keys(&p.value, path)?;
                    path.pop();
                }
            }
            Ast::Array(a) => {
                for e in &a.elements {
                    self.unique_keys(e, path)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.text.len() + 3);
        if self.bom {
            out.extend_from_slice(b"\xEF\xBB\xBF");
        }
        out.extend_from_slice(self.text.as_bytes());
        out
    }

    /// The whole document as a value (`{}` for an empty text).
    pub fn value(&self) -> Value {
        if self.text.trim().is_empty() {
            return Value::Object(serde_json::Map::new());
        }
        jsonc_parser::parse_to_serde_value(&self.text, &parse_opts()).unwrap_or(Value::Null)
    }

    pub fn get(&self, path: &KeyPath) -> Option<Value> {
        let mut v = self.value();
        for k in path {
            v = v.get_mut(k)?.take();
        }
        Some(v)
    }

    fn ensure_text(&mut self) {
        if self.text.trim().is_empty() {
            // An empty file becomes an object; the original whitespace stays after it.
            self.text.insert_str(0, "{}");
        }
    }

    /// Finds the container at `path` (objects along the way). `arr` names an array member of
    /// that object to descend into last.
    fn locate(&self, path: &KeyPath, arr: Option<&str>) -> Result<Option<Container>, JsonError> {
        let parsed = parse(&self.text)?;
        let Some(mut node) = parsed.value else {
            return Ok(None);
        };
        for (i, key) in path.iter().enumerate() {
            let Ast::Object(obj) = node else {
                return Err(JsonError::Shape {
                    key: describe(&path[..i]),
                    expected: "an object",
                });
            };
            let Some(prop) = obj
                .properties
                .into_iter()
                .find(|p| prop_name(&p.name) == *key)
            else {
                return Ok(None);
            };
            node = prop.value;
        }
        let full = |n: &[String]| describe(n);
        if let Some(a) = arr {
            let Ast::Object(obj) = node else {
                return Err(JsonError::Shape {
                    key: full(path),
                    expected: "an object",
                });
            };
            let Some(prop) = obj.properties.into_iter().find(|p| prop_name(&p.name) == a) else {
                return Ok(None);
            };
            let Ast::Array(array) = prop.value else {
                let mut p = path.to_vec();
                p.push(a.to_owned());
                return Err(JsonError::Shape {
                    key: full(&p),
                    expected: "an array",
                });
            };
            return Ok(Some(Container {
                open: array.range.start + 1,
                children: array
                    .elements
                    .iter()
                    .map(|e| (e.start(), e.end()))
                    .collect(),
                keys: Vec::new(),
                is_object: false,
            }));
        }
        match node {
            Ast::Object(obj) => Ok(Some(Container {
                open: obj.range.start + 1,
                children: obj
                    .properties
                    .iter()
                    .map(|p| (p.start(), p.end()))
                    .collect(),
                keys: obj.properties.iter().map(|p| prop_name(&p.name)).collect(),
                is_object: true,
            })),
            _ => Err(JsonError::Shape {
                key: full(path),
                expected: "an object",
            }),
        }
    }

    fn eol(&self) -> &'static str {
        super::block::eol_of(&self.text)
    }

    fn line_indent(&self, pos: usize) -> &str {
        let start = self.text[..pos].rfind('\n').map_or(0, |i| i + 1);
        let line = &self.text[start..];
        &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
    }

    fn starts_line(&self, pos: usize) -> bool {
        self.text[..pos]
            .trim_end_matches([' ', '\t'])
            .ends_with('\n')
    }

    /// Indentation unit of the file: the first indented line's leading whitespace.
    fn indent_unit(&self) -> String {
        self.text
            .lines()
            .map(|l| &l[..l.len() - l.trim_start_matches([' ', '\t']).len()])
            .find(|w| !w.is_empty())
            .unwrap_or("  ")
            .to_owned()
    }

    fn render(&self, value: &Value, indent: &str) -> String {
        let unit = self.indent_unit();
        let mut buf = Vec::new();
        let fmt = serde_json::ser::PrettyFormatter::with_indent(unit.as_bytes());
        let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
        serde::Serialize::serialize(value, &mut ser).expect("serializing a JSON value cannot fail");
        let s = String::from_utf8(buf).expect("serde_json writes UTF-8");
        s.replace('\n', &format!("{}{indent}", self.eol()))
    }

    fn insert_child(&mut self, c: &Container, child: impl FnOnce(&JsonDoc, &str) -> String) {
        let indent = match c.children.first() {
            Some(&(start, _)) if self.starts_line(start) => self.line_indent(start).to_owned(),
            _ => format!("{}{}", self.line_indent(c.open - 1), self.indent_unit()),
        };
        let text = child(self, &indent);
        let (pos, insert) = match c.children.last() {
            Some(&(_, end)) => (end, format!(",{}{indent}{text}", self.eol())),
            None => (c.open, format!("{}{indent}{text}", self.eol())),
        };
        self.text.insert_str(pos, &insert);
    }

    fn remove_child(&mut self, c: &Container, idx: usize) {
        let (start, end) = c.children[idx];
        let range = if idx > 0 {
            c.children[idx - 1].1..end
        } else if let Some(&(next_start, _)) = c.children.get(1) {
            start..next_start
        } else {
            c.open..end
        };
        self.text.replace_range(range, "");
    }

    /// Inserts member `key: value` into the object at `path` (which must exist).
    pub fn insert_member(
        &mut self,
        path: &KeyPath,
        key: &str,
        value: &Value,
    ) -> Result<(), JsonError> {
        self.ensure_text();
        let c = self.locate(path, None)?.ok_or_else(|| JsonError::Shape {
            key: describe(path),
            expected: "present",
        })?;
        let key_text = serde_json::to_string(key).expect("a string serializes");
        self.insert_child(&c, |doc, indent| {
            format!("{key_text}: {}", doc.render(value, indent))
        });
        Ok(())
    }

    /// Removes member `key` of the object at `path`; false when absent.
    pub fn remove_member(&mut self, path: &KeyPath, key: &str) -> Result<bool, JsonError> {
        let Some(c) = self.locate(path, None)? else {
            return Ok(false);
        };
        let Some(idx) = c.keys.iter().position(|k| k == key) else {
            return Ok(false);
        };
        self.remove_child(&c, idx);
        Ok(true)
    }

    /// Replaces the value of member `key` of the object at `path`.
    pub fn replace_member(
        &mut self,
        path: &KeyPath,
        key: &str,
        value: &Value,
    ) -> Result<(), JsonError> {
        let parsed = parse(&self.text)?;
        let mut node = parsed.value;
        for k in path.iter().map(String::as_str).chain(std::iter::once(key)) {
            let Some(Ast::Object(obj)) = node else {
                return Ok(());
            };
            node = obj
                .properties
                .into_iter()
                .find(|p| prop_name(&p.name) == k)
                .map(|p| p.value);
        }
        if let Some(n) = node {
            let (s, e) = (n.start(), n.end());
            let indent = self.line_indent(s).to_owned();
            let text = self.render(value, &indent);
            self.text.replace_range(s..e, &text);
        }
        Ok(())
    }

    /// The elements of array member `arr` of the object at `path`, as values.
    pub fn elements(&self, path: &KeyPath, arr: &str) -> Vec<Value> {
        match self
            .get(path)
            .and_then(|mut v| v.get_mut(arr).map(Value::take))
        {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        }
    }

    pub fn append_element(
        &mut self,
        path: &KeyPath,
        arr: &str,
        value: &Value,
    ) -> Result<(), JsonError> {
        let c = self
            .locate(path, Some(arr))?
            .ok_or_else(|| JsonError::Shape {
                key: describe(path),
                expected: "present",
            })?;
        debug_assert!(!c.is_object);
        self.insert_child(&c, |doc, indent| doc.render(value, indent));
        Ok(())
    }

    pub fn remove_element(
        &mut self,
        path: &KeyPath,
        arr: &str,
        idx: usize,
    ) -> Result<(), JsonError> {
        if let Some(c) = self.locate(path, Some(arr))?
            && idx < c.children.len()
        {
            self.remove_child(&c, idx);
        }
        Ok(())
    }

    /// Checks that `path` is either absent or an object, naming the key otherwise.
    pub fn expect_object(&self, path: &KeyPath) -> Result<(), JsonError> {
        self.locate(path, None).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn keys(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn member_insert_then_remove_is_identity() {
        let originals = [
            "{}",
            "{\n}\n",
            "{\n  \"model\": \"x\"\n}\n",
            "{\"a\":1}",
            "\u{feff}{\r\n    \"a\": [1, 2]\r\n}",
            "// c\n{\n\t\"a\": 1, // keep\n}\n",
            "",
        ];
        for original in originals {
            let mut doc = JsonDoc::parse(original.as_bytes()).unwrap();
            doc.insert_member(
                &[],
                "hooks",
                &json!({"Stop": [{"hooks": [{"type": "command"}]}]}),
            )
            .unwrap();
            let with = String::from_utf8(doc.to_bytes()).unwrap();
            assert_eq!(
                doc.get(&keys(&["hooks", "Stop"])).unwrap()[0]["hooks"][0]["type"],
                "command",
                "{with}"
            );
            doc.remove_member(&[], "hooks").unwrap();
            let back = String::from_utf8(doc.to_bytes()).unwrap();
            let expected = if original.is_empty() { "{}" } else { original };
            assert_eq!(back, expected, "via {with:?}");
        }
    }

    #[test]
    fn element_append_then_remove_is_identity() {
        let original = "{\n  \"hooks\": {\n    \"Stop\": [\n      {\"hooks\": []}\n    ]\n  }\n}\n";
        let mut doc = JsonDoc::parse(original.as_bytes()).unwrap();
        doc.append_element(&keys(&["hooks"]), "Stop", &json!({"x": 1}))
            .unwrap();
        assert_eq!(doc.elements(&keys(&["hooks"]), "Stop").len(), 2);
        let with = String::from_utf8(doc.to_bytes()).unwrap();
        assert!(
            with.contains("},\n      {\n        \"x\": 1\n      }\n    ]"),
            "{with}"
        );
        doc.remove_element(&keys(&["hooks"]), "Stop", 1).unwrap();
        assert_eq!(String::from_utf8(doc.to_bytes()).unwrap(), original);
    }

    #[test]
    fn errors_name_position_and_key() {
        let err = JsonDoc::parse(b"{\n  \"a\": ,\n}").unwrap_err();
        assert!(matches!(err, JsonError::Syntax { line: 2, .. }), "{err}");
        let doc = JsonDoc::parse(b"{\"hooks\": 3}").unwrap();
        let err = doc.expect_object(&keys(&["hooks"])).unwrap_err();
        assert_eq!(
            err.to_string().lines().next().unwrap(),
            "`hooks` must be an object"
        );
    }

    #[test]
    fn a_key_twice_anywhere_is_refused_with_its_path_and_line() {
        for (text, key, line) in [
            ("{\"a\": 1, \"a\": 2}", "a", 1),
            ("{\n\"p\": {\"x\": [{\"k\": 1,\n\"k\": 2}]}}", "p.x.k", 3),
        ] {
            match JsonDoc::parse(text.as_bytes()) {
                Err(JsonError::Duplicate { key: k, line: l }) => {
                    assert_eq!((k.as_str(), l), (key, line), "{text}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        assert!(JsonDoc::parse(b"{\"a\": {\"a\": 1}, \"b\": [{\"a\": 1}, {\"a\": 2}]}").is_ok());
    }
}
