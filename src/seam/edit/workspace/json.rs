//! The JSON a plan edits by key (`json_value`, `json_elements`) in files other programs
//! write too, and the same edits redone at apply time on bytes that changed meanwhile. Only
//! what spex's record says it put there is ever taken back.

use std::path::Path;

use serde_json::Value;

use super::{Entry, JsonJob, JsonOp, Redone, Workspace};
use crate::fsutil;
use crate::seam::edit::MaterializeError;
use crate::seam::edit::json_edit::{JsonDoc, JsonError};
use crate::seam::edit::owned::{JsonOwned, Owned};

impl JsonJob {
    /// The edits again, on `now` (the file's bytes; `None`: absent).
    pub fn redo(&self, path: &Path, now: Option<Vec<u8>>) -> Result<Redone, MaterializeError> {
        let mut owned = Owned::default();
        if let Some(j) = &self.owned {
            owned.json.insert(path.to_owned(), j.clone());
        }
        if self.created_by_spex {
            owned.files.insert(path.to_owned());
        }
        let mut ws = Workspace::new(owned);
        ws.files.insert(
            path.to_owned(),
            Entry {
                before: now.clone(),
                after: now,
            },
        );
        for op in &self.ops {
            match op {
                JsonOp::Value(key, value) => ws.json_value(path, key, value.as_ref())?,
                JsonOp::Elements(key, wanted) => ws.json_elements(path, key, wanted)?,
            }
        }
        Ok(Redone {
            after: ws.files.remove(path).and_then(|e| e.after),
            owned: ws.owned.json.remove(path),
            warnings: ws.warnings,
        })
    }
}

/// The document is `{}` only because its text is blank (spex would write the braces).
fn value_is_empty_text(doc: &JsonDoc) -> bool {
    doc.to_bytes().iter().all(u8::is_ascii_whitespace)
}

impl Workspace {
    pub(super) fn json_doc(&mut self, path: &Path) -> Result<Option<JsonDoc>, MaterializeError> {
        match self.read(path)? {
            None => Ok(None),
            Some(bytes) => {
                JsonDoc::parse(&bytes)
                    .map(Some)
                    .map_err(|source| MaterializeError::Json {
                        path: path.to_owned(),
                        source,
                    })
            }
        }
    }

    /// Whether spex inserted the member at `key` of JSON file `path` (its ownership record
    /// says so), as planned so far.
    pub fn json_member_owned(&self, path: &Path, key: &[String]) -> bool {
        self.owned
            .json
            .get(&fsutil::resolve_link(path))
            .is_some_and(|o| o.members.iter().any(|m| m == key))
    }

    pub(super) fn json_owned(&mut self, path: &Path) -> JsonOwned {
        self.owned.json.remove(path).unwrap_or_default()
    }

    pub(super) fn store_json(
        &mut self,
        path: &Path,
        doc: Option<JsonDoc>,
        mut owned: JsonOwned,
    ) -> Result<(), MaterializeError> {
        let jerr = |source| MaterializeError::Json {
            path: path.to_owned(),
            source,
        };
        let Some(mut doc) = doc else { return Ok(()) };
        // Containers spex inserted go away once empty, deepest first.
        owned.members.sort_by_key(|p| std::cmp::Reverse(p.len()));
        let mut kept = Vec::new();
        for member in std::mem::take(&mut owned.members) {
            match doc.get(&member) {
                None => {}
                Some(v)
                    if v.as_object().is_some_and(serde_json::Map::is_empty)
                        || v.as_array().is_some_and(Vec::is_empty) =>
                {
                    let (last, parent) = member.split_last().expect("member paths are non-empty");
                    doc.remove_member(parent, last).map_err(jerr)?;
                }
                Some(_) => kept.push(member),
            }
        }
        // A canonical order, so an unchanged record serializes to the same bytes.
        kept.sort();
        owned.members = kept;
        let empty_object = doc
            .value()
            .as_object()
            .is_some_and(serde_json::Map::is_empty);
        if empty_object && owned.root_created && owned.members.is_empty() {
            // Back to the whitespace the file held before spex wrote `{}` into it.
            let bytes = doc.to_bytes();
            let text = String::from_utf8_lossy(&bytes).replacen("{}", "", 1);
            owned.root_created = false;
            self.set(path, Some(text.into_bytes()))?;
        } else if empty_object && self.created_by_spex(path) && owned.members.is_empty() {
            self.set(path, None)?;
        } else {
            self.set(path, Some(doc.to_bytes()))?;
        }
        if !owned.is_empty() {
            self.owned.json.insert(path.to_owned(), owned);
        }
        Ok(())
    }

