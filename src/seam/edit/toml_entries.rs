//! Entries spex owns in a TOML file another program rewrites (Codex's `config.toml`): found
//! and edited by key with `toml_edit`, wherever that program moved them. What spex added (key
//! and the value it wrote) is recorded in spex's state, never in comments another writer can
//! move. Everything that is not spex's keeps its bytes; a run with nothing to change rewrites
//! nothing.

use std::path::Path;

use serde::{Deserialize, Serialize};
use toml_edit::{DocumentMut, Item, Table, TableLike, value};

use super::MaterializeError;
use super::block::{self, Syntax};

/// A string value spex wrote at a key path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub key: Vec<String>,
    pub value: String,
}

/// What spex owns in one TOML file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TomlOwned {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entries: Vec<Entry>,
    /// Tables whose header spex wrote; removed once nothing is left in them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tables: Vec<Vec<String>>,
}

impl TomlOwned {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.tables.is_empty()
    }
}

/// One entry spex wants, and what a different value already there means for the user.
#[derive(Debug, Clone)]
pub struct Want {
    pub key: Vec<String>,
    pub value: String,
    pub if_different: String,
}

/// A comment-fenced block an older spex wrote: the fence goes, the entries of `claims` found
/// inside it become owned entries, and whatever else is inside (another writer's tables) stays.
#[derive(Debug, Clone)]
pub struct Legacy {
    pub syntax: Syntax,
    pub id: String,
    pub claims: Vec<Vec<String>>,
}

/// One file's edit, kept whole so `apply` can redo it on bytes that changed after the plan.
#[derive(Debug, Clone)]
pub struct Job {
    pub wanted: Vec<Want>,
    /// The record before this edit.
    pub owned: TomlOwned,
    pub legacy: Option<Legacy>,
    /// spex created the file: it goes once nothing is left in it.
    pub created_by_spex: bool,
}

#[derive(Debug)]
pub struct Outcome {
    /// The new text (`None`: the file is absent).
    pub after: Option<String>,
    pub owned: TomlOwned,
    pub warnings: Vec<String>,
}

/// A TOML syntax error with its line, and what to do.
pub fn toml_error(path: &Path, text: &str, e: &toml_edit::TomlError) -> MaterializeError {
    let line = e.span().map_or(1, |s| {
        text[..s.start.min(text.len())].matches('\n').count() + 1
    });
    MaterializeError::Toml {
        path: path.to_owned(),
        message: format!("line {line}: {}", e.message()),
        hint: "fix the TOML syntax (spex changed nothing)".into(),
    }
}

fn dotted(key: &[String]) -> String {
    key.iter()
        .map(|k| {
            if !k.is_empty()
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                k.clone()
            } else {
                serde_json::to_string(k).expect("a string serializes")
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

fn table_at<'d>(doc: &'d DocumentMut, path: &[String]) -> Option<&'d dyn TableLike> {
    let mut cur: &dyn TableLike = doc.as_table();
    for k in path {
        cur = cur.get(k)?.as_table_like()?;
    }
    Some(cur)
}

fn table_at_mut<'d>(doc: &'d mut DocumentMut, path: &[String]) -> Option<&'d mut dyn TableLike> {
    let mut cur: &mut dyn TableLike = doc.as_table_mut();
    for k in path {
        cur = cur.get_mut(k)?.as_table_like_mut()?;
    }
    Some(cur)
}

fn get<'d>(doc: &'d DocumentMut, key: &[String]) -> Option<&'d Item> {
    let (last, parent) = key.split_last()?;
    table_at(doc, parent)?.get(last)
}

fn get_str<'d>(doc: &'d DocumentMut, key: &[String]) -> Option<&'d str> {
    get(doc, key)?.as_str()
}

/// Sets `key` to the string `v`, creating missing tables: the leaf's table gets a header
/// (recorded in `created`), tables above it stay implicit, as Codex's own writer does.
fn set(
    path: &Path,
    doc: &mut DocumentMut,
    key: &[String],
    v: &str,
    created: &mut Vec<Vec<String>>,
) -> Result<(), MaterializeError> {
    let (last, parent) = key.split_last().expect("key paths are non-empty");
    let not_table = |upto: &[String]| MaterializeError::Toml {
        path: path.to_owned(),
        message: format!(
            "`{}` is not a table, so spex cannot add `{}`",
            dotted(upto),
            dotted(key)
        ),
        hint: format!("make `{}` a table, then run again", dotted(upto)),
    };
    let mut cur: &mut Item = doc.as_item_mut();
    for (i, k) in parent.iter().enumerate() {
        let table = cur
            .as_table_like_mut()
            .ok_or_else(|| not_table(&parent[..i]))?;
        if table.get(k).is_none() {
            let mut t = Table::new();
            let leaf_table = i + 1 == parent.len();
            t.set_implicit(!leaf_table);
            table.insert(k, Item::Table(t));
            if leaf_table {
                created.push(parent.to_vec());
            }
        }
        cur = table.get_mut(k).expect("present or inserted above");
    }
    if let Some(t) = cur.as_table_mut() {
        // A table that only existed through its sub-tables needs its header now.
        t.set_implicit(false);
    }
    cur.as_table_like_mut()
        .ok_or_else(|| not_table(parent))?
        .insert(last, value(v));
    Ok(())
}

