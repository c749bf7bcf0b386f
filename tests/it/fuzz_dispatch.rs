//! Fuzzing `spex dispatch` through the real binary: mutated captured payloads (the corpus and
//! the mutations are in `support::payloads`) dispatched one process each into one
//! materialized project that selects every harness spex knows, with blocking policies and hook nodes so
//! every kind of answer is in play. Every case must leave the agent unbroken (exit 0 with
//! nothing or one JSON object on stdout, or a deliberate block: exit 2 with its reason on
//! stderr), log no panic, touch nothing outside the store, and keep the store readable: every
//! `session.json` parses and agrees with its log, every `events.jsonl` line parses and numbers
//! on from the one before; at the end `spex sessions` and `spex show` read every record.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use proptest::test_runner::{TestCaseError, TestError};
use serde_json::Value;

use crate::support::payloads::{self, Case, Seed};
use crate::support::world::{World, executable, write};

/// Cases per `cargo test` run: about 5 s on two cores (`SPEX_FUZZ_CASES` runs more).
const CASES: u32 = 200;

/// Every spec governs every file, and both policies block, so edits and stops get answers.
const POLICIES: &str = r#""policies": { "specFirst": "block", "stopGate": "ask" }"#;

/// A marker the blocking hook node refuses (one of the odd texts the fuzzer writes).
const BLOCK_MARKER: &str = "../../escape.txt";

/// The harness ids this spex knows (the keys of `spex slash --json`, one per adapter).
fn known_harnesses(w: &World) -> Vec<String> {
    let menus: Value = serde_json::from_str(&w.ok(&w.repo, &["slash", "--json"]))
        .expect("`spex slash --json` prints JSON");
    menus
        .as_object()
        .expect("`spex slash --json` prints an object")
        .keys()
        .cloned()
        .collect()
}

/// A world whose repo selects every harness spex knows (`harnesses`), with a spec over every
/// file and two hook nodes: one that echoes its payload back as context (as a node that
/// transforms it with `jq .` does), one that blocks payloads carrying [`BLOCK_MARKER`] (and may
/// stop reading early).
fn fuzz_world(w: &World, harnesses: &[String]) {
    write(
        &w.repo.join("spex.jsonc"),
        format!(
            "{{ \"harnesses\": {}, {POLICIES} }}\n",
            serde_json::json!(harnesses)
        ),
    );
    write(
        &w.repo.join(".spec/all/spec.md"),
        "---\ntitle: All\nsurface: system\ncode: [\"**\"]\n---\nEverything.\n",
    );
    let events = "events: [PreToolUse, PostToolUse, UserPromptSubmit, Stop, PermissionRequest]";
    write(
        &w.repo.join(".spec/echo/spec.md"),
        format!("---\ntitle: Echo\nsurface: hook\n{events}\n---\nEchoes its payload.\n"),
    );
    executable(&w.repo.join(".spec/echo/echo.sh"), "#!/bin/sh\ncat\n");
    write(
        &w.repo.join(".spec/guard/spec.md"),
        format!(
            "---\ntitle: Guard\nsurface: hook\n{events}\nblock: true\n---\nRefuses a marker.\n"
        ),
    );
    executable(
        &w.repo.join(".spec/guard/guard.sh"),
        &format!(
            "#!/bin/sh\nif grep -qF '{BLOCK_MARKER}'; then\n  echo 'guard: marker refused' >&2\n  exit 2\nfi\n"
        ),
    );
    w.ok(&w.repo, &["materialize"]);
}

// ---------------------------------------------------------------------------------------------
// Watching the store

/// What is new in an append-only log that rotates to `<path>.1` at its size bound.
#[derive(Default)]
struct Tail {
    seen: usize,
    /// The first line seen: a file that no longer starts with it has been rotated.
    head: Vec<u8>,
}