    /// Writes a JSON file spex creates: `whole`, rendered as a whole (not spliced into `{}`),
    /// with `members` recorded as inserted by spex.
    pub(super) fn create_json(
        &mut self,
        path: &Path,
        whole: &Value,
        members: Vec<Vec<String>>,
        mut owned: JsonOwned,
    ) -> Result<(), MaterializeError> {
        let mut text = serde_json::to_string_pretty(whole).expect("JSON value serializes");
        text.push('\n');
        owned.members.extend(members);
        self.set(path, Some(text.into_bytes()))?;
        self.owned.json.insert(path.to_owned(), owned);
        Ok(())
    }

    /// Makes the JSON object member at `key` (a key path) hold `value`, or, with `None`,
    /// takes back whatever spex put there: removes the members it inserted and restores a
    /// value it replaced.
    pub fn json_value(
        &mut self,
        path: &Path,
        key: &[String],
        value: Option<&Value>,
    ) -> Result<(), MaterializeError> {
        let path = &fsutil::resolve_link(path);
        let jerr = |source| MaterializeError::Json {
            path: path.to_owned(),
            source,
        };
        self.json_job(path, JsonOp::Value(key.to_vec(), value.cloned()));
        let mut owned = self.json_owned(path);
        let doc = self.json_doc(path)?;
        let mut doc = match (doc, value) {
            (None, None) => {
                if !owned.is_empty() {
                    self.owned.json.insert(path.to_owned(), owned);
                }
                return Ok(());
            }
            (None, Some(v)) => {
                let whole = key
                    .iter()
                    .rev()
                    .fold(v.clone(), |acc, k| serde_json::json!({ k.clone(): acc }));
                let members = (1..=key.len()).map(|j| key[..j].to_vec()).collect();
                owned.written.push((key.to_vec(), v.clone()));
                return self.create_json(path, &whole, members, owned);
            }
            (Some(d), _) => d,
        };
        if value.is_some()
            && doc
                .value()
                .as_object()
                .is_some_and(serde_json::Map::is_empty)
            && doc.to_bytes().iter().all(u8::is_ascii_whitespace)
        {
            owned.root_created = true;
        }
        if let Some(v) = value {
            let missing = (1..=key.len()).find(|&i| doc.get(&key[..i]).is_none());
            if let Some(i) = missing {
                let nested = key[i..]
                    .iter()
                    .rev()
                    .fold(v.clone(), |acc, k| serde_json::json!({ k.clone(): acc }));
                let nested = nested.get(&key[i - 1]).cloned().unwrap_or(nested);
                doc.expect_object(&key[..i - 1]).map_err(jerr)?;
                doc.insert_member(&key[..i - 1], &key[i - 1], &nested)
                    .map_err(jerr)?;
                for j in i..=key.len() {
                    owned.members.push(key[..j].to_vec());
                }
            } else if doc.get(key).as_ref() != Some(v) {
                if !owned.replaced.iter().any(|(k, _)| k == key)
                    && !owned.members.iter().any(|m| m == key)
                {
                    owned
                        .replaced
                        .push((key.to_vec(), doc.get(key).unwrap_or(Value::Null)));
                }
                let (last, parent) = key.split_last().expect("key paths are non-empty");
                doc.replace_member(parent, last, v).map_err(jerr)?;
            }
            if owned.members.iter().any(|m| m == key)
                || owned.replaced.iter().any(|(k, _)| k == key)
            {
                owned.written.retain(|(k, _)| k != key);
                owned.written.push((key.to_vec(), v.clone()));
            }
        } else {
            let current = doc.get(key);
            if let Some(pos) = owned.written.iter().position(|(k, _)| k == key) {
                let (_, wrote) = owned.written.remove(pos);
                if current.is_some() && current.as_ref() != Some(&wrote) {
                    // Changed since spex wrote it: the user's (or the harness's) now.
                    owned.replaced.retain(|(k, _)| k != key);
                    owned.members.retain(|m| m != key);
                    self.warnings.push(format!(
                        "`{}`: `{}` is {} now, not the {wrote} spex wrote; spex leaves it to you",
                        path.display(),
                        key.join("."),
                        current.unwrap_or(Value::Null)
                    ));
                }
            }
            if let Some(pos) = owned.replaced.iter().position(|(k, _)| k == key) {
                let (k, old) = owned.replaced.remove(pos);
                let (last, parent) = k.split_last().expect("key paths are non-empty");
                doc.replace_member(parent, last, &old).map_err(jerr)?;
            }
            if let Some(pos) = owned.members.iter().position(|m| m == key) {
                owned.members.remove(pos);
                let (last, parent) = key.split_last().expect("key paths are non-empty");
                doc.remove_member(parent, last).map_err(jerr)?;
            }
        }
        self.store_json(path, Some(doc), owned)
    }

