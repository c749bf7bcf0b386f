//! Whether one `code` glob matches one repo-relative path, as globset says (`/` not special),
//! where no DFA was compiled for it: a receipt written before the governance index (its nodes
//! inline), and a glob the index keeps as text because its DFA alone would be too large. The
//! glob's text settles most pairs outright; otherwise globset compiles the glob (hundreds of µs
//! the first time in a process). The hook's usual way is the index's DFAs (`spec::automaton`).
//! Pure functions.

use crate::spec::automaton::{Direction, glob_of, literal_of};

/// Whether the glob `pat` matches `rel`.
pub fn matches(pat: &str, rel: &str) -> bool {
    if let Some(answer) = settled_without_compiling(pat, rel) {
        return answer;
    }
    glob_of(pat).is_some_and(|glob| glob.compile_matcher().is_match(rel))
}

/// What the text of `pat` alone says about `rel`: `Some(answer)` when that settles it (a
/// literal pattern; a path lacking the literal text every match starts or ends with), `None`
/// when only the glob can tell.
fn settled_without_compiling(pat: &str, rel: &str) -> Option<bool> {
    // The literal text every match starts and ends with, as the index's prefilter reads it.
    let prefix = literal_of(pat, Direction::Forward);
    if prefix.len() == pat.len() {
        // No special character at all: the glob is its one path.
        return Some(pat == rel);
    }
    let suffix = literal_of(pat, Direction::Backward);
    let fits = rel.len() >= prefix.len() + suffix.len()
        && rel.starts_with(prefix)
        && rel.ends_with(suffix);
    (!fits).then_some(false)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::spec::automaton::{self, Direction};
    use proptest::prelude::*;
    /// globset's own answer, through its compiled regex.
    pub fn glob_matches(pat: &str, rel: &str) -> bool {
        glob_of(pat).is_some_and(|glob| glob.compile_matcher().is_match(rel))
    }

    /// Glob pieces: the forms spec trees use, and the corners of globset's syntax (escapes,
    /// classes, alternations with wildcards, slashes or nothing in them, `**` in odd places).
    pub fn pattern() -> impl Strategy<Value = String> {
        let part = prop_oneof![
            Just("src"),
            Just("lib"),
            Just("a*_*.rs"),
            Just("**"),
            Just("*.proto"),
            Just("{a,b}"),
            Just("*.ts"),
            Just("x?y"),
            Just("[ab]c"),
            Just("mod.rs"),
            Just("d\\*"),
            Just("*.{ts,proto}"),
            Just("{src,lib}*"),
            Just("{a*,b}"),
            Just("{,a}"),
            Just("{a/**,b}"),
            Just("{**/a,b}"),
            Just("[!a]c"),
            Just(".gitignore"),
            Just("*"),
            Just("a.b"),
            Just("x,y"),
            Just("{a,b}.rs"),
            Just("src{,x}"),
            Just("**.rs"),
            Just("{x.ts,*.rs}"),
            Just("é*"),
            Just("a+b(c)"),
        ];
        prop::collection::vec(part, 1..4).prop_map(|p| p.join("/"))
    }

    pub fn path() -> impl Strategy<Value = String> {
        let part = prop_oneof![
            Just("src"),
            Just("lib"),
            Just("a1_2.rs"),
            Just("x.proto"),
            Just("a"),
            Just("b"),
            Just("f.ts"),
            Just("xzy"),
            Just("bc"),
            Just("mod.rs"),
            Just("d*"),
            Just("deep"),
            Just(".gitignore"),
            Just("a.b"),
            Just("x,y"),
            Just("b.rs"),
            Just("srcx"),
            Just("x.ts"),
            Just("lib.d"),
            Just("éa"),
            Just("a+b(c)"),
            Just("new\nline"),
        ];
        prop::collection::vec(part, 1..5).prop_map(|p| p.join("/"))
    }

    /// Any text over globset's syntax, most of it no valid glob.
    pub fn any_glob() -> impl Strategy<Value = String> {
        "[ab./*?{},!\\[\\]\\\\()+^$|\n]{0,12}"
    }

    pub fn any_path() -> impl Strategy<Value = String> {
        "[ab./,*{}()+^$|\n]{1,10}"
    }

    pub fn glob_and_path() -> impl Strategy<Value = (String, String)> {
        prop_oneof![(pattern(), path()), (any_glob(), any_path())]
    }

    #[test]
    fn settles_the_common_forms_without_compiling() {
        assert_eq!(settled_without_compiling("dir/**", "src/a.rs"), Some(false));
        assert_eq!(
            settled_without_compiling("**/*.proto", "src/a.rs"),
            Some(false)
        );
        assert_eq!(
            settled_without_compiling("src/main.rs", "src/main.rs"),
            Some(true)
        );
        assert_eq!(settled_without_compiling("dir/**", "dir/a.rs"), None);
        assert!(glob_matches("dir/**", "dir/a/b.rs"));
        // `**` may match nothing, with its slash: found by the property test.
        assert_eq!(settled_without_compiling("**/src", "src"), None);
        assert_eq!(settled_without_compiling("a/**/b", "a/b"), None);
        assert!(glob_matches("**/src", "src") && glob_matches("a/**/b", "a/b"));
    }

    /// The five glob forms spec trees use (prefix, suffix, brace, class, plain), over a small
    /// alphabet so that the paths of [`form_path`] often match.
    pub fn form() -> impl Strategy<Value = String> {
        let word = || "[abc]{1,2}";
        prop_oneof![
            (word(), word()).prop_map(|(a, b)| format!("{a}/{b}/**")),
            word().prop_map(|a| format!("**/*{a}.rs")),
            (word(), word(), word()).prop_map(|(a, b, c)| format!("{a}/{{{b},{c}}}/*.ts")),
            (word(), word()).prop_map(|(a, b)| format!("{a}/[a-b]*{b}.py")),
            (word(), word()).prop_map(|(a, b)| format!("{a}/{b}.rs")),
        ]
    }

    pub fn form_path() -> impl Strategy<Value = String> {
        let ext = prop_oneof![Just(""), Just(".rs"), Just(".ts"), Just(".py")];
        (prop::collection::vec("[abc]{1,3}", 1..5), ext)
            .prop_map(|(parts, ext)| format!("{}{ext}", parts.join("/")))
    }

    /// The patterns of one DFA over `globs` that match `rel`, compiled `way`; `None` when a
    /// glob is no glob or the DFA would be too large.
    fn dfa_matching(globs: &[String], way: Direction, rel: &str) -> Option<Vec<usize>> {
        let regexes: Vec<String> = globs
            .iter()
            .map(|g| automaton::regex_of(g))
            .collect::<Option<_>>()?;
        let bytes = automaton::build(&regexes, way)?;
        let mut buf = vec![0u8; bytes.len() + 3];
        let at = automaton::aligned_start(&buf);
        buf[at..at + bytes.len()].copy_from_slice(&bytes);
        Some(
            automaton::matching(&buf[at..at + bytes.len()], way, rel).expect("DFA bytes read back"),
        )
    }

    /// globset's answer for each of `globs`: the indices of those that match `rel`.
    fn globset_matching(globs: &[String], rel: &str) -> Vec<usize> {
        (0..globs.len())
            .filter(|&i| glob_matches(&globs[i], rel))
            .collect()
    }

    const WAYS: [Direction; 2] = [Direction::Forward, Direction::Backward];

    proptest! {
        #![proptest_config(ProptestConfig { cases: 6000, failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn the_shortcut_answers_what_the_glob_answers((pat, rel) in glob_and_path()) {
            if let Some(answer) = settled_without_compiling(&pat, &rel) {
                prop_assert_eq!(answer, glob_matches(&pat, &rel), "{} vs {}", pat, rel);
            }
        }

        #[test]
        fn matches_answers_what_the_compiled_glob_answers((pat, rel) in glob_and_path()) {
            prop_assert_eq!(matches(&pat, &rel), glob_matches(&pat, &rel), "{} vs {:?}", pat, rel);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1500, failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn one_glob_s_dfa_answers_what_globset_answers((pat, rel) in glob_and_path()) {
            let globs = [pat];
            for way in WAYS {
                if let Some(got) = dfa_matching(&globs, way, &rel) {
                    prop_assert_eq!(got, globset_matching(&globs, &rel), "{:?} {:?} vs {:?}", way, globs, rel);
                }
            }
        }

        #[test]
        fn a_dfa_of_many_globs_names_each_that_matches(
            globs in prop::collection::vec(prop_oneof![form(), pattern()], 1..8),
            rels in prop::collection::vec(prop_oneof![form_path(), path()], 1..8),
        ) {
            for way in WAYS {
                for rel in &rels {
                    let got = dfa_matching(&globs, way, rel);
                    prop_assert!(got.is_some(), "{:?} {:?} builds", way, globs);
                    prop_assert_eq!(got.unwrap(), globset_matching(&globs, rel), "{:?} {:?} vs {:?}", way, globs, rel);
                }
            }
        }
    }

    #[test]
    fn the_dfa_reads_every_common_form_both_ways() {
        let cases = [
            ("dir/**", "dir/a/b.rs", true),
            ("dir/**", "dir", false),
            ("lib/a*_*.rs", "lib/ab_c.rs", true),
            ("lib/a*_*.rs", "lib/abc.rs", false),
            ("{a,b}/**/*.ts", "b/x.ts", true),
            ("{a,b}/**/*.ts", "c/x.ts", false),
            ("**/src", "src", true),
            ("[ab]c", "bc", true),
            ("**/*.proto", "src/a.proto", true),
            ("**/*.proto", "src/a.rs", false),
            ("x?y", "xzy", true),
            ("**", "any/thing", true),
            ("src/main.rs", "src/main.rs", true),
            ("src/main.rs", "src/main.rsx", false),
            ("lib/[a-c]*.py", "lib/b_x.py", true),
            ("lib/[a-c]*.py", "lib/d_x.py", false),
            ("src/{a,b}/*.ts", "src/a/deep/x.ts", true),
            ("*.rs", "src/a.rs", true),
            ("SRC/**", "src/a.rs", false),
            ("a/**/b", "a/b", true),
            ("é*", "éa", true),
            ("d\\*", "d*", true),
            ("d\\*", "dx", false),
            ("**", "new\nline", true),
        ];
        for (pat, rel, want) in cases {
            assert_eq!(glob_matches(pat, rel), want, "globset: {pat} vs {rel:?}");
            assert_eq!(matches(pat, rel), want, "{pat} vs {rel:?}");
            for way in WAYS {
                let got = dfa_matching(&[pat.to_owned()], way, rel);
                assert_eq!(
                    got,
                    Some(if want { vec![0] } else { vec![] }),
                    "{way:?} {pat} vs {rel:?}"
                );
            }
        }
        // One DFA, several globs: every one that matches, whichever the order.
        let globs: Vec<String> = [
            "src/**",
            "**/*.rs",
            "src/{a,b}/*.rs",
            "lib/[a-c]*.py",
            "src/a/x.rs",
        ]
        .map(str::to_owned)
        .to_vec();
        for way in WAYS {
            assert_eq!(
                dfa_matching(&globs, way, "src/a/x.rs"),
                Some(vec![0, 1, 2, 4])
            );
            assert_eq!(dfa_matching(&globs, way, "lib/a.py"), Some(vec![3]));
            assert_eq!(dfa_matching(&globs, way, "docs/a.md"), Some(vec![]));
        }
    }

    #[test]
    fn the_globs_spec_trees_use_compile_each_way_they_are_filed() {
        assert_eq!(automaton::direction_of("src/a/**"), Direction::Forward);
        assert_eq!(
            automaton::direction_of("src/{a,b}/*.ts"),
            Direction::Forward
        );
        assert_eq!(automaton::direction_of("docs/page.md"), Direction::Forward);
        assert_eq!(automaton::direction_of("**/*.rs"), Direction::Backward);
        assert_eq!(
            automaton::direction_of("lib/[a-c]*1.py"),
            Direction::Backward
        );
        assert!(automaton::regex_of("a{b").is_none());
    }
}
