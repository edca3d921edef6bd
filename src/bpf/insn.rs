//! One eBPF instruction: the kernel's opcode constants (named as `linux/bpf.h` and
//! `linux/bpf_common.h` name them), the 8-byte `struct bpf_insn` encoding, and one
//! constructor per instruction form the compiler emits.

// Instruction classes (the low 3 bits of `code`).
pub const BPF_LD: u8 = 0x00;
pub const BPF_LDX: u8 = 0x01;
pub const BPF_ST: u8 = 0x02;
pub const BPF_STX: u8 = 0x03;
pub const BPF_ALU: u8 = 0x04;
pub const BPF_JMP: u8 = 0x05;
pub const BPF_JMP32: u8 = 0x06;
pub const BPF_ALU64: u8 = 0x07;

// Sizes of loads and stores (bits 3-4).
pub const BPF_W: u8 = 0x00;
pub const BPF_H: u8 = 0x08;
pub const BPF_B: u8 = 0x10;
pub const BPF_DW: u8 = 0x18;

// Modes of loads and stores (bits 5-7).
pub const BPF_IMM: u8 = 0x00;
pub const BPF_ABS: u8 = 0x20;
pub const BPF_IND: u8 = 0x40;
pub const BPF_MEM: u8 = 0x60;
pub const BPF_MEMSX: u8 = 0x80;
pub const BPF_ATOMIC: u8 = 0xc0;

// ALU operations (bits 4-7).
pub const BPF_ADD: u8 = 0x00;
pub const BPF_SUB: u8 = 0x10;
pub const BPF_MUL: u8 = 0x20;
pub const BPF_DIV: u8 = 0x30;
pub const BPF_OR: u8 = 0x40;
pub const BPF_AND: u8 = 0x50;
pub const BPF_LSH: u8 = 0x60;
pub const BPF_RSH: u8 = 0x70;
pub const BPF_NEG: u8 = 0x80;
pub const BPF_MOD: u8 = 0x90;
pub const BPF_XOR: u8 = 0xa0;
pub const BPF_MOV: u8 = 0xb0;
pub const BPF_ARSH: u8 = 0xc0;
pub const BPF_END: u8 = 0xd0;

// Jump operations (bits 4-7).
pub const BPF_JA: u8 = 0x00;
pub const BPF_JEQ: u8 = 0x10;
pub const BPF_JGT: u8 = 0x20;
pub const BPF_JGE: u8 = 0x30;
pub const BPF_JSET: u8 = 0x40;
pub const BPF_JNE: u8 = 0x50;
pub const BPF_JSGT: u8 = 0x60;
pub const BPF_JSGE: u8 = 0x70;
pub const BPF_CALL: u8 = 0x80;
pub const BPF_EXIT: u8 = 0x90;
pub const BPF_JLT: u8 = 0xa0;
pub const BPF_JLE: u8 = 0xb0;
pub const BPF_JSLT: u8 = 0xc0;
pub const BPF_JSLE: u8 = 0xd0;

// Operand source (bit 3).
pub const BPF_K: u8 = 0x00;
pub const BPF_X: u8 = 0x08;

// Byte order of BPF_END (bit 3).
pub const BPF_TO_LE: u8 = 0x00;
pub const BPF_TO_BE: u8 = 0x08;

/// `src` of a `BPF_LD | BPF_IMM | BPF_DW` whose immediate is a map file descriptor.
pub const BPF_PSEUDO_MAP_FD: u8 = 1;
/// `src` of a `BPF_CALL` to a BPF function in the same program (imm = relative offset).
pub const BPF_PSEUDO_CALL: u8 = 1;

// Atomic operations (in `imm` of `BPF_STX | BPF_ATOMIC`).
pub const BPF_FETCH: i32 = 0x01;
pub const BPF_XCHG: i32 = 0xe0 | BPF_FETCH;
pub const BPF_CMPXCHG: i32 = 0xf0 | BPF_FETCH;

