//! arm64: which instructions a uprobe traps on cheaply. The kernel simulates B, BL,
//! B.cond, CBZ/CBNZ, TBZ/TBNZ, ADR/ADRP, BR, BLR and RET in the trap handler
//! (`arm_probe_decode_insn`, arch/arm64/kernel/probes/decode-insn.c), and NOP since
//! Linux 6.12 (`simulate_nop`); it single-steps a copy of every other instruction. No
//! arm64 kernel emulates a push, so `TrapKind::Push` never comes out of here; its
//! calibration function is a single-stepped store pair. The calibration functions, one of
//! each kind, are defined here.

use super::insn::{self, is, Kind};
use crate::arch::trap::TrapKind;

/// The kind of the instruction at the start of `code`.
pub fn kind(code: &[u8]) -> TrapKind {
    let Some(w) = insn::word(code) else { return TrapKind::Step };
    let simulated = match insn::kind(w, 0) {
        Kind::Jump(_) | Kind::Branch(_) | Kind::Call(_) | Kind::Nop => true,
        // The pointer-authenticating forms are refused, not simulated.
        Kind::CallIndirect | Kind::JumpIndirect | Kind::Ret => {
            is(w, 0xffff_fc1f, 0xd61f_0000) || is(w, 0xffff_fc1f, 0xd63f_0000) || is(w, 0xffff_fc1f, 0xd65f_0000)
        }
        Kind::Trap | Kind::Other => is(w, 0x1f00_0000, 0x1000_0000), // ADR, ADRP
    };
    // BC.cond is not among the simulated branches.
    if simulated && !is(w, 0xff00_0010, 0x5400_0010) {
        TrapKind::Branch
    } else {
        TrapKind::Step
    }
}

// The calibration functions: each one instruction of its kind, then whatever returns.
#[cfg(target_arch = "aarch64")]
std::arch::global_asm!(
    ".pushsection .text.gtrace_calibrate,\"ax\",%progbits",
    ".globl gtrace_calibrate_step",
    ".type gtrace_calibrate_step,%function",
    "gtrace_calibrate_step:",
    "    mov x0, x0",
    "    ret",
    ".size gtrace_calibrate_step, . - gtrace_calibrate_step",
    ".globl gtrace_calibrate_push",
    ".type gtrace_calibrate_push,%function",
    "gtrace_calibrate_push:",
    "    stp x29, x30, [sp, #-16]!",
    "    ldp x29, x30, [sp], #16",
    "    ret",
    ".size gtrace_calibrate_push, . - gtrace_calibrate_push",
    ".globl gtrace_calibrate_branch",
    ".type gtrace_calibrate_branch,%function",
    "gtrace_calibrate_branch:",
    "    b 2f",
    "2:",
    "    ret",
    ".size gtrace_calibrate_branch, . - gtrace_calibrate_branch",
    ".popsection",
);

#[cfg(test)]
mod tests {
    use super::*;

    fn k(w: u32) -> TrapKind {
        kind(&w.to_le_bytes())
    }

    #[test]
    fn kinds_follow_the_kernel() {
        // MOVD 16(R28), R16; CMP R16, RSP; MOVD.W R30, -32(RSP); LDAXR: single-stepped
        // (LDAXR is refused, but its kind does not matter then).
        for w in [0xf940_0b90, 0xeb30_63ff, 0xf81e_0ffe, 0xa9bf_7bfd, 0xaa00_03e0] {
            assert_eq!(k(w), TrapKind::Step, "{w:#010x}");
        }
        // BLS, CBNZ, TBZ, JMP, CALL, CALL (R4), JMP (R4), RET, ADRP, NOOP: simulated.
        for w in [
            0x5400_0169,
            0xb500_0661,
            0x3608_0040,
            0x17ff_ffef,
            0x97ff_76d3,
            0xd63f_0080,
            0xd61f_0080,
            0xd65f_03c0,
            0x9000_0163,
            0xd503_201f,
        ] {
            assert_eq!(k(w), TrapKind::Branch, "{w:#010x}");
        }
        assert_eq!(k(0xd65f_0bff), TrapKind::Step, "RETAA");
        assert_eq!(kind(&[0xc0, 0x03]), TrapKind::Step);
    }

    /// The calibration functions' first instructions, as llvm-mc assembles them
    /// (`mov x0, x0`, `stp x29, x30, [sp, #-16]!`, `b 2f` with 2 one instruction on).
    #[test]
    fn calibration_instructions_are_of_their_kinds() {
        assert_eq!(k(0xaa00_03e0), TrapKind::Step);
        assert_eq!(k(0xa9bf_7bfd), TrapKind::Step);
        assert_eq!(k(0x1400_0001), TrapKind::Branch);
    }
}
