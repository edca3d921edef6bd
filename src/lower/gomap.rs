//! `m[k]` of a Go map with integer or string keys, read in the probe. Where gtrace
//! found the runtime's hash keys (`Gen::aes` holds their addresses; amd64 and arm64),
//! the key is looked up as the runtime does (`hashed_place`, maplookup.rs). Elsewhere
//! (hash code of an unknown shape) the probe scans instead: every bucket (Go 1.17 to 1.23: the `buckets` array,
//! each bucket's overflow chain, and while the map grows the `oldbuckets` not yet
//! evacuated) or every group (Go 1.24 and later: the one group of a small map, else
//! each table of the directory once), comparing the keys of full slots with `k`. The
//! element's address becomes the place of `m[k]`, 0 when the key is absent, which reads
//! as Go's zero value.
//!
//! The scan visits at most `MAX_GROUPS` buckets or groups (a loop the verifier walks
//! through, each step bounded). A key not found within them in a bigger map, or a
//! string key longer than `MAX_STRING_KEY` bytes, ends the hit as skipped
//! (`Counter::Skipped`), said at exit: never a silent zero. The walk itself is mapwalk.rs.

use super::aeshash::MAX_HASHED_STRING;
use super::codegen::Gen;
use super::ir::Arg;
use super::maplookup::header_fits;
use super::mapwalk::{slots, Key, Labels, Scan, Slots, MAX_STRING_KEY, MIN_TOP_HASH, SLOTS, STRING_KEY_BUF};
use super::values::Place;
use super::LowerError;
use crate::bpf::builder::Label;
use crate::bpf::insn::*;
use crate::gobin::{AesGlobals, MapLayout};
use crate::gotypes::TypeKind;
use crate::plan::Counter;
use crate::syntax::ast::*;

