//! The machine code of one arm64 function: every RET, and the first instruction after the
//! stack-check prologue, where an entry probe fires once per call even when the call
//! grows the stack (runtime.morestack jumps back to the function's first instruction).
//!
//! Go arm64 prologues (cmd/internal/obj/arm64 obj7.go, stacksplit): `MOVD 16(g), R16;
//! CMP R16, RSP; BLS L` for small frames (Go 1.17: `MOVD 16(g), R1; MOVD RSP, R2; CMP R1,
//! R2; BLS L`), `SUB $N, RSP, R17; CMP R16, R17; BLS L` for larger ones, and for huge
//! ones `MOVD $N, R27; MOVK ..., R27; SUBS R27, RSP, R17; BCC L; CMP R16, R17; BLS L`:
//! `arch::prologue` finds its end.

use super::insn::{self, Kind};
use crate::arch::prologue::{self, Limits};
use crate::arch::{DecodeError, ProbeSites};

/// The stack check ends within 10 instructions (the huge-frame form has 7); the
/// morestack block has spills, the call, reloads and the jump back.
const LIMITS: Limits = Limits { prologue: 10, morestack_block: 40 };

/// Decodes `code`, the bytes of a function at `addr`, into probe sites. `symbol_at` names
/// the function that starts at an address (to recognise calls to runtime.morestack).
pub(crate) fn probe_sites<'a>(
    addr: u64,
    code: &[u8],
    symbol_at: impl Fn(u64) -> Option<&'a str>,
) -> Result<ProbeSites, DecodeError> {
    let whole = code.len() - code.len() % insn::SIZE;
    let flows = super::flow::decode(code, addr).ok_or(DecodeError { addr: addr + whole as u64 })?;
    let returns = code
        .chunks_exact(insn::SIZE)
        .zip(&flows)
        .filter(|(word, i)| insn::word(word).is_some_and(|w| insn::kind(w, i.addr) == Kind::Ret))
        .map(|(_, i)| i.addr)
        .collect();
    let entry = prologue::entry(addr, &flows, LIMITS, &symbol_at);
    Ok(ProbeSites { entry, returns })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A symbol table with runtime.morestack_noctxt.abi0 at 0x2000.
    fn sym(a: u64) -> Option<&'static str> {
        (a == 0x2000).then_some("runtime.morestack_noctxt.abi0")
    }

    fn bytes(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// `MOVD 16(R28), R16; CMP R16, RSP; BLS 2(PC); RET; MOVD R30, R3; CALL target;
    /// JMP start` at 0x1000 (main.sleepy's shape in `go tool objdump`).
    fn small_frame(call_target: u64) -> Vec<u8> {
        let call = 0x9400_0000 | (((call_target as i64 - 0x1014) / 4) as u32 & 0x03ff_ffff);
        bytes(&[0xf940_0b90, 0xeb30_63ff, 0x5400_0049, 0xd65f_03c0, 0xaa1e_03e3, call, 0x17ff_fffa])
    }

    #[test]
    fn entry_is_after_the_stack_check() {
        let sites = probe_sites(0x1000, &small_frame(0x2000), sym).unwrap();
        assert_eq!(sites.entry, 0x100c);
        assert_eq!(sites.returns, vec![0x100c]);
    }

    #[test]
    fn branch_to_a_block_without_morestack_is_not_a_stack_check() {
        let sites = probe_sites(0x1000, &small_frame(0x3000), sym).unwrap();
        assert_eq!(sites.entry, 0x1000);
    }

    /// main.hugeFrame: `MOVD 16(R28), R16; MOVD $34368, R27; MOVK $(1<<16), R27; SUBS R27,
    /// RSP, R17; BCC L; CMP R16, R17; BLS L; ...` with L the morestack block.
    #[test]
    fn the_huge_frame_check_has_two_branches() {
        let mut words = vec![0xf940_0b90, 0xd290_c81b, 0xf2a0_003b, 0xeb3b_63f1];
        words.push(0x5400_0000 | (4 << 5) | 0b0011); // BCC 4(PC): to index 8
        words.push(0xeb10_023f); // CMP R16, R17
        words.push(0x5400_0000 | (2 << 5) | 0b1001); // BLS 2(PC): to index 8
        words.push(0xd65f_03c0); // RET
        let call = 0x9400_0000 | (((0x2000i64 - 0x1020) / 4) as u32 & 0x03ff_ffff);
        words.extend([call, 0x17ff_fff7]);
        let sites = probe_sites(0x1000, &bytes(&words), sym).unwrap();
        assert_eq!(sites.entry, 0x101c);
        assert_eq!(sites.returns, vec![0x101c]);
    }

    #[test]
    fn no_ret_means_no_returns() {
        let sites = probe_sites(0x1000, &bytes(&[0x1400_0000]), sym).unwrap(); // JMP 0(PC)
        assert!(sites.returns.is_empty());
        assert_eq!(sites.entry, 0x1000);
    }

    #[test]
    fn part_of_a_word_is_an_error() {
        assert_eq!(probe_sites(0x1000, &[0xc0, 0x03, 0x5f, 0xd6, 0x1f], sym), Err(DecodeError { addr: 0x1004 }));
    }
}
