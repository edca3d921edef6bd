//! `gtrace run` trusts nothing in a plan it would not have compiled
//! (src/plan/validate): every plan gtrace writes for the test programs, the stdlib and
//! the examples validates against its binary (and a stripped copy); a plan that calls a
//! helper gtrace never emits, or attaches off gtrace's sites, is refused naming what and
//! where; and a fuzzer (fixed seeds, bounded) mutates plans' attach points, helper calls,
//! maps, counters, cookies and object bytes: no panic, every refusal names what it
//! refused, and a few accepted mutants run for real leave their target's output intact.

mod support;

use gtrace::compile::{compile, Options};
use gtrace::gobin::Target;
use gtrace::library::{self, Root};
use gtrace::plan::validate::{self, EMITTED_HELPERS};
use gtrace::plan::{Bundle, MapRole, ProbeAttach};
use std::path::{Path, PathBuf};

/// What `--emit plan` compiles: with hit counting (a plan written for elsewhere has it).
fn options() -> Options {
    let mut o = Options::default();
    o.lowering.accounting = true;
    o
}

fn bundle_with(text: &str, dir: Option<&Path>, binary: &Path, opts: &Options) -> Bundle {
    let target = Target::open(binary).unwrap_or_else(|e| panic!("{}: {e}", binary.display()));
    let root = Root { name: "<test>".into(), text: text.into(), dir: dir.map(Path::to_path_buf) };
    let c = compile(root, &target, opts).unwrap_or_else(|r| panic!("{text}:\n{}", r.render(false)));
    Bundle { plan: c.plan, object: c.object }
}

fn bundle(text: &str, binary: &Path) -> Bundle {
    bundle_with(text, None, binary, &options())
}

fn accepted(what: &str, b: &Bundle, binary: &Path) {
    let target = Target::open(binary).expect("target");
    if let Err(e) = validate::validate(b, &target) {
        panic!("{what}: a plan gtrace wrote is refused on {}: {e}", binary.display());
    }
}

/// The line of `tests/go/lines/main.go` marked `// L:name`.
fn line(name: &str) -> u32 {
    support::marked_line("lines", name)
}

/// Scripts of every kind of probe and site, with the test program each traces.
fn scripts() -> Vec<(String, &'static str, Vec<&'static str>)> {
    let plain = |s: &str, prog: &'static str| (s.to_string(), prog, Vec::new());
    let lines = format!(
        "on line \"main.go:{}\" {{ @n = count() }} on line \"main.go:{}\" {{ @copies[func] = count() }} on entry main.loop {{ @l = count() }}",
        line("body"),
        line("inlined")
    );
    let inline =
        "on entry main.weigh { @w = count() } on entry main.note, main.tick, main.check { @n[func] = count() }";
    vec![
        plain("on entry main.add { @n = count(); @h = hist(a); @l = lhist(b, 0, 100, 10) }", "e2e"),
        plain("on return main.sleepy { @lat = hist(elapsed) } on return main.add { @r[ret] = count() }", "e2e"),
        plain(
            "on entry main.add { self.a = a } on return main.add { @x = sum(self.a); printf(\"%d\\n\", ret) }",
            "e2e",
        ),
        plain("on entry main.add { print(args); print(a, func, comm); @s[ustack] = count() }", "e2e"),
        plain("on entry \"main.(*T).Add\" { @d = sum(delta); @t = sum(t.total) } on entry main.add { exit() }", "e2e"),
        plain("on begin { @b = count() } on end { print(@b) } on interval 10ms { clear(@b) }", "values"),
        plain("on entry main.handle { @p[r.URL.Path] = count(); printf(\"%v\\n\", r.URL) }", "values"),
        plain("on entry main.describe { print(v) } on return main.named { @q = sum(q); print(err) }", "values"),
        (lines, "lines", Vec::new()),
        plain(inline, "inline"),
        plain("on panic main.boom, main.guard { printf(\"%s %v\\n\", func, panic) }", "panics"),
        plain(
            "on entry \"main.Sum[...]\" { @[func] = count() } on return \"main.Sum[main.MyInt]\" { @r = count() }",
            "generics",
        ),
        ("on entry main.tick { @c = sum(main.counter) }".into(), "globals", vec!["-buildmode=pie"]),
    ]
}

