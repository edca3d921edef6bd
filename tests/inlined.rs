//! Entry probes at inlined calls, against the program's own counts: tests/go/inline calls
//! inlined functions after an `if` with code of its own, in branches, in loops (the
//! caller's and the callee's own), after early returns, in a short-circuit condition and
//! inside one another, on the local toolchain, the oldest supported release and the newest.
//! Each call must be seen exactly once, and a parameter read where DWARF locates it at the
//! probe's address (or refused with the reason).

mod support;

use gtrace::gobin::{Placement, Target};
use support::toolchain::{build_plain, toolchains};
use support::{map_value, privileged, truth};

const CALLEES: [(&str, &str); 9] = [
    ("main.weigh", "weigh"),
    ("main.note", "note"),
    ("main.tick", "tick"),
    ("main.check", "check"),
    ("main.inner", "inner"),
    ("main.outer", "outer"),
    ("main.below", "below"),
    ("main.sumTo", "sumto"),
    ("main.scaled", "scaled"),
];

#[test]
fn every_inlined_call_has_one_place_every_call_passes() {
    for toolchain in toolchains() {
        let Some(bin) = build_plain("inline", &toolchain) else { continue };
        let t = Target::open(&bin).unwrap();
        for (callee, _) in CALLEES {
            assert!(t.find(callee).is_empty(), "{toolchain}: {callee} was not inlined everywhere");
            let sites = t.find_inlined(callee);
            assert!(!sites.is_empty(), "{toolchain}: {callee} inlined nowhere");
            for s in sites {
                assert_ne!(s.how, Placement::Lowest, "{toolchain}: {s:x?}");
            }
        }
    }
}

/// What `find_inlined_each` finds for many names at once (the plan check's way) is what
/// `find_inlined` finds for each alone, on a target that has answered nothing yet.
#[test]
fn inlined_calls_found_together_are_those_found_alone() {
    for toolchain in toolchains() {
        let Some(bin) = build_plain("inline", &toolchain) else { continue };
        let (alone, together) = (Target::open(&bin).unwrap(), Target::open(&bin).unwrap());
        let mut names: Vec<&str> = CALLEES.iter().map(|c| c.0).collect();
        names.extend(["main.main", "main.absent", "main.*"]);
        let found = together.find_inlined_each(&names);
        assert_eq!(found.len(), names.len(), "{toolchain}");
        for name in &names {
            assert_eq!(found[*name], alone.find_inlined(name), "{toolchain}: {name}");
        }
        assert!(found["main.*"].len() > CALLEES.len(), "{toolchain}: {:?}", found["main.*"]);
    }
}

#[test]
fn inlined_calls_are_counted_exactly() {
    if !privileged("inlined_calls_are_counted_exactly") {
        return;
    }
    let script: String = CALLEES.iter().map(|(f, key)| format!("on entry {f} {{ @{key} = count() }}\n")).collect();
    for toolchain in toolchains() {
        let Some(bin) = build_plain("inline", &toolchain) else { continue };
        let run = support::gtrace(&["-e", &script, "-c", &format!("{} 1000", bin.display())]);
        assert_eq!(run.code, 0, "{toolchain}:\n{}\n{}", run.stdout, run.stderr);
        assert!(!run.stderr.contains("warning"), "{toolchain}: {}", run.stderr);
        for (_, key) in CALLEES {
            assert_eq!(
                map_value(&run.stdout, &format!("@{key}")),
                truth(&run.stdout, key),
                "{toolchain} {key}:\n{}",
                run.stdout
            );
        }
    }
}

/// weigh, check and scaled are each inlined at one place: the sum of their argument is
/// the program's, wherever DWARF locates it at the probe (a register, or for scaled the
/// stack slot its caller spilled it to); where DWARF's place cannot be trusted or
/// followed, gtrace says why.
#[test]
fn inlined_parameters_are_read_at_the_probe_address() {
    if !privileged("inlined_parameters_are_read_at_the_probe_address") {
        return;
    }
    let mut read = 0;
    for toolchain in toolchains() {
        let Some(bin) = build_plain("inline", &toolchain) else { continue };
        for (callee, key) in [("main.weigh", "weigh"), ("main.check", "check"), ("main.scaled", "scaled")] {
            let script = format!("on entry {callee} {{ @sum = sum(x); @n = count() }}");
            let run = support::gtrace(&["-e", &script, "-c", &format!("{} 1000", bin.display())]);
            if run.code == 0 {
                assert_eq!(map_value(&run.stdout, "@n"), truth(&run.stdout, key), "{toolchain} {callee}");
                assert_eq!(
                    map_value(&run.stdout, "@sum"),
                    truth(&run.stdout, &format!("{key}_sum")),
                    "{toolchain} {callee}:\n{}",
                    run.stdout
                );
                read += 1;
            } else {
                // Refused before anything ran, with DWARF's reason: Go 1.17 says weigh's
                // argument is in a stack slot that the untimed path never writes.
                assert!(
                    run.stderr.contains("cannot be read at this site")
                        && (run.stderr.contains("optimized away") || run.stderr.contains("not every path")),
                    "{toolchain} {callee}:\n{}",
                    run.stderr
                );
                assert!(toolchain != "local", "the local toolchain's DWARF places `x` at {callee}:\n{}", run.stderr);
                assert!(
                    callee != "main.scaled",
                    "{toolchain}: scaled's argument is in its caller's spill slot:\n{}",
                    run.stderr
                );
            }
        }
    }
    assert!(read > 0, "no toolchain's inlined parameters were read");
}

/// Where DWARF places an inlined call's parameter on the stack, it is read from SP plus
/// the frame's offset at the probe's address (the evaluator: DW_OP_call_frame_cfa, and
/// the function table's SP delta there); on arm64 builds too (its stores decoded for the
/// check that every path writes the slot).
#[test]
fn an_inlined_parameter_in_its_callers_spill_slot_is_on_the_stack() {
    use gtrace::arch::abi::Location;
    use gtrace::gobin::ValueLocation;
    let builds = toolchains().into_iter().flat_map(|t| {
        let amd64 = build_plain("inline", &t).map(|b| (format!("{t} amd64"), b));
        let arm64 =
            support::toolchain::build_arm64("inline", &t, support::toolchain::PLAIN).map(|b| (format!("{t} arm64"), b));
        [amd64, arm64]
    });
    for (toolchain, bin) in builds.flatten() {
        let t = Target::open(&bin).unwrap();
        let sites = t.find_inlined("main.scaled");
        assert_eq!(sites.len(), 1, "{toolchain}: {sites:?}");
        let params = t.inlined_params(&sites[0]).unwrap().expect("DWARF describes the inlined call");
        let (param, location) = &params[0];
        assert_eq!(param.name, "x");
        // The caller spilled its parameter to its own first argument slot: where SP at
        // its entry plus the first stack argument's offset is, seen from SP at the probe.
        let entry = t.find("main.spilled")[0].addr;
        let slot = t.cfa_sp_offset(sites[0].addr).unwrap() - t.cfa_sp_offset(entry).unwrap()
            + t.arch().stack_args_offset() as i64;
        assert_eq!(*location, ValueLocation::At(Location::Stack { offset: slot }), "{toolchain}");
    }
}
