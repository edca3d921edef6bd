//! eBPF instructions: encoding, decoding, a builder with labels, a disassembler, and the
//! helpers and kernel functions (kfuncs) programs call.

pub mod asm;
pub mod builder;
pub mod disasm;
pub mod helper_ids;
pub mod helpers;
pub mod insn;
pub mod kfuncs;
