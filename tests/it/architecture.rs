//! The module graph reads the way the design says: every `crate::` path in `src/` points down
//! the layers in `LAYERS`, and no top-level modules import each other around a circle. This file
//! is the one place the layer order is written down; it reads the sources as text (no compiler,
//! no external tool), so a failure names the file and line that point the wrong way, the item
//! they import and the file that item is in.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;

/// The layers, top first. A module may import any module in a layer below its own; never one
/// above, and never a peer beside it in the same row: the engines stay independent of one
/// another (the hook path must not pull in materialize's planning, nor the runtime's
/// transports), and the ground is split in three rows because `store` builds on `config` and
/// `fsutil`, and every module's errors build on `hint`. A new top-level module fails the test
/// until it is given a row here; `runtime` and `pty` have their rows before their folders exist.
const LAYERS: &[(&str, &[&str])] = &[
    ("entry", &["main"]),
    ("cli", &["cli"]),
    ("checker", &["check"]),
    // The board runs the notifier and the watcher in its own process, the notifier runs the
    // watcher; the watcher folds evidence through the engines below it. None is imported by an
    // engine.
    ("board", &["board"]),
    ("notifier", &["notify"]),
    ("watcher", &["watch"]),
    ("remote", &["remote"]),
    (
        "engines",
        &["materialize", "dispatch", "runtime", "reconcile"],
    ),
    ("adapters", &["adapters"]),
    ("seam", &["seam", "pty"]),
    ("ground (records)", &["store"]),
    (
        "ground",
        &["spec", "config", "env", "repo", "fsutil", "text", "log"],
    ),
    ("ground (hints)", &["hint"]),
];

/// One `crate::` reference: where it is and what it names.
#[derive(Debug, Clone)]
struct Import {
    file: String,
    line: usize,
    /// The path as written, groups expanded: `crate::store::session::Session`.
    item: String,
    /// The top-level module it lands in (`main` for an item of the crate root).
    target: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    /// `::`
    Sep,
    Open,
    Close,
    Comma,
    Star,
    Dollar,
    Semi,
    Other,
}

/// Rust source as tokens with their line numbers, without comments (doc comments included),
/// string, byte-string, raw-string and char literals, and lifetimes.
fn tokens(src: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    // Skips to just past the `"` closing a string that opened before `i`.
    let skip_string = |mut i: usize, line: &mut usize| {
        while i < c.len() && c[i] != '"' {
            if c[i] == '\\' {
                i += 1;
            }
            if c.get(i) == Some(&'\n') {
                *line += 1;
            }
            i += 1;
        }
        i + 1
    };
    // Skips a raw string starting at `r` (at `i`), returning the index past it.
    let skip_raw = |mut i: usize, line: &mut usize| {
        i += 1;
        let mut hashes = 0;
        while c.get(i) == Some(&'#') {
            hashes += 1;
            i += 1;
        }
        i += 1; // the opening quote
        while i < c.len() {
            if c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) {
                return i + 1 + hashes;
            }
            if c[i] == '\n' {
                *line += 1;
            }
            i += 1;
        }
        i
    };
    let raw_string_at = |i: usize| {
        let mut j = i + 1;
        while c.get(j) == Some(&'#') {
            j += 1;
        }
        c.get(j) == Some(&'"')
    };
    while i < c.len() {
        let ch = c[i];
        match ch {
            '\n' => {
                line += 1;
                i += 1;
            }
            _ if ch.is_whitespace() => i += 1,
            '/' if c.get(i + 1) == Some(&'/') => {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
            }
            '/' if c.get(i + 1) == Some(&'*') => {
                let mut depth = 0;
                while i < c.len() {
                    if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                        depth += 1;
                        i += 2;
                    } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        if c[i] == '\n' {
                            line += 1;
                        }
                        i += 1;
                    }
                }
            }
            '"' => i = skip_string(i + 1, &mut line),
            '\'' => {
                if c.get(i + 1) == Some(&'\\') {
                    // An escaped char literal: `'\n'`, `'\''`, `'\u{1F600}'`.
                    i += 3;
                    while i < c.len() && c[i] != '\'' {
                        i += 1;
                    }
                    i += 1;
                } else if c.get(i + 2) == Some(&'\'') {
                    i += 3;
                } else {
                    // A lifetime or label: `'a`, `'static`.
                    i += 1;
                    while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                        i += 1;
                    }
                }
            }
            'r' if raw_string_at(i) => i = skip_raw(i, &mut line),
            'b' | 'c' if c.get(i + 1) == Some(&'r') && raw_string_at(i + 1) => {
                i = skip_raw(i + 1, &mut line);
            }
            'b' | 'c' if c.get(i + 1) == Some(&'"') => i = skip_string(i + 2, &mut line),
            'b' if c.get(i + 1) == Some(&'\'') => {
                // A byte literal: `b'x'`, `b'\n'`.
                i += 2;
                if c.get(i) == Some(&'\\') {
                    i += 1;
                }
                i += 1;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            }
            _ if ch.is_alphanumeric() || ch == '_' => {
                let start = i;
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
                out.push((Tok::Ident(c[start..i].iter().collect()), line));
            }
            ':' if c.get(i + 1) == Some(&':') => {
                out.push((Tok::Sep, line));
                i += 2;
            }
            _ => {
                out.push((
                    match ch {
                        '{' => Tok::Open,
                        '}' => Tok::Close,
                        ',' => Tok::Comma,
                        '*' => Tok::Star,
                        '$' => Tok::Dollar,
                        ';' => Tok::Semi,
                        _ => Tok::Other,
                    },
                    line,
                ));
                i += 1;
            }
        }
    }
    out
}

