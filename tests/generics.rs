//! Generic code by instantiation, against tests/go/generics' own counts: `func` at a
//! shape function names the instantiation the call's dictionary makes (`main.Sum[int]`
//! and `main.Sum[main.MyInt]` share `main.Sum[go.shape.int]` and are counted apart), at
//! entries and at returns (the dictionary carried from the entry), in a plain executable
//! and a PIE, on the local toolchain, the newest release and Go 1.18. Go 1.17 (the oldest
//! release gtrace supports) has no generics: tests/go/generics cannot be built with it,
//! so each test says so and runs on Go 1.18, the first release that has them. A stripped build names the shapes
//! (said once, counts summed per shape); `-l` lists each shape's instantiations; a probe
//! that names an instantiation fires for its calls only (an error with a hint where that
//! cannot be: stripped, `on panic`, an instantiation the binary does not have). Needs root for the traces (SKIP
//! without it, unless CI=true: then it fails).

mod support;

use support::toolchain::{build, toolchains, Kind, NotBuilt, OLDEST, PLAIN};
use support::{check_against, gtrace, map_value, privileged, truth};

/// The program's own counts: (instantiation, calls).
fn truths(stdout: &str) -> Vec<(String, i64)> {
    let out: Vec<(String, i64)> = (stdout.lines())
        .filter_map(|l| l.strip_prefix("truth "))
        .filter_map(|l| l.rsplit_once('='))
        .map(|(name, n)| (name.to_string(), n.parse().expect("a count")))
        .collect();
    assert!(out.len() >= 7, "the program printed too little truth:\n{stdout}");
    out
}

const PATTERNS: &str = r#""main.Sum[...]", "main.(*Stack[...]).Push", "main.MakePair[...]""#;

/// The first release with generics, tested in place of the oldest one gtrace supports:
/// it names shapes `go.shape.int_0`, passes a method's dictionary before its receiver,
/// makes a dictionary per method, and its function table writes shapes `[...]`.
const FIRST_GENERIC: &str = "go1.18.10";

/// The toolchains that have generics: the oldest one gtrace supports (Go 1.17) has none,
/// so the first release that has them is tested in its place, said.
fn generic_toolchains(test: &str) -> Vec<String> {
    let mut out = Vec::new();
    for toolchain in toolchains() {
        if toolchain == OLDEST {
            // Not a skip of something that could run: Go 1.17 has no generics, so there
            // is no generic code to trace (tests/go/generics does not build with it).
            eprintln!("{test}: {toolchain} has no generics (they came in Go 1.18): {FIRST_GENERIC} instead");
            out.push(FIRST_GENERIC.to_string());
            continue;
        }
        out.push(toolchain);
    }
    out
}

fn built(toolchain: &str, kind: Kind) -> Option<std::path::PathBuf> {
    match build("generics", toolchain, kind) {
        Ok(b) => Some(b),
        Err(NotBuilt::NoToolchain(e)) => {
            support::toolchain::no_toolchain(toolchain, &e);
            None
        }
    }
}

/// Traces `bin` with `func` at every entry and return of the generic code, and checks
/// each instantiation's counts against the program's own.
fn assert_func_per_instantiation(at: &str, bin: &std::path::Path) {
    let script = format!("on entry {PATTERNS} {{ @[func] = count() }} on return {PATTERNS} {{ @r[func] = count() }}");
    let run = gtrace(&["-e", &script, "-c", &format!("{} 6", bin.display())]);
    assert_eq!(run.code, 0, "{at}:\n{}\n{}", run.stdout, run.stderr);
    let truths = truths(&run.stdout);
    for (name, calls) in &truths {
        assert_eq!(map_value(&run.stdout, &format!("@[{name}]")), *calls, "{at}: {name}\n{}", run.stdout);
        assert_eq!(map_value(&run.stdout, &format!("@r[{name}]")), *calls, "{at}: {name}\n{}", run.stdout);
    }
    // Nothing else: no shape names, no unknown dictionaries.
    let keys = run.stdout.lines().filter(|l| l.starts_with("@[") || l.starts_with("@r[")).count();
    assert_eq!(keys, 2 * truths.len(), "{at}:\n{}", run.stdout);
}

#[test]
fn func_names_each_instantiation_at_entries_and_returns() {
    if !privileged("func_names_each_instantiation_at_entries_and_returns") {
        return;
    }
    for toolchain in generic_toolchains("func_names_each_instantiation_at_entries_and_returns") {
        for kind in [PLAIN, Kind { pie: true, ..PLAIN }] {
            let Some(bin) = built(&toolchain, kind) else { continue };
            assert_func_per_instantiation(&format!("{toolchain} {}", kind.label()), &bin);
        }
    }
}

