//! Calls that a panic ends without a RET (docs/panics.md): the programs at the places
//! where the runtime decides a panic's fate pop the frames it discarded from the
//! goroutine's record (frames.rs), and `on panic` probes run their body for each.
//!
//! - runtime.gopanic (Go 1.17 to 1.21 only): notes the panic's value and where it
//!   started in the record's list of panics under way, since runtime.recovery cannot
//!   find a recovered panic there.
//! - runtime.recovery(gp): every frame of gp below the recovering frame's SP is gone;
//!   `recovered` is true; the value is the recovered panic's (`g._panic.arg` from Go
//!   1.22, else the newest panic noted that started below that SP).
//! - runtime.preprintpanics(p), only on the way to a fatal panic: notes `p.arg` (it then
//!   turns an error or Stringer value into its text for the message Go prints).
//! - runtime.fatalpanic(msgs): the goroutine dies, every frame is gone; the value is
//!   the one preprintpanics noted (else `msgs.arg`).
//! - runtime.Goexit, and runtime.goexit0 (every goroutine's end, a return from its
//!   function too): the goroutine's frames end without a panic: forgotten.
//!
//! The frames a panic ended stay above the record's `top` (`gone` of them) until the
//! next push, for the `on panic` probes at the same place, which run after the unwinding.

use super::codegen::Gen;
use super::ir::{conv, Arg};
use super::layout::{
    F_FUNC, F_REL, F_TIME, PANIC, PANICS, P_LIST, P_NPANICS, P_RECOVERED, P_VALUE, R_BASE, R_GONE, R_TOP,
};
use super::loaded::{Call, CallFrame, Loaded, Panicked, Record, Slot};
use super::LowerError;
use crate::arch::abi::Location;
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::gobin::{PanicLayout, Recovery};
use crate::syntax::ast::Span;

/// `P_RECOVERED` when preprintpanics noted the value of a panic about to kill the program.
const FATAL_VALUE_NOTED: i32 = 2;

/// How many frames one unwinding pops (the rest: at later entries and returns).
const MAX_UNWIND: i32 = 64;
/// How many frames one panic's probe reports (each runs the body once).
pub const MAX_REPORT: i32 = 16;

/// Where the unwinding program runs.
#[derive(Clone, Debug)]
pub enum Unwind {
    /// runtime.recovery(gp), `gp` where its first argument is.
    Recovery { gp: Location },
    /// runtime.fatalpanic(msgs), on the dying goroutine.
    Fatal { msgs: Location },
}

