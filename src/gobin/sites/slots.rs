//! Whether a stack slot holds a value at an address: written on every path from the
//! function's entry to it (a must-write dataflow over the function's control flow graph),
//! or one of the function's stack arguments, which the caller wrote.
//!
//! DWARF's location lists are by address range, not by path: Go 1.17 places an inlined
//! parameter in its spill slot over a range that a path which never spilled it jumps
//! into, where the slot holds whatever an earlier call left. A place on the stack is
//! trusted only where this analysis shows it written.

use super::cfg::Cfg;

/// A stretch of the frame: `len` bytes from `start`, both relative to the CFA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stretch {
    pub start: i64,
    pub len: u64,
}

/// How many bytes of a slot are tracked; a longer value is judged by its first bytes.
const MAX_TRACKED: u64 = 512;

/// Whether every path through `cfg` from its entry to the instruction at `pc` writes all
/// of `slot` (or it is within `at_entry`, written before the call). `cfa_sp(pc)` is
/// CFA - SP at an instruction; stores are addressed from SP.
pub(crate) fn written(
    cfg: &Cfg,
    cfa_sp: impl Fn(u64) -> Option<i64>,
    at_entry: &[Stretch],
    pc: u64,
    slot: Stretch,
) -> bool {
    let Some(target) = cfg.insn_at(pc) else { return false };
    let len = slot.len.min(MAX_TRACKED) as usize;
    // The bytes of the slot each instruction writes.
    let writes: Vec<Vec<bool>> = cfg
        .insns
        .iter()
        .map(|ins| {
            let mut w = vec![false; len];
            if let (Some((off, size)), Some(cfa)) = (ins.sp_store, cfa_sp(ins.addr)) {
                mark(&mut w, slot.start, off - cfa, u64::from(size));
            }
            w
        })
        .collect();
    let mut entry = vec![false; len];
    for s in at_entry {
        mark(&mut entry, slot.start, s.start, s.len);
    }
    let n = cfg.blocks.len();
    // Must-analysis: every block starts as "all written" but the entry, and the meet is
    // "written on every incoming path".
    let mut out: Vec<Vec<bool>> = vec![vec![true; len]; n];
    let block_in = |b: usize, out: &[Vec<bool>]| -> Vec<bool> {
        let mut acc = if b == 0 { entry.clone() } else { vec![true; len] };
        for &p in &cfg.blocks[b].preds {
            if cfg.reached(p) {
                acc.iter_mut().zip(&out[p]).for_each(|(a, o)| *a &= *o);
            }
        }
        acc
    };
    let mut changed = true;
    while changed {
        changed = false;
        for b in (0..n).filter(|b| cfg.reached(*b)) {
            let mut state = block_in(b, &out);
            for w in &writes[cfg.blocks[b].first..cfg.blocks[b].end] {
                state.iter_mut().zip(w).for_each(|(s, w)| *s |= *w);
            }
            if state != out[b] {
                out[b] = state;
                changed = true;
            }
        }
    }
    let b = cfg.block_of_insn(target);
    if !cfg.reached(b) {
        return false;
    }
    let mut state = block_in(b, &out);
    for w in &writes[cfg.blocks[b].first..target] {
        state.iter_mut().zip(w).for_each(|(s, w)| *s |= *w);
    }
    state.iter().all(|s| *s)
}

/// Marks in `bytes` (the slot's, from `slot_start`) those of `[start, start + len)`.
fn mark(bytes: &mut [bool], slot_start: i64, start: i64, len: u64) {
    for i in 0..len as i64 {
        let at = start + i - slot_start;
        if let Some(b) = usize::try_from(at).ok().and_then(|a| bytes.get_mut(a)) {
            *b = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::{Flow, FlowInsn};

    fn insn(addr: u64, flow: Flow, sp_store: Option<(i64, u32)>) -> FlowInsn {
        FlowInsn { addr, next: addr + 1, flow, nop: false, shuffle: false, sp_store }
    }

    /// Go 1.17's timedWork: `if timed { spill x to 0x28(SP) } ; x is said to be there`.
    fn spill_on_one_path() -> Cfg {
        Cfg::new(
            vec![
                insn(0, Flow::Branch(3), None),       // if timed goto 3
                insn(1, Flow::Next, None),            // untimed: x stays in a register
                insn(2, Flow::Jump(5), None),         //
                insn(3, Flow::Next, Some((0x28, 8))), // MOVQ AX, 0x28(SP)
                insn(4, Flow::Next, None),            //
                insn(5, Flow::Next, None),            // the probe
                insn(6, Flow::Stop, None),
            ],
            |_| false,
        )
    }

    #[test]
    fn a_slot_spilled_on_one_path_only_is_not_written() {
        let cfg = spill_on_one_path();
        // CFA = SP + 0x28 throughout: the slot is CFA+0.
        let slot = Stretch { start: 0, len: 8 };
        assert!(!written(&cfg, |_| Some(0x28), &[], 5, slot));
        assert!(written(&cfg, |_| Some(0x28), &[], 4, slot));
        // A stack argument is written by the caller.
        assert!(written(&cfg, |_| Some(0x28), &[Stretch { start: 0, len: 8 }], 5, slot));
        // Half written is not written.
        assert!(!written(&cfg, |_| Some(0x28), &[], 4, Stretch { start: 0, len: 16 }));
    }

    #[test]
    fn a_slot_written_before_a_loop_stays_written_in_it() {
        let cfg = Cfg::new(
            vec![
                insn(0, Flow::Next, Some((8, 8))), // MOVQ AX, 8(SP)
                insn(1, Flow::Next, None),         // loop head: the probe
                insn(2, Flow::Branch(1), None),
                insn(3, Flow::Stop, None),
            ],
            |_| false,
        );
        assert!(written(&cfg, |_| Some(24), &[], 1, Stretch { start: -16, len: 8 }));
        // SP moved: the same store is another slot.
        assert!(!written(&cfg, |_| Some(32), &[], 1, Stretch { start: -16, len: 8 }));
    }
}