/// With a symbol table but no DWARF (`-ldflags=-w`), the dictionary is where the ABI
/// puts it: the first register, the second after a pointer receiver.
#[test]
fn without_dwarf_the_dictionary_is_where_the_abi_puts_it() {
    if !privileged("without_dwarf_the_dictionary_is_where_the_abi_puts_it") {
        return;
    }
    let bin = support::go_build("generics", &["-ldflags=-w"]);
    assert!(!gtrace::gobin::Target::open(&bin).unwrap().has_dwarf());
    assert_func_per_instantiation("local, -ldflags=-w", &bin);
}

/// A probe that names one instantiation fires for its calls only, though the shape
/// function serves others (`*int` in type arguments is a pointer, not a wildcard); with
/// `[...]` in the same probe, each call fires once.
#[test]
fn a_probe_of_one_instantiation_counts_its_calls_only() {
    if !privileged("a_probe_of_one_instantiation_counts_its_calls_only") {
        return;
    }
    let script = r#"on entry "main.Sum[main.MyInt]" { @myint = count() }
        on return "main.Sum[int]" { @int = count(); @slow[elapsed > 1h] = count() }
        on entry "main.(*Stack[*int]).Push", "main.MakePair[string,int]" { @[func] = count() }
        on entry "main.Sum[...]", "main.Sum[string]" { @all = count() }"#;
    for toolchain in generic_toolchains("a_probe_of_one_instantiation_counts_its_calls_only") {
        for kind in [PLAIN, Kind { pie: true, ..PLAIN }] {
            let Some(bin) = built(&toolchain, kind) else { continue };
            let run = gtrace(&["-e", script, "-c", &format!("{} 4", bin.display())]);
            let at = format!("{toolchain} {}", kind.label());
            assert_eq!(run.code, 0, "{at}:\n{}\n{}", run.stdout, run.stderr);
            let t = |name: &str| truth(&run.stdout, name);
            let got = |map: &str| map_value(&run.stdout, map);
            assert_eq!(got("@myint"), t("main.Sum[main.MyInt]"), "{at}:\n{}", run.stdout);
            assert_eq!(got("@int"), t("main.Sum[int]"), "{at}:\n{}", run.stdout);
            assert_eq!(got("@slow[false]"), t("main.Sum[int]"), "{at}:\n{}", run.stdout);
            for name in ["main.(*Stack[*int]).Push", "main.MakePair[string,int]"] {
                assert_eq!(got(&format!("@[{name}]")), t(name), "{at}:\n{}", run.stdout);
            }
            let sums = t("main.Sum[int]") + t("main.Sum[main.MyInt]") + t("main.Sum[string]");
            assert_eq!(got("@all"), sums, "{at}:\n{}", run.stdout);
            let keys = run.stdout.lines().filter(|l| l.starts_with("@[")).count();
            assert_eq!(keys, 2, "{at}: only the named instantiations\n{}", run.stdout);
        }
    }
}

/// A generic function inlined at every call has no function and passes no dictionary:
/// `[...]` probes its inlined copies, and `func` names its shape there, once per call.
#[test]
fn inlined_generic_code_counts_under_its_shape() {
    if !privileged("inlined_generic_code_counts_under_its_shape") {
        return;
    }
    for toolchain in generic_toolchains("inlined_generic_code_counts_under_its_shape") {
        let Some(bin) = built(&toolchain, PLAIN) else { continue };
        let run = gtrace(&[
            "-e",
            r#"on entry "main.Twice[...]" { @[func] = count() }"#,
            "-c",
            &format!("{} 3", bin.display()),
        ]);
        assert_eq!(run.code, 0, "{toolchain}:\n{}\n{}", run.stdout, run.stderr);
        let calls = truth(&run.stdout, "main.Twice[int]") + truth(&run.stdout, "main.Twice[main.MyInt]");
        let keys: Vec<&str> = run.stdout.lines().filter(|l| l.starts_with("@[")).collect();
        // `main.Twice[go.shape.int]` (Go 1.18's inline tree: `main.Twice[...]`).
        assert_eq!(keys.len(), 1, "{toolchain}:\n{}", run.stdout);
        let (key, n) = keys[0].split_once("]]: ").expect("a key");
        assert!(key.starts_with("@[main.Twice[go.shape.int") || key == "@[main.Twice[...", "{toolchain}: {key}");
        assert_eq!(n.trim().parse::<i64>().unwrap(), calls, "{toolchain}:\n{}", run.stdout);
    }
}

