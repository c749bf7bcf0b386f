//! The plan under construction: every touched file's before and after bytes, the folders spex
//! wants, and the ownership record as it will be after the change. Adapters describe what
//! they want through the typed operations here; nothing touches the disk until `apply`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::MaterializeError;
use super::block::{self, Syntax};
use super::git_config::{self, GitEntry};
use super::json_edit::JsonDoc;
use super::owned::{JsonOwned, Owned};
use super::toml_entries::{self, Legacy, Want};
use crate::fsutil;

/// First line of every file spex generates whole (skills, agents, commands); it is the proof
/// that spex may overwrite or delete the file.
pub const STAMP: &str = "<!-- spex:generated";

#[derive(Debug, Clone)]
pub struct Entry {
    pub before: Option<Vec<u8>>,
    pub after: Option<Vec<u8>>,
}

#[derive(Debug, Default)]
pub struct Workspace {
    pub files: BTreeMap<PathBuf, Entry>,
    pub wanted_dirs: BTreeSet<PathBuf>,
    pub owned: Owned,
    pub warnings: Vec<String>,
    /// Edits by key of files another program rewrites, redone at apply time if the file
    /// changed after the plan read it.
    pub toml_jobs: BTreeMap<PathBuf, toml_entries::Job>,
    /// The same for JSON files edited only by key (`json_value`, `json_elements`), e.g.
    /// `~/.claude.json`.
    pub json_jobs: BTreeMap<PathBuf, JsonJob>,
    /// Files whose edit cannot be redone by key (hook groups are matched by value).
    pub not_by_key: BTreeSet<PathBuf>,
    /// The record predates the list of hook groups spex added: a group of exactly the shape
    /// spex writes is taken as spex's, this once.
    legacy_hooks: bool,
}

/// The key edits of one JSON file, with the record they started from, so `apply` can redo
/// them on bytes that changed after the plan read the file.
#[derive(Debug, Clone)]
pub struct JsonJob {
    owned: Option<JsonOwned>,
    created_by_spex: bool,
    ops: Vec<JsonOp>,
}

/// One edit by key of a JSON file, as a plan asked for it.
#[derive(Debug, Clone)]
enum JsonOp {
    /// [`Workspace::json_value`].
    Value(Vec<String>, Option<Value>),
    /// [`Workspace::json_elements`].
    Elements(Vec<String>, Vec<Value>),
}

/// A key edit redone on new bytes: the file's new bytes, spex's record for it, what to say.
#[derive(Debug)]
pub struct Redone {
    pub after: Option<Vec<u8>>,
    pub owned: Option<JsonOwned>,
    pub warnings: Vec<String>,
}

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

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> MaterializeError + '_ {
    move |source| MaterializeError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Hook groups as `{Event: [group, ...]}`, in the order given.
fn by_event<'a>(
    groups: impl Iterator<Item = &'a (String, Value)>,
) -> serde_json::Map<String, Value> {
    let mut events = serde_json::Map::new();
    for (event, group) in groups {
        let list = events
            .entry(event.clone())
            .or_insert_with(|| Value::Array(Vec::new()));
        list.as_array_mut()
            .expect("inserted as array")
            .push(group.clone());
    }
    events
}

/// The document is `{}` only because its text is blank (spex would write the braces).
fn value_is_empty_text(doc: &JsonDoc) -> bool {
    doc.to_bytes().iter().all(u8::is_ascii_whitespace)
}

fn text_of(path: &Path, bytes: &[u8]) -> Result<String, MaterializeError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| MaterializeError::NotUtf8(path.to_owned()))
}

