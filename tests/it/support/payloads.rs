//! Captured hook payloads as a fuzzing corpus, and the mutations the fuzz tests apply to them.
//! The seed corpus is the repository's own: every payload under
//! `tests/fixtures/payloads/<harness>/` and every payload that once broke spex under
//! `tests/fixtures/payloads/fuzz-regressions/<harness>/` (a file is `<Event>[.<what>].json`).
//! The harness of a payload is its folder's name; a test that dispatches seeds keeps those of
//! the harnesses spex knows ([`Seed::harness`] is the id `spex dispatch` takes), so captured
//! payloads of a harness become seeds as soon as its adapter is registered.
//! A case is one seed with 1 to 4 mutations (a value deleted, retyped, truncated, nested
//! deeper, replaced by a huge or an odd string, an unknown field added) and the event it is
//! dispatched as. The in-process tests in `src/dispatch/fuzz_tests.rs` include this file by
//! path, so it names nothing of either crate: `serde_json`, `proptest` and `std` only.

use std::fmt;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Value, json};

pub const PAYLOADS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/payloads");

/// The folders of captured payloads that are no harness's.
const NOT_A_HARNESS: &str = "fuzz-regressions";

/// Harnesses with captured payloads: the folders under [`PAYLOADS`] (but [`NOT_A_HARNESS`]),
/// sorted.
pub fn harnesses() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(PAYLOADS)
        .unwrap_or_else(|e| panic!("{PAYLOADS}: {e}"))
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name != NOT_A_HARNESS)
        .collect();
    out.sort();
    out
}

/// One payload of the corpus.
#[derive(Clone)]
pub struct Seed {
    /// The harness id: the name of the payload's folder.
    pub harness: String,
    /// The file name without `.json`.
    pub name: String,
    /// The event the payload was captured for: the file name up to its first dot.
    pub event: String,
    pub payload: Value,
}

impl fmt::Debug for Seed {
    // A case prints the seed by name: the payload itself can be long.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}.json", self.harness, self.name)
    }
}

/// The payloads in `dir` (none when it does not exist), sorted by name.
fn seeds_in(harness: &str, dir: &Path) -> Vec<Seed> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let name = path
                .file_stem()
                .expect("a file name")
                .to_string_lossy()
                .into_owned();
            Seed {
                harness: harness.to_owned(),
                event: name.split('.').next().unwrap_or_default().to_owned(),
                payload: serde_json::from_str(&text)
                    .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display())),
                name,
            }
        })
        .collect()
}

/// Payloads that once broke spex, each to be dispatched as it is.
pub fn regressions() -> Vec<Seed> {
    let root = Path::new(PAYLOADS).join(NOT_A_HARNESS);
    harnesses()
        .iter()
        .flat_map(|h| seeds_in(h, &root.join(h)))
        .collect()
}

/// The whole corpus: the captured payloads, then the regressions.
pub fn seeds() -> Vec<Seed> {
    let mut out: Vec<Seed> = harnesses()
        .iter()
        .flat_map(|h| seeds_in(h, &Path::new(PAYLOADS).join(h)))
        .collect();
    assert!(out.len() > 20, "the seed corpus is missing: {out:?}");
    out.extend(regressions());
    out
}

pub fn replace_strings(v: &mut Value, from: &str, to: &str) {
    match v {
        Value::String(s) => *s = s.replace(from, to),
        Value::Array(a) => a.iter_mut().for_each(|x| replace_strings(x, from, to)),
        Value::Object(m) => m.values_mut().for_each(|x| replace_strings(x, from, to)),
        _ => {}
    }
}

/// A captured payload moved into a test's world: its cwd (and every path under it) becomes
/// `repo`, the rest of `/home/dev` (where the payloads were captured) becomes `home`.
pub fn localize(mut v: Value, repo: &Path, home: &Path) -> Value {
    if let Some(cwd) = v["cwd"].as_str().map(str::to_owned) {
        replace_strings(&mut v, &cwd, &repo.to_string_lossy());
    }
    replace_strings(&mut v, "/home/dev", &home.to_string_lossy());
    v
}

// ---------------------------------------------------------------------------------------------
// Mutations

