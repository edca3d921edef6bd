//! Package-level variables end to end: ints, strings, floats, struct fields through a
//! pointer, a nil pointer, maps' and slices' lengths, a slice element and a standard
//! library's variable (`"net/http.DefaultClient".Timeout`), read by name while
//! tests/go/globals changes them (a process started with -c: tests/cases/globals.cases;
//! here the ones that need code), in an executable and a PIE (whose load bias is learned
//! at the entry point for a process started with -c or under -b, and from its memory
//! map for one already running under -p or -b); a stripped binary with its DWARF kept
//! aside, and traced with a plan compiled against the unstripped build; the gc
//! library's heap size against runtime.ReadMemStats. Needs root (SKIP without it, unless
//! CI=true).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::processes::{Gtrace, Lines, Owned};
use support::toolchain::{build_plain, toolchains};
use support::{gtrace, privileged, sorted_lines};

/// The script that prints what the program prints, from its package variables.
const SCRIPT: &str = r#"on entry main.tick {
    printf("gt tick %d counter=%d label=%s port=%d max=%d tags=%d current=%t byname=%d byid=%d items=%d last=%d ratio=%v timeout=%d\n",
        step, main.counter, main.label, main.config.Port, main.config.Limits.Max, len(main.config.Limits.Tags),
        main.current != nil, len(main.byName), len(main.byID), len(main.items), main.items[step], main.ratio32,
        "net/http.DefaultClient".Timeout)
}"#;

fn globals(flags: &[&str]) -> PathBuf {
    support::go_build("globals", flags)
}

/// gtrace's tick lines equal the program's lines of the same ticks (all of them when
/// `every`), and there are some.
fn same_ticks(gt: &str, go: &str, every: bool) {
    let ours = sorted_lines(gt, "gt tick ");
    let truth = sorted_lines(go, "go tick ");
    assert!(!ours.is_empty(), "no tick read:\n{gt}");
    if every {
        assert_eq!(ours, truth, "\n{gt}\n{go}");
    } else {
        for l in &ours {
            assert!(truth.contains(l), "gtrace read `{l}`, which the program never had:\n{go}");
        }
    }
}

/// The program started on its own, slowly (a tick every 10ms, for a minute at most: it
/// is ended by `stop_slow` once gtrace is done with it); its stdout read as it comes.
/// (It ticked 1.5 or 2 s before: a gtrace slower than that to attach on a loaded host
/// found it gone, or saw none of its ticks.)
fn start_slow(bin: &Path) -> (Owned, Lines) {
    let mut child =
        Command::new(bin).args(["6000", "slow"]).stdout(Stdio::piped()).spawn().expect("start the globals program");
    let out = Lines::of(child.stdout.take().expect("stdout"));
    out.wait_for(Duration::from_secs(10), |l| l.starts_with("go tick 0 ")).expect("it ticks");
    (Owned(child), out)
}

/// Ends the program `start_slow` started; its output once read to the end.
fn stop_slow(mut program: Owned, out: &Lines) -> String {
    let _ = program.0.kill();
    let _ = program.0.wait();
    assert!(out.wait_end(Duration::from_secs(10)), "the program's output does not end");
    out.text()
}