impl Workspace {
    pub fn new(mut owned: Owned) -> Workspace {
        let legacy_hooks = owned.hooks.is_none();
        owned.hooks.get_or_insert_default();
        if owned.generated.is_none() {
            // A record from before digests: the stamped files it says spex created are spex's,
            // as they are now.
            let known = owned
                .files
                .iter()
                .filter_map(|p| {
                    let bytes = std::fs::read(p).ok()?;
                    String::from_utf8_lossy(&bytes)
                        .contains(STAMP)
                        .then(|| (p.clone(), super::owned::digest(&bytes)))
                })
                .collect();
            owned.generated = Some(known);
        }
        Workspace {
            owned,
            legacy_hooks,
            ..Workspace::default()
        }
    }

    fn entry(&mut self, path: &Path) -> Result<&mut Entry, MaterializeError> {
        if !self.files.contains_key(path) {
            let before = fsutil::read_opt(path).map_err(io(path))?;
            self.files.insert(
                path.to_owned(),
                Entry {
                    after: before.clone(),
                    before,
                },
            );
        }
        Ok(self.files.get_mut(path).expect("inserted above"))
    }

    /// The bytes `path` will hold after the plan (`None`: absent).
    pub fn read(&mut self, path: &Path) -> Result<Option<Vec<u8>>, MaterializeError> {
        let path = &fsutil::resolve_link(path);
        Ok(self.entry(path)?.after.clone())
    }

    pub fn read_text(&mut self, path: &Path) -> Result<Option<String>, MaterializeError> {
        self.read(path)?.map(|b| text_of(path, &b)).transpose()
    }

    fn set(&mut self, path: &Path, after: Option<Vec<u8>>) -> Result<(), MaterializeError> {
        self.entry(path)?.after = after;
        Ok(())
    }

    /// The files spex will have created once the plan is applied: the record's, plus the
    /// plan's new files, minus the files it deletes.
    pub fn owned_files_after(&self) -> BTreeSet<PathBuf> {
        let mut files = self.owned.files.clone();
        for (path, e) in &self.files {
            match (&e.before, &e.after) {
                (None, Some(_)) => {
                    files.insert(path.clone());
                }
                (_, None) => {
                    files.remove(path);
                }
                _ => {}
            }
        }
        files
    }

    fn created_by_spex(&self, path: &Path) -> bool {
        self.owned.files.contains(path) || self.files.get(path).is_some_and(|e| e.before.is_none())
    }

    /// Puts block `id` with `body` into the text file `path` (or removes it with `None`).
    /// A file spex created is deleted once nothing else is left in it.
    pub fn block(
        &mut self,
        path: &Path,
        syn: Syntax,
        id: &str,
        body: Option<&[String]>,
    ) -> Result<(), MaterializeError> {
        let path = &fsutil::resolve_link(path);
        let current = self.read_text(path)?;
        if current.is_none() && body.is_none() {
            return Ok(());
        }
        let text = current.unwrap_or_default();
        let new =
            block::reconcile(&text, syn, id, body).map_err(|source| MaterializeError::Block {
                path: path.to_owned(),
                source,
            })?;
        if new.is_empty() && self.created_by_spex(path) {
            return self.set(path, None);
        }
        self.set(path, Some(new.into_bytes()))
    }

    /// Checks every spex sentinel in `path` without changing it.
    pub fn validate_blocks(&mut self, path: &Path, syn: Syntax) -> Result<(), MaterializeError> {
        let path = &fsutil::resolve_link(path);
        if let Some(text) = self.read_text(path)? {
            block::validate(&text, syn).map_err(|source| MaterializeError::Block {
                path: path.to_owned(),
                source,
            })?;
        }
        Ok(())
    }

