//! Per-goroutine state in the programs: the activation key (goid, g.stack.hi − SP) that
//! pairs a return with its entry, entry timing for `elapsed` (what else the entry keeps
//! for its return is in carry.rs), and `self` variables (kept by goid, freed when the
//! goroutine exits).

use super::codegen::Gen;
use super::maps;
use super::LowerError;
use crate::arch::abi::Location;
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::syntax::ast::*;
use crate::target::GLayout;

impl Gen<'_> {
    /// Computes the key of this call's activation into a 16-byte slot: the goroutine id
    /// and g.stack.hi - SP, both unchanged when the runtime moves the stack. Without a
    /// layout of runtime.g, the thread id and SP (exact unless the goroutine migrates or
    /// its stack moves between entry and return).
    pub fn activation_key(&mut self, g: Option<GLayout>, span: Span) -> Result<i16, LowerError> {
        let slot = self.slot(16, span)?;
        self.b.comment("activation key: (goid, g.stack.hi - SP)");
        match g {
            Some(g) => {
                self.load_reg(R7, self.arch.g_reg());
                self.read_user(slot, R7, g.goid as i32);
                self.read_user(slot + 8, R7, g.stack_hi as i32);
                self.load_reg(R1, self.arch.stack_pointer());
                self.b.emit(load(Size::DW, R2, R10, slot + 8));
                self.b.emit(alu64_reg(BPF_SUB, R2, R1));
                self.b.emit(store_reg(Size::DW, R10, slot + 8, R2));
            }
            None => {
                self.b.emit(call(BPF_FUNC_get_current_pid_tgid));
                self.b.emit(store_reg(Size::DW, R10, slot, R0));
                self.load_reg(R1, self.arch.stack_pointer());
                self.b.emit(store_reg(Size::DW, R10, slot + 8, R1));
            }
        }
        self.activation = Some(slot);
        Ok(slot)
    }

    /// Entry timing: entry_times[activation] = now (a record of `size` bytes, the rest
    /// zero: see carry.rs).
    pub fn store_entry_time(&mut self, key: i16, size: u32, span: Span) -> Result<(), LowerError> {
        // An activation seen before (the same goroutine and depth: a loop calling F) is
        // updated in place; only a new one costs an insertion.
        let insert = self.b.new_label();
        let done = self.b.new_label();
        self.b.ld_map(R1, maps::ENTRY_TIMES);
        self.stack_ptr(R2, key);
        self.b.emit(call(BPF_FUNC_map_lookup_elem));
        self.b.jmp_imm_to(BPF_JEQ, R0, 0, insert);
        self.b.emit(mov64_reg(R7, R0));
        self.b.emit(call(BPF_FUNC_ktime_get_ns));
        self.b.emit(store_reg(Size::DW, R7, 0, R0));
        self.b.ja_to(done);
        self.b.bind(insert);
        let val = self.slot(size, span)?;
        for i in 1..(size / 8) as i16 {
            self.b.emit(store_imm(Size::DW, R10, val + 8 * i, 0));
        }
        self.b.emit(call(BPF_FUNC_ktime_get_ns));
        self.b.emit(store_reg(Size::DW, R10, val, R0));
        self.b.ld_map(R1, maps::ENTRY_TIMES);
        self.stack_ptr(R2, key);
        self.stack_ptr(R3, val);
        self.b.emit(mov64_imm(R4, BPF_ANY));
        self.b.emit(call(BPF_FUNC_map_update_elem));
        self.b.bind(done);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// Builds the key (goid, index) of self variable `name` in a new slot.
    pub(super) fn self_key(&mut self, name: &str, span: Span) -> Result<i16, LowerError> {
        let var = self.self_vars.get(name).ok_or_else(|| LowerError::unsupported(span, "an unknown self variable"))?;
        let index = var.index;
        let act =
            self.activation.ok_or_else(|| LowerError::unsupported(span, "self variables without a goroutine id"))?;
        let key = self.slot(16, span)?;
        self.b.emit(load(Size::DW, R1, R10, act));
        self.b.emit(store_reg(Size::DW, R10, key, R1));
        self.b.emit(store_imm(Size::DW, R10, key + 8, index as i32));
        Ok(key)
    }

    /// R0 = pointer to the value of self variable `name` on this goroutine, or 0.
    pub(super) fn lookup_self(&mut self, name: &str, span: Span) -> Result<(), LowerError> {
        let key = self.self_key(name, span)?;
        self.b.ld_map(R1, maps::SELF_VARS);
        self.stack_ptr(R2, key);
        self.b.emit(call(BPF_FUNC_map_lookup_elem));
        Ok(())
    }

    pub(super) fn store_self(&mut self, name: &str, value: &Expr, span: Span) -> Result<(), LowerError> {
        let key = self.self_key(name, span)?;
        // The map's values are as large as the largest self variable: the update copies
        // that many bytes, so the slot must hold them all.
        let size = self.self_vars.values().map(|v| v.ty.record_size()).max().unwrap_or(8);
        let val = self.slot(size, span)?;
        for i in 0..(size / 8) as i16 {
            self.b.emit(store_imm(Size::DW, R10, val + 8 * i, 0));
        }
        self.value_to(value, R10, val)?;
        self.b.ld_map(R1, maps::SELF_VARS);
        self.stack_ptr(R2, key);
        self.stack_ptr(R3, val);
        self.b.emit(mov64_imm(R4, BPF_ANY));
        self.b.emit(call(BPF_FUNC_map_update_elem));
        self.count_refused_update(maps::SELF_VARS, span)
    }

    /// At runtime.goexit0(gp), `gp` at `location`: deletes every self variable of gp's
    /// goroutine.
    pub fn free_self_vars(&mut self, g: GLayout, gp: &Location, span: Span) -> Result<(), LowerError> {
        let key = self.slot(16, span)?;
        let place = self.location_place("gp", gp, span)?;
        self.read_scalar(&place, 8, false)?;
        self.b.emit(mov64_reg(R7, R0));
        self.read_user(key, R7, g.goid as i32);
        for var in self.self_vars.values() {
            self.b.emit(store_imm(Size::DW, R10, key + 8, var.index as i32));
            self.b.ld_map(R1, maps::SELF_VARS);
            self.stack_ptr(R2, key);
            self.b.emit(call(BPF_FUNC_map_delete_elem));
        }
        Ok(())
    }
}
