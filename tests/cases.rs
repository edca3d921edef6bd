//! The declarative end-to-end cases: each file under tests/cases/ holds cases that run
//! one gtrace script on one Go test program under tests/go/ and compare what gtrace
//! printed with what the program printed about itself (its `key=value` truth). A case is
//! data, not code: a new one is a few lines, and every case is built, traced, checked
//! for privileges and read the same way. Each case is one test (`cargo test --test
//! cases NAME`). The format is in tests/cases/README.md. Needs root for tracing (SKIP
//! without it, unless CI=true: then it fails).

mod support;

#[path = "cases/parse.rs"]
mod parse;

use libtest_mimic::{Arguments, Failed, Trial};
use parse::{Case, Expect, Measure, Want};
use std::path::PathBuf;
use support::toolchain::{build_plain, toolchains};
use support::{gtrace, map_value, privileged, sorted_lines, truth, Run};

fn main() {
    let args = Arguments::from_args();
    let dir = support::root().join("tests/cases");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/cases")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "cases"))
        .collect();
    files.sort();
    let mut trials = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read a cases file");
        let cases = parse::cases(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        trials.extend(cases.into_iter().map(|case| Trial::test(case.name.clone(), move || run(&case))));
    }
    libtest_mimic::run(&args, trials).exit();
}

/// Builds the case's program (once per toolchain with `toolchains`), traces it, and
/// checks every expectation.
fn run(case: &Case) -> Result<(), Failed> {
    if !privileged(&case.name) {
        return Ok(());
    }
    let script = with_lines(&case.script, &case.program)?;
    for (toolchain, program) in programs(case) {
        let at = if toolchain.is_empty() { String::new() } else { format!("{toolchain}: ") };
        let mut command = program.display().to_string();
        for a in &case.program_args {
            command.push(' ');
            command.push_str(a);
        }
        let mut args: Vec<&str> = case.args.iter().map(String::as_str).collect();
        args.extend(["-e", &script, "-c", &command]);
        let r = gtrace(&args);
        if r.code != 0 {
            return Err(format!("{at}gtrace exited {}:\nstdout:\n{}\nstderr:\n{}", r.code, r.stdout, r.stderr).into());
        }
        for expect in &case.expects {
            check(expect, &r).map_err(|e| format!("{at}{e}\nstdout:\n{}\nstderr:\n{}", r.stdout, r.stderr))?;
        }
    }
    Ok(())
}

/// The case's program, built once per `build` line, each named by its flags (no `build`:
/// once, as it is), or with `toolchains` as a plain executable by each toolchain that can
/// be fetched (one that cannot is said, and fails on CI), each named by its toolchain.
fn programs(case: &Case) -> Vec<(String, PathBuf)> {
    if case.toolchains {
        return toolchains().into_iter().filter_map(|t| build_plain(&case.program, &t).map(|bin| (t, bin))).collect();
    }
    if case.builds.is_empty() {
        return vec![(String::new(), support::go_build(&case.program, &[]))];
    }
    let build = |flags: &Vec<String>| {
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        (format!("go build {flags:?}"), support::go_build(&case.program, &flags))
    };
    case.builds.iter().map(build).collect()
}

/// The script with each `{line NAME}` replaced by the number of the line of
/// tests/go/PROGRAM/main.go marked `// L:NAME`.
fn with_lines(script: &str, program: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = script;
    while let Some(at) = rest.find("{line ") {
        out.push_str(&rest[..at]);
        let (name, after) =
            rest[at + 6..].split_once('}').ok_or(format!("`{{line NAME}}` is not closed in {script}"))?;
        out.push_str(&support::marked_line(program, name).to_string());
        rest = after;
    }
    out.push_str(rest);
    Ok(out)
}

/// One expectation against one run.
fn check(expect: &Expect, r: &Run) -> Result<(), String> {
    match expect {
        Expect::Compare { measure, op, want, line } => {
            let got = measured(measure, r);
            let wanted = wanted(want, r);
            if op.holds(got, wanted) {
                Ok(())
            } else {
                Err(format!("line {line}: {measure} is {got}, not {op} {want} = {wanted}"))
            }
        }
        Expect::Printed { text, line } => match r.stdout.lines().any(|l| l == text) {
            true => Ok(()),
            false => Err(format!("line {line}: no line `{text}` printed")),
        },
        Expect::Contains { text, line } => match r.stdout.contains(text.as_str()) {
            true => Ok(()),
            false => Err(format!("line {line}: `{text}` not printed")),
        },
        Expect::Lacks { text, line } => match r.stdout.contains(text.as_str()) {
            false => Ok(()),
            true => Err(format!("line {line}: `{text}` was printed")),
        },
        Expect::Said { text, line } => match r.stderr.contains(text.as_str()) {
            true => Ok(()),
            false => Err(format!("line {line}: `{text}` not said on stderr")),
        },
        Expect::Quiet { text, line } => match r.stderr.contains(text.as_str()) {
            false => Ok(()),
            true => Err(format!("line {line}: `{text}` said on stderr")),
        },
        Expect::Same { ours, theirs, line } => {
            let (got, want) = (sorted_lines(&r.stdout, ours), sorted_lines(&r.stdout, theirs));
            match (got == want, want.is_empty()) {
                (true, false) => Ok(()),
                (_, true) => Err(format!("line {line}: no line starts with `{theirs}`")),
                (false, _) => {
                    Err(format!("line {line}: the `{ours}` lines {got:#?} are not the `{theirs}` lines {want:#?}"))
                }
            }
        }
        Expect::LinesAfter { prefix, lines, line } => {
            if !r.stdout.lines().any(|l| l.starts_with(prefix.as_str())) {
                return Err(format!("line {line}: no line starts with `{prefix}`"));
            }
            let got: Vec<&str> = r.stdout.lines().skip_while(|l| !l.starts_with(prefix.as_str())).skip(1).collect();
            match got == *lines {
                true => Ok(()),
                false => Err(format!("line {line}: the lines after `{prefix}` are {got:?}, not {lines:?}")),
            }
        }
    }
}

/// The number a measure reads from gtrace's output.
fn measured(measure: &Measure, r: &Run) -> i64 {
    match measure {
        Measure::Map(name) => map_value(&r.stdout, name),
        Measure::Lines(text) => r.stdout.lines().filter(|l| l == text).count() as i64,
        Measure::Starting(text) => r.stdout.lines().filter(|l| l.starts_with(text.as_str())).count() as i64,
        Measure::Truth(key) => truth(&r.stdout, key),
    }
}

/// The number a want names, from the program's truth.
fn wanted(want: &Want, r: &Run) -> i64 {
    let term = |t: &parse::Term| t.factor * t.truth.as_ref().map_or(1, |key| truth(&r.stdout, key));
    want.0.iter().map(term).sum()
}