/// Buckets (with overflow buckets) or groups one `m[k]` looks at, at most.
pub const MAX_GROUPS: i32 = 512;
impl Gen<'_> {
    /// The place of `m[k]` (`e`): target memory at the element's address, 0 when absent.
    pub fn map_elem_place(&mut self, e: &Expr, base: &Expr, index: &Expr) -> Result<Place, LowerError> {
        let bid = self.go_type_of(base).ok_or_else(|| LowerError::unsupported(e.span, "indexing this map"))?;
        let TypeKind::Map { key: Some(key), elem: Some(elem) } = self.types.get(bid).kind else {
            return Err(LowerError::unsupported(e.span, "indexing a map of unknown key or element type"));
        };
        let layout = self.binary.map_layout.ok_or(LowerError::NoMapLayout { span: e.span })?;
        let kt = self.types.get(key);
        let (string_key, key_size) = (matches!(kt.kind, TypeKind::String), kt.size.clamp(1, 8));
        let slots = slots(self.types, &layout, key, elem);
        if let Some(aes) = self.aes.filter(|_| header_fits(&layout)) {
            let k = (string_key, key_size, slots);
            return self.hashed_place(e, base, index, k, &layout, aes);
        }
        let s = self.scan_slots(slots, Some((string_key, key_size)), e.span)?;
        self.scan_key(&s, index)?;
        // The map's header: its address is the value of `m`.
        let mp = self.place(base)?;
        self.read_scalar(&mp, 8, false)?;
        self.b.emit(store_reg(Size::DW, R10, s.cur, R0));
        self.b.emit(store_imm(Size::DW, R10, s.found, 0));
        let l = Labels::new(&mut self.b);
        let skipped = self.b.new_label();
        self.walk_start(&s, &layout, &l, MAX_GROUPS, skipped)?;
        self.scan_group(&s, &l, matches!(layout, MapLayout::Buckets { .. }))?;
        self.walk_step_end(&s, &layout, &l)?;
        self.b.bind(skipped);
        if let Some(program) = self.acct.as_ref().map(|a| a.program.clone()) {
            let why = format!("m[k] looked at {MAX_GROUPS} buckets or groups of a bigger map without finding the key");
            self.count(Counter::Skipped { program, why }, e.span)?;
        }
        self.b.ja_to(self.done);
        self.b.bind(l.hit);
        let picked = self.b.new_label();
        self.pick_slot(&s, picked);
        self.b.bind(picked);
        if slots.elem_indirect {
            self.b.emit(load(Size::DW, R3, R10, s.found));
            self.read_user_n(s.found, 8, R3)?;
        }
        self.b.bind(l.done);
        self.b.emit(mov64_imm(R0, 0));
        Ok(Place::Mem { addr: s.found, offset: 0 })
    }

    /// `m[k]` found as the runtime finds it (maplookup.rs): the key hashed, one chain or
    /// probe sequence looked at.
    fn hashed_place(
        &mut self,
        e: &Expr,
        base: &Expr,
        index: &Expr,
        (string, size, slots): (bool, u64, Slots),
        layout: &MapLayout,
        aes: AesGlobals,
    ) -> Result<Place, LowerError> {
        let found = self.slot(8, e.span)?;
        let mark = self.b.frame.mark();
        // One byte more than hashed is read into it (below): the slot holds it.
        let key = if string { self.slot(8 + MAX_HASHED_STRING + 1, e.span)? } else { self.slot(8, e.span)? };
        if string {
            for i in 0..(8 + MAX_HASHED_STRING as i16) / 8 {
                self.b.emit(store_imm(Size::DW, R10, key + 8 * i, 0));
            }
            // One byte more than hashed: a longer key reads as longer, and is skipped.
            self.string_to(index, R10, key, MAX_HASHED_STRING + 1)?;
            let fits = self.b.new_label();
            self.b.emit(load(Size::DW, R1, R10, key));
            self.b.jmp_imm_to(JmpOp::Le, R1, MAX_HASHED_STRING as i32, fits);
            if let Some(program) = self.acct.as_ref().map(|a| a.program.clone()) {
                let why = format!("m[k] with a string key longer than {MAX_HASHED_STRING} bytes");
                self.count(Counter::Skipped { program, why }, index.span)?;
            }
            self.b.ja_to(self.done);
            self.b.bind(fits);
        } else {
            self.expr(index)?;
            self.narrow(size, false);
            self.b.emit(store_reg(Size::DW, R10, key, R0));
        }
        let mp = self.place(base)?;
        self.read_scalar(&mp, 8, false)?;
        self.hashed_lookup(&Key { key, string, size, slots }, layout, aes, found, e.span)?;
        if slots.elem_indirect {
            let absent = self.b.new_label();
            self.b.emit(load(Size::DW, R3, R10, found));
            self.b.jmp_imm_to(JmpOp::Eq, R3, 0, absent);
            self.read_user_n(found, 8, R3)?;
            self.b.bind(absent);
            self.b.emit(mov64_imm(R0, 0));
        }
        self.b.frame.release(mark);
        Ok(Place::Mem { addr: found, offset: 0 })
    }

    /// The key into its slot: an integer cut to the key's size, or a string record
    /// (zero-padded); a string longer than `MAX_STRING_KEY` ends the hit as skipped.
    fn scan_key(&mut self, s: &Scan, index: &Expr) -> Result<(), LowerError> {
        if !s.string_key {
            self.expr(index)?;
            self.narrow(s.key_size, false);
            self.b.emit(store_reg(Size::DW, R10, s.key, R0));
            return Ok(());
        }
        for i in 0..(8 + STRING_KEY_BUF as i16) / 8 {
            self.b.emit(store_imm(Size::DW, R10, s.key + 8 * i, 0));
        }
        // One byte more than compared: a longer key reads as longer.
        self.string_to(index, R10, s.key, MAX_STRING_KEY + 1)?;
        let fits = self.b.new_label();
        self.b.emit(load(Size::DW, R1, R10, s.key));
        self.b.jmp_imm_to(JmpOp::Le, R1, MAX_STRING_KEY as i32, fits);
        if let Some(program) = self.acct.as_ref().map(|a| a.program.clone()) {
            let why = format!("m[k] with a string key longer than {MAX_STRING_KEY} bytes");
            self.count(Counter::Skipped { program, why }, index.span)?;
        }
        self.b.ja_to(self.done);
        self.b.bind(fits);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// Looks at the 8 slots of the bucket or group at `cur` without branching (one
    /// branch a step keeps the verifier's pending paths few): bit i of `ctrl` is set
    /// when slot i is full (tophash at least `minTopHash` in a bucket, a control byte
    /// with its top bit clear in a group) and its key equals the key; any bit set jumps
    /// to `hit`, which picks the slot.
    fn scan_group(&mut self, s: &Scan, l: &Labels, buckets: bool) -> Result<(), LowerError> {
        self.word_at(s, s.cur, 0, 8)?;
        self.b.emit(store_reg(Size::DW, R10, s.found, R0));
        self.b.emit(store_imm(Size::DW, R10, s.ctrl, 0));
        for i in 0..SLOTS {
            let key_at = s.slots.key + i * s.slots.key_stride;
            self.b.emit(load(Size::DW, R3, R10, s.cur));
            self.b.emit(alu64_imm(AluOp::Add, R3, key_at as i32));
            // R1 = 0 when the keys are equal, else 1.
            self.key_differs(s)?;
            // R2 = 1 when the slot is not full.
            self.b.emit(load(Size::DW, R2, R10, s.found));
            self.b.emit(alu64_imm(AluOp::Rsh, R2, 8 * i as i32));
            self.b.emit(alu64_imm(AluOp::And, R2, 0xff));
            if buckets {
                self.b.emit(alu64_imm(AluOp::Sub, R2, MIN_TOP_HASH));
                self.b.emit(alu64_imm(AluOp::Rsh, R2, 63));
            } else {
                self.b.emit(alu64_imm(AluOp::Rsh, R2, 7));
            }
            self.b.emit(alu64_reg(AluOp::Or, R1, R2));
            self.b.emit(alu64_imm(AluOp::Xor, R1, 1));
            self.b.emit(alu64_imm(AluOp::Lsh, R1, i as i32));
            self.b.emit(load(Size::DW, R2, R10, s.ctrl));
            self.b.emit(alu64_reg(AluOp::Or, R2, R1));
            self.b.emit(store_reg(Size::DW, R10, s.ctrl, R2));
        }
        self.b.emit(store_imm(Size::DW, R10, s.found, 0));
        self.b.emit(load(Size::DW, R1, R10, s.ctrl));
        self.b.jmp_imm_to(JmpOp::Ne, R1, 0, l.hit);
        Ok(())
    }

    /// At `hit`: the element of the first slot whose bit is set in `ctrl` into `found`.
    fn pick_slot(&mut self, s: &Scan, found: Label) {
        for i in 0..SLOTS {
            let next = self.b.new_label();
            self.b.emit(load(Size::DW, R1, R10, s.ctrl));
            self.b.emit(alu64_imm(AluOp::And, R1, 1 << i));
            self.b.jmp_imm_to(JmpOp::Eq, R1, 0, next);
            let elem_at = s.slots.elem + i * s.slots.elem_stride;
            self.b.emit(load(Size::DW, R1, R10, s.cur));
            self.b.emit(alu64_imm(AluOp::Add, R1, elem_at as i32));
            self.b.emit(store_reg(Size::DW, R10, s.found, R1));
            self.b.ja_to(found);
            self.b.bind(next);
            self.b.emit(mov64_imm(R0, 0));
        }
    }

    /// R1 = 0 when the key at target address R3 equals the key, else 1 (no branch).
    fn key_differs(&mut self, s: &Scan) -> Result<(), LowerError> {
        if !s.string_key {
            self.b.emit(store_imm(Size::DW, R10, s.tmp, 0));
            self.read_user_n(s.tmp, s.key_size as i32, R3)?;
            self.b.emit(load(Size::DW, R1, R10, s.tmp));
            self.b.emit(load(Size::DW, R2, R10, s.key));
            self.b.emit(alu64_reg(AluOp::Xor, R1, R2));
        } else {
            // A string key: its (pointer, length); then as many bytes as the key has
            // from its pointer (a shorter string differs by its length anyway).
            self.read_user_n(s.tmp, 16, R3)?;
            let words = (STRING_KEY_BUF / 8) as i16;
            for i in 0..words {
                self.b.emit(store_imm(Size::DW, R10, s.bytes + 8 * i, 0));
            }
            self.b.emit(load(Size::DW, R2, R10, s.key));
            self.b.emit(alu64_imm(AluOp::And, R2, MAX_STRING_KEY as i32));
            let src = self.b.vreg();
            self.b.load_stack(Size::DW, src, s.tmp);
            self.read_target(&[Arg::Stack(s.bytes), R2.into(), src.into()])?;
            self.b.emit(load(Size::DW, R1, R10, s.tmp + 8));
            self.b.emit(load(Size::DW, R2, R10, s.key));
            self.b.emit(alu64_reg(AluOp::Xor, R1, R2));
            for i in 0..words {
                self.b.emit(load(Size::DW, R2, R10, s.bytes + 8 * i));
                self.b.emit(load(Size::DW, R3, R10, s.key + 8 + 8 * i));
                self.b.emit(alu64_reg(AluOp::Xor, R2, R3));
                self.b.emit(alu64_reg(AluOp::Or, R1, R2));
            }
        }
        // R1 = (R1 | -R1) >> 63: 1 when R1 is not zero.
        self.b.emit(mov64_reg(R2, R1));
        self.b.emit(neg64(R2));
        self.b.emit(alu64_reg(AluOp::Or, R1, R2));
        self.b.emit(alu64_imm(AluOp::Rsh, R1, 63));
        Ok(())
    }
}
