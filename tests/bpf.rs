//! The instruction layer tested against itself: every constructor with a spread of
//! operands goes through the disassembler and back through the assembler unchanged,
//! every encoding survives encode/decode, and whole programs survive disasm/asm.

use gtrace::bpf::asm::{asm, asm_insn};
use gtrace::bpf::builder::Builder;
use gtrace::bpf::disasm::{disasm, disasm_insn, is_wide};
use gtrace::bpf::helpers::*;
use gtrace::bpf::insn::*;

const SOME_REGS: [Reg; 4] = [R0, R1, R6, R10];
const IMMS: [i32; 7] = [0, 1, -1, 42, -512, i32::MAX, i32::MIN];
const OFFS: [i16; 6] = [0, 1, -1, -8, i16::MAX, i16::MIN];
const ALU_OPS: [AluOp; 12] = AluOp::ALL;
const JMP_OPS: [JmpOp; 11] = JmpOp::ALL;

/// Disassembles `insns` (one instruction, or the two halves of an `ld_imm64`), checks
/// the text is not the raw fallback, and assembles it back.
fn round_trip(insns: &[Insn]) {
    let text = disasm_insn(&insns[0], insns.get(1));
    assert!(!text.starts_with(".insn"), "{insns:?} printed raw: {text}");
    let back = asm_insn(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    assert_eq!(back.insns, insns, "{text}");
}

/// Every constructor the compiler uses, with a spread of operands.
fn constructed() -> Vec<Vec<Insn>> {
    let mut all: Vec<Vec<Insn>> = Vec::new();
    for &d in &SOME_REGS {
        all.push(vec![neg64(d)]);
        all.push(ld_map_fd(d).to_vec());
        for v in [0u64, 1, u64::MAX, 0x8000_0000, 0x1_0000_0000, 0xdead_beef_cafe_f00d] {
            all.push(ld_imm64(d, v).to_vec());
        }
        for &imm in &IMMS {
            all.push(vec![mov64_imm(d, imm)]);
            for &op in &ALU_OPS {
                all.push(vec![alu64_imm(op, d, imm)]);
                all.push(vec![alu32_imm(op, d, imm)]);
            }
            for &op in &JMP_OPS {
                for &off in &OFFS {
                    all.push(vec![jmp_imm(op, d, imm, off)]);
                }
            }
        }
        for &s in &SOME_REGS {
            all.push(vec![mov64_reg(d, s)]);
            for &op in &ALU_OPS {
                all.push(vec![alu64_reg(op, d, s)]);
                all.push(vec![alu32_reg(op, d, s)]);
            }
            for &off in &OFFS {
                for &op in &JMP_OPS {
                    all.push(vec![jmp_reg(op, d, s, off)]);
                }
                for size in Size::ALL {
                    all.push(vec![load(size, d, s, off)]);
                    all.push(vec![store_reg(size, d, off, s)]);
                }
                all.push(vec![atomic_add(Size::W, d, off, s)]);
                all.push(vec![atomic_add(Size::DW, d, off, s)]);
            }
        }
        for &off in &OFFS {
            for &imm in &IMMS {
                for size in Size::ALL {
                    all.push(vec![store_imm(size, d, off, imm)]);
                }
            }
        }
    }
    for &off in &OFFS {
        all.push(vec![ja(off)]);
    }
    for (id, _) in HELPERS {
        all.push(vec![call(*id)]);
    }
    all.push(vec![call(9999)]);
    all.push(vec![exit()]);
    all
}

#[test]
fn every_constructor_round_trips_through_text() {
    let all = constructed();
    assert!(all.len() > 3000, "only {} cases", all.len());
    for insns in &all {
        round_trip(insns);
    }
}

#[test]
fn every_constructor_round_trips_through_bytes() {
    for insns in constructed() {
        assert_eq!(decode_all(&encode_all(&insns)).unwrap(), insns);
    }
}

#[test]
fn other_known_encodings_round_trip() {
    // Forms the disassembler knows beyond the constructors.
    let w = |code, dst, src, off, imm| Insn::new(code, dst, src, off, imm);
    for insn in [
        w(BPF_ALU | BPF_END | BPF_TO_BE, R1.num(), 0, 0, 16),
        w(BPF_ALU | BPF_END | BPF_TO_LE, R1.num(), 0, 0, 64),
        w(BPF_ALU64 | BPF_END | BPF_TO_LE, R2.num(), 0, 0, 32),
        w(BPF_ALU | BPF_NEG, R3.num(), 0, 0, 0),
        w(BPF_ALU | BPF_MOV | BPF_X, R3.num(), R4.num(), 0, 0),
        w(BPF_ALU64 | BPF_DIV | BPF_X, R3.num(), R4.num(), 1, 0),
        w(BPF_ALU64 | BPF_MOD | BPF_K, R3.num(), 0, 1, 7),
        w(BPF_LDX | BPF_MEMSX | BPF_W, R3.num(), R4.num(), -2, 0),
        w(BPF_JMP32 | BPF_JLT | BPF_K, R3.num(), 0, 5, -3),
        w(BPF_JMP32 | BPF_JNE | BPF_X, R3.num(), R4.num(), -5, 0),
        w(BPF_STX | BPF_ATOMIC | BPF_DW, R1.num(), R2.num(), 8, BPF_ADD as i32 | BPF_FETCH),
        w(BPF_STX | BPF_ATOMIC | BPF_W, R1.num(), R2.num(), 8, BPF_XOR as i32 | BPF_FETCH),
        w(BPF_STX | BPF_ATOMIC | BPF_W, R1.num(), R2.num(), 8, BPF_OR as i32),
        w(BPF_STX | BPF_ATOMIC | BPF_DW, R1.num(), R2.num(), 0, BPF_XCHG),
        w(BPF_STX | BPF_ATOMIC | BPF_DW, R1.num(), R2.num(), 0, BPF_CMPXCHG),
        w(BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_CALL, 0, -12),
    ] {
        round_trip(&[insn]);
    }
    let [mut lo, hi] = ld_map_fd(R1);
    lo.imm = 7;
    round_trip(&[lo, hi]);
}

#[test]
fn any_encoding_round_trips_even_unknown_ones() {
    // All 256 opcodes with awkward fields: known forms print as text, the rest as
    // `.insn`, and both read back to the same instruction.
    let zero = Insn::default();
    for code in 0..=255u8 {
        for (dst, src) in [(0, 0), (1, 2), (10, 0), (11, 15)] {
            for off in [0i16, 1, -7] {
                for imm in [0, 1, 16, 64, -1, BPF_FETCH | AluOp::Add as i32] {
                    let insn = Insn::new(code, dst, src, off, imm);
                    for next in [None, Some(&zero)] {
                        let text = disasm_insn(&insn, next);
                        let back = asm_insn(&text).unwrap_or_else(|e| panic!("{insn:?}: {e}"));
                        let expected: Vec<Insn> = if is_wide(&insn, next) { vec![insn, zero] } else { vec![insn] };
                        assert_eq!(back.insns, expected, "{text}");
                    }
                }
            }
        }
    }
}

#[test]
fn encoding_is_bit_exact() {
    for code in 0..=255u8 {
        for regs in [0x00u8, 0x1a, 0xf0, 0xff] {
            let bytes = [code, regs, 0x34, 0x82, 0x78, 0x56, 0x34, 0x92];
            let insn = Insn::decode(&bytes);
            assert_eq!(insn.dst, regs & 0xf);
            assert_eq!(insn.src, regs >> 4);
            assert_eq!(insn.off, 0x8234u16 as i16);
            assert_eq!(insn.imm, 0x9234_5678u32 as i32);
            assert_eq!(insn.encode(), bytes);
        }
    }
}

#[test]
fn a_program_round_trips_through_its_listing() {
    let mut b = Builder::new();
    let out = b.new_label();
    b.comment("on main.doWork");
    b.emit(mov64_reg(R6, R1));
    b.emit(store_imm(Size::DW, R10, -8, 0));
    b.ld_map(R1, "counts");
    b.emit(mov64_reg(R2, R10));
    b.emit(alu64_imm(AluOp::Add, R2, -8));
    b.emit(call(BPF_FUNC_map_lookup_elem));
    b.jmp_imm_to(JmpOp::Eq, R0, 0, out);
    b.comment("@n = count()");
    b.comment("second comment, same instruction");
    b.emit(mov64_imm(R1, 1));
    b.emit(atomic_add(Size::DW, R0, 0, R1));
    b.bind(out);
    b.emit(mov64_imm(R0, 0));
    b.emit(exit());
    let program = b.finish().unwrap();
    let text = disasm(&program);
    let expected = "\
; on main.doWork
   0: r6 = r1
   1: *(u64 *)(r10 -8) = 0
   2: r1 = map[counts] ll
   4: r2 = r10
   5: r2 += -8
   6: call bpf_map_lookup_elem#1
   7: if r0 == 0x0 goto +2
; @n = count()
; second comment, same instruction
   8: r1 = 1
   9: lock *(u64 *)(r0 +0) += r1
  10: r0 = 0
  11: exit
";
    assert_eq!(text, expected);
    assert_eq!(asm(&text).unwrap(), program);
}