/// Which value of the payload a mutation changes: one of the top-level fields, or any value
/// at any depth (picked among all of them, in document order).
#[derive(Debug, Clone)]
pub struct Target {
    pub top_level: bool,
    pub pick: Index,
}

#[derive(Debug, Clone)]
pub enum Mutation {
    /// The field or array element is removed.
    Delete(Target),
    /// The value is replaced by this one (mostly of another JSON type).
    Retype(Target, Value),
    /// A string keeps a prefix of its characters; an array or object, a prefix of its items.
    Truncate(Target, Index),
    /// The value is wrapped in this many arrays (`false`) or objects (`true`).
    Nest(Target, usize, bool),
    /// The value becomes a string of at least this many bytes: a string repeated, else `x`s,
    /// with multi-byte characters mixed in.
    Huge(Target, usize),
    /// The value becomes this odd text, or (`true`) a string gets it appended.
    Odd(Target, &'static str, bool),
    /// A field of this name and value is added to the target object (else to the payload).
    Unknown(Target, String, Value),
}

/// One fuzz case: a seed, the event it is dispatched as, and what is done to it.
#[derive(Debug, Clone)]
pub struct Case {
    pub seed: Seed,
    pub event: String,
    pub mutations: Vec<Mutation>,
}

impl Case {
    /// `base` (the seed's payload, maybe localized) with the mutations applied in order.
    pub fn apply(&self, mut base: Value) -> Value {
        for m in &self.mutations {
            mutate(&mut base, m);
        }
        base
    }

    /// The seed's payload, mutated.
    pub fn payload(&self) -> Value {
        self.apply(self.seed.payload.clone())
    }
}

#[derive(Debug, Clone)]
enum Step {
    Key(String),
    At(usize),
}

/// Every path to a value below the root, in document order (top-level fields only when asked).
fn paths(root: &Value, top_level: bool) -> Vec<Vec<Step>> {
    fn walk(v: &Value, prefix: &mut Vec<Step>, deep: bool, out: &mut Vec<Vec<Step>>) {
        let children: Vec<(Step, &Value)> = match v {
            Value::Object(m) => m.iter().map(|(k, x)| (Step::Key(k.clone()), x)).collect(),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .map(|(i, x)| (Step::At(i), x))
                .collect(),
            _ => return,
        };
        for (step, child) in children {
            prefix.push(step);
            out.push(prefix.clone());
            if deep {
                walk(child, prefix, deep, out);
            }
            prefix.pop();
        }
    }
    let mut out = Vec::new();
    walk(root, &mut Vec::new(), !top_level, &mut out);
    out
}

fn at_mut<'v>(root: &'v mut Value, path: &[Step]) -> Option<&'v mut Value> {
    path.iter().try_fold(root, |v, step| match step {
        Step::Key(k) => v.get_mut(k.as_str()),
        Step::At(i) => v.get_mut(*i),
    })
}

/// The path `t` picks in `root`, if `root` has any value below it.
fn resolve(root: &Value, t: &Target) -> Option<Vec<Step>> {
    let all = paths(root, t.top_level);
    (!all.is_empty()).then(|| all[t.pick.index(all.len())].clone())
}

/// Characters that take more than one byte, and one that JSON must escape.
const WIDE: &str = "é€𝄞\u{0}";

fn huge(seed: &str, len: usize) -> String {
    let unit = if seed.is_empty() { "x" } else { seed };
    let mut out = String::with_capacity(len + unit.len() + WIDE.len());
    while out.len() < len {
        out.push_str(unit);
        out.push_str(WIDE);
    }
    out
}