/// An eBPF register, r0 to r10: only the constants below make one, so the typed
/// constructors (`mov64_reg`, `load`, ...) cannot name a register the machine does not
/// have. `Insn::new` takes raw numbers, for the assembler and the decoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reg(u8);

impl Reg {
    /// The register's number, as the encoding and the assembler text write it.
    pub const fn num(self) -> u8 {
        self.0
    }
}

/// Return value and helper result.
pub const R0: Reg = Reg(0);
/// R1 to R5: helper arguments, clobbered by a call.
pub const R1: Reg = Reg(1);
pub const R2: Reg = Reg(2);
pub const R3: Reg = Reg(3);
pub const R4: Reg = Reg(4);
pub const R5: Reg = Reg(5);
/// R6 to R9: kept across calls.
pub const R6: Reg = Reg(6);
pub const R7: Reg = Reg(7);
pub const R8: Reg = Reg(8);
pub const R9: Reg = Reg(9);
/// The read-only frame pointer; the stack is the 512 bytes below it.
pub const R10: Reg = Reg(10);

/// Every register, by number.
pub const REGS: [Reg; 11] = [R0, R1, R2, R3, R4, R5, R6, R7, R8, R9, R10];

/// An ALU operation the compiler emits (`BPF_OP` of an ALU opcode).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AluOp {
    Add,
    Sub,
    Mul,
    /// Unsigned; the signed form is `off = 1` on the instruction.
    Div,
    Or,
    And,
    Lsh,
    /// Logical (zero-filling) right shift.
    Rsh,
    Mod,
    Xor,
    Mov,
    /// Arithmetic (sign-filling) right shift.
    Arsh,
}

impl AluOp {
    pub const ALL: [AluOp; 12] = [
        AluOp::Add,
        AluOp::Sub,
        AluOp::Mul,
        AluOp::Div,
        AluOp::Or,
        AluOp::And,
        AluOp::Lsh,
        AluOp::Rsh,
        AluOp::Mod,
        AluOp::Xor,
        AluOp::Mov,
        AluOp::Arsh,
    ];

    /// The operation bits of the opcode (`BPF_ADD`, ...).
    pub const fn code(self) -> u8 {
        match self {
            AluOp::Add => BPF_ADD,
            AluOp::Sub => BPF_SUB,
            AluOp::Mul => BPF_MUL,
            AluOp::Div => BPF_DIV,
            AluOp::Or => BPF_OR,
            AluOp::And => BPF_AND,
            AluOp::Lsh => BPF_LSH,
            AluOp::Rsh => BPF_RSH,
            AluOp::Mod => BPF_MOD,
            AluOp::Xor => BPF_XOR,
            AluOp::Mov => BPF_MOV,
            AluOp::Arsh => BPF_ARSH,
        }
    }
}

/// A conditional jump's comparison (`BPF_OP` of a jump opcode); `S` ones are signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JmpOp {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Sgt,
    Sge,
    Slt,
    Sle,
    /// `dst & src != 0`.
    Set,
}

impl JmpOp {
    pub const ALL: [JmpOp; 11] = [
        JmpOp::Eq,
        JmpOp::Ne,
        JmpOp::Gt,
        JmpOp::Ge,
        JmpOp::Lt,
        JmpOp::Le,
        JmpOp::Sgt,
        JmpOp::Sge,
        JmpOp::Slt,
        JmpOp::Sle,
        JmpOp::Set,
    ];

    /// The operation bits of the opcode (`BPF_JEQ`, ...).
    pub const fn code(self) -> u8 {
        match self {
            JmpOp::Eq => BPF_JEQ,
            JmpOp::Ne => BPF_JNE,
            JmpOp::Gt => BPF_JGT,
            JmpOp::Ge => BPF_JGE,
            JmpOp::Lt => BPF_JLT,
            JmpOp::Le => BPF_JLE,
            JmpOp::Sgt => BPF_JSGT,
            JmpOp::Sge => BPF_JSGE,
            JmpOp::Slt => BPF_JSLT,
            JmpOp::Sle => BPF_JSLE,
            JmpOp::Set => BPF_JSET,
        }
    }
}

