//! The eBPF calling convention, stated once for the IR: a helper or kfunc takes its
//! arguments in R1-R5 and leaves its result in R0, and clobbers R0-R5; R6-R9 survive
//! it; R10 is the read-only frame pointer. The allocator (liveness in flow.rs, the
//! order registers are handed out in alloc.rs) and `Func::call` read it here; code
//! generation names these registers only where the convention fixes them.

use crate::bpf::insn::{Reg, R0, R1, R10, R2, R3, R4, R5, R6, R7, R8, R9};

/// Where a call's arguments go, in order.
pub const ARGS: [Reg; 5] = [R1, R2, R3, R4, R5];
/// Where a call leaves its result (and `exit` reads the program's).
pub const RESULT: Reg = R0;
/// What a call leaves with no meaning: its result register and its arguments'.
pub const CLOBBERED: [Reg; 6] = [R0, R1, R2, R3, R4, R5];
/// What a call leaves as it was.
pub const CALLEE_SAVED: [Reg; 4] = [R6, R7, R8, R9];
/// The frame pointer: read-only, the stack's top.
pub const FRAME: Reg = R10;
/// gtrace's own rule on top of the kernel's: R6 holds the program's context (`struct
/// pt_regs *`, R1 at the start) for the whole program (codegen.rs's prologue).
pub const CTX: Reg = R6;

/// The order the allocator hands registers out in: those a call clobbers first, so
/// that the callee-saved ones stay free for what must survive calls (the context's
/// R6 last).
pub const ORDER: [Reg; 10] = [R1, R2, R3, R4, R5, R0, R7, R8, R9, R6];

/// The location numbers (flow.rs: R0-R10 are 0-10) of `regs`.
pub fn locs<const N: usize>(regs: [Reg; N]) -> [usize; N] {
    regs.map(|r| usize::from(r.num()))
}
