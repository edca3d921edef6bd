//! The machine code of one x86-64 function (iced-x86): every RET, and the first instruction after
//! the stack-check prologue, where an entry probe fires once per call even when the call
//! grows the stack (runtime.morestack jumps back to the function's first instruction).
//!
//! A Go amd64 prologue is `CMPQ SP, 16(R14); JBE L`, or `LEAQ -N(SP), R12; CMPQ R12,
//! 16(R14); JBE L`, or for huge frames `MOVQ SP, R12; SUBQ $N, R12; JCS L; CMPQ R12,
//! 16(R14); JLS L`: `arch::prologue` finds its end.

use crate::arch::prologue::{self, Limits};
use crate::arch::{DecodeError, ProbeSites};
use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction};

/// The stack check ends within 8 instructions (the huge-frame form has 5); the morestack
/// block has spills, the call, reloads and the jump back.
const LIMITS: Limits = Limits { prologue: 8, morestack_block: 32 };

/// Decodes `code`, the bytes of a function at `addr`, into probe sites. `symbol_at` names
/// the function that starts at an address (to recognise calls to runtime.morestack).
pub(crate) fn probe_sites<'a>(
    addr: u64,
    code: &[u8],
    symbol_at: impl Fn(u64) -> Option<&'a str>,
) -> Result<ProbeSites, DecodeError> {
    let instructions = decode(code, addr);
    if let Some(bad) = instructions.iter().find(|i| i.is_invalid()) {
        return Err(DecodeError { addr: bad.ip() });
    }
    let returns = instructions.iter().filter(|i| i.flow_control() == FlowControl::Return).map(|i| i.ip()).collect();
    let flows: Vec<_> = instructions.iter().map(super::flow::flow_insn).collect();
    let entry = prologue::entry(addr, &flows, LIMITS, &symbol_at);
    Ok(ProbeSites { entry, returns })
}

pub(super) fn decode(code: &[u8], addr: u64) -> Vec<Instruction> {
    let mut decoder = Decoder::with_ip(64, code, addr, DecoderOptions::NONE);
    let mut out = Vec::new();
    while decoder.can_decode() {
        out.push(decoder.decode());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A symbol table with runtime.morestack_noctxt.abi0 at 0x2000.
    fn sym(a: u64) -> Option<&'static str> {
        (a == 0x2000).then_some("runtime.morestack_noctxt.abi0")
    }

    /// `CMPQ SP, 16(R14); JBE L; RET; L: CALL morestack; JMP start` at 0x1000.
    fn small_frame(call_target: u64) -> Vec<u8> {
        let mut code = vec![0x49, 0x3b, 0x66, 0x10, 0x76, 0x01, 0xc3];
        // CALL rel32 at 0x1007, next ip 0x100c.
        let rel = (call_target as i64 - 0x100c) as i32;
        code.push(0xe8);
        code.extend_from_slice(&rel.to_le_bytes());
        // JMP rel8 back to 0x1000 from 0x100e.
        code.extend_from_slice(&[0xeb, (0x1000i64 - 0x100e) as i8 as u8]);
        code
    }

    #[test]
    fn entry_is_after_the_stack_check() {
        let sites = probe_sites(0x1000, &small_frame(0x2000), sym).unwrap();
        assert_eq!(sites.entry, 0x1006);
        assert_eq!(sites.returns, vec![0x1006]);
    }

    #[test]
    fn branch_to_a_block_without_morestack_is_not_a_stack_check() {
        let sites = probe_sites(0x1000, &small_frame(0x3000), sym).unwrap();
        assert_eq!(sites.entry, 0x1000);
    }

    #[test]
    fn no_ret_means_no_returns() {
        // JMP to itself.
        let sites = probe_sites(0x1000, &[0xeb, 0xfe], sym).unwrap();
        assert!(sites.returns.is_empty());
        assert_eq!(sites.entry, 0x1000);
    }

    #[test]
    fn bad_bytes_are_an_error() {
        assert_eq!(probe_sites(0x1000, &[0x48, 0x8b], sym), Err(DecodeError { addr: 0x1000 }));
    }
}
