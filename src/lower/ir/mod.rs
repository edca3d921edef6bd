//! The small IR lowering emits into: eBPF instructions whose registers may be virtual
//! (`VReg`) and whose stack accesses name a slot (`SlotId`) instead of an offset from
//! R10, with labels and source comments. `Func::finish` runs the one allocator
//! (alloc.rs): liveness (flow.rs) decides which registers and slots are live where;
//! virtual registers get R0-R9 by the calling convention (conv.rs: R1-R5 are clobbered
//! by a call, R0 is its result, R6-R9 survive it; R10 is the frame) or an 8-byte slot;
//! slots share stack bytes when their values are dead, and what does not fit the
//! 512-byte stack is spilled to a per-CPU scratch map (`SPILL`); emit.rs resolves labels
//! into offsets and borrows a register where an access to a slot finds none free.
//! `Func::call` is how code calls a helper: its arguments go where conv.rs says.
//!
//! Code that still names machine registers goes through `emit` and `emit2` with
//! physical registers (precolored: the allocator works around them); its R10-relative
//! accesses are attributed to the slot of `frame` they fall in, so they are placed by
//! liveness too.

mod alloc;
pub mod conv;
mod emit;
mod flow;
pub mod frame;
mod locset;
#[cfg(test)]
mod tests;

use crate::bpf::builder::{BuildError, Label, Program};
use crate::bpf::insn::*;
use crate::bpf::kfuncs::Kfunc;
pub use frame::{Frame, FrameFull, SlotId};

/// The per-CPU array spilled stack slots live in (one element, as large as the largest
/// spill of any program).
pub const SPILL: &str = "spill";

/// A helper's argument (`Func::call`).
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    R(R),
    Imm(i32),
    /// The address of the frame's bytes at this virtual offset (a slot's, `Frame::alloc`).
    Stack(i16),
    /// A map, relocated by the loader.
    Map(&'a str),
    /// The address `reg + off` (a field of the event record being built, say).
    Addr(R, i32),
}

impl Arg<'_> {
    /// The address `base + off`: a frame address where `base` is R10 (so the IR knows
    /// the slot it points into), else the register's value plus `off`.
    pub fn at(base: Reg, off: i16) -> Arg<'static> {
        if base == conv::FRAME {
            Arg::Stack(off)
        } else {
            Arg::Addr(R::P(base), i32::from(off))
        }
    }
}

impl From<Reg> for Arg<'_> {
    fn from(r: Reg) -> Self {
        Arg::R(R::P(r))
    }
}

impl From<VReg> for Arg<'_> {
    fn from(v: VReg) -> Self {
        Arg::R(R::V(v))
    }
}

/// A virtual register: any of R0-R9 or a stack slot, as the allocator decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VReg(pub u32);

/// A register operand: a machine register (fixed) or a virtual one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum R {
    P(Reg),
    V(VReg),
}

impl From<Reg> for R {
    fn from(r: Reg) -> R {
        R::P(r)
    }
}

impl From<VReg> for R {
    fn from(v: VReg) -> R {
        R::V(v)
    }
}

/// One IR instruction.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// A one-slot instruction of the shape `insn` (its register fields unused) on `dst`
    /// and `src`. With `slot`, its memory base is that slot (the base operand is R10 and
    /// `insn.off` the offset within the slot).
    Op { insn: Insn, dst: R, src: R, slot: Option<SlotId> },
    /// `dst = imm` (ld_imm64).
    Wide { dst: R, imm: u64 },
    /// `dst = map`, relocated by the loader.
    LdMap { dst: R, map: String },
    /// `dst = the address of slot + off`.
    SlotAddr { dst: R, slot: SlotId, off: i32 },
    /// A helper call: reads R1-R5, sets R0, clobbers R1-R5.
    Call(i32),
    /// A kfunc call (the preemption guards: no arguments; clobbers R0-R5).
    Kfunc(Kfunc),
    /// The program-wide preemption guard's call (the prologue's and the epilogue's): a
    /// `Kfunc` that `finish_guarded` leaves out of a program that does not need it.
    Guard(Kfunc),
    /// A conditional jump of shape `insn` (`dst op src/imm`), or `goto` (BPF_JA).
    Jump { insn: Insn, dst: R, src: R, target: Label },
    /// The next instruction is `label`'s.
    Bind(Label),
    /// A source comment shown before the next instruction.
    Comment(String),
    /// Where the pointer to the spill map's element is looked up when a slot spills
    /// (right after the prologue, where only R6 is live); `fail` is where a failed
    /// lookup goes (the epilogue).
    SpillSetup { fail: Label },
    /// `exit`: reads R0.
    Exit,
}

