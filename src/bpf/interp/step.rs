//! One instruction of a program run by the interpreter (`step`): what it does to the
//! registers and the machine's memory, the ALU operations and the jumps' conditions.

use super::helpers::helper;
use super::memory::Memory;
use super::{InterpError, World, MAPS, MAP_SPAN};
use crate::bpf::builder::Program;
use crate::bpf::insn::*;

/// Runs the instruction at `pc`: its R0 when it is the exit.
pub(super) fn step(
    prog: &Program,
    world: &World,
    r: &mut [u64; 11],
    cur: &mut usize,
    mem: &mut Memory,
    reads: &mut Vec<(u64, u64)>,
) -> Result<Option<u64>, InterpError> {
    let pc = *cur;
    let i = *prog.insns.get(pc).ok_or(InterpError::Unknown { pc, code: 0 })?;
    let (dst, src) = (usize::from(i.dst), usize::from(i.src));
    let unknown = InterpError::Unknown { pc, code: i.code };
    let mut next = pc;
    match class(i.code) {
        BPF_ALU64 | BPF_ALU => {
            let wide = class(i.code) == BPF_ALU64;
            let operand = if source(i.code) == BPF_X { r[src] } else { i.imm as i64 as u64 };
            r[dst] = alu(op(i.code), r[dst], operand, wide).ok_or(unknown)?;
        }
        BPF_LDX if mode(i.code) == BPF_MEM => {
            let len = u64::from(Size::from_code(i.code).bytes());
            r[dst] = mem.load(pc, r[src].wrapping_add_signed(i64::from(i.off)), len)?;
        }
        BPF_STX if mode(i.code) == BPF_ATOMIC => atomic(i, r, mem, pc)?,
        BPF_STX | BPF_ST if mode(i.code) == BPF_MEM => {
            let len = u64::from(Size::from_code(i.code).bytes());
            let value = if class(i.code) == BPF_STX { r[src] } else { i.imm as i64 as u64 };
            mem.store(pc, r[dst].wrapping_add_signed(i64::from(i.off)), len, value)?;
        }
        BPF_LD if i.is_ld_imm64() => {
            let high = prog.insns.get(pc + 1).ok_or(unknown)?;
            r[dst] = if i.src == BPF_PSEUDO_MAP_FD {
                map_value_addr(prog, world, pc)?
            } else {
                u64::from(i.imm as u32) | u64::from(high.imm as u32) << 32
            };
            next += 1;
        }
        BPF_JMP | BPF_JMP32 => match op(i.code) {
            BPF_EXIT => return Ok(Some(r[0])),
            BPF_CALL => {
                if i.src == 0 {
                    r[0] = helper(i.imm, r, mem, world, pc, reads)?;
                }
            }
            BPF_JA => next = next.wrapping_add_signed(isize::from(i.off)),
            code => {
                let operand = if source(i.code) == BPF_X { r[src] } else { i.imm as i64 as u64 };
                let narrow = class(i.code) == BPF_JMP32;
                if jump(code, r[dst], operand, narrow).ok_or(unknown)? {
                    next = next.wrapping_add_signed(isize::from(i.off));
                }
            }
        },
        _ => return Err(unknown),
    }
    *cur = next + 1;
    Ok(None)
}

/// The address the map loaded at instruction `pc` has its value at.
fn map_value_addr(prog: &Program, world: &World, pc: usize) -> Result<u64, InterpError> {
    let name = prog.relocations.iter().find(|r| r.insn_index == pc).map(|r| r.map.clone()).unwrap_or_default();
    let index = world.maps.iter().position(|(n, _)| *n == name).ok_or(InterpError::NoMap { pc, name })?;
    Ok(MAPS + (index as u64) * MAP_SPAN)
}

/// An atomic instruction (`i` at `pc`) on the memory at `dst + off`: add, fetch-add
/// and exchange (the old value to `src`), compare-and-exchange (with R0, which gets the
/// old value).
fn atomic(i: Insn, r: &mut [u64; 11], mem: &mut Memory, pc: usize) -> Result<(), InterpError> {
    let (dst, src) = (usize::from(i.dst), usize::from(i.src));
    let len = u64::from(Size::from_code(i.code).bytes());
    let at = r[dst].wrapping_add_signed(i64::from(i.off));
    let old = mem.load(pc, at, len)?;
    match i.imm {
        BPF_CMPXCHG => {
            let mask = if len == 8 { u64::MAX } else { (1 << (8 * len)) - 1 };
            if old == r[0] & mask {
                mem.store(pc, at, len, r[src])?;
            }
            r[0] = old;
        }
        add if add == i32::from(BPF_ADD) => mem.store(pc, at, len, old.wrapping_add(r[src]))?,
        BPF_XCHG => {
            mem.store(pc, at, len, r[src])?;
            r[src] = old;
        }
        fetch_add if fetch_add == i32::from(BPF_ADD) | BPF_FETCH => {
            mem.store(pc, at, len, old.wrapping_add(r[src]))?;
            r[src] = old;
        }
        _ => return Err(InterpError::Unknown { pc, code: i.code }),
    }
    Ok(())
}

/// `a op b` of an ALU instruction, 64 or 32 bits wide (then zero-extended).
pub(super) fn alu(code: u8, a: u64, b: u64, wide: bool) -> Option<u64> {
    let bits = if wide { 64 } else { 32 };
    let shift = (b % bits) as u32;
    let v = match code {
        BPF_ADD => a.wrapping_add(b),
        BPF_SUB => a.wrapping_sub(b),
        BPF_MUL => a.wrapping_mul(b),
        BPF_OR => a | b,
        BPF_AND => a & b,
        BPF_XOR => a ^ b,
        BPF_MOV => b,
        BPF_NEG => a.wrapping_neg(),
        BPF_LSH => a << shift,
        BPF_RSH if wide => a >> shift,
        BPF_RSH => (a as u32 >> shift).into(),
        BPF_ARSH if wide => (a as i64 >> shift) as u64,
        BPF_ARSH => (a as i32 >> shift) as u32 as u64,
        _ => return None,
    };
    Some(if wide { v } else { v as u32 as u64 })
}

/// Whether a conditional jump is taken.
pub(super) fn jump(code: u8, a: u64, b: u64, narrow: bool) -> Option<bool> {
    let (a, b) = if narrow { (a as u32 as u64, b as u32 as u64) } else { (a, b) };
    let (sa, sb) = if narrow { (a as u32 as i32 as i64, b as u32 as i32 as i64) } else { (a as i64, b as i64) };
    Some(match code {
        BPF_JEQ => a == b,
        BPF_JNE => a != b,
        BPF_JGT => a > b,
        BPF_JGE => a >= b,
        BPF_JLT => a < b,
        BPF_JLE => a <= b,
        BPF_JSGT => sa > sb,
        BPF_JSGE => sa >= sb,
        BPF_JSLT => sa < sb,
        BPF_JSLE => sa <= sb,
        BPF_JSET => a & b != 0,
        _ => return None,
    })
}
