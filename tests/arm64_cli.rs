//! The command line on arm64 Go binaries, on this x86-64 host: `--check` of every stdlib
//! library and example against arm64 builds of programs that use their packages,
//! `--emit asm|elf|plan`, and tracing refused before anything is loaded. This machine has
//! no arm64 kernel: whether the programs run there is not tested here.

mod support;

use gtrace::arch::Arch;
use gtrace::plan::{Bundle, ProbeAttach};
use std::path::{Path, PathBuf};
use support::toolchain::{build_arm64, toolchains, PLAIN};
use support::{check_against, gtrace};

/// tests/go/<dir> built for arm64 by the local Go.
fn arm64(dir: &str) -> PathBuf {
    build_arm64(dir, "local", PLAIN).expect("the local toolchain builds for arm64")
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// A scratch file under target/, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = support::root().join("target/arm64-cli");
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir.join(format!("{}-{name}", std::process::id())))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn every_stdlib_library_checks_against_arm64_programs_using_its_packages() {
    let names = support::stdlib_names();
    // httpserver has net/http (server and client), sqlprog database/sql; libs the runtime
    // and sync.Mutex that gc, sched and lock probe, on every toolchain.
    for name in &names {
        let bin = &support::program_using(name, Some("arm64"));
        let r = check_against(&[name], bin);
        assert_eq!(r.code, 0, "gtrace {name} --check -b {}:\n{}", bin.display(), r.stderr);
        assert!(r.stderr.contains("ok,") && r.stderr.contains("not verified by the kernel"), "{}", r.stderr);
    }
    for tc in toolchains() {
        let Some(libs) = build_arm64("libs", &tc, PLAIN) else { continue };
        for name in ["gc", "sched", "lock"] {
            let r = check_against(&[name], &libs);
            assert_eq!(r.code, 0, "{tc}: gtrace {name} --check:\n{}", r.stderr);
        }
    }
}

#[test]
fn every_example_checks_against_its_program_built_for_arm64() {
    let dir = support::root().join("examples/worker");
    let worker = support::go_build_at_env(&dir, "worker-arm64", &[], &[("GOARCH", "arm64")]);
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("examples/worker") {
        let script = entry.expect("entry").path();
        if script.extension().is_some_and(|e| e == "gt") {
            let r = check_against(&[path(&script)], &worker);
            assert_eq!(r.code, 0, "{} --check:\n{}", script.display(), r.stderr);
            seen += 1;
        }
    }
    assert!(seen >= 3, "examples/worker has its scripts");
}

/// The programs read arm64's `struct user_pt_regs`: R0 at 0, R1 at 8, R28 (g) at 224, R29
/// at 232, R30 (LR) at 240, SP at 248, PC at 256; on amd64 those offsets hold other
/// registers or lie past the struct.
#[test]
fn emitted_assembly_reads_the_arm64_user_registers() {
    let bin = arm64("kinds");
    let script =
        "on entry main.add { @s = sum(a + b); @g[goid] = count() } on return main.sleepy { @st[ustack] = count(); @e = sum(elapsed) }";
    let r = gtrace(&["--emit", "asm", "-e", script, "-b", path(&bin)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let reads = |off: u32| r.stdout.contains(&format!("= *(u64 *)(r6 +{off})"));
    for (off, what) in [(0, "R0"), (8, "R1"), (224, "R28"), (232, "R29"), (240, "R30"), (248, "RSP"), (256, "PC")] {
        assert!(reads(off), "no read of {what} at +{off}:\n{}", r.stdout);
    }
    assert!(!reads(80) && !reads(152), "amd64's RAX or RSP offsets:\n{}", r.stdout);
}

#[test]
fn the_emitted_object_and_plan_are_whole() {
    let bin = arm64("kinds");
    let script = "on entry main.add { @n = count() } on return main.add { @r = sum(ret) }";
    let elf = Scratch::new("probe.o");
    let r = gtrace(&["--emit", "elf", "-o", path(&elf.0), "-e", script, "-b", path(&bin)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let object = std::fs::read(&elf.0).unwrap();
    let parsed = aya_obj::Object::parse(&object).expect("aya-obj parses the object");
    let plan = Scratch::new("plan.json");
    let r = gtrace(&["--emit", "plan", "-o", path(&plan.0), "-e", script, "-b", path(&bin)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let bundle = Bundle::read(&plan.0).expect("the plan reads back");
    assert_eq!(bundle.plan.binary.arch, Arch::Arm64);
    assert_eq!(bundle.object, object, "the plan carries the same object");
    assert_eq!(parsed.programs.len(), bundle.plan.probes.len());
    let t = gtrace::gobin::Target::open(&bin).unwrap();
    let add = t.find("main.add")[0].clone();
    let sites = t.probe_sites(&add).unwrap();
    let mut addrs: Vec<u64> = bundle
        .plan
        .probes
        .iter()
        .flat_map(|p| match &p.attach {
            ProbeAttach::Uprobe(points) => points.iter().map(|pt| pt.address).collect(),
            _ => Vec::new(),
        })
        .collect();
    addrs.sort();
    let mut want = sites.returns.clone();
    want.push(sites.entry);
    want.sort();
    assert_eq!(addrs, want, "entry and every RET");
    for probe in &bundle.plan.probes {
        assert!(parsed.programs.contains_key(&probe.program), "{}", probe.program);
    }
}

/// Tracing an arm64 binary here stops before anything is loaded or started, whether
/// compiled here or read from a plan.
#[test]
fn tracing_an_arm64_binary_is_refused_on_this_host() {
    let bin = arm64("kinds");
    let want = "this plan is for arm64; tracing runs on an arm64 host";
    let command = format!("{} all 3", bin.display());
    for args in [
        vec!["-e", "on entry main.add { @n = count() }", "-c", &command],
        vec!["-e", "on entry main.add { @n = count() }", "-b", path(&bin)],
    ] {
        let r = gtrace(&args);
        assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(want), "{}", r.stderr);
        assert!(
            !r.stderr.contains("Attached") && !r.stdout.contains("calls="),
            "nothing ran:\n{}{}",
            r.stdout,
            r.stderr
        );
    }
    let plan = Scratch::new("run.json");
    let r =
        gtrace(&["--emit", "plan", "-o", path(&plan.0), "-e", "on entry main.add { @n = count() }", "-b", path(&bin)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = gtrace(&["run", path(&plan.0), "-b", path(&bin)]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains(want), "{}", r.stderr);
}

/// Without DWARF, Go 1.17's arm64 code (the stack ABI) takes its words from the stack:
/// `arg0` is read there, and `ret0`, which follows arguments of a size only DWARF knows,
/// is an error at the name that says how to give gtrace the DWARF.
#[test]
fn stack_abi_results_without_dwarf_are_refused_with_a_way_out() {
    let stripped = support::toolchain::Kind { stripped: true, ..PLAIN };
    let Some(bin) = build_arm64("e2e", support::toolchain::OLDEST, stripped) else { return };
    let args = check_against(&["-e", "on entry main.add { @a = sum(arg0) }"], &bin);
    assert_eq!(args.code, 0, "{}", args.stderr);
    let results = check_against(&["-e", "on return main.add { @r = sum(ret0) }"], &bin);
    assert_ne!(results.code, 0, "{}", results.stderr);
    assert!(results.stderr.contains("`ret0` cannot be located without DWARF"), "{}", results.stderr);
    assert!(results.stderr.contains("hint: give gtrace the binary's DWARF"), "{}", results.stderr);
    assert!(results.stderr.contains("<-e>:1:"), "the error is placed in the script: {}", results.stderr);
}
