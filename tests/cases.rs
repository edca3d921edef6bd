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
use support::{gtrace, map_value, privileged, truth, Run};

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

/// Builds the case's program, traces it, and checks every expectation.
fn run(case: &Case) -> Result<(), Failed> {
    if !privileged(&case.name) {
        return Ok(());
    }
    let flags: Vec<&str> = case.build.iter().map(String::as_str).collect();
    let program = support::go_build(&case.program, &flags);
    let mut command = program.display().to_string();
    for a in &case.program_args {
        command.push(' ');
        command.push_str(a);
    }
    let mut args: Vec<&str> = case.args.iter().map(String::as_str).collect();
    args.extend(["-e", &case.script, "-c", &command]);
    let r = gtrace(&args);
    if r.code != 0 {
        return Err(format!("gtrace exited {}:\nstdout:\n{}\nstderr:\n{}", r.code, r.stdout, r.stderr).into());
    }
    for expect in &case.expects {
        check(expect, &r).map_err(|e| format!("{e}\nstdout:\n{}\nstderr:\n{}", r.stdout, r.stderr))?;
    }
    Ok(())
}

/// One expectation against one run.
fn check(expect: &Expect, r: &Run) -> Result<(), String> {
    match expect {
        Expect::Compare { measure, want, line } => {
            let got = measured(measure, r);
            let wanted = match want {
                Want::Number(n) => *n,
                Want::Truth(key) => truth(&r.stdout, key),
            };
            if got == wanted {
                Ok(())
            } else {
                Err(format!("line {line}: {measure} is {got}, the program says {want} = {wanted}"))
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
        Expect::LinesAfter { prefix, lines, line } => {
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
    }
}
