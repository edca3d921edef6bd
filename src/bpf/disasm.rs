//! The disassembler behind `--emit asm`: one instruction a line in the syntax of the
//! kernel verifier's log and llvm-objdump (`r2 = *(u64 *)(r10 -8)`,
//! `if r0 == 0x0 goto +3`, `call bpf_map_lookup_elem#1`, a kfunc's
//! `call kfunc bpf_preempt_disable`), each with its index, and the
//! source comments (`; ...`) before the instructions they annotate. Encodings it does
//! not know print as `.insn code=0x.. dst=.. src=.. off=.. imm=..`, which `asm` reads
//! back, so every instruction round-trips.

use super::builder::Program;
use super::helpers;
use super::insn::*;
use super::kfuncs::{kfunc_call, Kfunc};
use std::collections::HashMap;
use std::fmt::Write as _;

/// The whole program: `; comment` lines, then `  idx: text` lines.
pub fn disasm(program: &Program) -> String {
    let maps: HashMap<usize, &str> = program.relocations.iter().map(|r| (r.insn_index, r.map.as_str())).collect();
    let kfuncs: HashMap<usize, Kfunc> = program.kfunc_calls.iter().map(|k| (k.insn_index, k.kfunc)).collect();
    let mut comments = program.comments.iter().peekable();
    let mut out = String::new();
    let mut i = 0;
    while i < program.insns.len() {
        while let Some((_, text)) = comments.next_if(|(at, _)| *at <= i) {
            let _ = writeln!(out, "; {text}");
        }
        let insn = &program.insns[i];
        let next = program.insns.get(i + 1);
        let text = match (maps.get(&i), kfuncs.get(&i)) {
            (Some(map), _) if is_map_load(insn, next) => format!("r{} = map[{map}] ll", insn.dst),
            (_, Some(kfunc)) if *insn == kfunc_call() => format!("call kfunc {}", kfunc.name()),
            _ => disasm_insn(insn, next),
        };
        let _ = writeln!(out, "{i:>4}: {text}");
        i += if is_wide(insn, next) { 2 } else { 1 };
    }
    for (_, text) in comments {
        let _ = writeln!(out, "; {text}");
    }
    out
}

/// One instruction; `next` is the one after it, which a 16-byte `ld_imm64` uses as its
/// upper half.
pub fn disasm_insn(insn: &Insn, next: Option<&Insn>) -> String {
    known(insn, next).unwrap_or_else(|| raw(insn))
}

/// Does this instruction and the next form one 16-byte `ld_imm64` that `disasm_insn`
/// prints as one line?
pub fn is_wide(insn: &Insn, next: Option<&Insn>) -> bool {
    insn.is_ld_imm64()
        && insn.off == 0
        && matches!(next, Some(n) if n.code == 0 && n.dst == 0 && n.src == 0 && n.off == 0)
        && (insn.src == 0 || insn.src == BPF_PSEUDO_MAP_FD)
}

fn is_map_load(insn: &Insn, next: Option<&Insn>) -> bool {
    is_wide(insn, next) && insn.src == BPF_PSEUDO_MAP_FD && next.is_some_and(|n| n.imm == 0)
}

/// The fallback form for any encoding.
pub fn raw(insn: &Insn) -> String {
    format!(".insn code={:#04x} dst={} src={} off={} imm={}", insn.code, insn.dst, insn.src, insn.off, insn.imm)
}

/// The operator of an ALU operation (`+` for `BPF_ADD`), with the signed forms of
/// div and mod (`off == 1`).
pub(crate) fn alu_symbol(op: u8, off: i16) -> Option<&'static str> {
    Some(match (op, off) {
        (BPF_ADD, 0) => "+",
        (BPF_SUB, 0) => "-",
        (BPF_MUL, 0) => "*",
        (BPF_DIV, 0) => "/",
        (BPF_DIV, 1) => "s/",
        (BPF_OR, 0) => "|",
        (BPF_AND, 0) => "&",
        (BPF_LSH, 0) => "<<",
        (BPF_RSH, 0) => ">>",
        (BPF_MOD, 0) => "%",
        (BPF_MOD, 1) => "s%",
        (BPF_XOR, 0) => "^",
        (BPF_ARSH, 0) => "s>>",
        _ => return None,
    })
}

/// The comparison of a conditional jump (`==` for `BPF_JEQ`).
pub(crate) fn jmp_symbol(op: u8) -> Option<&'static str> {
    Some(match op {
        BPF_JEQ => "==",
        BPF_JGT => ">",
        BPF_JGE => ">=",
        BPF_JSET => "&",
        BPF_JNE => "!=",
        BPF_JSGT => "s>",
        BPF_JSGE => "s>=",
        BPF_JLT => "<",
        BPF_JLE => "<=",
        BPF_JSLT => "s<",
        BPF_JSLE => "s<=",
        _ => return None,
    })
}

