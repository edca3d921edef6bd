//! The few A64 encodings gtrace asks about, decoded by hand from the 32-bit word (every
//! A64 instruction is one little-endian word; Arm Architecture Reference Manual, "A64
//! instruction set encoding"): branches and where they go, RET, NOP, the traps, and the
//! instructions that only move values between registers and stack slots or make
//! constants. Everything else is `Kind::Other`: a fixed width means an instruction gtrace
//! does not know is still one instruction, so decoding never fails on a whole word.
//!
//! By hand rather than with a disassembler crate: the questions are a handful of bit
//! masks (the kernel states its own uprobe rules the same way, in
//! arch/arm64/include/asm/insn.h), and a crate's opcode classes would not match them.

/// Bytes per instruction.
pub const SIZE: usize = 4;

/// What an instruction does to control flow, as far as gtrace cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `B target`.
    Jump(u64),
    /// `B.cond`, `CBZ`/`CBNZ`, `TBZ`/`TBNZ`: to the target or the next instruction.
    Branch(u64),
    /// `BL target` (Go's `CALL`).
    Call(u64),
    /// `BLR Xn` and its pointer-authenticating forms: a call through a register.
    CallIndirect,
    /// `BR Xn` and its pointer-authenticating forms (a jump table, a tail call).
    JumpIndirect,
    /// `RET`, `RETAA`, `RETAB`.
    Ret,
    /// `UDF` (the zero words that pad Go functions), `BRK`, `HLT`: control stops here.
    Trap,
    /// `NOP` (Go's `NOOP`, its inline mark).
    Nop,
    /// Anything else: control goes on to the next instruction.
    Other,
}

/// The word at the start of `code`, if it holds four bytes.
pub fn word(code: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(code.get(..SIZE)?.try_into().ok()?))
}

/// Bits `lo..lo+len` of `w`.
pub(super) fn bits(w: u32, lo: u32, len: u32) -> u32 {
    (w >> lo) & ((1 << len) - 1)
}

/// `addr` plus a word offset held in `len` signed bits of `w` from bit `lo`.
fn target(addr: u64, w: u32, lo: u32, len: u32) -> u64 {
    let imm = bits(w, lo, len) as i64;
    let signed = (imm << (64 - len)) >> (64 - len);
    addr.wrapping_add_signed(signed * SIZE as i64)
}

/// Whether `w` matches `value` under `mask` (the kernel's `__AARCH64_INSN_FUNCS`).
pub(super) fn is(w: u32, mask: u32, value: u32) -> bool {
    w & mask == value
}

pub const NOP: u32 = 0xd503_201f;

/// What the instruction `w` at `addr` does to control flow.
pub fn kind(w: u32, addr: u64) -> Kind {
    if is(w, 0x7c00_0000, 0x1400_0000) {
        // B (bit 31 clear) and BL (set), imm26.
        let to = target(addr, w, 0, 26);
        return if w >> 31 == 0 { Kind::Jump(to) } else { Kind::Call(to) };
    }
    if is(w, 0xff00_0000, 0x5400_0000) {
        // B.cond and BC.cond, imm19; conditions AL and NV always branch.
        let to = target(addr, w, 5, 19);
        return if bits(w, 0, 4) >= 0b1110 { Kind::Jump(to) } else { Kind::Branch(to) };
    }
    if is(w, 0x7e00_0000, 0x3400_0000) {
        return Kind::Branch(target(addr, w, 5, 19)); // CBZ, CBNZ
    }
    if is(w, 0x7e00_0000, 0x3600_0000) {
        return Kind::Branch(target(addr, w, 5, 14)); // TBZ, TBNZ
    }
    if is(w, 0xfe00_0000, 0xd600_0000) {
        // Unconditional branch (register): opc in bits 24-21.
        return match bits(w, 21, 4) {
            0b0000 | 0b1000 => Kind::JumpIndirect, // BR, BRAA/BRAB
            0b0001 | 0b1001 => Kind::CallIndirect, // BLR, BLRAA/BLRAB
            0b0010 => Kind::Ret,                   // RET, RETAA/RETAB
            _ => Kind::Trap,                       // ERET, DRPS: never in user code
        };
    }
    if is(w, 0xffff_0000, 0) || is(w, 0xffe0_001f, 0xd420_0000) || is(w, 0xffe0_001f, 0xd440_0000) {
        return Kind::Trap; // UDF, BRK, HLT
    }
    if w == NOP {
        return Kind::Nop;
    }
    Kind::Other
}

/// The base register (bits 9-5) of a load or store.
fn rn(w: u32) -> u32 {
    bits(w, 5, 5)
}

/// The destination register (bits 4-0).
fn rd(w: u32) -> u32 {
    bits(w, 0, 5)
}

/// Register number 31: SP as a base or an ADD/SUB operand, ZR elsewhere.
const SP_OR_ZR: u32 = 31;

