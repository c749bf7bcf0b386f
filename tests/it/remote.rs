//! Other machines over SSH (issue 32), against a real OpenSSH server on a loopback port whose
//! test key logs in to a second spex world (`support::sshd`).

use serde_json::Value;

use crate::support::sshd::Sshd;
use crate::support::world::World;

#[test]
fn a_call_reaches_the_spex_on_the_other_machine_over_real_ssh() {
    let local = World::new();
    let other = World::new();
    let sshd = Sshd::start(&other);
    sshd.ok(&local, &["remote", "add", "other", sshd.alias()]);
    sshd.ok(&local, &["remote", "add", "byuri", &sshd.uri()]);
    let config = std::fs::read_to_string(local.xdg_config.join("spex/config.jsonc")).unwrap();
    assert!(config.contains("\"other\""), "{config}");

    let out = sshd.ok(&local, &["remote", "check", "other"]);
    assert!(
        out.contains(&format!("spex {}, protocol 1", env!("CARGO_PKG_VERSION"))),
        "{out}"
    );
    let list: Value =
        serde_json::from_str(&sshd.ok(&local, &["remote", "list", "--json"])).unwrap();
    let rows = list.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{list}");
    for row in rows {
        assert_eq!(row["reachable"], true, "{row}");
        assert_eq!(row["spex"], env!("CARGO_PKG_VERSION"), "{row}");
        assert!(
            row["features"]
                .as_array()
                .unwrap()
                .contains(&"hello".into()),
            "{row}"
        );
    }
    // Through the real server, with the test's key.
    assert!(sshd.log().contains("Accepted publickey"), "{}", sshd.log());
}