impl Tail {
    fn new_bytes(&mut self, path: &Path) -> Vec<u8> {
        let now = std::fs::read(path).unwrap_or_default();
        let mut out = Vec::new();
        if self.seen > 0 && !now.starts_with(&self.head) {
            // Rotated: the previous segment holds what was seen and what followed it.
            let mut prev = path.as_os_str().to_owned();
            prev.push(".1");
            let prev = std::fs::read(prev).unwrap_or_default();
            out.extend_from_slice(prev.get(self.seen..).unwrap_or_default());
            self.seen = 0;
        }
        out.extend_from_slice(&now[self.seen..]);
        self.seen = now.len();
        self.head = now
            .split_inclusive(|b| *b == b'\n')
            .next()
            .unwrap_or_default()
            .to_vec();
        out
    }
}

/// Whole lines of `bytes`, each parsed as JSON.
fn json_lines(path: &Path, bytes: &[u8]) -> Result<Vec<Value>, String> {
    if !bytes.is_empty() && !bytes.ends_with(b"\n") {
        return Err(format!("{} ends inside a line", path.display()));
    }
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            serde_json::from_slice(l).map_err(|e| {
                let line = String::from_utf8_lossy(l);
                format!("{}: a line is not JSON ({e}): {line:.500}", path.display())
            })
        })
        .collect()
}

/// Checks what changed in the store since the last look: the error log, every session's log
/// and record.
#[derive(Default)]
struct StoreWatch {
    errors: Tail,
    logs: BTreeMap<PathBuf, (Tail, u64)>,
    records: BTreeMap<PathBuf, (u64, Option<SystemTime>)>,
}

impl StoreWatch {
    fn check(&mut self, w: &World) -> Result<(), String> {
        let errors = w.spex_home.join("dispatch-errors.log");
        for line in json_lines(&errors, &self.errors.new_bytes(&errors))? {
            let error = line["error"].as_str().unwrap_or_default();
            if error.starts_with("panic") {
                return Err(format!("dispatch panicked: {line}"));
            }
        }
        let sessions: Vec<PathBuf> = std::fs::read_dir(w.spex_home.join("projects"))
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .flat_map(|p| {
                std::fs::read_dir(p.path().join("sessions"))
                    .into_iter()
                    .flatten()
            })
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        for dir in sessions {
            self.check_session(&dir)?;
        }
        Ok(())
    }