/// The token at `i`, if any.
fn at(toks: &[(Tok, usize)], i: usize) -> Option<&Tok> {
    toks.get(i).map(|t| &t.0)
}

fn is_ident(t: Option<&(Tok, usize)>, name: &str) -> bool {
    matches!(t, Some((Tok::Ident(s), _)) if s == name)
}

/// Reads one use tree (or inline path) after `prefix::`, starting at token `i`; every leaf path
/// goes to `out`. Returns the index of the first token after the tree.
fn use_tree(
    toks: &[(Tok, usize)],
    mut i: usize,
    prefix: &[String],
    out: &mut Vec<Vec<String>>,
) -> usize {
    match at(toks, i) {
        Some(Tok::Open) => {
            i += 1;
            while i < toks.len() && toks[i].0 != Tok::Close {
                i = use_tree(toks, i, prefix, out);
                // `a as b`: the alias names nothing new.
                if is_ident(toks.get(i), "as") {
                    i += 2;
                }
                if at(toks, i) == Some(&Tok::Comma) {
                    i += 1;
                } else if at(toks, i) != Some(&Tok::Close) {
                    // Not a use tree after all; stop reading it here.
                    break;
                }
            }
            i + 1
        }
        Some(Tok::Star) => {
            out.push([prefix, &["*".to_owned()]].concat());
            i + 1
        }
        // `a::{self, B}`: `self` is `a` itself.
        Some(Tok::Ident(name)) if name == "self" && !prefix.is_empty() => {
            out.push(prefix.to_vec());
            i + 1
        }
        Some(Tok::Ident(name)) => {
            let path = [prefix, std::slice::from_ref(name)].concat();
            if at(toks, i + 1) == Some(&Tok::Sep) {
                use_tree(toks, i + 2, &path, out)
            } else {
                out.push(path);
                i + 1
            }
        }
        _ => {
            out.push(prefix.to_vec());
            i
        }
    }
}

/// `src/adapters/codex/rpc.rs` -> `["adapters", "codex", "rpc"]`: the module a file holds, as
/// a path from the crate root (`[]` for `src/main.rs`).
fn module_path(rel: &str) -> Vec<String> {
    let path = rel.trim_start_matches("src/").trim_end_matches(".rs");
    if path == "main" {
        return Vec::new();
    }
    path.split('/')
        .filter(|p| *p != "mod")
        .map(str::to_owned)
        .collect()
}

/// The top-level module a file belongs to (`main` for the crate root).
fn module_of(rel: &str) -> String {
    module_path(rel)
        .into_iter()
        .next()
        .unwrap_or_else(|| "main".to_owned())
}