    fn json_doc(&mut self, path: &Path) -> Result<Option<JsonDoc>, MaterializeError> {
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

    fn json_owned(&mut self, path: &Path) -> JsonOwned {
        self.owned.json.remove(path).unwrap_or_default()
    }

    fn store_json(
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
    fn create_json(
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
                return Err(jerr(super::json_edit::JsonError::Shape {
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

    /// Reconciles the hook groups spex owns in a hooks file (`{"hooks": {Event: [group]}}`):
    /// exactly `wanted` afterwards, the user's groups untouched. spex's groups are the ones
    /// its record says it added (`legacy` recognizes them in a record from an older spex). A
    /// user's group identical to a wanted one stands for it and stays the user's. Returns the
    /// resulting document (for trust computation).
    pub fn hook_groups(
        &mut self,
        path: &Path,
        wanted: &[(String, Value)],
        legacy: &dyn Fn(&Value) -> bool,
    ) -> Result<Option<JsonDoc>, MaterializeError> {
        let path = &fsutil::resolve_link(path);
        let jerr = |source| MaterializeError::Json {
            path: path.to_owned(),
            source,
        };
        self.not_by_key.insert(path.to_owned());
        let hooks = vec!["hooks".to_owned()];
        let event_member = |event: &str| vec!["hooks".to_owned(), event.to_owned()];
        let owned = self.json_owned(path);
        let Some(mut doc) = self.json_doc(path)? else {
            self.record_hook_groups(path, wanted.to_vec());
            if wanted.is_empty() {
                return Ok(None);
            }
            let events = by_event(wanted.iter());
            let mut members = vec![hooks.clone()];
            members.extend(events.keys().map(|e| event_member(e)));
            self.create_json(
                path,
                &serde_json::json!({ "hooks": events }),
                members,
                owned,
            )?;
            return self.json_doc(path);
        };
        let mut owned = owned;
        doc.expect_object(&hooks).map_err(jerr)?;
        let mut pending: Vec<&(String, Value)> = wanted.iter().collect();
        let mut ours_after: Vec<(String, Value)> = Vec::new();
        let present: Vec<String> = doc
            .get(&hooks)
            .and_then(|v| v.as_object().map(|m| m.keys().cloned().collect()))
            .unwrap_or_default();
        for event in &present {
            let groups = doc.elements(&hooks, event);
            for (idx, group) in groups.iter().enumerate().rev() {
                let wanted_here = pending.iter().position(|(e, g)| e == event && g == group);
                let ours = if self.legacy_hooks {
                    legacy(group)
                } else {
                    self.owned.hook_group_is_ours(path, event, group)
                };
                if !ours {
                    // The user's; when it is exactly a wanted group, it serves for it.
                    if let Some(pos) = wanted_here {
                        pending.remove(pos);
                    }
                    continue;
                }
                if let Some(pos) = wanted_here {
                    pending.remove(pos);
                    ours_after.push((event.clone(), group.clone()));
                } else {
                    doc.remove_element(&hooks, event, idx).map_err(jerr)?;
                }
            }
        }
        ours_after.extend(pending.iter().map(|&g| g.clone()));
        self.record_hook_groups(path, ours_after);
        // What is missing goes in as whole subtrees: the `hooks` object, or an event's list.
        let missing = by_event(pending.into_iter());
        if !missing.is_empty() && doc.get(&hooks).is_none() {
            owned.members.push(hooks.clone());
            owned
                .members
                .extend(missing.keys().map(|e| event_member(e)));
            doc.insert_member(&[], "hooks", &Value::Object(missing))
                .map_err(jerr)?;
        } else {
            for (event, groups) in missing {
                if doc.get(&event_member(&event)).is_none() {
                    doc.insert_member(&hooks, &event, &groups).map_err(jerr)?;
                    owned.members.push(event_member(&event));
                } else {
                    for group in groups.as_array().into_iter().flatten() {
                        doc.append_element(&hooks, &event, group).map_err(jerr)?;
                    }
                }
            }
        }
        self.store_json(path, Some(doc), owned)?;
        self.json_doc(path)
    }

    /// Records `groups` as the hook groups spex has in `path` after the plan.
    fn record_hook_groups(&mut self, path: &Path, mut groups: Vec<(String, Value)>) {
        let record = self.owned.hooks.get_or_insert_default();
        groups.sort_by(|a, b| (&a.0, a.1.to_string()).cmp(&(&b.0, b.1.to_string())));
        if groups.is_empty() {
            record.remove(path);
        } else {
            record.insert(path.to_owned(), groups);
        }
    }

    /// Makes spex's entries in the TOML file `path` exactly `wanted`, by key: entries spex
    /// added before and no longer wants go (while they still hold spex's value), new ones are
    /// added where the file's own writer would put them, nothing else changes. `legacy` names a
    /// comment fence an older spex wrote, upgraded on the way.
    pub fn toml_entries(
        &mut self,
        path: &Path,
        wanted: Vec<Want>,
        legacy: Option<Legacy>,
    ) -> Result<(), MaterializeError> {
        let path = &fsutil::resolve_link(path);
        let text = self.read_text(path)?;
        let job = toml_entries::Job {
            wanted,
            owned: self.owned.toml.remove(path).unwrap_or_default(),
            legacy,
            created_by_spex: self.created_by_spex(path),
        };
        let out = job.run(path, text.as_deref())?;
        self.warnings.extend(out.warnings);
        if !out.owned.is_empty() {
            self.owned.toml.insert(path.to_owned(), out.owned);
        }
        self.set(path, out.after.map(String::into_bytes))?;
        self.toml_jobs.insert(path.to_owned(), job);
        Ok(())
    }

    /// The bytes `path` held before the plan (`None`: absent).
    pub fn read_before(&mut self, path: &Path) -> Result<Option<Vec<u8>>, MaterializeError> {
        let path = &fsutil::resolve_link(path);
        Ok(self.entry(path)?.before.clone())
    }

    /// Writes (or with `None` removes) a file spex generates whole. spex rewrites or deletes
    /// only a file its record says it wrote, while it holds the bytes spex wrote; any other
    /// file in the way is refused, and a stamped file spex has no record of is left alone
    /// with a warning.
    pub fn generated(
        &mut self,
        path: &Path,
        content: Option<String>,
    ) -> Result<(), MaterializeError> {
        self.generated_bytes(path, content.map(String::into_bytes))
    }

    /// `generated` with bytes that need not be text.
    pub fn generated_bytes(
        &mut self,
        path: &Path,
        content: Option<Vec<u8>>,
    ) -> Result<(), MaterializeError> {
        let path = &fsutil::resolve_link(path);
        let current = self.read(path)?;
        let ours = current
            .as_deref()
            .is_some_and(|cur| self.owned.generated_is_ours(path, cur));
        let record = self.owned.generated.get_or_insert_default();
        match (current, content) {
            (None, None) => {
                record.remove(path);
            }
            (None, Some(c)) => {
                record.insert(path.to_owned(), super::owned::digest(&c));
                self.set(path, Some(c))?;
            }
            (Some(_), Some(c)) if ours => {
                record.insert(path.to_owned(), super::owned::digest(&c));
                self.set(path, Some(c))?;
            }
            // The user's, with exactly what spex would write: nothing to do, and it stays theirs.
            (Some(cur), Some(c)) if cur == c => {
                record.remove(path);
            }
            (Some(cur), Some(_)) => {
                record.remove(path);
                let changed = String::from_utf8_lossy(&cur).contains(STAMP);
                return Err(MaterializeError::Foreign {
                    path: path.to_owned(),
                    changed,
                });
            }
            (Some(_), None) if ours => {
                record.remove(path);
                self.set(path, None)?;
            }
            (Some(cur), None) => {
                let known = record.remove(path).is_some();
                // The user's now: spex forgets it (no longer its file to list or remove).
                self.owned.files.remove(path);
                if known || String::from_utf8_lossy(&cur).contains(STAMP) {
                    let why = if known {
                        "changed since spex wrote it"
                    } else {
                        "carries spex's stamp but spex has no record of writing it"
                    };
                    self.warnings.push(format!(
                        "`{}` {why}; spex leaves it to you (delete it if you do not want it)",
                        path.display()
                    ));
                }
            }
        }
        Ok(())
    }

    /// Makes `section.key` in the git config file `path` hold spex's `value`, or with `None`
    /// takes spex's entry back while it still holds the value spex wrote (a changed one is the
    /// user's: left, named in a warning). A file spex created goes once nothing else is in it.
    /// The caller checks that the key is not the user's before asking for a value.
    pub fn git_entry(
        &mut self,
        path: &Path,
        section: &str,
        key: &str,
        value: Option<&str>,
    ) -> Result<(), MaterializeError> {
        let path = &fsutil::resolve_link(path);
        let before = self.read_text(path)?;
        let mut text = before.clone().unwrap_or_default();
        let mut owned = self.owned.git.remove(path).unwrap_or_default();
        if let Some(i) = owned.position(section, key) {
            let mine = &owned.entries[i];
            let holds =
                git_config::last_value(&text, section, key).as_deref() == Some(mine.value.as_str());
            if holds && value == Some(mine.value.as_str()) {
                self.owned.git.insert(path.to_owned(), owned);
                return Ok(());
            }
            match git_config::unset(&text, mine) {
                Some(t) => text = t,
                None => self.warnings.push(format!(
                    "`{}`: `{section}.{key}` no longer holds the `{}` spex wrote; spex leaves it to you",
                    path.display(),
                    mine.value
                )),
            }
            owned.entries.remove(i);
        }
        if let Some(v) = value {
            let (t, entry) = git_config::set(&text, section, key, v);
            text = t;
            owned.entries.push(entry);
        }
        self.store_git_text(path, before.as_deref(), text)?;
        if !owned.is_empty() {
            self.owned.git.insert(path.to_owned(), owned);
        }
        Ok(())
    }

    /// Removes `section.key = value` from the git config file `path` where spex did not write
    /// it but another program copied spex's line (`git worktree add` copies the checkout's
    /// `config.worktree` into the new worktree's), with a header left holding nothing.
    pub fn git_copy_removed(
        &mut self,
        path: &Path,
        section: &str,
        key: &str,
        value: &str,
    ) -> Result<(), MaterializeError> {
        let path = &fsutil::resolve_link(path);
        let before = self.read_text(path)?;
        let copy = GitEntry {
            section: section.to_owned(),
            key: key.to_owned(),
            value: value.to_owned(),
            header: true,
            newline: false,
        };
        let mut text = before.clone().unwrap_or_default();
        while let Some(t) = git_config::unset(&text, &copy) {
            text = t;
        }
        // The copy of a file spex created holds nothing else: it goes with spex's line.
        if text.trim().is_empty() && before.as_deref().is_some_and(|b| b != text) {
            return self.set(path, None);
        }
        self.store_git_text(path, before.as_deref(), text)
    }

    fn store_git_text(
        &mut self,
        path: &Path,
        before: Option<&str>,
        text: String,
    ) -> Result<(), MaterializeError> {
        if before == Some(text.as_str()) || (before.is_none() && text.is_empty()) {
            return Ok(());
        }
        if text.is_empty() && self.created_by_spex(path) {
            return self.set(path, None);
        }
        self.set(path, Some(text.into_bytes()))
    }

    /// Files spex generated under `dir`, as its record says.
    pub fn generated_under(&self, dir: &Path) -> Vec<PathBuf> {
        self.owned
            .generated
            .iter()
            .flatten()
            .map(|(p, _)| p)
            .filter(|p| p.starts_with(dir))
            .cloned()
            .collect()
    }

    /// Marks a folder spex needs to exist (created and owned if missing).
    pub fn want_dir(&mut self, path: &Path) {
        self.wanted_dirs.insert(path.to_owned());
    }

    /// Files in `dir` (recursively) that carry the spex stamp, except those in `skip` and
    /// spex's own temp and moved-aside files (an interrupted write's leftovers, swept by the
    /// next run: counted as the user's, they kept their folders from being removed).
    pub fn stamped_files(dir: &Path, skip: &std::collections::HashSet<PathBuf>) -> Vec<PathBuf> {
        walkdir::WalkDir::new(dir)
            .into_iter()
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_file() && !skip.contains(e.path()))
            .filter(|e| {
                let name = e.file_name().to_string_lossy();
                !name.starts_with(fsutil::TEMP_PREFIX) && !name.starts_with(fsutil::ASIDE_PREFIX)
            })
            .filter(|e| {
                std::fs::read(e.path()).is_ok_and(|b| String::from_utf8_lossy(&b).contains(STAMP))
            })
            .map(walkdir::DirEntry::into_path)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn key(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| (*s).to_owned()).collect()
    }

    /// One plan of `json_elements` on the file as it is, its bytes written to disk; the
    /// record goes on to the next run.
    fn elements_run(path: &Path, owned: Owned, k: &[String], wanted: &[Value]) -> Owned {
        let mut ws = Workspace::new(owned);
        ws.json_elements(path, k, wanted).unwrap();
        match ws.files.get(path).and_then(|e| e.after.clone()) {
            Some(b) => std::fs::write(path, b).unwrap(),
            None => {
                let _ = std::fs::remove_file(path);
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
        std::fs::write(&path, original).unwrap();
        let k = key(&["/repo"]);
        let ours = [json!("spex:a"), json!("spex:b")];
        let owned = elements_run(&path, Owned::default(), &k, &ours);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap()["/repo"],
            json!(["mine:echo hi", "spex:a", "spex:b"]),
            "{text}"
        );
        // Another writer appends its own, and rewrites the file its way.
        let mut v: Value = serde_json::from_str(&text).unwrap();
        v["/repo"].as_array_mut().unwrap().push(json!("other:new"));
        std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
        // A wanted value already there (the other writer's) stays theirs.
        let owned = elements_run(&path, owned, &k, &[json!("spex:b"), json!("mine:echo hi")]);
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["/repo"], json!(["mine:echo hi", "spex:b", "other:new"]));
        let owned = elements_run(&path, owned, &k, &[]);
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
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
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v, json!({"a": {"/repo": ["x"]}}));
        let owned = elements_run(&path, owned, &k, &[]);
        assert!(!path.exists());
        assert!(owned.json.is_empty(), "{owned:?}");
        for original in ["", "  \n", "{\"b\": 1}\n", "{\"a\": {}}"] {
            std::fs::write(&path, original).unwrap();
            let owned = elements_run(&path, Owned::default(), &k, &[json!("x"), json!("y")]);
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            assert_eq!(v["a"]["/repo"], json!(["x", "y"]), "{original:?}");
            elements_run(&path, owned, &k, &[]);
            assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
        }
    }

    #[test]
    fn elements_of_something_not_an_array_are_refused_naming_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        std::fs::write(&path, "{\"/repo\": \"x\"}").unwrap();
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
            std::fs::write(&path, &original).unwrap();
            let k = key(&["/repo"]);
            let mut owned = Owned::default();
            for wanted in &runs {
                let wanted: Vec<Value> = wanted.iter().map(|w| json!(w)).collect();
                owned = elements_run(&path, owned, &k, &wanted);
                let text = std::fs::read_to_string(&path).unwrap();
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
            prop_assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
        }
    }

    /// A killed write's temp file (stamped: it holds a generated file's bytes) and a file moved
    /// aside to delete are spex's leftovers, not a user's stamped files to keep.
    #[test]
    fn leftovers_of_a_killed_write_are_not_user_files() {
        let dir = tempfile::tempdir().unwrap();
        let skill = dir.path().join("skills/s2");
        std::fs::create_dir_all(&skill).unwrap();
        let stamped = format!("{STAMP} -->\nbody\n");
        for name in [".spex-tmpdp0yF0", ".spex-del-12-34", "MINE.md"] {
            std::fs::write(skill.join(name), &stamped).unwrap();
        }
        let found = Workspace::stamped_files(dir.path(), &std::collections::HashSet::new());
        assert_eq!(found, vec![skill.join("MINE.md")]);
    }
}
