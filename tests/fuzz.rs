//! A deterministic fuzz test of the whole front end and compiler, in-process
//! (`gtrace::compile::compile`, what `--check` runs): every stdlib library, example and
//! script of the tests, mutated by byte flips, token deletions and duplications, and
//! splices of two scripts, compiled against real Go test binaries. For every case: no
//! panic, no hang (each case has a bound a hang exceeds by far), and every failure a
//! diagnostic whose place is inside the text it points into, that renders.
//!
//! Fixed seeds: a failure prints the case's text and seed, and reproduces. The number of
//! cases keeps the test to about a minute; GTRACE_FUZZ_CASES=N runs N mutants, from seed
//! GTRACE_FUZZ_SEED (0).
//! Cases the fuzzer once broke are kept in `REGRESSIONS`.

mod support;

use gtrace::compile::{self, Options};
use gtrace::diag::Report;
use gtrace::gobin::Target;
use gtrace::library::Root;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use support::rng::Rng;

/// Far more than one compile takes (the slowest, a did-you-mean search over the net/http
/// server's 6,000 functions, takes seconds in a debug build on a loaded machine); a hang
/// exceeds it.
const CASE_BOUND: Duration = Duration::from_secs(120);

/// Cases that once broke gtrace, kept as regressions.
const REGRESSIONS: &[&str] = &[];

/// Every script the project ships or tests: stdlib, examples, and the scripts written in
/// the tests' sources (string literals that start with `on ` or `use `).
fn corpus() -> Vec<String> {
    let root = support::root();
    let mut scripts: Vec<String> =
        gtrace::library::stdlib::LIBRARIES.iter().map(|(_, text)| text.to_string()).collect();
    for dir in ["examples/worker"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "gt") {
                scripts.push(std::fs::read_to_string(path).unwrap());
            }
        }
    }
    let mut sources: Vec<_> = std::fs::read_dir(root.join("tests")).unwrap().map(|e| e.unwrap().path()).collect();
    sources.sort();
    for path in sources.into_iter().filter(|p| p.extension().is_some_and(|e| e == "rs")) {
        scripts.extend(literal_scripts(&std::fs::read_to_string(path).unwrap()));
    }
    scripts.sort();
    scripts.dedup();
    scripts
}

/// The string literals of Rust source that read like scripts: `"on ...` and `r#"on ...`.
fn literal_scripts(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = source;
    while let Some(i) = rest.find('"') {
        let raw = rest[..i].ends_with("r#");
        let body = &rest[i + 1..];
        let (text, len) = if raw {
            match body.find("\"#") {
                Some(end) => (body[..end].to_string(), end + 2),
                None => break,
            }
        } else {
            let mut text = String::new();
            let mut chars = body.char_indices();
            let mut end = body.len();
            while let Some((j, c)) = chars.next() {
                match c {
                    '\\' => match chars.next().map(|(_, c)| c) {
                        Some('n') => text.push('\n'),
                        Some('t') => text.push('\t'),
                        Some(c) => text.push(c),
                        None => {}
                    },
                    '"' => {
                        end = j + 1;
                        break;
                    }
                    c => text.push(c),
                }
            }
            (text, end)
        };
        if (text.starts_with("on ") || text.starts_with("use ")) && !text.contains("{}") {
            out.push(text);
        }
        rest = &body[len.min(body.len())..];
    }
    out
}

/// Bytes that matter to the grammar, and some that do not belong in a script at all.
const INTERESTING: &[&str] = &[
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    "<",
    ">",
    "\"",
    "\\",
    "@",
    "$",
    ".",
    ",",
    ";",
    ":",
    "=",
    ":=",
    "+",
    "-",
    "*",
    "/",
    "%",
    "&",
    "|",
    "^",
    "!",
    "~",
    "#",
    "\n",
    "0",
    "9",
    "0x",
    "_",
    "a",
    "é",
    "🙂",
    "\0",
    "ms",
    "s",
    "self.",
    "on ",
    "return",
    "entry",
    "begin",
    "if ",
    "else",
    "fn ",
    "use \"",
    "param ",
    "count()",
    "hist(",
    "lhist(",
    "printf(\"%s %d %q\"",
    "ustack",
    "elapsed",
    "args",
    "99999999999999999999",
    "-",
    "<<",
    ">>",
    "len(",
    "hasPrefix(",
    "\"main.*\"",
    "exit()",
    "print(@",
    "clear(@",
    "delete(@",
];