/// The size of an encoded instruction in bytes.
pub const INSN_SIZE: usize = 8;

/// The class of an opcode (`BPF_CLASS` in the kernel).
pub fn class(code: u8) -> u8 {
    code & 0x07
}

/// The operation of an ALU or jump opcode (`BPF_OP`).
pub fn op(code: u8) -> u8 {
    code & 0xf0
}

/// The operand source of an ALU or jump opcode (`BPF_SRC`).
pub fn source(code: u8) -> u8 {
    code & 0x08
}

/// The size bits of a load or store opcode (`BPF_SIZE`).
pub fn size_bits(code: u8) -> u8 {
    code & 0x18
}

/// The mode of a load or store opcode (`BPF_MODE`).
pub fn mode(code: u8) -> u8 {
    code & 0xe0
}

/// The width of a memory access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Size {
    B,
    H,
    W,
    DW,
}

impl Size {
    pub const ALL: [Size; 4] = [Size::B, Size::H, Size::W, Size::DW];

    /// The access of a scalar of `bytes` (1, 2, 4; anything else a double word).
    pub fn of_scalar(bytes: u64) -> Size {
        match bytes {
            1 => Size::B,
            2 => Size::H,
            4 => Size::W,
            _ => Size::DW,
        }
    }

    /// Bytes accessed.
    pub fn bytes(self) -> u32 {
        match self {
            Size::B => 1,
            Size::H => 2,
            Size::W => 4,
            Size::DW => 8,
        }
    }

    /// The size bits of the opcode (`BPF_B`, ...).
    pub fn code(self) -> u8 {
        match self {
            Size::B => BPF_B,
            Size::H => BPF_H,
            Size::W => BPF_W,
            Size::DW => BPF_DW,
        }
    }

    /// The size with these opcode bits.
    pub fn from_code(code: u8) -> Size {
        match size_bits(code) {
            BPF_B => Size::B,
            BPF_H => Size::H,
            BPF_W => Size::W,
            _ => Size::DW,
        }
    }

    /// The size accessing this many bytes, if there is one.
    pub fn from_bytes(bytes: u32) -> Option<Size> {
        Size::ALL.into_iter().find(|s| s.bytes() == bytes)
    }
}

/// One eBPF instruction, as `struct bpf_insn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Insn {
    pub code: u8,
    /// Destination register (low nibble of the second byte).
    pub dst: u8,
    /// Source register (high nibble of the second byte).
    pub src: u8,
    pub off: i16,
    pub imm: i32,
}

impl Insn {
    pub const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn { code, dst, src, off, imm }
    }

    /// The 8 bytes of the instruction, little-endian. Register numbers are masked to
    /// their 4 bits.
    pub fn encode(&self) -> [u8; 8] {
        let mut out = [0u8; 8];
        out[0] = self.code;
        out[1] = (self.dst & 0x0f) | ((self.src & 0x0f) << 4);
        out[2..4].copy_from_slice(&self.off.to_le_bytes());
        out[4..8].copy_from_slice(&self.imm.to_le_bytes());
        out
    }

    pub fn decode(bytes: &[u8; 8]) -> Insn {
        Insn {
            code: bytes[0],
            dst: bytes[1] & 0x0f,
            src: bytes[1] >> 4,
            off: i16::from_le_bytes([bytes[2], bytes[3]]),
            imm: i32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]),
        }
    }

    /// Is this the first half of a 16-byte `BPF_LD | BPF_IMM | BPF_DW`?
    pub fn is_ld_imm64(&self) -> bool {
        self.code == BPF_LD | BPF_IMM | BPF_DW
    }

    /// Is this a jump with a pc-relative `off` (not call, not exit)?
    pub fn is_jump(&self) -> bool {
        let c = class(self.code);
        (c == BPF_JMP || c == BPF_JMP32) && !matches!(op(self.code), BPF_CALL | BPF_EXIT)
    }
}

