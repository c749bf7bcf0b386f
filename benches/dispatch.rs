//! Benchmark of the hook hot path: each harness's most frequent event (the one before every
//! tool call), as a real captured payload from `tests/fixtures/payloads/<harness>/`, through
//! the whole `spex dispatch <harness> <Event>` process, against starting `/bin/true` with the
//! same stdin in the same run. First in a project whose store holds 1,000 session records; then
//! with 500 governed spec nodes (mixed glob forms: prefix, suffix, brace, class, plain), a
//! shell call and an edit of a governed file against the same calls in a linked worktree of
//! the project that has no spec tree (the no-spec case), all interleaved. A harness this spex's
//! `dispatch` does not know yet (or whose payloads are not captured yet) is skipped with a
//! note. Run: `cargo bench --bench dispatch`.

#![expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::too_many_lines,
    reason = "benchmark rigging, not product code: a failed setup call panics on the spot, so fs_err's path adds little, and a scenario reads best as one function"
)]

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const SESSIONS: usize = 1000;
const RUNS: usize = 400;
const WARMUP: usize = 20;
const NODES: usize = 500;

/// One harness measured: its adapter id (as `spex dispatch <id> <Event>` and `spex.jsonc` name
/// it), its most frequent event, and two real captured payloads of that event in
/// `tests/fixtures/payloads/<id>/`: a shell call, which edits nothing, and an edit of a file
/// (named relative to the payload's `cwd`), which the bench's spec tree governs.
struct Harness {
    id: &'static str,
    event: &'static str,
    call: &'static str,
    edit: (&'static str, &'static str),
}

/// Adding a harness is one row; until `spex dispatch` knows it, or its payloads are captured,
/// the run says so and measures the others.
const HARNESSES: &[Harness] = &[
    Harness {
        id: "claude",
        event: "PreToolUse",
        call: "PreToolUse.Bash.json",
        edit: ("PreToolUse.Edit.json", "edit_me.txt"),
    },
    Harness {
        id: "codex",
        event: "PreToolUse",
        call: "PreToolUse.Bash.json",
        edit: ("PreToolUse.apply_patch.json", "hello.txt"),
    },
    Harness {
        id: "gemini",
        event: "BeforeTool",
        call: "BeforeTool.run_shell_command.json",
        edit: ("BeforeTool.replace.json", "hello.txt"),
    },
];

/// Events a harness fires as often as its tool calls, measured beside them on the shell call's
/// session: (adapter id, event, captured payload). Codex fires `PreModelRequest` and
/// `PostModelRequest` around every model request, one more than its tool calls per turn;
/// `PostModelRequest` also writes the request's usage, so it is the costlier of the two.
const ALSO: &[(&str, &str, &str)] = &[(
    "codex",
    "PostModelRequest",
    "PostModelRequest.completed.json",
)];

/// A harness that can be measured, with its payloads read.
struct Known {
    h: &'static Harness,
    call: Value,
    edit: Value,
    /// The record of the session whose shell call is measured first.
    record: PathBuf,
}

impl Known {
    fn args(&self) -> [&'static str; 3] {
        ["dispatch", self.h.id, self.h.event]
    }

    /// `name` with the harness and event in front, for the report.
    fn label(&self, name: &str) -> String {
        format!("{} {} {name}", self.h.id, self.h.event)
    }
}

/// `program` started in `cwd` with `stdin` written to it, its stdout to `stdout`.
fn start(
    program: &Path,
    args: &[&str],
    env: &[(&str, &Path)],
    cwd: &Path,
    stdin: &[u8],
    stdout: Stdio,
) -> std::process::Child {
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    // `/bin/true` exits without reading: a broken pipe here is expected.
    let _ = child.stdin.take().expect("stdin").write_all(stdin);
    child
}

/// How long one whole process took, spawn to exit.
fn run(program: &Path, args: &[&str], env: &[(&str, &Path)], cwd: &Path, stdin: &[u8]) -> Duration {
    let begun = Instant::now();
    let status = start(program, args, env, cwd, stdin, Stdio::null())
        .wait()
        .expect("wait");
    let took = begun.elapsed();
    assert!(status.success());
    took
}

