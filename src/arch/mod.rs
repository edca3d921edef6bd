//! Everything that depends on the target's instruction set, behind one `Arch`: its
//! registers (names, DWARF numbers, where a uprobe program finds them in `struct
//! pt_regs`), Go's ABIInternal register assignment (`abi`), the questions asked of
//! machine code (RETs, the stack-check prologue), relocations, and the frame layout a
//! stack walk follows. Nothing outside this folder names a machine register; a port is
//! a folder (`x86_64`, `arm64`) and a variant of `Arch`.

pub mod abi;
pub mod arm64;
mod prologue;
mod refusal;
pub mod trap;
pub mod x86_64;

pub use refusal::Refusal;

use serde::{Deserialize, Serialize};

/// An instruction set gtrace reads Go binaries of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Arch {
    /// x86-64 (GOARCH=amd64); the default, what every plan of format 2 was made for.
    #[default]
    X86_64,
    /// AArch64 (GOARCH=arm64).
    Arm64,
}

/// The link-time addresses of the Go runtime's `useAeshash` (a bool), `aeskeysched`
/// (its round keys) and, when found, `hashkey` (the keys of its fallback hash, memhash,
/// used where the CPU has no AES); and how its AES hash is built (`rounds`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AesGlobals {
    pub use_aeshash: u64,
    pub aeskeysched: u64,
    pub hashkey: Option<u64>,
    pub rounds: AesRounds,
}

/// How the Go runtime's AES map hash is built from the AES instructions its CPU has
/// (the lowering computes the same with tables: src/lower/aeshash.rs, aeskeyfirst.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AesRounds {
    /// amd64 (`AESENC`): a round is SubBytes, ShiftRows, MixColumns, then its key XORed.
    KeyLast,
    /// arm64 (`AESE`, then `AESMC` where the runtime adds one): a round XORs its key
    /// first, then SubBytes and ShiftRows, then MixColumns unless it is a lane's last.
    /// `int32_low`: a 4-byte key goes in bytes 4-7 beside the seed's low 32 bits (Go
    /// 1.17 to 1.26); else in bytes 8-11, above the whole seed (Go 1.27 on).
    /// `short_mixed`: the last round of a key of 1 to 16 bytes has MixColumns too (Go
    /// 1.21 on; before, it had none).
    KeyFirst { int32_low: bool, short_mixed: bool },
}

/// A machine register of some architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Reg {
    X86(x86_64::Reg),
    Arm64(arm64::Reg),
}

impl Reg {
    /// The name users see in listings and messages: `RAX`, `R0`.
    pub fn name(self) -> &'static str {
        match self {
            Reg::X86(r) => r.name(),
            Reg::Arm64(r) => r.name(),
        }
    }

    /// Byte offset of the register in the `struct pt_regs` a uprobe program receives.
    pub fn pt_regs_offset(self) -> i16 {
        match self {
            Reg::X86(r) => r.pt_regs_offset(),
            Reg::Arm64(r) => r.pt_regs_offset(),
        }
    }
}

/// Where the return address is at a probe placed at a function's entry or at a RET.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReturnAddress {
    /// In memory at SP (x86-64: CALL pushed it).
    AtStackPointer,
    /// In a register (a link register).
    InRegister(Reg),
}

/// Where the probes of one function go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeSites {
    /// The address an entry probe attaches to: after the stack-check prologue, so a call
    /// that goes through runtime.morestack is seen once.
    pub entry: u64,
    /// Every RET instruction's address; empty when the function has none (it ends in a
    /// tail call or never returns).
    pub returns: Vec<u64>,
}

/// Machine code that does not decode.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid instruction at {addr:#x}")]
pub struct DecodeError {
    pub addr: u64,
}