#[test]
fn every_plan_gtrace_writes_validates() {
    let mut seen = 0;
    for (text, prog, flags) in scripts() {
        let bin = support::go_build(prog, &flags);
        accepted(&text, &bundle(&text, &bin), &bin);
        seen += 1;
    }
    // --cgroup, --rate and --map-size make maps of their own.
    let e2e = support::go_build("e2e", &[]);
    let mut opts = options();
    opts.lowering.cgroup = true;
    opts.lowering.rate = Some(5);
    opts.lowering.map_sizes = gtrace::lower::maps::MapSizes::from_args(&[gtrace::lower::maps::MapSize::All(1 << 20)]);
    let text = "on entry main.add { @n[a] = count(); printf(\"%d\\n\", a) }";
    accepted("--cgroup --rate --map-size", &bundle_with(text, None, &e2e, &opts), &e2e);
    // Hits counted by the kernel where a program is at one function.
    let mut opts = options();
    opts.lowering.kernel_hits = true;
    for (text, prog, flags) in scripts() {
        let bin = support::go_build(prog, &flags);
        accepted(&format!("{text} (kernel hits)"), &bundle_with(&text, None, &bin, &opts), &bin);
    }
    assert_eq!(seen, scripts().len());
}

#[test]
fn every_stdlib_library_and_example_plan_validates() {
    for (name, _) in library::stdlib::LIBRARIES {
        let bin = &support::program_using(name, None);
        let target = Target::open(bin).unwrap();
        let root = library::root_from_stdlib(name).expect("embedded");
        let c = compile(root, &target, &options()).unwrap_or_else(|r| panic!("{name}: {}", r.render(false)));
        accepted(name, &Bundle { plan: c.plan, object: c.object }, bin);
    }
    let dir = support::root().join("examples/worker");
    let worker = support::go_build_at(&dir, "worker", &[]);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "gt") {
            let text = std::fs::read_to_string(&path).unwrap();
            accepted(&path.display().to_string(), &bundle_with(&text, Some(&dir), &worker, &options()), &worker);
        }
    }
}

