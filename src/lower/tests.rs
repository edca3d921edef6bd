//! The Go-free tier: scripts checked and lowered against `gobin::fake::Fake`, a binary
//! described in a few lines, with no Go toolchain, no file and no privileges (each test
//! runs in milliseconds). One test per construct at least: entries, parameters, returns
//! and `elapsed`, maps, hist(), printf, conditions, `self`, package variables, `m[k]` of
//! a Go map, arm64's registers, positional arguments without DWARF, `on panic`, and the
//! errors a user gets. What the end-to-end tests
//! prove on a real program and kernel, these keep true of a lowering change in a blink.

use crate::arch::Arch;
use crate::check::{self, Checked, Name};
use crate::compile::{self, Options};
use crate::diag::{Diagnostics, Report};
use crate::gobin::fake::Fake;
use crate::gobin::GoBinary;
use crate::library::Root;
use crate::lower::{self, Lowered};
use crate::plan::{Agg, MapRole, MapValue, ProbeAttach};

/// A program with the functions the tests probe.
fn fake() -> Fake {
    Fake::new()
        .function("main.add", &[("a", "int"), ("b", "int")], &[("~r0", "int")])
        .function("main.greet", &[("name", "string"), ("times", "int32")], &[])
        .function("main.lookup", &[("m", "map[string]int"), ("k", "string")], &[("~r0", "int")])
        .variable("main.limit", "int", 0x5b0000)
}

/// Checks and lowers `text` against `binary`, or panics with the rendered diagnostics.
pub(super) fn lowered(binary: &dyn GoBinary, text: &str) -> (Checked, Lowered) {
    lowered_with(binary, text, &Options::default())
}

/// `lowered` with `opts` (accounting, limits).
pub(super) fn lowered_with(binary: &dyn GoBinary, text: &str, opts: &Options) -> (Checked, Lowered) {
    lowered_named(binary, "<test>", text, opts)
}

/// `lowered_with` of a file named `name` (`stdlib/NAME.gt`: as a library's).
pub(super) fn lowered_named(binary: &dyn GoBinary, name: &str, text: &str, opts: &Options) -> (Checked, Lowered) {
    let root = Root { name: name.into(), text: text.into(), dir: None };
    let (sources, script) = compile::parse(root, opts).unwrap_or_else(|r| panic!("{}", r.render(false)));
    let mut diags = Diagnostics::default();
    let fail = |diags: Diagnostics| -> ! {
        let report = Report { sources: sources.clone(), diagnostics: diags.items };
        panic!("{text}:\n{}", report.render(false))
    };
    let Some(checked) = check::check(&script, binary, &mut diags, opts.string_limit) else { fail(diags) };
    let Some(lowered) = lower::lower(&script, &checked, &sources, &opts.lowering, &mut diags) else { fail(diags) };
    (checked, lowered)
}

/// The rendered errors of compiling `text` against `binary` (empty when it compiles).
fn errors(binary: &dyn GoBinary, text: &str) -> String {
    let root = Root { name: "<test>".into(), text: text.into(), dir: None };
    match compile::compile(root, binary, &Options::default()) {
        Ok(_) => String::new(),
        Err(report) => report.render(false),
    }
}

/// The program's instructions as `--emit asm` prints them.
pub(super) fn asm(lowered: &Lowered, program: &str) -> String {
    let (_, p) = lowered.programs.iter().find(|(n, _)| n == program).unwrap_or_else(|| panic!("no {program}"));
    crate::bpf::disasm::disasm(p)
}

/// Where a program attaches: (function, address, file offset) of each point.
fn points(lowered: &Lowered, program: &str) -> Vec<(String, u64, u64)> {
    let probe = lowered.plan.probes.iter().find(|p| p.program == program).expect("the program's probe");
    let ProbeAttach::Uprobe(points) = &probe.attach else { panic!("{program} is not a uprobe") };
    points.iter().map(|p| (p.function.clone(), p.address, p.file_offset)).collect()
}

/// The fake's own sites for `function`: what the plan must attach to.
fn sites(binary: &dyn GoBinary, function: &str) -> crate::arch::ProbeSites {
    binary.probe_sites(binary.find(function)[0]).expect("sites")
}

