//! The allocated IR written out as plain eBPF: virtual registers replaced by their
//! registers (or reloaded from their slots into a register free there), slot accesses
//! given their stack offsets (or made through the spill map's pointer), labels resolved
//! into jump offsets by `bpf::builder`. Where no register is free for such an access,
//! one the item does not name is borrowed: saved to a stack word the allocator kept
//! for it, and put back after the item (on both ways out of a jump). Only R6-R9 are
//! borrowed, and a program that may borrow writes them at entry: the verifier refuses
//! to save a register no path wrote.

use super::alloc::{operands, Allocation, Home, Place};
use super::flow::PHYS;
use super::{Finished, IrError, Item, SlotId, R, SPILL};
use crate::bpf::builder::{Builder, Label};
use crate::bpf::helpers::BPF_FUNC_map_lookup_elem;
use crate::bpf::insn::*;

/// The registers a borrow may take: R6-R9, which calls keep and `emit` writes at entry,
/// so each holds a value on every path (R0-R5 are unreadable after a call until written
/// again, which the verifier checks and a save would break).
const BORROWABLE: [usize; 4] = [6, 7, 8, 9];

struct Out<'a> {
    b: Builder,
    a: &'a Allocation,
    /// Registers taken at the current item (busy, and the temporaries chosen).
    taken: u16,
    /// Registers the current item names (or was given as temporaries): never borrowed.
    pinned: u16,
    /// Registers borrowed for the current item, to put back after it.
    borrowed: Vec<Reg>,
    at: usize,
}

pub fn emit(items: &[Item], a: &Allocation, labels: usize) -> Result<Finished, IrError> {
    let mut out = Out { b: Builder::new(), a, taken: 0, pinned: 0, borrowed: Vec::new(), at: 0 };
    for _ in 0..labels {
        out.b.new_label();
    }
    // Where a register may be borrowed, R6-R9 (the only ones borrowed) hold a value on
    // every path from the first instruction: at entry only R1 and R10 do, and the
    // verifier refuses to save a register never written.
    if !a.borrow.is_empty() {
        for r in BORROWABLE {
            out.b.emit(mov64_imm(REGS[r], 0));
        }
    }
    for (i, item) in items.iter().enumerate() {
        out.at = i;
        out.taken = a.busy[i];
        out.pinned = out.named(item);
        out.borrowed.clear();
        out.item(item)?;
        if !matches!(item, Item::Jump { .. }) {
            out.give_back();
        }
    }
    let program = out.b.finish()?;
    Ok(Finished { program, stack: a.stack, spilled: a.spilled })
}

