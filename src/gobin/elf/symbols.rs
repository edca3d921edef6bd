//! Finding functions by the names a script gives: exact Go names, `*` wildcards, `[...]`
//! for the type arguments of generic code, and "did you mean" suggestions.
//!
//! Pattern rules:
//! - a name that exists exactly is that one function, even if it holds `*` (`main.(*T).M`);
//! - otherwise `*` matches any run of characters, `/` `.` `(` `)` included, except that
//!   `(*` followed by a letter or `_` is Go's pointer receiver and matches itself;
//! - `[...]` matches any type-argument list: `main.Sum[...]` finds `main.Sum[go.shape.int]`.

use crate::gobin::Function;

/// One piece of a compiled pattern.
#[derive(Debug, PartialEq)]
enum Piece {
    Lit(String),
    Any,
    /// `[` anything `]`: the type arguments of a generic instantiation.
    TypeArgs,
}

fn compile(pattern: &str) -> Vec<Piece> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut pieces = Vec::new();
    let mut lit = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '[' && chars[i..].starts_with(&['[', '.', '.', '.', ']']) {
            flush(&mut lit, &mut pieces);
            pieces.push(Piece::TypeArgs);
            i += 5;
            continue;
        }
        let pointer_receiver = c == '*'
            && i > 0
            && chars[i - 1] == '('
            && chars.get(i + 1).is_some_and(|n| n.is_alphabetic() || *n == '_');
        if c == '*' && !pointer_receiver {
            flush(&mut lit, &mut pieces);
            if pieces.last() != Some(&Piece::Any) {
                pieces.push(Piece::Any);
            }
        } else {
            lit.push(c);
        }
        i += 1;
    }
    flush(&mut lit, &mut pieces);
    pieces
}

fn flush(lit: &mut String, pieces: &mut Vec<Piece>) {
    if !lit.is_empty() {
        pieces.push(Piece::Lit(std::mem::take(lit)));
    }
}

/// Whether `name` matches the compiled pattern. The pieces between two `*` are matched
/// without backtracking (each matches at most one way at a given place, `[...]` up to its
/// balanced `]`), and at each `*` the match of the next run of pieces that ends soonest
/// is the best one (the `*` after it takes whatever follows), so the time is bounded by
/// the name's length times the pattern's, whatever the pattern.
fn matches(pieces: &[Piece], text: &str) -> bool {
    let name = text.as_bytes();
    // Split at each `*` without collecting: this runs for every function of a binary.
    let mut runs = pieces.split(|p| *p == Piece::Any);
    let first = runs.next().unwrap_or(&[]);
    let Some(mut at) = match_run(first, name, 0) else { return false };
    let stars = pieces.iter().filter(|p| **p == Piece::Any).count();
    let Some(last) = pieces.rsplit(|p| *p == Piece::Any).next().filter(|_| stars > 0) else {
        return at == name.len();
    };
    let middle = runs.take(stars - 1);
    // A last run of literals is checked first (most names end otherwise): what `-l` and
    // wildcard probes pay on every function of a big binary.
    if let Some(len) = fixed_len(last) {
        if name.len().checked_sub(len).is_none_or(|start| match_run(last, name, start).is_none()) {
            return false;
        }
    }
    for run in middle {
        // One literal: found by a substring search, not tried at every start.
        if let ([Piece::Lit(l)], Some(rest)) = (run, text.get(at..)) {
            match rest.find(l.as_str()) {
                Some(i) => at += i + l.len(),
                None => return false,
            }
            continue;
        }
        let mut ends = (at..=name.len()).filter_map(|start| match_run(run, name, start));
        // Without `[...]` a run has one length: the first match ends soonest.
        let end = if fixed_len(run).is_some() { ends.next() } else { ends.min() };
        match end {
            Some(end) => at = end,
            None => return false,
        }
    }
    // The last run must end where the name ends.
    match fixed_len(last) {
        Some(len) => {
            name.len().checked_sub(len).is_some_and(|start| start >= at && match_run(last, name, start).is_some())
        }
        None => (at..=name.len()).any(|start| match_run(last, name, start) == Some(name.len())),
    }
}