/// The atomic operations a `BPF_STX | BPF_ATOMIC` encodes in `imm`, without `BPF_FETCH`.
pub(crate) fn atomic_name(op: i32) -> Option<(&'static str, &'static str)> {
    Some(match op as u8 {
        BPF_ADD => ("add", "+"),
        BPF_OR => ("or", "|"),
        BPF_AND => ("and", "&"),
        BPF_XOR => ("xor", "^"),
        _ => return None,
    })
}

pub(crate) fn mem_type(size: Size, signed: bool) -> &'static str {
    match (size, signed) {
        (Size::B, false) => "u8",
        (Size::H, false) => "u16",
        (Size::W, false) => "u32",
        (Size::DW, false) => "u64",
        (Size::B, true) => "s8",
        (Size::H, true) => "s16",
        (Size::W, true) => "s32",
        (Size::DW, true) => "s64",
    }
}

/// `0x1f`, or `-0x1f` for negative numbers.
pub(crate) fn hex(v: i64) -> String {
    if v < 0 {
        format!("-{:#x}", v.unsigned_abs())
    } else {
        format!("{v:#x}")
    }
}

fn mem(size: Size, signed: bool, base: u8, off: i16) -> String {
    format!("*({} *)(r{base} {off:+})", mem_type(size, signed))
}

fn known(i: &Insn, next: Option<&Insn>) -> Option<String> {
    if i.dst > 10 || i.src > 10 {
        return None;
    }
    let (code, dst, src, off, imm) = (i.code, i.dst, i.src, i.off, i.imm);
    let size = Size::from_code(code);
    match class(code) {
        BPF_ALU | BPF_ALU64 => alu(i),
        BPF_LDX if matches!(mode(code), BPF_MEM | BPF_MEMSX) && imm == 0 => {
            let signed = mode(code) == BPF_MEMSX;
            if signed && size == Size::DW {
                return None;
            }
            Some(format!("r{dst} = {}", mem(size, signed, src, off)))
        }
        BPF_ST if mode(code) == BPF_MEM && src == 0 => Some(format!("{} = {imm}", mem(size, false, dst, off))),
        BPF_STX if mode(code) == BPF_MEM && imm == 0 => Some(format!("{} = r{src}", mem(size, false, dst, off))),
        BPF_STX if mode(code) == BPF_ATOMIC && matches!(size, Size::W | Size::DW) => atomic(i, size),
        BPF_LD if code == BPF_LD | BPF_IMM | BPF_DW && is_wide(i, next) => {
            let hi = next?.imm as u32 as u64;
            let value = (hi << 32) | imm as u32 as u64;
            match src {
                0 => Some(format!("r{dst} = {value:#x} ll")),
                _ if hi == 0 => Some(format!("r{dst} = map[fd:{imm}] ll")),
                _ => None,
            }
        }
        BPF_JMP | BPF_JMP32 => jump(i),
        _ => None,
    }
}

/// An ALU instruction (32-bit `w` or 64-bit `r` registers), byte swaps included.
fn alu(i: &Insn) -> Option<String> {
    let (code, dst, src, off, imm) = (i.code, i.dst, i.src, i.off, i.imm);
    let r = if class(code) == BPF_ALU64 { 'r' } else { 'w' };
    let x = source(code) == BPF_X;
    let operand = if x { format!("{r}{src}") } else { imm.to_string() };
    if op(code) == BPF_END {
        // The source bit is the byte order; ALU64 | END is the unconditional bswap.
        let name = match (class(code), source(code)) {
            (BPF_ALU, BPF_TO_LE) => "le",
            (BPF_ALU, _) => "be",
            (_, BPF_TO_LE) => "bswap",
            _ => return None,
        };
        let ok = off == 0 && src == 0 && matches!(imm, 16 | 32 | 64);
        return ok.then(|| format!("r{dst} = {name}{imm} r{dst}"));
    }
    // K forms carry no src register, X forms no immediate.
    if (x && imm != 0) || (!x && src != 0) {
        return None;
    }
    match op(code) {
        BPF_MOV if off == 0 => Some(format!("{r}{dst} = {operand}")),
        BPF_NEG if off == 0 && !x && imm == 0 => Some(format!("{r}{dst} = -{r}{dst}")),
        o => alu_symbol(o, off).map(|s| format!("{r}{dst} {s}= {operand}")),
    }
}

