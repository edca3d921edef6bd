//! Where the Go runtime keeps its map hash keys, read from the code of its 8-byte key
//! hash (for binaries without a symbol table): it tests `CMPB useAeshash(SB), $0`, then
//! runs `AESENC aeskeysched+0(SB), X0` (runtime/asm_amd64.s up to Go 1.26;
//! internal/runtime/maps since 1.27). Both operands are RIP-relative, so the decoder
//! gives their link-time addresses.

use super::code::decode;
use iced_x86::{Code, OpKind, Register};

/// The address of the bool the first `CMPB x(SB), $imm` of `code` (at `addr`) tests:
/// `useAeshash` in `runtime.memhash64` (Go 1.17 to 1.26) or
/// `internal/runtime/maps.MemHash64` (Go 1.27 and later).
pub fn use_aeshash(code: &[u8], addr: u64) -> Option<u64> {
    decode(code, addr).iter().find(|i| i.code() == Code::Cmp_rm8_imm8).and_then(rip_operand)
}

/// The address of the first round key an `AESENC` (or `VAESENC`) of `code` reads from
/// memory: `aeskeysched` in `runtime.memhash64` (Go 1.17 to 1.26) or
/// `internal/runtime/maps.memHash64AES` (Go 1.27 and later).
pub fn aeskeysched(code: &[u8], addr: u64) -> Option<u64> {
    let aesenc = |c: Code| matches!(c, Code::Aesenc_xmm_xmmm128 | Code::VEX_Vaesenc_xmm_xmm_xmmm128);
    decode(code, addr).iter().find(|i| aesenc(i.code())).and_then(rip_operand)
}

/// The address of `hashkey`, the fallback hash's keys, from the code of the 8-byte
/// key's fallback hash (`runtime.memhash64Fallback`; Go 1.27 inlines it in
/// `internal/runtime/maps.MemHash64`): the lowest 8-byte RIP-relative operand, as it
/// reads `hashkey[0]` (and, since Go 1.23, `hashkey[1]`).
pub fn hashkey(code: &[u8], addr: u64) -> Option<u64> {
    let words = |i: &&iced_x86::Instruction| i.memory_size() == iced_x86::MemorySize::UInt64;
    decode(code, addr).iter().filter(words).filter_map(rip_operand).min()
}

/// The link-time address of an instruction's RIP-relative memory operand.
fn rip_operand(i: &iced_x86::Instruction) -> Option<u64> {
    let memory = (0..i.op_count()).any(|n| i.op_kind(n) == OpKind::Memory);
    (memory && i.memory_base() == Register::RIP).then(|| i.memory_displacement64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_two_rip_relative_operands() {
        // At 0x1000: CMPB 0x2000(RIP), $0 (7 bytes: 80 3d disp32 00); JEQ +0x10;
        // MOVQ BX, X0; PINSRQ $1, (AX), X0; AESENC 0x3000(RIP), X0.
        let mut code = vec![0x80, 0x3d];
        code.extend_from_slice(&((0x2000i64 - 0x1007) as i32).to_le_bytes());
        code.push(0x00);
        code.extend_from_slice(&[0x74, 0x10]);
        code.extend_from_slice(&[0x66, 0x48, 0x0f, 0x6e, 0xc3]);
        code.extend_from_slice(&[0x66, 0x48, 0x0f, 0x3a, 0x22, 0x00, 0x01]);
        let at = 0x1000 + code.len() as i64 + 9;
        code.extend_from_slice(&[0x66, 0x0f, 0x38, 0xdc, 0x05]);
        code.extend_from_slice(&((0x3000i64 - at) as i32).to_le_bytes());
        assert_eq!(use_aeshash(&code, 0x1000), Some(0x2000));
        assert_eq!(aeskeysched(&code, 0x1000), Some(0x3000));
        assert_eq!((use_aeshash(&[0xc3], 0x1000), aeskeysched(&[0xc3], 0x1000)), (None, None));
        // MOVQ 0x2008(RIP), CX; XORQ 0x2000(RIP), AX at 0x1000: hashkey at 0x2000.
        let mut code = vec![0x48, 0x8b, 0x0d];
        code.extend_from_slice(&((0x2008i64 - 0x1007) as i32).to_le_bytes());
        code.extend_from_slice(&[0x48, 0x33, 0x05]);
        code.extend_from_slice(&((0x2000i64 - 0x100e) as i32).to_le_bytes());
        assert_eq!(hashkey(&code, 0x1000), Some(0x2000));
    }
}
