//! The compiler as a library, without privileges: every stdlib library and example script,
//! and one script per language construct, goes through `gtrace::compile` against a real Go
//! program; the object must parse back with aya-obj (every program of the plan in its
//! section, every map defined), and the plan must round-trip through JSON unchanged.

mod support;

use gtrace::compile::{compile, Compiled, Options};
use gtrace::gobin::Target;
use gtrace::library::{self, Root};
use gtrace::plan::{Bundle, MapKind, MapRole, ProbeAttach};
use std::path::Path;

fn root(name: &str, text: &str, dir: Option<&Path>) -> Root {
    Root { name: name.into(), text: text.into(), dir: dir.map(Path::to_path_buf) }
}

/// Compiles `text` against `binary`, or panics with the rendered diagnostics.
fn compiled(text: &str, binary: &Path) -> Compiled {
    compiled_root(root("<test>", text, None), binary)
}

fn compiled_root(root: Root, binary: &Path) -> Compiled {
    let name = root.name.clone();
    let target = Target::open(binary).unwrap_or_else(|e| panic!("{}: {e}", binary.display()));
    compile(root, &target, &Options::default())
        .unwrap_or_else(|report| panic!("{name} does not compile:\n{}", report.render(false)))
}

/// The object holds every program of the plan in its section and every map; the plan
/// and object survive a JSON round trip.
fn assert_whole(what: &str, c: &Compiled) {
    let obj = aya_obj::Object::parse(&c.object).unwrap_or_else(|e| panic!("{what}: aya-obj: {e}"));
    for probe in &c.plan.probes {
        assert!(obj.programs.contains_key(&probe.program), "{what}: program {} missing", probe.program);
        assert!(probe.section.starts_with("uprobe/"), "{what}: section {}", probe.section);
    }
    assert_eq!(obj.programs.len(), c.plan.probes.len(), "{what}: programs");
    for map in &c.plan.maps {
        let m = obj.maps.get(&map.object_name).unwrap_or_else(|| panic!("{what}: map {}", map.object_name));
        assert_eq!(m.key_size(), map.key_size, "{what}: {}", map.object_name);
        assert_eq!(m.value_size(), map.value_size, "{what}: {}", map.object_name);
        assert_eq!(m.max_entries(), map.max_entries, "{what}: {}", map.object_name);
        assert_eq!(m.map_type(), map.kind.bpf_type(), "{what}: {}", map.object_name);
    }
    let bundle = Bundle { plan: c.plan.clone(), object: c.object.clone() };
    let json = bundle.to_json();
    let back: Bundle = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{what}: plan JSON: {e}"));
    assert_eq!(back.object, c.object, "{what}: object bytes");
    assert_eq!(back.to_json(), json, "{what}: plan round trip");
}

#[test]
fn every_stdlib_library_compiles_to_a_whole_object() {
    for (name, _) in library::stdlib::LIBRARIES {
        let bin = &support::program_using(name, None);
        let c = compiled_root(library::root_from_stdlib(name).expect("embedded"), bin);
        assert!(c.script_probes > 0, "{name}");
        assert_whole(name, &c);
    }
}

#[test]
fn every_example_compiles_to_a_whole_object() {
    let worker = support::go_build_at(&support::root().join("examples/worker"), "worker", &[]);
    let dir = support::root().join("examples/worker");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("examples/worker") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "gt") {
            let text = std::fs::read_to_string(&path).expect("read example");
            let c = compiled_root(root(&path.display().to_string(), &text, Some(&dir)), &worker);
            assert_whole(&path.display().to_string(), &c);
            seen += 1;
        }
    }
    assert!(seen >= 3, "examples/worker has its scripts");
}