#[test]
fn a_running_pie_is_read_at_its_load_bias() {
    if !privileged("a_running_pie_is_read_at_its_load_bias") {
        return;
    }
    let bin = globals(&["-buildmode=pie"]);
    let (program, out) = start_slow(&bin);
    let pid = program.0.id().to_string();
    let r = gtrace(&["-e", SCRIPT, "-p", &pid, "--duration", "600ms"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    same_ticks(&r.stdout, &stop_slow(program, &out), false);
    assert!(!r.stderr.contains("skipped"), "{}", r.stderr);
}

#[test]
fn every_process_of_a_pie_is_read_at_its_own_bias() {
    if !privileged("every_process_of_a_pie_is_read_at_its_own_bias") {
        return;
    }
    // A copy of its own: -b traces every process of the file, and the test beside it
    // runs the same build, whose ticks may be ahead of this test's.
    let bin = support::processes::scratch_dir("globals-every-process").join("globals");
    support::copy_executable(&globals(&["-buildmode=pie"]), &bin);
    // One process already running when gtrace attaches, one started after.
    let (before, before_out) = start_slow(&bin);
    let mut g = Gtrace::start(&["-e", SCRIPT, "-b", bin.to_str().unwrap(), "--duration", "2500ms"]);
    g.attached();
    let after = Command::new(&bin).output().expect("run the globals program");
    let after_out = String::from_utf8_lossy(&after.stdout).into_owned();
    assert_eq!(g.wait(), 0, "{}", g.err.text());
    let before_text = stop_slow(before, &before_out);
    let gt = g.out.text();
    // Every tick of the new process, and ticks of the old one: each the program's own.
    let truth = format!("{before_text}\n{after_out}");
    same_ticks(&gt, &truth, false);
    for l in sorted_lines(&after_out, "go tick ") {
        assert!(gt.contains(&format!("gt tick {l}")), "missed `{l}` of the new process:\n{gt}");
    }
    let old: Vec<String> = sorted_lines(&before_text, "go tick ");
    assert!(old.iter().any(|l| gt.contains(&format!("gt tick {l}"))), "nothing of the running process:\n{gt}");
    assert!(!g.err.text().contains("skipped"), "{}", g.err.text());
}

fn objcopy(args: &[&str]) {
    let out = Command::new("objcopy").args(args).output().unwrap_or_else(|e| panic!("objcopy (binutils): {e}"));
    assert!(out.status.success(), "objcopy {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_stripped_binary_reads_them_with_its_dwarf_kept_aside_or_a_plan() {
    if !privileged("a_stripped_binary_reads_them_with_its_dwarf_kept_aside_or_a_plan") {
        return;
    }
    let bin = globals(&["-buildmode=pie"]);
    let dir = support::root().join("target/tmp/globals-stripped");
    std::fs::create_dir_all(&dir).unwrap();
    let (debug, stripped) = (dir.join("globals.debug"), dir.join("globals"));
    objcopy(&["--only-keep-debug", bin.to_str().unwrap(), debug.to_str().unwrap()]);
    objcopy(&["--strip-all", bin.to_str().unwrap(), stripped.to_str().unwrap()]);
    let s = stripped.to_str().unwrap();
    let r = gtrace(&["-e", SCRIPT, "--debug-file", debug.to_str().unwrap(), "-c", s]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    same_ticks(&r.stdout, &r.stdout, true);
    // Compiled where the DWARF is, run on the stripped build.
    let plan = dir.join("plan.json");
    let r = gtrace(&["-e", SCRIPT, "--emit", "plan", "-o", plan.to_str().unwrap(), "-b", bin.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = gtrace(&["run", plan.to_str().unwrap(), "-c", s]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    same_ticks(&r.stdout, &r.stdout, true);
}

#[test]
fn without_dwarf_a_package_variable_is_a_clear_error() {
    let stripped = globals(&["-ldflags=-s -w"]);
    let r = support::check_against(&["-e", SCRIPT], &stripped);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("`main.counter` cannot be found: this binary has no symbol table and no DWARF"),
        "{}",
        r.stderr
    );
    let symbols_only = globals(&["-ldflags=-w"]);
    let r = support::check_against(&["-e", SCRIPT], &symbols_only);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("`main.counter` is in the symbol table, but without DWARF its type is not known"),
        "{}",
        r.stderr
    );
}

#[test]
fn the_gc_library_reports_the_heap_the_runtime_counts() {
    if !privileged("the_gc_library_reports_the_heap_the_runtime_counts") {
        return;
    }
    for toolchain in toolchains() {
        let Some(libs) = build_plain("libs", &toolchain) else { continue };
        let r = gtrace(&["gc", "-c", &format!("{} gc 3", libs.display())]);
        assert_eq!(r.code, 0, "{toolchain}:\n{}\n{}", r.stdout, r.stderr);
        // After runtime.GC(), ReadMemStats' HeapAlloc and the runtime's own counters of
        // the live heap agree but for the runtime's bookkeeping of the last few
        // allocations (a few hundred bytes here, of a 4 MB heap): a wrong variable or
        // field would be off by megabytes.
        let alloc = support::truth(&r.stdout, "heapalloc");
        let marked = support::map_value(&r.stdout, "@gc_heap_marked");
        let live = support::map_value(&r.stdout, "@gc_heap_live");
        let live_max = support::map_value(&r.stdout, "@gc_heap_live_max");
        assert!(alloc > 4 << 20, "{toolchain}: {}", r.stdout);
        assert!((marked - alloc).abs() <= 16 << 10, "{toolchain}: marked {marked}, HeapAlloc {alloc}");
        assert!((live - alloc).abs() <= 64 << 10, "{toolchain}: heapLive {live}, HeapAlloc {alloc}");
        assert!(live_max >= live, "{toolchain}: {}", r.stdout);
    }
    // Stripped, the library still counts cycles; the heap maps are left out.
    let stripped = support::go_build("libs", &["-ldflags=-s -w"]);
    let r = gtrace(&["gc", "-c", &format!("{} gc 3", stripped.display())]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(support::map_value(&r.stdout, "@gc_cycles") >= 3, "{}", r.stdout);
    assert!(!r.stdout.contains("@gc_heap"), "{}", r.stdout);
}

/// The ELF entry point of `bin` (e_entry of a 64-bit ELF header).
fn elf_entry(bin: &Path) -> u64 {
    let bytes = std::fs::read(bin).expect("read the binary");
    u64::from_le_bytes(bytes[24..32].try_into().expect("an ELF header"))
}

/// The addresses of the `learn_load_bias` program's attach points in `bin`'s plan for a
/// script that reads no package variable.
fn bias_points(bin: &Path) -> Vec<u64> {
    let plan = tempfile_path("bias-plan.json");
    let script = "on entry main.tick { @c = count() }";
    let r = gtrace(&["--emit", "plan", "-o", plan.to_str().unwrap(), "-e", script, "-b", bin.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let text = std::fs::read_to_string(&plan).expect("the plan");
    let _ = std::fs::remove_file(&plan);
    let plan: serde_json::Value = serde_json::from_str(&text).expect("plan JSON");
    let probes = plan["plan"]["probes"].as_array().expect("probes");
    (probes.iter().filter(|p| p["program"] == "learn_load_bias"))
        .flat_map(|p| p["attach"]["Uprobe"].as_array().cloned().unwrap_or_default())
        .map(|pt| pt["address"].as_u64().expect("an address"))
        .collect()
}

fn tempfile_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("gtrace-{}-{name}", std::process::id()))
}

/// A PIE's types and frames are named through its load bias, which a short -c command
/// can take away (its memory map gone before gtrace reads it: CI saw types print as
/// addresses). So every plan for a PIE learns the bias at the ELF entry point, whatever
/// its script reads; an executable's needs none. Pure: no privileges.
#[test]
fn every_pie_plan_learns_the_bias_at_the_entry_point() {
    let pie = globals(&["-buildmode=pie"]);
    assert_eq!(bias_points(&pie), vec![elf_entry(&pie)]);
    let exe = globals(&[]);
    assert_eq!(bias_points(&exe), Vec::<u64>::new());
}
