//! Per-goroutine state in the programs: `goid`, and `self` variables, kept by the
//! goroutine's key (frames.rs: its g pointer, from the g register with no read of the
//! target's memory, and its process) and freed when the goroutine exits, before its g
//! can be reused. The calls in flight on a
//! goroutine, for `elapsed` and `on panic`, are in frames.rs.

use super::codegen::Gen;
use super::ir::Arg;
use super::layout::{KEY, K_INDEX};
use super::maps;
use super::LowerError;
use crate::arch::abi::Location;
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::syntax::ast::*;

impl Gen<'_> {
    /// R0 = the goroutine's id, read from its g (`goid` at the offset DWARF or the table
    /// of Go versions gives).
    pub(super) fn goid(&mut self, span: Span) -> Result<(), LowerError> {
        let layout = self
            .binary
            .g_layout
            .ok_or_else(|| LowerError::unsupported(span, "goid without the layout of runtime.g"))?;
        // The g the prologue loaded (every program whose body reads `goid` loads it).
        let g = match self.loaded.call.g() {
            Some(g) => g,
            None => self.load_g(None, span)?,
        };
        let mark = self.b.frame.mark();
        let slot = self.slot(8, span)?;
        self.b.emit(store_imm(Size::DW, R10, slot, 0));
        self.b.emit(load(Size::DW, R3, R10, g));
        self.read_user(slot, R3, layout.goid as i32)?;
        self.b.emit(load(Size::DW, R0, R10, slot));
        self.b.frame.release(mark);
        Ok(())
    }

    /// Builds the key (g, index, process) of self variable `name` in a new slot.
    pub(super) fn self_key(&mut self, name: &str, span: Span) -> Result<i16, LowerError> {
        let var = self.self_vars.get(name).ok_or_else(|| LowerError::unsupported(span, "an unknown self variable"))?;
        let index = var.index;
        let g = self.loaded.call.g();
        let g = g.ok_or_else(|| LowerError::unsupported(span, "self variables without the goroutine"))?;
        let key = self.slot(KEY, span)?;
        self.copy_key(g, key);
        self.b.emit(store_imm(Size::W, R10, key + K_INDEX, index as i32));
        Ok(key)
    }

    /// Copies the goroutine's key in slot `g` to the 16-byte slot `key`.
    fn copy_key(&mut self, g: i16, key: i16) {
        for off in [0, 8] {
            self.b.emit(load(Size::DW, R1, R10, g + off));
            self.b.emit(store_reg(Size::DW, R10, key + off, R1));
        }
    }

    /// R0 = pointer to the value of self variable `name` on this goroutine, or 0.
    pub(super) fn lookup_self(&mut self, name: &str, span: Span) -> Result<(), LowerError> {
        let key = self.self_key(name, span)?;
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(maps::SELF_VARS), Arg::Stack(key)]);
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
        self.b.call(
            BPF_FUNC_map_update_elem,
            &[Arg::Map(maps::SELF_VARS), Arg::Stack(key), Arg::Stack(val), Arg::Imm(BPF_ANY)],
        );
        self.count_refused_update(maps::SELF_VARS, span)
    }

    /// At runtime.goexit0(gp), `gp` at `location`: deletes every self variable of gp's
    /// goroutine.
    pub fn free_self_vars(&mut self, gp: &Location, span: Span) -> Result<(), LowerError> {
        let g = self.load_g(Some(gp), span)?;
        let key = self.slot(KEY, span)?;
        self.copy_key(g, key);
        for var in self.self_vars.values() {
            self.b.emit(store_imm(Size::W, R10, key + K_INDEX, var.index as i32));
            self.b.call(BPF_FUNC_map_delete_elem, &[Arg::Map(maps::SELF_VARS), Arg::Stack(key)]);
        }
        Ok(())
    }
}
