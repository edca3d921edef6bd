//! x86-64: which instructions a uprobe traps on cheaply. The kernel emulates relative
//! jumps and calls, conditional jumps and NOP in the trap handler
//! (`branch_setup_xol_ops` in arch/x86/kernel/uprobes.c), and on newer kernels PUSH of a
//! register (`push_setup_xol_ops`); it single-steps a copy of every other instruction
//! (RET too). The calibration functions, one of each kind, are defined here.

use crate::arch::trap::TrapKind;

/// The kind of the instruction at the start of `code`.
pub fn kind(code: &[u8]) -> TrapKind {
    const LEGACY_PREFIXES: [u8; 11] = [0x26, 0x2e, 0x36, 0x3e, 0x64, 0x65, 0x66, 0x67, 0xf0, 0xf2, 0xf3];
    // PUSH r64, with REX.B for R8-R15 at most (the kernel emulates no other form).
    if let [0x50..=0x57, ..] | [0x41, 0x50..=0x57, ..] = code {
        return TrapKind::Push;
    }
    let mut at = 0;
    while code.get(at).is_some_and(|b| LEGACY_PREFIXES.contains(b)) {
        at += 1;
    }
    if code.get(at).is_some_and(|b| (0x40..=0x4f).contains(b)) {
        at += 1;
    }
    match (code.get(at), code.get(at + 1)) {
        (Some(0xeb | 0xe9 | 0xe8 | 0x90 | 0x70..=0x7f), _) => TrapKind::Branch,
        (Some(0x0f), Some(0x80..=0x8f)) => TrapKind::Branch,
        _ => TrapKind::Step,
    }
}

// The calibration functions: each one instruction of its kind, then whatever returns.
#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".pushsection .text.gtrace_calibrate,\"ax\",@progbits",
    ".globl gtrace_calibrate_step",
    ".type gtrace_calibrate_step,@function",
    "gtrace_calibrate_step:",
    "    mov rax, rdi",
    "    ret",
    ".size gtrace_calibrate_step, . - gtrace_calibrate_step",
    ".globl gtrace_calibrate_push",
    ".type gtrace_calibrate_push,@function",
    "gtrace_calibrate_push:",
    "    push rbp",
    "    pop rbp",
    "    ret",
    ".size gtrace_calibrate_push, . - gtrace_calibrate_push",
    ".globl gtrace_calibrate_branch",
    ".type gtrace_calibrate_branch,@function",
    "gtrace_calibrate_branch:",
    "    jmp 2f",
    "2:",
    "    ret",
    ".size gtrace_calibrate_branch, . - gtrace_calibrate_branch",
    ".popsection",
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_the_kernel() {
        // MOVQ AX, CX; CMPQ SP, 16(R14); RET: single-stepped.
        assert_eq!(kind(&[0x48, 0x89, 0xc1]), TrapKind::Step);
        assert_eq!(kind(&[0x49, 0x3b, 0x66, 0x10]), TrapKind::Step);
        assert_eq!(kind(&[0xc3]), TrapKind::Step);
        // PUSHQ BP; PUSHQ R12.
        assert_eq!(kind(&[0x55, 0x48, 0x89, 0xe5]), TrapKind::Push);
        assert_eq!(kind(&[0x41, 0x54]), TrapKind::Push);
        // JMP rel8, CALL rel32, JLS rel32, NOP.
        assert_eq!(kind(&[0xeb, 0x05]), TrapKind::Branch);
        assert_eq!(kind(&[0xe8, 0, 0, 0, 0]), TrapKind::Branch);
        assert_eq!(kind(&[0x0f, 0x86, 0, 0, 0, 0]), TrapKind::Branch);
        assert_eq!(kind(&[0x90]), TrapKind::Branch);
        // The long NOP (0F 1F) and indirect calls are single-stepped.
        assert_eq!(kind(&[0x0f, 0x1f, 0x40, 0x00]), TrapKind::Step);
        assert_eq!(kind(&[0xff, 0xd0]), TrapKind::Step);
        assert_eq!(kind(&[]), TrapKind::Step);
    }
}
