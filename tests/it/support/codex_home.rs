//! `CODEX_HOME` seeding: point the real Codex at [`super::fake_responses::FakeResponses`].

use std::fs;
use std::io::ErrorKind;
use std::path::Path;
use std::process::Command;

use toml_edit::{DocumentMut, Item, Table, value};

use super::peers::{codex_bin, hermetic};

/// The env var named by the fake provider's `env_key`; Codex refuses to start a turn unless it
/// is set (to anything).
pub const FAKE_API_KEY_ENV: &str = "FAKE_API_KEY";

fn edit_config(codex_home: &Path, edit: impl FnOnce(&mut DocumentMut)) {
    fs::create_dir_all(codex_home).expect("create CODEX_HOME");
    let path = codex_home.join("config.toml");
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == ErrorKind::NotFound => String::new(),
        Err(e) => panic!("read {}: {e}", path.display()),
    };
    let mut doc: DocumentMut = text
        .parse()
        .unwrap_or_else(|e| panic!("{} is not valid TOML: {e}", path.display()));
    edit(&mut doc);
    fs::write(&path, doc.to_string()).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// The root table `key`, created without a header of its own (only its subtables get one).
fn implicit_table<'d>(doc: &'d mut DocumentMut, key: &str) -> &'d mut Table {
    doc.entry(key)
        .or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_mut()
        .unwrap_or_else(|| panic!("{key} is a table"))
}

/// Adds the fake provider (facts/codex.md §4(b)) to `<codex_home>/config.toml`, keeping whatever
/// is already there (e.g. spex's trust block).
///
/// Edited with `toml_edit` rather than appended as text: root keys appended after an existing
/// `[table]` would silently land inside that table. Existing content, comments and order are
/// kept; only these keys are set: `model = "gpt-5.5"` (a known slug: `exec_command` + freeform
/// `apply_patch`), `model_provider = "fake"`, `approval_policy`, `sandbox_mode`, and
/// `[model_providers.fake]` with `base_url = fake_base_url` (from `FakeResponses::base_url`,
/// ending in `/v1`), `wire_api = "responses"`, `env_key = "FAKE_API_KEY"` and no retries.
pub fn write_codex_config(codex_home: &Path, fake_base_url: &str, approval: &str, sandbox: &str) {
    edit_config(codex_home, |doc| {
        doc["model"] = value("gpt-5.5");
        doc["model_provider"] = value("fake");
        doc["approval_policy"] = value(approval);
        doc["sandbox_mode"] = value(sandbox);
        // No bare `[model_providers]` header, just `[model_providers.fake]`.
        let providers = implicit_table(doc, "model_providers");
        let mut fake = Table::new();
        fake["name"] = value("fake");
        fake["base_url"] = value(fake_base_url);
        fake["wire_api"] = value("responses");
        fake["env_key"] = value(FAKE_API_KEY_ENV);
        // Retries would turn a scripted failure into minutes of backoff.
        fake["request_max_retries"] = value(0);
        fake["stream_max_retries"] = value(0);
        providers["fake"] = Item::Table(fake);
    });
}

/// Lets Codex reconnect `n` times after a failed model request (each reconnect attempt fires
/// `PostModelRequest`; facts/codex.md §8). [`write_codex_config`] sets no retries.
pub fn set_stream_retries(codex_home: &Path, n: i64) {
    edit_config(codex_home, |doc| {
        doc["model_providers"]["fake"]["stream_max_retries"] = value(n);
    });
}

/// Marks `project` trusted (`[projects."<canonical path>"] trust_level = "trusted"`), which
/// Codex requires before it loads the project's `.codex/` config and hooks.
pub fn trust_project(codex_home: &Path, project: &Path) {
    let key = project
        .canonicalize()
        .unwrap_or_else(|_| project.to_path_buf())
        .to_string_lossy()
        .into_owned();
    edit_config(codex_home, |doc| {
        let projects = implicit_table(doc, "projects");
        let mut t = Table::new();
        t["trust_level"] = value("trusted");
        projects[key.as_str()] = Item::Table(t);
    });
}

/// The real `codex` in a hermetic env: `HOME=home`, `CODEX_HOME=codex_home`, the fake
/// provider's key, and `RUST_LOG=warn` so its stderr stays readable in a failure message.
pub fn codex_command(codex_home: &Path, home: &Path) -> Command {
    let mut cmd = hermetic(&codex_bin(), home);
    cmd.env("CODEX_HOME", codex_home)
        .env(FAKE_API_KEY_ENV, "dummy")
        .env("RUST_LOG", "warn");
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_existing_config_and_puts_root_keys_at_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let existing = "# user comment\n[hooks.state]\n\"x\" = { trusted_hash = \"abc\" }\n";
        fs::write(dir.path().join("config.toml"), existing).unwrap();
        write_codex_config(
            dir.path(),
            "http://127.0.0.1:1/v1",
            "never",
            "danger-full-access",
        );
        let text = fs::read_to_string(dir.path().join("config.toml")).unwrap();
        assert!(text.contains("# user comment"), "{text}");
        assert!(text.contains("trusted_hash = \"abc\""), "{text}");
        let doc: DocumentMut = text.parse().unwrap();
        assert_eq!(doc["model"].as_str(), Some("gpt-5.5"));
        assert_eq!(doc["approval_policy"].as_str(), Some("never"));
        assert_eq!(
            doc["model_providers"]["fake"]["base_url"].as_str(),
            Some("http://127.0.0.1:1/v1")
        );
        assert!(doc["hooks"]["state"].get("model").is_none(), "{text}");
    }
}