/// The tokens of a script, roughly: runs of identifier characters, runs of spaces, and
/// single other characters (enough to delete or repeat whole words and operators).
fn tokens(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let class = |c: char| {
        if c.is_alphanumeric() || c == '_' {
            0
        } else if c.is_whitespace() {
            1
        } else {
            2
        }
    };
    let mut prev: Option<u8> = None;
    for (i, c) in text.char_indices() {
        let k = class(c);
        if prev.is_some_and(|p| p != k || k == 2) {
            out.push(&text[start..i]);
            start = i;
        }
        prev = Some(k);
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// One mutant of `scripts[i]`, and how it was made.
fn mutate(rng: &mut Rng, scripts: &[String], i: usize) -> (Vec<u8>, &'static str) {
    let text = &scripts[i];
    match rng.below(6) {
        0 => {
            // Flip a few bytes to arbitrary values.
            let mut bytes = text.as_bytes().to_vec();
            for _ in 0..1 + rng.below(3) {
                if !bytes.is_empty() {
                    let at = rng.below(bytes.len());
                    bytes[at] = rng.next() as u8;
                }
            }
            (bytes, "byte flips")
        }
        1 => {
            // Insert an interesting piece somewhere.
            let toks = tokens(text);
            let at = rng.below(toks.len() + 1);
            let piece = INTERESTING[rng.below(INTERESTING.len())];
            let mut out: Vec<&str> = toks[..at].to_vec();
            out.push(piece);
            out.extend(&toks[at..]);
            (out.concat().into_bytes(), "insertion")
        }
        2 => {
            // Delete a token.
            let mut toks = tokens(text);
            if !toks.is_empty() {
                toks.remove(rng.below(toks.len()));
            }
            (toks.concat().into_bytes(), "token deletion")
        }
        3 => {
            // Repeat a run of tokens.
            let toks = tokens(text);
            let at = rng.below(toks.len());
            let len = 1 + rng.below(4);
            let run = &toks[at..(at + len).min(toks.len())];
            let mut out: Vec<&str> = toks[..at].to_vec();
            for _ in 0..1 + rng.below(3) {
                out.extend(run);
            }
            out.extend(&toks[at..]);
            (out.concat().into_bytes(), "token duplication")
        }
        4 => {
            // A word swapped for a word of another script: the text stays well formed
            // more often, so the mutant reaches the checker and the lowering.
            let mut toks = tokens(text);
            let other = tokens(&scripts[rng.below(scripts.len())]);
            let word = |t: &&str| t.chars().next().is_some_and(|c| c.is_alphanumeric() || c == '_');
            let words: Vec<usize> = (0..toks.len()).filter(|i| word(&toks[*i])).collect();
            let theirs: Vec<&str> = other.iter().copied().filter(word).collect();
            if !words.is_empty() && !theirs.is_empty() {
                toks[words[rng.below(words.len())]] = theirs[rng.below(theirs.len())];
            }
            (toks.concat().into_bytes(), "word swap")
        }
        _ => {
            // The head of one script on the tail of another.
            let other = &scripts[rng.below(scripts.len())];
            let a = tokens(text);
            let b = tokens(other);
            let cut_a = rng.below(a.len() + 1);
            let cut_b = rng.below(b.len() + 1);
            let mut out: Vec<&str> = a[..cut_a].to_vec();
            out.extend(&b[cut_b..]);
            (out.concat().into_bytes(), "splice")
        }
    }
}

/// What one case came to.
enum Outcome {
    Compiled,
    Failed(Report),
}

/// Compiles `text` against `target` as `--check` would, on the way `-e` text goes
/// (invalid UTF-8 is a diagnostic too).
fn compile_case(text: &[u8], target: &Target) -> Outcome {
    let mut sources = gtrace::diag::Sources::default();
    let text = match gtrace::input::script_text(&mut sources, "<-e>", text.to_vec()) {
        Ok(t) => t,
        Err(d) => return Outcome::Failed(Report { sources, diagnostics: vec![d] }),
    };
    let root = Root { name: "<-e>".into(), text, dir: None };
    match compile::compile(root, target, &Options::default()) {
        Ok(_) => Outcome::Compiled,
        Err(report) => Outcome::Failed(report),
    }
}

/// Every diagnostic of a failed compile points inside its file, and the report renders.
fn check_report(report: &Report) -> Result<(), String> {
    if !report.has_errors() {
        return Err("a failed compile without an error".into());
    }
    for d in &report.diagnostics {
        let text = report.sources.text(d.span.file);
        let (start, end) = (d.span.start as usize, d.span.end as usize);
        if start > end || end > text.len() || !text.is_char_boundary(start) || !text.is_char_boundary(end) {
            return Err(format!("span {start}..{end} outside its file of {} bytes: {}", text.len(), d.message));
        }
        if d.message.trim().is_empty() {
            return Err("an empty message".into());
        }
    }
    let rendered = report.render(false);
    if !rendered.contains("error") {
        return Err(format!("the report renders without an error: {rendered}"));
    }
    Ok(())
}

/// What a case came to: compiled, failed cleanly, or why it is a bug.
type Verdict = Result<bool, String>;

/// A thread that owns the targets and compiles the cases it is sent, each under
/// `catch_unwind`; the test waits for each answer at most `CASE_BOUND`.
struct Worker {
    cases: mpsc::Sender<(Vec<u8>, usize)>,
    verdicts: mpsc::Receiver<Verdict>,
}

impl Worker {
    fn start(binaries: Vec<PathBuf>) -> Worker {
        let (cases, case_rx) = mpsc::channel::<(Vec<u8>, usize)>();
        let (verdict_tx, verdicts) = mpsc::channel();
        std::thread::spawn(move || {
            let targets: Vec<Target> =
                binaries.iter().map(|b| Target::open(b).unwrap_or_else(|e| panic!("{}: {e}", b.display()))).collect();
            for (text, t) in case_rx {
                let outcome =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| compile_case(&text, &targets[t])));
                let verdict = match outcome {
                    Ok(Outcome::Compiled) => Ok(true),
                    Ok(Outcome::Failed(report)) => check_report(&report).map(|_| false),
                    Err(_) => Err("gtrace panicked".to_string()),
                };
                if verdict_tx.send(verdict).is_err() {
                    return;
                }
            }
        });
        Worker { cases, verdicts }
    }

    /// Compiles `text` against target `t`; true when it compiled. Panics, naming the
    /// case, on a bug: a panic, a hang, a bad diagnostic.
    fn run(&self, text: Vec<u8>, t: usize, what: &str) -> bool {
        let shown = String::from_utf8_lossy(&text).into_owned();
        self.cases.send((text, t)).expect("the worker is gone");
        match self.verdicts.recv_timeout(CASE_BOUND) {
            Ok(Ok(compiled)) => compiled,
            Ok(Err(why)) => panic!("{what}: {why}\n--- case ---\n{shown}\n---"),
            Err(_) => panic!("{what}: no answer after {CASE_BOUND:?} (a hang)\n--- case ---\n{shown}\n---"),
        }
    }
}