/// What a finished IR program became.
#[derive(Debug)]
pub struct Finished {
    pub program: Program,
    /// Bytes of stack used (at most 512).
    pub stack: u32,
    /// Bytes of the spill map's element used (0: nothing spilled).
    pub spilled: u32,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IrError {
    #[error(transparent)]
    Build(#[from] BuildError),
    #[error("instruction {at} uses the stack at R10{off:+} outside every live slot")]
    NoSlot { at: usize, off: i32 },
    #[error("instruction {at} reads virtual register {reg} before anything sets it")]
    Undefined { at: usize, reg: u32 },
    #[error("no register is free or can be borrowed at instruction {at} to reach a spilled value")]
    NoFreeRegister { at: usize },
    #[error("registers {regs:?} are live where the spill pointer is looked up")]
    SpillSetupClobbers { regs: Vec<u8> },
}

/// The program being built: items, labels, virtual registers and the frame.
#[derive(Debug)]
pub struct Func {
    pub(crate) items: Vec<Item>,
    labels: usize,
    vregs: u32,
    pub frame: Frame,
    /// References (`LdMap`) of each map made by code that is safe under preemption
    /// (guard.rs): per-CPU values changed by atomic instructions only.
    pub preemption_safe: std::collections::HashMap<String, usize>,
    /// An R10-relative address being formed (`mov rX, r10` waiting for its `add`).
    pending_addr: Option<(Reg, usize)>,
    error: Option<IrError>,
}

impl Default for Func {
    fn default() -> Func {
        Func::new()
    }
}

impl Func {
    pub fn new() -> Func {
        Func {
            items: Vec::new(),
            labels: 0,
            vregs: 0,
            frame: Frame::default(),
            preemption_safe: Default::default(),
            pending_addr: None,
            error: None,
        }
    }

    /// A fresh virtual register.
    pub fn vreg(&mut self) -> VReg {
        self.vregs += 1;
        VReg(self.vregs - 1)
    }

    pub fn new_label(&mut self) -> Label {
        self.labels += 1;
        Label::from_index(self.labels - 1)
    }

    /// Binds `label` to the next instruction (no anchor instruction is needed).
    pub fn bind(&mut self, label: Label) {
        self.items.push(Item::Bind(label));
    }

    /// Attaches `text` to the next instruction.
    pub fn comment(&mut self, text: impl Into<String>) {
        self.items.push(Item::Comment(text.into()));
    }

    pub fn push(&mut self, item: Item) {
        self.items.push(item);
    }

    /// Puts `item` before the one at `at` (a position `len` gave).
    pub fn insert(&mut self, at: usize, item: Item) {
        self.items.insert(at, item);
    }

    /// A machine instruction on machine registers; a use of R10 names the slot of the
    /// frame it falls in.
    pub fn emit(&mut self, insn: Insn) {
        let reg = |n: u8| R::P(REGS[usize::from(n.min(10))]);
        let (dst, src) = (reg(insn.dst), reg(insn.src));
        if let Some((at_reg, at)) = self.pending_addr.take() {
            let is_add = insn.code == BPF_ALU64 | BPF_ADD | BPF_K && dst == R::P(at_reg);
            if is_add {
                return self.slot_addr(at_reg, at, insn.imm);
            }
            self.fail(IrError::NoSlot { at, off: 0 });
        }
        let c = class(insn.code);
        let base = match c {
            BPF_LDX => Some(src),
            BPF_ST | BPF_STX => Some(dst),
            _ => None,
        };
        if insn.code == BPF_ALU64 | BPF_MOV | BPF_X && src == R::P(R10) {
            self.pending_addr = Some((REGS[usize::from(insn.dst.min(10))], self.items.len()));
            return;
        }
        if base == Some(R::P(R10)) {
            let bytes = Size::from_code(insn.code).bytes();
            match self.frame.slot_at(i32::from(insn.off), bytes) {
                Some((slot, within)) => {
                    let insn = Insn { off: within, ..insn };
                    self.items.push(Item::Op { insn, dst, src, slot: Some(slot) });
                }
                None => self.fail(IrError::NoSlot { at: self.items.len(), off: i32::from(insn.off) }),
            }
            return;
        }
        match (c, op(insn.code)) {
            (BPF_JMP, BPF_CALL) if insn.src == 0 => self.items.push(Item::Call(insn.imm)),
            (BPF_JMP, BPF_EXIT) => self.items.push(Item::Exit),
            _ => self.items.push(Item::Op { insn, dst, src, slot: None }),
        }
    }

    fn slot_addr(&mut self, dst: Reg, at: usize, off: i32) {
        match self.frame.slot_at(off, 0) {
            Some((slot, within)) => self.items.push(Item::SlotAddr { dst: R::P(dst), slot, off: i32::from(within) }),
            None => self.fail(IrError::NoSlot { at, off }),
        }
    }

    fn fail(&mut self, e: IrError) {
        self.error.get_or_insert(e);
    }

    /// A two-slot instruction on machine registers (`ld_imm64`).
    pub fn emit2(&mut self, insns: [Insn; 2]) {
        let imm = u64::from(insns[0].imm as u32) | (u64::from(insns[1].imm as u32) << 32);
        self.items.push(Item::Wide { dst: R::P(REGS[usize::from(insns[0].dst.min(10))]), imm });
    }

    /// `dst = imm` (`ld_imm64`), on any register.
    pub fn wide(&mut self, dst: impl Into<R>, imm: u64) {
        self.items.push(Item::Wide { dst: dst.into(), imm });
    }

    /// `if dst op imm goto label`.
    pub fn jmp_imm_to(&mut self, op: JmpOp, dst: impl Into<R>, imm: i32, label: Label) {
        let insn = jmp_imm(op, R0, imm, 0);
        self.items.push(Item::Jump { insn, dst: dst.into(), src: R::P(R0), target: label });
    }

    /// `if dst op src goto label`.
    pub fn jmp_reg_to(&mut self, op: JmpOp, dst: impl Into<R>, src: impl Into<R>, label: Label) {
        let insn = jmp_reg(op, R0, R0, 0);
        self.items.push(Item::Jump { insn, dst: dst.into(), src: src.into(), target: label });
    }

    /// `goto label`.
    pub fn ja_to(&mut self, label: Label) {
        self.items.push(Item::Jump { insn: ja(0), dst: R::P(R0), src: R::P(R0), target: label });
    }

    /// `dst = map[map_name]`, relocated by the loader.
    pub fn ld_map(&mut self, dst: impl Into<R>, map_name: &str) {
        self.items.push(Item::LdMap { dst: dst.into(), map: map_name.to_string() });
    }

    /// A helper call by the convention (conv.rs): each of `args` into R1, R2, ... in
    /// order, the call, its result in R0 (`conv::RESULT`). An argument already in its
    /// register is not moved; a virtual one may be anywhere (the allocator keeps it out
    /// of the argument registers set before it).
    pub fn call(&mut self, helper: i32, args: &[Arg]) {
        for (arg, &to) in args.iter().zip(conv::ARGS.iter()) {
            match *arg {
                Arg::R(R::P(p)) if p == to => {}
                Arg::R(r) => self.op(mov64_reg(R0, R0), to, r),
                Arg::Imm(imm) => self.emit(mov64_imm(to, imm)),
                Arg::Stack(off) => {
                    self.emit(mov64_reg(to, conv::FRAME));
                    self.emit(alu64_imm(AluOp::Add, to, i32::from(off)));
                }
                Arg::Map(name) => self.ld_map(to, name),
                Arg::Addr(r, off) => {
                    if r != R::P(to) {
                        self.op(mov64_reg(R0, R0), to, r);
                    }
                    self.emit(alu64_imm(AluOp::Add, to, off));
                }
            }
        }
        self.items.push(Item::Call(helper));
    }

    pub fn call_kfunc(&mut self, kfunc: Kfunc) {
        self.items.push(Item::Kfunc(kfunc));
    }

    /// The program-wide preemption guard's call (`Item::Guard`).
    pub fn guard(&mut self, kfunc: Kfunc) {
        self.items.push(Item::Guard(kfunc));
    }

    /// How many references of `map` the program holds so far.
    pub fn map_refs(&self, map: &str) -> usize {
        self.items.iter().filter(|i| matches!(i, Item::LdMap { map: m, .. } if m == map)).count()
    }

    /// Notes that the references of `map` made since it held `since` are safe under
    /// preemption (guard.rs).
    pub fn preemption_safe_since(&mut self, map: &str, since: usize) {
        let n = self.map_refs(map) - since;
        *self.preemption_safe.entry(map.to_string()).or_default() += n;
    }

    /// A virtual-register instruction: `insn`'s shape on `dst` and `src`.
    pub fn op(&mut self, insn: Insn, dst: impl Into<R>, src: impl Into<R>) {
        self.items.push(Item::Op { insn, dst: dst.into(), src: src.into(), slot: None });
    }

    /// `dst = *(size *)(slot + off)`.
    pub fn load_slot(&mut self, size: Size, dst: impl Into<R>, slot: SlotId, off: i16) {
        self.items.push(Item::Op { insn: load(size, R0, R10, off), dst: dst.into(), src: R::P(R10), slot: Some(slot) });
    }

    /// `*(size *)(slot + off) = src`.
    pub fn store_slot(&mut self, size: Size, slot: SlotId, off: i16, src: impl Into<R>) {
        let insn = store_reg(size, R10, off, R0);
        self.items.push(Item::Op { insn, dst: R::P(R10), src: src.into(), slot: Some(slot) });
    }

    /// `dst = *(size *)(r10 + off)`, `off` a virtual offset in an open slot of `frame`
    /// (what `Frame::alloc` handed out, plus a constant).
    pub fn load_stack(&mut self, size: Size, dst: impl Into<R>, off: i16) {
        match self.frame.slot_at(i32::from(off), size.bytes()) {
            Some((slot, within)) => self.load_slot(size, dst, slot, within),
            None => self.fail(IrError::NoSlot { at: self.items.len(), off: i32::from(off) }),
        }
    }

    /// `dst = &slot + off`.
    pub fn slot_address(&mut self, dst: impl Into<R>, slot: SlotId, off: i32) {
        self.items.push(Item::SlotAddr { dst: dst.into(), slot, off });
    }

    /// Number of IR items so far (a measure of progress, not of instructions).
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Allocates registers and slots, resolves labels: the program to load.
    pub fn finish(self) -> Result<Finished, IrError> {
        self.finish_guarded(|_, _, _| false)
    }

    /// `finish`; then, when `unguarded` says the program so finished may run without
    /// the program-wide preemption guard (its items, the result, `preemption_safe`),
    /// finished again without its calls (kept when that would take more stack).
    pub fn finish_guarded(
        mut self,
        unguarded: impl Fn(&[Item], &Finished, &std::collections::HashMap<String, usize>) -> bool,
    ) -> Result<Finished, IrError> {
        if let Some((_, at)) = self.pending_addr {
            self.fail(IrError::NoSlot { at, off: 0 });
        }
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let slots = self.frame.slots();
        let alloc = alloc::allocate(&self.items, &slots, self.vregs)?;
        let guarded = emit::emit(&self.items, &alloc, self.labels)?;
        if !self.items.iter().any(|i| matches!(i, Item::Guard(_)))
            || !unguarded(&self.items, &guarded, &self.preemption_safe)
        {
            return Ok(guarded);
        }
        self.items.retain(|i| !matches!(i, Item::Guard(_)));
        let alloc = alloc::allocate(&self.items, &slots, self.vregs)?;
        let bare = emit::emit(&self.items, &alloc, self.labels)?;
        Ok(if bare.stack <= guarded.stack && bare.spilled == 0 { bare } else { guarded })
    }
}