/// Compiled where the DWARF is, judged on a copy without symbols or DWARF (objcopy
/// --strip-all keeps the code where it was): sites from the function table and code, on
/// the local Go, the oldest (1.17: the Go 1.16 function table) and the newest.
#[test]
fn a_plan_validates_on_a_stripped_copy_of_its_binary() {
    let dir = support::unique_tmp(&support::root().join("target"), "plantrust-strip");
    std::fs::create_dir_all(&dir).unwrap();
    for toolchain in support::toolchain::toolchains() {
        let Some(bin) = support::toolchain::build_plain("lines", &toolchain) else { continue };
        let stripped = dir.join(format!("lines-{toolchain}"));
        let ok = std::process::Command::new("objcopy").arg("--strip-all").arg(&bin).arg(&stripped).status();
        assert!(ok.is_ok_and(|s| s.success()), "objcopy --strip-all (binutils) is needed");
        let (text, _, _) = scripts().into_iter().find(|(_, p, _)| *p == "lines").unwrap();
        let text = format!("{text} on return main.loop {{ @r = count() }} on entry main.stacked {{ @s = count() }}");
        // Without hit counting, so that a point moved below keeps a cookie gtrace would give.
        let b = bundle_with(&text, None, &bin, &Options::default());
        let (full, target) = (Target::open(&bin).unwrap(), Target::open(&stripped).unwrap());
        assert!(!target.has_dwarf());
        validate::validate(&b, &target).unwrap_or_else(|e| panic!("{toolchain}: refused on the stripped copy: {e}"));
        lines_agree(&toolchain, &full, &target);
        moved_line_point_is_refused(&b, &full, &target);
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Every place DWARF says a line starts, the function table puts on that line.
fn lines_agree(toolchain: &str, full: &Target, stripped: &Target) {
    for mark in ["body", "inlined", "stacked", "after", "header"] {
        for site in full.line_sites("main.go", line(mark)).unwrap() {
            let lines = stripped.pc_lines(site.addr);
            assert!(lines.contains(&site.line), "{toolchain} {mark}: {site:?}: {lines:?}");
        }
    }
}

/// A line probe's point moved to another line's start is refused.
fn moved_line_point_is_refused(b: &Bundle, full: &Target, stripped: &Target) {
    let mut moved = b.clone();
    let other = full.line_sites("main.go", line("stacked")).unwrap()[0].clone();
    let probe = moved.plan.probes.iter_mut().find(|p| p.describe.starts_with("on line")).unwrap();
    let ProbeAttach::Uprobe(points) = &mut probe.attach else { panic!("a uprobe") };
    points[0].function = other.frame.clone();
    points[0].address = other.addr;
    points[0].file_offset = stripped.file_offset(other.addr).unwrap();
    if let Some(i) = moved.plan.functions.iter().position(|f| *f == other.frame) {
        points[0].cookie = (points[0].cookie & !0xffff_ffff) | i as u64;
    }
    let e = validate::validate(&moved, stripped).unwrap_err().to_string();
    assert!(e.contains(&format!("attaches to `{}` at {:#x}", other.frame, other.addr)), "{e}");
    assert!(e.contains(&format!("or a start of line main.go:{}", line("body"))), "{e}");
}

/// Where in the object's file the instructions of `section` are.
fn section_range(object: &[u8], section: &str) -> std::ops::Range<usize> {
    use object::{Object, ObjectSection};
    let file = object::File::parse(object).unwrap();
    let (at, len) = file.section_by_name(section).unwrap().file_range().unwrap();
    at as usize..(at + len) as usize
}

/// The calls of helpers in `section`: (instruction index, byte offset of the instruction).
fn calls(object: &[u8], section: &str) -> Vec<(usize, usize)> {
    let r = section_range(object, section);
    (r.clone())
        .step_by(8)
        .enumerate()
        .filter(|(_, at)| object[*at] == 0x85 && object[at + 1] == 0)
        .map(|(i, at)| (i, at))
        .collect()
}

fn set_helper(b: &mut Bundle, at: usize, id: i32) {
    b.object[at + 4..at + 8].copy_from_slice(&id.to_le_bytes());
}

#[test]
fn a_plan_calling_a_helper_gtrace_never_emits_is_refused() {
    let bin = support::go_build("e2e", &[]);
    let target = Target::open(&bin).unwrap();
    let original = bundle("on entry main.add { @n = count() }", &bin);
    let probe = &original.plan.probes[0];
    let (index, at) = calls(&original.object, &probe.section)[0];
    for (id, name) in
        [(109, "bpf_send_signal"), (36, "bpf_probe_write_user"), (58, "bpf_override_return"), (12, "bpf_tail_call")]
    {
        let mut b = original.clone();
        set_helper(&mut b, at, id);
        let e = validate::validate(&b, &target).expect_err(name).to_string();
        let want = format!(
            "program `{}`, instruction {index}: calls helper {name} ({id}), which gtrace never emits",
            probe.program
        );
        assert_eq!(e, want);
    }
}

/// The command line: refused before anything loads or the target starts (no privileges
/// needed to be refused), with the helper, the program and the way out.
#[test]
fn gtrace_run_refuses_such_a_plan_before_the_target_starts() {
    let bin = support::go_build("e2e", &[]);
    let mut b = bundle("on entry main.add { @n = count() }", &bin);
    let (index, at) = calls(&b.object, &b.plan.probes[0].section)[0];
    set_helper(&mut b, at, 109);
    let dir = support::unique_tmp(&support::root().join("target"), "plantrust-cli");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("plan.json");
    std::fs::write(&file, b.to_json()).unwrap();
    let r = support::gtrace(&["run", file.to_str().unwrap(), "-c", &format!("{} add 10", bin.display())]);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(r.code, 1, "{}", r.stderr);
    let program = &b.plan.probes[0].program;
    let want = format!("error: refusing the plan: program `{program}`, instruction {index}: calls helper bpf_send_signal (109), which gtrace never emits");
    assert!(r.stderr.starts_with(&want), "{}", r.stderr);
    assert!(r.stderr.contains("--emit plan -o FILE"), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "the target ran: {}", r.stdout);
}

#[test]
fn an_attach_point_off_gtraces_sites_is_refused() {
    let bin = support::go_build("e2e", &[]);
    let target = Target::open(&bin).unwrap();
    let original = bundle("on entry main.grow { @n = count() }", &bin);
    let f = target.find("main.grow")[0].clone();
    let entry = target.probe_sites(&f).unwrap().entry;
    assert!(entry > f.addr, "main.grow has a stack check");
    let moved = |b: &Bundle, to: u64, offset_too: bool| {
        let mut b = b.clone();
        let ProbeAttach::Uprobe(points) = &mut b.plan.probes[0].attach else { panic!("a uprobe") };
        let delta = to as i64 - points[0].address as i64;
        points[0].address = to;
        if offset_too {
            points[0].file_offset = (points[0].file_offset as i64 + delta) as u64;
        }
        validate::validate(&b, &target).map_err(|e| e.to_string())
    };
    let program = &original.plan.probes[0].program;
    // Two bytes on: inside the instruction (a uprobe there crashed the target).
    let e = moved(&original, entry + 2, true).unwrap_err();
    assert!(e.starts_with(&format!("probe `{program}` attaches to `main.grow` at {:#x}", entry + 2)), "{e}");
    assert!(e.contains("is not the start of an instruction of `main.grow`"), "{e}");
    // The function's first instruction: before the stack check.
    let e = moved(&original, f.addr, true).unwrap_err();
    assert!(e.contains("an instruction of `main.grow`, but not where gtrace probes `main.grow`"), "{e}");
    // The right address with a file offset that is not its own.
    let e = moved(&original, entry + 2, false).unwrap_err();
    assert!(e.contains("that address is at file offset"), "{e}");
    // In another function.
    let add = target.find("main.add")[0].clone();
    let e = moved(&original, target.probe_sites(&add).unwrap().entry, true).unwrap_err();
    assert!(e.contains("but not where gtrace probes `main.grow`"), "{e}");
    assert!(moved(&original, entry, true).is_ok());
}

/// A counters array of 2^32-1 slots (it aborted gtrace at exit, reading them) is refused,
/// even with an object rewritten to match.
/// A program at one function (p0, whose hits the kernel can count) and one at two.
const KERNEL_COUNTED: &str = "on entry main.add { @n = count() } on entry main.add, main.sleepy { @f[func] = count() }";

/// Hits counted by the kernel (`kernel_hits`, where the compiling process holds its
/// statistics): such a plan validates, and one that lies about which programs' hits the
/// kernel counts is refused, not run to report wrong hits.
#[test]
fn a_plan_that_lies_about_how_its_hits_are_counted_is_refused() {
    let bin = support::go_build("e2e", &[]);
    let target = Target::open(&bin).unwrap();
    let mut opts = options();
    opts.lowering.kernel_hits = true;
    let original = bundle_with(KERNEL_COUNTED, None, &bin, &opts);
    assert_eq!(original.plan.accounting.kernel_hits, ["p0"], "{:?}", original.plan.accounting);
    accepted("kernel hits", &original, &bin);
    let refused = |what: &str, change: &dyn Fn(&mut Bundle)| {
        let mut b = original.clone();
        change(&mut b);
        let e = validate::validate(&b, &target).expect_err(what).to_string();
        assert!(e.starts_with("program `p"), "{what}: {e}");
    };
    // A program at two functions: its runs are no one function's hits.
    refused("p1 by the kernel", &|b| b.plan.accounting.kernel_hits.push("p1".into()));
    // Counted in a counter it has no slot of.
    refused("p0 not by the kernel", &|b| b.plan.accounting.kernel_hits.clear());
    // A program that is not there, or runs turned away before they are hits.
    refused("no such program", &|b| b.plan.accounting.kernel_hits.push("p9".into()));
    refused("a generation check", &|b| b.plan.accounting.generation_programs.push("p0".into()));
    refused("no accounting", &|b| b.plan.accounting.hits = false);
}

#[test]
fn a_counters_map_larger_than_its_counters_is_refused() {
    let bin = support::go_build("e2e", &[]);
    let mut b = bundle("on entry main.add { @n = count() }", &bin);
    let counters = b.plan.accounting.counters.clone();
    assert!(!counters.is_empty(), "a plan written for elsewhere counts hits");
    b.plan.maps.iter_mut().find(|m| m.object_name == counters).unwrap().max_entries = u32::MAX;
    fuzz::rewrite(&mut b);
    let e = validate::validate(&b, &Target::open(&bin).unwrap()).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "map `{counters}`: a PercpuArray map of 4-byte keys, 8-byte values and 4294967295 entries"
        )),
        "{e}"
    );
}