/// `elapsed` and a parameter at a return of a shape function, keyed by the instantiation:
/// the dictionary is carried from the entry beside them.
#[test]
fn returns_carry_the_dictionary_with_parameters() {
    if !privileged("returns_carry_the_dictionary_with_parameters") {
        return;
    }
    let script = r#"on return "main.Sum[...]" { @n[func] = count(); @slow[func, elapsed > 1h] = count() }"#;
    for toolchain in generic_toolchains("returns_carry_the_dictionary_with_parameters") {
        let Some(bin) = built(&toolchain, PLAIN) else { continue };
        let run = gtrace(&["-e", script, "-c", &format!("{} 5", bin.display())]);
        assert_eq!(run.code, 0, "{toolchain}:\n{}\n{}", run.stdout, run.stderr);
        for name in ["main.Sum[int]", "main.Sum[main.MyInt]", "main.Sum[string]"] {
            let calls = truth(&run.stdout, name);
            assert_eq!(map_value(&run.stdout, &format!("@n[{name}]")), calls, "{toolchain}:\n{}", run.stdout);
            assert_eq!(map_value(&run.stdout, &format!("@slow[{name}, false]")), calls, "{toolchain}:\n{}", run.stdout);
        }
    }
}

/// Stripped, no symbol table names the dictionaries: `func` names the shape (said once,
/// however many probes), and each shape counts every instantiation it serves.
#[test]
fn a_stripped_build_counts_by_shape_and_says_so_once() {
    let script = r#"on entry "main.Sum[...]" { @[func] = count() } on return "main.Sum[...]" { @r[func] = count() }"#;
    for toolchain in generic_toolchains("a_stripped_build_counts_by_shape_and_says_so_once") {
        let Some(bin) = built(&toolchain, Kind { stripped: true, ..PLAIN }) else { continue };
        let check = check_against(&["-e", script], &bin);
        assert_eq!(check.code, 0, "{toolchain}:\n{}", check.stderr);
        assert_eq!(check.stderr.matches("names shape functions").count(), 1, "{toolchain}:\n{}", check.stderr);
        if !privileged("a_stripped_build_counts_by_shape_and_says_so_once") {
            continue;
        }
        let run = gtrace(&["-e", script, "-c", &format!("{} 7", bin.display())]);
        assert_eq!(run.code, 0, "{toolchain}:\n{}\n{}", run.stdout, run.stderr);
        let ints = truth(&run.stdout, "main.Sum[int]") + truth(&run.stdout, "main.Sum[main.MyInt]");
        let strings = truth(&run.stdout, "main.Sum[string]");
        for map in ["@", "@r"] {
            let got = |shape: &str| map_value(&run.stdout, &format!("{map}[main.Sum[{shape}]]"));
            if run.stdout.contains("[main.Sum[...]]") {
                // Go 1.18's function table names every shape `main.Sum[...]`: one key.
                assert_eq!(got("..."), ints + strings, "{toolchain}:\n{}", run.stdout);
            } else {
                let numbered = if run.stdout.contains("go.shape.int_0") { "_0" } else { "" };
                assert_eq!(got(&format!("go.shape.int{numbered}")), ints, "{toolchain}:\n{}", run.stdout);
                assert_eq!(got(&format!("go.shape.string{numbered}")), strings, "{toolchain}:\n{}", run.stdout);
            }
        }
    }
}

/// `-l` lists, under each shape function, the instantiations the binary has
/// dictionaries for; stripped, it says they cannot be known.
#[test]
fn the_listing_shows_instantiations_under_each_shape() {
    for toolchain in generic_toolchains("the_listing_shows_instantiations_under_each_shape") {
        let Some(bin) = built(&toolchain, PLAIN) else { continue };
        let b = bin.display().to_string();
        let list = gtrace(&["-b", &b, "-l", "main.*"]);
        assert_eq!(list.code, 0, "{toolchain}:\n{}", list.stderr);
        // Go 1.18 and 1.19 number the shapes: `main.Sum[go.shape.int_0]`.
        let under = |shape: &str| -> String {
            let at = |l: &str| l.starts_with(&format!("{shape}(")) || l.starts_with(&format!("{}(", numbered(shape)));
            let mut lines = list.stdout.lines().skip_while(|l| !at(l));
            assert!(lines.next().is_some(), "{toolchain}: no {shape} in\n{}", list.stdout);
            lines.next().unwrap_or_default().trim().to_string()
        };
        assert_eq!(under("main.Sum[go.shape.int]"), "instantiations: main.Sum[int], main.Sum[main.MyInt]");
        assert_eq!(under("main.Sum[go.shape.string]"), "instantiations: main.Sum[string]");
        assert_eq!(under("main.(*Stack[go.shape.int]).Push"), "instantiations: main.(*Stack[int]).Push");
        assert_eq!(under("main.MakePair[go.shape.int,go.shape.string]"), "instantiations: main.MakePair[int,string]");
        let Some(stripped) = built(&toolchain, Kind { stripped: true, ..PLAIN }) else { continue };
        let list = gtrace(&["-b", &stripped.display().to_string(), "-l", "main.Sum[...]"]);
        assert!(list.stdout.contains("instantiations: unknown (stripped"), "{toolchain}:\n{}", list.stdout);
    }
}

