//! Package-level variables: read at their link-time address, plus, in a PIE, the load
//! bias of the process the probe fires in. The bias is learned at run time, per process:
//! a program at the ELF entry point (the first instruction every process of the binary
//! runs) stores `ip - entry` under the process's tgid in `load_bias`, and the runtime
//! stores it for processes that were already running when the probes were attached
//! (from /proc/PID/maps). Every plan for a PIE has that program, whatever its script
//! reads: the trace loop names types and frames by the bias too, and a short -c command
//! can end before its memory map is read (`Loaded::load_bias` reads it back). A probe
//! that reads a package variable looks it up once, in its prologue; a process whose bias
//! is unknown (evicted from the table, say) skips the hit and counts it
//! (`Counter::Skipped`), said at exit.

use super::codegen::Gen;
use super::ir::{Arg, R};
use super::values::Place;
use super::LowerError;
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::plan::{Counter, MapKind, MapRole, MapSpec};
use crate::syntax::ast::Span;

/// The program at the ELF entry point that learns each process's bias.
pub const LOAD_BIAS_PROGRAM: &str = "learn_load_bias";
/// The map of load biases by tgid.
pub const LOAD_BIAS: &str = "load_bias";
/// Processes whose bias is kept (LRU: the oldest are forgotten first).
pub const LOAD_BIAS_ENTRIES: u32 = 8_192;

/// The `load_bias` map.
pub fn load_bias_map() -> MapSpec {
    MapSpec {
        object_name: LOAD_BIAS.into(),
        kind: MapKind::LruHash,
        key_size: 4,
        value_size: 8,
        max_entries: LOAD_BIAS_ENTRIES,
        role: MapRole::LoadBias,
    }
}

impl Gen<'_> {
    /// The program at the ELF entry point: `load_bias[tgid] = ip - entry`.
    pub fn store_load_bias(&mut self, entry: u64, span: Span) -> Result<(), LowerError> {
        let key = self.slot(8, span)?;
        let value = self.slot(8, span)?;
        self.b.call(BPF_FUNC_get_current_pid_tgid, &[]);
        self.b.emit(alu64_imm(AluOp::Rsh, R0, 32));
        self.b.emit(store_reg(Size::W, R10, key, R0));
        self.load_ctx_reg(R0, self.arch().program_counter());
        self.b.emit2(ld_imm64(R1, entry));
        self.b.emit(alu64_reg(AluOp::Sub, R0, R1));
        self.b.emit(store_reg(Size::DW, R10, value, R0));
        self.b.call(
            BPF_FUNC_map_update_elem,
            &[Arg::Map(LOAD_BIAS), Arg::Stack(key), Arg::Stack(value), Arg::Imm(BPF_ANY)],
        );
        Ok(())
    }

    /// In the prologue of a program that reads package variables of a PIE: a stack slot
    /// holding the process's load bias (`Loaded::bias`); when it is unknown, the hit is
    /// counted and the program ends.
    pub fn load_bias(&mut self, program: &str, span: Span) -> Result<i16, LowerError> {
        let slot = self.slot(8, span)?;
        let known = self.b.new_label();
        self.b.call(BPF_FUNC_get_current_pid_tgid, &[]);
        self.b.emit(alu64_imm(AluOp::Rsh, R0, 32));
        self.b.emit(store_reg(Size::DW, R10, slot, R0));
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(LOAD_BIAS), Arg::Stack(slot)]);
        self.b.jmp_imm_to(JmpOp::Ne, R0, 0, known);
        let why = "the load bias of the process (a PIE) was not known".to_string();
        self.count(Counter::Skipped { program: program.to_string(), why }, span)?;
        self.b.ja_to(self.done);
        self.b.bind(known);
        self.b.emit(load(Size::DW, R0, R0, 0));
        self.b.emit(store_reg(Size::DW, R10, slot, R0));
        Ok(slot)
    }

    /// The place of the package variable at link-time address `addr`.
    pub fn global_place(&mut self, addr: u64, span: Span) -> Result<Place, LowerError> {
        let slot = self.slot(8, span)?;
        self.b.emit2(ld_imm64(R0, addr));
        self.add_bias(R0);
        self.b.emit(store_reg(Size::DW, R10, slot, R0));
        Ok(Place::Mem { addr: slot, offset: 0 })
    }

    /// `addr += the load bias`, where the program loaded one (a PIE's): a link-time
    /// address made the process's.
    pub(super) fn add_bias(&mut self, addr: impl Into<R>) {
        if let Some(bias) = self.loaded.bias {
            let b = self.b.vreg();
            self.b.load_stack(Size::DW, b, bias);
            self.b.op(alu64_reg(AluOp::Add, R0, R0), addr, b);
        }
    }
}
