//! eBPF instructions: encoding, decoding, a builder with labels, a disassembler, the
//! helpers and kernel functions (kfuncs) programs call, and an interpreter for tests.

pub mod asm;
pub mod builder;
pub mod disasm;
pub mod helper_ids;
pub mod helpers;
pub mod insn;
pub mod interp;
pub mod kfuncs;