fn remove(doc: &mut DocumentMut, key: &[String]) {
    let (last, parent) = key.split_last().expect("key paths are non-empty");
    if let Some(t) = table_at_mut(doc, parent) {
        t.remove(last);
    }
}

/// Finds an old comment fence: drops its sentinel lines and returns what spex wrote inside it.
fn unfence(
    path: &Path,
    text: &mut String,
    legacy: &Legacy,
    owned: &mut TomlOwned,
) -> Result<bool, MaterializeError> {
    let found =
        block::find(text, legacy.syntax, &legacy.id).map_err(|source| MaterializeError::Block {
            path: path.to_owned(),
            source,
        })?;
    let Some(found) = found else {
        return Ok(false);
    };
    let inside = text[found.body.clone()].to_owned();
    *text = format!(
        "{}{inside}{}",
        &text[..found.whole.start],
        &text[found.whole.end..]
    );
    // The fenced text alone holds spex's tables and whatever another writer put between them;
    // only the claimed keys found there are spex's.
    if let Ok(fenced) = inside.parse::<DocumentMut>() {
        for key in &legacy.claims {
            let Some(v) = get_str(&fenced, key) else {
                continue;
            };
            if !owned.entries.iter().any(|e| e.key == *key) {
                owned.entries.push(Entry {
                    key: key.clone(),
                    value: v.to_owned(),
                });
            }
            let table = key[..key.len() - 1].to_vec();
            let has_header = fenced_table(&fenced, &table).is_some_and(|t| !t.is_implicit());
            if has_header && !owned.tables.contains(&table) {
                owned.tables.push(table);
            }
        }
    }
    Ok(true)
}

fn fenced_table<'d>(doc: &'d DocumentMut, path: &[String]) -> Option<&'d Table> {
    let mut cur: &Table = doc.as_table();
    for k in path {
        cur = cur.get(k)?.as_table()?;
    }
    Some(cur)
}

impl Job {
    /// The file's text after the edit, given its text `before` (`None`: absent).
    pub fn run(&self, path: &Path, before: Option<&str>) -> Result<Outcome, MaterializeError> {
        let mut owned = self.owned.clone();
        let mut warnings = Vec::new();
        let Some(original) = before else {
            if self.wanted.is_empty() {
                return Ok(Outcome {
                    after: None,
                    owned: TomlOwned::default(),
                    warnings,
                });
            }
            // Nothing of the old record can be in a file that is gone.
            owned = TomlOwned::default();
            return self.edit(path, "", owned, warnings);
        };
        let (bom, rest) = match original.strip_prefix('\u{feff}') {
            Some(rest) => ("\u{feff}", rest),
            None => ("", original),
        };
        // toml_edit writes `\n`; a file that uses `\r\n` throughout gets it back.
        let crlf = rest.contains("\r\n") && !rest.replace("\r\n", "").contains('\n');
        let mut text = if crlf {
            rest.replace("\r\n", "\n")
        } else {
            rest.to_owned()
        };
        let mut migrated = false;
        if let Some(legacy) = &self.legacy {
            migrated = unfence(path, &mut text, legacy, &mut owned)?;
        }
        let out = self.edit(path, &text, owned, warnings)?;
        warnings = out.warnings;
        let Some(mut after) = out.after else {
            return Ok(Outcome {
                after: None,
                owned: out.owned,
                warnings,
            });
        };
        if after == text && !migrated {
            return Ok(Outcome {
                after: Some(original.to_owned()),
                owned: out.owned,
                warnings,
            });
        }
        if !rest.is_empty() && !rest.ends_with('\n') && after.ends_with('\n') {
            after.pop();
        }
        if crlf {
            after = after.replace('\n', "\r\n");
        }
        Ok(Outcome {
            after: Some(format!("{bom}{after}")),
            owned: out.owned,
            warnings,
        })
    }

