//! A read of the target's memory, and its failure counted: every `bpf_probe_read_user`
//! a probe makes goes through `read_target`, which adds 1 to a stack slot when the read
//! failed (its result negative), without a branch: `(result >> 63) & not_nil`. At the
//! program's end one branch adds the slot to the program's counter
//! (`Counter::ReadFailed`) when it is not zero.
//!
//! Without a branch because the verifier keeps every branch it did not follow yet until
//! the path it follows ends, at most 8,192: a conditional jump after each read, in a map
//! walk or whole-value copy it unrolls (thousands of reads), went past that (`printf
//! "%v"` of a map of 300 keys). A read costs eight ALU instructions more.
//!
//! A failed read leaves zeros where the value goes (the helper clears its destination),
//! so the value prints as zero or empty; the count is what says so at the end of the
//! trace. A read through a nil pointer (an address in the first page, where Go's runtime
//! too sees a nil dereference) is the language's own: a field read through nil reads
//! zero (`p, _ := v.(*T)`), and it is not counted. The reads of the call stack
//! (`ustack`) are not counted here: their walk stops where the frame-pointer chain ends.

use super::accounting::COUNTERS;
use super::codegen::Gen;
use super::ir::{Arg, Item, SlotId, R};
use super::LowerError;
use crate::bpf::helpers::{BPF_FUNC_map_lookup_elem, BPF_FUNC_probe_read_user};
use crate::bpf::insn::*;
use crate::plan::Counter;
use crate::syntax::ast::Span;

/// Addresses below this are a nil pointer's (plus a field's offset): Go's runtime takes a
/// fault there for a nil dereference.
pub const NIL_PAGE: i32 = 0x1000;

impl Gen<'_> {
    /// `bpf_probe_read_user(args)`: destination, size and address (a register or a
    /// virtual one), as `Func::call` takes them; R0 its result (negative when the read
    /// failed). Clobbers R0-R5.
    pub(super) fn read_target(&mut self, args: &[Arg]) -> Result<(), LowerError> {
        let (Some(failed), [_, _, Arg::R(address)]) = (self.failed_reads()?, args) else {
            self.b.call(BPF_FUNC_probe_read_user, args);
            return Ok(());
        };
        // 1 when the address is past the nil page: (NIL_PAGE - 1 - address) >> 63.
        let not_nil = self.b.vreg();
        self.b.op(mov64_imm(R0, NIL_PAGE - 1), not_nil, R0);
        self.b.op(alu64_reg(AluOp::Sub, R0, R0), not_nil, *address);
        self.b.op(alu64_imm(AluOp::Rsh, R0, 63), not_nil, R0);
        self.b.call(BPF_FUNC_probe_read_user, args);
        // R0 stays what the helper gave (callers may test it).
        self.b.emit(mov64_reg(R1, R0));
        self.b.emit(alu64_imm(AluOp::Rsh, R1, 63));
        self.b.op(alu64_reg(AluOp::And, R0, R0), R1, not_nil);
        self.b.load_slot(Size::DW, R2, failed, 0);
        self.b.emit(alu64_reg(AluOp::Add, R2, R1));
        self.b.store_slot(Size::DW, failed, 0, R2);
        Ok(())
    }

    /// The program's slot of failed reads, made (and set to 0 right after the prologue)
    /// at its first read; `None` without accounting.
    pub(super) fn failed_reads(&mut self) -> Result<Option<SlotId>, LowerError> {
        let Some(acct) = self.acct.as_mut() else { return Ok(None) };
        if let Some(slot) = acct.failed_reads {
            return Ok(Some(slot));
        }
        let mark = self.b.frame.mark();
        let made = self.b.frame.alloc_slot(8);
        self.b.frame.release(mark);
        let (slot, _) = made.map_err(|e| LowerError::Stack { span: Span::default(), needed: e.needed })?;
        let insn = store_imm(Size::DW, R10, 0, 0);
        self.b.insert(self.reads_start, Item::Op { insn, dst: R::P(R10), src: R::P(R0), slot: Some(slot) });
        if let Some(acct) = self.acct.as_mut() {
            acct.failed_reads = Some(slot);
        }
        Ok(Some(slot))
    }

    /// At the program's end (every path but the spill setup's failure): the failed
    /// reads added to its counter, when there were any.
    pub(super) fn count_failed_reads(&mut self) -> Result<(), LowerError> {
        let Some(acct) = self.acct.as_mut() else { return Ok(()) };
        let Some(failed) = acct.failed_reads else { return Ok(()) };
        let index = acct.layout.slot(Counter::ReadFailed { program: acct.program.clone() });
        let none = self.b.new_label();
        let n = self.b.vreg();
        self.b.load_slot(Size::DW, n, failed, 0);
        self.b.jmp_imm_to(JmpOp::Eq, n, 0, none);
        let mark = self.b.frame.mark();
        let key = self.frame_slot(8)?;
        self.b.emit(store_imm(Size::W, R10, key, index as i32));
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(COUNTERS), Arg::Stack(key)]);
        self.b.frame.release(mark);
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, none);
        self.b.op(atomic_add(Size::DW, R0, 0, R0), R0, n);
        self.b.bind(none);
        Ok(())
    }
}