/// One script per construct, with the test program (tests/go/NAME) whose functions it
/// probes.
const CONSTRUCTS: &[(&str, &str)] = &[
    ("on entry main.add { @n = count() }", "e2e"),
    ("on entry main.add { @s = sum(a); @a = avg(b); @lo = min(a); @hi = max(b); @st = stats(a) }", "e2e"),
    ("on entry main.add { @h = hist(a); @l = lhist(b, 0, 100, 10) }", "e2e"),
    ("on return main.add { @r[ret] = count() }", "e2e"),
    ("on return main.sleepy { @lat = hist(elapsed) }", "e2e"),
    ("on entry main.add { self.a = a } on return main.add { @x = sum(self.a) }", "e2e"),
    ("on entry main.add { printf(\"%d %d %v\\n\", a, b, goid) }", "e2e"),
    ("on entry main.add { print(args); print(a, func, comm) }", "e2e"),
    ("on entry main.add { if a > 1 && b != 2 { @big = count() } else { @small = count() } }", "e2e"),
    ("on entry main.add { @m[a] = b; delete(@m[a]); x := a * 2 + b % 3; @x = sum(x) }", "e2e"),
    ("on entry main.add { @s[ustack] = count() }", "e2e"),
    ("on entry \"main.(*T).Add\" { @d = sum(delta); @t = sum(t.total) }", "e2e"),
    ("on entry main.handle { @p[r.URL.Path] = count(); @n = sum(len(r.URL.Path)) }", "values"),
    (
        "on entry main.greet { if hasPrefix(name, \"a\") { @a = count() }; if name == \"bob\" { @b = count() } }",
        "values",
    ),
    ("on entry main.total { @n = sum(len(xs)); @first = sum(xs[0]) }", "values"),
    ("on entry main.check { if err != nil { printf(\"%v\\n\", err) } }", "values"),
    ("on entry main.describe { print(v) }", "values"),
    ("on return main.named { @q = sum(q); print(err) }", "values"),
    ("on begin { @b = count() } on end { print(@b) } on interval 10ms { clear(@b) }", "values"),
    ("on entry main.add { exit() }", "e2e"),
    ("on entry main.split { print(p); printf(\"%+v %#v\\n\", p, p) }", "values"),
    ("on entry main.handle { printf(\"%v %#v\\n\", r, r.URL) }", "values"),
    ("on entry main.total { print(xs) }", "values"),
    ("on entry main.handle { if defined(main.nosuch) { print(1) } else { @p = sum(len(r.URL.Path)) } }", "values"),
];

/// Each construct compiles against tests/go/values and tests/go/e2e, and its plan says
/// what the construct needs.
#[test]
fn every_construct_lowers() {
    let values = support::go_build("values", &[]);
    let e2e = support::go_build("e2e", &[]);
    let cases: Vec<(&str, &Path)> = CONSTRUCTS
        .iter()
        .map(|(script, program)| (*script, if *program == "e2e" { &*e2e } else { &*values }))
        .collect();
    for (script, binary) in cases {
        let c = compiled(script, binary);
        assert_whole(script, &c);
    }
    // What some constructs need of the plan.
    let c = compiled("on return main.sleepy { @lat = hist(elapsed) }", &e2e);
    assert!(c.plan.maps.iter().any(|m| matches!(m.role, MapRole::Goroutines)), "elapsed keeps frames");
    assert!(c.plan.probes.iter().any(|p| p.describe.contains("entry times")), "a timing program");
    let c = compiled("on entry main.add { self.a = a } on return main.add { @x = sum(self.a) }", &e2e);
    assert!(c.plan.maps.iter().any(|m| matches!(m.role, MapRole::SelfVars)));
    assert!(c.plan.probes.iter().any(|p| p.describe.contains("free self variables")));
    let c = compiled("on entry main.add { @h = hist(a) }", &e2e);
    let user = c.plan.maps.iter().find(|m| matches!(m.role, MapRole::User { .. })).expect("a user map");
    assert_eq!((user.kind, user.max_entries), (MapKind::PercpuArray, 1), "without keys, one value per CPU");
    let c = compiled("on entry main.add { @h[b] = hist(a) }", &e2e);
    let user = c.plan.maps.iter().find(|m| matches!(m.role, MapRole::User { .. })).expect("a user map");
    assert_eq!(user.kind, MapKind::PercpuHash, "aggregations are per CPU");
    let c = compiled("on begin { print(1) } on interval 5ms { print(2) }", &e2e);
    assert!(c.plan.probes.iter().any(|p| matches!(p.attach, ProbeAttach::Begin)));
    assert!(c.plan.probes.iter().any(|p| matches!(p.attach, ProbeAttach::Interval { nanos: 5_000_000 })));
}

