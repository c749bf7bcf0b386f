//! The manual holds together: the README stays a short front door (under 200 lines, no table
//! cell over 40 words, the install and test commands CI and people run), every page under
//! `docs/` and `CONTRIBUTING.md` can be reached from it, and every relative link and anchor in
//! them leads somewhere. Reads the Markdown as text; runs nothing.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Component, Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    fs_err::read_to_string(root().join(rel)).unwrap()
}

/// Every Markdown page of the manual, repository-relative: the README, `CONTRIBUTING.md` and
/// `docs/**/*.md`.
fn pages() -> BTreeSet<String> {
    let mut out: BTreeSet<String> = ["README.md", "CONTRIBUTING.md"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    for entry in walkdir::WalkDir::new(root().join("docs")) {
        let entry = entry.unwrap();
        if entry.file_type().is_file() && entry.path().extension().is_some_and(|e| e == "md") {
            let rel = entry.path().strip_prefix(root()).unwrap();
            out.insert(rel.to_string_lossy().into_owned());
        }
    }
    out
}

/// The text outside fenced code blocks and inline code spans, where a link is a link. A code
/// span may run across a line break, never across a blank line.
fn prose(md: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    let mut in_code = false;
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if line.trim().is_empty() {
            in_code = false;
        }
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
            } else if !in_code {
                out.push(c);
            }
        }
        out.push('\n');
    }
    out
}

/// The targets of the inline links `[text](target)` in a page's prose.
fn links(md: &str) -> Vec<String> {
    let text = prose(md);
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(end) = rest.find(')') {
            out.push(rest[..end].trim().to_owned());
            rest = &rest[end..];
        }
    }
    out
}

/// GitHub's anchors for a page's headings: lowercased, punctuation other than `-` and `_`
/// dropped, spaces as `-`.
fn anchors(md: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let heading = line.trim_start_matches('#').trim();
        let slug: String = heading
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        out.insert(slug);
    }
    out
}

/// `dir/../x` made plain, so links compare as repository-relative paths.
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Each page's relative links, resolved: (target page or file, anchor).
fn resolved(page: &str, md: &str) -> Vec<(String, String, Option<String>)> {
    links(md)
        .into_iter()
        .filter(|l| !l.contains("://") && !l.starts_with("mailto:"))
        .map(|l| {
            let (path, anchor) = match l.split_once('#') {
                Some((p, a)) => (p.to_owned(), Some(a.to_owned())),
                None => (l.clone(), None),
            };
            let target = if path.is_empty() {
                page.to_owned()
            } else {
                let base = Path::new(page).parent().unwrap_or(Path::new(""));
                normal(&base.join(&path)).to_string_lossy().into_owned()
            };
            (l, target, anchor)
        })
        .collect()
}

#[test]
fn readme_is_a_short_front_door() {
    let readme = read("README.md");
    let lines = readme.lines().count();
    assert!(
        lines < 200,
        "README.md has {lines} lines; keep it under 200 and move the rest to docs/"
    );
    let mut long = Vec::new();
    for (n, line) in readme.lines().enumerate() {
        let row = line.trim();
        if !row.starts_with('|')
            || row
                .trim_matches(|c| matches!(c, '|' | '-' | ' ' | ':'))
                .is_empty()
        {
            continue;
        }
        for cell in row.trim_matches('|').split(" | ") {
            let words = cell.split_whitespace().count();
            if words > 40 {
                long.push(format!(
                    "README.md:{}: a cell of {words} words: {cell}",
                    n + 1
                ));
            }
        }
    }
    assert!(
        long.is_empty(),
        "a table cell holds words, a paragraph goes to the page it links to:\n{}",
        long.join("\n")
    );
    // The commands people copy and CI runs.
    assert!(readme.contains("```sh\n./install.sh && ~/.local/bin/spex --help\n```"));
    assert!(readme.contains("```sh\n./scripts/test.sh\n```"));
    assert!(
        read(".ci/run")
            .lines()
            .any(|l| l.trim() == "./scripts/test.sh"),
        "`.ci/run` runs the README's test command"
    );
}