/// Whether `w` only moves a value between registers and stack slots or makes a
/// constant: what Go's register allocator adds (spills, reloads, copies, rematerialized
/// constants and addresses). `prev` is the instruction before it (an `ADD` that
/// completes an `ADRP` is the address of a global).
pub fn is_shuffle(w: u32, prev: Option<u32>) -> bool {
    let sp_based = rn(w) == SP_OR_ZR;
    // Loads and stores, integer or float: unsigned offset; unscaled, pre- and
    // post-indexed; pairs.
    let single_imm = is(w, 0x3b00_0000, 0x3900_0000) || is(w, 0x3b20_0000, 0x3800_0000);
    let pair = is(w, 0x3a00_0000, 0x2800_0000);
    if (single_imm || pair) && sp_based {
        return true;
    }
    let mov_reg = is(w, 0x7fe0_ffe0, 0x2a00_03e0); // MOV Xd, Xm (ORR with ZR)
    let movewide = is(w, 0x1f80_0000, 0x1280_0000) && bits(w, 29, 2) != 0b01; // MOVN, MOVZ, MOVK
    let mov_bitmask = is(w, 0x7f80_0000, 0x3200_0000) && rn(w) == SP_OR_ZR; // ORR $imm, ZR
    let adr = is(w, 0x1f00_0000, 0x1000_0000); // ADR, ADRP
    let add_sub_imm = is(w, 0x3f00_0000, 0x1100_0000); // ADD/SUB $imm (no flags)
    let stack_address = add_sub_imm && sp_based; // ADD $off, RSP, Rd; MOVD RSP, Rd
    let low_half = add_sub_imm
        && bits(w, 30, 1) == 0
        && rn(w) == rd(w)
        && prev.is_some_and(|p| is(p, 0x9f00_0000, 0x9000_0000) && rd(p) == rd(w));
    let fmov = is(w, 0xff3f_fc00, 0x1e20_4000) // FMOV Dd, Dn
        || is(w, 0x7f3e_fc00, 0x1e26_0000) // FMOV between general and float registers
        || is(w, 0xff20_1fe0, 0x1e20_1000); // FMOV $imm
    mov_reg || movewide || mov_bitmask || adr || stack_address || low_half || fmov
}

/// The register number of SP in a load/store's base (Rn) field.
const SP: u32 = 31;

