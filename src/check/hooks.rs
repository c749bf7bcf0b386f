//! "Every bound hook fires": the hook events `materialize` bound for the harness (read back from
//! the files it wrote, as the harness reads them) against the events `spex dispatch` was called
//! with across the scenarios (the project's `dispatch.log`, kept with `SPEX_TRACE_DISPATCH`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The events bound to `spex dispatch <id>` in the files `materialize --json` reported, each
/// with the first file that binds it.
pub fn bound(materialized: &Value, repo: &Path, id: &str) -> BTreeMap<String, PathBuf> {
    let needle = format!(" dispatch {id} ");
    let mut out = BTreeMap::new();
    let changes = materialized["changes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for c in changes {
        let Some(p) = c["path"].as_str() else {
            continue;
        };
        let path = repo.join(p);
        // Skills and the contract are text spex renders; hooks live in small settings files.
        let Ok(text) = fs_err::read_to_string(&path) else {
            continue;
        };
        for (_, rest) in text
            .match_indices(&needle)
            .map(|(i, _)| text.split_at(i + needle.len()))
        {
            let event: String = rest
                .chars()
                .take_while(char::is_ascii_alphanumeric)
                .collect();
            if !event.is_empty() {
                // Named as in the repository: the sandbox's folder is gone after the check.
                let shown = path.strip_prefix(repo).unwrap_or(&path).to_owned();
                out.entry(event).or_insert(shown);
            }
        }
    }
    out
}

/// The events `spex dispatch <id>` was called with, as `dispatch.log` lines under `projects`.
pub fn fired(projects: &Path, id: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let Ok(dirs) = fs_err::read_dir(projects) else {
        return out;
    };
    for d in dirs.filter_map(Result::ok) {
        let Ok(text) = fs_err::read_to_string(d.path().join("dispatch.log")) else {
            continue;
        };
        for line in text.lines() {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            if v["harness"] == id
                && let Some(e) = v["event"].as_str()
            {
                out.insert(e.to_owned());
            }
        }
    }
    out
}

/// The line's result: every bound event fired, else the ones that never did, where each is
/// bound, and what did fire.
pub fn judge(
    bound: &BTreeMap<String, PathBuf>,
    fired: &BTreeSet<String>,
) -> Result<(), Vec<String>> {
    if bound.is_empty() {
        return Err(vec![
            "`spex materialize` bound no hook to `spex dispatch` in the files it wrote".into(),
        ]);
    }
    let never: Vec<String> = bound
        .iter()
        .filter(|(e, _)| !fired.contains(*e))
        .map(|(e, file)| format!("`{e}` (bound in {})", file.display()))
        .collect();
    if never.is_empty() {
        return Ok(());
    }
    Err(vec![
        format!("never fired: {}", never.join(", ")),
        format!(
            "fired: {}",
            fired.iter().cloned().collect::<Vec<_>>().join(", ")
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_events_are_read_from_the_written_files_and_judged_against_the_fired_ones() {
        let dir = tempfile::tempdir().unwrap();
        let settings = dir.path().join(".h/settings.json");
        fs_err::create_dir_all(settings.parent().unwrap()).unwrap();
        fs_err::write(
            &settings,
            r#"{"hooks": {"Stop": [{"command": "'/bin/spex' dispatch h Stop"}],
                "PreToolUse": [{"command": "'/bin/spex' dispatch h PreToolUse"}],
                "Other": [{"command": "'/bin/spex' dispatch g Other"}]}}"#,
        )
        .unwrap();
        let m = serde_json::json!({"changes": [{"path": ".h/settings.json"}, {"path": "absent"}]});
        let b = bound(&m, dir.path(), "h");
        assert_eq!(b.keys().collect::<Vec<_>>(), ["PreToolUse", "Stop"]);

        let projects = dir.path().join("projects");
        fs_err::create_dir_all(projects.join("p")).unwrap();
        fs_err::write(
            projects.join("p/dispatch.log"),
            "{\"harness\":\"h\",\"event\":\"Stop\"}\n{\"harness\":\"g\",\"event\":\"PreToolUse\"}\nnot json\n",
        )
        .unwrap();
        let f = fired(&projects, "h");
        assert_eq!(f.iter().collect::<Vec<_>>(), ["Stop"]);
        let e = judge(&b, &f).unwrap_err();
        assert_eq!(
            e[0],
            "never fired: `PreToolUse` (bound in .h/settings.json)"
        );
        assert_eq!(e[1], "fired: Stop");
        let all: BTreeSet<String> = ["Stop", "PreToolUse"].map(String::from).into();
        assert_eq!(judge(&b, &all), Ok(()));
        assert!(judge(&BTreeMap::new(), &all).is_err());
    }
}
