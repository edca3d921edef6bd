//! Probe sites that x86 uprobes refuse: gtrace's prediction (`arch::x86_64::uprobe`, judged from
//! the instruction bytes before attaching) against the kernel's own answer, and the
//! whole tool on wildcards that cover such sites (`"runtime.*"`, `"*"`, the LOCK-prefixed
//! atomic inlined into runtime.greyobject): every other probe runs, counts are exact, and
//! what was passed over is said in one line.
//!
//! The kernel tests need root (SKIP without it, a failure when CI=true).

mod support;

use gtrace::bpf::builder::Builder;
use gtrace::bpf::insn::{exit, mov64_imm, R0};
use gtrace::gobin::Target;
use gtrace::object::{write, BpfObject, ProgramCode};
use gtrace::plan::{AttachPoint, Plan, ProbeAttach, ProbeSpec};
use gtrace::runtime::{self, Scope};
use std::collections::BTreeSet;
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};

/// Every probe site gtrace could use in `target`: each function's entry and every place
/// a function was inlined, with gtrace's verdict.
fn all_sites(target: &Target) -> Vec<(String, u64, bool)> {
    let mut sites = Vec::new();
    for f in target.functions().iter().filter(|f| f.size > 0) {
        if let Ok(s) = target.probe_sites(f) {
            sites.push((f.name.to_string(), s.entry, target.uprobe_refusal(s.entry).is_some()));
        }
    }
    for s in &target.find_inlined("*") {
        sites.push((s.callee.clone(), s.addr, target.uprobe_refusal(s.addr).is_some()));
    }
    sites.sort_by_key(|s| s.1);
    sites.dedup_by_key(|s| s.1);
    sites
}

/// A program that does nothing, attached at `points`.
fn object_at(binary: &Path, points: Vec<AttachPoint>) -> (Vec<u8>, Plan) {
    let mut b = Builder::new();
    b.emit(mov64_imm(R0, 0));
    b.emit(exit());
    let program = b.finish().unwrap();
    let obj = BpfObject {
        license: "GPL".into(),
        maps: Vec::new(),
        programs: vec![ProgramCode { name: "nop".into(), section: "uprobe/nop".into(), program }],
    };
    let plan = Plan {
        binary: gtrace::plan::Binary {
            path: binary.to_path_buf(),
            build_ids: Default::default(),
            arch: gtrace::arch::Arch::X86_64,
            module: None,
            link_base: None,
        },
        probes: vec![ProbeSpec {
            program: "nop".into(),
            section: "uprobe/nop".into(),
            attach: ProbeAttach::Uprobe(points),
            describe: "nop".into(),
            source_lines: Vec::new(),
            maps: Vec::new(),
        }],
        ..Plan::default()
    };
    (write(&obj).unwrap(), plan)
}

#[test]
fn the_kernel_refuses_exactly_the_sites_gtrace_predicts() {
    if !support::privileged("the_kernel_refuses_exactly_the_sites_gtrace_predicts") {
        return;
    }
    let bin = support::go_build("e2e", &[]);
    let target = Target::open(&bin).unwrap();
    let sites = all_sites(&target);
    let refused: Vec<_> = sites.iter().filter(|s| s.2).collect();
    // This toolchain's runtime has LOCK-prefixed atomics inlined at probe sites
    // (markBits.setMarked in runtime.greyobject) and AVX-512 kernels starting with EVEX.
    assert!(refused.len() >= 10, "{refused:?}");
    let lock = gtrace::arch::Refusal::X86(gtrace::arch::x86_64::uprobe::Refusal::Lock);
    assert!(refused.iter().any(|s| target.uprobe_refusal(s.1) == Some(lock)));
    // Every refused site and ten accepted ones, spread over the binary.
    let accepted: Vec<_> = sites.iter().filter(|s| !s.2).step_by(97).take(10).collect();
    let points: Vec<AttachPoint> = refused
        .iter()
        .chain(&accepted)
        .map(|(name, addr, _)| AttachPoint {
            function: name.clone(),
            address: *addr,
            file_offset: target.file_offset(*addr).unwrap(),
            cookie: 0,
        })
        .collect();
    // The kernel judges the instruction when a process has the file mapped: a running one.
    let gate = std::env::temp_dir().join(format!("gtrace-sites-{}", std::process::id()));
    let mut child =
        Command::new(&bin).args(["wait", "1", gate.to_str().unwrap()]).stdout(Stdio::piped()).spawn().unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");

    let (bytes, plan) = object_at(&bin, points);
    let mut loaded = runtime::load(&bytes, &plan).unwrap();
    let attached = loaded.attach(&bin, Scope::Process(child.id()), None).unwrap();
    let kernel_refused: BTreeSet<u64> = loaded.refused().iter().map(|r| r.address).collect();
    let predicted: BTreeSet<u64> = refused.iter().map(|s| s.1).collect();
    loaded.detach_all();
    std::fs::write(&gate, b"").unwrap();
    assert!(child.wait().unwrap().success());
    std::fs::remove_file(&gate).unwrap();

    assert_eq!(kernel_refused, predicted, "the kernel and gtrace disagree");
    assert_eq!(attached, accepted.len());
    assert!(loaded.refused().iter().all(|r| r.errno == 524), "{:?}", loaded.refused());
}

