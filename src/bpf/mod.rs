//! eBPF instructions: encoding, decoding, a builder with labels, and a disassembler.

pub mod asm;
pub mod builder;
pub mod disasm;
pub mod helper_ids;
pub mod helpers;
pub mod insn;