    /// Remembers an edit by key of `path`, to redo it at apply time on bytes that changed.
    fn json_job(&mut self, path: &Path, op: JsonOp) {
        if !self.json_jobs.contains_key(path) {
            let job = JsonJob {
                owned: self.owned.json.get(path).cloned(),
                created_by_spex: self.created_by_spex(path),
                ops: Vec::new(),
            };
            self.json_jobs.insert(path.to_owned(), job);
        }
        if let Some(job) = self.json_jobs.get_mut(path) {
            job.ops.push(op);
        }
    }

    /// Makes spex's elements of the JSON array at `key` (a key path) exactly `wanted`, in a
    /// file other programs write too: elements spex added and no longer wants go, wanted ones
    /// missing are appended (the array and its containers created when absent), and every
    /// element spex did not add stays where it is. A wanted value already there that spex did
    /// not add is the other writer's and stays theirs. The array spex created goes once empty.
    pub fn json_elements(
        &mut self,
        path: &Path,
        key: &[String],
        wanted: &[Value],
    ) -> Result<(), MaterializeError> {
        let path = &fsutil::resolve_link(path);
        let jerr = |source| MaterializeError::Json {
            path: path.to_owned(),
            source,
        };
        self.json_job(path, JsonOp::Elements(key.to_vec(), wanted.to_vec()));
        let mut owned = self.json_owned(path);
        let mine: Vec<Value> = match owned.elements.iter().position(|(k, _)| k == key) {
            Some(i) => owned.elements.remove(i).1,
            None => Vec::new(),
        };
        let Some(mut doc) = self.json_doc(path)? else {
            if wanted.is_empty() {
                self.store_owned(path, owned);
                return Ok(());
            }
            let whole = key.iter().rev().fold(
                Value::Array(wanted.to_vec()),
                |acc, k| serde_json::json!({ k.clone(): acc }),
            );
            let members = (1..=key.len()).map(|j| key[..j].to_vec()).collect();
            owned.elements.push((key.to_vec(), wanted.to_vec()));
            return self.create_json(path, &whole, members, owned);
        };
        let (arr, parent) = key.split_last().expect("key paths are non-empty");
        let mut kept: Vec<Value> = Vec::new();
        match doc.get(key) {
            None if wanted.is_empty() => {}
            None => {
                if value_is_empty_text(&doc) {
                    owned.root_created = true;
                }
                let missing = (1..=key.len())
                    .find(|&i| doc.get(&key[..i]).is_none())
                    .expect("the array is missing");
                let nested = key[missing..].iter().rev().fold(
                    Value::Array(wanted.to_vec()),
                    |acc, k| serde_json::json!({ k.clone(): acc }),
                );
                doc.expect_object(&key[..missing - 1]).map_err(jerr)?;
                doc.insert_member(&key[..missing - 1], &key[missing - 1], &nested)
                    .map_err(jerr)?;
                for j in missing..=key.len() {
                    owned.members.push(key[..j].to_vec());
                }
                kept = wanted.to_vec();
            }
            Some(Value::Array(_)) => {
                // Spex's own elements that are no longer wanted go, the last copy first (an
                // append put it last).
                for m in mine.iter().filter(|m| !wanted.contains(m)) {
                    let items = doc.elements(parent, arr);
                    if let Some(idx) = items.iter().rposition(|v| v == m) {
                        doc.remove_element(parent, arr, idx).map_err(jerr)?;
                    }
                }
                for w in wanted {
                    let present = doc.elements(parent, arr).contains(w);
                    if present && mine.contains(w) {
                        kept.push(w.clone());
                    } else if !present {
                        doc.append_element(parent, arr, w).map_err(jerr)?;
                        kept.push(w.clone());
                    }
                }
            }
            Some(_) => {
                return Err(jerr(JsonError::Shape {
                    key: key.join("."),
                    expected: "an array",
                }));
            }
        }
        if !kept.is_empty() {
            owned.elements.push((key.to_vec(), kept));
            owned.elements.sort_by(|a, b| a.0.cmp(&b.0));
        }
        self.store_json(path, Some(doc), owned)
    }

