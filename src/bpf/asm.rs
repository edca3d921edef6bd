//! The assembler: reads the disassembler's text back into instructions. It exists so
//! the two can be tested against each other (text → `Insn` → text), and to write
//! expected programs in tests as text.

use super::builder::{Program, Relocation};
use super::disasm::{alu_symbol, atomic_name, jmp_symbol, mem_type};
use super::helpers;
use super::insn::*;
use super::kfuncs::{kfunc_call, Kfunc, KfuncCall};
use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum AsmError {
    #[error("line {line}: cannot read `{text}` as an instruction")]
    Unrecognized { line: usize, text: String },
    #[error("line {line}: instruction index {found}, expected {expected}")]
    IndexMismatch { line: usize, expected: usize, found: usize },
}

/// One line of text as instructions: one, or two for `ld_imm64`, and the map named by a
/// `rN = map[NAME] ll` or the kernel function of a `call kfunc NAME`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assembled {
    pub insns: Vec<Insn>,
    pub map: Option<String>,
    pub kfunc: Option<Kfunc>,
}

/// Reads one instruction in the disassembler's syntax (without the index).
pub fn asm_insn(text: &str) -> Result<Assembled, AsmError> {
    parse(text).ok_or_else(|| AsmError::Unrecognized { line: 1, text: text.to_string() })
}

/// Reads a whole listing as `disasm` prints it: `; comment` lines and `idx: insn` lines.
pub fn asm(text: &str) -> Result<Program, AsmError> {
    let mut program = Program::default();
    for (n, line) in text.lines().enumerate() {
        let line_no = n + 1;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix(';') {
            let comment = comment.strip_prefix(' ').unwrap_or(comment);
            program.comments.push((program.insns.len(), comment.to_string()));
            continue;
        }
        let bad = || AsmError::Unrecognized { line: line_no, text: line.to_string() };
        let (index, body) = line.split_once(':').ok_or_else(bad)?;
        let found: usize = index.trim().parse().map_err(|_| bad())?;
        let expected = program.insns.len();
        if found != expected {
            return Err(AsmError::IndexMismatch { line: line_no, expected, found });
        }
        let assembled = parse(body).ok_or_else(bad)?;
        if let Some(map) = assembled.map {
            program.relocations.push(Relocation { insn_index: expected, map });
        }
        if let Some(kfunc) = assembled.kfunc {
            program.kfunc_calls.push(KfuncCall { insn_index: expected, kfunc });
        }
        program.insns.extend(assembled.insns);
    }
    Ok(program)
}

/// A cursor over one line; every method skips leading blanks first.
#[derive(Clone, Copy)]
struct Cursor<'a> {
    rest: &'a str,
}

impl<'a> Cursor<'a> {
    fn skip(&mut self) {
        self.rest = self.rest.trim_start();
    }

    fn lit(&mut self, token: &str) -> bool {
        self.skip();
        match self.rest.strip_prefix(token) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    fn word(&mut self) -> Option<&'a str> {
        self.skip();
        let end =
            self.rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.')).unwrap_or(self.rest.len());
        if end == 0 {
            return None;
        }
        let (w, rest) = self.rest.split_at(end);
        self.rest = rest;
        Some(w)
    }

    /// `rN` or `wN`: the number and whether it is 64-bit.
    fn reg(&mut self) -> Option<(Reg, bool)> {
        let mut c = *self;
        let w = c.word()?;
        let wide = match w.as_bytes().first()? {
            b'r' => true,
            b'w' => false,
            _ => return None,
        };
        let n: usize = w[1..].parse().ok()?;
        let reg = *REGS.get(n)?;
        *self = c;
        Some((reg, wide))
    }

    /// A signed decimal or `0x` hexadecimal integer, with an optional sign.
    fn int(&mut self) -> Option<i128> {
        let mut c = *self;
        let negative = if c.lit("-") {
            true
        } else {
            c.lit("+");
            false
        };
        c.rest = c.rest.trim_start_matches(' ');
        let end = c.rest.find(|ch: char| !ch.is_ascii_alphanumeric()).unwrap_or(c.rest.len());
        let digits = &c.rest[..end];
        let value = match digits.strip_prefix("0x") {
            Some(h) => i128::from_str_radix(h, 16).ok()?,
            None if digits.bytes().all(|b| b.is_ascii_digit()) => digits.parse().ok()?,
            None => return None,
        };
        c.rest = &c.rest[end..];
        *self = c;
        Some(if negative { -value } else { value })
    }

