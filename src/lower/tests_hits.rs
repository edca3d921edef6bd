//! Which programs take their hits from the kernel's run count (`Settings::kernel_hits`,
//! `plan::Accounting::kernel_hits`): one at one function spends no helper call on its
//! hit and has no counter or cookie slot for it; one at several functions (a run is not a
//! hit of one function then), or behind `--cgroup`'s check, counts as before; and the
//! plan of each says which.

use super::tests::{asm, lowered_with};
use crate::compile::Options;
use crate::gobin::fake::Fake;
use crate::plan::{Counter, ProbeAttach, COOKIE_SLOT_SHIFT};

fn target() -> Fake {
    Fake::new().function("main.add", &[("a", "int"), ("b", "int")], &[("~r0", "int")]).function("main.sub", &[], &[])
}

const SCRIPT: &str = "on entry main.add { @n = count() } on entry main.add, main.sub { @f[func] = count() } \
                      on return main.add { @r = count() }";

fn options(kernel_hits: bool, cgroup: bool) -> Options {
    let mut opts = Options::default();
    opts.lowering.accounting = true;
    opts.lowering.kernel_hits = kernel_hits;
    opts.lowering.cgroup = cgroup;
    opts
}

fn hit_counters(l: &super::Lowered) -> Vec<String> {
    let hits = l.plan.accounting.slots.iter().filter_map(|c| match c {
        Counter::Hits { program, .. } => Some(program.clone()),
        _ => None,
    });
    hits.collect()
}

fn cookies(l: &super::Lowered, program: &str) -> Vec<u64> {
    let probe = l.plan.probes.iter().find(|p| p.program == program).expect("the program");
    let ProbeAttach::Uprobe(points) = &probe.attach else { panic!("{program} is not a uprobe") };
    points.iter().map(|p| p.cookie).collect()
}

#[test]
fn a_program_at_one_function_leaves_its_hits_to_the_kernel() {
    let (_, l) = lowered_with(&target(), SCRIPT, &options(true, false));
    // p0 (one entry) and p2 (the RETs of one function) at one function; p1 at two.
    assert_eq!(l.plan.accounting.kernel_hits, ["p0", "p2"], "{:?}", l.plan.accounting);
    assert_eq!(hit_counters(&l), ["p1", "p1"]);
    for program in ["p0", "p2"] {
        let text = asm(&l, program);
        assert!(!text.contains("bpf_get_attach_cookie"), "{program} still reads its cookie:\n{text}");
        assert!(!text.contains("map[counters]"), "{program} still counts:\n{text}");
        assert!(cookies(&l, program).iter().all(|c| c >> COOKIE_SLOT_SHIFT == 0), "{program}: a counter slot");
    }
    let text = asm(&l, "p1");
    assert!(text.contains("bpf_get_attach_cookie") && text.contains("map[generations]"), "{text}");
    assert!(l.plan.accounting.checks_generations("p1"));
}

#[test]
fn without_kernel_hits_or_behind_cgroup_every_program_counts_its_hits() {
    for (kernel_hits, cgroup) in [(false, false), (true, true)] {
        let (_, l) = lowered_with(&target(), SCRIPT, &options(kernel_hits, cgroup));
        assert!(l.plan.accounting.kernel_hits.is_empty(), "{kernel_hits} {cgroup}: {:?}", l.plan.accounting);
        assert_eq!(hit_counters(&l), ["p0", "p1", "p1", "p2"]);
        for program in ["p0", "p1", "p2"] {
            assert!(asm(&l, program).contains("bpf_get_attach_cookie"), "{program}");
        }
    }
    // Without accounting nothing is counted, by either.
    let mut opts = options(true, false);
    opts.lowering.accounting = false;
    let (_, l) = lowered_with(&target(), SCRIPT, &opts);
    assert!(l.plan.accounting.kernel_hits.is_empty() && !l.plan.accounting.hits);
}
