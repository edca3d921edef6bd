//! Statements and expressions of one probe body to eBPF instructions.
//!
//! Conventions: R6 holds the program's context (`struct pt_regs *`) for the whole
//! program (`ir::conv::CTX`); helpers are called through `Func::call`, which puts their
//! arguments where the eBPF calling convention says (ir/conv.rs); an expression leaves
//! its value in R0; values that must survive a helper call
//! live in stack slots (`ir::Frame`); R8 points at the event record being built. What
//! lives in a virtual register (an aggregation's map value while it is updated, the
//! attach cookie while accounting checks it, a binary operator's left side) gets its
//! machine register from the IR's allocator.

use super::ir::{conv, Arg, Func, Item, R};
use super::loaded::{Attached, Loaded};
use super::maps::Maps;
use super::LowerError;
use crate::arch::{Arch, Reg as MReg};
use crate::bpf::builder::Label;
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::bpf::kfuncs::Kfunc;
use crate::check::binary::BinaryFacts;
use crate::check::builtins::Builtin;
use crate::check::ty::Ty;
use crate::check::{Facts, Name};
use crate::diag::Sources;
use crate::gotypes::Types;
use crate::plan::EventSpec;
use crate::syntax::ast::*;
use std::collections::HashMap;

pub struct Gen<'a> {
    pub b: Func,
    pub(super) facts: &'a Facts,
    pub(super) types: &'a Types,
    pub(super) maps: &'a Maps,
    pub(super) sources: &'a Sources,
    /// Every event format of the script; a record's first u64 indexes it.
    pub events: &'a mut Vec<EventSpec>,
    pub(super) locals: HashMap<String, i16>,
    /// What the program's prologue loaded for its body (loaded.rs).
    pub loaded: Loaded,
    /// What the checker learned of the binary: the runtime's layouts (g, maps), its
    /// fallback hash's constants.
    pub binary: &'a BinaryFacts,
    /// The runtime's aeshash keys, when `m[k]` hashes (maplookup.rs); None: it scans.
    pub aes: Option<crate::gobin::AesGlobals>,
    /// How much of a whole Go value `print` copies.
    pub bounds: crate::capture::Bounds,
    /// Whole values cut for want of room in their record: where, and how many parts
    /// (said as warnings when the script compiles).
    pub notes: Vec<(Span, u32)>,
    /// What the program knows of the function it is attached at.
    pub attached: Attached,
    /// What `span()` and the trace contexts need here (spans.rs).
    pub spans: super::spans::SpanState,
    /// Where the program ends (r0 = 0; exit).
    pub done: Label,
    /// The script's `self` variables.
    pub self_vars: &'a std::collections::BTreeMap<String, crate::check::SelfVar>,
    /// gtrace's own counters and limits (`accounting`); `None` generates none.
    pub acct: Option<super::accounting::ProgramAcct<'a>>,
    /// The slots of pointer paths read once and reused (paths.rs), by expression.
    pub(super) paths: HashMap<ExprId, i16>,
}