    fn store_owned(&mut self, path: &Path, owned: JsonOwned) {
        if !owned.is_empty() {
            self.owned.json.insert(path.to_owned(), owned);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::Workspace;
    use crate::seam::edit::json_edit::JsonDoc;
    use crate::seam::edit::owned::Owned;

    fn key(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| (*s).to_owned()).collect()
    }

    /// One plan of `json_elements` on the file as it is, its bytes written to disk; the
    /// record goes on to the next run.
    fn elements_run(path: &Path, owned: Owned, k: &[String], wanted: &[Value]) -> Owned {
        let mut ws = Workspace::new(owned);
        ws.json_elements(path, k, wanted).unwrap();
        match ws.files.get(path).and_then(|e| e.after.clone()) {
            Some(b) => fs_err::write(path, b).unwrap(),
            None => {
                let _ = fs_err::remove_file(path);
            }
        }
        if ws.files.get(path).is_some_and(|e| e.before.is_none()) {
            ws.owned.files.insert(path.to_owned());
        }
        ws.owned
    }

    #[test]
    fn elements_spex_adds_go_back_and_the_other_writers_stay() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trusted.json");
        let original = "{\n  \"/repo\": [\n    \"mine:echo hi\"\n  ],\n  \"/other\": []\n}";
        fs_err::write(&path, original).unwrap();
        let k = key(&["/repo"]);
        let ours = [json!("spex:a"), json!("spex:b")];
        let owned = elements_run(&path, Owned::default(), &k, &ours);
        let text = fs_err::read_to_string(&path).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap()["/repo"],
            json!(["mine:echo hi", "spex:a", "spex:b"]),
            "{text}"
        );
        // Another writer appends its own, and rewrites the file its way.
        let mut v: Value = serde_json::from_str(&text).unwrap();
        v["/repo"].as_array_mut().unwrap().push(json!("other:new"));
        fs_err::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
        // A wanted value already there (the other writer's) stays theirs.
        let owned = elements_run(&path, owned, &k, &[json!("spex:b"), json!("mine:echo hi")]);
        let v: Value = serde_json::from_str(&fs_err::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["/repo"], json!(["mine:echo hi", "spex:b", "other:new"]));
        let owned = elements_run(&path, owned, &k, &[]);
        let v: Value = serde_json::from_str(&fs_err::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["/repo"], json!(["mine:echo hi", "other:new"]));
        assert!(
            owned.json.get(&path).is_none_or(|j| j.elements.is_empty()),
            "{owned:?}"
        );
    }

    #[test]
    fn elements_in_a_missing_file_or_key_are_created_and_taken_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        let k = key(&["a", "/repo"]);
        let owned = elements_run(&path, Owned::default(), &k, &[json!("x")]);
        let v: Value = serde_json::from_str(&fs_err::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v, json!({"a": {"/repo": ["x"]}}));
        let owned = elements_run(&path, owned, &k, &[]);
        assert!(!path.exists());
        assert!(owned.json.is_empty(), "{owned:?}");
        for original in ["", "  \n", "{\"b\": 1}\n", "{\"a\": {}}"] {
            fs_err::write(&path, original).unwrap();
            let owned = elements_run(&path, Owned::default(), &k, &[json!("x"), json!("y")]);
            let v: Value = serde_json::from_str(&fs_err::read_to_string(&path).unwrap()).unwrap();
            assert_eq!(v["a"]["/repo"], json!(["x", "y"]), "{original:?}");
            elements_run(&path, owned, &k, &[]);
            assert_eq!(fs_err::read_to_string(&path).unwrap(), original);
        }
    }

    #[test]
    fn elements_of_something_not_an_array_are_refused_naming_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        fs_err::write(&path, "{\"/repo\": \"x\"}").unwrap();
        let mut ws = Workspace::new(Owned::default());
        let err = ws
            .json_elements(&path, &key(&["/repo"]), &[json!("y")])
            .unwrap_err();
        assert!(
            err.to_string().contains("`/repo` must be an array"),
            "{err}"
        );
    }

    fn array_file() -> impl Strategy<Value = (String, Vec<String>)> {
        (
            prop::collection::vec("[a-z]{1,3}:[a-z ]{0,5}", 0..4),
            0..4usize,
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(mut theirs, style, other_key, final_nl)| {
                if style == 3 {
                    // No array yet: spex creates it.
                    theirs.clear();
                }
                let mut v = serde_json::Map::new();
                if other_key {
                    v.insert("/elsewhere".into(), json!(["z:z"]));
                }
                if style != 3 {
                    v.insert("/repo".into(), json!(theirs));
                }
                let v = Value::Object(v);
                let mut s = match style {
                    0 => serde_json::to_string(&v).unwrap(),
                    2 => format!(
                        "// c\n{}",
                        serde_json::to_string_pretty(&v)
                            .unwrap()
                            .replace('\n', "\r\n")
                    ),
                    _ => serde_json::to_string_pretty(&v).unwrap(),
                };
                if final_nl {
                    s.push('\n');
                }
                (s, theirs)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]
        /// Any sequence of wanted sets, then none: the file is byte for byte what it was, and
        /// in between it holds exactly the other writer's elements plus the wanted ones.
        #[test]
        fn elements_round_trip_byte_exact(
            (original, theirs) in array_file(),
            runs in prop::collection::vec(prop::collection::vec("(spex|[a-z]{1,3}):[a-z ]{0,3}", 0..4), 1..4),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("t.json");
            fs_err::write(&path, &original).unwrap();
            let k = key(&["/repo"]);
            let mut owned = Owned::default();
            for wanted in &runs {
                let wanted: Vec<Value> = wanted.iter().map(|w| json!(w)).collect();
                owned = elements_run(&path, owned, &k, &wanted);
                let text = fs_err::read_to_string(&path).unwrap();
                let doc = JsonDoc::parse(text.as_bytes()).unwrap();
                let have = doc.get(&k).unwrap_or(json!([]));
                let have = have.as_array().unwrap();
                for t in &theirs {
                    prop_assert!(have.contains(&json!(t)), "{t} lost: {text}");
                }
                for w in &wanted {
                    prop_assert!(have.contains(w), "{w} missing: {text}");
                }
            }
            elements_run(&path, owned, &k, &[]);
            prop_assert_eq!(fs_err::read_to_string(&path).unwrap(), original);
        }
    }
}