    fn i32(&mut self) -> Option<i32> {
        self.int().and_then(|v| i32::try_from(v).ok())
    }

    fn i16(&mut self) -> Option<i16> {
        self.int().and_then(|v| i16::try_from(v).ok())
    }

    fn end(&mut self) -> bool {
        self.skip();
        self.rest.is_empty()
    }

    /// `(u64 *)(rN +off)`, the part after `*` of a memory operand.
    fn mem(&mut self) -> Option<(Size, bool, Reg, i16)> {
        if !self.lit("(") {
            return None;
        }
        let ty = self.word()?;
        let (size, signed) = Size::ALL
            .into_iter()
            .flat_map(|s| [(s, false), (s, true)])
            .find(|(s, signed)| mem_type(*s, *signed) == ty)?;
        if !(self.lit("*") && self.lit(")") && self.lit("(")) {
            return None;
        }
        let (base, true) = self.reg()? else { return None };
        let off = self.i16()?;
        self.lit(")").then_some((size, signed, base, off))
    }
}

fn one(insn: Insn) -> Option<Assembled> {
    Some(Assembled { insns: vec![insn], map: None, kfunc: None })
}

fn parse(text: &str) -> Option<Assembled> {
    let mut c = Cursor { rest: text.trim() };
    let result = parse_body(&mut c)?;
    c.end().then_some(result)
}

fn parse_body(c: &mut Cursor) -> Option<Assembled> {
    if c.lit(".insn") {
        return raw(c);
    }
    if c.lit("exit") {
        return one(exit());
    }
    if c.lit("call") {
        return parse_call(c);
    }
    if c.lit("goto") {
        return one(ja(c.i16()?));
    }
    if c.lit("if") {
        return parse_jump(c);
    }
    if c.lit("lock") {
        if !c.lit("*") {
            return None;
        }
        let (size, false, base, off) = c.mem()? else { return None };
        let op = [BPF_ADD, BPF_OR, BPF_AND, BPF_XOR]
            .into_iter()
            .find(|op| atomic_name(*op as i32).is_some_and(|(_, sym)| c.lit(&format!("{sym}="))))?;
        let (src, true) = c.reg()? else { return None };
        return one(Insn::new(BPF_STX | BPF_ATOMIC | size.code(), base.num(), src.num(), off, op as i32));
    }
    if c.lit("*") {
        let (size, false, base, off) = c.mem()? else { return None };
        if !c.lit("=") {
            return None;
        }
        if let Some((src, true)) = c.reg() {
            return one(store_reg(size, base, off, src));
        }
        return one(store_imm(size, base, off, c.i32()?));
    }
    let (dst, wide) = c.reg()?;
    if c.lit("=") {
        return parse_assign(c, dst, wide);
    }
    // `dst op= operand`, the longest operator first.
    let ops = [BPF_ARSH, BPF_LSH, BPF_RSH, BPF_ADD, BPF_SUB, BPF_MUL, BPF_OR, BPF_AND, BPF_XOR, BPF_DIV, BPF_MOD];
    let signed = [(BPF_DIV, 1), (BPF_MOD, 1)];
    let (op, off) = signed
        .into_iter()
        .chain(ops.into_iter().map(|o| (o, 0)))
        .find(|(o, off)| c.lit(&format!("{}=", alu_symbol(*o, *off).unwrap_or("?"))))?;
    let class = if wide { BPF_ALU64 } else { BPF_ALU };
    if let Some((src, w)) = c.reg() {
        return (w == wide).then(|| one(Insn::new(class | op | BPF_X, dst.num(), src.num(), off, 0)))?;
    }
    one(Insn::new(class | op | BPF_K, dst.num(), 0, off, c.i32()?))
}