/// The length of a run made only of literals.
fn fixed_len(run: &[Piece]) -> Option<usize> {
    run.iter().map(|p| if let Piece::Lit(l) = p { Some(l.len()) } else { None }).sum()
}

/// Where the run of pieces (no `Any` among them) ends when it starts at `at` in `name`.
fn match_run(run: &[Piece], name: &[u8], mut at: usize) -> Option<usize> {
    for piece in run {
        at = match piece {
            Piece::Lit(l) => name.get(at..)?.starts_with(l.as_bytes()).then_some(at + l.len())?,
            Piece::TypeArgs => type_args_end(name, at)?,
            Piece::Any => return None,
        };
    }
    Some(at)
}

/// Where the type-argument list `[...]` starting at `at` ends (after its balanced `]`;
/// type arguments nest: `[map[K]V]`).
pub(crate) fn type_args_end(name: &[u8], at: usize) -> Option<usize> {
    if name.get(at) != Some(&b'[') {
        return None;
    }
    let mut depth = 0usize;
    for (i, c) in name.iter().enumerate().skip(at) {
        match c {
            b'[' => depth += 1,
            b']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether a pattern needs matching rather than an exact lookup (the `*` of a pointer
/// receiver, `(*T)`, is not a wildcard).
pub(crate) fn is_pattern(pattern: &str) -> bool {
    (pattern.contains('*') || pattern.contains("[...]")) && compile(pattern).iter().any(|p| !matches!(p, Piece::Lit(_)))
}

/// A pattern compiled once, to match many names.
pub(crate) struct Matcher(Vec<Piece>);

impl Matcher {
    pub(crate) fn new(pattern: &str) -> Matcher {
        Matcher(compile(pattern))
    }
    pub(crate) fn matches(&self, name: &str) -> bool {
        matches(&self.0, name)
    }
}

/// Functions (sorted by name) matching `pattern`, per the rules above (what
/// `names::Functions::find` answers, on functions kept in address order).
#[cfg(test)]
pub(crate) fn find<'f>(functions: &'f [Function], pattern: &str) -> Vec<&'f Function> {
    let exact = exact(functions, pattern);
    if !exact.is_empty() || !is_pattern(pattern) {
        return exact;
    }
    let pieces = compile(pattern);
    functions.iter().filter(|f| matches(&pieces, &f.name)).collect()
}

#[cfg(test)]
fn exact<'f>(functions: &'f [Function], name: &str) -> Vec<&'f Function> {
    let start = functions.partition_point(|f| f.name.as_str() < name);
    functions[start..].iter().take_while(|f| f.name == name).collect()
}

/// The package path of a Go symbol: `net/http` for `net/http.(*conn).serve`.
pub(crate) fn package_of(name: &str) -> &str {
    // Type arguments and receivers may hold other paths; a package path holds no `[` `(`.
    let head = &name[..name.find(['[', '(']).unwrap_or(name.len())];
    let slash = head.rfind('/').map(|i| i + 1).unwrap_or(0);
    match name[slash..].find('.') {
        Some(dot) => &name[..slash + dot],
        None => name,
    }
}