/// Where control goes after an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// To the next instruction (plain instructions and calls, which return there).
    Next,
    /// Always to the target (`JMP rel`).
    Jump(u64),
    /// To the target or the next instruction (`Jcc`).
    Branch(u64),
    /// Somewhere a register or memory says (`JMP reg`: a jump table, a tail call).
    Indirect,
    /// Nowhere in this function: `RET`, `INT3`, `UD2`.
    Stop,
    /// A direct call (`CALL rel`): to the next instruction unless the callee never
    /// returns (runtime.gopanic, runtime.throw...), which the caller knows by name.
    Call(u64),
}

/// One instruction and where control goes after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowInsn {
    pub addr: u64,
    /// The address right after it.
    pub next: u64,
    pub flow: Flow,
    /// A NOP: Go's inline marks are NOPs.
    pub nop: bool,
    /// It only moves a value between registers and stack slots, or makes a constant:
    /// what Go's register allocator adds (spills, reloads, copies, rematerialized
    /// constants), often far from the code it serves.
    pub shuffle: bool,
    /// The stack bytes it writes, addressed from SP: `(offset from SP, size)`.
    pub sp_store: Option<(i64, u32)>,
}

/// Pointer size in bytes, the same on every architecture gtrace reads.
pub const PTR_SIZE: u64 = 8;

impl Arch {
    /// The architecture of an ELF file, if gtrace reads its Go binaries.
    pub fn from_elf(machine: object::Architecture) -> Option<Arch> {
        match machine {
            object::Architecture::X86_64 => Some(Arch::X86_64),
            object::Architecture::Aarch64 => Some(Arch::Arm64),
            _ => None,
        }
    }

    /// The architecture gtrace itself runs on, where probes can attach.
    pub fn host() -> Option<Arch> {
        match std::env::consts::ARCH {
            "x86_64" => Some(Arch::X86_64),
            "aarch64" => Some(Arch::Arm64),
            _ => None,
        }
    }

