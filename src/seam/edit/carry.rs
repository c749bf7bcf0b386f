//! Carrying another writer's change across a lost race. A write by key swaps spex's version
//! `S` (its edit on `A`) in place and finds that another program had written `B` over `A`
//! just before; until spex puts `B` plus its edit in place, that program can read `S` and
//! write `X` from it, which lacks what `B` changed. Before the edit is redone on `X`, every
//! key `B` changed from `A` is set again in `X`, unless `X` changed that key itself since `S`
//! (then `X` is the newer word). A three-way merge by key: it keeps `X`'s bytes everywhere
//! else.

use serde_json::Value;

use super::json_edit::JsonDoc;

/// `x` with the changes `a -> b` carried over where `x` still holds `s`'s value; `None` when
/// a version does not parse (the caller then redoes its edit on `x` as it is).
pub fn json(
    base: Option<&[u8]>,
    theirs: &[u8],
    ours: Option<&[u8]>,
    now: &[u8],
) -> Option<Vec<u8>> {
    let value = |bytes: Option<&[u8]>| -> Option<Value> {
        match bytes {
            None => Some(Value::Object(serde_json::Map::new())),
            Some(b) => JsonDoc::parse(b).ok().map(|d| d.value()),
        }
    };
    let (va, vb, vs) = (value(base)?, value(Some(theirs))?, value(ours)?);
    let mut doc = JsonDoc::parse(now).ok()?;
    let vx = doc.value();
    json_walk(&va, &vb, &vs, &vx, &mut Vec::new(), &mut doc).ok()?;
    Some(doc.to_bytes())
}