/// Every construct compiles for arm64 too, against the programs cross-built by each
/// toolchain (Go 1.17 builds no generics: not tests/go/values).
#[test]
fn every_construct_lowers_for_arm64() {
    use support::toolchain::{build_arm64, toolchains, PLAIN};
    for tc in toolchains() {
        for (program, scripts) in ["e2e", "values"].map(|p| (p, CONSTRUCTS.iter().filter(move |c| c.1 == p))) {
            if program == "values" && tc == support::toolchain::OLDEST {
                continue;
            }
            let Some(binary) = build_arm64(program, &tc, PLAIN) else { continue };
            for (script, _) in scripts {
                let c = compiled(script, &binary);
                assert_eq!(c.plan.binary.arch, gtrace::arch::Arch::Arm64, "{tc}: {script}");
                assert_whole(&format!("{tc} arm64: {script}"), &c);
            }
        }
    }
}

#[test]
fn return_probes_attach_at_every_ret_and_entries_after_the_stack_check() {
    let e2e = support::go_build("e2e", &[]);
    let target = Target::open(&e2e).unwrap();
    let f = target.find("main.grow").first().copied().cloned().expect("main.grow");
    let sites = target.probe_sites(&f).unwrap();
    let c = compiled("on entry main.grow { @e = count() } on return main.grow { @r = count() }", &e2e);
    let points = |word: &str| -> Vec<u64> {
        c.plan
            .probes
            .iter()
            .filter(|p| p.describe.starts_with(word))
            .flat_map(|p| match &p.attach {
                ProbeAttach::Uprobe(points) => points.iter().map(|pt| pt.address).collect(),
                _ => Vec::new(),
            })
            .collect()
    };
    assert_eq!(points("on entry"), vec![sites.entry]);
    assert_eq!(points("on return"), sites.returns);
    assert!(sites.entry > f.addr, "after the stack check");
}

#[test]
fn errors_come_back_as_a_report_with_sources() {
    let e2e = support::go_build("e2e", &[]);
    let target = Target::open(&e2e).unwrap();
    let Err(report) =
        compile(root("<test>", "on entry main.add { @s = sum(nope) }", None), &target, &Options::default())
    else {
        panic!("an unknown name compiled")
    };
    assert!(report.has_errors());
    let text = report.render(false);
    assert!(text.contains("unknown name `nope`") && text.contains("<test>:1:"), "{text}");
}

/// What the kernel would refuse is a clear error at the probe, before anything loads.
#[test]
fn kernel_limits_are_errors_at_the_probe() {
    let e2e = support::go_build("e2e", &[]);
    let values = support::go_build("values", &[]);
    let target = Target::open(&e2e).unwrap();
    let error = |script: &str, target: &Target| -> String {
        match compile(root("<test>", script, None), target, &Options::default()) {
            Ok(_) => panic!("compiled: {}", &script[..script.len().min(80)]),
            Err(report) => report.render(false),
        }
    };
    let many_maps: Vec<String> = (0..70).map(|i| format!("@m{i} = count()")).collect();
    let text = error(&format!("on entry main.add {{ {} }}", many_maps.join("; ")), &target);
    // 70 user maps: counts without keys are arrays of one element (nothing inserted, so
    // no zeros to insert and no refused insertion to count).
    assert!(text.contains("this probe uses 70 maps; the kernel allows at most 64"), "{text}");
    assert!(text.contains("<test>:1:1"), "{text}");

    let values_target = Target::open(&values).unwrap();
    let verbs = "%s".repeat(480);
    let names = vec!["name"; 480].join(", ");
    let text = error(&format!("on entry main.greet {{ printf(\"{verbs}\", {names}) }}"), &values_target);
    assert!(text.contains("this needs 32768 bytes in one record"), "{text}");
    assert!(text.contains("--string-limit"), "{text}");

    let comms = vec!["comm"; 480].join(", ");
    let text = error(&format!("on entry main.add {{ printf(\"{verbs}\", {comms}) }}"), &target);
    assert!(text.contains("more eBPF than one program can hold"), "{text}");
    assert!(!text.contains("bug in gtrace"), "{text}");

    let intervals: String = (1..=9).map(|i| format!("on interval {i}s {{ print({i}) }}\n")).collect();
    let text = error(&intervals, &target);
    assert!(text.contains("more than 8 `on interval` probes") && text.contains("<test>:9:1"), "{text}");
}