#[test]
fn every_page_is_reachable_from_the_readme_and_every_link_resolves() {
    let pages = pages();
    let texts: BTreeMap<&str, String> = pages.iter().map(|p| (p.as_str(), read(p))).collect();
    let mut broken = Vec::new();
    for (page, md) in &texts {
        for (link, target, anchor) in resolved(page, md) {
            if !root().join(&target).exists() {
                broken.push(format!("{page}: `{link}`: no file `{target}`"));
            } else if let (Some(anchor), Some(md)) = (anchor, texts.get(target.as_str()))
                && !anchors(md).contains(&anchor)
            {
                broken.push(format!(
                    "{page}: `{link}`: no heading `#{anchor}` in {target}"
                ));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));

    let mut seen = BTreeSet::from(["README.md".to_owned()]);
    let mut queue = VecDeque::from(["README.md".to_owned()]);
    while let Some(page) = queue.pop_front() {
        for (_, target, _) in resolved(&page, &texts[page.as_str()]) {
            if texts.contains_key(target.as_str()) && seen.insert(target.clone()) {
                queue.push_back(target);
            }
        }
    }
    let unreached: Vec<_> = pages.difference(&seen).collect();
    assert!(
        unreached.is_empty(),
        "pages no link from README.md leads to (link them from the README or a page it links): {unreached:?}"
    );
}

#[test]
fn the_link_checker_sees_links_and_anchors() {
    let md = "# A `b` c: d\n\nSee [x](y.md#a-b-c-d) and `[no](code.md)`, `a\nspan [no](span.md)` [z](z.md).\n```\n[no](block.md)\n```\n";
    assert_eq!(links(md), vec!["y.md#a-b-c-d", "z.md"]);
    assert!(anchors(md).contains("a-b-c-d"));
    assert_eq!(
        resolved("docs/guides/x.md", "[r](../../README.md#exit-codes)"),
        vec![(
            "../../README.md#exit-codes".to_owned(),
            "README.md".to_owned(),
            Some("exit-codes".to_owned())
        )]
    );
}

/// Every file a comment in `src/` cites as evidence ships with the repository: a path into
/// `docs/` resolves, and nothing points beside the checkout (`../shared/...`) or at a facts
/// file by a bare name a clone cannot find.
#[test]
fn comments_in_src_cite_files_inside_the_repository() {
    let mut bad = Vec::new();
    let mut cited = 0;
    for entry in walkdir::WalkDir::new(root().join("src")) {
        let entry = entry.expect("src/ is readable");
        if entry.path().extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = fs_err::read_to_string(entry.path()).expect("a source file reads");
        let rel = entry
            .path()
            .strip_prefix(root())
            .unwrap()
            .display()
            .to_string();
        for (n, line) in text.lines().enumerate() {
            let Some(at) = line.find("//") else { continue };
            let comment = &line[at..];
            // `../x` (not an ellipsis such as `.../bin`) leaves the checkout.
            if comment
                .match_indices("../")
                .any(|(i, _)| !comment[..i].ends_with('.'))
            {
                bad.push(format!(
                    "{rel}:{}: points outside the checkout: {comment}",
                    n + 1
                ));
            }
            for (i, _) in comment.match_indices("facts/") {
                let head = &comment[..i];
                let path: String = comment[i..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || matches!(c, '/' | '.' | '-' | '_'))
                    .collect();
                let path = path.trim_end_matches('.');
                if !head.ends_with("docs/harnesses/") {
                    bad.push(format!(
                        "{rel}:{}: `{path}` is not a path in the repository",
                        n + 1
                    ));
                } else if !root().join("docs/harnesses").join(path).is_file() {
                    bad.push(format!(
                        "{rel}:{}: `docs/harnesses/{path}` does not exist",
                        n + 1
                    ));
                } else {
                    cited += 1;
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert!(cited > 20, "the check found the citations ({cited})");
}