#[test]
fn mutated_scripts_never_panic_or_hang() {
    // Quiet panics: a caught panic is reported by the test, with its case.
    std::panic::set_hook(Box::new(|info| eprintln!("panic: {info}")));
    let scripts = corpus();
    assert!(scripts.len() > 100, "only {} scripts found", scripts.len());
    // The test programs the scripts were written for: values, e2e, and net/http.
    let binaries =
        vec![support::go_build("values", &[]), support::go_build("e2e", &[]), support::go_build("httpserver", &[])];
    let targets = binaries.len();
    let worker = Worker::start(binaries);
    let env = |name: &str| std::env::var(name).ok().and_then(|n| n.parse().ok());
    let cases: u64 = env("GTRACE_FUZZ_CASES").unwrap_or(2_000);
    let first: u64 = env("GTRACE_FUZZ_SEED").unwrap_or(0);
    let start = Instant::now();
    let mut compiled = 0;
    for text in REGRESSIONS {
        for t in 0..targets {
            worker.run(text.as_bytes().to_vec(), t, "regression");
        }
    }
    // Every script unchanged first, against each program until one compiles it: its
    // mutants go to that program, so that they reach the checker and the lowering. A
    // wildcard over the whole binary goes to the small e2e program only (the net/http
    // server has 18,000 inlined sites: seconds a case in a debug build).
    let mut home = Vec::new();
    let mut homed = 0;
    for (i, s) in scripts.iter().enumerate() {
        let whole_binary = s.contains("\"*") || s.contains("\"runtime.*");
        let candidates: Vec<usize> = if whole_binary { vec![1] } else { (0..targets).collect() };
        let found = candidates.iter().copied().find(|t| worker.run(s.as_bytes().to_vec(), *t, &format!("script {i}")));
        homed += usize::from(found.is_some());
        home.push((found.unwrap_or(candidates[i % candidates.len()]), whole_binary));
    }
    for seed in first..first + cases {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ seed.wrapping_mul(0x1000_0000_01b3));
        let i = rng.below(scripts.len());
        let (text, how) = mutate(&mut rng, &scripts, i);
        let (t, whole_binary) = home[i];
        // A splice may bring a whole-binary wildcard in: keep those to the small program.
        let t = if whole_binary || String::from_utf8_lossy(&text).contains("\"*") { 1 } else { t };
        if worker.run(text, t, &format!("seed {seed} ({how} of script {i})")) {
            compiled += 1;
        }
    }
    eprintln!(
        "fuzz: {} scripts ({homed} homed), {cases} mutants ({compiled} compiled, the rest failed cleanly) in {:.1?}",
        scripts.len(),
        start.elapsed()
    );
}
