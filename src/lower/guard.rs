//! Which programs run without the program-wide preemption guard (codegen.rs's prologue
//! and epilogue: two kfunc calls, about 35 ns a run on the AMD host of
//! docs/performance.md, where every kernel call and return is dear).
//!
//! What the guard is for: uprobe programs run with only migration disabled, so under
//! full, lazy or RT preemption another task can run on the same CPU in the middle of a
//! program and run a program of gtrace's there too (docs: go-facts.md). Two things
//! are shared by such tasks and nothing else: the CPU's per-CPU memory (per-CPU maps:
//! a read-modify-write of one interleaved with another's loses an update or tears a
//! record) and, on 6.13 and later, the program's per-CPU private stack, which the
//! verifier gives a kprobe-type program whose stack, rounded up to 16 bytes, is 64
//! bytes or more (`bpf_enable_priv_stack`, `BPF_PRIV_STACK_MIN_SIZE`): with it, the
//! other task's run overwrites this one's stack slots, pointers the verifier trusts
//! among them. Everything else a program touches is either the kernel's to keep safe
//! (a hash map's insertion, a ring buffer) or is another task's own: a goroutine's
//! record and frames (frames.rs) are written only by programs running on that
//! goroutine, which runs on one thread at a time and cannot move while its thread is
//! in a uprobe; `handovers` is keyed by the task.
//!
//! So a program may drop the guard when its stack stays under that threshold (48 bytes
//! at most), nothing spills to the per-CPU spill map, it calls no helper but the few
//! listed here (none of which keeps per-CPU state of its own), and every map it names
//! is one of gtrace's own that is safe under preemption (below), or an aggregation
//! whose every reference in the program was made by code that changes the per-CPU value
//! with atomic instructions only (`Func::preemption_safe_since`, mapops.rs) in a map no
//! element of which is deleted while the probes run (a hash that is cleared or deleted
//! from may hand a deleted element to another key at once: `UserMap::freed`). Anything
//! else, or anything new, keeps the guard.

use super::accounting::{COUNTERS, GENERATIONS, HANDOVERS, RATE};
use super::ir::{Finished, Item};
use super::maps::{FRAMES, GOROUTINES, GOROUTINES_SPILL, ZEROS};
use crate::bpf::helpers::*;
use std::collections::HashMap;

/// The most stack a program without the guard may use: under 64 once rounded up to 16.
pub const MAX_STACK: u32 = 48;

/// gtrace's maps that programs use safely under preemption: the goroutines' records and
/// deep frames (each written by its own goroutine's programs only), the zeros new
/// elements are copied from (never written), the accounting's counters (per-CPU, added
/// to atomically), generations (read only), rate buckets (compare-and-exchange) and
/// handovers (keyed by the task).
const SAFE_MAPS: [&str; 8] = [GOROUTINES, GOROUTINES_SPILL, FRAMES, ZEROS, COUNTERS, GENERATIONS, RATE, HANDOVERS];

/// Helpers that keep no per-CPU state a preempted run could share.
const SAFE_HELPERS: [i32; 6] = [
    BPF_FUNC_map_lookup_elem,
    BPF_FUNC_map_update_elem,
    BPF_FUNC_ktime_get_ns,
    BPF_FUNC_probe_read_user,
    BPF_FUNC_get_current_pid_tgid,
    BPF_FUNC_get_attach_cookie,
];

/// Whether the program of `items`, finished as `finished`, may run without the guard;
/// `safe` counts the references of each map made by code safe under preemption.
pub fn unguarded(items: &[Item], finished: &Finished, safe: &HashMap<String, usize>) -> bool {
    if finished.stack > MAX_STACK || finished.spilled > 0 {
        return false;
    }
    let mut refs: HashMap<&str, usize> = HashMap::new();
    for item in items {
        match item {
            Item::Call(helper) if !SAFE_HELPERS.contains(helper) => return false,
            Item::LdMap { map, .. } => *refs.entry(map.as_str()).or_default() += 1,
            _ => {}
        }
    }
    refs.into_iter().all(|(map, n)| SAFE_MAPS.contains(&map) || safe.get(map).is_some_and(|&s| s >= n))
}
