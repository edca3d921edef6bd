//! The frame at an address: where the canonical frame address (CFA, DWARF's frame base
//! for Go) is relative to SP there, and DWARF's places of a value turned into places a
//! probe at that address reads (`Location`: registers, or the stack at SP + constant).
//!
//! CFA - SP comes from the function table's `pcsp` runs (how far SP is below its value
//! at entry; present in stripped binaries too) plus what the call left above SP at entry
//! (the return address on amd64). tests/frames.rs checks it against `.debug_frame` at
//! every instruction of a program.

use super::cfg::Cfg;
use super::slots::{self, Stretch};
use crate::arch::abi::{self, Location, PieceAt, RegPiece};
use crate::arch::{ReturnAddress, PTR_SIZE};
use crate::gobin::dwarf::eval::{Base, Piece, Where};
use crate::gobin::dwarf::DwarfLocation;
use crate::gobin::elf::pclntab;
use crate::gobin::{Function, Target};
use std::sync::Arc;

/// Where a value is at a probe's address, as far as gtrace can read it.
#[derive(Clone, Debug, PartialEq)]
pub enum ValueLocation {
    /// There: registers, the stack, or pieces of both.
    At(Location),
    /// Nowhere: DWARF's location does not cover the address (optimized away there).
    Nowhere,
    /// Somewhere gtrace cannot read, and why.
    Unsupported(String),
}

impl Target {
    /// CFA - SP while the pc is at `pc`: the SP delta of `pcsp` plus the bytes the call
    /// put above SP at entry. None outside any function.
    pub fn cfa_sp_offset(&self, pc: u64) -> Option<i64> {
        let records = self.records.get_or_init(|| self.func_records().unwrap_or_default());
        let i = records.partition_point(|r| r.entry <= pc).checked_sub(1)?;
        let f = &records[i];
        if pc >= f.end {
            return None;
        }
        let mut cache = self.sp_deltas.borrow_mut();
        if !cache.contains_key(&f.entry) {
            let image = self.image();
            let table = pclntab::Pclntab::parse(&image, self.layout.pclntab?, self.layout.text).ok()?;
            cache.insert(f.entry, table.sp_deltas(f).unwrap_or_default());
        }
        let runs = cache.get(&f.entry)?;
        let delta = runs.iter().find(|(lo, hi, _)| *lo <= pc && pc < *hi).map(|r| r.2)?;
        let above = match self.arch.return_address() {
            ReturnAddress::AtStackPointer => PTR_SIZE as i64,
            ReturnAddress::InRegister(_) => 0,
        };
        Some(i64::from(delta) + above)
    }

    /// Where a value of `size` bytes that DWARF places at `location` is for a probe at
    /// `pc`.
    pub(crate) fn value_location(&self, location: &DwarfLocation, pc: u64, size: u64) -> ValueLocation {
        match location {
            DwarfLocation::Nowhere => ValueLocation::Nowhere,
            DwarfLocation::Unsupported(why) => {
                ValueLocation::Unsupported(format!("DWARF computes it there with {why}"))
            }
            DwarfLocation::Pieces(pieces) => match self.pieces_at(pieces, pc, size) {
                Ok(Some(l)) => ValueLocation::At(l),
                Ok(None) => ValueLocation::Nowhere,
                Err(why) => ValueLocation::Unsupported(why),
            },
        }
    }

    /// DWARF's pieces as a `Location` at `pc`; None when every piece is missing.
    fn pieces_at(&self, pieces: &[Piece], pc: u64, size: u64) -> Result<Option<Location>, String> {
        if size == 0 {
            return Ok(Some(Location::Empty));
        }
        let covered: u64 = pieces.iter().map(|p| p.size.unwrap_or(size)).sum();
        if pieces.len() > 1 && covered != size {
            // Go leaves out the piece of a field it does not keep (instead of an empty
            // one): the pieces no longer say which bytes they are.
            return Err(format!(
                "DWARF's pieces of it cover {covered} of its {size} bytes, without saying which are missing"
            ));
        }
        let mut out = Vec::new();
        for p in pieces {
            let piece_size = p.size.unwrap_or(size);
            let at = match p.at {
                Where::Missing => PieceAt::Missing,
                Where::Reg(n) => {
                    if piece_size > PTR_SIZE {
                        return Err(format!("DWARF puts {piece_size} bytes in one register"));
                    }
                    let reg = self.arch.reg_from_dwarf(n).ok_or_else(|| format!("DWARF register {n}"))?;
                    PieceAt::Reg(reg)
                }
                Where::Mem(addr) => PieceAt::Stack { offset: self.sp_relative(addr.base, addr.offset, pc)? },
            };
            if let PieceAt::Stack { offset } = at {
                if !self.stack_written(pc, offset, piece_size) {
                    return Err(
                        "DWARF places it in a stack slot that not every path to this address writes".to_string()
                    );
                }
            }
            out.push(abi::Piece { offset: p.offset, size: piece_size, at });
        }
        Ok(simplest(out))
    }

