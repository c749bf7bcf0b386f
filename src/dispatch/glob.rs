//! Whether one `code` glob matches one repo-relative path, as globset says (`/` not special),
//! without paying for a compiled regex: the first compile in a process costs hundreds of µs,
//! more than the rest of the hook. The glob's text settles most pairs outright; otherwise
//! globset parses the glob (a few µs) and writes its regex, and a small Pike VM runs that
//! regex here. globset's regex for a glob uses literals, `.`, `*`, `?` and non-capturing
//! alternations; a class (`[ab]`) is left to globset's own compiled matcher. Pure functions.

/// Whether the glob `pat` matches `rel`.
pub fn matches(pat: &str, rel: &str) -> bool {
    if let Some(answer) = settled_without_compiling(pat, rel) {
        return answer;
    }
    let Ok(glob) = glob_builder(pat).build() else {
        return false;
    };
    match Program::of_regex(glob.regex()) {
        Some(program) => program.matches(rel.as_bytes()),
        None => glob.compile_matcher().is_match(rel),
    }
}

fn glob_builder(pat: &str) -> globset::GlobBuilder<'_> {
    let mut b = globset::GlobBuilder::new(pat);
    b.literal_separator(false);
    b
}

/// What the text of `pat` alone says about `rel`: `Some(answer)` when that settles it (a
/// literal pattern; a path lacking the literal text every match starts or ends with), `None`
/// when only the glob can tell.
fn settled_without_compiling(pat: &str, rel: &str) -> Option<bool> {
    const META: &[char] = &['*', '?', '[', ']', '{', '}'];
    if pat.contains('\\') {
        return None;
    }
    let (Some(first), Some(last)) = (pat.find(META), pat.rfind(META)) else {
        return Some(pat == rel);
    };
    let (mut prefix, mut suffix) = (&pat[..first], &pat[last + 1..]);
    // A `**` matches nothing at all too, taking its `/` with it: `**/src` matches `src`.
    if pat[..=last].ends_with("**") {
        suffix = suffix.strip_prefix('/').unwrap_or(suffix);
    }
    if pat[first..].starts_with("**") {
        prefix = prefix.strip_suffix('/').unwrap_or(prefix);
    }
    let fits = rel.len() >= prefix.len() + suffix.len()
        && rel.starts_with(prefix)
        && rel.ends_with(suffix);
    (!fits).then_some(false)
}

/// One instruction of the VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inst {
    Byte(u8),
    /// Any byte (globset's regexes let `.` match a newline too).
    Any,
    /// Go on at both.
    Split(usize, usize),
    Jump(usize),
    Match,
}

/// A regex of globset's making, compiled for the VM: the whole path must match.
#[derive(Debug)]
struct Program(Vec<Inst>);

/// A piece of globset's regex for a glob.
#[derive(Debug)]
enum Node {
    Byte(u8),
    Any,
    /// `(?:a|b|...)`, each alternative a sequence.
    Group(Vec<Vec<Node>>),
    Star(Box<Node>),
    Optional(Box<Node>),
}

impl Program {
    /// The program of globset's regex for a glob (`(?-u)^...$`); `None` for anything this VM
    /// does not run.
    fn of_regex(re: &str) -> Option<Program> {
        let body = re.strip_prefix("(?-u)^")?.strip_suffix('$')?;
        let mut r = Reader {
            re: body.as_bytes(),
            at: 0,
        };
        let alternatives = r.alternatives()?;
        if r.at != r.re.len() {
            return None;
        }
        let mut out = Vec::new();
        emit(&Node::Group(alternatives), &mut out);
        out.push(Inst::Match);
        Some(Program(out))
    }

    /// Runs the program over `text` in lockstep (no backtracking: time is linear in the text).
    fn matches(&self, text: &[u8]) -> bool {
        let mut now: Vec<usize> = Vec::new();
        let mut next: Vec<usize> = Vec::new();
        let mut seen = vec![usize::MAX; self.0.len()];
        self.add(&mut now, &mut seen, 0, 0);
        for (i, &b) in text.iter().enumerate() {
            next.clear();
            for &pc in &now {
                match self.0[pc] {
                    Inst::Byte(want) if want == b => self.add(&mut next, &mut seen, pc + 1, i + 1),
                    Inst::Any => self.add(&mut next, &mut seen, pc + 1, i + 1),
                    _ => {}
                }
            }
            std::mem::swap(&mut now, &mut next);
            if now.is_empty() {
                return false;
            }
        }
        now.iter().any(|&pc| self.0[pc] == Inst::Match)
    }

    /// Adds `pc` and what it reaches without reading a byte to `list`, once per step.
    fn add(&self, list: &mut Vec<usize>, seen: &mut [usize], pc: usize, step: usize) {
        if seen[pc] == step {
            return;
        }
        seen[pc] = step;
        match self.0[pc] {
            Inst::Split(a, b) => {
                self.add(list, seen, a, step);
                self.add(list, seen, b, step);
            }
            Inst::Jump(to) => self.add(list, seen, to, step),
            _ => list.push(pc),
        }
    }
}

