//! Statements and expressions of one probe body to eBPF instructions.
//!
//! Conventions: R6 holds the program's context (`struct pt_regs *`) for the whole
//! program; an expression leaves its value in R0; values that must survive a helper call
//! live in stack slots (`Frame`); R7 points at an aggregation's map value while it is
//! updated; R8 points at the event record being built.

use super::frame::Frame;
use super::maps::{self, Maps, UserMap};
use super::LowerError;
use crate::arch::abi::Location;
use crate::arch::{self, Reg as MReg};
use crate::bpf::builder::{Builder, Label};
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::check::builtins::Builtin;
use crate::check::maps::MapValueTy;
use crate::check::ty::Ty;
use crate::check::{Facts, Name};
use crate::diag::Sources;
use crate::plan::{Agg, EventKind, EventSpec, Field};
use crate::syntax::ast::*;
use crate::target::GLayout;
use std::collections::HashMap;

pub struct Gen<'a> {
    pub b: Builder,
    pub frame: Frame,
    facts: &'a Facts,
    maps: &'a Maps,
    sources: &'a Sources,
    /// Every event format of the script; a record's first u64 indexes it.
    pub events: &'a mut Vec<EventSpec>,
    locals: HashMap<String, i16>,
    /// The goroutine activation key (goid, g.stack.hi - SP), when computed.
    pub activation: Option<i16>,
    /// `elapsed`, when this is a return probe that uses it.
    pub elapsed: Option<i16>,
    /// Where the program ends (r0 = 0; exit).
    pub done: Label,
}

/// The width in bytes of a value of type `ty` as the target holds it.
fn go_size(ty: &Ty) -> u8 {
    match ty {
        Ty::Int { size, .. } => *size,
        Ty::Bool => 1,
        _ => 8,
    }
}

