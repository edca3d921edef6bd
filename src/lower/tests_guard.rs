//! Which programs run without the program-wide preemption guard (guard.rs), and the
//! atomic updates that let them (agg.rs): the programs of timed calls and their
//! `hist(elapsed)` drop it and keep their stack under 64 bytes (no per-CPU private
//! stack); a program that builds an event or updates a per-CPU value in several steps
//! keeps it; and a `hist()` run by the interpreter puts every value where hist.rs says.

use super::tests::{asm, lowered, user_map};
use crate::bpf::interp::{run_probe, World};
use crate::gobin::fake::Fake;
use crate::hist::{index, BUCKETS};

fn target() -> Fake {
    Fake::new().function("main.add", &[("a", "int"), ("b", "int")], &[("~r0", "int")])
}

/// Whether the program starts with the guard (its second instruction, after r6 = r1).
fn guarded(text: &str) -> bool {
    text.lines().find(|l| l.trim_start().starts_with("1:")).is_some_and(|l| l.contains("bpf_preempt_disable"))
}

/// The deepest stack offset the program's instructions use.
fn stack(text: &str) -> u32 {
    text.split("r10 -")
        .skip(1)
        .filter_map(|s| s.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .max()
        .unwrap_or(0)
}

#[test]
fn the_programs_of_hist_elapsed_run_without_the_guard_in_under_64_bytes_of_stack() {
    let (_, l) = lowered(&target(), "on return main.add { @h = hist(elapsed) }");
    let names: Vec<&str> = l.programs.iter().map(|(n, _)| n.as_str()).collect();
    for name in ["p0", "time_entries"] {
        assert!(names.contains(&name), "{names:?}");
        let text = asm(&l, name);
        assert!(!guarded(&text), "{name} holds the guard:\n{text}");
        assert!(stack(&text) <= super::guard::MAX_STACK, "{name} uses {} bytes of stack:\n{text}", stack(&text));
        // What preemption is still turned off for (a new least or greatest value) is
        // turned back on on the same path.
        let count = |k: &str| text.matches(k).count();
        assert_eq!(count("bpf_preempt_disable"), count("bpf_preempt_enable"), "{text}");
    }
}

#[test]
fn programs_that_change_per_cpu_values_in_several_steps_keep_the_guard() {
    for script in [
        // The event is built in the per-CPU scratch record.
        r#"on entry main.add { printf("%d\n", a) }"#,
        // max() and avg() read, compare and write.
        "on return main.add { @m = max(elapsed) }",
        "on entry main.add { @v = avg(a) }",
    ] {
        let (_, l) = lowered(&target(), script);
        let text = asm(&l, "p0");
        assert!(guarded(&text), "{script} dropped the guard:\n{text}");
    }
    // count() and hist() of an argument need no guard.
    for script in ["on entry main.add { @c = count() }", "on entry main.add { @h = hist(a) }"] {
        let (_, l) = lowered(&target(), script);
        let text = asm(&l, "p0");
        assert!(!guarded(&text), "{script} holds the guard:\n{text}");
    }
}

/// A hash map whose elements are deleted while the probes run (`clear`, `delete`,
/// `take`) may give a deleted element to another key at once: a program preempted
/// between its lookup and its atomic add would add to that key. Its updates keep the
/// guard; an array's (a map without keys) do not need it, its elements never change
/// hands.
#[test]
fn updates_of_a_hash_that_is_cleared_or_deleted_from_keep_the_guard() {
    for script in [
        "on entry main.add { @c[a] = count() } on interval 1s { print(@c); clear(@c) }",
        "on entry main.add { @c[a] = count() } on entry main.add { delete(@c[b]) }",
    ] {
        let (_, l) = lowered(&target(), script);
        let text = asm(&l, "p0");
        assert!(guarded(&text), "{script} dropped the guard:\n{text}");
    }
    for script in [
        "on entry main.add { @c[a] = count() } on interval 1s { print(@c) }",
        "on entry main.add { @c = count() } on interval 1s { print(@c); clear(@c) }",
    ] {
        let (_, l) = lowered(&target(), script);
        let text = asm(&l, "p0");
        assert!(!guarded(&text), "{script} holds the guard:\n{text}");
    }
}

#[test]
fn hist_run_by_the_interpreter_puts_each_value_where_hist_index_says() {
    let (_, l) = lowered(&target(), "on entry main.add { @h = hist(a) }");
    let (_, prog) = l.programs.iter().find(|(n, _)| n == "p0").expect("p0");
    let object = user_map(&l, "h").0.object_name.clone();
    let size = 8 * (BUCKETS + 3);
    let mut maps: Vec<(String, Vec<u8>)> = (prog.relocations.iter().map(|r| r.map.clone()))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|m| (m, vec![0u8; size.max(4096)]))
        .collect();
    let values: [i64; 9] = [5, 1_000, 3, 70_000, 5, -4, 0, 1 << 40, 999];
    for &v in &values {
        // Every register holds the value: wherever the ABI put `a`, the program finds it.
        let regs: Vec<u8> = (0..32).flat_map(|_| v.to_le_bytes()).collect();
        let world = World { maps: maps.clone(), ..Default::default() };
        let run = run_probe(prog, &world, &regs).unwrap_or_else(|e| panic!("{e}\n{}", asm(&l, "p0")));
        maps = run.maps;
    }
    let bytes = &maps.iter().find(|(n, _)| *n == object).expect("the map").1;
    let word = |i: usize| u64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().unwrap());
    let mut want = vec![0u64; BUCKETS];
    for &v in &values {
        want[index(v)] += 1;
    }
    let got: Vec<u64> = (0..BUCKETS).map(word).collect();
    assert_eq!(got, want);
    assert_eq!(word(BUCKETS) as i64, values.iter().sum::<i64>());
    let (least, greatest) = (values.iter().min().unwrap(), values.iter().max().unwrap());
    assert_eq!(word(BUCKETS + 1), (*least as u64) ^ i64::MAX as u64, "the least value");
    assert_eq!(word(BUCKETS + 2), (*greatest as u64) ^ (1 << 63), "the greatest value");
}