/// Encodes a sequence of instructions.
pub fn encode_all(insns: &[Insn]) -> Vec<u8> {
    insns.iter().flat_map(|i| i.encode()).collect()
}

/// Decodes a byte string of whole instructions; `None` if its length is not a multiple
/// of 8.
pub fn decode_all(bytes: &[u8]) -> Option<Vec<Insn>> {
    if !bytes.len().is_multiple_of(INSN_SIZE) {
        return None;
    }
    Some(
        bytes
            .chunks_exact(INSN_SIZE)
            .map(|c| {
                let mut b = [0u8; 8];
                b.copy_from_slice(c);
                Insn::decode(&b)
            })
            .collect(),
    )
}

/// `dst = src` (64-bit).
pub fn mov64_reg(dst: Reg, src: Reg) -> Insn {
    Insn::new(BPF_ALU64 | BPF_MOV | BPF_X, dst.0, src.0, 0, 0)
}

/// `dst = imm` (sign-extended to 64 bits).
pub fn mov64_imm(dst: Reg, imm: i32) -> Insn {
    Insn::new(BPF_ALU64 | BPF_MOV | BPF_K, dst.0, 0, 0, imm)
}

/// `dst op= src` (64-bit).
pub fn alu64_reg(op: AluOp, dst: Reg, src: Reg) -> Insn {
    Insn::new(BPF_ALU64 | op.code() | BPF_X, dst.0, src.0, 0, 0)
}

/// `dst op= imm` (64-bit).
pub fn alu64_imm(op: AluOp, dst: Reg, imm: i32) -> Insn {
    Insn::new(BPF_ALU64 | op.code() | BPF_K, dst.0, 0, 0, imm)
}

/// `wdst op= wsrc` (32-bit, the upper half of dst zeroed).
pub fn alu32_reg(op: AluOp, dst: Reg, src: Reg) -> Insn {
    Insn::new(BPF_ALU | op.code() | BPF_X, dst.0, src.0, 0, 0)
}

/// `wdst op= imm` (32-bit, the upper half of dst zeroed).
pub fn alu32_imm(op: AluOp, dst: Reg, imm: i32) -> Insn {
    Insn::new(BPF_ALU | op.code() | BPF_K, dst.0, 0, 0, imm)
}

/// `dst = -dst` (64-bit).
pub fn neg64(dst: Reg) -> Insn {
    Insn::new(BPF_ALU64 | BPF_NEG | BPF_K, dst.0, 0, 0, 0)
}

/// `dst = imm` (a full 64-bit immediate, two instruction slots).
pub fn ld_imm64(dst: Reg, imm: u64) -> [Insn; 2] {
    [
        Insn::new(BPF_LD | BPF_IMM | BPF_DW, dst.0, 0, 0, imm as u32 as i32),
        Insn::new(0, 0, 0, 0, (imm >> 32) as u32 as i32),
    ]
}

/// `dst = map` : a map's address, its fd (imm, 0 here) filled in by the loader from a
/// relocation.
pub fn ld_map_fd(dst: Reg) -> [Insn; 2] {
    [Insn::new(BPF_LD | BPF_IMM | BPF_DW, dst.0, BPF_PSEUDO_MAP_FD, 0, 0), Insn::new(0, 0, 0, 0, 0)]
}

/// `dst = *(size *)(src + off)`, zero-extended.
pub fn load(size: Size, dst: Reg, src: Reg, off: i16) -> Insn {
    Insn::new(BPF_LDX | BPF_MEM | size.code(), dst.0, src.0, off, 0)
}

/// `*(size *)(dst_base + off) = src`.
pub fn store_reg(size: Size, dst_base: Reg, off: i16, src: Reg) -> Insn {
    Insn::new(BPF_STX | BPF_MEM | size.code(), dst_base.0, src.0, off, 0)
}

/// `*(size *)(dst_base + off) = imm` (truncated to size; sign-extended for DW).
pub fn store_imm(size: Size, dst_base: Reg, off: i16, imm: i32) -> Insn {
    Insn::new(BPF_ST | BPF_MEM | size.code(), dst_base.0, 0, off, imm)
}

