//! `on line "FILE:LINE"` probes and locals against tests/go/lines' own truth, on the local
//! toolchain, the oldest supported release and the newest: a loop's header, body and the
//! line after it (its header's code sits before, in and after the loop; the line after
//! another loop has a reload inside that loop), a `range` loop, a closure inlined into its
//! caller, a line of a function inlined at two places; locals in registers and in stack
//! slots (whole, and a struct in pieces); the errors for a local optimized away, not yet
//! declared, out of scope, a line without code, files that are not there or not one,
//! stripped binaries. Lines are found by their `// L:name` marks. What a case can say
//! (lines counted, locals summed, on every toolchain) is in tests/cases/lines.cases; here
//! is what needs code: sites and locals read through the library, arm64 checks, a
//! debug file made with objcopy, diagnostics and listings.

mod support;

use gtrace::arch::abi::Location;
use gtrace::gobin::{LocalState, Target, ValueLocation};
use support::toolchain::{build, build_plain, toolchains, Kind, PLAIN};
use support::{gtrace, map_value, privileged, truth};

/// The line of `tests/go/lines/main.go` marked `// L:name`.
fn line(name: &str) -> u32 {
    support::marked_line("lines", name)
}

fn at(name: &str) -> String {
    format!("\"main.go:{}\"", line(name))
}

/// Go's line table gives the line after spillAfter's loop a reload inside the loop: the
/// line's code is in two places, one of which runs once per iteration.
#[test]
fn the_line_after_a_loop_has_code_inside_it() {
    let bin = support::go_build("lines", &[]);
    let wanted = format!("main.go:{}", line("spillafter"));
    let lines: Vec<String> = support::objdump(&bin, "main.spillAfter").into_iter().map(|l| l.position).collect();
    let runs = lines.iter().zip(lines.iter().skip(1)).filter(|(a, b)| **a != wanted && **b == wanted).count();
    assert!(runs >= 2, "the line's code is in one place only: {lines:?}");
}

/// Where the locals of the two lines above are: `total` in a register, `p` on the stack.
#[test]
fn a_local_in_a_register_and_one_in_stack_slots() {
    for toolchain in toolchains() {
        let Some(bin) = build_plain("lines", &toolchain) else { continue };
        let t = Target::open(&bin).unwrap();
        let local = |mark: &str, name: &str| {
            let sites = t.line_sites("main.go", line(mark)).unwrap();
            assert_eq!(sites.len(), 1, "{toolchain} {mark}: {sites:?}");
            let locals = t.locals_at(&sites[0]).unwrap();
            locals.into_iter().find(|l| l.name == name).unwrap_or_else(|| panic!("{toolchain}: no {name}")).state
        };
        assert!(
            matches!(local("after", "total"), LocalState::InScope(ValueLocation::At(Location::Regs(_)))),
            "{toolchain}"
        );
        match local("stacked", "p") {
            LocalState::InScope(ValueLocation::At(Location::Stack { .. })) => {}
            LocalState::InScope(ValueLocation::At(Location::Pieces(pieces))) => {
                assert!(pieces.iter().all(|p| matches!(p.at, gtrace::arch::abi::PieceAt::Stack { .. })), "{toolchain}")
            }
            other => panic!("{toolchain}: p is {other:?}"),
        }
    }
}

/// scaled is inlined into viaA and viaB: its line has a copy in each, named after it.
#[test]
fn locals_in_the_inlined_copies_of_a_line() {
    if !privileged("locals_in_the_inlined_copies_of_a_line") {
        return;
    }
    let script = format!("on line {} {{ @copies[func] = count(); @x = sum(x) }}", at("inlined"));
    for toolchain in toolchains() {
        let Some(bin) = build_plain("lines", &toolchain) else { continue };
        let t = Target::open(&bin).unwrap();
        let sites = t.line_sites("main.go", line("inlined")).unwrap();
        let mut callers: Vec<&str> = sites.iter().map(|s| s.function.as_str()).collect();
        callers.sort();
        assert_eq!(callers, ["main.viaA", "main.viaB"], "{toolchain}");
        assert!(sites.iter().all(|s| s.inlined && s.frame == "main.scaled"), "{toolchain}: {sites:?}");
        let run = gtrace(&["-e", &script, "-c", &format!("{} 60", bin.display())]);
        let out = &run.stdout;
        assert_eq!(run.code, 0, "{toolchain}:\n{out}\n{}", run.stderr);
        assert_eq!(map_value(out, "@copies[main.scaled]"), truth(out, "inlined"), "{toolchain}");
        assert_eq!(map_value(out, "@x"), truth(out, "inlined_x_sum"), "{toolchain}");
    }
}

/// Line probes and their locals on arm64 builds (checked here, traced where the kernel
/// is arm64): the line table and the scopes are the same DWARF; the stack slots are read
/// from arm64's SP, the stores of every path decoded for arm64.
#[test]
fn line_probes_and_locals_check_on_arm64() {
    let script = format!(
        "on line {} {{ @n = count() }} on line {} {{ @x = sum(p.X); @name[name] = count() }} on line {} {{ @s = sum(s) }}",
        at("body"),
        at("stacked"),
        at("spillafter")
    );
    for toolchain in toolchains() {
        let Some(bin) = support::toolchain::build_arm64("lines", &toolchain, PLAIN) else { continue };
        let run = support::check_against(&["-e", &script], &bin);
        assert_eq!(run.code, 0, "{toolchain} arm64:\n{}", run.stderr);
    }
}