/// The user map `name` of the plan, with its value.
pub(super) fn user_map<'p>(lowered: &'p Lowered, name: &str) -> (&'p crate::plan::MapSpec, &'p MapValue) {
    (lowered.plan.maps.iter())
        .find_map(|m| match &m.role {
            MapRole::User { name: n, value, .. } if n == name => Some((m, value)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no map @{name}"))
}

/// The names of the GoValues an instance reads, with their places.
fn go_values(checked: &Checked) -> Vec<(String, crate::arch::abi::Location)> {
    let mut out: Vec<_> = (checked.instances.iter().flat_map(|i| i.facts.names.values()))
        .filter_map(|n| match n {
            Name::GoValue { name, location, .. } => Some((name.clone(), location.clone())),
            _ => None,
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.dedup();
    out
}

#[test]
fn an_entry_probe_attaches_after_the_stack_check_at_its_file_offset() {
    let bin = fake();
    let (_, l) = lowered(&bin, "on entry main.add { @calls = count() }");
    let want = sites(&bin, "main.add").entry;
    assert_eq!(points(&l, "p0"), vec![("main.add".to_string(), want, bin.file_offset(want).unwrap())]);
    assert_eq!(l.plan.functions, vec!["main.add".to_string()]);
    assert_eq!(l.plan.binary.path, bin.path());
    let (_, value) = user_map(&l, "calls");
    assert!(matches!(value, MapValue::Agg { agg: Agg::Count, .. }), "{value:?}");
}

#[test]
fn parameters_are_read_from_the_abi_registers_of_amd64_and_arm64() {
    // struct pt_regs: rbx at 40, rax at 80 (x86-64); user_pt_regs: x0 at 0, x1 at 8.
    for (arch, first, second) in [(Arch::X86_64, 80, 40), (Arch::Arm64, 0, 8)] {
        let bin = Fake::for_arch(arch).function("main.add", &[("a", "int"), ("b", "int")], &[]);
        let (checked, l) = lowered(&bin, "on entry main.add { @s = sum(a * 10 + b) }");
        assert_eq!(go_values(&checked).len(), 2, "{arch:?}");
        let code = asm(&l, "p0");
        for off in [first, second] {
            assert!(code.contains(&format!("(r6 +{off})")), "{arch:?}: no read at pt_regs+{off}:\n{code}");
        }
    }
}

#[test]
fn a_return_probe_reads_results_and_times_calls_with_the_runtime_programs() {
    let bin = fake();
    let (checked, l) = lowered(&bin, "on return main.add { @lat = hist(elapsed); @r = sum(ret) }");
    let add = sites(&bin, "main.add");
    let returns: Vec<u64> = points(&l, "p0").iter().map(|p| p.1).collect();
    assert_eq!(returns, add.returns);
    // The entry is timed, and copystack and recovery keep the frames true.
    for function in ["main.add", "runtime.copystack", "runtime.recovery"] {
        let at = if function == "main.add" { add.entry } else { sites(&bin, function).entry };
        let attached = l.plan.probes.iter().any(|p| match &p.attach {
            ProbeAttach::Uprobe(points) => points.iter().any(|q| q.function == function && q.address == at),
            _ => false,
        });
        assert!(attached, "nothing attached at {function}'s entry");
    }
    assert!(checked.binary.panic_layout.is_some());
}

#[test]
fn without_dwarf_parameters_are_read_by_position() {
    // struct pt_regs: rbx at 40, rax at 80.
    let bin = fake().without_dwarf();
    let (_, l) = lowered(&bin, "on entry main.add { @s = sum(arg0 * 10 + arg1) }");
    let code = asm(&l, "p0");
    assert!(code.contains("(r6 +80)") && code.contains("(r6 +40)"), "{code}");
    let named = errors(&bin, "on entry main.add { @s = sum(a) }");
    assert!(named.contains("unknown name `a`"), "{named}");
}

#[test]
fn an_on_panic_probe_runs_at_recovery_and_fatalpanic() {
    let bin = fake();
    let (checked, l) = lowered(&bin, "on panic main.add { @p[func] = count() }");
    let at: Vec<(String, u64)> = points(&l, "p0").into_iter().map(|(f, a, _)| (f, a)).collect();
    let want = ["runtime.recovery", "runtime.fatalpanic"].map(|f| (f.to_string(), sites(&bin, f).entry));
    assert_eq!(at, want.to_vec());
    assert!(checked.binary.runtime.contains_key("runtime.copystack"));
}

#[test]
fn map_keys_and_values_take_the_types_of_go_values() {
    let bin = fake();
    let (_, l) = lowered(&bin, "on entry main.greet { @by[name, times] = count(); @last[times] = times }");
    let (spec, _) = user_map(&l, "by");
    let MapRole::User { keys, .. } = &spec.role else { unreachable!() };
    assert_eq!(keys.len(), 2);
    let (last, value) = user_map(&l, "last");
    assert!(matches!(value, MapValue::Plain(_)), "{value:?}");
    assert_eq!(last.value_size, 8);
}

#[test]
fn hist_keeps_its_buckets_in_a_per_cpu_value() {
    let bin = fake();
    let (_, l) = lowered(&bin, "on entry main.add { @h = hist(a) }");
    let (spec, value) = user_map(&l, "h");
    assert!(matches!(value, MapValue::Agg { agg: Agg::Hist, .. }), "{value:?}");
    assert!(spec.value_size > 16 * 8, "a hist's value holds its buckets: {}", spec.value_size);
}

#[test]
fn printf_makes_an_event_with_a_field_per_argument() {
    let bin = fake();
    let (_, l) = lowered(&bin, r#"on entry main.greet { printf("%s x%d\n", name, times) }"#);
    assert_eq!(l.plan.events.len(), 1);
    let event = &l.plan.events[0];
    assert!(matches!(&event.kind, crate::plan::EventKind::Printf { format } if format == "%s x%d\n"));
    assert_eq!(event.fields.len(), 2);
    assert!(asm(&l, "p0").contains("ringbuf_output"), "{}", asm(&l, "p0"));
}

#[test]
fn a_condition_branches_around_what_it_guards() {
    let bin = fake();
    let (_, plain) = lowered(&bin, "on entry main.add { @big = count() }");
    let (_, guarded) = lowered(&bin, "on entry main.add { if a > 1000 { @big = count() } }");
    let jumps = |l: &Lowered| asm(l, "p0").lines().filter(|l| l.contains("goto")).count();
    assert!(jumps(&guarded) > jumps(&plain), "{}", asm(&guarded, "p0"));
    assert!(asm(&guarded, "p0").contains("1000"));
}

#[test]
fn self_variables_are_freed_at_goexit0() {
    let bin = fake();
    let (_, l) = lowered(&bin, "on entry main.add { self.a = a } on return main.add { @s = sum(self.a) }");
    let exit = sites(&bin, "runtime.goexit0").entry;
    let freed = l.plan.probes.iter().any(|p| match &p.attach {
        ProbeAttach::Uprobe(points) => points.iter().any(|q| q.function == "runtime.goexit0" && q.address == exit),
        _ => false,
    });
    assert!(freed, "no program at runtime.goexit0");
}

#[test]
fn a_package_variable_is_read_at_its_address() {
    let bin = fake();
    let (checked, l) = lowered(&bin, "on entry main.add { @l = sum(main.limit) }");
    let global = checked.instances[0].facts.names.values().find_map(|n| match n {
        Name::Global { name, addr } => Some((name.clone(), *addr)),
        _ => None,
    });
    assert_eq!(global, Some(("main.limit".to_string(), 0x5b0000)));
    assert!(asm(&l, "p0").contains("r0 = 0x5b0000 ll"), "{}", asm(&l, "p0"));
}

#[test]
fn a_go_map_index_hashes_with_the_runtime_keys() {
    let bin = fake();
    let (checked, l) = lowered(&bin, r#"on entry main.lookup { @v = sum(m["a"]) }"#);
    assert_eq!(checked.binary.aes, bin.aes_globals());
    assert!(l.plan.maps.iter().any(|m| matches!(m.role, MapRole::AesTables)), "no AES tables map");
}

#[test]
fn lowering_reads_only_what_the_checker_put_in_checked() {
    // Every attach address of the plan has the file offset the checker asked for.
    let bin = fake();
    let (checked, l) =
        lowered(&bin, "on return main.add { @lat = hist(elapsed) } on entry main.greet { self.t = times }");
    for probe in &l.plan.probes {
        let ProbeAttach::Uprobe(points) = &probe.attach else { continue };
        for p in points {
            assert_eq!(checked.binary.file_offsets.get(&p.address), Some(&p.file_offset), "{}", probe.program);
            assert_eq!(bin.file_offset(p.address), Some(p.file_offset));
        }
    }
}

#[test]
fn errors_name_what_is_wrong_with_a_hint() {
    let bin = fake();
    let unknown = errors(&bin, "on entry main.ad { @c = count() }");
    assert!(unknown.contains("no function matches `main.ad`"), "{unknown}");
    assert!(unknown.contains("did you mean `main.add`"), "{unknown}");
    let no_param = errors(&bin, "on entry main.add { @c = sum(c) }");
    assert!(no_param.contains("unknown name `c`") && no_param.contains("<test>:1:30"), "{no_param}");
    assert!(no_param.contains("did you mean `a`?"), "{no_param}");
    let bad_cond = errors(&bin, "on entry main.add { if a { @c = count() } }");
    assert!(bad_cond.contains("not a bool") && bad_cond.contains("!= 0"), "{bad_cond}");
    assert_eq!(errors(&bin, "on entry main.add { @c = count() }"), "");
}

/// `v.(*T)` of an interface compares its dynamic type with `*T`'s descriptor and reads
/// the field through the data word; of a positional word, it reads straight through it.
#[test]
fn type_assertions_check_an_interfaces_dynamic_type_and_read_words_as_pointers() {
    let binary = Fake::new().structure("main.Point", &[("X", "int", 0), ("Y", "int", 8)], 0x4a1230).function(
        "main.inspect",
        &[("v", "interface {}")],
        &[],
    );
    let (checked, out) = lowered(&binary, "on entry main.inspect { @x = sum(v.(*main.Point).Y) }");
    assert_eq!(checked.instances[0].facts.dynamic_asserts.values().copied().collect::<Vec<_>>(), vec![0x4a1230]);
    let text = asm(&out, &out.plan.probes[0].program);
    assert!(text.contains("= 0x4a1230 ll"), "the descriptor is compared:\n{text}");

    let stripped = Fake::new()
        .structure("main.Point", &[("X", "int", 0), ("Y", "int", 8)], 0x4a1230)
        .function("main.inspect", &[("v", "interface {}")], &[])
        .without_dwarf();
    let (checked, _) = lowered(&stripped, "on entry main.inspect { @x = sum(arg1.(*main.Point).Y) }");
    assert!(checked.instances[0].facts.dynamic_asserts.is_empty(), "a word is not checked");
    let e = errors(&binary, "on entry main.inspect { @x = sum(v.(*main.Nope).Y) }");
    assert!(e.contains("no type `main.Nope` in this binary"), "{e}");
    let e = errors(&binary, "on entry main.inspect { @x = sum(v.(main.Point).Y) }");
    assert!(e.contains("is not a pointer type"), "{e}");
}

#[test]
fn header_values_as_map_keys_fit_the_stack_by_reusing_slots() {
    // 520 bytes of stack when slots were never reused (issue 20): now within 512.
    let bin = fake().function("main.handle", &[("h", "map[string][]string")], &[("~r0", "int")]);
    let (_, l) = lowered(&bin, r#"on return main.handle { @ids[h["X-Id"][0]] = count() }"#);
    assert!(!l.plan.maps.iter().any(|m| m.object_name == crate::lower::ir::SPILL), "a spill map");
    // Two lookups as two keys (528 bytes before): the first lookup's probe loop keeps
    // about 520 bytes live at once, so a few slots spill.
    let (_, l) = lowered(&bin, r#"on entry main.handle { @p[a: h["X-Id"][0], b: h["X-Region"][0]] = count() }"#);
    assert_eq!(l.plan.probes.len(), 1);
}

#[test]
fn a_key_larger_than_the_stack_spills_to_the_spill_map() {
    let bin = fake();
    let keys: Vec<String> = (0..8).map(|i| format!("k{i}: name")).collect();
    let script = format!("on entry main.greet {{ @m[{}] = count() }}", keys.join(", "));
    let (_, l) = lowered(&bin, &script);
    let spill = l.plan.maps.iter().find(|m| m.object_name == crate::lower::ir::SPILL).expect("a spill map");
    assert!(spill.value_size >= 8 * 72, "{spill:?}");
    let asm = asm(&l, "p0");
    assert!(asm.contains("map[spill]"), "{asm}");
}

#[test]
fn a_trace_contexts_frame_is_popped_at_its_returns_and_goes_with_its_entry() {
    // No `on panic` and no `on return` of main.add: its frames are still popped at its
    // RETs (else the context outlives the call: spans after it, or on a goroutine given
    // the same g, would join it), tied to its entry for --budget; Goexit forgets frames.
    let bin = fake();
    let script = "on entry main.add { trace_context(\"00-x\") }\non return main.greet { span() }";
    let (_, l) = lowered(&bin, script);
    let returns: Vec<u64> = points(&l, "frame_pops").iter().map(|p| p.1).collect();
    assert_eq!(returns, sites(&bin, "main.add").returns);
    let goexit: Vec<String> = points(&l, "goexit").into_iter().map(|p| p.0).collect();
    assert_eq!(goexit, ["runtime.Goexit"]);
    let tied = l.plan.accounting.ties.iter().any(|t| {
        let at = |p: &str| t.iter().any(|s| s.program.starts_with(p) && s.function.as_deref() == Some("main.add"));
        at("entry") && at("frame_pops")
    });
    assert!(tied, "{:?}", l.plan.accounting.ties);
}

/// The budget's units of `l`'s plan, each as its sites' (program, function) in the order
/// a cut detaches them.
fn units(l: &Lowered) -> Vec<Vec<(String, Option<String>)>> {
    let (units, _) = crate::trace::budget::units::units(&l.plan);
    let site = |s: &crate::plan::SiteRef| (s.program.clone(), s.function.clone());
    units.into_iter().map(|u| u.sites.iter().map(site).collect()).collect()
}

/// The program that pushes `function`'s frames at its entry.
fn entry_of(l: &Lowered, function: &str) -> String {
    let at = |p: &&crate::plan::ProbeSpec| matches!(&p.attach, ProbeAttach::Uprobe(q) if q.iter().any(|q| q.function == function));
    let entry = l.plan.probes.iter().filter(at).find(|p| p.program.starts_with("entry"));
    entry.expect("an entry program").program.clone()
}

/// Every site of `first` for `function` (or the whole program) comes before every site
/// of `then` for it, in one unit of the budget.
fn goes_before(l: &Lowered, function: &str, first: &str, then: &str) {
    let units = units(l);
    let of = |u: &[(String, Option<String>)], p: &str| -> Vec<usize> {
        (u.iter().enumerate())
            .filter(|(_, (q, f))| q == p && f.as_deref().is_none_or(|f| f == function))
            .map(|(k, _)| k)
            .collect()
    };
    let unit = units.iter().find(|u| !of(u, first).is_empty()).unwrap_or_else(|| panic!("no {first}: {units:?}"));
    let (a, b) = (of(unit, first), of(unit, then));
    assert!(!b.is_empty(), "{then} ({function}) not in the unit of {first}: {units:?}");
    assert!(a.iter().max() < b.iter().min(), "{then} before {first} ({function}): {unit:?}");
}

#[test]
fn every_trace_contexts_entry_is_detached_before_its_pops() {
    // Two functions that read a trace context, and with `on panic` too: each entry goes
    // before the frame_pops at its RETs, and the panic's report before frame_pops.
    let bin = fake();
    let two = "on entry main.add { trace_context(\"00-x\") }\n\
               on entry main.greet { trace_context(\"00-y\") }\n\
               on return main.lookup { span() }";
    let panics = format!("{two}\non panic main.lookup {{ @p[func] = count() }}");
    for script in [two.to_string(), panics] {
        let (_, l) = lowered(&bin, &script);
        for f in ["main.add", "main.greet"] {
            goes_before(&l, f, &entry_of(&l, f), "frame_pops");
        }
        if script.contains("on panic") {
            goes_before(&l, "main.lookup", "p3", "frame_pops");
        }
    }
}

#[test]
fn a_trace_contexts_entry_is_detached_before_the_return_probe_that_pops_it() {
    // main.add's frames are popped by its `on return` with `elapsed`, not frame_pops.
    let bin = fake();
    let script = "on entry main.add { trace_context(\"00-x\") }\n\
                  on return main.add { @t = sum(elapsed) }\n\
                  on return main.lookup { span() }";
    let (_, l) = lowered(&bin, script);
    goes_before(&l, "main.add", &entry_of(&l, "main.add"), "p1");
}

#[test]
fn a_trace_contexts_frames_are_forgotten_where_every_goroutine_ends() {
    // A goroutine that returns from its function ends at runtime.goexit0(gp), on g0,
    // never at runtime.Goexit: the frames of gp (its argument, not the g register) go.
    let bin = fake();
    let script = "on entry main.add { trace_context(\"00-x\") }\non return main.greet { span() }";
    let (_, l) = lowered(&bin, script);
    let ends: Vec<(String, u64)> = points(&l, "goexit0").into_iter().map(|p| (p.0, p.1)).collect();
    assert_eq!(ends, [("runtime.goexit0".to_string(), sites(&bin, "runtime.goexit0").entry)]);
    // Without a trace context, nothing there.
    let (_, l) = lowered(&bin, "on return main.greet { span() }");
    assert!(!l.plan.probes.iter().any(|p| p.program == "goexit0"));
}

#[test]
fn a_trace_context_with_only_ended_spans_has_the_runtime_it_needs() {
    // No probe times a call (the span has its own start), yet the context's frames need
    // runtime.copystack: the checker must ask the binary for it.
    let bin = fake();
    let script = "on entry main.add { trace_context(\"00-x\") }\n\
                  on entry main.greet { span(start: 1) }";
    let (_, l) = lowered(&bin, script);
    assert!(l.plan.probes.iter().any(|p| p.program == "stack_moves"));
}

#[test]
fn a_return_probe_carrying_parameters_pops_the_context_frame_alone() {
    // `on return main.add` reads a parameter (carried from the entry, no `elapsed`): it
    // pops main.add's frames, so frame_pops must not pop them a second time.
    let bin = fake();
    let script = "on entry main.add { trace_context(\"00-x\") }\n\
                  on return main.add { @s = sum(a) }\n\
                  on return main.greet { span() }";
    let (_, l) = lowered(&bin, script);
    let pops = l.plan.probes.iter().filter(|p| p.program == "frame_pops");
    assert!(pops
        .flat_map(|p| match &p.attach {
            ProbeAttach::Uprobe(q) => q.clone(),
            _ => Vec::new(),
        })
        .all(|q| q.function != "main.add"));
}

#[test]
fn a_context_parent_the_sdk_cannot_be_read_in_is_said() {
    // The fake has no OpenTelemetry SDK: span(parent: ctx) finds no parent, and says so.
    let bin = fake().function("main.call", &[("ctx", "context.Context")], &[]);
    let text = "on entry main.call { span(start: 1, parent: ctx) }";
    let root = Root { name: "<test>".into(), text: text.into(), dir: None };
    let compiled = compile::compile(root, &bin, &Options::default()).unwrap_or_else(|r| panic!("{}", r.render(false)));
    let said = compiled.warnings.render(false);
    assert!(said.contains("no OpenTelemetry SDK span can be read") && said.contains("<test>:1:"), "{said}");
    // A traceparent parent is read by gtrace itself: nothing said.
    let text = "on entry main.call { span(start: 1, parent: \"00-x\") }";
    let root = Root { name: "<test>".into(), text: text.into(), dir: None };
    let compiled = compile::compile(root, &bin, &Options::default()).unwrap_or_else(|r| panic!("{}", r.render(false)));
    assert!(!compiled.warnings.render(false).contains("OpenTelemetry SDK"));
}

/// A pointer path read in several places of a probe (`w.req`, under a condition and
/// after it) is read from the target once a run, whichever branch runs, and every use
/// gets its value (paths.rs): the program run by the interpreter on a made-up target.
#[test]
fn a_pointer_path_is_read_once_a_run_under_any_condition() {
    let bin = Fake::new()
        .structure("main.Req", &[("A", "int", 0), ("B", "int", 8)], 0x4a1000)
        .structure("main.W", &[("n", "int", 0), ("req", "*main.Req", 8)], 0x4a2000)
        .function("main.finish", &[("w", "*main.W")], &[]);
    let script = "on entry main.finish { if w.n > 0 { @s = sum(w.req.A) }; @t = sum(w.req.B + w.req.A) }";
    let (_, l) = lowered(&bin, script);
    let (_, prog) = l.programs.iter().find(|(n, _)| n == "p0").expect("p0");
    let (w, req) = (0x7000u64, 0x8000u64);
    let words = |ws: &[u64]| ws.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
    // Every register holds w: wherever the ABI put it, the program finds it.
    let regs = words(&[w; 32]);
    let maps: Vec<(String, Vec<u8>)> = (prog.relocations.iter().map(|r| r.map.clone()))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|m| (m, vec![0u8; 4096]))
        .collect();
    let sum_of = |run: &crate::bpf::interp::Run, name: &str| {
        let object = &user_map(&l, name).0.object_name;
        let bytes = &run.maps.iter().find(|(n, _)| n == object).expect("the map").1;
        u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"))
    };
    for n in [0u64, 1] {
        let world = crate::bpf::interp::World {
            maps: maps.clone(),
            user: vec![(w, words(&[n, req])), (req, words(&[5, 7]))],
            ..Default::default()
        };
        let run =
            crate::bpf::interp::run_probe(prog, &world, &regs).unwrap_or_else(|e| panic!("{e}\n{}", asm(&l, "p0")));
        // w.n and w.req are read together (coalesce.rs): count the reads that cover w.req.
        let of_req = run.reads.iter().filter(|&&(addr, len)| addr <= w + 8 && w + 16 <= addr + len).count();
        assert_eq!(of_req, 1, "w.req read {of_req} times with w.n = {n}: {:?}\n{}", run.reads, asm(&l, "p0"));
        assert_eq!(sum_of(&run, "t"), 12, "w.req.B + w.req.A with w.n = {n}");
        assert_eq!(sum_of(&run, "s"), if n > 0 { 5 } else { 0 }, "w.req.A under w.n > 0, w.n = {n}");
    }
}

#[test]
fn an_aggregation_without_keys_is_a_per_cpu_array_of_one_element() {
    let bin = fake();
    let kind = |l: &Lowered, name: &str| {
        let (m, _) = user_map(l, name);
        (m.kind, m.key_size, m.max_entries)
    };
    let (_, l) = lowered(&bin, "on return main.add { @h = hist(elapsed); @c = count() }");
    assert_eq!(kind(&l, "h"), (crate::plan::MapKind::PercpuArray, 4, 1));
    assert_eq!(kind(&l, "c"), (crate::plan::MapKind::PercpuArray, 4, 1));
    let text = asm(&l, &l.plan.probes[0].program);
    assert!(!text.contains("map_update_elem"), "nothing inserted into an array:\n{text}");
    // A sum can add up to 0, which an array cannot tell from never written: a hash.
    let (_, l) = lowered(&bin, "on entry main.add { @s = sum(a) }");
    assert_eq!(kind(&l, "s").0, crate::plan::MapKind::PercpuHash);
}

/// A plan whose programs emit no event gets the ring buffer at its least, one that
/// prints the full one; the plan check takes the least only where no event is emitted.
#[test]
fn the_ring_buffer_is_at_its_least_where_no_program_emits_an_event() {
    use crate::lower::maps::{EVENTS_BYTES, EVENTS_BYTES_UNUSED};
    let ring = |l: &Lowered| {
        let events = l.plan.maps.iter().filter(|m| matches!(m.role, MapRole::Events));
        events.map(|m| m.max_entries).collect::<Vec<_>>()
    };
    let (_, counted) = lowered(&fake(), "on entry main.add { @c = count() }");
    let (_, printed) = lowered(&fake(), r#"on entry main.add { printf("%d\n", a) }"#);
    assert_eq!(ring(&counted), vec![EVENTS_BYTES_UNUSED]);
    assert_eq!(ring(&printed), vec![EVENTS_BYTES]);
    assert!(crate::plan::validate::layout::check(&counted.plan).is_ok());
    assert!(crate::plan::validate::layout::check(&printed.plan).is_ok());
    // A printing plan told its ring is the least one is refused.
    let mut tampered = printed.plan.clone();
    for m in tampered.maps.iter_mut().filter(|m| matches!(m.role, MapRole::Events)) {
        m.max_entries = EVENTS_BYTES_UNUSED;
    }
    assert!(crate::plan::validate::layout::check(&tampered).is_err());
}