/// Compiles `node` onto `out`; a target not known yet is patched once it is.
fn emit(node: &Node, out: &mut Vec<Inst>) {
    match node {
        Node::Byte(b) => out.push(Inst::Byte(*b)),
        Node::Any => out.push(Inst::Any),
        Node::Group(alternatives) => {
            let mut jumps = Vec::new();
            let last = alternatives.len().saturating_sub(1);
            for (i, seq) in alternatives.iter().enumerate() {
                let split = out.len();
                if i < last {
                    out.push(Inst::Split(split + 1, usize::MAX));
                }
                for n in seq {
                    emit(n, out);
                }
                if i < last {
                    jumps.push(out.len());
                    out.push(Inst::Jump(usize::MAX));
                    out[split] = Inst::Split(split + 1, out.len());
                }
            }
            let end = out.len();
            for j in jumps {
                out[j] = Inst::Jump(end);
            }
        }
        Node::Star(inner) => {
            let split = out.len();
            out.push(Inst::Split(split + 1, usize::MAX));
            emit(inner, out);
            out.push(Inst::Jump(split));
            out[split] = Inst::Split(split + 1, out.len());
        }
        Node::Optional(inner) => {
            let split = out.len();
            out.push(Inst::Split(split + 1, usize::MAX));
            emit(inner, out);
            out[split] = Inst::Split(split + 1, out.len());
        }
    }
}

/// Reads the regex globset writes: escaped literals, `\xNN` bytes, `.`, `*`, `?` and `(?:..|..)`.
struct Reader<'a> {
    re: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.re.get(self.at).copied()
    }

    /// `a|b|...`, up to a `)` or the end.
    fn alternatives(&mut self) -> Option<Vec<Vec<Node>>> {
        let mut out = vec![self.sequence()?];
        while self.peek() == Some(b'|') {
            self.at += 1;
            out.push(self.sequence()?);
        }
        Some(out)
    }

    fn sequence(&mut self) -> Option<Vec<Node>> {
        let mut seq = Vec::new();
        while let Some(c) = self.peek() {
            if c == b'|' || c == b')' {
                break;
            }
            let atom = self.atom()?;
            seq.push(match self.peek() {
                Some(b'*') => {
                    self.at += 1;
                    Node::Star(Box::new(atom))
                }
                Some(b'?') => {
                    self.at += 1;
                    Node::Optional(Box::new(atom))
                }
                _ => atom,
            });
        }
        Some(seq)
    }

    fn atom(&mut self) -> Option<Node> {
        let c = self.peek()?;
        self.at += 1;
        Some(match c {
            b'.' => Node::Any,
            b'\\' => {
                let e = self.peek()?;
                self.at += 1;
                if e == b'x' {
                    let hex = std::str::from_utf8(self.re.get(self.at..self.at + 2)?).ok()?;
                    self.at += 2;
                    Node::Byte(u8::from_str_radix(hex, 16).ok()?)
                } else if e.is_ascii_alphanumeric() {
                    // `\d`, `\b` and the like are classes or assertions: not globset's output.
                    return None;
                } else {
                    Node::Byte(e)
                }
            }
            b'(' => {
                if self.re.get(self.at..self.at + 2)? != b"?:" {
                    return None;
                }
                self.at += 2;
                let alternatives = self.alternatives()?;
                if self.peek()? != b')' {
                    return None;
                }
                self.at += 1;
                Node::Group(alternatives)
            }
            b'[' | b']' | b'{' | b'}' | b'*' | b'?' | b'+' | b'^' | b'$' | b')' | b'|' => {
                return None;
            }
            _ => Node::Byte(c),
        })
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// globset's own answer, through its compiled regex.
    pub fn glob_matches(pat: &str, rel: &str) -> bool {
        glob_builder(pat)
            .build()
            .is_ok_and(|glob| glob.compile_matcher().is_match(rel))
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

    proptest! {
        #![proptest_config(ProptestConfig { cases: 6000, failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn the_shortcut_answers_what_the_glob_answers((pat, rel) in glob_and_path()) {
            if let Some(answer) = settled_without_compiling(&pat, &rel) {
                prop_assert_eq!(answer, glob_matches(&pat, &rel), "{} vs {}", pat, rel);
            }
        }

        #[test]
        fn the_vm_answers_what_the_compiled_glob_answers((pat, rel) in glob_and_path()) {
            if let Ok(glob) = glob_builder(&pat).build() && let Some(p) = Program::of_regex(glob.regex()) {
                prop_assert_eq!(p.matches(rel.as_bytes()), glob_matches(&pat, &rel), "{} vs {:?}: {}", pat, rel, glob.regex());
            }
            prop_assert_eq!(matches(&pat, &rel), glob_matches(&pat, &rel), "{} vs {:?}", pat, rel);
        }
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

    #[test]
    fn the_vm_runs_every_common_form_and_leaves_classes_to_globset() {
        for pat in [
            "dir/**",
            "**/*.proto",
            "lib/a*_*.rs",
            "{a,b}/**/*.ts",
            "x?y",
            "**",
        ] {
            let glob = glob_builder(pat).build().unwrap();
            assert!(
                Program::of_regex(glob.regex()).is_some(),
                "{}",
                glob.regex()
            );
        }
        let class = glob_builder("[ab]c").build().unwrap();
        assert!(Program::of_regex(class.regex()).is_none());
        let cases = [
            ("dir/**", "dir/a/b.rs", true),
            ("dir/**", "dir", false),
            ("lib/a*_*.rs", "lib/ab_c.rs", true),
            ("lib/a*_*.rs", "lib/abc.rs", false),
            ("{a,b}/**/*.ts", "b/x.ts", true),
            ("{a,b}/**/*.ts", "c/x.ts", false),
            ("**/src", "src", true),
            ("[ab]c", "bc", true),
        ];
        for (pat, rel, want) in cases {
            assert_eq!(matches(pat, rel), want, "{pat} vs {rel}");
        }
    }
}
