//! arm64 (GOARCH=arm64, AArch64): its registers as `struct user_pt_regs`, DWARF and Go's
//! ABIInternal know them, and the machine code questions (`insn`: the encodings gtrace
//! decodes; `code`: RETs and the stack-check prologue; `flow`: control flow; `uprobe`:
//! the instructions the kernel's arm64 uprobes refuse; `hashglobals`: where the runtime's
//! map hash keys are).
//!
//! Go on arm64 (src/cmd/compile/abi-internal.md): integer arguments and results in
//! R0-R15, floats in F0-F15, the goroutine's `g` in R28 (in assembly too), the frame
//! pointer in R29, the return address in R30 (the link register) at entry and at a RET,
//! and the first stack argument at 8(RSP) at entry, above the caller's saved-LR slot at
//! 0(RSP). A function with a frame saves R30 at 0(RSP) and R29 at -8(RSP) after moving
//! RSP, and points R29 at that -8(RSP) slot: so `[R29]` is the caller's frame pointer and
//! `[R29 + 8]` the return address into the caller, as on amd64. Go 1.17 passed every
//! argument on the stack on arm64 (the register ABI came to arm64 in Go 1.18).

pub mod code;
pub mod flow;
pub mod hashglobals;
pub mod insn;
pub mod trap;
pub mod uprobe;

use serde::Serialize;

/// A general-purpose register R0-R30 (the kernel's X0-X30), RSP or PC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Reg {
    /// R0-R30: `R(n)` with n ≤ 30.
    R(u8),
    Sp,
    Pc,
}

/// The names Go's assembler gives R0-R30.
const NAMES: [&str; 31] = [
    "R0", "R1", "R2", "R3", "R4", "R5", "R6", "R7", "R8", "R9", "R10", "R11", "R12", "R13", "R14", "R15", "R16", "R17",
    "R18", "R19", "R20", "R21", "R22", "R23", "R24", "R25", "R26", "R27", "R28", "R29", "R30",
];

impl Reg {
    /// Byte offset of the register in the kernel's `struct pt_regs` (arm64), which starts
    /// with `struct user_pt_regs { u64 regs[31]; u64 sp; u64 pc; u64 pstate; }`. Only those
    /// user registers are read: what follows them changed size in Linux 7.0.
    pub fn pt_regs_offset(self) -> i16 {
        match self {
            Reg::R(n) => 8 * i16::from(n.min(30)),
            Reg::Sp => 8 * 31,
            Reg::Pc => 8 * 32,
        }
    }

    /// The register DWARF numbers `n` on AArch64 (DWARF for the Arm 64-bit architecture:
    /// 0-30 X0-X30, 31 SP; 64-95 are the vector registers, which uprobes cannot read).
    pub fn from_dwarf(n: u16) -> Option<Reg> {
        match n {
            0..=30 => Some(Reg::R(n as u8)),
            31 => Some(Reg::Sp),
            _ => None,
        }
    }

    /// Go's name: `R0`, `RSP`, `PC`.
    pub fn name(self) -> &'static str {
        match self {
            Reg::R(n) => NAMES[usize::from(n.min(30))],
            Reg::Sp => "RSP",
            Reg::Pc => "PC",
        }
    }
}

const fn r(n: u8) -> super::Reg {
    super::Reg::Arm64(Reg::R(n))
}

/// Go's ABIInternal integer argument and result registers, in order: R0-R15.
pub const INT_ARGS: [super::Reg; 16] =
    [r(0), r(1), r(2), r(3), r(4), r(5), r(6), r(7), r(8), r(9), r(10), r(11), r(12), r(13), r(14), r(15)];

/// How many float registers (F0-F15) Go's ABIInternal passes arguments in.
pub const FLOAT_ARGS: usize = 16;

/// R28: the current goroutine's `g`, in Go and assembly functions alike.
pub const G: Reg = Reg::R(28);
/// R29: the frame pointer.
pub const FP: Reg = Reg::R(29);
/// R30: the link register, holding the return address at entry and at a RET.
pub const LR: Reg = Reg::R(30);

/// `R_AARCH64_RELATIVE`: the dynamic relocation of a PIE's pointers.
pub const RELATIVE_RELOCATION: u32 = object::elf::R_AARCH64_RELATIVE;

/// The first Go release whose arm64 functions take arguments in registers.
pub const REGISTER_ABI_SINCE: u32 = 18;

/// Bytes per unit of a pc delta in Go's function table (every instruction is 4 bytes).
pub const PC_QUANTUM: u8 = 4;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_pt_regs_offsets() {
        assert_eq!(Reg::R(0).pt_regs_offset(), 0);
        assert_eq!(Reg::R(15).pt_regs_offset(), 120);
        assert_eq!(G.pt_regs_offset(), 224);
        assert_eq!(FP.pt_regs_offset(), 232);
        assert_eq!(LR.pt_regs_offset(), 240);
        assert_eq!(Reg::Sp.pt_regs_offset(), 248);
        assert_eq!(Reg::Pc.pt_regs_offset(), 256);
    }

    #[test]
    fn dwarf_numbers_and_names() {
        assert_eq!(Reg::from_dwarf(0), Some(Reg::R(0)));
        assert_eq!(Reg::from_dwarf(30), Some(LR));
        assert_eq!(Reg::from_dwarf(31), Some(Reg::Sp));
        assert_eq!(Reg::from_dwarf(64), None);
        assert_eq!(Reg::R(28).name(), "R28");
        assert_eq!(Reg::Sp.name(), "RSP");
        assert_eq!(RELATIVE_RELOCATION, 1027);
    }
}