    /// The name Go gives it (GOARCH).
    pub fn goarch(self) -> &'static str {
        match self {
            Arch::X86_64 => "amd64",
            Arch::Arm64 => "arm64",
        }
    }

    /// Go's ABIInternal integer argument and result registers, in order.
    pub fn int_arg_regs(self) -> &'static [Reg] {
        match self {
            Arch::X86_64 => &x86_64::INT_ARGS,
            Arch::Arm64 => &arm64::INT_ARGS,
        }
    }

    /// How many float registers Go's ABIInternal passes arguments in. A uprobe program
    /// cannot read them: `pt_regs` holds no vector registers.
    pub fn float_arg_regs(self) -> usize {
        match self {
            Arch::X86_64 => 15,
            Arch::Arm64 => arm64::FLOAT_ARGS,
        }
    }

    /// The name of float argument register `i`: `X0`, `F0`.
    pub fn float_reg_name(self, i: usize) -> String {
        match self {
            Arch::X86_64 => format!("X{i}"),
            Arch::Arm64 => format!("F{i}"),
        }
    }

    /// The first Go 1.x release whose Go functions take their arguments in registers
    /// (ABIInternal); before it, on the stack as assembly does (ABI0).
    pub fn register_abi_since(self) -> u32 {
        match self {
            Arch::X86_64 => 17,
            Arch::Arm64 => arm64::REGISTER_ABI_SINCE,
        }
    }

    /// The register holding the current goroutine's `g` at every ABIInternal function
    /// boundary (Go 1.17+).
    pub fn g_reg(self) -> Reg {
        match self {
            Arch::X86_64 => Reg::X86(x86_64::Reg::R14),
            Arch::Arm64 => Reg::Arm64(arm64::G),
        }
    }

    /// Whether `g_reg` holds `g` in assembly (ABI0) functions too: on arm64 R28 always
    /// does; on amd64 assembly finds g in thread-local storage.
    pub fn g_in_abi0(self) -> bool {
        match self {
            Arch::X86_64 => false,
            Arch::Arm64 => true,
        }
    }

    pub fn stack_pointer(self) -> Reg {
        match self {
            Arch::X86_64 => Reg::X86(x86_64::Reg::Rsp),
            Arch::Arm64 => Reg::Arm64(arm64::Reg::Sp),
        }
    }

    pub fn program_counter(self) -> Reg {
        match self {
            Arch::X86_64 => Reg::X86(x86_64::Reg::Rip),
            Arch::Arm64 => Reg::Arm64(arm64::Reg::Pc),
        }
    }

    /// The frame pointer: `[fp]` is the caller's frame pointer, `[fp + 8]` the return
    /// address into the caller (Go keeps frame pointers, in this layout on both).
    pub fn frame_pointer(self) -> Reg {
        match self {
            Arch::X86_64 => Reg::X86(x86_64::Reg::Rbp),
            Arch::Arm64 => Reg::Arm64(arm64::FP),
        }
    }

    /// Where the return address is at an entry probe (after the stack check, before the
    /// frame is set up) and at a RET.
    pub fn return_address(self) -> ReturnAddress {
        match self {
            Arch::X86_64 => ReturnAddress::AtStackPointer,
            Arch::Arm64 => ReturnAddress::InRegister(Reg::Arm64(arm64::LR)),
        }
    }

    /// The bytes a call instruction pushes: a callee's SP at its entry is the caller's
    /// SP minus this (amd64's CALL pushes the return address; arm64's BL leaves it in
    /// the link register, so a callee enters at its caller's very SP).
    pub fn call_pushes(self) -> u64 {
        match self {
            Arch::X86_64 => PTR_SIZE,
            Arch::Arm64 => 0,
        }
    }

    /// Where the first stack argument is, in bytes above SP at a function's entry
    /// (amd64: above the return address; arm64: above the caller's saved-LR slot).
    pub fn stack_args_offset(self) -> u64 {
        match self {
            Arch::X86_64 | Arch::Arm64 => PTR_SIZE,
        }
    }

    /// The register DWARF numbers `n`.
    pub fn reg_from_dwarf(self, n: u16) -> Option<Reg> {
        match self {
            Arch::X86_64 => x86_64::Reg::from_dwarf(n).map(Reg::X86),
            Arch::Arm64 => arm64::Reg::from_dwarf(n).map(Reg::Arm64),
        }
    }

    /// The ELF relocation type of a PIE's pointers (`*_RELATIVE`).
    pub fn relative_relocation(self) -> u32 {
        match self {
            Arch::X86_64 => x86_64::RELATIVE_RELOCATION,
            Arch::Arm64 => arm64::RELATIVE_RELOCATION,
        }
    }

    /// The instruction size quantum of Go's function table header (`minLC`): pc deltas
    /// count in these units.
    pub fn pc_quantum(self) -> u8 {
        match self {
            Arch::X86_64 => 1,
            Arch::Arm64 => arm64::PC_QUANTUM,
        }
    }

    /// Decodes `code`, the bytes of a function at `addr`, into its probe sites.
    /// `symbol_at` names the function that starts at an address (to recognise calls to
    /// runtime.morestack).
    pub fn probe_sites<'a>(
        self,
        addr: u64,
        code: &[u8],
        symbol_at: impl Fn(u64) -> Option<&'a str>,
    ) -> Result<ProbeSites, DecodeError> {
        match self {
            Arch::X86_64 => x86_64::code::probe_sites(addr, code, symbol_at),
            Arch::Arm64 => arm64::code::probe_sites(addr, code, symbol_at),
        }
    }

    /// The instructions of `code`, loaded at `addr`, with where control goes after each
    /// (what a control flow graph is built from). None when the bytes do not decode.
    pub fn control_flow(self, code: &[u8], addr: u64) -> Option<Vec<FlowInsn>> {
        match self {
            Arch::X86_64 => x86_64::flow::decode(code, addr),
            Arch::Arm64 => arm64::flow::decode(code, addr),
        }
    }

    /// Where the Go runtime keeps its aeshash keys: the address of `useAeshash` from the
    /// code of the function that tests it (`check`, at `check_addr`) and of
    /// `aeskeysched` from the code that runs the rounds (`rounds`, at `rounds_addr`), for
    /// a binary of Go 1.`minor` (None: unknown, taken as the newest).
    pub fn aes_globals(
        self,
        (check, check_addr): (&[u8], u64),
        (rounds, rounds_addr): (&[u8], u64),
        minor: Option<u32>,
    ) -> Option<AesGlobals> {
        let (use_aeshash, aeskeysched) = match self {
            Arch::X86_64 => (
                x86_64::hashglobals::use_aeshash(check, check_addr)?,
                x86_64::hashglobals::aeskeysched(rounds, rounds_addr)?,
            ),
            Arch::Arm64 => (
                arm64::hashglobals::use_aeshash(check, check_addr)?,
                arm64::hashglobals::aeskeysched(rounds, rounds_addr)?,
            ),
        };
        Some(AesGlobals { use_aeshash, aeskeysched, hashkey: None, rounds: self.aes_rounds(minor) })
    }

    /// How the runtime's AES hash is built here by Go 1.`minor` (None: the newest).
    pub fn aes_rounds(self, minor: Option<u32>) -> AesRounds {
        let since = |release: u32| minor.is_none_or(|m| m >= release);
        match self {
            Arch::X86_64 => AesRounds::KeyLast,
            Arch::Arm64 => AesRounds::KeyFirst { int32_low: !since(27), short_mixed: since(21) },
        }
    }

    /// The address of the fallback hash's `hashkey` from the code of the 8-byte key's
    /// fallback hash at `addr`.
    pub fn hashkey(self, code: &[u8], addr: u64) -> Option<u64> {
        match self {
            Arch::X86_64 => x86_64::hashglobals::hashkey(code, addr),
            Arch::Arm64 => arm64::hashglobals::hashkey(code, addr),
        }
    }

    /// The most bytes one instruction takes (what `uprobe_refusal` needs to see).
    pub fn max_insn_bytes(self) -> usize {
        match self {
            Arch::X86_64 => x86_64::uprobe::MAX_INSN_BYTES,
            Arch::Arm64 => arm64::insn::SIZE,
        }
    }

    /// How the kernel runs the instruction that `code` starts with when a uprobe
    /// replaced it (what the trap costs depends on it).
    pub fn trap_kind(self, code: &[u8]) -> trap::TrapKind {
        match self {
            Arch::X86_64 => x86_64::trap::kind(code),
            Arch::Arm64 => arm64::trap::kind(code),
        }
    }

    /// How many bytes before a site `uprobe_refusal` looks at (arm64: whether the site is
    /// inside an exclusive load/store sequence).
    pub fn refusal_context_bytes(self) -> usize {
        match self {
            Arch::X86_64 => 0,
            Arch::Arm64 => arm64::uprobe::CONTEXT_BYTES,
        }
    }

    /// Why a uprobe must not go on the instruction that `code` starts with, if it must
    /// not: the kernel would refuse it, or (arm64) it would harm the program. `before`
    /// holds the bytes of the same function right before it (up to
    /// `refusal_context_bytes`).
    pub fn uprobe_refusal(self, before: &[u8], code: &[u8]) -> Option<Refusal> {
        match self {
            Arch::X86_64 => x86_64::uprobe::refusal(code).map(Refusal::X86),
            Arch::Arm64 => arm64::uprobe::refusal(before, code).map(Refusal::Arm64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A callee enters at its caller's SP minus what the call pushed: on amd64 the return
    /// address is at SP at an entry (CALL pushed it), on arm64 in LR (BL pushed nothing),
    /// so a recovered panic's unwinding (lower/unwind.rs) takes arm64 frames entered at
    /// the recovering frame's very SP for its callees.
    #[test]
    fn a_call_pushes_the_return_address_only_where_it_is_on_the_stack() {
        for arch in [Arch::X86_64, Arch::Arm64] {
            let pushed = match arch.return_address() {
                ReturnAddress::AtStackPointer => PTR_SIZE,
                ReturnAddress::InRegister(_) => 0,
            };
            assert_eq!(arch.call_pushes(), pushed, "{arch:?}");
        }
        assert_eq!(Arch::Arm64.call_pushes(), 0);
    }
}