/// `shape` as Go 1.18 and 1.19 name it: `main.Sum[go.shape.int_0]`.
fn numbered(shape: &str) -> String {
    let (head, rest) = shape.split_once('[').expect("type arguments");
    let (args, tail) = rest.split_once(']').expect("type arguments");
    let args: Vec<String> = args.split(',').enumerate().map(|(i, a)| format!("{a}_{i}")).collect();
    format!("{head}[{}]{tail}", args.join(","))
}

fn rendered(script: &str, kind: Kind) -> String {
    let bin = built("local", kind).expect("the local toolchain");
    let r = check_against(&["-e", script], &bin);
    r.stderr.replace(bin.to_str().unwrap(), "BIN")
}

#[test]
fn an_instantiation_of_a_stripped_build() {
    insta::assert_snapshot!(rendered(
        r#"on entry "main.Sum[main.MyInt]" { @ = count() }"#,
        Kind { stripped: true, ..PLAIN }
    ));
}

#[test]
fn an_instantiation_in_on_panic() {
    insta::assert_snapshot!(rendered(r#"on panic "main.(*Stack[int]).Push" { @ = count() }"#, PLAIN));
}

#[test]
fn an_instantiation_the_binary_does_not_have() {
    insta::assert_snapshot!(rendered(r#"on return "main.MakePair[int,int]" { @ = count() }"#, PLAIN));
}

#[test]
fn an_instantiation_that_is_only_inlined() {
    insta::assert_snapshot!(rendered(r#"on entry "main.Twice[main.MyInt]" { @ = count() }"#, PLAIN));
}

#[test]
fn func_at_shapes_of_a_stripped_build() {
    let script =
        r#"on entry "main.Sum[...]" { @[func] = count() } on return "main.MakePair[...]" { @[func] = count() }"#;
    insta::assert_snapshot!(rendered(script, Kind { stripped: true, ..PLAIN }));
}

/// The plan holds the dictionaries `func` may meet and names each instantiation from
/// its address, after a JSON round trip (what `gtrace run` reads); the same for arm64,
/// where the dictionary is in R0.
#[test]
fn plans_name_instantiations_from_dictionary_addresses() {
    use gtrace::compile::{compile, Options};
    use gtrace::gobin::Target;
    use gtrace::library::Root;
    use gtrace::plan::Bundle;
    let script = format!("on entry {PATTERNS} {{ @[func] = count() }}");
    for toolchain in generic_toolchains("plans_name_instantiations_from_dictionary_addresses") {
        let mut binaries = vec![("amd64", built(&toolchain, PLAIN))];
        binaries.push(("arm64", support::toolchain::build_arm64("generics", &toolchain, PLAIN)));
        for (arch, bin) in binaries {
            let Some(bin) = bin else { continue };
            let target = Target::open(&bin).unwrap();
            let root = Root { name: "<test>".into(), text: script.clone(), dir: None };
            let c = compile(root, &target, &Options::default()).unwrap_or_else(|r| panic!("{}", r.render(false)));
            let json = Bundle { plan: c.plan.clone(), object: c.object.clone() }.to_json();
            let plan = serde_json::from_str::<Bundle>(&json).expect("the plan reads back").plan;
            let is_int = |f: &String| f == "main.Sum[go.shape.int]" || f == "main.Sum[go.shape.int_0]";
            let shape = plan.functions.iter().position(is_int).expect("the shape") as u64;
            let shape_name = &plan.functions[shape as usize];
            let named: Vec<String> =
                (plan.dictionaries.keys()).map(|addr| plan.function_name(shape | addr << 32)).collect();
            assert!(named.contains(&"main.Sum[main.MyInt]".to_string()), "{toolchain} {arch}: {named:?}");
            assert!(named.contains(&"main.Sum[int]".to_string()), "{toolchain} {arch}: {named:?}");
            assert_eq!(plan.function_name(shape | 0x10 << 32), format!("{shape_name}(dictionary 0x10?)"));
            let list = gtrace(&["-b", &bin.display().to_string(), "-l", "main.Sum[...]"]);
            // `.dict TYPE [REG]`: unsafe.Pointer, or from Go 1.27 the type DWARF gives it.
            let dict = list.stdout.split(".dict ").nth(1).and_then(|r| r.split(',').next()).unwrap_or_default();
            let reg = if arch == "arm64" { "[R0]" } else { "[RAX]" };
            assert!(dict.ends_with(reg), "{toolchain} {arch}:\n{}", list.stdout);
        }
    }
}