fn json_walk(
    base: &Value,
    theirs: &Value,
    ours: &Value,
    now: &Value,
    path: &mut Vec<String>,
    doc: &mut JsonDoc,
) -> Result<(), super::json_edit::JsonError> {
    let empty = serde_json::Map::new();
    let obj = |v: &Value| v.as_object().cloned().unwrap_or_else(|| empty.clone());
    let (oa, ob, os, ox) = (obj(base), obj(theirs), obj(ours), obj(now));
    let mut keys: Vec<&String> = Vec::new();
    for key in oa.keys().chain(ob.keys()) {
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    for k in keys {
        let (ak, bk, sk, xk) = (oa.get(k), ob.get(k), os.get(k), ox.get(k));
        if ak == bk {
            continue;
        }
        if xk == sk {
            match (bk, xk) {
                (Some(v), Some(_)) => doc.replace_member(path, k, v)?,
                (Some(v), None) => doc.insert_member(path, k, v)?,
                (None, Some(_)) => {
                    doc.remove_member(path, k)?;
                }
                (None, None) => {}
            }
        } else if let (Some(bv @ Value::Object(_)), Some(xv @ Value::Object(_))) = (bk, xk) {
            // Both changed inside the same object: carry key by key below it.
            let none = Value::Object(serde_json::Map::new());
            path.push(k.clone());
            json_walk(ak.unwrap_or(&none), bv, sk.unwrap_or(&none), xv, path, doc)?;
            path.pop();
        }
    }
    Ok(())
}

/// The TOML counterpart of [`json`], table by table (`toml_edit` keeps `x`'s formatting).
pub fn toml(
    base: Option<&[u8]>,
    theirs: &[u8],
    ours: Option<&[u8]>,
    now: &[u8],
) -> Option<Vec<u8>> {
    // An absent file reads as an empty document.
    let doc = |b: Option<&[u8]>| {
        std::str::from_utf8(b.unwrap_or_default())
            .ok()?
            .parse::<toml_edit::DocumentMut>()
            .ok()
    };
    let (da, db, ds) = (doc(base)?, doc(Some(theirs))?, doc(ours)?);
    let mut dx = doc(Some(now))?;
    toml_walk(
        da.as_table(),
        db.as_table(),
        ds.as_table(),
        dx.as_table_mut(),
    );
    Some(dx.to_string().into_bytes())
}

/// An item's content, for comparing versions (formatting aside).
fn text(item: Option<&toml_edit::Item>) -> Option<String> {
    item.filter(|i| !i.is_none()).map(|i| match i {
        toml_edit::Item::Value(v) => v.clone().decorated("", "").to_string(),
        other => other.to_string(),
    })
}

fn toml_walk(
    base: &dyn toml_edit::TableLike,
    theirs: &dyn toml_edit::TableLike,
    ours: &dyn toml_edit::TableLike,
    now: &mut dyn toml_edit::TableLike,
) {
    let mut keys: Vec<String> = Vec::new();
    for (key, _) in base.iter().chain(theirs.iter()) {
        if !keys.iter().any(|have| have == key) {
            keys.push(key.to_owned());
        }
    }
    let empty = toml_edit::Table::new();
    for k in keys {
        let (ak, bk, sk) = (base.get(&k), theirs.get(&k), ours.get(&k));
        if text(ak) == text(bk) {
            continue;
        }
        if text(now.get(&k)) == text(sk) {
            match bk {
                Some(v) => {
                    now.insert(&k, v.clone());
                }
                None => {
                    now.remove(&k);
                }
            }
            continue;
        }
        let (Some(bt), Some(xt)) = (
            bk.and_then(toml_edit::Item::as_table_like),
            now.get_mut(&k).and_then(toml_edit::Item::as_table_like_mut),
        ) else {
            continue;
        };
        let at = ak
            .and_then(toml_edit::Item::as_table_like)
            .unwrap_or(&empty);
        let st = sk
            .and_then(toml_edit::Item::as_table_like)
            .unwrap_or(&empty);
        toml_walk(at, bt, st, xt);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_key_comes_back_and_newer_words_win() {
        let base = br#"{"n": 1, "keep": "a"}"#;
        let theirs = br#"{"n": 1, "keep": "a", "w1": 1}"#;
        let ours = br#"{"n": 1, "keep": "a", "spex": true}"#;
        let now = br#"{"n": 1, "keep": "x", "spex": true, "w2": 2}"#;
        let out = json(Some(base), theirs, Some(ours), now).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["w1"], 1);
        assert_eq!(v["w2"], 2);
        assert_eq!(v["keep"], "x");
        assert_eq!(v["spex"], true);
    }

    #[test]
    fn nested_changes_on_both_sides_merge_by_key() {
        let base = r#"{"projects": {"/p": {"a": 1}}}"#;
        let theirs = r#"{"projects": {"/p": {"a": 1, "b": 2}}}"#;
        let ours = r#"{"projects": {"/p": {"a": 1, "t": true}}}"#;
        let now = r#"{"projects": {"/p": {"a": 1, "t": true}, "/q": {}}}"#;
        let out = json(
            Some(base.as_bytes()),
            theirs.as_bytes(),
            Some(ours.as_bytes()),
            now.as_bytes(),
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["projects"]["/p"]["b"], 2);
        assert!(v["projects"]["/q"].is_object());
    }

    #[test]
    fn toml_tables_lost_in_between_come_back() {
        let base = "model = \"m\"\n";
        let theirs = "model = \"m\"\n\n[writer.t1]\nn = 1\n";
        let ours = "model = \"m\"\n\n[projects.\"/p\"]\ntrust_level = \"trusted\"\n";
        let now =
            "model = \"m\"\n\n[projects.\"/p\"]\ntrust_level = \"trusted\"\n\n[writer.t2]\nn = 2\n";
        let out = toml(
            Some(base.as_bytes()),
            theirs.as_bytes(),
            Some(ours.as_bytes()),
            now.as_bytes(),
        )
        .unwrap();
        let out = String::from_utf8(out).unwrap();
        let d: toml_edit::DocumentMut = out.parse().unwrap();
        assert_eq!(d["writer"]["t1"]["n"].as_integer(), Some(1), "{out}");
        assert_eq!(d["writer"]["t2"]["n"].as_integer(), Some(2), "{out}");
        assert_eq!(d["projects"]["/p"]["trust_level"].as_str(), Some("trusted"));
    }
}
