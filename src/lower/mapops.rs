//! User maps in the programs: building keys, storing plain values, and updating per-CPU
//! aggregations (inserting a zeroed value the first time a key is seen on a CPU). An
//! update the kernel refuses is counted, by the errno it gave.

use super::codegen::Gen;
use super::ir::Arg;
use super::maps;
use super::maps::UserMap;
use super::LowerError;
use crate::bpf::builder::Label;
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::plan::Agg;
use crate::syntax::ast::*;

impl Gen<'_> {
    pub(super) fn user_map(&self, name: &str, span: Span) -> Result<UserMap, LowerError> {
        self.maps.user.get(name).cloned().ok_or_else(|| LowerError::unsupported(span, "a map that no probe writes"))
    }

    /// Builds a map key in a fresh, zeroed stack slot; returns the slot.
    pub(super) fn key(&mut self, um: &UserMap, keys: &[Expr], span: Span) -> Result<i16, LowerError> {
        let slot = self.slot(um.key_size, span)?;
        for i in 0..(um.key_size / 8) {
            self.b.emit(store_imm(Size::DW, R10, slot + 8 * i as i16, 0));
        }
        for (k, field) in keys.iter().zip(&um.key_fields) {
            self.value_to(k, R10, slot + field.offset as i16)?;
        }
        Ok(slot)
    }

    pub(super) fn store_plain(
        &mut self,
        um: &UserMap,
        keys: &[Expr],
        value: &Expr,
        span: Span,
    ) -> Result<(), LowerError> {
        let key = self.key(um, keys, span)?;
        let size = self.facts.ty(value.id).record_size();
        let val = self.slot(size, span)?;
        for i in 0..(size / 8) as i16 {
            self.b.emit(store_imm(Size::DW, R10, val + 8 * i, 0));
        }
        self.value_to(value, R10, val)?;
        if let Some(s) = &um.slots {
            return self.slotted_store(um, s, key, val, span);
        }
        self.b.call(
            BPF_FUNC_map_update_elem,
            &[Arg::Map(&um.object_name), Arg::Stack(key), Arg::Stack(val), Arg::Imm(BPF_ANY)],
        );
        self.count_refused_update(&um.object_name, span)
    }

    /// Looks the key up in a per-CPU aggregation map, inserting a zeroed value the first
    /// time, and updates it with the value of `arg`.
    pub(super) fn aggregate(
        &mut self,
        um: &UserMap,
        keys: &[Expr],
        agg: Agg,
        arg: Option<&Expr>,
        span: Span,
    ) -> Result<(), LowerError> {
        if um.by_function || um.single {
            return self.aggregate_in_array(um, keys.first(), agg, arg, span);
        }
        let key = self.key(um, keys, span)?;
        let val = self.slot(8, span)?;
        if let Some(a) = arg {
            self.expr(a)?;
            self.b.emit(store_reg(Size::DW, R10, val, R0));
        }
        let have = self.b.new_label();
        let skip = self.b.new_label();
        let refs = self.b.map_refs(&um.object_name);
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(&um.object_name), Arg::Stack(key)]);
        self.b.jmp_imm_to(JmpOp::Ne, R0, 0, have);
        // First update of this key on this CPU: insert zeros (from the `zeros` map, which
        // is never written), then look it up again.
        let zkey = self.slot(8, span)?;
        self.b.emit(store_imm(Size::DW, R10, zkey, 0));
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(maps::ZEROS), Arg::Stack(zkey)]);
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, skip);
        let args = [Arg::Map(&um.object_name), Arg::Stack(key), R0.into(), Arg::Imm(BPF_NOEXIST)];
        self.b.call(BPF_FUNC_map_update_elem, &args);
        self.b.emit(store_reg(Size::DW, R10, zkey, R0));
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(&um.object_name), Arg::Stack(key)]);
        self.b.jmp_imm_to(JmpOp::Ne, R0, 0, have);
        // Not there after the insertion: refused, counted by the errno the insertion
        // gave (another CPU inserting the same key first, EEXIST, is not a refusal: the
        // lookup finds it).
        self.b.emit(load(Size::DW, R0, R10, zkey));
        self.count_refused(&um.object_name, span)?;
        self.b.ja_to(skip);
        self.b.bind(have);
        self.update_found(agg, arg, val, skip);
        self.atomic_only_since(um, agg, refs);
        if let (Agg::Hist, Some(ex)) = (agg, &um.exemplars) {
            self.exemplar(ex, key, val, span)?;
        }
        Ok(())
    }

    /// An aggregation into a per-CPU array: indexed by the function `key` evaluates to
    /// (`UserMap::by_function`), or its one element when there is no key
    /// (`UserMap::single`). Every element exists, so there is nothing to insert.
    fn aggregate_in_array(
        &mut self,
        um: &UserMap,
        key: Option<&Expr>,
        agg: Agg,
        arg: Option<&Expr>,
        span: Span,
    ) -> Result<(), LowerError> {
        let slot = self.slot(8, span)?;
        let val = self.slot(8, span)?;
        if let Some(a) = arg {
            self.expr(a)?;
            self.b.emit(store_reg(Size::DW, R10, val, R0));
        }
        match key {
            Some(key) => {
                self.expr(key)?;
                self.b.emit(store_reg(Size::W, R10, slot, R0));
            }
            None => self.b.emit(store_imm(Size::W, R10, slot, 0)),
        }
        let skip = self.b.new_label();
        let refs = self.b.map_refs(&um.object_name);
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(&um.object_name), Arg::Stack(slot)]);
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, skip);
        self.update_found(agg, arg, val, skip);
        self.atomic_only_since(um, agg, refs);
        if let (Agg::Hist, Some(ex)) = (agg, &um.exemplars) {
            self.exemplar(ex, slot, val, span)?;
        }
        Ok(())
    }

    /// The references of `um` made since it had `refs` (its lookup, insertion and
    /// update) are safe under preemption when `agg` changes the value with atomic
    /// instructions only (agg.rs `atomic`), leaves no exemplar, and no element of the
    /// map is deleted while the probes run (`UserMap::freed`; guard.rs).
    fn atomic_only_since(&mut self, um: &UserMap, agg: Agg, refs: usize) {
        if super::agg::atomic(agg) && um.exemplars.is_none() && !um.freed {
            self.b.preemption_safe_since(&um.object_name, refs);
        }
    }

    /// With R0 at the map's value: the aggregation updated by the value in stack slot
    /// `val` (when it has an argument), then `skip`, where a missing value lands too.
    fn update_found(&mut self, agg: Agg, arg: Option<&Expr>, val: i16, skip: Label) {
        let value = self.b.vreg();
        self.b.op(mov64_reg(R0, R0), value, R0);
        if arg.is_some() {
            self.b.emit(load(Size::DW, R1, R10, val));
        }
        let signed = arg.is_none_or(|a| self.facts.ty(a.id).is_signed());
        super::agg::update(&mut self.b, value, agg, signed);
        self.b.bind(skip);
        self.b.emit(mov64_imm(R0, 0));
    }
}