/// An atomic read-modify-write of memory.
fn atomic(i: &Insn, size: Size) -> Option<String> {
    let (dst, src, off, imm) = (i.dst, i.src, i.off, i.imm);
    let m = format!("({} *)(r{dst} {off:+})", mem_type(size, false));
    let bits = if size == Size::DW { "64" } else { "" };
    if let Some((_, sym)) = atomic_name(imm) {
        Some(format!("lock *{m} {sym}= r{src}"))
    } else if imm & BPF_FETCH != 0 && atomic_name(imm & !BPF_FETCH).is_some() {
        let (name, _) = atomic_name(imm & !BPF_FETCH)?;
        Some(format!("r{src} = atomic{bits}_fetch_{name}({m}, r{src})"))
    } else if imm == BPF_XCHG {
        Some(format!("r{src} = atomic{bits}_xchg({m}, r{src})"))
    } else if imm == BPF_CMPXCHG {
        Some(format!("r0 = atomic{bits}_cmpxchg({m}, r0, r{src})"))
    } else {
        None
    }
}

/// A jump, call or exit.
fn jump(i: &Insn) -> Option<String> {
    let (code, dst, src, off, imm) = (i.code, i.dst, i.src, i.off, i.imm);
    let r = if class(code) == BPF_JMP { 'r' } else { 'w' };
    let x = source(code) == BPF_X;
    let jmp64 = class(code) == BPF_JMP;
    match op(code) {
        BPF_JA if jmp64 && !x && dst == 0 && src == 0 && imm == 0 => Some(format!("goto {off:+}")),
        BPF_CALL if jmp64 && !x && dst == 0 && off == 0 => match src {
            0 => Some(match helpers::name(imm) {
                Some(name) => format!("call bpf_{name}#{imm}"),
                None => format!("call unknown#{imm}"),
            }),
            BPF_PSEUDO_CALL => Some(format!("call pc{imm:+}")),
            _ => None,
        },
        BPF_EXIT if jmp64 && !x && dst == 0 && src == 0 && off == 0 && imm == 0 => Some("exit".to_string()),
        o => {
            let sym = jmp_symbol(o)?;
            if x && imm == 0 {
                Some(format!("if {r}{dst} {sym} {r}{src} goto {off:+}"))
            } else if !x && src == 0 {
                Some(format!("if {r}{dst} {sym} {} goto {off:+}", hex(imm as i64)))
            } else {
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::builder::Builder;

    fn d(i: Insn) -> String {
        disasm_insn(&i, None)
    }

    #[test]
    fn prints_the_verifier_syntax() {
        assert_eq!(d(mov64_reg(R1, R6)), "r1 = r6");
        assert_eq!(d(alu64_imm(AluOp::Add, R0, 1)), "r0 += 1");
        assert_eq!(d(load(Size::DW, R2, R10, -8)), "r2 = *(u64 *)(r10 -8)");
        assert_eq!(d(store_reg(Size::W, R10, -4, R1)), "*(u32 *)(r10 -4) = r1");
        assert_eq!(d(atomic_add(Size::DW, R1, 0, R2)), "lock *(u64 *)(r1 +0) += r2");
        assert_eq!(d(jmp_imm(JmpOp::Eq, R0, 0, 3)), "if r0 == 0x0 goto +3");
        assert_eq!(d(call(1)), "call bpf_map_lookup_elem#1");
        assert_eq!(d(exit()), "exit");
        assert_eq!(d(neg64(R3)), "r3 = -r3");
        assert_eq!(d(alu32_imm(AluOp::Arsh, R3, 2)), "w3 s>>= 2");
        let [a, b] = ld_imm64(R1, 0xdead_beef_0000_0001);
        assert_eq!(disasm_insn(&a, Some(&b)), "r1 = 0xdeadbeef00000001 ll");
        assert_eq!(disasm_insn(&a, None), ".insn code=0x18 dst=1 src=0 off=0 imm=1");
    }

    #[test]
    fn program_listing_has_indexes_maps_and_comments() {
        let mut b = Builder::new();
        b.comment("on main.work");
        b.ld_map(R1, "events");
        b.emit(mov64_imm(R0, 0));
        b.emit(exit());
        let text = disasm(&b.finish().unwrap());
        assert_eq!(text, "; on main.work\n   0: r1 = map[events] ll\n   2: r0 = 0\n   3: exit\n");
    }

    #[test]
    fn kfunc_calls_print_by_name() {
        let mut b = Builder::new();
        b.call_kfunc(Kfunc::PreemptDisable);
        b.emit(exit());
        let text = disasm(&b.finish().unwrap());
        assert_eq!(text, "   0: call kfunc bpf_preempt_disable\n   1: exit\n");
        // Without the program's record of the call: the raw form.
        assert_eq!(d(kfunc_call()), ".insn code=0x85 dst=0 src=2 off=0 imm=0");
    }
}