    /// The edit on `\n` text without a BOM.
    fn edit(
        &self,
        path: &Path,
        text: &str,
        mut owned: TomlOwned,
        mut warnings: Vec<String>,
    ) -> Result<Outcome, MaterializeError> {
        let mut doc: DocumentMut = text.parse().map_err(|e| toml_error(path, text, &e))?;
        let mut changed = false;
        let shown = path.display();
        // Entries spex wrote before: updated or removed only while they hold spex's value.
        let mut kept = Vec::new();
        for e in std::mem::take(&mut owned.entries) {
            let want = self.wanted.iter().find(|w| w.key == e.key);
            match get_str(&doc, &e.key) {
                Some(cur) if cur == e.value => {
                    if let Some(w) = want {
                        if w.value != e.value {
                            set(path, &mut doc, &w.key, &w.value, &mut owned.tables)?;
                            changed = true;
                        }
                        kept.push(Entry {
                            key: e.key,
                            value: w.value.clone(),
                        });
                    } else {
                        remove(&mut doc, &e.key);
                        changed = true;
                    }
                }
                // Changed since spex wrote it (by the user or the harness): theirs now.
                Some(cur) if want.is_none() => warnings.push(format!(
                    "`{shown}`: `{}` is \"{cur}\", not the \"{}\" spex wrote; spex leaves it to you",
                    dotted(&e.key),
                    e.value
                )),
                _ => {}
            }
        }
        owned.entries = kept;
        for w in &self.wanted {
            if owned.entries.iter().any(|e| e.key == w.key) {
                continue;
            }
            match get(&doc, &w.key) {
                None => {
                    set(path, &mut doc, &w.key, &w.value, &mut owned.tables)?;
                    owned.entries.push(Entry {
                        key: w.key.clone(),
                        value: w.value.clone(),
                    });
                    changed = true;
                }
                Some(item) if item.as_str() == Some(w.value.as_str()) => {}
                Some(item) => warnings.push(format!(
                    "`{shown}`: `{}` is {}, not \"{}\"; spex leaves your value, {}",
                    dotted(&w.key),
                    item.to_string().trim(),
                    w.value,
                    w.if_different
                )),
            }
        }
        // Tables spex opened go once they are empty, deepest first.
        owned.tables.sort_by_key(|t| std::cmp::Reverse(t.len()));
        let mut tables = Vec::new();
        for t in std::mem::take(&mut owned.tables) {
            match table_at(&doc, &t).map(TableLike::is_empty) {
                None => {}
                Some(true) => {
                    remove(&mut doc, &t);
                    changed = true;
                }
                Some(false) => tables.push(t),
            }
        }
        tables.sort();
        owned.tables = tables;
        if !changed {
            return Ok(Outcome {
                after: Some(text.to_owned()),
                owned,
                warnings,
            });
        }
        let after = doc.to_string();
        let after = (!(after.trim().is_empty() && self.created_by_spex)).then_some(after);
        Ok(Outcome {
            after,
            owned,
            warnings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| (*s).to_owned()).collect()
    }

    fn wants() -> Vec<Want> {
        vec![
            Want {
                key: k(&["projects", "/m", "trust_level"]),
                value: "trusted".into(),
                if_different: "so hooks will not run".into(),
            },
            Want {
                key: k(&[
                    "hooks",
                    "state",
                    "/m/.h/hooks.json:stop:0:0",
                    "trusted_hash",
                ]),
                value: "sha256:aa".into(),
                if_different: "it reads modified".into(),
            },
        ]
    }

    fn job(wanted: Vec<Want>, owned: TomlOwned) -> Job {
        Job {
            wanted,
            owned,
            legacy: None,
            created_by_spex: false,
        }
    }

    fn run(wanted: Vec<Want>, owned: TomlOwned, text: &str) -> Outcome {
        job(wanted, owned)
            .run(Path::new("/c.toml"), Some(text))
            .unwrap()
    }

    #[test]
    fn round_trips_exactly() {
        let cases = [
            "",
            "model = \"x\"",
            "model = \"x\"\n",
            "# c\nmodel = \"x\" # why\n\n[tui]\nfoo = 1\n# trailing\n",
            "model = \"x\"\r\n[tui]\r\nfoo = 1\r\n",
            "model = \"x\"\r\n[tui]\r\nfoo = 1",
            "\u{feff}a = 1\n",
            "[projects.\"/o\"]\ntrust_level = \"trusted\"\n\n[tui]\na=1\n",
            "[hooks]\nx = 1\n",
            "[projects.\"/m\"]\nmodel = \"y\"\n",
        ];
        for original in cases {
            let with = run(wants(), TomlOwned::default(), original);
            let mid = with.after.clone().unwrap();
            assert!(mid.contains("sha256:aa"), "{mid:?}");
            let again = run(wants(), with.owned.clone(), &mid);
            assert_eq!(
                again.after.as_deref(),
                Some(mid.as_str()),
                "second run is a no-op"
            );
            let back = run(Vec::new(), with.owned, &mid);
            assert_eq!(back.after.as_deref(), Some(original), "via {mid:?}");
            assert!(back.owned.is_empty());
        }
    }

    #[test]
    fn keeps_what_another_writer_put_between_and_after() {
        let with = run(wants(), TomlOwned::default(), "model = \"x\"\n");
        // Another writer appends after spex's tables and adds to spex's table.
        let mut doc: DocumentMut = with.after.unwrap().parse().unwrap();
        doc["tui"]["show_tooltips"] = value(false);
        doc["projects"]["/other"]["trust_level"] = value("trusted");
        doc["hooks"]["state"]["/m/.h/hooks.json:stop:0:0"]["enabled"] = value(true);
        let theirs = doc.to_string();
        let again = run(wants(), with.owned.clone(), &theirs);
        assert_eq!(again.after.as_deref(), Some(theirs.as_str()));
        let back = run(Vec::new(), with.owned, &theirs);
        let back: DocumentMut = back.after.unwrap().parse().unwrap();
        assert_eq!(back["tui"]["show_tooltips"].as_bool(), Some(false));
        assert_eq!(
            back["projects"]["/other"]["trust_level"].as_str(),
            Some("trusted")
        );
        assert!(back["projects"].get("/m").is_none());
        let state = &back["hooks"]["state"]["/m/.h/hooks.json:stop:0:0"];
        assert_eq!(state["enabled"].as_bool(), Some(true));
        assert!(state.get("trusted_hash").is_none());
    }

    #[test]
    fn leaves_values_changed_since_and_says_so() {
        let with = run(wants(), TomlOwned::default(), "");
        let changed = with.after.unwrap().replace("sha256:aa", "sha256:bb");
        let back = run(Vec::new(), with.owned, &changed);
        assert!(back.after.unwrap().contains("sha256:bb"));
        assert!(
            back.warnings[0].contains("sha256:bb"),
            "{:?}",
            back.warnings
        );
    }

    #[test]
    fn a_users_own_value_is_not_owned() {
        let text = "[projects.\"/m\"]\ntrust_level = \"untrusted\"\n";
        let with = run(wants(), TomlOwned::default(), text);
        assert!(
            with.warnings[0].contains("untrusted"),
            "{:?}",
            with.warnings
        );
        assert!(!with.owned.entries.iter().any(|e| e.key[0] == "projects"));
        let back = run(Vec::new(), with.owned, &with.after.unwrap());
        assert_eq!(back.after.as_deref(), Some(text));
    }

    #[test]
    fn file_spex_created_goes_when_empty() {
        let mut j = job(wants(), TomlOwned::default());
        j.created_by_spex = true;
        let with = j.run(Path::new("/c.toml"), None).unwrap();
        let mut clean = job(Vec::new(), with.owned);
        clean.created_by_spex = true;
        let back = clean
            .run(Path::new("/c.toml"), with.after.as_deref())
            .unwrap();
        assert_eq!(back.after, None);
    }

    #[test]
    fn migrates_an_old_fence_keeping_what_another_writer_put_inside() {
        let old = "model = \"x\"\n\n# spex:begin old-trust (generated by spex: edit .spec or spex.jsonc, not this block)\n[projects.\"/m\"]\ntrust_level = \"trusted\"\n\n[projects.\"/other\"]\ntrust_level = \"trusted\"\n\n[hooks.state.\"/m/.h/hooks.json:stop:0:0\"]\ntrusted_hash = \"sha256:aa\"\n\n[tui]\nshow_tooltips = false\n# spex:end old-trust\n";
        let mut j = job(wants(), TomlOwned::default());
        j.legacy = Some(Legacy {
            syntax: block::HASH,
            id: "old-trust".into(),
            claims: wants().into_iter().map(|w| w.key).collect(),
        });
        let with = j.run(Path::new("/c.toml"), Some(old)).unwrap();
        let mid = with.after.unwrap();
        assert!(!mid.contains("spex:"), "{mid}");
        assert_eq!(with.owned.entries.len(), 2);
        let back = run(Vec::new(), with.owned, &mid);
        let doc: DocumentMut = back.after.unwrap().parse().unwrap();
        assert_eq!(doc["model"].as_str(), Some("x"));
        assert_eq!(doc["tui"]["show_tooltips"].as_bool(), Some(false));
        assert_eq!(
            doc["projects"]["/other"]["trust_level"].as_str(),
            Some("trusted")
        );
        assert!(doc["projects"].get("/m").is_none());
        assert!(doc.get("hooks").is_none());
    }
}