/// The `passed over N places` count and the listed lines of `gtrace --check`.
fn check_listing(script: &str, bin: &Path) -> (usize, Vec<String>) {
    let r = support::check_against(&["-e", script], bin);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let count = r
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("gtrace: passed over "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let listed = r.stderr.lines().filter(|l| l.starts_with("  skipped ")).map(String::from).collect();
    (count, listed)
}

/// Addresses of the LOCK-prefixed instructions of runtime.greyobject that are probe sites
/// (where another function was inlined), per `go tool objdump`.
fn greyobject_lock_sites(bin: &Path) -> Vec<u64> {
    let target = Target::open(bin).unwrap();
    let inlined: BTreeSet<u64> = target.find_inlined("*").iter().map(|s| s.addr).collect();
    support::objdump(bin, "runtime.greyobject")
        .into_iter()
        .filter(|l| l.asm.starts_with("LOCK ") && inlined.contains(&l.addr))
        .map(|l| l.addr)
        .collect()
}

#[test]
fn wildcards_pass_over_markers_and_refused_sites_at_check() {
    let bin = support::go_build("e2e", &[]);
    for pattern in ["runtime.*", "runtime.e*", "*"] {
        let (count, listed) = check_listing(&format!("on entry \"{pattern}\" {{ @n = count() }}"), &bin);
        assert_eq!(count, listed.len(), "{pattern}: {listed:?}");
        assert!(
            listed.iter().any(|l| l.starts_with("  skipped runtime.etext ") && l.contains("zero-size")),
            "{listed:?}"
        );
    }
    let (_, listed) = check_listing("on entry \"*\" { @n = count() }", &bin);
    let locks = greyobject_lock_sites(&bin);
    assert!(!locks.is_empty(), "no LOCK-prefixed probe site in runtime.greyobject on this toolchain");
    for addr in locks {
        let line = format!(" at {addr:#x} ");
        assert!(
            listed.iter().any(|l| l.contains(&line) && l.contains("LOCK-prefixed")),
            "{addr:#x} not listed as LOCK-prefixed: {listed:#?}"
        );
    }
    // Return probes pass over functions without a RET the same way.
    let (count, listed) = check_listing("on return \"runtime.e*\" { @n = count() }", &bin);
    assert_eq!(count, listed.len());
    assert!(listed.iter().any(|l| l.contains("no RET instruction")), "{listed:?}");
}

#[test]
fn wildcards_over_refused_sites_run_the_other_probes() {
    if !support::privileged("wildcards_over_refused_sites_run_the_other_probes") {
        return;
    }
    let bin = support::go_build("e2e", &[]);
    let cmd = format!("{} add 300", bin.display());
    for pattern in ["runtime.*", "*"] {
        let script = format!("on entry \"{pattern}\", main.add {{ @n[func] = count() }}");
        let (expected, _) = check_listing(&script, &bin);
        let r = support::gtrace(&["-e", &script, "-c", &cmd]);
        assert_eq!(r.code, 0, "{pattern}: {}", r.stderr);
        let calls = support::truth(&r.stdout, "calls");
        assert_eq!(support::map_value(&r.stdout, "@n[main.add]"), calls, "{pattern}");
        let summary: Vec<&str> = r.stderr.lines().filter(|l| l.starts_with("gtrace: passed over")).collect();
        assert_eq!(summary.len(), 1, "{}", r.stderr);
        assert!(summary[0].starts_with(&format!("gtrace: passed over {expected} places")), "{}", summary[0]);
        assert!(summary[0].contains("LOCK-prefixed"), "{}", summary[0]);
    }
}

#[test]
fn the_lock_site_in_greyobject_is_passed_over_and_the_rest_counted() {
    if !support::privileged("the_lock_site_in_greyobject_is_passed_over_and_the_rest_counted") {
        return;
    }
    let bin = support::go_build("e2e", &[]);
    // Every function inlined at a LOCK-prefixed instruction of greyobject, probed with
    // main.add: the LOCK sites are passed over, main.add counts every call.
    let target = Target::open(&bin).unwrap();
    let locks = greyobject_lock_sites(&bin);
    let callees: BTreeSet<String> =
        target.find_inlined("*").iter().filter(|s| locks.contains(&s.addr)).map(|s| s.callee.clone()).collect();
    assert!(!callees.is_empty());
    let quoted: Vec<String> = callees.iter().map(|c| format!("\"{c}\"")).collect();
    let script = format!("on entry {}, main.add {{ @n[func] = count() }}", quoted.join(", "));
    let (count, listed) = check_listing(&script, &bin);
    // Exactly the probe sites that `go tool objdump` shows as LOCK-prefixed are passed
    // over as such: every place those functions were inlined, and their own entries.
    let mut sites: Vec<(String, u64)> = Vec::new();
    for callee in &callees {
        sites.extend(target.find_inlined(callee).iter().map(|s| (s.caller.clone(), s.addr)));
        for f in target.find(callee) {
            sites.push((f.name.to_string(), target.probe_sites(f).unwrap().entry));
        }
    }
    let lock_at = |(function, addr): &(String, u64)| {
        support::objdump(&bin, function).iter().any(|l| l.addr == *addr && l.asm.starts_with("LOCK "))
    };
    let want: BTreeSet<u64> = sites.iter().filter(|s| lock_at(s)).map(|s| s.1).collect();
    let got: BTreeSet<u64> = listed
        .iter()
        .filter(|l| l.contains("LOCK-prefixed"))
        .filter_map(|l| {
            l.split(" at 0x").nth(1)?.split_whitespace().next().and_then(|a| u64::from_str_radix(a, 16).ok())
        })
        .collect();
    assert_eq!(got, want, "{listed:#?}");
    assert!(want.is_superset(&locks.iter().copied().collect()));
    let r = support::gtrace(&["-e", &script, "-c", &format!("{} add 250", bin.display())]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(support::map_value(&r.stdout, "@n[main.add]"), support::truth(&r.stdout, "calls"));
    assert!(r.stderr.contains(&format!("gtrace: passed over {count} places")), "{}", r.stderr);
}
