//! The hook groups spex owns in a harness's hooks file (`{"hooks": {Event: [group]}}`),
//! matched by value: exactly the wanted ones afterwards, the user's groups untouched. An edit
//! that cannot be redone by key.

use std::path::Path;

use serde_json::Value;

use super::Workspace;
use crate::fsutil;
use crate::seam::edit::MaterializeError;
use crate::seam::edit::json_edit::JsonDoc;

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

impl Workspace {
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
}