    fn check_session(&mut self, dir: &Path) -> Result<(), String> {
        let log = dir.join("events.jsonl");
        let (tail, last_seq) = self.logs.entry(log.clone()).or_default();
        for event in json_lines(&log, &tail.new_bytes(&log))? {
            let seq = event["seq"]
                .as_u64()
                .ok_or(format!("{}: no seq: {event}", log.display()))?;
            if seq != *last_seq + 1 {
                return Err(format!("{}: seq {seq} follows {last_seq}", log.display()));
            }
            *last_seq = seq;
        }
        let last_seq = *last_seq;
        let path = dir.join("session.json");
        let Ok(meta) = std::fs::metadata(&path) else {
            return Ok(());
        };
        let stamp = (meta.len(), meta.modified().ok());
        if self.records.get(&path) == Some(&stamp) {
            return Ok(());
        }
        self.records.insert(path.clone(), stamp);
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let record: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not JSON ({e}): {text:.500}", path.display()))?;
        if !record["id"].is_string() {
            return Err(format!("{} has no id", path.display()));
        }
        if last_seq > 0 && record["seq"].as_u64() != Some(last_seq) {
            return Err(format!(
                "{} says seq {} but its log ends at {last_seq}",
                path.display(),
                record["seq"]
            ));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Running cases

/// Far beyond what a hook may take (harnesses give up after 30 s), far above what one takes.
const HUNG: Duration = Duration::from_secs(10);

/// How many answers of each kind the cases got: silence, one JSON object, a block (exit 2).
#[derive(Debug, Default)]
struct Tally {
    silent: usize,
    json: usize,
    blocked: usize,
}

/// Dispatches `payload` as `event` of the seed's harness; why it broke something, if it did.
fn dispatch_one(
    w: &World,
    watch: &mut StoreWatch,
    tally: &mut Tally,
    seed: &Seed,
    event: &str,
    payload: &Value,
) -> Result<(), String> {
    let out = w
        .dispatch_within(&w.repo, &seed.harness, event, payload, HUNG)
        .ok_or(format!(
            "`spex dispatch {} {event}` hung for {HUNG:?}",
            seed.harness
        ))?;
    if let Some(problem) = payloads::reply_problem(out.status.code(), &out.stdout, &out.stderr) {
        return Err(problem);
    }
    match (out.status.code(), out.stdout.is_empty()) {
        (Some(2), _) => tally.blocked += 1,
        (_, true) => tally.silent += 1,
        (_, false) => tally.json += 1,
    }
    watch.check(w)
}

/// Where a failing case's payload is saved (unlocalized, as a corpus file), to be committed
/// under `tests/fixtures/payloads/fuzz-regressions/` once it is understood.
fn save_failure(case: &Case) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("fuzz-failures")
        .join(&case.seed.harness)
        .join(format!(
            "{}.{}.json",
            case.event,
            case.seed.name.replace('.', "_")
        ));
    write(
        &path,
        serde_json::to_string_pretty(&case.payload()).unwrap(),
    );
    path
}

#[test]
fn fuzz_mutated_payloads_never_break_the_agent_or_the_store() {
    let w = World::new();
    let known = known_harnesses(&w);
    fuzz_world(&w, &known);
    // Payloads of a harness spex has no adapter for yet would only test the unknown-id path.
    let is_known = |s: &Seed| known.contains(&s.harness);
    let before = w.snapshot(&[]);
    let mut watch = StoreWatch::default();
    let mut tally = Tally::default();
    for seed in payloads::regressions().into_iter().filter(is_known) {
        let payload = payloads::localize(seed.payload.clone(), &w.repo, &w.home);
        if let Err(e) = dispatch_one(&w, &mut watch, &mut tally, &seed, &seed.event, &payload) {
            panic!("regression {seed:?}: {e}");
        }
    }
    let (mut runner, rng_seed) = payloads::runner(CASES, 16);
    // The runner takes a `Fn`; the cases run one after another.
    let (watch, tally) = (RefCell::new(watch), RefCell::new(tally));
    let seeds = payloads::seeds().into_iter().filter(is_known).collect();
    let result = runner.run(&payloads::cases(seeds), |case| {
        let payload = case.apply(payloads::localize(
            case.seed.payload.clone(),
            &w.repo,
            &w.home,
        ));
        dispatch_one(
            &w,
            &mut watch.borrow_mut(),
            &mut tally.borrow_mut(),
            &case.seed,
            &case.event,
            &payload,
        )
        .map_err(|e| {
            TestCaseError::fail(format!("{e}\npayload: {}", payloads::shown(&payload, 2000)))
        })
    });
    match result {
        Ok(()) => {}
        Err(TestError::Fail(why, case)) => panic!(
            "fuzz case failed (SPEX_FUZZ_SEED={rng_seed}): {why}\ncase: {case:#?}\nsaved: {}",
            save_failure(&case).display()
        ),
        Err(e) => panic!("fuzz run aborted (SPEX_FUZZ_SEED={rng_seed}): {e}"),
    }
    // The cases reached every kind of answer, not only the early exits of broken payloads.
    let tally = tally.into_inner();
    assert!(
        tally.silent > 0 && tally.json > 0 && tally.blocked > 0,
        "{tally:?}"
    );
    let diff = before.content_diff(&w.snapshot(&[]));
    assert!(
        diff.is_empty(),
        "dispatch touched files outside the store: {diff:#?}"
    );
    // spex itself still reads every record it wrote.
    let list: Value = serde_json::from_str(&w.ok(&w.repo, &["sessions", "--all", "--json"]))
        .expect("`spex sessions --json` prints JSON");
    let ids: Vec<String> = w
        .session_ids()
        .into_iter()
        .filter(|id| w.record_if_any(id).is_some())
        .collect();
    assert!(ids.len() > 3, "the fuzz cases made few sessions: {ids:?}");
    assert_eq!(
        list.as_array().map(Vec::len),
        Some(ids.len()),
        "{}",
        payloads::shown(&list, 2000)
    );
    for id in ids {
        let shown: Value = serde_json::from_str(&w.ok(&w.repo, &["show", &id, "--json"]))
            .unwrap_or_else(|e| panic!("`spex show {id} --json` is not JSON: {e}"));
        assert_eq!(shown["session"]["id"], Value::from(id.as_str()));
    }
}