#[test]
fn a_preallocated_map_larger_than_gtrace_preallocates_here_is_refused() {
    let bin = support::go_build("e2e", &[]);
    let mut opts = options();
    opts.lowering.cpus = gtrace::runtime::possible_cpus().expect("possible CPUs") as u32;
    // A hist of as many keys as gtrace preallocates here: preallocated, and accepted.
    let fits = gtrace::lower::maps::preallocated_keys(gtrace::plan::Agg::Hist.value_size(), opts.lowering.cpus);
    opts.lowering.map_sizes.maps = vec![("h".into(), fits as u32)];
    let mut b = bundle_with("on entry main.add { @h[a] = hist(b) }", None, &bin, &opts);
    let spec = b.plan.maps.iter().find(|m| matches!(&m.role, MapRole::User { name, .. } if name == "h")).unwrap();
    assert!(matches!(spec.role, MapRole::User { preallocated: true, .. }), "{spec:?}");
    assert_eq!(u64::from(spec.max_entries), fits);
    accepted("a hist preallocated for this host", &b, &bin);
    // A plan that says so, with more keys than this host would preallocate, is refused.
    let object = spec.object_name.clone();
    let m = b.plan.maps.iter_mut().find(|m| m.object_name == object).unwrap();
    m.max_entries = (fits + 1).min(u64::from(gtrace::lower::maps::MAX_MAP_SIZE)) as u32;
    if let MapRole::User { preallocated, .. } = &mut m.role {
        *preallocated = true;
    }
    fuzz::rewrite(&mut b);
    let e = validate::validate(&b, &Target::open(&bin).unwrap()).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("map `{object}`: ")) && e.contains("preallocated: more than gtrace preallocates here"),
        "{e}"
    );
}