fn raw(c: &mut Cursor) -> Option<Assembled> {
    let mut field = |name: &str| -> Option<i128> { c.lit(name).then(|| c.int()).flatten() };
    let code = u8::try_from(field("code=")?).ok()?;
    let dst = u8::try_from(field("dst=")?).ok().filter(|r| *r < 16)?;
    let src = u8::try_from(field("src=")?).ok().filter(|r| *r < 16)?;
    let off = i16::try_from(field("off=")?).ok()?;
    let imm = i32::try_from(field("imm=")?).ok()?;
    one(Insn::new(code, dst, src, off, imm))
}

fn parse_call(c: &mut Cursor) -> Option<Assembled> {
    if c.lit("pc") {
        return one(Insn::new(BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_CALL, 0, c.i32()?));
    }
    if c.lit("kfunc ") {
        let kfunc = Kfunc::by_name(c.word()?)?;
        return Some(Assembled { insns: vec![kfunc_call()], map: None, kfunc: Some(kfunc) });
    }
    let name = c.word()?;
    if !c.lit("#") {
        return None;
    }
    let id = c.i32()?;
    let known = name.strip_prefix("bpf_").and_then(helpers::by_name);
    match known {
        Some(k) if k == id => one(call(id)),
        None if name == "unknown" && helpers::name(id).is_none() => one(call(id)),
        _ => None,
    }
}

fn parse_jump(c: &mut Cursor) -> Option<Assembled> {
    let (dst, wide) = c.reg()?;
    let ops = [BPF_JEQ, BPF_JNE, BPF_JSGE, BPF_JSGT, BPF_JSLE, BPF_JSLT, BPF_JGE, BPF_JGT, BPF_JLE, BPF_JLT, BPF_JSET];
    let op = ops.into_iter().find(|o| jmp_symbol(*o).is_some_and(|s| c.lit(s)))?;
    let class = if wide { BPF_JMP } else { BPF_JMP32 };
    let insn = if let Some((src, w)) = c.reg() {
        if w != wide {
            return None;
        }
        Insn::new(class | op | BPF_X, dst.num(), src.num(), 0, 0)
    } else {
        // Jump immediates print in hex; accept the unsigned 32-bit spelling too.
        let v = c.int()?;
        let imm =
            if (i32::MIN as i128..=u32::MAX as i128).contains(&v) { v as i64 as u32 as i32 } else { return None };
        Insn::new(class | op | BPF_K, dst.num(), 0, 0, imm)
    };
    if !c.lit("goto") {
        return None;
    }
    one(Insn { off: c.i16()?, ..insn })
}

fn parse_assign(c: &mut Cursor, dst: Reg, wide: bool) -> Option<Assembled> {
    let class = if wide { BPF_ALU64 } else { BPF_ALU };
    // dst = *(size *)(src +off)
    if c.lit("*") {
        let (size, signed, src, off) = c.mem()?;
        let mode = if signed { BPF_MEMSX } else { BPF_MEM };
        return wide.then(|| one(Insn::new(BPF_LDX | mode | size.code(), dst.num(), src.num(), off, 0)))?;
    }
    // dst = map[NAME] ll, dst = map[fd:N] ll
    if c.lit("map[") {
        let (fd, map) = if c.lit("fd:") { (c.i32()?, None) } else { (0, Some(c.word()?.to_string())) };
        if !(c.lit("]") && c.lit("ll") && wide) {
            return None;
        }
        let [mut lo, hi] = ld_map_fd(dst);
        lo.imm = fd;
        return Some(Assembled { insns: vec![lo, hi], map, kfunc: None });
    }
    // dst = -dst
    let mut neg = *c;
    if neg.lit("-") {
        if let Some((r, w)) = neg.reg() {
            *c = neg;
            return (r == dst && w == wide).then(|| one(Insn::new(class | BPF_NEG | BPF_K, dst.num(), 0, 0, 0)))?;
        }
    }
    // dst = atomic64_fetch_add((u64 *)(base +off), dst), xchg, cmpxchg
    let mut at = *c;
    if let Some(word) = at.word().filter(|w| w.starts_with("atomic")) {
        *c = at;
        return parse_atomic(c, word, dst);
    }
    // dst = be16 dst, le32, bswap64
    let mut end = *c;
    if let Some(word) = end.word() {
        let swap = [("le", BPF_ALU | BPF_TO_LE), ("be", BPF_ALU | BPF_TO_BE), ("bswap", BPF_ALU64 | BPF_TO_LE)]
            .into_iter()
            .find_map(|(p, code)| Some((code, word.strip_prefix(p)?.parse::<i32>().ok()?)));
        if let Some((code, bits)) = swap {
            *c = end;
            let (r, true) = c.reg()? else { return None };
            return (r == dst && wide).then(|| one(Insn::new(code | BPF_END, dst.num(), 0, 0, bits)))?;
        }
    }
    if let Some((src, w)) = c.reg() {
        return (w == wide).then(|| one(Insn::new(class | BPF_MOV | BPF_X, dst.num(), src.num(), 0, 0)))?;
    }
    let value = c.int()?;
    if c.lit("ll") {
        let bits = if (i64::MIN as i128..=u64::MAX as i128).contains(&value) { value as u64 } else { return None };
        return wide.then(|| Assembled { insns: ld_imm64(dst, bits).to_vec(), map: None, kfunc: None });
    }
    one(Insn::new(class | BPF_MOV | BPF_K, dst.num(), 0, 0, i32::try_from(value).ok()?))
}