impl Gen<'_> {
    /// Pops the frames a panic ended from the goroutine's record; with `panics` (the
    /// script has `on panic` probes), notes how many, the panic's value and whether it
    /// was recovered, for them.
    pub fn unwind(&mut self, at: &Unwind, layout: PanicLayout, panics: bool, span: Span) -> Result<(), LowerError> {
        let g = match at {
            Unwind::Recovery { gp } => self.load_g(Some(gp), span)?,
            Unwind::Fatal { .. } => self.load_g(None, span)?,
        };
        let record = self.record(g, false, span)?;
        let rec = record.rec;
        let cut = self.slot(8, span)?;
        let panic_ptr = self.slot(8, span)?;
        self.b.emit(store_imm(Size::DW, R10, panic_ptr, 0));
        match (at, layout.recovery) {
            (Unwind::Fatal { .. }, _) => self.b.emit2(ld_imm64(R0, i64::MAX as u64)),
            (Unwind::Recovery { .. }, Recovery::Sigcode { sigcode0 }) => {
                self.g_word(g, cut, sigcode0)?;
                self.relative(record, cut);
            }
            (Unwind::Recovery { .. }, Recovery::PanicSp { g_panic, sp }) => {
                self.g_word(g, panic_ptr, g_panic)?;
                self.b.emit(store_imm(Size::DW, R10, cut, 0));
                self.b.emit(load(Size::DW, R3, R10, panic_ptr));
                self.read_user(cut, R3, sp as i32)?;
                self.relative(record, cut);
            }
        }
        if let Unwind::Recovery { .. } = at {
            self.calls_from(R0);
        }
        self.b.emit(store_reg(Size::DW, R10, cut, R0));
        let old_top = self.slot(8, span)?;
        self.b.emit(load(Size::DW, R1, R10, rec));
        self.b.emit(load(Size::W, R1, R1, R_TOP));
        self.b.emit(store_reg(Size::DW, R10, old_top, R1));
        self.pop_below(record, cut, span)?;
        if !panics {
            return Ok(());
        }
        // The frames it ended, above top; recovered or not; the value.
        self.b.emit(load(Size::DW, R1, R10, rec));
        self.b.emit(load(Size::W, R2, R1, R_TOP));
        self.b.emit(load(Size::DW, R3, R10, old_top));
        self.b.emit(alu64_reg(AluOp::Sub, R3, R2));
        self.b.emit(store_reg(Size::W, R1, R_GONE, R3));
        if let Unwind::Fatal { msgs } = at {
            // The value preprintpanics noted, else msgs.arg.
            let noted = self.b.new_label();
            self.b.emit(load(Size::W, R2, R1, P_RECOVERED));
            self.b.emit(store_imm(Size::W, R1, P_RECOVERED, 0));
            self.b.jmp_imm_to(JmpOp::Eq, R2, FATAL_VALUE_NOTED, noted);
            self.b.emit(store_imm(Size::DW, R1, P_VALUE, 0));
            self.b.emit(store_imm(Size::DW, R1, P_VALUE + 8, 0));
            let mark = self.b.frame.mark();
            let place = self.location_place("msgs", msgs, span)?;
            self.read_scalar(&place, 8, false)?;
            self.b.frame.release(mark);
            self.b.emit(store_reg(Size::DW, R10, panic_ptr, R0));
            self.value_of_panic(record, panic_ptr, layout.arg)?;
            self.b.bind(noted);
            self.b.emit(mov64_imm(R0, 0));
            return Ok(());
        }
        self.b.emit(store_imm(Size::W, R1, P_RECOVERED, 1));
        self.b.emit(store_imm(Size::DW, R1, P_VALUE, 0));
        self.b.emit(store_imm(Size::DW, R1, P_VALUE + 8, 0));
        match (at, layout.recovery) {
            (Unwind::Fatal { .. }, _) => {}
            (Unwind::Recovery { .. }, Recovery::PanicSp { .. }) => {
                self.value_of_panic(record, panic_ptr, layout.arg)?
            }
            (Unwind::Recovery { .. }, Recovery::Sigcode { .. }) => self.newest_panic(rec, cut, span)?,
        }
        Ok(())
    }

    /// `reg`, the position of the recovering frame's SP, becomes the bound below which
    /// frames are its callees, gone: a callee enters at that SP minus what a call
    /// pushes (amd64: 8 below it; arm64: at the SP itself, where BL leaves it), so the
    /// bound is one above that.
    fn calls_from(&mut self, reg: Reg) {
        self.b.emit(alu64_imm(AluOp::Add, reg, 1 - self.arch().call_pushes() as i32));
    }

    /// *(u64 *)(r10 + slot) = the word at `off` in the g in slot `g` (read from the
    /// target).
    fn g_word(&mut self, g: Slot, slot: i16, off: u32) -> Result<(), LowerError> {
        self.b.emit(store_imm(Size::DW, R10, slot, 0));
        self.b.emit(load(Size::DW, R3, R10, g));
        self.read_user(slot, R3, off as i32)
    }

    /// R0 = the address in `slot` as a position in the record (minus its base).
    fn relative(&mut self, record: Record, slot: i16) {
        self.b.emit(load(Size::DW, R0, R10, slot));
        self.b.emit(load(Size::DW, R1, R10, record.rec));
        self.b.emit(load(Size::DW, R1, R1, R_BASE));
        self.b.emit(alu64_reg(AluOp::Sub, R0, R1));
    }

    /// Pops the frames below the position in slot `cut` (at most MAX_UNWIND). A deep
    /// frame missing from its map is popped too.
    fn pop_below(&mut self, record: Record, cut: i16, span: Span) -> Result<(), LowerError> {
        let idx = self.slot(8, span)?;
        let head = self.b.new_label();
        let pop = self.b.new_label();
        let out = self.b.new_label();
        self.b.emit(mov64_imm(R9, 0));
        self.b.bind(head);
        self.b.jmp_imm_to(JmpOp::Sge, R9, MAX_UNWIND, out);
        self.b.emit(alu64_imm(AluOp::Add, R9, 1));
        self.b.emit(load(Size::DW, R1, R10, record.rec));
        self.b.emit(load(Size::W, R2, R1, R_TOP));
        self.b.jmp_imm_to(JmpOp::Eq, R2, 0, out);
        self.b.emit(alu64_imm(AluOp::Sub, R2, 1));
        self.b.emit(store_reg(Size::DW, R10, idx, R2));
        self.frame_addr(record, idx, span)?;
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, pop);
        self.b.emit(load(Size::DW, R1, R0, F_REL));
        self.b.emit(load(Size::DW, R2, R10, cut));
        self.b.jmp_reg_to(JmpOp::Sge, R1, R2, out);
        self.b.bind(pop);
        self.set_top(record, idx);
        self.b.ja_to(head);
        self.b.bind(out);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// The record's value = the `arg` (an `any`: type, data) of the `_panic` whose address
    /// is in `slot` (none when 0).
    fn value_of_panic(&mut self, record: Record, slot: i16, arg: u32) -> Result<(), LowerError> {
        let none = self.b.new_label();
        let value = self.b.vreg();
        self.b.load_stack(Size::DW, value, slot);
        self.b.jmp_imm_to(JmpOp::Eq, value, 0, none);
        self.b.op(alu64_imm(AluOp::Add, R0, arg as i32), value, R0);
        let rec = self.b.vreg();
        self.b.load_stack(Size::DW, rec, record.rec);
        let to = Arg::Addr(rec.into(), i32::from(P_VALUE));
        self.read_target(&[to, Arg::Imm(16), value.into()])?;
        self.b.bind(none);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// Go 1.17 to 1.21: the record's value = the newest panic under way that started
    /// below the position in `cut`; those panics are over.
    fn newest_panic(&mut self, rec: Slot, cut: i16, span: Span) -> Result<(), LowerError> {
        let out = self.b.new_label();
        let n = self.slot(8, span)?;
        self.b.emit(load(Size::DW, R1, R10, rec));
        self.b.emit(load(Size::W, R2, R1, P_NPANICS));
        self.b.emit(store_reg(Size::DW, R10, n, R2));
        for i in 0..PANICS {
            self.b.emit(load(Size::DW, R2, R10, n));
            self.b.jmp_imm_to(JmpOp::Eq, R2, 0, out);
            self.b.emit(alu64_imm(AluOp::Sub, R2, 1));
            self.b.emit(alu64_imm(AluOp::And, R2, PANICS - 1));
            self.b.emit(alu64_imm(AluOp::Mul, R2, PANIC));
            self.b.emit(load(Size::DW, R1, R10, rec));
            self.b.emit(alu64_reg(AluOp::Add, R1, R2));
            self.b.emit(load(Size::DW, R3, R1, P_LIST + 16));
            self.b.emit(load(Size::DW, R4, R10, cut));
            self.b.jmp_reg_to(JmpOp::Sge, R3, R4, out);
            if i == 0 {
                // The newest that ended: its value.
                self.b.emit(load(Size::DW, R3, R1, P_LIST));
                self.b.emit(load(Size::DW, R4, R1, P_LIST + 8));
                self.b.emit(load(Size::DW, R5, R10, rec));
                self.b.emit(store_reg(Size::DW, R5, P_VALUE, R3));
                self.b.emit(store_reg(Size::DW, R5, P_VALUE + 8, R4));
            }
            self.b.emit(load(Size::DW, R2, R10, n));
            self.b.emit(alu64_imm(AluOp::Sub, R2, 1));
            self.b.emit(store_reg(Size::DW, R10, n, R2));
        }
        self.b.bind(out);
        self.b.emit(load(Size::DW, R1, R10, rec));
        self.b.emit(load(Size::DW, R2, R10, n));
        self.b.emit(store_reg(Size::W, R1, P_NPANICS, R2));
        Ok(())
    }

    /// At runtime.gopanic(e) (Go 1.17 to 1.21), on the panicking goroutine: notes e and
    /// where the panic started; panics noted at or below that place are over.
    pub fn note_panic(&mut self, e: [&Location; 2], span: Span) -> Result<(), LowerError> {
        let g = self.load_g(None, span)?;
        let record = self.record(g, true, span)?;
        let rec = record.rec;
        let rel = self.slot(8, span)?;
        self.load_reg(R0, self.arch().stack_pointer());
        self.b.emit(store_reg(Size::DW, R10, rel, R0));
        self.relative(record, rel);
        self.b.emit(store_reg(Size::DW, R10, rel, R0));
        let words = self.slot(16, span)?;
        for (i, loc) in e.into_iter().enumerate() {
            let mark = self.b.frame.mark();
            let place = self.location_place("e", loc, span)?;
            self.read_scalar(&place, 8, false)?;
            self.b.frame.release(mark);
            self.b.emit(store_reg(Size::DW, R10, words + 8 * i as i16, R0));
        }
        let n = self.slot(8, span)?;
        let push = self.b.new_label();
        self.b.emit(load(Size::DW, R1, R10, rec));
        self.b.emit(load(Size::W, R2, R1, P_NPANICS));
        self.b.emit(store_reg(Size::DW, R10, n, R2));
        for _ in 0..PANICS {
            self.entry_of_panic(rec, n, 1, push);
            self.b.emit(load(Size::DW, R3, R1, P_LIST + 16));
            self.b.emit(load(Size::DW, R4, R10, rel));
            self.b.jmp_reg_to(JmpOp::Sgt, R3, R4, push);
            self.b.emit(load(Size::DW, R2, R10, n));
            self.b.emit(alu64_imm(AluOp::Sub, R2, 1));
            self.b.emit(store_reg(Size::DW, R10, n, R2));
        }
        self.b.bind(push);
        // A full list keeps its oldest panics; the newest replaces the last.
        let room = self.b.new_label();
        self.b.emit(load(Size::DW, R2, R10, n));
        self.b.jmp_imm_to(JmpOp::Lt, R2, PANICS, room);
        self.b.emit(mov64_imm(R2, PANICS - 1));
        self.b.emit(store_reg(Size::DW, R10, n, R2));
        self.b.bind(room);
        self.entry_of_panic(rec, n, 0, push);
        for (off, from) in [(0, words), (8, words + 8), (16, rel)] {
            self.b.emit(load(Size::DW, R3, R10, from));
            self.b.emit(store_reg(Size::DW, R1, P_LIST + off, R3));
        }
        self.b.emit(load(Size::DW, R1, R10, rec));
        self.b.emit(load(Size::DW, R2, R10, n));
        self.b.emit(alu64_imm(AluOp::Add, R2, 1));
        self.b.emit(store_reg(Size::W, R1, P_NPANICS, R2));
        Ok(())
    }

    /// R1 = the record plus the offset of panic number n - `minus` (n in slot `n`), so that
    /// P_LIST + field is that panic's field; jumps to `out` when n - `minus` < 0.
    fn entry_of_panic(&mut self, rec: Slot, n: i16, minus: i32, out: crate::bpf::builder::Label) {
        self.b.emit(load(Size::DW, R2, R10, n));
        if minus > 0 {
            self.b.jmp_imm_to(JmpOp::Eq, R2, 0, out);
            self.b.emit(alu64_imm(AluOp::Sub, R2, minus));
        }
        self.b.emit(alu64_imm(AluOp::And, R2, PANICS - 1));
        self.b.emit(alu64_imm(AluOp::Mul, R2, PANIC));
        self.b.emit(load(Size::DW, R1, R10, rec));
        self.b.emit(alu64_reg(AluOp::Add, R1, R2));
    }

    /// At runtime.preprintpanics(p), on a goroutine about to die of panic p: notes p's
    /// value before the runtime turns an error into its text.
    pub fn note_fatal_value(&mut self, p: &Location, arg: u32, span: Span) -> Result<(), LowerError> {
        let g = self.load_g(None, span)?;
        let record = self.record(g, false, span)?;
        let rec = record.rec;
        let ptr = self.slot(8, span)?;
        let place = self.location_place("p", p, span)?;
        self.read_scalar(&place, 8, false)?;
        self.b.emit(store_reg(Size::DW, R10, ptr, R0));
        self.b.emit(load(Size::DW, R1, R10, rec));
        self.b.emit(store_imm(Size::DW, R1, P_VALUE, 0));
        self.b.emit(store_imm(Size::DW, R1, P_VALUE + 8, 0));
        self.value_of_panic(record, ptr, arg)?;
        self.b.emit(load(Size::DW, R1, R10, rec));
        self.b.emit(store_imm(Size::W, R1, P_RECOVERED, FATAL_VALUE_NOTED));
        Ok(())
    }

    /// At runtime.Goexit, on the goroutine that ends (`gp` None: the g register), or at
    /// runtime.goexit0(gp) on g0 (`gp` where its argument is): the goroutine's frames end
    /// without a panic.
    pub fn forget_frames(&mut self, gp: Option<&Location>, panics: bool, span: Span) -> Result<(), LowerError> {
        let g = self.load_g(gp, span)?;
        let rec = self.record(g, false, span)?.rec;
        self.b.emit(load(Size::DW, R1, R10, rec));
        self.b.emit(store_imm(Size::DW, R1, R_TOP, 0));
        if panics {
            self.b.emit(store_imm(Size::DW, R1, P_RECOVERED, 0));
        }
        Ok(())
    }

    /// A slot holding the panicking goroutine's key: `gp` at the recovery site (the
    /// attach cookie says which site fired), else the g register, where the dying
    /// goroutine runs.
    fn panicking_g(&mut self, recovery: u32, gp: &Location, span: Span) -> Result<Slot, LowerError> {
        let g = self.goroutine_key(span)?;
        let dying = self.b.new_label();
        let have = self.b.new_label();
        self.b.call(BPF_FUNC_get_attach_cookie, &[conv::CTX.into()]);
        self.b.emit(alu32_reg(AluOp::Mov, R0, R0));
        self.b.jmp_imm_to(JmpOp::Ne, R0, recovery as i32, dying);
        let place = self.location_place("gp", gp, span)?;
        self.read_scalar(&place, 8, false)?;
        self.b.emit(store_reg(Size::DW, R10, g, R0));
        self.b.ja_to(have);
        self.b.bind(dying);
        self.load_reg(R1, self.arch().g_reg());
        self.b.emit(store_reg(Size::DW, R10, g, R1));
        self.b.bind(have);
        self.b.emit(mov64_imm(R0, 0));
        Ok(g)
    }

    /// An `on panic` probe's program: for each frame the panic ended whose function (its
    /// index in the plan) is a key of the map `members`, `body` runs with `func`,
    /// `elapsed`, `panic` and `recovered`. It runs at runtime.recovery (the function of index `recovery`, gp at `gp`) and at
    /// runtime.fatalpanic (on the dying goroutine), after the unwinding.
    pub fn panic_frames(
        &mut self,
        recovery: u32,
        gp: &Location,
        members: &str,
        span: Span,
        body: impl FnOnce(&mut Gen) -> Result<(), LowerError>,
    ) -> Result<(), LowerError> {
        let g = self.panicking_g(recovery, gp, span)?;
        let record = self.record(g, false, span)?;
        let rec = record.rec;
        let (value, recovered, func) = (self.slot(16, span)?, self.slot(8, span)?, self.slot(8, span)?);
        let (i, end, count) = (self.slot(8, span)?, self.slot(8, span)?, self.slot(8, span)?);
        self.b.emit(load(Size::DW, R1, R10, rec));
        for off in [0, 8] {
            self.b.emit(load(Size::DW, R2, R1, P_VALUE + off));
            self.b.emit(store_reg(Size::DW, R10, value + off, R2));
        }
        self.b.emit(load(Size::W, R2, R1, P_RECOVERED));
        self.b.emit(store_reg(Size::DW, R10, recovered, R2));
        self.b.emit(load(Size::W, R2, R1, R_TOP));
        self.b.emit(store_reg(Size::DW, R10, i, R2));
        self.b.emit(load(Size::W, R3, R1, R_GONE));
        self.b.emit(alu64_reg(AluOp::Add, R3, R2));
        self.b.emit(store_reg(Size::DW, R10, end, R3));
        self.b.emit(store_imm(Size::DW, R10, count, 0));
        let (head, next, out) = (self.b.new_label(), self.b.new_label(), self.b.new_label());
        let full = self.b.new_label();
        self.b.bind(head);
        self.b.emit(load(Size::DW, R1, R10, count));
        self.b.jmp_imm_to(JmpOp::Sge, R1, MAX_REPORT, full);
        self.b.emit(alu64_imm(AluOp::Add, R1, 1));
        self.b.emit(store_reg(Size::DW, R10, count, R1));
        self.b.emit(load(Size::DW, R1, R10, i));
        self.b.emit(load(Size::DW, R2, R10, end));
        self.b.jmp_reg_to(JmpOp::Ge, R1, R2, out);
        self.frame_addr(record, i, span)?;
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, next);
        let began = self.b.vreg();
        self.b.op(load(Size::DW, R0, R0, F_TIME), began, R0);
        self.b.emit(load(Size::W, R1, R0, F_FUNC));
        self.b.emit(store_reg(Size::DW, R10, func, R1));
        // Is the ended call's function one this probe reports (a key of `members`)? The
        // other functions fall through: the verifier walks that path first, and its
        // states prune the members' paths (the other way round took it 4 times longer).
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(members), Arg::Stack(func)]);
        let member = self.b.new_label();
        self.b.jmp_imm_to(JmpOp::Ne, R0, 0, member);
        self.b.ja_to(next);
        self.b.bind(member);
        self.b.call(BPF_FUNC_ktime_get_ns, &[]);
        self.b.op(alu64_reg(AluOp::Sub, R0, R0), R0, began);
        let elapsed = self.slot(8, span)?;
        self.b.emit(store_reg(Size::DW, R10, elapsed, R0));
        let at = CallFrame { record, index: i };
        self.loaded = Loaded { call: Call::Panicked(Panicked { at, elapsed, func, value, recovered }), bias: None };
        body(self)?;
        self.b.bind(next);
        self.b.emit(load(Size::DW, R1, R10, i));
        self.b.emit(alu64_imm(AluOp::Add, R1, 1));
        self.b.emit(store_reg(Size::DW, R10, i, R1));
        self.b.ja_to(head);
        // More ended frames than one program looks at: counted and said at exit.
        self.b.bind(full);
        self.b.emit(load(Size::DW, R1, R10, i));
        self.b.emit(load(Size::DW, R2, R10, end));
        self.b.jmp_reg_to(JmpOp::Ge, R1, R2, out);
        if let Some(program) = self.acct.as_ref().map(|a| a.program.clone()) {
            let why =
                format!("a panic ended more than {MAX_REPORT} traced calls at once: the deeper ones were not reported");
            self.count(crate::plan::Counter::Skipped { program, why }, span)?;
        }
        self.b.bind(out);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }
}