/// Every path in `src` that names an item of the crate, made absolute (`crate::...`):
/// `crate::` paths, `super::` and `self::` paths, and paths that start with the name of a
/// module the file declares (`mod launch;` then `launch::run`). `modules` are the crate's
/// top-level modules; a path naming anything else names an item of the crate root (`main`).
fn imports(rel: &str, src: &str, modules: &BTreeSet<String>) -> Vec<Import> {
    let toks = tokens(src);
    let file_path = module_path(rel);
    // The modules this file declares by `mod name;`.
    let children: BTreeSet<&str> = toks
        .windows(3)
        .filter_map(|w| match w {
            [(Tok::Ident(m), _), (Tok::Ident(name), _), (Tok::Semi, _)] if m == "mod" => {
                Some(name.as_str())
            }
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    let mut braces = 0usize;
    // Inline `mod name { .. }` blocks open here: the brace depth each opened at, and its name.
    let mut inline_mods: Vec<(usize, String)> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let line = toks[i].1;
        let after_dollar = i > 0 && toks[i - 1].0 == Tok::Dollar;
        let after_sep = i > 0 && toks[i - 1].0 == Tok::Sep;
        let path_follows = at(&toks, i + 1) == Some(&Tok::Sep);
        // Where a path to a crate item starts, and the module it is relative to.
        let mut start: Option<(usize, Vec<String>)> = None;
        if !after_sep && path_follows {
            match &toks[i].0 {
                Tok::Ident(m) if inline_mods.is_empty() && children.contains(m.as_str()) => {
                    start = Some((i, file_path.clone()));
                }
                Tok::Ident(m) if m == "crate" && !after_dollar => start = Some((i + 2, Vec::new())),
                Tok::Ident(m) if m == "super" || m == "self" => {
                    let mut base: Vec<String> = file_path
                        .iter()
                        .cloned()
                        .chain(inline_mods.iter().map(|(_, name)| name.clone()))
                        .collect();
                    let mut j = if m == "self" { i + 2 } else { i };
                    while is_ident(toks.get(j), "super") && at(&toks, j + 1) == Some(&Tok::Sep) {
                        base.pop();
                        j += 2;
                    }
                    start = Some((j, base));
                }
                _ => {}
            }
        }
        if let Some((start, base)) = start {
            let mut paths = Vec::new();
            i = use_tree(&toks, start, &[], &mut paths);
            for path in paths {
                let full: Vec<String> = base.iter().cloned().chain(path).collect();
                let first = full.first().cloned().unwrap_or_default();
                let target = if modules.contains(&first) {
                    first
                } else {
                    "main".to_owned()
                };
                out.push(Import {
                    file: rel.to_owned(),
                    line,
                    item: format!("crate::{}", full.join("::")),
                    target,
                });
            }
            continue;
        }
        match &toks[i].0 {
            Tok::Ident(m) if m == "mod" && at(&toks, i + 2) == Some(&Tok::Open) => {
                if let Some(Tok::Ident(name)) = at(&toks, i + 1) {
                    inline_mods.push((braces, name.clone()));
                }
            }
            Tok::Open => braces += 1,
            Tok::Close => {
                braces = braces.saturating_sub(1);
                if inline_mods
                    .last()
                    .is_some_and(|(depth, _)| *depth == braces)
                {
                    inline_mods.pop();
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The files of `src/cli/` that are no subcommand's: the command line itself (`mod.rs`, which
/// runs every subcommand) and the modules the subcommands share. Every other file there is one
/// subcommand's, and imports no other subcommand's file: what two subcommands both need moves
/// into a shared module, which sits below them and imports none of them.
const CLI_SHARED: &[&str] = &[
    "mod.rs",
    "args.rs",
    "notifier.rs",
    "on_remote.rs",
    "complete.rs",
    "outcome.rs",
    "output.rs",
    "plan.rs",
    "report.rs",
    "start.rs",
    "terminal.rs",
    "turns.rs",
];

/// Why an import from file `from` of file `to` breaks the order of the command line's files.
fn cli_rule(from: &str, to: &str) -> Option<String> {
    let (Some(f), Some(t)) = (from.strip_prefix("src/cli/"), to.strip_prefix("src/cli/")) else {
        return None;
    };
    // A subcommand's folder (`sessions/table.rs`) is that subcommand's (`sessions.rs`).
    let family = |p: &str| {
        p.split_once('/')
            .map_or(p.to_owned(), |(d, _)| format!("{d}.rs"))
    };
    let (f, t) = (family(f), family(t));
    let (f, t) = (f.as_str(), t.as_str());
    let subcommand = |name: &str| !CLI_SHARED.contains(&name);
    if f == t || !subcommand(t) || f == "mod.rs" {
        return None;
    }
    Some(if subcommand(f) {
        "a subcommand's file imports another subcommand's; move what both need into a shared module of `src/cli/` (CLI_SHARED in tests/it/architecture.rs)".to_owned()
    } else {
        format!("`src/cli/{f}` is shared by the subcommands and imports none of them")
    })
}

fn layer_of(module: &str) -> Option<(usize, &'static str)> {
    LAYERS
        .iter()
        .enumerate()
        .find(|(_, (_, mods))| mods.contains(&module))
        .map(|(rank, (name, _))| (rank, *name))
}

/// The file of `files` that an import's path lands in: the deepest module file the path names
/// (`crate::adapters::claude::Claude` -> `src/adapters/claude/mod.rs`), else the crate root.
fn file_of(item: &str, files: &BTreeSet<&str>) -> String {
    let path: Vec<&str> = item.split("::").skip(1).collect();
    (1..=path.len())
        .rev()
        .flat_map(|k| {
            let module = path[..k].join("/");
            [format!("src/{module}.rs"), format!("src/{module}/mod.rs")]
        })
        .find(|f| files.contains(f.as_str()))
        .unwrap_or_else(|| "src/main.rs".to_owned())
}

/// `src/env.rs:9 imports crate::adapters::claude::Claude from src/adapters/claude/mod.rs`: both
/// files and the item.
fn describe(imp: &Import, files: &BTreeSet<&str>) -> String {
    format!(
        "{}:{} imports {} from {}",
        imp.file,
        imp.line,
        imp.item,
        file_of(&imp.item, files)
    )
}

/// Everything wrong with the module graph of `files` (path relative to the crate, source).
fn problems(files: &[(String, String)]) -> Vec<String> {
    let modules: BTreeSet<String> = files.iter().map(|(rel, _)| module_of(rel)).collect();
    let paths: BTreeSet<&str> = files.iter().map(|(rel, _)| rel.as_str()).collect();
    let mut out = Vec::new();
    for m in &modules {
        if layer_of(m).is_none() {
            let file = &files
                .iter()
                .find(|(rel, _)| module_of(rel) == *m)
                .expect("a file")
                .0;
            out.push(format!(
                "{file}: module `{m}` is in no layer; give it a row in LAYERS (tests/it/architecture.rs)"
            ));
        }
    }
    // The first import seen for each arrow between two top-level modules, and between two files
    // of one module (a circle through files of several modules is one between modules).
    let mut arrows: BTreeMap<(String, String), Import> = BTreeMap::new();
    let mut file_arrows: BTreeMap<(String, String), Import> = BTreeMap::new();
    for (rel, src) in files {
        let from = module_of(rel);
        for imp in imports(rel, src, &modules) {
            let to_file = file_of(&imp.item, &paths);
            if let Some(why) = cli_rule(rel, &to_file) {
                out.push(format!("{} ({why})", describe(&imp, &paths)));
            }
            if imp.target == from {
                if to_file != *rel {
                    file_arrows.entry((rel.clone(), to_file)).or_insert(imp);
                }
                continue;
            }
            if let (Some((fr, fname)), Some((tr, tname))) = (layer_of(&from), layer_of(&imp.target))
                && tr <= fr
            {
                let where_ = if tr == fr {
                    format!("in the same layer `{tname}`, and peers do not import each other")
                } else {
                    format!("in layer `{tname}`, above it")
                };
                out.push(format!(
                    "{} ({from} is in layer `{fname}`; {} is {where_})",
                    describe(&imp, &paths),
                    imp.target
                ));
            }
            arrows
                .entry((from.clone(), imp.target.clone()))
                .or_insert(imp);
        }
    }
    out.extend(cycles(&arrows, &paths));
    out.extend(cycles(&file_arrows, &paths));
    out
}

/// Import circles between top-level modules, each with the imports that make it: the shortest
/// circle through every module that is not already on a reported one.
fn cycles(arrows: &BTreeMap<(String, String), Import>, files: &BTreeSet<&str>) -> Vec<String> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in arrows.keys() {
        next.entry(from).or_default().push(to);
    }
    // The shortest path of arrows from `a` to `b`, as modules (`a` first, `b` last).
    let path = |a: &str, b: &str| -> Option<Vec<String>> {
        let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = VecDeque::from([a]);
        while let Some(m) = queue.pop_front() {
            for &n in next.get(m).into_iter().flatten() {
                if n == b {
                    let mut p = vec![b.to_owned(), m.to_owned()];
                    let mut cur = m;
                    while cur != a {
                        cur = prev[cur];
                        p.push(cur.to_owned());
                    }
                    p.reverse();
                    return Some(p);
                }
                if n != a && !prev.contains_key(n) {
                    prev.insert(n, m);
                    queue.push_back(n);
                }
            }
        }
        None
    };
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for m in next.keys() {
        if seen.contains(*m) {
            continue;
        }
        let Some(circle) = path(m, m) else {
            continue;
        };
        seen.extend(circle.iter().cloned());
        let steps: Vec<String> = circle
            .windows(2)
            .map(|w| {
                let imp = &arrows[&(w[0].clone(), w[1].clone())];
                format!("  {}", describe(imp, files))
            })
            .collect();
        out.push(format!(
            "import cycle: {}\n{}",
            circle.join(" -> "),
            steps.join("\n")
        ));
    }
    out
}

fn rust_files(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, root, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p
                .strip_prefix(root)
                .expect("under the crate")
                .to_string_lossy()
                .into_owned();
            let src = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {rel}: {e}"));
            out.push((rel, src));
        }
    }
}

/// The lines under `src/` but outside `src/adapters/` whose code or string literals hold one
/// of `harnesses` (any case); comments (doc comments included) may explain a harness's
/// behaviour and are not read.
fn harness_names(files: &[(String, String)], harnesses: &[String]) -> Vec<String> {
    let mut named = Vec::new();
    for (rel, src) in files
        .iter()
        .filter(|(rel, _)| !rel.starts_with("src/adapters/"))
    {
        for (n, line) in src.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            let code = code.split(" // ").next().unwrap_or(code).to_lowercase();
            if harnesses.iter().any(|h| code.contains(h.as_str())) {
                named.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    named
}

/// Only `src/adapters/` names a harness: elsewhere under `src/`, no line of code or string
/// literal holds an adapter's folder name, so the PTY library, the engines and the ground stay
/// harness-neutral.
#[test]
fn no_harness_is_named_outside_the_adapters() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let harnesses: Vec<String> = std::fs::read_dir(root.join("src/adapters"))
        .expect("src/adapters")
        .map(|e| e.expect("a directory entry").path())
        // An adapter's folder implements the `Harness` trait in its `mod.rs` (what the adapters
        // share sits beside them, in a folder that implements none).
        .filter(|p| {
            std::fs::read_to_string(p.join("mod.rs")).is_ok_and(|s| s.contains("impl Harness for"))
        })
        .map(|p| p.file_name().unwrap().to_string_lossy().to_lowercase())
        .collect();
    assert!(harnesses.len() >= 2, "found the adapters: {harnesses:?}");
    let mut files = Vec::new();
    rust_files(&root.join("src"), root, &mut files);
    let named = harness_names(&files, &harnesses);
    assert!(
        named.is_empty(),
        "a harness is named outside src/adapters/ (move it behind the seam):\n{}",
        named.join("\n")
    );
}

#[test]
fn finds_a_harness_named_in_code_or_strings_but_not_in_comments() {
    let files = [
        file(
            "src/store/mod.rs",
            "//! What Codex writes.\n/// Claude's id.\nfn home() -> &'static str { \"~/.CODEX\" }\nfn claude_home() {}\nx(); // codex\n",
        ),
        file("src/adapters/codex/mod.rs", "const ID: &str = \"codex\";\n"),
    ];
    let harnesses = ["claude".to_owned(), "codex".to_owned()];
    assert_eq!(
        harness_names(&files, &harnesses),
        [
            "src/store/mod.rs:3: fn home() -> &'static str { \"~/.CODEX\" }",
            "src/store/mod.rs:4: fn claude_home() {}",
        ]
    );
}

#[test]
fn imports_run_down_the_layers_without_cycles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), root, &mut files);
    assert!(files.len() > 10, "found the sources");
    let problems = problems(&files);
    assert!(
        problems.is_empty(),
        "the module graph breaks the layer order:\n{}",
        problems.join("\n")
    );
}

fn file(rel: &str, src: &str) -> (String, String) {
    (rel.to_owned(), src.to_owned())
}

#[test]
fn reads_groups_and_inline_paths_but_not_comments_or_strings() {
    let src = r#"
//! Mentions crate::adapters in a doc comment.
use crate::{config::Known, store::{self, ProjectStore as S}};
use crate::seam::edit::*;
/* crate::dispatch, /* nested */ crate::cli */
fn f() -> String {
    let _ = crate::fsutil::read_opt(p);
    let _ = 'x';
    let _: &'static str = "crate::materialize";
    let _ = r"crate::runtime \ raw";
    let _ = b'"';
    macro_rules! m { () => { $crate::x() } }
    crate::spec::load::<'_>(p)
}
mod tests {
    use super::*;
}
"#;
    let modules: BTreeSet<String> = ["config", "store", "seam", "fsutil", "spec", "env"]
        .map(str::to_owned)
        .into();
    let found: Vec<(String, String)> = imports("src/env.rs", src, &modules)
        .into_iter()
        .map(|i| (i.item, i.target))
        .collect();
    let want = [
        ("crate::config::Known", "config"),
        ("crate::store", "store"),
        ("crate::store::ProjectStore", "store"),
        ("crate::seam::edit::*", "seam"),
        ("crate::fsutil::read_opt", "fsutil"),
        ("crate::spec::load", "spec"),
        ("crate::env::*", "env"),
    ]
    .map(|(a, b)| (a.to_owned(), b.to_owned()));
    assert_eq!(found, want);
    // From a top-level `mod.rs`, `super::` is the crate root.
    let up = imports("src/store/mod.rs", "use super::adapters::all;", &modules);
    assert_eq!(up[0].item, "crate::adapters::all");
    assert_eq!(
        up[0].target, "main",
        "not a module of this set: an item of the root"
    );
    // In the crate root, a module's name starts a path; `std::env` is not the crate's `env`.
    let root = imports(
        "src/main.rs",
        "mod env;\nfn main() { env::Env::from_process(std::env::args()); }",
        &modules,
    );
    let root: Vec<&str> = root.iter().map(|i| i.item.as_str()).collect();
    assert_eq!(root, ["crate::env::Env::from_process"]);
}

#[test]
fn reads_paths_relative_to_the_file() {
    let modules: BTreeSet<String> = ["cli", "store"].map(str::to_owned).into();
    let items = |rel: &str, src: &str| -> Vec<String> {
        imports(rel, src, &modules)
            .into_iter()
            .map(|i| i.item)
            .collect()
    };
    assert_eq!(
        items(
            "src/cli/attach.rs",
            "use super::start::{server_of, relaunch};\nfn f() { self::pump(); super::super::store::load(); }\nmod tests { use super::*; }",
        ),
        [
            "crate::cli::start::server_of",
            "crate::cli::start::relaunch",
            "crate::cli::attach::pump",
            "crate::store::load",
            "crate::cli::attach::*",
        ]
    );
    // A module the file declares starts a path; another crate's module of that name does not.
    assert_eq!(
        items(
            "src/cli/mod.rs",
            "pub mod launch;\npub use launch::Args;\nfn f() { launch::run(); std::launch::x(); }",
        ),
        ["crate::cli::launch::Args", "crate::cli::launch::run"]
    );
}

#[test]
fn names_circles_between_files_and_subcommands_that_import_each_other() {
    let files = [
        file("src/main.rs", "mod cli; mod store;"),
        file(
            "src/cli/mod.rs",
            "pub mod args; pub mod attach; pub mod launch;\nfn run() { attach::run(); }\n",
        ),
        file("src/cli/args.rs", "use super::attach::Args;\n"),
        file(
            "src/cli/attach.rs",
            "fn run() {\n    super::launch::server_of();\n}\n",
        ),
        file("src/cli/launch.rs", "use super::attach::attach;\n"),
        file(
            "src/store/mod.rs",
            "mod session;\npub struct ProjectStore;\nfn f() { session::load(); }\n",
        ),
        file("src/store/session.rs", "use super::ProjectStore;\n"),
    ];
    let subcommands = "a subcommand's file imports another subcommand's; move what both need into a shared module of `src/cli/` (CLI_SHARED in tests/it/architecture.rs)";
    let want = [
        "src/cli/args.rs:1 imports crate::cli::attach::Args from src/cli/attach.rs (`src/cli/args.rs` is shared by the subcommands and imports none of them)".to_owned(),
        format!("src/cli/attach.rs:2 imports crate::cli::launch::server_of from src/cli/launch.rs ({subcommands})"),
        format!("src/cli/launch.rs:1 imports crate::cli::attach::attach from src/cli/attach.rs ({subcommands})"),
    ];
    let cli_circle = "import cycle: src/cli/attach.rs -> src/cli/launch.rs -> src/cli/attach.rs\n  src/cli/attach.rs:2 imports crate::cli::launch::server_of from src/cli/launch.rs\n  src/cli/launch.rs:1 imports crate::cli::attach::attach from src/cli/attach.rs";
    // Inside one module: `mod.rs` uses its child, which uses `mod.rs`.
    let store_circle = "import cycle: src/store/mod.rs -> src/store/session.rs -> src/store/mod.rs\n  src/store/mod.rs:3 imports crate::store::session::load from src/store/session.rs\n  src/store/session.rs:1 imports crate::store::ProjectStore from src/store/mod.rs";
    let mut all = want.to_vec();
    all.extend([cli_circle.to_owned(), store_circle.to_owned()]);
    assert_eq!(problems(&files), all);
}

#[test]
fn names_the_file_and_item_that_point_the_wrong_way() {
    let files = [
        file(
            "src/main.rs",
            "mod adapters; mod config; mod env; mod fsutil; mod materialize; mod widgets;",
        ),
        file("src/config/mod.rs", "use crate::adapters::all;\n"),
        file(
            "src/adapters/mod.rs",
            "fn f() {\n    crate::materialize::Mode::Clean;\n}\n",
        ),
        file(
            "src/materialize/mod.rs",
            "use crate::{env::Env, dispatch::run};\n",
        ),
        file("src/dispatch/mod.rs", ""),
        file("src/env.rs", "use crate::config::Known;\n"),
        file("src/widgets.rs", ""),
        file("src/adapters/claude/mod.rs", ""),
        file(
            "src/fsutil.rs",
            "use crate::adapters::claude::{Claude, slash};\n",
        ),
    ];
    let got = problems(&files);
    let want = [
        "src/widgets.rs: module `widgets` is in no layer; give it a row in LAYERS (tests/it/architecture.rs)",
        "src/config/mod.rs:1 imports crate::adapters::all from src/adapters/mod.rs (config is in layer `ground`; adapters is in layer `adapters`, above it)",
        "src/adapters/mod.rs:2 imports crate::materialize::Mode::Clean from src/materialize/mod.rs (adapters is in layer `adapters`; materialize is in layer `engines`, above it)",
        "src/materialize/mod.rs:1 imports crate::dispatch::run from src/dispatch/mod.rs (materialize is in layer `engines`; dispatch is in the same layer `engines`, and peers do not import each other)",
        "src/env.rs:1 imports crate::config::Known from src/config/mod.rs (env is in layer `ground`; config is in the same layer `ground`, and peers do not import each other)",
        "src/fsutil.rs:1 imports crate::adapters::claude::Claude from src/adapters/claude/mod.rs (fsutil is in layer `ground`; adapters is in layer `adapters`, above it)",
        "src/fsutil.rs:1 imports crate::adapters::claude::slash from src/adapters/claude/mod.rs (fsutil is in layer `ground`; adapters is in layer `adapters`, above it)",
        "import cycle: adapters -> materialize -> env -> config -> adapters\n  src/adapters/mod.rs:2 imports crate::materialize::Mode::Clean from src/materialize/mod.rs\n  src/materialize/mod.rs:1 imports crate::env::Env from src/env.rs\n  src/env.rs:1 imports crate::config::Known from src/config/mod.rs\n  src/config/mod.rs:1 imports crate::adapters::all from src/adapters/mod.rs",
    ];
    assert_eq!(got, want);
}