/// What one dispatch answers the harness on stdout.
fn reply(spex: &Path, args: &[&str], env: &[(&str, &Path)], cwd: &Path, stdin: &[u8]) -> String {
    let out = start(spex, args, env, cwd, stdin, Stdio::piped())
        .wait_with_output()
        .expect("wait");
    assert!(out.status.success());
    String::from_utf8(out.stdout).expect("utf-8 reply")
}

/// What one run of `case` tells the agent: its reply, and the context its harness takes only
/// with a later hook (kept on the record of `session` meanwhile).
fn told(spex: &Path, case: &Case, env: &[(&str, &Path)], store: &Path, session: &str) -> String {
    let mut said = reply(spex, &case.args, env, case.cwd, &case.stdin);
    for dir in session_dirs(store) {
        if dir.file_name().is_some_and(|n| n == session) {
            let record: Value = serde_json::from_slice(
                &std::fs::read(dir.join("session.json")).expect("the session's record"),
            )
            .expect("a record is JSON");
            said.push_str(&record["flags"]["pending_context"].to_string());
        }
    }
    said
}

/// The value at `per_mille` / 1000 of a sorted sample (nearest rank).
fn percentile(sorted: &[Duration], per_mille: usize) -> Duration {
    sorted[((sorted.len() - 1) * per_mille).div_ceil(1000)]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A captured payload moved into `tree` as session `id`: its `session_id` replaced, and every
/// string that names the folder it was captured in (its `cwd`, or a path under it) pointed at
/// `tree` instead; the rest as the harness sent it.
fn moved(captured: &Value, id: &str, tree: &Path) -> Vec<u8> {
    fn walk(v: &mut Value, from: &str, to: &str) {
        match v {
            Value::String(s) if s == from || s.starts_with(&format!("{from}/")) => {
                *s = format!("{to}{}", &s[from.len()..]);
            }
            Value::Array(a) => a.iter_mut().for_each(|v| walk(v, from, to)),
            Value::Object(o) => o.values_mut().for_each(|v| walk(v, from, to)),
            _ => {}
        }
    }
    let from = captured["cwd"]
        .as_str()
        .expect("a captured payload names its `cwd`")
        .to_owned();
    let mut v = captured.clone();
    walk(&mut v, &from, tree.to_str().expect("a UTF-8 temp path"));
    v["session_id"] = id.into();
    v.to_string().into_bytes()
}

/// Every session folder in the store.
fn session_dirs(store: &Path) -> BTreeSet<PathBuf> {
    let Ok(projects) = std::fs::read_dir(store.join("projects")) else {
        return BTreeSet::new();
    };
    projects
        .flatten()
        .filter_map(|p| std::fs::read_dir(p.path().join("sessions")).ok())
        .flat_map(|d| d.flatten().map(|e| e.path()))
        .collect()
}

/// Lines in a session's event log.
fn events(session: &Path) -> usize {
    std::fs::read_to_string(session.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .count()
}

/// Flushes what setting the store up wrote, so its writeback does not land in the timed runs
/// (each dispatch renames a record, which waits on the file system's journal).
fn settle_writes() {
    assert!(Command::new("sync").status().expect("sync").success());
}

fn git(args: &[&str], cwd: &Path) {
    assert!(
        Command::new("git")
            .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"])
            .args(args)
            .current_dir(cwd)
            .status()
            .unwrap()
            .success()
    );
}

/// One process a timed round starts: `spex` with `args`, or `/bin/true` with the same stdin.
struct Case<'a> {
    label: String,
    program: &'a Path,
    args: Vec<&'a str>,
    cwd: &'a Path,
    stdin: Vec<u8>,
}

impl<'a> Case<'a> {
    /// `/bin/true` in the place of this case: same folder, same stdin.
    fn on_true(&self, truth: &'a Path) -> Case<'a> {
        Case {
            label: "/bin/true".into(),
            program: truth,
            args: Vec::new(),
            cwd: self.cwd,
            stdin: self.stdin.clone(),
        }
    }
}

/// `WARMUP` untimed rounds, then `RUNS` timed ones, each running every case once, each round
/// starting one case later, so that all see the same machine load and no case always follows
/// another. Sorted durations per case.
fn measure(cases: &[Case], env: &[(&str, &Path)]) -> Vec<Vec<Duration>> {
    settle_writes();
    let mut took: Vec<Vec<Duration>> = vec![Vec::with_capacity(RUNS); cases.len()];
    for round in 0..WARMUP + RUNS {
        for k in 0..cases.len() {
            let i = (round + k) % cases.len();
            let c = &cases[i];
            let d = run(c.program, &c.args, env, c.cwd, &c.stdin);
            if round >= WARMUP {
                took[i].push(d);
            }
        }
    }
    for v in &mut took {
        v.sort();
    }
    took
}

/// The harnesses this spex dispatches (a shell call of a new session in `repo` must leave its
/// record), and a note for each it does not.
fn known_harnesses(
    spex: &Path,
    fixtures: &Path,
    env: &[(&str, &Path)],
    store: &Path,
    repo: &Path,
) -> (Vec<Known>, Vec<String>) {
    let mut known: Vec<Known> = Vec::new();
    let mut notes = Vec::new();
    for h in HARNESSES {
        let read = |name: &str| -> Result<Value, String> {
            let path = fixtures.join(h.id).join(name);
            let bytes = std::fs::read(&path).map_err(|_| {
                format!(
                    "no captured payload `{}` yet",
                    path.strip_prefix(env!("CARGO_MANIFEST_DIR"))
                        .unwrap_or(&path)
                        .display()
                )
            })?;
            serde_json::from_slice(&bytes).map_err(|e| format!("`{}`: {e}", path.display()))
        };
        let (call, edit) = match (read(h.call), read(h.edit.0)) {
            (Ok(call), Ok(edit)) => (call, edit),
            (Err(e), _) | (_, Err(e)) => {
                notes.push(format!("{} {}: skipped, {e}", h.id, h.event));
                continue;
            }
        };
        let before = session_dirs(store);
        let errors = store.join("dispatch-errors.log");
        let logged = std::fs::read_to_string(&errors).unwrap_or_default().len();
        let probe = moved(&call, &format!("{}-call", h.id), repo);
        run(spex, &["dispatch", h.id, h.event], env, repo, &probe);
        let Some(record) = session_dirs(store).difference(&before).next().cloned() else {
            // What dispatch logged about it (it never tells the harness).
            let log = std::fs::read_to_string(&errors).unwrap_or_default();
            let why: Vec<String> = log
                .get(logged..)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter_map(|l| l["error"].as_str().map(str::to_owned))
                .collect();
            notes.push(format!(
                "{} {}: skipped, `spex dispatch {} {}` recorded no session ({})",
                h.id,
                h.event,
                h.id,
                h.event,
                if why.is_empty() {
                    "and logged no error".to_owned()
                } else {
                    why.join("; ")
                }
            ));
            continue;
        };
        known.push(Known {
            h,
            call,
            edit,
            record,
        });
    }
    (known, notes)
}

/// 500 governed nodes in `repo`'s spec tree: does the cost grow with the spec tree?
fn write_spec_tree(repo: &Path, known: &[Known]) {
    // The glob forms spec trees use, a fifth each: a prefix, a suffix (over the extension the
    // captured edits have, so every one of them is a candidate for the edited file and must be
    // ruled out), a brace alternation, a character class, a plain path.
    for i in 0..NODES - 1 {
        let code = match i % 5 {
            0 => format!("src/m{i}/**"),
            1 => format!("**/*_{i}.txt"),
            2 => format!("src/{{a{i},b{i}}}/*.ts"),
            3 => format!("lib/[a-c]*{i}.py"),
            _ => format!("docs/page{i}.md"),
        };
        let node = repo.join(format!(".spec/n{i}"));
        std::fs::create_dir_all(&node).unwrap();
        std::fs::write(
            node.join("spec.md"),
            format!("---\ntitle: Node {i}\nsurface: system\ncode: [\"{code}\"]\n---\nRule {i}.\n"),
        )
        .unwrap();
    }
    // The last node in path order governs the files the captured edits change (plain paths),
    // so a matcher meets every other candidate first.
    let edited: BTreeSet<&str> = known.iter().map(|k| k.h.edit.1).collect();
    let edited: Vec<&str> = edited.into_iter().collect();
    let node = repo.join(".spec/zz-edits");
    std::fs::create_dir_all(&node).unwrap();
    std::fs::write(
        node.join("spec.md"),
        format!(
            "---\ntitle: Edits\nsurface: system\ncode: {}\n---\nThe edited files.\n",
            serde_json::to_string(&edited).unwrap()
        ),
    )
    .unwrap();
}

/// Each harness's sessions of the timed runs (their records are made here, so that no timed
/// run creates one), then filler records up to `SESSIONS`, the harnesses taking turns.
fn make_sessions(
    spex: &Path,
    env: &[(&str, &Path)],
    store: &Path,
    known: &[Known],
    (repo, plain): (&Path, &Path),
) {
    eprintln!("creating {SESSIONS} session records...");
    for k in known {
        let id = k.h.id;
        let mut made = session_dirs(store);
        for (name, payload, tree) in [
            ("call-plain", &k.call, plain),
            ("edit", &k.edit, repo),
            ("edit-plain", &k.edit, plain),
        ] {
            run(
                spex,
                &k.args(),
                env,
                tree,
                &moved(payload, &format!("{id}-{name}"), tree),
            );
            let now = session_dirs(store);
            assert_eq!(now.len(), made.len() + 1, "{id}-{name} has a record");
            made = now;
        }
    }
    for i in session_dirs(store).len()..SESSIONS {
        let k = &known[i % known.len()];
        let filler = moved(&k.call, &format!("{}-{i:04}", k.h.id), repo);
        run(spex, &k.args(), env, repo, &filler);
    }
    assert_eq!(
        session_dirs(store).len(),
        SESSIONS,
        "every session has a record"
    );
}

/// The first table: each case against `/bin/true` (the last case).
fn report_frequent(cases: &[Case], took: &[Vec<Duration>], spex: &Path) {
    let t = cases.len() - 1;
    println!(
        "each harness's most frequent event, a real captured payload, {SESSIONS} sessions in the store ({RUNS} runs each, interleaved)"
    );
    for (c, v) in cases.iter().zip(took) {
        let (p50, p99) = (percentile(v, 500), percentile(v, 990));
        print!(
            "  {:32} p50 {:7.0} us   p99 {:7.0} us",
            c.label,
            us(p50),
            us(p99)
        );
        if c.program == spex {
            print!(
                "   {:.2}x /bin/true p50 (goal <= 1.5x)",
                us(p50) / us(percentile(&took[t], 500))
            );
        }
        println!();
    }
}

/// The second table: each case with the spec tree against the same case without it (the next
/// case) and against `/bin/true` (the last).
fn report_governed(cases: &[Case], took: &[Vec<Duration>]) {
    let p50: Vec<f64> = took.iter().map(|v| us(percentile(v, 500))).collect();
    let p99: Vec<f64> = took.iter().map(|v| us(percentile(v, 990))).collect();
    let t = cases.len() - 1;
    println!(
        "with {NODES} governed spec nodes, against a linked worktree without a spec tree ({RUNS} runs each, interleaved)"
    );
    for (i, c) in cases.iter().enumerate() {
        print!(
            "  {:40} p50 {:7.0} us   p99 {:7.0} us",
            c.label, p50[i], p99[i]
        );
        // Each with the spec tree: against the same call without it, and against `/bin/true`.
        if i < t && i % 2 == 0 {
            print!(
                "   / no spec {:.2}x (goal <= 1.05x)   / true {:.2}x (goal <= 1.5x)",
                p50[i] / p50[i + 1],
                p50[i] / p50[t]
            );
        }
        println!();
    }
}

/// The cases with the spec tree, each followed by the same in the worktree without it: each
/// harness's shell call and edit, the edits checked to read as governed and as not.
fn governed_cases<'a>(
    spex: &'a Path,
    env: &[(&str, &Path)],
    store: &Path,
    known: &[Known],
    (repo, plain): (&'a Path, &'a Path),
) -> Vec<Case<'a>> {
    let mut cases: Vec<Case> = Vec::new();
    for k in known {
        let id = k.h.id;
        for (name, payload, tree, session) in [
            ("shell call", &k.call, repo, format!("{id}-call")),
            (
                "shell call, no spec",
                &k.call,
                plain,
                format!("{id}-call-plain"),
            ),
            ("edit, governed", &k.edit, repo, format!("{id}-edit")),
            ("edit, no spec", &k.edit, plain, format!("{id}-edit-plain")),
        ] {
            cases.push(Case {
                label: k.label(name),
                program: spex,
                args: k.args().to_vec(),
                cwd: tree,
                stdin: moved(payload, &session, tree),
            });
        }
        // The edit reads as one of a governed file in the project, and of none in the worktree.
        let governed = &cases[cases.len() - 2];
        let said = told(spex, governed, env, store, &format!("{id}-edit"));
        assert!(
            said.contains("Edits"),
            "{id}: the governed edit names its spec: {said:?}"
        );
        let plain_case = &cases[cases.len() - 1];
        let said = told(spex, plain_case, env, store, &format!("{id}-edit-plain"));
        assert!(
            !said.contains("Edits"),
            "{id}: no spec governs the worktree: {said:?}"
        );
    }
    cases
}