    /// Whether the `size` bytes at SP + `offset` hold a value at `pc`: written on every
    /// path from the function's entry, or a stack argument (see slots.rs).
    fn stack_written(&self, pc: u64, offset: i64, size: u64) -> bool {
        let (Some(f), Some(cfa)) = (self.function_containing(pc), self.cfa_sp_offset(pc)) else { return false };
        let Some(cfg) = self.cfg_of(f) else { return false };
        let at_entry = self.stack_args(f);
        let slot = Stretch { start: offset - cfa, len: size };
        slots::written(&cfg, |a| self.cfa_sp_offset(a), &at_entry, pc, slot)
    }

    /// The function's stack arguments, where its caller wrote them (CFA-relative).
    fn stack_args(&self, f: &Function) -> Vec<Stretch> {
        let Ok(Some(params)) = self.params(&f.name) else { return Vec::new() };
        let Some(cfa) = self.cfa_sp_offset(f.addr) else { return Vec::new() };
        let types = self.types();
        let ins: Vec<_> = params.iter().filter(|p| !p.is_result).map(|p| p.ty).collect();
        let layout = abi::assign_call(self.conv_of(f), &ins, &[], &types);
        (layout.params.iter().zip(&ins))
            .filter_map(|(l, ty)| match l {
                Location::Stack { offset } => Some(Stretch { start: offset - cfa, len: types.get(*ty).size }),
                _ => None,
            })
            .collect()
    }

    /// The control flow graph of `f`, built on first use.
    pub(crate) fn cfg_of(&self, f: &Function) -> Option<Arc<Cfg>> {
        if let Some(g) = self.cfgs.borrow().get(&f.addr) {
            return g.clone();
        }
        let graph = self.code(f).and_then(|code| {
            let noreturn = |a: u64| self.function_at(a).is_some_and(|f| super::inlined::never_returns(&f.name));
            self.arch.control_flow(code, f.addr).map(|insns| Arc::new(Cfg::new(insns, noreturn)))
        });
        self.cfgs.borrow_mut().insert(f.addr, graph.clone());
        graph
    }

    /// `base + offset` as an offset from SP at `pc`.
    fn sp_relative(&self, base: Base, offset: i64, pc: u64) -> Result<i64, String> {
        match base {
            Base::Cfa => {
                let cfa = self.cfa_sp_offset(pc).ok_or("no frame size is known at this address")?;
                Ok(cfa + offset)
            }
            Base::Reg(n) if self.arch.reg_from_dwarf(n) == Some(self.arch.stack_pointer()) => Ok(offset),
            Base::Reg(n) => Err(format!(
                "memory relative to {}",
                self.arch.reg_from_dwarf(n).map_or_else(|| format!("DWARF register {n}"), |r| r.name().to_string())
            )),
            Base::Absolute => Err(format!("memory at the fixed address {offset:#x}")),
        }
    }
}

/// The simplest `Location` for these pieces: registers only, one stretch of stack, or
/// pieces; None when all are missing.
fn simplest(pieces: Vec<abi::Piece>) -> Option<Location> {
    if pieces.iter().all(|p| p.at == PieceAt::Missing) {
        return None;
    }
    let regs: Option<Vec<RegPiece>> = pieces
        .iter()
        .map(|p| match p.at {
            PieceAt::Reg(reg) => Some(RegPiece { reg, offset: p.offset, size: p.size }),
            _ => None,
        })
        .collect();
    if let Some(regs) = regs {
        return Some(Location::Regs(regs));
    }
    let bases: Option<Vec<i64>> = pieces
        .iter()
        .map(|p| match p.at {
            PieceAt::Stack { offset } => Some(offset - p.offset as i64),
            _ => None,
        })
        .collect();
    match bases.as_deref() {
        Some([first, rest @ ..]) if rest.iter().all(|b| b == first) => Some(Location::Stack { offset: *first }),
        _ => Some(Location::Pieces(pieces)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::{x86_64, Reg};

    fn rax() -> Reg {
        Reg::X86(x86_64::Reg::from_dwarf(0).unwrap())
    }

    #[test]
    fn pieces_become_registers_a_stack_slot_or_pieces() {
        let reg = |offset, reg| abi::Piece { offset, size: 8, at: PieceAt::Reg(reg) };
        let stack = |offset, at| abi::Piece { offset, size: 8, at: PieceAt::Stack { offset: at } };
        let missing = |offset| abi::Piece { offset, size: 8, at: PieceAt::Missing };
        assert_eq!(
            simplest(vec![reg(0, rax()), reg(8, rax())]),
            Some(Location::Regs(vec![
                RegPiece { reg: rax(), offset: 0, size: 8 },
                RegPiece { reg: rax(), offset: 8, size: 8 }
            ]))
        );
        assert_eq!(simplest(vec![stack(0, 24), stack(8, 32)]), Some(Location::Stack { offset: 24 }));
        assert_eq!(
            simplest(vec![stack(0, 24), stack(8, 48)]),
            Some(Location::Pieces(vec![stack(0, 24), stack(8, 48)]))
        );
        assert_eq!(simplest(vec![missing(0), missing(8)]), None);
        assert_eq!(simplest(vec![missing(0), reg(8, rax())]), Some(Location::Pieces(vec![missing(0), reg(8, rax())])));
    }
}