/// Texts a plan makes gtrace print (names, formats, headers) cannot carry terminal
/// escapes: a plan written by hand could set the terminal's title or fake output.
#[test]
fn a_plan_with_terminal_escapes_in_its_texts_is_refused() {
    let bin = support::go_build("e2e", &[]);
    let target = Target::open(&bin).unwrap();
    let b = bundle("on entry main.add { @n = count(); printf(\"%d\\t%d\\n\", a, b) }", &bin);
    validate::validate(&b, &target).expect("tabs and newlines in a format are a script's");
    let mut title = b.clone();
    let Some(gtrace::plan::EventKind::Printf { format }) = title.plan.events.iter_mut().map(|e| &mut e.kind).next()
    else {
        panic!("a printf event")
    };
    format.insert_str(0, "\x1b]0;owned\x07");
    let e = validate::validate(&title, &target).unwrap_err().to_string();
    assert_eq!(e, "event 0 of the plan: a text with control characters");
    let mut name = b.clone();
    let gtrace::plan::MapRole::User { name: n, .. } = &mut name.plan.maps[0].role else { panic!("a user map") };
    n.push_str("\x1b[2J");
    let e = validate::validate(&name, &target).unwrap_err().to_string();
    assert!(e.starts_with("map `m0`: a name that is no identifier"), "{e}");
    // The refusal itself prints what it refuses escaped.
    let mut program = b.clone();
    program.plan.probes[0].program.push_str("\x1b[2J");
    let e = validate::validate(&program, &target).unwrap_err().to_string();
    assert!(e.contains("\\u{1b}[2J") && !e.contains('\x1b'), "{e}");
}

/// Every helper src/lower names is one a plan may call (so plans gtrace writes pass).
#[test]
fn every_helper_the_lowering_emits_is_allowed() {
    let mut named = 0;
    let mut files = Vec::new();
    let mut dirs = vec![support::root().join("src/lower")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, _) in text.match_indices("BPF_FUNC_") {
            let name: String = text[i + 9..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            let id = gtrace::bpf::helpers::by_name(&name).unwrap_or_else(|| panic!("BPF_FUNC_{name}"));
            assert!(EMITTED_HELPERS.contains(&id), "src/lower emits bpf_{name}: add it to EMITTED_HELPERS");
            named += 1;
        }
    }
    assert!(named >= EMITTED_HELPERS.len(), "src/lower names its helpers");
}

