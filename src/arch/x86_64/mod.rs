//! x86-64 (GOARCH=amd64): its registers as `struct pt_regs`, DWARF and Go's ABIInternal
//! know them, and the machine code questions (`code`: RETs, the stack-check prologue).

pub mod code;
pub mod flow;
pub mod hashglobals;
pub mod trap;
pub mod uprobe;

use serde::Serialize;

/// A general-purpose register, or RIP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Reg {
    Rax,
    Rbx,
    Rcx,
    Rdx,
    Rsi,
    Rdi,
    Rbp,
    Rsp,
    R8,
    R9,
    R10,
    R11,
    R12,
    R13,
    R14,
    R15,
    Rip,
}

impl Reg {
    /// Byte offset of the register in the kernel's `struct pt_regs` (x86-64).
    pub fn pt_regs_offset(self) -> i16 {
        match self {
            Reg::R15 => 0,
            Reg::R14 => 8,
            Reg::R13 => 16,
            Reg::R12 => 24,
            Reg::Rbp => 32,
            Reg::Rbx => 40,
            Reg::R11 => 48,
            Reg::R10 => 56,
            Reg::R9 => 64,
            Reg::R8 => 72,
            Reg::Rax => 80,
            Reg::Rcx => 88,
            Reg::Rdx => 96,
            Reg::Rsi => 104,
            Reg::Rdi => 112,
            Reg::Rip => 128,
            Reg::Rsp => 152,
        }
    }

    /// The register DWARF numbers `n` on x86-64 (System V psABI: 0 RAX, 1 RDX, 2 RCX,
    /// 3 RBX, 4 RSI, 5 RDI, 6 RBP, 7 RSP, 8-15 R8-R15).
    pub fn from_dwarf(n: u16) -> Option<Reg> {
        Some(match n {
            0 => Reg::Rax,
            1 => Reg::Rdx,
            2 => Reg::Rcx,
            3 => Reg::Rbx,
            4 => Reg::Rsi,
            5 => Reg::Rdi,
            6 => Reg::Rbp,
            7 => Reg::Rsp,
            8 => Reg::R8,
            9 => Reg::R9,
            10 => Reg::R10,
            11 => Reg::R11,
            12 => Reg::R12,
            13 => Reg::R13,
            14 => Reg::R14,
            15 => Reg::R15,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Reg::Rax => "RAX",
            Reg::Rbx => "RBX",
            Reg::Rcx => "RCX",
            Reg::Rdx => "RDX",
            Reg::Rsi => "RSI",
            Reg::Rdi => "RDI",
            Reg::Rbp => "RBP",
            Reg::Rsp => "RSP",
            Reg::R8 => "R8",
            Reg::R9 => "R9",
            Reg::R10 => "R10",
            Reg::R11 => "R11",
            Reg::R12 => "R12",
            Reg::R13 => "R13",
            Reg::R14 => "R14",
            Reg::R15 => "R15",
            Reg::Rip => "RIP",
        }
    }
}

/// Go's ABIInternal integer argument and result registers, in order
/// (src/cmd/compile/abi-internal.md).
pub const INT_ARGS: [super::Reg; 9] = [
    super::Reg::X86(Reg::Rax),
    super::Reg::X86(Reg::Rbx),
    super::Reg::X86(Reg::Rcx),
    super::Reg::X86(Reg::Rdi),
    super::Reg::X86(Reg::Rsi),
    super::Reg::X86(Reg::R8),
    super::Reg::X86(Reg::R9),
    super::Reg::X86(Reg::R10),
    super::Reg::X86(Reg::R11),
];

/// `R_X86_64_RELATIVE`: the dynamic relocation of a PIE's pointers.
pub const RELATIVE_RELOCATION: u32 = object::elf::R_X86_64_RELATIVE;
