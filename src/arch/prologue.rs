//! Where a Go function's entry probe goes, on any architecture: right after its
//! stack-check prologue, so that a call that grows the stack (runtime.morestack jumps
//! back to the function's first instruction) is seen once. Rather than match each
//! architecture's prologue shapes, a conditional branch near the start counts as the
//! stack check when the block it jumps to calls a `runtime.morestack*` function: the
//! entry is right after the last such branch.

use super::{Flow, FlowInsn};

/// How far to look: how many instructions from the start the stack check may end at, and
/// how many instructions of the morestack block (spills, call, reloads, jump back).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub prologue: usize,
    pub morestack_block: usize,
}

/// The address after the stack check of the function at `addr` whose instructions are
/// `insns` (`addr` when it has none). `symbol_at` names the function that starts at an
/// address.
pub(crate) fn entry<'a>(
    addr: u64,
    insns: &[FlowInsn],
    limits: Limits,
    symbol_at: &impl Fn(u64) -> Option<&'a str>,
) -> u64 {
    let mut entry = addr;
    for ins in insns.iter().take(limits.prologue) {
        match ins.flow {
            Flow::Branch(target) => {
                if calls_morestack(insns, target, limits, symbol_at) {
                    entry = ins.next;
                }
            }
            Flow::Next => {}
            _ => break,
        }
    }
    entry
}

/// Whether the straight-line block at `target` calls a `runtime.morestack*` function
/// before it ends.
fn calls_morestack<'a>(
    insns: &[FlowInsn],
    target: u64,
    limits: Limits,
    symbol_at: &impl Fn(u64) -> Option<&'a str>,
) -> bool {
    let start = insns.partition_point(|i| i.addr < target);
    if insns.get(start).is_none_or(|i| i.addr != target) {
        return false;
    }
    for ins in insns[start..].iter().take(limits.morestack_block) {
        match ins.flow {
            Flow::Call(to) => return symbol_at(to).is_some_and(|s| s.starts_with("runtime.morestack")),
            Flow::Next => {}
            _ => return false,
        }
    }
    false
}