/// Up to `n` function names closest to `name`: names of the same package first (a typo is
/// more often in the function than in the package), then any, then functions of another
/// package with a close name (`http.Get` for `nosuch.Get`).
pub(crate) fn closest<'f>(functions: &[&'f Function], name: &str, n: usize) -> Vec<&'f str> {
    let package = package_of(name);
    let prefix = format!("{package}.");
    let same_package = functions.iter().copied().map(|f| f.name.as_str()).filter(|f| f.starts_with(&prefix));
    let mut found = crate::diag::closest(name, same_package, n);
    if found.len() < n {
        let rest = functions.iter().copied().map(|f| f.name.as_str()).filter(|f| !f.starts_with(&prefix));
        let mut names: Vec<&str> = rest.collect();
        names.dedup();
        for c in crate::diag::closest(name, names, n - found.len()) {
            found.push(c);
        }
    }
    let short = &name[package_of(name).len()..];
    // `.Name` of another package; a name without a package has no such part.
    if found.len() < n && short.len() > 1 {
        let shorts = functions.iter().copied().map(|f| &f.name[package_of(&f.name).len()..]);
        for c in crate::diag::closest(short, shorts, n) {
            for f in functions
                .iter()
                .copied()
                .filter(|f| f.name.ends_with(c) && f.name.len() - c.len() == package_of(&f.name).len())
            {
                if found.len() < n && !found.contains(&f.name.as_str()) {
                    found.push(&f.name);
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn funcs(names: &[&str]) -> Vec<Function> {
        let mut v: Vec<Function> = names
            .iter()
            .enumerate()
            .map(|(i, n)| Function { name: (*n).into(), addr: i as u64, size: 1, abi: crate::gobin::Abi::Internal })
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    fn names(fs: Vec<&Function>) -> Vec<&str> {
        fs.into_iter().map(|f| f.name.as_str()).collect()
    }

    const ALL: &[&str] = &[
        "main.main",
        "main.(*T).Add",
        "main.T.Get",
        "main.Sum[go.shape.int]",
        "main.Sum[go.shape.float64]",
        "main.Map[go.shape.string,map[string]int]",
        "net/http.(*Client).Do",
        "net/http.(*Client).do",
        "net/http.(*conn).serve",
    ];

    #[test]
    fn exact_name_with_star_is_literal() {
        let f = funcs(ALL);
        assert_eq!(names(find(&f, "main.(*T).Add")), vec!["main.(*T).Add"]);
    }

    #[test]
    fn star_matches_slashes_dots_and_parens() {
        let f = funcs(ALL);
        assert_eq!(names(find(&f, "net/http.(*Client).*")), vec!["net/http.(*Client).Do", "net/http.(*Client).do"]);
        assert_eq!(names(find(&f, "net/*serve")), vec!["net/http.(*conn).serve"]);
        assert_eq!(find(&f, "*").len(), ALL.len());
        assert_eq!(names(find(&f, "main.*.Add")), vec!["main.(*T).Add"]);
    }

    #[test]
    fn pointer_receiver_star_is_not_a_wildcard() {
        let f = funcs(&["main.(*T).Add", "main.(xT).Add"]);
        assert_eq!(names(find(&f, "main.(*T).A*")), vec!["main.(*T).Add"]);
    }

    #[test]
    fn type_args_match_any_instantiation() {
        let f = funcs(ALL);
        assert_eq!(names(find(&f, "main.Sum[...]")), vec!["main.Sum[go.shape.float64]", "main.Sum[go.shape.int]"]);
        assert_eq!(names(find(&f, "main.Map[...]")), vec!["main.Map[go.shape.string,map[string]int]"]);
    }

    #[test]
    fn no_match_is_empty() {
        let f = funcs(ALL);
        assert!(find(&f, "main.nope").is_empty());
        assert!(find(&f, "nope.*").is_empty());
    }

    /// The matcher as first written: plain backtracking, exponential in the number of
    /// `*`, kept as the reference the linear one must agree with.
    fn reference(pieces: &[Piece], name: &str) -> bool {
        match pieces.split_first() {
            None => name.is_empty(),
            Some((Piece::Lit(l), rest)) => name.strip_prefix(l.as_str()).is_some_and(|t| reference(rest, t)),
            Some((Piece::Any, rest)) => {
                name.char_indices().map(|(i, _)| i).chain([name.len()]).any(|i| reference(rest, &name[i..]))
            }
            Some((Piece::TypeArgs, rest)) => {
                type_args_end(name.as_bytes(), 0).is_some_and(|end| reference(rest, &name[end..]))
            }
        }
    }

    #[test]
    fn agrees_with_backtracking_on_every_small_case() {
        // Every pattern and name over a small alphabet, up to a length that covers
        // overlapping literals, several stars and nested brackets.
        fn all(alphabet: &[&str], max: usize) -> Vec<String> {
            let mut out = vec![String::new()];
            let mut layer = vec![String::new()];
            for _ in 0..max {
                layer = layer.iter().flat_map(|s| alphabet.iter().map(move |a| format!("{s}{a}"))).collect();
                out.extend(layer.iter().cloned());
            }
            out
        }
        let patterns = all(&["a", "b", "*", "[...]", "]"], 4);
        let names = all(&["a", "b", "[", "]"], 6);
        let mut checked = 0;
        for p in &patterns {
            let pieces = compile(p);
            for n in &names {
                assert_eq!(matches(&pieces, n), reference(&pieces, n), "pattern {p:?} name {n:?}");
                checked += 1;
            }
        }
        assert_eq!(checked, patterns.len() * names.len());
    }

    #[test]
    fn semantics_of_stars_and_type_args() {
        let m = |p: &str, n: &str| Matcher::new(p).matches(n);
        assert!(m("*", ""));
        assert!(m("main.*", "main."));
        assert!(m("*.F", "a.b.F"));
        assert!(!m("*.F", "a.b.Fx"));
        assert!(m("*ab*b", "abb"));
        assert!(!m("*ab*b", "ab"));
        assert!(m("a*a", "aa"));
        assert!(!m("a*a", "a"));
        assert!(m("*[...]x", "f[a[b]c]x"));
        assert!(m("f[...]*]x", "f[a[b]c]]x"));
        assert!(!m("f[...]", "f[a[b]c"));
        assert!(m("π.*", "π.ü"));
    }

    #[test]
    fn many_stars_on_a_long_name_that_does_not_match() {
        // Plain backtracking tries every way to split 2,000 `a`s among 12 stars (about
        // 10^32): it would not finish. The matcher answers at once.
        let pattern = Matcher::new("*a*a*a*a*a*a*a*a*a*a*a*a*b");
        let name = "a".repeat(2_000);
        assert!(!pattern.matches(&name));
        assert!(pattern.matches(&format!("{name}b")));
    }

    #[test]
    fn package_paths() {
        assert_eq!(package_of("net/http.(*conn).serve"), "net/http");
        assert_eq!(package_of("main.main"), "main");
        assert_eq!(package_of("example.com/x/pkg.F"), "example.com/x/pkg");
        assert_eq!(package_of("main.Sum[go.shape.*net/url.URL]"), "main");
    }

    #[test]
    fn closest_prefers_same_package() {
        let f = funcs(&["main.doWork", "work.doWork", "main.doWorkers"]);
        assert_eq!(closest(&f.iter().collect::<Vec<_>>(), "main.doWrk", 2), vec!["main.doWork", "main.doWorkers"]);
        assert_eq!(
            closest(&f.iter().collect::<Vec<_>>(), "main.doWrk", 3),
            vec!["main.doWork", "main.doWorkers", "work.doWork"]
        );
        let other = closest(&f.iter().collect::<Vec<_>>(), "averyunlikelypackagename.doWork", 2);
        assert_eq!(other.len(), 2, "{other:?}");
        assert!(other.iter().all(|n| n.ends_with(".doWork")), "{other:?}");
        // A name without a package is not `.` plus nothing: no match for every dotless name.
        let f = funcs(&["_rt0_amd64", "aeshashbody", "main.main"]);
        assert!(
            closest(&f.iter().collect::<Vec<_>>(), "zzqqxx", 3).is_empty(),
            "{:?}",
            closest(&f.iter().collect::<Vec<_>>(), "zzqqxx", 3)
        );
    }
}