/// A stripped binary has no line table: the error says so and points at --debug-file.
#[test]
fn line_probes_need_dwarf() {
    let bin = match build("lines", "local", Kind { stripped: true, ..PLAIN }) {
        Ok(b) => b,
        Err(_) => panic!("the local toolchain builds"),
    };
    let run = support::check_against(&["-e", &format!("on line {} {{ @n = count() }}", at("body"))], &bin);
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("has no DWARF line table") && run.stderr.contains("--debug-file"), "{}", run.stderr);
}

/// The same binary stripped (`objcopy --strip-all`) with its DWARF kept aside
/// (`--only-keep-debug`): lines and locals come from `--debug-file`.
#[test]
fn line_probes_on_a_stripped_binary_with_its_debug_file() {
    if !privileged("line_probes_on_a_stripped_binary_with_its_debug_file") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("gtrace-lines-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (stripped, debug) = (dir.join("lines"), dir.join("lines.debug"));
    let bin = support::go_build("lines", &[]);
    for args in [
        ["--only-keep-debug", &*bin.to_string_lossy(), &*debug.to_string_lossy()],
        ["--strip-all", &*bin.to_string_lossy(), &*stripped.to_string_lossy()],
    ] {
        let out = std::process::Command::new("objcopy").args(args).output().expect("objcopy (binutils)");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let script = format!("on line {} {{ @body = count() }} on line {} {{ @x = sum(p.X) }}", at("body"), at("stacked"));
    let (s, d) = (stripped.to_str().unwrap(), debug.to_str().unwrap());
    let run = gtrace(&["-e", &script, "--debug-file", d, "-c", &format!("{s} 40")]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(map_value(&run.stdout, "@body"), truth(&run.stdout, "body"));
    assert_eq!(map_value(&run.stdout, "@x"), truth(&run.stdout, "stacked_x"));
}

fn rendered(script: &str) -> String {
    let bin = support::go_build("lines", &[]);
    let r = support::check_against(&["-e", script], &bin);
    assert_ne!(r.code, 0, "expected an error for {script}");
    let goroot = std::process::Command::new("go").args(["env", "GOROOT"]).output().expect("go env GOROOT");
    let goroot = String::from_utf8_lossy(&goroot.stdout).trim().to_string();
    r.stderr
        .replace(bin.to_str().unwrap(), "BIN")
        .replace(support::root().to_str().unwrap(), "ROOT")
        .replace(&goroot, "GOROOT")
}

macro_rules! diagnostic {
    ($name:ident, $script:expr) => {
        #[test]
        fn $name() {
            insta::assert_snapshot!(rendered(&$script));
        }
    };
}

diagnostic!(a_local_optimized_away, format!("on line {} {{ print(k) }}", at("gone")));
diagnostic!(a_local_declared_on_its_line, format!("on line {} {{ print(m) }}", at("gone")));
diagnostic!(a_local_out_of_scope, format!("on line {} {{ print(i) }}", at("after")));
diagnostic!(a_local_not_declared_yet, format!("on line \"main.go:{}\" {{ print(q) }}", line("stacked") - 1));
diagnostic!(a_line_without_code, format!("on line \"main.go:{}\" {{ print(1) }}", line("header") - 1));
diagnostic!(a_file_that_is_not_there, "on line \"mian.go:3\" { print(1) }".to_string());
diagnostic!(a_file_name_of_several_files, "on line \"print.go:100\" { print(1) }".to_string());
diagnostic!(not_a_line, "on line \"main.go\" { print(1) }".to_string());
diagnostic!(elapsed_in_a_line_probe, format!("on line {} {{ print(elapsed) }}", at("body")));

/// `-l FILE.go:LINE` lists what a line probe there can name: each local and parameter
/// with its type and place, or why it cannot be read there.
#[test]
fn listing_a_line_shows_its_locals() {
    let bin = support::go_build("lines", &[]);
    let b = bin.display().to_string();
    let escaped = format!("main.go:{}", line("escaped"));
    let run = gtrace(&["-l", &escaped, "-b", &b]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(
        lines[0].starts_with(&format!("{escaped} at 0x")) && lines[0].ends_with(" in main.escapes:"),
        "{}",
        run.stdout
    );
    assert!(
        lines.iter().any(|l| l.trim_start().starts_with("n int [") && l.ends_with("(parameter)")),
        "{}",
        run.stdout
    );
    let total = lines.iter().find(|l| l.trim_start().starts_with("total int ")).expect("total listed");
    assert!(total.ends_with("(moved to the heap: &total holds its address)"), "{total}");
    // A line without code says which lines near it have some.
    let run = gtrace(&["-l", "main.go:1", "-b", &b]);
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("main.go:1 has no code; lines near it that have some:"), "{}", run.stderr);
}