impl<'a> Gen<'a> {
    pub fn new(facts: &'a Facts, maps: &'a Maps, sources: &'a Sources, events: &'a mut Vec<EventSpec>) -> Gen<'a> {
        let mut b = Builder::new();
        let done = b.new_label();
        Gen { b, frame: Frame::default(), facts, maps, sources, events, locals: HashMap::new(), activation: None, elapsed: None, done }
    }

    fn slot(&mut self, size: u32, span: Span) -> Result<i16, LowerError> {
        self.frame.alloc(size).map_err(|e| LowerError::Stack { span, needed: e.needed })
    }

    /// r6 = ctx. Every program starts here.
    pub fn prologue(&mut self) {
        self.b.emit(mov64_reg(R6, R1));
    }

    /// r0 = 0; exit. Every program ends here.
    pub fn epilogue(&mut self) {
        self.b.bind(self.done);
        self.b.emit(mov64_imm(R0, 0));
        self.b.emit(exit());
    }

    /// `dst = *(u64 *)(ctx + offset of reg)`.
    fn load_reg(&mut self, dst: u8, reg: MReg) {
        self.b.emit(load(Size::DW, dst, R6, reg.pt_regs_offset()));
    }

    /// Copies 8 bytes of target memory at `addr_reg + off` into stack slot `slot`.
    fn read_user(&mut self, slot: i16, addr_reg: u8, off: i32) {
        if addr_reg != R3 {
            self.b.emit(mov64_reg(R3, addr_reg));
        }
        if off != 0 {
            self.b.emit(alu64_imm(BPF_ADD, R3, off));
        }
        self.b.emit(mov64_reg(R1, R10));
        self.b.emit(alu64_imm(BPF_ADD, R1, slot as i32));
        self.b.emit(mov64_imm(R2, 8));
        self.b.emit(call(BPF_FUNC_probe_read_user));
    }

    /// Computes the key of this call's activation into a 16-byte slot: the goroutine id
    /// and g.stack.hi - SP, both unchanged when the runtime moves the stack. Without a
    /// layout of runtime.g, the thread id and SP (exact unless the goroutine migrates or
    /// its stack moves between entry and return).
    pub fn activation_key(&mut self, g: Option<GLayout>, span: Span) -> Result<i16, LowerError> {
        let slot = self.slot(16, span)?;
        self.b.comment("activation key: (goid, g.stack.hi - SP)");
        match g {
            Some(g) => {
                self.load_reg(R7, arch::G_REG);
                self.read_user(slot, R7, g.goid as i32);
                self.read_user(slot + 8, R7, g.stack_hi as i32);
                self.load_reg(R1, arch::SP);
                self.b.emit(load(Size::DW, R2, R10, slot + 8));
                self.b.emit(alu64_reg(BPF_SUB, R2, R1));
                self.b.emit(store_reg(Size::DW, R10, slot + 8, R2));
            }
            None => {
                self.b.emit(call(BPF_FUNC_get_current_pid_tgid));
                self.b.emit(store_reg(Size::DW, R10, slot, R0));
                self.load_reg(R1, arch::SP);
                self.b.emit(store_reg(Size::DW, R10, slot + 8, R1));
            }
        }
        self.activation = Some(slot);
        Ok(slot)
    }

    /// Entry timing: entry_times[activation] = now.
    pub fn store_entry_time(&mut self, key: i16, span: Span) -> Result<(), LowerError> {
        let val = self.slot(8, span)?;
        self.b.emit(call(BPF_FUNC_ktime_get_ns));
        self.b.emit(store_reg(Size::DW, R10, val, R0));
        self.b.ld_map(R1, maps::ENTRY_TIMES);
        self.stack_ptr(R2, key);
        self.stack_ptr(R3, val);
        self.b.emit(mov64_imm(R4, BPF_ANY));
        self.b.emit(call(BPF_FUNC_map_update_elem));
        Ok(())
    }

    /// Return timing: elapsed = now - entry_times[activation]; a return whose entry was
    /// not seen (the call began before the probes were attached) skips the probe.
    pub fn load_elapsed(&mut self, key: i16, span: Span) -> Result<(), LowerError> {
        let slot = self.slot(8, span)?;
        self.b.comment("elapsed = now - entry time of this activation");
        self.b.ld_map(R1, maps::ENTRY_TIMES);
        self.stack_ptr(R2, key);
        self.b.emit(call(BPF_FUNC_map_lookup_elem));
        self.b.jmp_imm_to(BPF_JEQ, R0, 0, self.done);
        self.b.emit(load(Size::DW, R7, R0, 0));
        self.b.emit(call(BPF_FUNC_ktime_get_ns));
        self.b.emit(alu64_reg(BPF_SUB, R0, R7));
        self.b.emit(store_reg(Size::DW, R10, slot, R0));
        self.elapsed = Some(slot);
        Ok(())
    }

    fn stack_ptr(&mut self, dst: u8, slot: i16) {
        self.b.emit(mov64_reg(dst, R10));
        self.b.emit(alu64_imm(BPF_ADD, dst, slot as i32));
    }

    pub fn block(&mut self, block: &Block) -> Result<(), LowerError> {
        for s in &block.stmts {
            self.stmt(s)?;
        }
        Ok(())
    }

    fn stmt(&mut self, s: &Stmt) -> Result<(), LowerError> {
        self.b.comment(format!("{}", self.sources.line_text(s.span)));
        let mark = self.frame.mark();
        match &s.kind {
            StmtKind::Let { name, value } => {
                self.scalar_only(value)?;
                self.expr(value)?;
                let slot = match self.locals.get(&name.name) {
                    Some(s) => *s,
                    None => {
                        // Locals live for the whole program: allocate below any temporaries.
                        let slot = self.slot(8, name.span)?;
                        self.locals.insert(name.name.clone(), slot);
                        self.b.emit(store_imm(Size::DW, R10, slot, 0));
                        slot
                    }
                };
                self.b.emit(store_reg(Size::DW, R10, slot, R0));
                return Ok(());
            }
            StmtKind::AssignSelf { name, .. } => return Err(LowerError::unsupported(name.span, "self variables")),
            StmtKind::AssignMap { map, value } => {
                let um = self.user_map(&map.name.name, map.span)?;
                match (&value.kind, &um.value) {
                    (ExprKind::Call { args, .. }, MapValueTy::Agg { agg, .. }) => {
                        let agg = *agg;
                        self.aggregate(&um, &map.keys, agg, args.first(), s.span)?
                    }
                    _ => self.store_plain(&um, &map.keys, value, s.span)?,
                }
            }
            StmtKind::Expr(e) => self.call_stmt(e)?,
            StmtKind::If { cond, then, otherwise } => {
                let other = self.b.new_label();
                let end = self.b.new_label();
                self.expr(cond)?;
                self.b.jmp_imm_to(BPF_JEQ, R0, 0, other);
                self.block(then)?;
                self.b.ja_to(end);
                self.b.bind(other);
                match otherwise {
                    Some(Else::Block(b)) => self.block(b)?,
                    Some(Else::If(s)) => self.stmt(s)?,
                    None => {}
                }
                // A label needs an instruction after it; the next statement or the epilogue follows.
                self.b.bind(end);
                self.b.emit(mov64_imm(R0, 0));
            }
        }
        self.frame.release(mark);
        Ok(())
    }

    fn user_map(&self, name: &str, span: Span) -> Result<UserMap, LowerError> {
        self.maps.user.get(name).cloned().ok_or_else(|| LowerError::unsupported(span, "a map that no probe writes"))
    }

    fn scalar_only(&self, e: &Expr) -> Result<(), LowerError> {
        match self.facts.ty(e.id) {
            Ty::Str { .. } => Err(LowerError::unsupported(e.span, "string values")),
            _ => Ok(()),
        }
    }

    /// Builds a map key in a fresh, zeroed stack slot; returns the slot.
    fn key(&mut self, um: &UserMap, keys: &[Expr], span: Span) -> Result<i16, LowerError> {
        let slot = self.slot(um.key_size, span)?;
        for i in 0..(um.key_size / 8) {
            self.b.emit(store_imm(Size::DW, R10, slot + 8 * i as i16, 0));
        }
        for (k, field) in keys.iter().zip(&um.key_fields) {
            self.scalar_only(k)?;
            self.expr(k)?;
            self.b.emit(store_reg(Size::DW, R10, slot + field.offset as i16, R0));
        }
        Ok(slot)
    }

    fn store_plain(&mut self, um: &UserMap, keys: &[Expr], value: &Expr, span: Span) -> Result<(), LowerError> {
        self.scalar_only(value)?;
        let key = self.key(um, keys, span)?;
        let val = self.slot(8, span)?;
        self.expr(value)?;
        self.b.emit(store_reg(Size::DW, R10, val, R0));
        self.b.ld_map(R1, &um.object_name);
        self.stack_ptr(R2, key);
        self.stack_ptr(R3, val);
        self.b.emit(mov64_imm(R4, BPF_ANY));
        self.b.emit(call(BPF_FUNC_map_update_elem));
        Ok(())
    }

    /// Looks the key up in a per-CPU aggregation map, inserting a zeroed value the first
    /// time, and updates it with the value of `arg`.
    fn aggregate(&mut self, um: &UserMap, keys: &[Expr], agg: Agg, arg: Option<&Expr>, span: Span) -> Result<(), LowerError> {
        let key = self.key(um, keys, span)?;
        let val = self.slot(8, span)?;
        if let Some(a) = arg {
            self.expr(a)?;
            self.b.emit(store_reg(Size::DW, R10, val, R0));
        }
        let have = self.b.new_label();
        let skip = self.b.new_label();
        self.b.ld_map(R1, &um.object_name);
        self.stack_ptr(R2, key);
        self.b.emit(call(BPF_FUNC_map_lookup_elem));
        self.b.jmp_imm_to(BPF_JNE, R0, 0, have);
        // First update of this key on this CPU: insert zeros (from the `zeros` map, which
        // is never written), then look it up again.
        let zkey = self.slot(8, span)?;
        self.b.emit(store_imm(Size::DW, R10, zkey, 0));
        self.b.ld_map(R1, maps::ZEROS);
        self.stack_ptr(R2, zkey);
        self.b.emit(call(BPF_FUNC_map_lookup_elem));
        self.b.jmp_imm_to(BPF_JEQ, R0, 0, skip);
        self.b.emit(mov64_reg(R3, R0));
        self.b.ld_map(R1, &um.object_name);
        self.stack_ptr(R2, key);
        self.b.emit(mov64_imm(R4, BPF_NOEXIST));
        self.b.emit(call(BPF_FUNC_map_update_elem));
        self.b.ld_map(R1, &um.object_name);
        self.stack_ptr(R2, key);
        self.b.emit(call(BPF_FUNC_map_lookup_elem));
        self.b.jmp_imm_to(BPF_JEQ, R0, 0, skip);
        self.b.bind(have);
        self.b.emit(mov64_reg(R7, R0));
        self.b.emit(load(Size::DW, R1, R10, val));
        super::agg::update(&mut self.b, agg);
        self.b.bind(skip);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    fn call_stmt(&mut self, e: &Expr) -> Result<(), LowerError> {
        let ExprKind::Call { func, args } = &e.kind else {
            return self.expr(e);
        };
        if crate::check::typeck::agg_of(&func.name).is_some() {
            // A bare aggregation: the implicit map `@`, keyed by the probed function.
            let um = self.user_map("", e.span)?;
            let MapValueTy::Agg { agg, .. } = um.value else {
                return Err(LowerError::unsupported(e.span, "a bare aggregation into a plain map"));
            };
            let cookie = Expr { id: ExprId(u32::MAX), kind: ExprKind::Name("func".into()), span: e.span };
            return self.aggregate(&um, std::slice::from_ref(&cookie), agg, args.first(), e.span);
        }
        match func.name.as_str() {
            "print" => {
                if let [Expr { kind: ExprKind::Map(m), .. }] = args.as_slice() {
                    if m.keys.is_empty() {
                        let um = self.user_map(&m.name.name, m.span)?;
                        return self.event(EventKind::PrintMap { map: um.object_name }, &[], e.span);
                    }
                }
                self.event(EventKind::Print, args, e.span)
            }
            "printf" => {
                let ExprKind::Str(format) = &args[0].kind else {
                    return Err(LowerError::unsupported(e.span, "a printf format that is not a literal"));
                };
                self.event(EventKind::Printf { format: format.clone() }, &args[1..], e.span)
            }
            "exit" => self.event(EventKind::Exit, &[], e.span),
            "clear" => {
                let [Expr { kind: ExprKind::Map(m), .. }] = args.as_slice() else {
                    return Err(LowerError::unsupported(e.span, "clear of something else than a map"));
                };
                let um = self.user_map(&m.name.name, m.span)?;
                self.event(EventKind::ClearMap { map: um.object_name }, &[], e.span)
            }
            "delete" => {
                let [Expr { kind: ExprKind::Map(m), .. }] = args.as_slice() else {
                    return Err(LowerError::unsupported(e.span, "delete of something else than a map element"));
                };
                let um = self.user_map(&m.name.name, m.span)?;
                let key = self.key(&um, &m.keys, e.span)?;
                self.b.ld_map(R1, &um.object_name);
                self.stack_ptr(R2, key);
                self.b.emit(call(BPF_FUNC_map_delete_elem));
                Ok(())
            }
            _ => Err(LowerError::unsupported(func.span, "this call")),
        }
    }

    /// Sends an event record [id, values...] through the ring buffer, built in the
    /// per-CPU scratch buffer.
    fn event(&mut self, kind: EventKind, args: &[Expr], span: Span) -> Result<(), LowerError> {
        let mut fields = Vec::new();
        let mut offset = 8;
        for a in args {
            self.scalar_only(a)?;
            let t = self.facts.ty(a.id).clone();
            fields.push(Field { offset, ty: t.value_type() });
            offset += t.record_size();
        }
        let id = self.events.len();
        self.events.push(EventSpec { kind, fields: fields.clone(), size: offset });
        let skip = self.b.new_label();
        let zkey = self.slot(8, span)?;
        self.b.emit(store_imm(Size::DW, R10, zkey, 0));
        self.b.ld_map(R1, maps::SCRATCH);
        self.stack_ptr(R2, zkey);
        self.b.emit(call(BPF_FUNC_map_lookup_elem));
        self.b.jmp_imm_to(BPF_JEQ, R0, 0, skip);
        self.b.emit(mov64_reg(R8, R0));
        self.b.emit(store_imm(Size::DW, R8, 0, id as i32));
        for (a, f) in args.iter().zip(&fields) {
            self.expr(a)?;
            self.b.emit(store_reg(Size::DW, R8, f.offset as i16, R0));
        }
        self.b.ld_map(R1, maps::EVENTS);
        self.b.emit(mov64_reg(R2, R8));
        self.b.emit(mov64_imm(R3, offset as i32));
        self.b.emit(mov64_imm(R4, 0));
        self.b.emit(call(BPF_FUNC_ringbuf_output));
        self.b.bind(skip);
        self.b.emit(mov64_imm(R0, 0));
        Ok(())
    }

    /// Evaluates a scalar expression into R0.
    pub fn expr(&mut self, e: &Expr) -> Result<(), LowerError> {
        match &e.kind {
            ExprKind::Int(v) | ExprKind::Duration(v) => self.constant(*v),
            ExprKind::Bool(v) => self.b.emit(mov64_imm(R0, *v as i32)),
            ExprKind::Str(_) => return Err(LowerError::unsupported(e.span, "string values")),
            ExprKind::Name(n) => self.name(e, n)?,
            ExprKind::Field { .. } => match self.facts.names.get(&e.id).cloned() {
                Some(Name::GoValue { location, .. }) => self.go_value(&location, self.facts.ty(e.id).clone(), e.span)?,
                _ => return Err(LowerError::unsupported(e.span, "field access")),
            },
            ExprKind::Map(m) => {
                let um = self.user_map(&m.name.name, m.span)?;
                let mark = self.frame.mark();
                let key = self.key(&um, &m.keys, e.span)?;
                let end = self.b.new_label();
                self.b.ld_map(R1, &um.object_name);
                self.stack_ptr(R2, key);
                self.b.emit(call(BPF_FUNC_map_lookup_elem));
                self.b.jmp_imm_to(BPF_JEQ, R0, 0, end);
                self.b.emit(load(Size::DW, R0, R0, 0));
                self.b.bind(end);
                self.b.emit(alu64_imm(BPF_ADD, R0, 0));
                self.frame.release(mark);
            }
            ExprKind::Unary { op, operand } => {
                self.expr(operand)?;
                match op {
                    UnOp::Neg => self.b.emit(neg64(R0)),
                    UnOp::Not => self.b.emit(alu64_imm(BPF_XOR, R0, 1)),
                    UnOp::Deref => return Err(LowerError::unsupported(e.span, "pointer dereference")),
                }
            }
            ExprKind::Binary { op, lhs, rhs } => self.binary(*op, lhs, rhs, e.span)?,
            ExprKind::SelfVar(_) => return Err(LowerError::unsupported(e.span, "self variables")),
            ExprKind::Index { .. } => return Err(LowerError::unsupported(e.span, "indexing")),
            ExprKind::Call { func, .. } => return Err(LowerError::unsupported(func.span, "this call as a value")),
        }
        Ok(())
    }

    fn constant(&mut self, v: u64) {
        if let Ok(small) = i32::try_from(v as i64) {
            self.b.emit(mov64_imm(R0, small));
        } else {
            self.b.emit2(ld_imm64(R0, v));
        }
    }

    fn name(&mut self, e: &Expr, n: &str) -> Result<(), LowerError> {
        if e.id == ExprId(u32::MAX) && n == "func" {
            // The implicit key of a bare aggregation.
            return self.builtin(Builtin::Func, e.span);
        }
        match self.facts.names.get(&e.id).cloned() {
            Some(Name::Local(l)) => {
                let slot = *self.locals.get(&l).ok_or_else(|| LowerError::unsupported(e.span, "a local read before it is set"))?;
                self.b.emit(load(Size::DW, R0, R10, slot));
            }
            Some(Name::Builtin(b)) => self.builtin(b, e.span)?,
            Some(Name::GoValue { location, .. }) => self.go_value(&location, self.facts.ty(e.id).clone(), e.span)?,
            None => return Err(LowerError::unsupported(e.span, "an unresolved name")),
        }
        Ok(())
    }

    fn builtin(&mut self, b: Builtin, span: Span) -> Result<(), LowerError> {
        match b {
            Builtin::Elapsed => {
                let slot = self.elapsed.ok_or_else(|| LowerError::unsupported(span, "elapsed outside a return probe"))?;
                self.b.emit(load(Size::DW, R0, R10, slot));
            }
            Builtin::Nsecs => self.b.emit(call(BPF_FUNC_ktime_get_ns)),
            Builtin::Goid => {
                let slot = self.activation.ok_or_else(|| LowerError::unsupported(span, "goid without the layout of runtime.g"))?;
                self.b.emit(load(Size::DW, R0, R10, slot));
            }
            Builtin::Pid => {
                self.b.emit(call(BPF_FUNC_get_current_pid_tgid));
                self.b.emit(alu64_imm(BPF_RSH, R0, 32));
            }
            Builtin::Tid => {
                self.b.emit(call(BPF_FUNC_get_current_pid_tgid));
                self.b.emit(alu64_imm(BPF_LSH, R0, 32));
                self.b.emit(alu64_imm(BPF_RSH, R0, 32));
            }
            Builtin::Cpu => self.b.emit(call(BPF_FUNC_get_smp_processor_id)),
            Builtin::Func => {
                self.b.emit(mov64_reg(R1, R6));
                self.b.emit(call(BPF_FUNC_get_attach_cookie));
            }
            Builtin::Comm => return Err(LowerError::unsupported(span, "comm")),
        }
        Ok(())
    }

    /// Reads a parameter or result where the ABI put it into R0, narrowed to its width.
    fn go_value(&mut self, location: &Location, ty: Ty, span: Span) -> Result<(), LowerError> {
        let size = go_size(&ty);
        match location {
            Location::Regs(pieces) if pieces.len() == 1 && pieces[0].size <= 8 => {
                self.load_reg(R0, pieces[0].reg);
            }
            Location::Stack { offset } => {
                let mark = self.frame.mark();
                let slot = self.slot(8, span)?;
                self.load_reg(R3, arch::SP);
                self.read_user(slot, R3, *offset as i32);
                self.b.emit(load(Size::DW, R0, R10, slot));
                self.frame.release(mark);
            }
            Location::Empty => {
                self.b.emit(mov64_imm(R0, 0));
                return Ok(());
            }
            _ => return Err(LowerError::unsupported(span, "a value spread over several registers")),
        }
        if size < 8 {
            let shift = 64 - 8 * size as i32;
            self.b.emit(alu64_imm(BPF_LSH, R0, shift));
            let op = if ty.is_signed() { BPF_ARSH } else { BPF_RSH };
            self.b.emit(alu64_imm(op, R0, shift));
        }
        Ok(())
    }

    fn binary(&mut self, op: BinOp, lhs: &Expr, rhs: &Expr, span: Span) -> Result<(), LowerError> {
        if matches!(op, BinOp::And | BinOp::Or) {
            let end = self.b.new_label();
            self.expr(lhs)?;
            let jump = if op == BinOp::And { BPF_JEQ } else { BPF_JNE };
            self.b.jmp_imm_to(jump, R0, 0, end);
            self.expr(rhs)?;
            self.b.bind(end);
            self.b.emit(alu64_imm(BPF_ADD, R0, 0));
            return Ok(());
        }
        let signed = self.signed(lhs, rhs);
        let mark = self.frame.mark();
        let tmp = self.slot(8, span)?;
        self.expr(lhs)?;
        self.b.emit(store_reg(Size::DW, R10, tmp, R0));
        self.expr(rhs)?;
        self.b.emit(mov64_reg(R2, R0));
        self.b.emit(load(Size::DW, R1, R10, tmp));
        self.frame.release(mark);
        use BinOp::*;
        let alu = |code: u8| Some(code);
        let alu_op = match op {
            Add => alu(BPF_ADD),
            Sub => alu(BPF_SUB),
            Mul => alu(BPF_MUL),
            Div => alu(BPF_DIV),
            Rem => alu(BPF_MOD),
            BitAnd => alu(BPF_AND),
            BitOr => alu(BPF_OR),
            BitXor => alu(BPF_XOR),
            Shl => alu(BPF_LSH),
            Shr => alu(if signed { BPF_ARSH } else { BPF_RSH }),
            _ => None,
        };
        if let Some(code) = alu_op {
            let mut insn = alu64_reg(code, R1, R2);
            if signed && matches!(op, Div | Rem) {
                // BPF ISA v4 signed division (off = 1); dividing by zero gives 0.
                insn.off = 1;
            }
            self.b.emit(insn);
            self.b.emit(mov64_reg(R0, R1));
            return Ok(());
        }
        let jump = match (op, signed) {
            (Eq, _) => BPF_JEQ,
            (Ne, _) => BPF_JNE,
            (Lt, true) => BPF_JSLT,
            (Lt, false) => BPF_JLT,
            (Le, true) => BPF_JSLE,
            (Le, false) => BPF_JLE,
            (Gt, true) => BPF_JSGT,
            (Gt, false) => BPF_JGT,
            (Ge, true) => BPF_JSGE,
            (Ge, false) => BPF_JGE,
            _ => return Err(LowerError::unsupported(span, "this operator")),
        };
        let yes = self.b.new_label();
        self.b.emit(mov64_imm(R0, 1));
        self.b.jmp_reg_to(jump, R1, R2, yes);
        self.b.emit(mov64_imm(R0, 0));
        self.b.bind(yes);
        self.b.emit(alu64_imm(BPF_ADD, R0, 0));
        Ok(())
    }

    /// Signed arithmetic and comparison unless an operand is an unsigned Go value; an
    /// integer literal takes the signedness of the other side.
    fn signed(&self, lhs: &Expr, rhs: &Expr) -> bool {
        let lit = |e: &Expr| matches!(e.kind, ExprKind::Int(_));
        let l = self.facts.ty(lhs.id).is_signed();
        let r = self.facts.ty(rhs.id).is_signed();
        match (lit(lhs), lit(rhs)) {
            (true, false) => r,
            (false, true) => l,
            _ => l && r,
        }
    }
}
