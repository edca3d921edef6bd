//! Everything specific to x86-64: where a uprobe program finds each register in
//! `struct pt_regs`, and the Go register ABI's integer register order. The rest of the
//! compiler asks this module; an arm64 port replaces it.

/// A machine register of the target, as Go's ABI and `pt_regs` know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
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

/// Go's ABIInternal integer argument and result registers on amd64, in order
/// (src/cmd/compile/abi-internal.md).
pub const GO_INT_REGS: [Reg; 9] =
    [Reg::Rax, Reg::Rbx, Reg::Rcx, Reg::Rdi, Reg::Rsi, Reg::R8, Reg::R9, Reg::R10, Reg::R11];

/// Number of float registers Go's ABIInternal uses for arguments (X0..X14). uprobe
/// programs cannot read them: `pt_regs` holds no vector registers.
pub const GO_FLOAT_REGS: usize = 15;

/// The register holding the current goroutine's `g` at every ABIInternal function
/// boundary (Go 1.17+).
pub const G_REG: Reg = Reg::R14;

/// The stack pointer.
pub const SP: Reg = Reg::Rsp;

/// Pointer size in bytes.
pub const PTR_SIZE: u64 = 8;

pub mod abi;
pub mod flow;
pub mod uprobe;
