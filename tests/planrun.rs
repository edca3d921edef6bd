//! A plan made where DWARF is and run on a stripped copy of the same build prints what
//! a direct trace prints (issue 20): tests/go/planrun hands values held in interfaces
//! (pointers to structs, structs by value, a named float, `[]any`, an empty `[]any`,
//! `[]error`, ints, strings, errors) to a probed function and prints each with fmt's
//! `%v`. The test builds it once, strips a copy with `strip` (the same build id: `-ldflags
//! -s -w` would make another build), traces the unstripped build directly, writes a plan
//! from it, runs the plan on the stripped copy, and compares both outputs with the
//! program's own lines, value for value. Needs root (SKIP without it, unless CI=true).
//!
//! And the plan is the same, byte for byte, every time the same build and script are
//! compiled, with the cache or without: printing an interface puts the layouts of its
//! possible dynamic types in the plan, numbered as DWARF is read (unprivileged).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use support::{gtrace, privileged, sorted_lines};

const SCRIPT: &str = r#"on entry main.hold { printf("gt held %d %v\n", i, v) }"#;

/// The build and its stripped copy (no symbol table, no DWARF), side by side.
fn builds() -> Option<(PathBuf, PathBuf)> {
    let bin = support::go_build("planrun", &[]);
    let stripped = support::unique_tmp(bin.parent().unwrap(), "planrun-stripped");
    std::fs::copy(&bin, &stripped).expect("copy the build");
    match Command::new("strip").arg(&stripped).status() {
        Ok(s) if s.success() => Some((bin, stripped)),
        _ => {
            support::skip("plan_on_a_stripped_copy_prints_what_a_direct_trace_prints", "`strip` (binutils) is missing");
            None
        }
    }
}

fn sections(bin: &Path) -> String {
    let out = Command::new("readelf").args(["-S", "-n"]).arg(bin).output().expect("readelf");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn plan_on_a_stripped_copy_prints_what_a_direct_trace_prints() {
    if !privileged("plan_on_a_stripped_copy_prints_what_a_direct_trace_prints") {
        return;
    }
    let Some((bin, stripped)) = builds() else { return };
    let kept = sections(&stripped);
    assert!(!kept.contains(".debug_info") && !kept.contains(".symtab"), "not stripped:\n{kept}");
    let id = |s: &str| s.lines().find(|l| l.contains("Build ID")).map(str::to_string);
    assert_eq!(id(&kept), id(&sections(&bin)), "the copy is another build");

    let direct = gtrace(&["-e", SCRIPT, "-c", bin.to_str().unwrap()]);
    assert_eq!(direct.code, 0, "{}", direct.stderr);
    let plan = support::unique_tmp(bin.parent().unwrap(), "planrun-plan");
    let r = gtrace(&["--emit", "plan", "-o", plan.to_str().unwrap(), "-e", SCRIPT, "-b", bin.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let run = gtrace(&["run", plan.to_str().unwrap(), "-c", stripped.to_str().unwrap()]);
    let _ = std::fs::remove_file(&plan);
    let _ = std::fs::remove_file(&stripped);
    assert_eq!(run.code, 0, "{}", run.stderr);

    // The program's truth: every value it handed over, as fmt printed it.
    let truth = sorted_lines(&direct.stdout, "go held ");
    assert_eq!(truth.len() as i64, support::truth(&direct.stdout, "count"), "{}", direct.stdout);
    assert_eq!(sorted_lines(&run.stdout, "go held "), truth, "the stripped copy ran otherwise:\n{}", run.stdout);
    assert_eq!(sorted_lines(&direct.stdout, "gt held "), truth, "direct trace:\n{}\n{}", direct.stdout, direct.stderr);
    assert_eq!(
        sorted_lines(&run.stdout, "gt held "),
        truth,
        "plan on the stripped copy:\n{}\n{}",
        run.stdout,
        run.stderr
    );
    for r in [&direct, &run] {
        assert!(!r.stderr.contains("printed as addresses"), "{}", r.stderr);
    }
}

/// The plan of SCRIPT for `bin` with `XDG_CACHE_HOME=home` and `extra` flags.
fn plan_text(bin: &Path, home: &Path, extra: &[&str]) -> String {
    let plan = support::unique_tmp(bin.parent().unwrap(), "planrun-same");
    let mut args = vec!["--emit", "plan", "-o", plan.to_str().unwrap(), "-e", SCRIPT, "-b", bin.to_str().unwrap()];
    args.extend(extra);
    let r = support::gtrace_env(&args, &[("XDG_CACHE_HOME", home.to_str().unwrap())]);
    assert_eq!(r.code, 0, "gtrace {args:?}:\n{}", r.stderr);
    let text = std::fs::read_to_string(&plan).expect("the plan");
    let _ = std::fs::remove_file(&plan);
    text
}

/// The parts of two plans (the plan's own fields, and the object) that differ.
fn differing(a: &str, b: &str) -> Vec<String> {
    let (a, b): (serde_json::Value, serde_json::Value) =
        (serde_json::from_str(a).unwrap(), serde_json::from_str(b).unwrap());
    let mut out: Vec<String> = (a["plan"].as_object().unwrap().iter())
        .filter(|(k, v)| b["plan"].get(k.as_str()) != Some(*v))
        .map(|(k, _)| format!("plan.{k}"))
        .collect();
    if a["object"] != b["object"] {
        out.push("object".into());
    }
    out
}

#[test]
fn the_same_build_and_script_always_give_the_same_plan() {
    let bin = support::go_build("planrun", &[]);
    let home = support::unique_tmp(bin.parent().unwrap(), "planrun-cache");
    std::fs::create_dir_all(&home).unwrap();
    let first = plan_text(&bin, &home, &["--no-cache"]);
    // The plan holds what makes its order matter: the layouts of the dynamic types the
    // program hands over, by their descriptors.
    let plan: serde_json::Value = serde_json::from_str(&first).unwrap();
    let dynamic = plan["plan"]["dynamic_types"].as_object().expect("dynamic types");
    for name in ["*main.Point", "main.Point", "*main.Pair", "main.Pair", "main.Celsius"] {
        let t = dynamic.values().find(|t| t["name"] == name);
        assert!(t.is_some_and(|t| t["layout"].is_u64()), "no layout of {name} in the plan");
    }
    // None at `runtime.types` itself (offset 0, what DWARF says of the thousand types
    // the linker kept no descriptor of): which of them would claim it changed each run.
    let symbols = Command::new("readelf").arg("-sW").arg(&bin).output().expect("readelf");
    let symbols = String::from_utf8_lossy(&symbols.stdout);
    let base = symbols.lines().find(|l| l.ends_with(" runtime.types")).expect("runtime.types in the symbol table");
    let base = u64::from_str_radix(base.split_whitespace().nth(1).unwrap(), 16).unwrap();
    let at = dynamic.get(&base.to_string());
    assert!(at.is_none(), "a dynamic type at runtime.types: {at:?}");
    let mut runs = vec![("--no-cache", plan_text(&bin, &home, &["--no-cache"]))];
    runs.push(("--no-cache", plan_text(&bin, &home, &["--no-cache"])));
    runs.push(("an empty cache", plan_text(&bin, &home, &[])));
    runs.push(("a warm cache", plan_text(&bin, &home, &[])));
    let _ = std::fs::remove_dir_all(&home);
    for (i, (how, text)) in runs.iter().enumerate() {
        assert!(*text == first, "run {} ({how}) wrote another plan: {:?} differ", i + 2, differing(&first, text));
    }
}