/// The stack bytes a store writes, addressed from SP: `(offset from SP, size)`. Stores of
/// one register or a pair, integer or SIMD&FP, with an unsigned scaled offset, an
/// unscaled one (STUR), or pre- or post-indexing (`MOVD.W R30, -96(RSP)`).
pub fn sp_store(w: u32) -> Option<(i64, u32)> {
    if (w >> 5) & 0x1f != SP {
        return None;
    }
    let simd = w & (1 << 26) != 0;
    let sign = |v: u32, bits: u32| i64::from(((v << (32 - bits)) as i32) >> (32 - bits));
    // STR (immediate, unsigned offset): size 111 V 01 opc imm12 Rn Rt, opc 00 (or 10 for Q).
    if w & 0x3b00_0000 == 0x3900_0000 {
        let (size, opc) = (w >> 30, (w >> 22) & 3);
        let bytes: u32 = match (simd, opc) {
            (_, 0) => 1 << size,
            (true, 2) if size == 0 => 16,
            _ => return None,
        };
        let imm12 = i64::from((w >> 10) & 0xfff);
        return Some((imm12 * i64::from(bytes), bytes));
    }
    // STUR, and STR pre/post-index: size 111 V 00 opc 0 imm9 type Rn Rt, type 00/11/01.
    if w & 0x3b20_0000 == 0x3800_0000 {
        let (size, opc, kind) = (w >> 30, (w >> 22) & 3, (w >> 10) & 3);
        let bytes: u32 = match (simd, opc) {
            (_, 0) => 1 << size,
            (true, 2) if size == 0 => 16,
            _ => return None,
        };
        let imm9 = sign((w >> 12) & 0x1ff, 9);
        return match kind {
            0 | 3 => Some((imm9, bytes)),
            1 => Some((0, bytes)),
            _ => None,
        };
    }
    // STP: opc 101 V 0 idx L imm7 Rt2 Rn Rt, L = 0; idx 01 post-index, 10 offset, 11 pre.
    if w & 0x3a40_0000 == 0x2800_0000 {
        let (opc, idx) = (w >> 30, (w >> 23) & 3);
        let each: u32 = match (simd, opc) {
            (false, 0) | (true, 0) => 4,
            (false, 2) | (true, 1) => 8,
            (true, 2) => 16,
            _ => return None,
        };
        let imm7 = sign((w >> 15) & 0x7f, 7) * i64::from(each);
        return match idx {
            2 | 3 => Some((imm7, 2 * each)),
            1 => Some((0, 2 * each)),
            _ => None,
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodings as `go tool objdump` shows them (tests/go/kinds built for arm64).
    #[test]
    fn branches_and_their_targets() {
        let at = 0xa93d8;
        assert_eq!(kind(0x5400_0169, at), Kind::Branch(at + 11 * 4)); // BLS 11(PC)
        assert_eq!(kind(0x97ff_76d3, 0xa93f4), Kind::Call(0xa93f4 - 0x892d * 4)); // CALL time.Sleep
        assert_eq!(kind(0x17ff_ffef, 0xa5154), Kind::Jump(0xa5154 - 17 * 4)); // JMP main.sleepy
        assert_eq!(kind(0xb500_0661, 0xa9588), Kind::Branch(0xa9588 + 51 * 4)); // CBNZ R1, 51(PC)
        assert_eq!(kind(0xb5ff_ff62, 0xa667c), Kind::Branch(0xa667c - 5 * 4)); // CBNZ R2, -5(PC)
        assert_eq!(kind(0x3700_0040, 0x1000), Kind::Branch(0x1008)); // TBNZ W0, #0, 2(PC)
        assert_eq!(kind(0x3608_0040, 0x1000), Kind::Branch(0x1008)); // TBZ W0, #1, 2(PC)
        assert_eq!(kind(0x5400_000e, 0x1000), Kind::Jump(0x1000)); // B.AL
        assert_eq!(kind(0xd65f_03c0, 0), Kind::Ret); // RET
        assert_eq!(kind(0xd65f_0bff, 0), Kind::Ret); // RETAA
        assert_eq!(kind(0xd61f_0080, 0), Kind::JumpIndirect); // BR R4
        assert_eq!(kind(0xd63f_0080, 0), Kind::CallIndirect); // BLR R4 (CALL (R4))
        assert_eq!(kind(0xd71f_0880, 0), Kind::JumpIndirect); // BRAA X4, X0
        assert_eq!(kind(0, 0), Kind::Trap); // the zero padding
        assert_eq!(kind(0xd420_0000, 0), Kind::Trap); // BRK #0
        assert_eq!(kind(0xd503_201f, 0), Kind::Nop); // NOOP
        assert_eq!(kind(0xd400_0001, 0), Kind::Other); // SVC #0 returns
        assert_eq!(kind(0x8b01_0000, 0), Kind::Other); // ADD R1, R0, R0
    }

    #[test]
    fn shuffles() {
        let is = |w: u32| is_shuffle(w, None);
        assert!(is(0xf900_07e0)); // MOVD R0, 8(RSP)
        assert!(is(0xf940_07e0)); // MOVD 8(RSP), R0
        assert!(is(0xf81e_0ffe)); // MOVD.W R30, -32(RSP)
        assert!(is(0xa904_93e3)); // STP (R3, R4), 72(RSP)
        assert!(is(0xaa1e_03e3)); // MOVD R30, R3
        assert!(is(0xaa1f_03e1)); // MOVD ZR, R1
        assert!(is(0xd288_4801)); // MOVD $16960, R1
        assert!(is(0xf2a0_01e1)); // MOVK $(15<<16), R1
        assert!(is(0xb240_07e4)); // ORR $3, ZR, R4
        assert!(is(0x9000_0163)); // ADRP 180224(PC), R3
        assert!(is(0x9101_23e3)); // ADD $72, RSP, R3
        assert!(is_shuffle(0x9127_ac63, Some(0x9000_0163))); // ADD $2539, R3, R3 after ADRP
        assert!(!is(0x9127_ac63)); // the same ADD alone: arithmetic
        assert!(!is(0xf940_0b90)); // MOVD 16(R28), R16: a field of g
        assert!(!is(0xa941_1444)); // LDP 16(R2), (R4, R5): through a pointer
        assert!(!is(0x8b01_0000)); // ADD R1, R0, R0
        assert!(!is(0xeb30_63ff)); // CMP R16, RSP
        assert!(!is(0xaa01_0040)); // ORR R1, R2, R0
    }

    #[test]
    fn words_need_four_bytes() {
        assert_eq!(word(&[0xc0, 0x03, 0x5f, 0xd6]), Some(0xd65f_03c0));
        assert_eq!(word(&[0xc0, 0x03]), None);
    }

    #[test]
    fn stores_to_the_stack() {
        assert_eq!(sp_store(0xf900_07e0), Some((8, 8))); // STR X0, [SP, #8]
        assert_eq!(sp_store(0x3900_0fe0), Some((3, 1))); // STRB W0, [SP, #3]
        assert_eq!(sp_store(0xfd00_07e0), Some((8, 8))); // STR D0, [SP, #8]
        assert_eq!(sp_store(0xf81f_83e1), Some((-8, 8))); // STUR X1, [SP, #-8]
        assert_eq!(sp_store(0xf81a_0ffe), Some((-96, 8))); // STR X30, [SP, #-96]! (MOVD.W)
        assert_eq!(sp_store(0xa93f_7bfd), Some((-16, 16))); // STP X29, X30, [SP, #-16]
        assert_eq!(sp_store(0xa9bf_7bfd), Some((-16, 16))); // STP X29, X30, [SP, #-16]!
        assert_eq!(sp_store(0xf940_07e0), None); // LDR X0, [SP, #8]
        assert_eq!(sp_store(0xf900_0420), None); // STR X0, [X1, #8]
        assert_eq!(sp_store(0xa97f_7bfd), None); // LDP X29, X30, [SP, #-16]
    }
}