fn mutate(root: &mut Value, m: &Mutation) {
    let target = match m {
        Mutation::Delete(t)
        | Mutation::Retype(t, _)
        | Mutation::Truncate(t, _)
        | Mutation::Nest(t, ..)
        | Mutation::Huge(t, _)
        | Mutation::Odd(t, ..)
        | Mutation::Unknown(t, ..) => t,
    };
    let path = resolve(root, target);
    if let Mutation::Unknown(_, key, value) = m {
        // Into the target when it is an object, else into the payload itself.
        let object = path
            .as_deref()
            .and_then(|p| at_mut(root, p))
            .filter(|v| v.is_object());
        let object = match object {
            Some(o) => o,
            None => root,
        };
        if let Some(o) = object.as_object_mut() {
            o.insert(key.clone(), value.clone());
        }
        return;
    }
    let Some(path) = path else { return };
    if let Mutation::Delete(_) = m {
        let (last, parent) = path.split_last().expect("a path below the root");
        match (at_mut(root, parent), last) {
            (Some(Value::Object(o)), Step::Key(k)) => {
                o.remove(k);
            }
            (Some(Value::Array(a)), Step::At(i)) => {
                a.remove(*i);
            }
            _ => {}
        }
        return;
    }
    let Some(v) = at_mut(root, &path) else { return };
    match m {
        Mutation::Retype(_, new) => *v = new.clone(),
        Mutation::Truncate(_, keep) => match v {
            Value::String(s) => {
                let n = keep.index(s.chars().count() + 1);
                *s = s.chars().take(n).collect();
            }
            Value::Array(a) => a.truncate(keep.index(a.len() + 1)),
            Value::Object(o) => {
                let n = keep.index(o.len() + 1);
                let drop: Vec<String> = o.keys().skip(n).cloned().collect();
                for k in drop {
                    o.remove(&k);
                }
            }
            _ => {}
        },
        Mutation::Nest(_, depth, objects) => {
            for _ in 0..*depth {
                let inner = v.take();
                *v = if *objects {
                    json!({ "nested": inner })
                } else {
                    json!([inner])
                };
            }
        }
        Mutation::Huge(_, len) => *v = Value::String(huge(v.as_str().unwrap_or_default(), *len)),
        Mutation::Odd(_, text, append) => match v {
            Value::String(s) if *append => s.push_str(text),
            _ => *v = Value::String((*text).to_owned()),
        },
        Mutation::Delete(_) | Mutation::Unknown(..) => unreachable!("handled above"),
    }
}

// ---------------------------------------------------------------------------------------------
// Strategies

/// Texts that have broken parsers, paths, terminals and file names elsewhere.
pub const ODD: &[&str] = &[
    "",
    " ",
    "\0",
    "a\0b",
    "\u{feff}BOM",
    "\u{202e}rtl override",
    "e\u{301}\u{301}\u{301}",
    "🧪💥👩‍👩‍👧",
    "\u{10ffff}\u{fffd}",
    "\u{2028}\u{2029}",
    "\r\n\t\u{b}\u{c}",
    "\u{1b}[31mred\u{1b}[0m\u{1b}]0;title\u{7}",
    "../../../../etc/passwd",
    "/",
    ".",
    "..",
    "~",
    "C:\\Windows\\System32",
    "null",
    "{\"session_id\":\"inner\"}",
    "*** Begin Patch\n*** Add File: ../../escape.txt\n+x\n*** End Patch\n",
    "Exit code: 99999999999999999999\nOutput:",
    "Exit code: -1",
];

fn target() -> impl Strategy<Value = Target> {
    (any::<bool>(), any::<Index>()).prop_map(|(top_level, pick)| Target { top_level, pick })
}

/// Values of every JSON type, edge cases first.
fn any_json() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        prop::sample::select(vec![
            json!(0),
            json!(-1),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(1.5e300),
            json!(-0.0),
        ]),
        any::<i64>().prop_map(Value::from),
        any::<String>().prop_map(Value::from),
        prop::sample::select(ODD).prop_map(Value::from),
        Just(json!([])),
        Just(json!([null, 1, "x", {}, []])),
        Just(json!({})),
        Just(json!({ "session_id": 7, "cwd": [], "tool_input": "x" })),
    ]
}

/// Names a payload never has, and some it has (the field then changes its value).
fn field_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("x_unknown_field".to_owned()),
        prop::sample::select(ODD).prop_map(str::to_owned),
        prop::sample::select(vec![
            "session_id",
            "cwd",
            "tool_name",
            "tool_input",
            "tool_response",
            "prompt",
            "agent_id",
            "hook_event_name",
            "stop_hook_active",
            "is_interrupt",
            "notification_type",
            "status",
        ])
        .prop_map(str::to_owned),
        "[a-z_]{1,12}",
    ]
}

pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => target().prop_map(Mutation::Delete),
        3 => (target(), any_json()).prop_map(|(t, v)| Mutation::Retype(t, v)),
        2 => (target(), any::<Index>()).prop_map(|(t, keep)| Mutation::Truncate(t, keep)),
        // serde_json refuses documents nested deeper than 128: both sides of the limit.
        1 => (target(), prop::sample::select(vec![2_usize, 50, 126, 130, 300]), any::<bool>())
            .prop_map(|(t, depth, objects)| Mutation::Nest(t, depth, objects)),
        1 => (target(), prop::sample::select(vec![4 * 1024, 64 * 1024, 1024 * 1024]))
            .prop_map(|(t, len)| Mutation::Huge(t, len)),
        2 => (target(), prop::sample::select(ODD), any::<bool>())
            .prop_map(|(t, text, append)| Mutation::Odd(t, text, append)),
        2 => (target(), field_name(), any_json()).prop_map(|(t, k, v)| Mutation::Unknown(t, k, v)),
    ]
}

/// Cases over `seeds`: mostly dispatched as the event they were captured for, sometimes as
/// another event of the corpus or one no harness has.
pub fn cases(seeds: Vec<Seed>) -> impl Strategy<Value = Case> {
    let mut events: Vec<String> = seeds.iter().map(|s| s.event.clone()).collect();
    events.push("NoSuchEvent".into());
    events.sort();
    events.dedup();
    (
        prop::sample::select(seeds),
        prop::option::weighted(0.15, prop::sample::select(events)),
        prop::collection::vec(mutation(), 1..=4),
    )
        .prop_map(|(seed, other, mutations)| Case {
            event: other.unwrap_or_else(|| seed.event.clone()),
            seed,
            mutations,
        })
}

/// A runner for `cases` cases (`SPEX_FUZZ_CASES` overrides, for a longer run by hand) from a
/// fixed seed (`SPEX_FUZZ_SEED` picks another), so `cargo test` runs the same cases every
/// time. Nothing is persisted: a payload that fails becomes a file in `fuzz-regressions/`.
pub fn runner(cases: u32, max_shrink_iters: u32) -> (TestRunner, u64) {
    let knob = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let cases = knob("SPEX_FUZZ_CASES").map_or(cases, |n| u32::try_from(n).unwrap_or(u32::MAX));
    let seed = knob("SPEX_FUZZ_SEED").unwrap_or(0);
    let mut bytes = [0_u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases,
        max_shrink_iters,
        failure_persistence: None,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    (TestRunner::new_with_rng(config, rng), seed)
}

// ---------------------------------------------------------------------------------------------
// What a harness accepts

/// Why a hook's answer is not one the harness accepts, if it is not: exit 0 with nothing on
/// stderr and on stdout nothing or one JSON object, or exit 2 (a block) with the reason on
/// stderr and nothing on stdout.
pub fn reply_problem(exit: Option<i32>, stdout: &[u8], stderr: &[u8]) -> Option<String> {
    let text = |b: &[u8]| {
        let s = String::from_utf8_lossy(b);
        let cut: String = s.chars().take(2000).collect();
        cut
    };
    match exit {
        Some(0) if !stderr.is_empty() => Some(format!("exit 0 with stderr: {}", text(stderr))),
        Some(0) if stdout.is_empty() => None,
        Some(0) => match serde_json::from_slice::<Value>(stdout) {
            Ok(Value::Object(_)) => None,
            Ok(_) => Some(format!("stdout is JSON but no object: {}", text(stdout))),
            Err(e) => Some(format!(
                "stdout is not one JSON value ({e}): {}",
                text(stdout)
            )),
        },
        Some(2) if !stdout.is_empty() => Some(format!("exit 2 with stdout: {}", text(stdout))),
        Some(2) if stderr.is_empty() => Some("exit 2 without a reason on stderr".into()),
        Some(2) => None,
        other => Some(format!(
            "exit {other:?}\nstdout: {}\nstderr: {}",
            text(stdout),
            text(stderr)
        )),
    }
}

/// `v` as text for a failure message, cut to `max` characters.
pub fn shown(v: &Value, max: usize) -> String {
    let s = v.to_string();
    if s.len() <= max {
        return s;
    }
    let cut: String = s.chars().take(max).collect();
    format!("{cut}... ({} bytes)", s.len())
}