/// `hasPrefix(s, "")` is true for every string and reads nothing of it: it compiled to a
/// read of 0 bytes, which the kernel refuses, and which `--check` without privileges
/// (no kernel verifier) let through. Checked on the instructions, without privileges.
#[test]
fn an_empty_prefix_reads_nothing() {
    let bin = support::go_build("values", &[]);
    let read = |script: &str| {
        let c = compiled(script, &bin);
        c.programs.iter().any(|(_, p)| gtrace::bpf::disasm::disasm(p).contains("probe_read_user"))
    };
    assert!(read(r#"on entry main.greet { if hasPrefix(name, "a") { @e = count() } }"#));
    assert!(!read(r#"on entry main.greet { if hasPrefix(name, "") { @e = count() } }"#));
}

/// A map keyed by the function alone is a per-CPU array, allocated whole at load, while
/// its functions' values fit 4 MiB a CPU; a hist() (8 KiB a value) over more functions is
/// a hash that grows as functions are hit.
#[test]
fn a_hist_over_many_functions_is_a_hash() {
    let e2e = support::go_build("e2e", &[]);
    let user_map = |script: &str| {
        let c = compiled(script, &e2e);
        let m = c.plan.maps.iter().find(|m| matches!(m.role, MapRole::User { .. })).expect("a user map").clone();
        (m.kind, m.max_entries, c.plan.functions.len())
    };
    assert_eq!(user_map("on entry main.add { hist(a) }").0, MapKind::PercpuArray);
    let (kind, _, functions) = user_map(r#"on entry "runtime.*" { hist(1) }"#);
    assert!(functions as u64 * 8096 > 4 << 20, "{functions} functions");
    assert_eq!(kind, MapKind::PercpuHash);
    // A count over the same functions is 8 bytes a function: an array of one a function.
    assert_eq!(user_map(r#"on entry "runtime.*" { count() }"#), (MapKind::PercpuArray, functions as u32, functions));
}

/// Issue 26's first step: a script that reads no Go value compiles without reading the
/// binary's DWARF (functions, entries and RETs come from the symbol table and the code,
/// the runtime's layouts are asked only when a program reads them); one that reads a
/// parameter, the goroutine id or times calls does read it.
#[test]
fn only_scripts_that_read_go_values_read_dwarf() {
    let bin = support::go_build("e2e", &[]);
    let read = |text: &str| {
        let target = Target::open(&bin).expect("open tests/go/e2e");
        assert!(target.has_dwarf());
        let c = compile(root("<test>", text, None), &target, &Options::default())
            .unwrap_or_else(|r| panic!("{text}: {}", r.render(false)));
        assert_whole(text, &c);
        target.dwarf_read()
    };
    for text in [
        "on entry main.add { @c = count() }",
        "on entry \"main.*\" { @[func] = count() } on return main.add { @r = count() }",
        "on entry main.add { @c = count(); printf(\"%s %d\\n\", func, pid) } on interval 1s { print(@c) }",
        "on entry main.add { self.n = 1 } on return main.add { if self.n == 1 { @c = count() } }",
    ] {
        assert!(!read(text), "{text}: DWARF was read");
    }
    for text in [
        "on entry main.add { @s = sum(a) }",
        "on entry main.add { @g[goid] = count() }",
        "on return main.add { @lat = hist(elapsed) }",
    ] {
        assert!(read(text), "{text}: DWARF was not read");
    }
}
