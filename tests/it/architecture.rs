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
/// transports), and the ground is split in two rows because `store` builds on `config` and
/// `fsutil`. A new top-level module fails the test until it is given a row here; `runtime` and
/// `pty` have their rows before their folders exist.
const LAYERS: &[(&str, &[&str])] = &[
    ("entry", &["main"]),
    ("cli", &["cli"]),
    (
        "engines",
        &["materialize", "dispatch", "runtime", "reconcile"],
    ),
    ("adapters", &["adapters"]),
    ("seam", &["seam", "pty"]),
    ("ground (records)", &["store"]),
    (
        "ground",
        &["spec", "config", "env", "repo", "fsutil", "text"],
    ),
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

/// `src/adapters/codex/rpc.rs` -> (`adapters`, 3): the top-level module a file belongs to and
/// how deep in the module tree the file's own module sits.
fn module_of(rel: &str) -> (String, usize) {
    let parts: Vec<&str> = rel.trim_start_matches("src/").split('/').collect();
    if parts == ["main.rs"] {
        return ("main".to_owned(), 0);
    }
    let depth = parts.len() - usize::from(parts.last() == Some(&"mod.rs"));
    (parts[0].trim_end_matches(".rs").to_owned(), depth)
}

/// Every path in `src` that leaves its own top-level module: `crate::...` paths, `super::`
/// chains that climb to the crate root, and in the crate root itself (`main.rs`) paths that
/// start with a module's name. `modules` are the crate's top-level modules; a path naming
/// anything else names an item of the crate root (`main`).
fn imports(rel: &str, src: &str, modules: &BTreeSet<String>) -> Vec<Import> {
    let toks = tokens(src);
    let (_, file_depth) = module_of(rel);
    let mut out = Vec::new();
    let mut braces = 0usize;
    // Brace depths at which inline `mod name { .. }` blocks opened.
    let mut inline_mods: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let line = toks[i].1;
        let after_dollar = i > 0 && toks[i - 1].0 == Tok::Dollar;
        let after_sep = i > 0 && toks[i - 1].0 == Tok::Sep;
        let mut root_path_at = None;
        let at_root = file_depth + inline_mods.len() == 0;
        if at_root
            && !after_sep
            && matches!(&toks[i].0, Tok::Ident(m) if modules.contains(m))
            && at(&toks, i + 1) == Some(&Tok::Sep)
        {
            root_path_at = Some(i);
        } else if is_ident(toks.get(i), "crate")
            && !after_dollar
            && at(&toks, i + 1) == Some(&Tok::Sep)
        {
            root_path_at = Some(i + 2);
        } else if is_ident(toks.get(i), "super") && at(&toks, i + 1) == Some(&Tok::Sep) {
            let mut j = i;
            let mut ups = 0;
            while is_ident(toks.get(j), "super") && at(&toks, j + 1) == Some(&Tok::Sep) {
                ups += 1;
                j += 2;
            }
            if ups >= file_depth + inline_mods.len() {
                root_path_at = Some(j);
            } else {
                i = j;
                continue;
            }
        }
        if let Some(start) = root_path_at {
            let mut paths = Vec::new();
            i = use_tree(&toks, start, &[], &mut paths);
            for path in paths {
                let first = path.first().cloned().unwrap_or_default();
                let target = if modules.contains(&first) {
                    first
                } else {
                    "main".to_owned()
                };
                out.push(Import {
                    file: rel.to_owned(),
                    line,
                    item: format!("crate::{}", path.join("::")),
                    target,
                });
            }
            continue;
        }
        match &toks[i].0 {
            Tok::Ident(m) if m == "mod" && at(&toks, i + 2) == Some(&Tok::Open) => {
                inline_mods.push(braces);
            }
            Tok::Open => braces += 1,
            Tok::Close => {
                braces = braces.saturating_sub(1);
                if inline_mods.last() == Some(&braces) {
                    inline_mods.pop();
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
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
    let modules: BTreeSet<String> = files.iter().map(|(rel, _)| module_of(rel).0).collect();
    let paths: BTreeSet<&str> = files.iter().map(|(rel, _)| rel.as_str()).collect();
    let mut out = Vec::new();
    for m in &modules {
        if layer_of(m).is_none() {
            let file = &files
                .iter()
                .find(|(rel, _)| module_of(rel).0 == *m)
                .expect("a file")
                .0;
            out.push(format!(
                "{file}: module `{m}` is in no layer; give it a row in LAYERS (tests/it/architecture.rs)"
            ));
        }
    }
    // The first import seen for each arrow between two top-level modules.
    let mut arrows: BTreeMap<(String, String), Import> = BTreeMap::new();
    for (rel, src) in files {
        let (from, _) = module_of(rel);
        for imp in imports(rel, src, &modules) {
            if imp.target == from {
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

/// Only `src/adapters/` names a harness: elsewhere under `src/`, no line of code or string
/// literal (comments aside, which may explain a harness's behaviour) holds an adapter's
/// folder name, so the PTY library, the engines and the ground stay harness-neutral.
#[test]
fn no_harness_is_named_outside_the_adapters() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let harnesses: Vec<String> = std::fs::read_dir(root.join("src/adapters"))
        .expect("src/adapters")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_dir())
        .map(|p| p.file_name().unwrap().to_string_lossy().to_lowercase())
        .collect();
    assert!(!harnesses.is_empty(), "found the adapters");
    let mut files = Vec::new();
    rust_files(&root.join("src"), root, &mut files);
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
    assert!(
        named.is_empty(),
        "a harness is named outside src/adapters/ (move it behind the seam):\n{}",
        named.join("\n")
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