#[path = "plantrust/fuzz.rs"]
mod fuzz;

/// The fuzzer's plans, each with its binary; the last two with hits counted by the
/// kernel (`kernel_hits`: a program at one function, and beside it one at two whose
/// hits its own counters count).
fn fuzz_bases() -> Vec<(Bundle, PathBuf)> {
    let e2e = support::go_build("e2e", &[]);
    let lines = support::go_build("lines", &[]);
    let panics = support::go_build("panics", &[]);
    let values = support::go_build("values", &[]);
    let (line_text, _, _) = scripts().into_iter().find(|(_, p, _)| *p == "lines").unwrap();
    let mut by_kernel = options();
    by_kernel.lowering.kernel_hits = true;
    let kernel = |text: &str, binary: &Path| {
        let b = bundle_with(text, None, binary, &by_kernel);
        assert!(!b.plan.accounting.kernel_hits.is_empty(), "{text}: no hits counted by the kernel");
        b
    };
    let timed = "on return main.add { @lat = hist(elapsed); @r[ret] = sum(a) }";
    vec![
        (
            bundle("on entry main.add { @n = count(); @h = hist(a) } on return main.add { @r[ret] = sum(a) }", &e2e),
            e2e.clone(),
        ),
        (bundle("on return main.sleepy { @lat = hist(elapsed); printf(\"%d\\n\", ms) }", &e2e), e2e.clone()),
        (bundle(&line_text, &lines), lines),
        (bundle("on panic main.boom { @p[func] = count() }", &panics), panics),
        (bundle("on entry main.describe { print(v); printf(\"%+v\\n\", v) }", &values), values),
        (kernel(KERNEL_COUNTED, &e2e), e2e.clone()),
        (kernel(timed, &e2e), e2e),
    ]
}

/// The facts of the build a plan carries for the trace (the trap kind under each attach
/// point, a PIE's link base, the dynamic types' names and layouts) are checked against
/// the binary: a plan that says otherwise is refused, by probe where it is a point's.
#[test]
fn a_plan_whose_build_facts_are_not_this_binarys_is_refused() {
    let bin = support::go_build("planrun", &[]);
    let target = Target::open(&bin).unwrap();
    let original = bundle(r#"on entry main.hold { printf("%v\n", v) }"#, &bin);
    accepted("planrun", &original, &bin);
    assert!(original.plan.dynamic_types.values().any(|t| t.name == "*main.Point" && t.layout.is_some()));
    let ProbeAttach::Uprobe(points) = &original.plan.probes[0].attach else { panic!("a uprobe") };
    let at = points[0].address;
    let here = original.plan.trap_kinds[&at];
    assert_eq!(here, target.trap_kind_at(at));

    let mut other = original.clone();
    let lie = gtrace::arch::trap::TrapKind::ALL.into_iter().find(|k| *k != here).unwrap();
    other.plan.trap_kinds.insert(at, lie);
    let e = validate::validate(&other, &target).unwrap_err().to_string();
    assert!(e.contains(&format!("attaches to `main.hold` at {at:#x}")) && e.contains("trap kind"), "{e}");

    let mut other = original.clone();
    other.plan.binary.link_base = Some(0x40_0000);
    let e = validate::validate(&other, &target).unwrap_err().to_string();
    assert!(e.contains("first byte is linked at"), "{e}");

    let mut other = original.clone();
    let t = other.plan.dynamic_types.values_mut().next().unwrap();
    t.layout = Some(gtrace::gotypes::TypeId(u32::MAX));
    let e = validate::validate(&other, &target).unwrap_err().to_string();
    assert!(e.contains("whose layout names no type of the plan"), "{e}");

    let mut other = original.clone();
    other.plan.dynamic_types.values_mut().next().unwrap().name = "main.T\x1b[2J".into();
    let e = validate::validate(&other, &target).unwrap_err().to_string();
    assert!(e.contains("type name"), "{e}");
}
