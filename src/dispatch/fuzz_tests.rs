//! The hook path fuzzed in process, where a case costs microseconds instead of a process:
//! mutated captured payloads (corpus and mutations in `tests/it/support/payloads.rs`, shared
//! with the end-to-end fuzz test `tests/it/fuzz_dispatch.rs` and included as
//! `adapters::payloads`) through every adapter's decode and encode, and through the whole
//! pipeline (`handle`) into a temporary store, which spex's own reader must still load
//! afterwards. A panic anywhere fails the case.

use std::path::Path;
use std::process::Command;

use proptest::test_runner::{TestCaseError, TestError};

use crate::adapters::{self, payloads};
use crate::env::Env;
use crate::seam::event::{Answer, Reply};
use crate::store::ProjectStore;
use crate::store::session::Event;

/// Fails the run with its smallest failing case.
fn report<T: std::fmt::Debug>(result: Result<(), TestError<T>>, rng_seed: u64) {
    match result {
        Ok(()) => {}
        Err(TestError::Fail(why, case)) => {
            panic!("fuzz case failed (SPEX_FUZZ_SEED={rng_seed}): {why}\ncase: {case:#?}")
        }
        Err(e) => panic!("fuzz run aborted (SPEX_FUZZ_SEED={rng_seed}): {e}"),
    }
}

fn check_reply(reply: &Reply, what: &str) -> Result<(), TestCaseError> {
    match payloads::reply_problem(
        Some(reply.exit_code),
        reply.stdout.as_bytes(),
        reply.stderr.as_bytes(),
    ) {
        Some(problem) => Err(TestCaseError::fail(format!("{what}: {problem}"))),
        None => Ok(()),
    }
}

#[test]
fn fuzz_every_adapter_decodes_and_encodes_mutated_payloads() {
    let (mut runner, rng_seed) = payloads::runner(2000, 1024);
    let result = runner.run(&payloads::cases(payloads::seeds()), |case| {
        let payload = case.payload();
        for (h, wire) in adapters::all().iter().filter_map(|h| Some((h, h.wire()?))) {
            let ev = wire.decode(&case.event, &payload);
            // Answers made of what the payload said, as handlers and hook nodes quote it back
            // (a block always has a reason: a policy's text, a node's stderr or its name).
            let said: Vec<String> = [&ev.prompt, &ev.tool, &ev.error, &ev.cwd]
                .into_iter()
                .flatten()
                .cloned()
                .chain(ev.attention.iter().map(|(_, text)| text.clone()))
                .collect();
            let answers = [
                Answer::default(),
                Answer {
                    context: said.clone(),
                    block: None,
                },
                Answer {
                    block: Some(format!("blocked: {}", said.concat())),
                    context: said,
                },
            ];
            for (i, answer) in answers.iter().enumerate() {
                let what = format!("{} encoding answer {i} for {}", h.id(), case.event);
                check_reply(&wire.encode(&case.event, answer), &what)?;
            }
        }
        Ok(())
    });
    report(result, rng_seed);
}

/// Every record and event line of every project under `spex_home` loads with spex's own types.
fn assert_store_loads(spex_home: &Path) {
    for project in fs_err::read_dir(spex_home.join("projects"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
    {
        let store = ProjectStore {
            dir: project.path(),
            event_log_bytes: crate::config::EVENT_LOG_BYTES,
        };
        for id in store.session_ids() {
            let record = store.load(&id);
            assert!(
                matches!(record, Ok(Some(_))),
                "record {id} does not load: {record:?}"
            );
            let log = store.session_dir(&id).join("events.jsonl");
            let text = fs_err::read_to_string(&log).unwrap_or_default();
            for line in text.lines() {
                if let Err(e) = serde_json::from_str::<Event>(line) {
                    panic!("{}: a line does not load ({e}): {line:.300}", log.display());
                }
            }
        }
    }
}

#[test]
fn fuzz_the_hook_pipeline_survives_mutated_payloads() {
    let dir = tempfile::tempdir().unwrap();
    let base = fs_err::canonicalize(dir.path()).unwrap();
    let (repo, home, spex_home) = (base.join("repo"), base.join("home"), base.join("store"));
    fs_err::create_dir_all(&repo).unwrap();
    fs_err::create_dir_all(&home).unwrap();
    let git = Command::new("git")
        .args(["init", "-q", "-b", "main"])
        .current_dir(&repo)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .expect("git runs");
    assert!(git.success(), "git init");
    // A payload without a usable cwd falls back to this process's cwd (the crate's checkout):
    // the store is still the temporary one, and dispatch writes nowhere else.
    // Every variable an adapter reads is named (and unset), as `dispatch` names them.
    let env = Env {
        home: Some(home.clone()),
        spex_home: Some(spex_home.clone()),
        vars: adapters::env_vars().map(|name| (name, None)).collect(),
        ..Env::default()
    };
    // Seeds of a harness without an adapter would only test the unknown-harness error.
    let seeds = payloads::seeds()
        .into_iter()
        .filter(|s| adapters::lookup(&s.harness).is_some())
        .collect();
    let (mut runner, rng_seed) = payloads::runner(600, 256);
    let result = runner.run(&payloads::cases(seeds), |case| {
        let payload = case.apply(payloads::localize(case.seed.payload.clone(), &repo, &home));
        let raw = payload.to_string();
        // An `Err` is an internal error the dispatcher logs and swallows: allowed.
        if let Ok(Some(reply)) =
            super::handle(&env, &case.seed.harness, &case.event, raw.as_bytes())
        {
            let what = format!("{} {}", case.event, payloads::shown(&payload, 2000));
            check_reply(&reply, &what)?;
        }
        Ok(())
    });
    report(result, rng_seed);
    assert_store_loads(&spex_home);
}