impl Out<'_> {
    fn item(&mut self, item: &Item) -> Result<(), IrError> {
        match item {
            Item::Op { insn, dst, src, slot } => self.op(*insn, *dst, *src, *slot)?,
            Item::Wide { dst, imm } => {
                let d = self.def(*dst)?;
                self.b.emit2(ld_imm64(d.0, *imm));
                self.written(d)?;
            }
            Item::LdMap { dst, map } => {
                let d = self.def(*dst)?;
                self.b.ld_map(d.0, map);
                self.written(d)?;
            }
            Item::SlotAddr { dst, slot, off } => {
                let d = self.def(*dst)?;
                self.address(d.0, *slot, *off);
                self.written(d)?;
            }
            Item::Call(id) => self.b.emit(call(*id)),
            Item::Kfunc(k) | Item::Guard(k) => self.b.call_kfunc(*k),
            Item::Jump { insn, dst, src, target } => {
                if op(insn.code) == BPF_JA {
                    self.b.ja_to(*target);
                    return Ok(());
                }
                let d = self.read(*dst)?;
                let s = if source(insn.code) == BPF_X { Some(self.read(*src)?) } else { None };
                // With borrowed registers, both ways out put them back first.
                let to = if self.borrowed.is_empty() { *target } else { self.b.new_label() };
                match s {
                    Some(s) => self.b.jmp_reg_to(jmp_op(insn.code), d, s, to),
                    None => self.b.jmp_imm_to(jmp_op(insn.code), d, insn.imm, to),
                }
                if to != *target {
                    let fall = self.b.new_label();
                    self.give_back();
                    self.b.ja_to(fall);
                    self.b.bind(to);
                    self.give_back();
                    self.b.ja_to(*target);
                    self.b.bind(fall);
                }
            }
            Item::Bind(l) => self.b.bind(*l),
            Item::Comment(text) => self.b.comment(text.clone()),
            Item::SpillSetup { fail } => self.spill_setup(*fail),
            Item::Exit => self.b.emit(exit()),
        }
        Ok(())
    }

    fn op(&mut self, insn: Insn, dst: R, src: R, slot: Option<SlotId>) -> Result<(), IrError> {
        let c = class(insn.code);
        let fx = super::flow::effects(&Item::Op { insn, dst, src, slot });
        let reads = |r: R| fx.uses.contains(&super::flow::loc(r));
        // The base of a slot access: R10, or the spill pointer in a temporary.
        let (base, off) = match slot.map(|s| self.a.places[s.0 as usize]) {
            Some(Place::Stack(at)) => (Some(R10), at + insn.off),
            Some(Place::Spill(at)) => {
                let t = self.temp()?;
                self.spill_pointer(t);
                (Some(t), (at as i16) + insn.off)
            }
            _ => (None, insn.off),
        };
        let is_base_dst = matches!(c, BPF_ST | BPF_STX);
        let d = match base.filter(|_| is_base_dst) {
            Some(b) => (b, None),
            None if reads(dst) && fx.defs.contains(&super::flow::loc(dst)) => self.read_write(dst)?,
            None if reads(dst) => (self.read(dst)?, None),
            None => self.def(dst)?,
        };
        let s = match base.filter(|_| c == BPF_LDX) {
            Some(b) => (b, None),
            // An immediate operation on a value given as its own source (`op(add_imm,
            // v, v)`): the value is read as the destination; the source field stays 0.
            None if !super::flow::reads_src_field(&insn) => (R0, None),
            None if reads(src) && fx.defs.contains(&super::flow::loc(src)) => self.read_write(src)?,
            None if reads(src) => (self.read(src)?, None),
            None => (R0, None),
        };
        // A move onto itself (the allocator gave both sides one register) is none.
        let idle = insn.code == BPF_ALU64 | BPF_MOV | BPF_X && d.0 == s.0;
        if !idle {
            self.b.emit(Insn { dst: d.0.num(), src: s.0.num(), off, ..insn });
        }
        if fx.defs.contains(&super::flow::loc(dst)) {
            self.written(d)?;
        }
        if fx.defs.contains(&super::flow::loc(src)) && src != dst {
            self.written(s)?;
        }
        Ok(())
    }

    /// A register free at this item, taken for it; when none is, one the item does not
    /// name, borrowed (saved to its stack word, put back by `give_back`).
    fn temp(&mut self) -> Result<Reg, IrError> {
        if let Some(r) = (0..10).find(|&r| self.taken & (1 << r) == 0) {
            self.taken |= 1 << r;
            self.pinned |= 1 << r;
            return Ok(REGS[r]);
        }
        let word = self.a.borrow.get(self.borrowed.len()).copied();
        let r = BORROWABLE.into_iter().find(|&r| self.pinned & (1 << r) == 0);
        let (Some(word), Some(r)) = (word, r) else {
            return Err(IrError::NoFreeRegister { at: self.at });
        };
        self.pinned |= 1 << r;
        self.b.emit(store_reg(Size::DW, R10, word, REGS[r]));
        self.borrowed.push(REGS[r]);
        Ok(REGS[r])
    }

    /// Puts the registers borrowed for this item back.
    fn give_back(&mut self) {
        for (k, &r) in self.borrowed.iter().enumerate().rev() {
            self.b.emit(load(Size::DW, r, R10, self.a.borrow[k]));
        }
    }

    /// The machine registers `item` names, directly or as its virtual registers' homes.
    fn named(&self, item: &Item) -> u16 {
        let fx = super::flow::effects(item);
        let mut m: u16 = 0;
        for l in fx.uses.iter().chain(&fx.defs).filter(|&&l| l < PHYS) {
            m |= 1 << l;
        }
        for r in operands(item) {
            match (r, self.home(r)) {
                (R::P(p), _) => m |= 1 << p.num(),
                (_, Some(Home::Reg(p))) => m |= 1 << p.num(),
                _ => {}
            }
        }
        m
    }

    fn home(&self, r: R) -> Option<Home> {
        match r {
            R::P(_) => None,
            R::V(v) => Some(self.a.homes[v.0 as usize]),
        }
    }

    /// The register holding `r`'s value here (reloaded into a temporary when spilled).
    fn read(&mut self, r: R) -> Result<Reg, IrError> {
        match (r, self.home(r)) {
            (R::P(p), _) => Ok(p),
            (_, Some(Home::Reg(p))) => Ok(p),
            (_, Some(Home::Slot(s))) => {
                let t = self.temp()?;
                self.slot_word(t, s, false, t);
                Ok(t)
            }
            _ => Err(IrError::Undefined { at: self.at, reg: 0 }),
        }
    }

    /// The register to write `r` into, and the slot to store it to afterwards.
    fn def(&mut self, r: R) -> Result<(Reg, Option<SlotId>), IrError> {
        match (r, self.home(r)) {
            (R::P(p), _) => Ok((p, None)),
            (_, Some(Home::Reg(p))) => Ok((p, None)),
            (_, Some(Home::Slot(s))) => Ok((self.temp()?, Some(s))),
            _ => Ok((R0, None)),
        }
    }

    fn read_write(&mut self, r: R) -> Result<(Reg, Option<SlotId>), IrError> {
        let p = self.read(r)?;
        let slot = match self.home(r) {
            Some(Home::Slot(s)) => Some(s),
            _ => None,
        };
        Ok((p, slot))
    }

    /// Stores a spilled register's new value back to its slot.
    fn written(&mut self, (reg, slot): (Reg, Option<SlotId>)) -> Result<(), IrError> {
        if let Some(s) = slot {
            let via = match self.a.places[s.0 as usize] {
                Place::Spill(_) => self.temp()?,
                _ => R10,
            };
            self.slot_word(reg, s, true, via);
        }
        Ok(())
    }

    /// Loads (or stores) `reg` from (to) the 8 bytes of slot `s`; `via` is a register
    /// free for the spill pointer when the slot is in the spill map.
    fn slot_word(&mut self, reg: Reg, s: SlotId, store: bool, via: Reg) {
        let (base, off) = match self.a.places[s.0 as usize] {
            Place::Spill(at) => {
                self.spill_pointer(via);
                (via, at as i16)
            }
            Place::Stack(at) => (R10, at),
            Place::Unused => (R10, 0),
        };
        if store {
            self.b.emit(store_reg(Size::DW, base, off, reg));
        } else {
            self.b.emit(load(Size::DW, reg, base, off));
        }
    }

    fn spill_pointer(&mut self, to: Reg) {
        self.b.emit(load(Size::DW, to, R10, self.a.spill_pointer.unwrap_or(-8)));
    }

    fn address(&mut self, dst: Reg, slot: SlotId, off: i32) {
        match self.a.places[slot.0 as usize] {
            Place::Spill(at) => {
                self.spill_pointer(dst);
                if at as i32 + off != 0 {
                    self.b.emit(alu64_imm(AluOp::Add, dst, at as i32 + off));
                }
            }
            Place::Stack(at) => {
                self.b.emit(mov64_reg(dst, R10));
                self.b.emit(alu64_imm(AluOp::Add, dst, i32::from(at) + off));
            }
            Place::Unused => self.b.emit(mov64_reg(dst, R10)),
        }
    }

    /// The spill map's element, looked up once: its pointer kept at R10 + the
    /// allocation's spill pointer; a failed lookup goes to `fail`.
    fn spill_setup(&mut self, fail: Label) {
        let Some(at) = self.a.spill_pointer else { return };
        self.b.emit(store_imm(Size::DW, R10, at, 0));
        self.b.ld_map(R1, SPILL);
        self.b.emit(mov64_reg(R2, R10));
        self.b.emit(alu64_imm(AluOp::Add, R2, i32::from(at)));
        self.b.emit(call(BPF_FUNC_map_lookup_elem));
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, fail);
        self.b.emit(store_reg(Size::DW, R10, at, R0));
    }
}

fn jmp_op(code: u8) -> JmpOp {
    JmpOp::ALL.into_iter().find(|o| o.code() == op(code)).unwrap_or(JmpOp::Eq)
}