fn parse_atomic(c: &mut Cursor, word: &str, dst: Reg) -> Option<Assembled> {
    let (bits, op) = match word.strip_prefix("atomic64_") {
        Some(op) => (Size::DW, op),
        None => (Size::W, word.strip_prefix("atomic_")?),
    };
    let imm = match op {
        "xchg" => BPF_XCHG,
        "cmpxchg" => BPF_CMPXCHG,
        _ => {
            let name = op.strip_prefix("fetch_")?;
            let op = [BPF_ADD, BPF_OR, BPF_AND, BPF_XOR]
                .into_iter()
                .find(|o| atomic_name(*o as i32).is_some_and(|(n, _)| n == name))?;
            op as i32 | BPF_FETCH
        }
    };
    if !c.lit("(") {
        return None;
    }
    let (size, false, base, off) = c.mem()? else { return None };
    if size != bits || !c.lit(",") {
        return None;
    }
    if imm == BPF_CMPXCHG && (dst != R0 || c.reg()? != (R0, true) || !c.lit(",")) {
        return None;
    }
    let (src, true) = c.reg()? else { return None };
    if imm != BPF_CMPXCHG && src != dst {
        return None;
    }
    c.lit(")").then(|| one(Insn::new(BPF_STX | BPF_ATOMIC | size.code(), base.num(), src.num(), off, imm)))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_form() {
        let a = |t: &str| asm_insn(t).unwrap().insns;
        assert_eq!(a("r1 = r6"), vec![mov64_reg(R1, R6)]);
        assert_eq!(a("r0 += 1"), vec![alu64_imm(AluOp::Add, R0, 1)]);
        assert_eq!(a("r2 = *(u64 *)(r10 -8)"), vec![load(Size::DW, R2, R10, -8)]);
        assert_eq!(a("*(u32 *)(r10 -4) = r1"), vec![store_reg(Size::W, R10, -4, R1)]);
        assert_eq!(a("lock *(u64 *)(r1 +0) += r2"), vec![atomic_add(Size::DW, R1, 0, R2)]);
        assert_eq!(a("if r0 == 0x0 goto +3"), vec![jmp_imm(JmpOp::Eq, R0, 0, 3)]);
        assert_eq!(a("call bpf_map_lookup_elem#1"), vec![call(1)]);
        assert_eq!(a("exit"), vec![exit()]);
        assert_eq!(asm_insn("r1 = map[events] ll").unwrap().map.as_deref(), Some("events"));
        let k = asm_insn("call kfunc bpf_preempt_enable").unwrap();
        assert_eq!((k.insns, k.kfunc), (vec![kfunc_call()], Some(Kfunc::PreemptEnable)));
        assert!(asm_insn("call kfunc bpf_rcu_read_lock").is_err());
    }

    #[test]
    fn rejects_nonsense() {
        for bad in ["", "r11 = r1", "r1 = w2", "call bpf_map_lookup_elem#2", "if r1 == r2", "r1 = 1 2", "goto +40000"] {
            assert!(asm_insn(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn index_mismatch_is_reported() {
        assert_eq!(asm("   0: exit\n   2: exit\n"), Err(AsmError::IndexMismatch { line: 2, expected: 1, found: 2 }));
    }
}