impl<'a> Gen<'a> {
    pub fn new(
        binary: &'a BinaryFacts,
        facts: &'a Facts,
        types: &'a Types,
        maps: &'a Maps,
        self_vars: &'a std::collections::BTreeMap<String, crate::check::SelfVar>,
        sources: &'a Sources,
        events: &'a mut Vec<EventSpec>,
    ) -> Gen<'a> {
        let mut b = Func::new();
        let done = b.new_label();
        Gen {
            b,
            binary,
            facts,
            types,
            maps,
            sources,
            events,
            locals: HashMap::new(),
            loaded: Loaded::default(),
            aes: None,
            bounds: crate::capture::Bounds::default(),
            notes: Vec::new(),
            attached: Attached::default(),
            spans: super::spans::SpanState::default(),
            done,
            self_vars,
            acct: None,
            paths: HashMap::new(),
        }
    }

    /// The target's instruction set: where registers are in the context.
    pub fn arch(&self) -> Arch {
        self.binary.binary.arch
    }

    /// A stack slot of `size` bytes (a temporary is released with `frame.release`).
    pub(super) fn slot(&mut self, size: u32, span: Span) -> Result<i16, LowerError> {
        self.b.frame.alloc(size).map_err(|e| LowerError::Stack { span, needed: e.needed })
    }

    /// A slot where no span is at hand (an overflow then points at the probe's start).
    pub(super) fn frame_slot(&mut self, size: u32) -> Result<i16, LowerError> {
        self.slot(size, Span::default())
    }

    /// The stack slot of the local that `e` names.
    pub(super) fn local_slot(&self, e: &Expr) -> Result<i16, LowerError> {
        match self.facts.names.get(&e.id) {
            Some(Name::Local(l)) => self
                .locals
                .get(l)
                .copied()
                .ok_or_else(|| LowerError::unsupported(e.span, "a local read before it is set")),
            _ => Err(LowerError::unsupported(e.span, "this value")),
        }
    }

    /// r6 = ctx; preemption off. Every program starts here: before anything touches
    /// the stack (on 6.13+ a per-CPU private stack) or a per-CPU map (the `scratch`
    /// record, aggregations), so that no other task on this CPU runs a program of
    /// gtrace's in between (uprobe programs run with only migration disabled). Where the
    /// kernel has no `bpf_preempt_disable` (before 6.10) the runtime makes the call a
    /// no-op (runtime/kfuncs.rs).
    pub fn prologue(&mut self) {
        self.b.emit(mov64_reg(conv::CTX, conv::ARGS[0]));
        self.b.call_kfunc(Kfunc::PreemptDisable);
        // Slots the stack cannot hold are reached through a pointer looked up here.
        self.b.push(Item::SpillSetup { fail: self.done });
    }

    /// Preemption back on; r0 = 0; exit. Every program ends here: its one exit, so the
    /// guard is balanced on every path (the verifier checks it).
    pub fn epilogue(&mut self) {
        self.b.bind(self.done);
        self.b.call_kfunc(Kfunc::PreemptEnable);
        self.b.emit(mov64_imm(R0, 0));
        self.b.push(Item::Exit);
    }

    /// `dst = *(u64 *)(ctx + offset of reg)`.
    pub(super) fn load_ctx_reg(&mut self, dst: Reg, reg: MReg) {
        self.load_reg(dst, reg)
    }

    pub(super) fn load_reg(&mut self, dst: impl Into<R>, reg: MReg) {
        self.b.op(load(Size::DW, R0, R0, reg.pt_regs_offset()), dst, conv::CTX);
    }

    /// Copies 8 bytes of target memory at `addr_reg + off` into stack slot `slot`.
    pub(super) fn read_user(&mut self, slot: i16, addr_reg: Reg, off: i32) {
        if addr_reg != R3 {
            self.b.emit(mov64_reg(R3, addr_reg));
        }
        if off != 0 {
            self.b.emit(alu64_imm(AluOp::Add, R3, off));
        }
        self.b.call(BPF_FUNC_probe_read_user, &[Arg::Stack(slot), Arg::Imm(8), R3.into()]);
    }

    pub(super) fn stack_ptr(&mut self, dst: Reg, slot: i16) {
        self.b.emit(mov64_reg(dst, R10));
        self.b.emit(alu64_imm(AluOp::Add, dst, slot as i32));
    }

    /// Evaluates a scalar expression into R0.
    pub fn expr(&mut self, e: &Expr) -> Result<(), LowerError> {
        if let Some(v) = self.facts.consts.get(&e.id) {
            // An untyped constant (folded by the checker), as its type holds it.
            let bits = super::arith::constant_bits(*v, self.facts.ty(e.id));
            self.constant(bits);
            return Ok(());
        }
        if let Some(text) = self.facts.floats.get(&e.id) {
            // An untyped float constant, rounded once to the float type it took.
            let Ty::Float { size } = self.facts.ty(e.id) else {
                return Err(LowerError::unsupported(e.span, "a float constant of this type"));
            };
            let bits = crate::check::typeck::float_bits(text, *size)
                .ok_or_else(|| LowerError::unsupported(e.span, "a float constant that overflows its type"))?;
            self.constant(bits);
            return Ok(());
        }
        match &e.kind {
            ExprKind::Int(v) | ExprKind::Duration(v) => self.constant(*v),
            ExprKind::Float(_) => return Err(LowerError::unsupported(e.span, "a float literal without a type")),
            ExprKind::Bool(v) => self.b.emit(mov64_imm(R0, *v as i32)),
            // A quoted package variable (`"net/http.DefaultClient".Timeout`'s base).
            ExprKind::Str(_) if self.is_go_value(e) => self.go_scalar(e)?,
            ExprKind::Str(_) => return Err(LowerError::unsupported(e.span, "string values")),
            ExprKind::Name(n) => self.name(e, n)?,
            ExprKind::Field { .. } | ExprKind::Unary { op: UnOp::Deref, .. } if self.is_go_value(e) => {
                self.go_scalar(e)?
            }
            ExprKind::Index { base, index } if matches!(self.facts.ty(base.id), Ty::Str { .. }) => {
                self.string_byte(base, index, e.span)?
            }
            ExprKind::Index { .. } | ExprKind::Assert { .. } if self.is_go_value(e) => self.go_scalar(e)?,
            ExprKind::Assert { .. } => return Err(LowerError::unsupported(e.span, "this type assertion")),
            ExprKind::Field { .. } => return Err(LowerError::unsupported(e.span, "field access")),
            ExprKind::Map(m) => {
                let um = self.user_map(&m.name.name, m.span)?;
                let mark = self.b.frame.mark();
                let key = self.key(&um, &m.keys, e.span)?;
                let end = self.b.new_label();
                self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(&um.object_name), Arg::Stack(key)]);
                self.b.jmp_imm_to(JmpOp::Eq, R0, 0, end);
                self.b.emit(load(Size::DW, R0, R0, 0));
                self.b.bind(end);
                self.b.frame.release(mark);
            }
            ExprKind::Unary { op, operand } => match op {
                UnOp::Neg => self.negate(operand, &self.facts.ty(e.id).clone())?,
                UnOp::Not => {
                    self.expr(operand)?;
                    self.b.emit(alu64_imm(AluOp::Xor, R0, 1));
                }
                UnOp::Deref => return Err(LowerError::unsupported(e.span, "pointer dereference")),
            },
            ExprKind::Binary { op, lhs, rhs } => self.binary(*op, lhs, rhs, e.span)?,
            ExprKind::SelfVar(name) => {
                let mark = self.b.frame.mark();
                self.lookup_self(name, e.span)?;
                let end = self.b.new_label();
                self.b.jmp_imm_to(JmpOp::Eq, R0, 0, end);
                self.b.emit(load(Size::DW, R0, R0, 0));
                self.b.bind(end);
                self.b.frame.release(mark);
            }
            ExprKind::Index { .. } => return Err(LowerError::unsupported(e.span, "indexing")),
            ExprKind::Call { func, args, .. } => match (func.name.as_str(), args.as_slice()) {
                ("len", [x]) => self.length(x)?,
                ("cap", [x]) => self.capacity(x)?,
                ("hasPrefix", [s, l @ Expr { kind: ExprKind::Str(lit), .. }]) => {
                    self.string_matches(s, lit, l.span, true)?
                }
                (name, [x]) if crate::check::typeck::conversion(name).is_some() => {
                    self.conversion(x, &self.facts.ty(e.id).clone())?
                }
                _ => return Err(LowerError::unsupported(func.span, "this call as a value")),
            },
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
                let slot = *self
                    .locals
                    .get(&l)
                    .ok_or_else(|| LowerError::unsupported(e.span, "a local read before it is set"))?;
                self.b.emit(load(Size::DW, R0, R10, slot));
            }
            Some(Name::Builtin(b)) => self.builtin(b, e.span)?,
            Some(Name::GoValue { .. } | Name::Global { .. }) => self.go_scalar(e)?,
            None => return Err(LowerError::unsupported(e.span, "an unresolved name")),
        }
        Ok(())
    }

    pub(super) fn builtin(&mut self, b: Builtin, span: Span) -> Result<(), LowerError> {
        match b {
            Builtin::Elapsed => {
                let slot = self.loaded.call.elapsed(span)?;
                self.b.emit(load(Size::DW, R0, R10, slot));
            }
            Builtin::Nsecs => self.b.emit(call(BPF_FUNC_ktime_get_ns)),
            Builtin::Goid => self.goid(span)?,
            Builtin::Pid => {
                self.b.call(BPF_FUNC_get_current_pid_tgid, &[]);
                self.b.emit(alu64_imm(AluOp::Rsh, R0, 32));
            }
            Builtin::Tid => {
                self.b.call(BPF_FUNC_get_current_pid_tgid, &[]);
                self.b.emit(alu64_imm(AluOp::Lsh, R0, 32));
                self.b.emit(alu64_imm(AluOp::Rsh, R0, 32));
            }
            Builtin::Cpu => self.b.emit(call(BPF_FUNC_get_smp_processor_id)),
            Builtin::Func if self.loaded.call.panicked().is_some() => {
                // In `on panic`: the function of the frame the body runs for.
                let func = self.loaded.call.panicked().map_or(0, |p| p.func);
                self.b.emit(load(Size::DW, R0, R10, func));
            }
            Builtin::Recovered => {
                let p = self.loaded.call.panicked();
                let p = p.ok_or_else(|| LowerError::unsupported(span, "recovered outside `on panic`"))?;
                self.b.emit(load(Size::DW, R0, R10, p.recovered));
            }
            Builtin::Panic => return Err(LowerError::unsupported(span, "a panic's value as a number")),
            Builtin::Func if self.attached.dictionary.is_some() && self.attached.index.is_some() => {
                self.func_with_dictionary(self.attached.index.unwrap_or_default(), span)?;
            }
            Builtin::Func if self.attached.index.is_some() => {
                // A program attached at one function knows its index.
                self.b.emit(mov64_imm(R0, self.attached.index.unwrap_or_default() as i32));
            }
            Builtin::Func => {
                // The low 32 bits of the cookie index the functions (plan::COOKIE_SLOT_SHIFT).
                self.b.call(BPF_FUNC_get_attach_cookie, &[conv::CTX.into()]);
                self.b.emit(alu32_reg(AluOp::Mov, R0, R0));
            }
            Builtin::Comm => return Err(LowerError::unsupported(span, "comm")),
        }
        Ok(())
    }

    fn binary(&mut self, op: BinOp, lhs: &Expr, rhs: &Expr, span: Span) -> Result<(), LowerError> {
        if matches!(op, BinOp::And | BinOp::Or) {
            let end = self.b.new_label();
            self.expr(lhs)?;
            let jump = if op == BinOp::And { JmpOp::Eq } else { JmpOp::Ne };
            self.b.jmp_imm_to(jump, R0, 0, end);
            self.expr(rhs)?;
            self.b.bind(end);
            return Ok(());
        }
        if matches!(op, BinOp::Eq | BinOp::Ne) {
            let l = self.facts.ty(lhs.id).clone();
            let r = self.facts.ty(rhs.id).clone();
            let special = match (&lhs.kind, &rhs.kind, &l, &r) {
                (_, ExprKind::Str(lit), Ty::Str { .. }, _) => Some(self.string_matches(lhs, lit, rhs.span, false)),
                (ExprKind::Str(lit), _, _, Ty::Str { .. }) => Some(self.string_matches(rhs, lit, lhs.span, false)),
                (_, _, _, Ty::Nil) => Some(self.is_nil(lhs)),
                (_, _, Ty::Nil, _) => Some(self.is_nil(rhs)),
                _ => None,
            };
            if let Some(done) = special {
                done?;
                if op == BinOp::Ne {
                    self.b.emit(alu64_imm(AluOp::Xor, R0, 1));
                }
                return Ok(());
            }
        }
        // Both sides have one type (the checker made sure); a shift has its left's.
        let ty = self.facts.ty(lhs.id).clone();
        let signed = ty.is_signed();
        // The left side waits in a virtual register while the right is evaluated: one
        // that survives calls there, or a slot when none is free.
        let left = self.b.vreg();
        self.expr(lhs)?;
        self.b.op(mov64_reg(R0, R0), left, R0);
        self.expr(rhs)?;
        self.b.emit(mov64_reg(R2, R0));
        self.b.op(mov64_reg(R1, R0), R1, left);
        use BinOp::*;
        if let Ty::Float { size } = ty {
            return self.float_compare(op, size, span);
        }
        if !matches!(op, Eq | Ne | Lt | Le | Gt | Ge) {
            return self.arith_op(op, &ty, span);
        }
        let jump = match (op, signed) {
            (Eq, _) => JmpOp::Eq,
            (Ne, _) => JmpOp::Ne,
            (Lt, true) => JmpOp::Slt,
            (Lt, false) => JmpOp::Lt,
            (Le, true) => JmpOp::Sle,
            (Le, false) => JmpOp::Le,
            (Gt, true) => JmpOp::Sgt,
            (Gt, false) => JmpOp::Gt,
            (Ge, true) => JmpOp::Sge,
            (Ge, false) => JmpOp::Ge,
            _ => return Err(LowerError::unsupported(span, "this operator")),
        };
        let yes = self.b.new_label();
        self.b.emit(mov64_imm(R0, 1));
        self.b.jmp_reg_to(jump, R1, R2, yes);
        self.b.emit(mov64_imm(R0, 0));
        self.b.bind(yes);
        Ok(())
    }

    /// R0 = 1 when the Go value `e` is nil.
    fn is_nil(&mut self, e: &Expr) -> Result<(), LowerError> {
        self.first_word(e)?;
        let yes = self.b.new_label();
        self.b.emit(mov64_reg(R1, R0));
        self.b.emit(mov64_imm(R0, 1));
        self.b.jmp_imm_to(JmpOp::Eq, R1, 0, yes);
        self.b.emit(mov64_imm(R0, 0));
        self.b.bind(yes);
        Ok(())
    }

    /// R0 = s[i] (a byte), or 0 when `i` is out of range.
    fn string_byte(&mut self, s: &Expr, i: &Expr, span: Span) -> Result<(), LowerError> {
        if !self.is_go_value(s) {
            return Err(LowerError::unsupported(span, "indexing a string that is not a Go value"));
        }
        let mark = self.b.frame.mark();
        let place = self.place(s)?;
        let ptr = self.slot(8, span)?;
        let idx = self.slot(8, span)?;
        self.read_scalar(&place, 8, false)?;
        self.b.emit(store_reg(Size::DW, R10, ptr, R0));
        self.expr(i)?;
        self.b.emit(store_reg(Size::DW, R10, idx, R0));
        self.read_scalar(&place.plus(8), 8, false)?;
        let out = self.b.new_label();
        self.b.emit(load(Size::DW, R1, R10, idx));
        self.b.emit(mov64_reg(R2, R0));
        self.b.emit(mov64_imm(R0, 0));
        self.b.jmp_reg_to(JmpOp::Ge, R1, R2, out);
        self.b.emit(load(Size::DW, R0, R10, ptr));
        self.b.emit(alu64_reg(AluOp::Add, R0, R1));
        self.b.emit(store_reg(Size::DW, R10, ptr, R0));
        self.read_scalar(&super::values::Place::Mem { addr: ptr, offset: 0 }, 1, false)?;
        self.b.bind(out);
        self.b.frame.release(mark);
        Ok(())
    }
}