/// `lock *(size *)(dst_base + off) += src`; the kernel takes only `Size::W` and
/// `Size::DW`.
pub fn atomic_add(size: Size, dst_base: Reg, off: i16, src: Reg) -> Insn {
    Insn::new(BPF_STX | BPF_ATOMIC | size.code(), dst_base.0, src.0, off, BPF_ADD as i32)
}

/// `r0 = cmpxchg((size *)(dst_base + off), r0, src)`: stores `src` if the memory holds
/// r0; r0 gets what the memory held. The kernel takes only `Size::W` and `Size::DW`.
pub fn atomic_cmpxchg(size: Size, dst_base: Reg, off: i16, src: Reg) -> Insn {
    Insn::new(BPF_STX | BPF_ATOMIC | size.code(), dst_base.0, src.0, off, BPF_CMPXCHG)
}

/// `src = xchg((size *)(dst_base + off), src)`: stores `src`, which gets what the
/// memory held (fully ordered, as every atomic that fetches is).
pub fn atomic_xchg(size: Size, dst_base: Reg, off: i16, src: Reg) -> Insn {
    Insn::new(BPF_STX | BPF_ATOMIC | size.code(), dst_base.0, src.0, off, BPF_XCHG)
}

/// `if dst op src goto +off` (64-bit compare).
pub fn jmp_reg(op: JmpOp, dst: Reg, src: Reg, off: i16) -> Insn {
    Insn::new(BPF_JMP | op.code() | BPF_X, dst.0, src.0, off, 0)
}

/// `if dst op imm goto +off` (64-bit compare with the sign-extended imm).
pub fn jmp_imm(op: JmpOp, dst: Reg, imm: i32, off: i16) -> Insn {
    Insn::new(BPF_JMP | op.code() | BPF_K, dst.0, 0, off, imm)
}

/// `goto +off`.
pub fn ja(off: i16) -> Insn {
    Insn::new(BPF_JMP | BPF_JA, 0, 0, off, 0)
}

/// `call helper_id`: arguments in r1-r5, result in r0, r1-r5 clobbered.
pub fn call(helper_id: i32) -> Insn {
    Insn::new(BPF_JMP | BPF_CALL, 0, 0, 0, helper_id)
}

/// `exit`: return r0.
pub fn exit() -> Insn {
    Insn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_the_kernel() {
        // r1 = r6: b7 is mov64 imm, bf is mov64 reg.
        assert_eq!(mov64_reg(R1, R6).encode(), [0xbf, 0x61, 0, 0, 0, 0, 0, 0]);
        // *(u64 *)(r10 -8) = r1
        assert_eq!(store_reg(Size::DW, R10, -8, R1).encode(), [0x7b, 0x1a, 0xf8, 0xff, 0, 0, 0, 0]);
        assert_eq!(call(1).encode(), [0x85, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(exit().encode(), [0x95, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(ld_map_fd(R1)[0].encode(), [0x18, 0x11, 0, 0, 0, 0, 0, 0]);
        assert_eq!(atomic_add(Size::DW, R1, 0, R2).encode(), [0xdb, 0x21, 0, 0, 0, 0, 0, 0]);
        // BPF_CMPXCHG = 0xf1 in imm.
        assert_eq!(atomic_cmpxchg(Size::DW, R1, 0, R2).encode(), [0xdb, 0x21, 0, 0, 0xf1, 0, 0, 0]);
    }

    #[test]
    fn ld_imm64_splits_halves() {
        let [lo, hi] = ld_imm64(R3, 0x1122_3344_5566_7788);
        assert_eq!(lo.imm as u32, 0x5566_7788);
        assert_eq!(hi.imm as u32, 0x1122_3344);
        assert_eq!(hi.code, 0);
    }

    #[test]
    fn decode_all_rejects_partial() {
        assert!(decode_all(&[0; 9]).is_none());
        assert_eq!(decode_all(&encode_all(&[exit(), call(5)])), Some(vec![exit(), call(5)]));
    }
}