fn main() {
    let spex = PathBuf::from(env!("CARGO_BIN_EXE_spex"));
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/payloads");
    let truth = PathBuf::from("/bin/true");
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&["init", "-q"], &repo);
    // A first commit, so that the project can have a linked worktree without the spec tree.
    git(&["commit", "-q", "--allow-empty", "-m", "init"], &repo);
    let plain = dir.path().join("plain");
    git(&["worktree", "add", "-q", plain.to_str().unwrap()], &repo);
    let store = dir.path().join("store");
    let env: Vec<(&str, &Path)> = vec![("SPEX_HOME", &store), ("HOME", dir.path())];

    let (known, notes) = known_harnesses(&spex, &fixtures, &env, &store, &repo);
    assert!(!known.is_empty(), "no harness to measure: {notes:?}");
    let ids: Vec<&str> = known.iter().map(|k| k.h.id).collect();
    let config = serde_json::json!({ "harnesses": ids }).to_string();
    let materialize = |tree: &Path| {
        std::fs::write(tree.join("spex.jsonc"), &config).unwrap();
        let st = Command::new(&spex)
            .arg("materialize")
            .current_dir(tree)
            .envs(env.iter().map(|(k, v)| (*k, *v)))
            .env("CODEX_HOME", dir.path().join("codex"))
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
    };
    materialize(&repo);
    materialize(&plain);

    make_sessions(&spex, &env, &store, &known, (&repo, &plain));

    for note in &notes {
        println!("{note}");
    }

    // The most frequent event of each harness, 1,000 records in the store.
    let mut cases: Vec<Case> = known
        .iter()
        .map(|k| Case {
            label: k.label("(shell call)"),
            program: &spex,
            args: k.args().to_vec(),
            cwd: &repo,
            stdin: moved(&k.call, &format!("{}-call", k.h.id), &repo),
        })
        .collect();
    for (id, event, file) in ALSO {
        let Some(k) = known.iter().find(|k| k.h.id == *id) else {
            continue;
        };
        let payload: Value = serde_json::from_slice(
            &std::fs::read(fixtures.join(id).join(file)).expect("a captured payload"),
        )
        .expect("a payload is JSON");
        cases.push(Case {
            label: format!("{id} {event}"),
            program: &spex,
            args: vec!["dispatch", id, event],
            cwd: &repo,
            stdin: moved(&payload, &format!("{}-call", k.h.id), &repo),
        });
    }
    cases.push(cases[0].on_true(&truth));
    let logged: Vec<usize> = known.iter().map(|k| events(&k.record)).collect();
    let took = measure(&cases, &env);
    report_frequent(&cases, &took, &spex);
    for (k, before) in known.iter().zip(logged) {
        // Every dispatch did its work: the same number of events each.
        let grown = events(&k.record) - before;
        assert!(
            grown > 0 && grown.is_multiple_of(WARMUP + RUNS),
            "{}: {grown} events from {} dispatches",
            k.h.id,
            WARMUP + RUNS
        );
    }

    write_spec_tree(&repo, &known);
    materialize(&repo);
    let mut cases = governed_cases(&spex, &env, &store, &known, (&repo, &plain));
    cases.push(cases[0].on_true(&truth));
    let took = measure(&cases, &env);
    report_governed(&cases, &took);
}
