//! Scalar expressions into R0: constants, names and builtins, operators (arithmetic in
//! arith.rs, floats in float.rs), comparisons with nil and string literals, a string's
//! byte, a map's or a `self` variable's value.

use super::codegen::Gen;
use super::ir::{conv, Arg};
use super::values::Place;
use super::LowerError;
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::check::builtins::Builtin;
use crate::check::ty::Ty;
use crate::check::Name;
use crate::syntax::ast::*;

impl Gen<'_> {
    /// Evaluates a scalar expression into R0.
    pub fn expr(&mut self, e: &Expr) -> Result<(), LowerError> {
        if self.folded_constant(e)? {
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
            ExprKind::Map(m) => self.map_value(m, e.span)?,
            ExprKind::Unary { op, operand } => match op {
                UnOp::Neg => self.negate(operand, &self.facts.ty(e.id).clone())?,
                UnOp::Not => {
                    self.expr(operand)?;
                    self.b.emit(alu64_imm(AluOp::Xor, R0, 1));
                }
                UnOp::Deref => return Err(LowerError::unsupported(e.span, "pointer dereference")),
            },
            ExprKind::Binary { op, lhs, rhs } => self.binary(*op, lhs, rhs, e.span)?,
            ExprKind::SelfVar(name) => self.self_value(name, e.span)?,
            ExprKind::Index { .. } => return Err(LowerError::unsupported(e.span, "indexing")),
            ExprKind::Call { func, args, .. } => self.call_value(e, func, args)?,
        }
        Ok(())
    }

    /// An untyped constant the checker folded, into R0 as its type holds it; false when
    /// `e` is not one.
    fn folded_constant(&mut self, e: &Expr) -> Result<bool, LowerError> {
        if let Some(v) = self.facts.consts.get(&e.id) {
            let bits = super::arith::constant_bits(*v, self.facts.ty(e.id));
            self.constant(bits);
            return Ok(true);
        }
        if let Some(text) = self.facts.floats.get(&e.id) {
            // An untyped float constant, rounded once to the float type it took.
            let Ty::Float { size } = self.facts.ty(e.id) else {
                return Err(LowerError::unsupported(e.span, "a float constant of this type"));
            };
            let bits = crate::check::typeck::float_bits(text, *size)
                .ok_or_else(|| LowerError::unsupported(e.span, "a float constant that overflows its type"))?;
            self.constant(bits);
            return Ok(true);
        }
        Ok(false)
    }

    /// `@m[k]` into R0: the element's value, or 0 when it is absent.
    fn map_value(&mut self, m: &MapRef, span: Span) -> Result<(), LowerError> {
        let um = self.user_map(&m.name.name, m.span)?;
        let mark = self.b.frame.mark();
        let key = self.key(&um, &m.keys, span)?;
        if let Some(s) = &um.slots {
            self.slotted_read(&um, s, key, span)?;
        } else {
            let end = self.b.new_label();
            self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(&um.object_name), Arg::Stack(key)]);
            self.b.jmp_imm_to(JmpOp::Eq, R0, 0, end);
            self.b.emit(load(Size::DW, R0, R0, 0));
            self.b.bind(end);
        }
        self.b.frame.release(mark);
        Ok(())
    }

    /// `self.name` into R0: the variable's value, or 0 when this goroutine has not set it.
    fn self_value(&mut self, name: &str, span: Span) -> Result<(), LowerError> {
        let mark = self.b.frame.mark();
        self.lookup_self(name, span)?;
        let end = self.b.new_label();
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, end);
        self.b.emit(load(Size::DW, R0, R0, 0));
        self.b.bind(end);
        self.b.frame.release(mark);
        Ok(())
    }

    /// A call that is a value (`take`, `len`, `cap`, `hasPrefix`, a conversion) into R0.
    fn call_value(&mut self, e: &Expr, func: &Ident, args: &[Expr]) -> Result<(), LowerError> {
        match (func.name.as_str(), args) {
            ("take", [Expr { kind: ExprKind::Map(m), .. }]) => self.take(m, e.span),
            ("len", [x]) => self.length(x),
            ("cap", [x]) => self.capacity(x),
            ("hasPrefix", [s, l @ Expr { kind: ExprKind::Str(lit), .. }]) => self.string_matches(s, lit, l.span, true),
            (name, [x]) if crate::check::typeck::conversion(name).is_some() => {
                self.conversion(x, &self.facts.ty(e.id).clone())
            }
            _ => Err(LowerError::unsupported(func.span, "this call as a value")),
        }
    }

    /// `take(@m[k])` into R0: the element's value, when this probe's delete removed it;
    /// else 0 (absent, or another probe took it first: a hash map's delete succeeds once).
    fn take(&mut self, m: &MapRef, span: Span) -> Result<(), LowerError> {
        let um = self.user_map(&m.name.name, m.span)?;
        let mark = self.b.frame.mark();
        let key = self.key(&um, &m.keys, span)?;
        let val = self.slot(8, span)?;
        if let Some(s) = &um.slots {
            self.slotted_delete(&um, s, key, Some(val), span)?;
            self.b.emit(load(Size::DW, R0, R10, val));
            self.b.frame.release(mark);
            return Ok(());
        }
        self.b.emit(store_imm(Size::DW, R10, val, 0));
        let end = self.b.new_label();
        self.b.call(BPF_FUNC_map_lookup_elem, &[Arg::Map(&um.object_name), Arg::Stack(key)]);
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, end);
        self.b.emit(load(Size::DW, R1, R0, 0));
        self.b.emit(store_reg(Size::DW, R10, val, R1));
        self.b.call(BPF_FUNC_map_delete_elem, &[Arg::Map(&um.object_name), Arg::Stack(key)]);
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, end);
        self.b.emit(store_imm(Size::DW, R10, val, 0));
        self.b.bind(end);
        self.b.emit(load(Size::DW, R0, R10, val));
        self.b.frame.release(mark);
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
            Builtin::Nsecs => self.b.call(BPF_FUNC_ktime_get_ns, &[]),
            Builtin::Goid => self.goid(span)?,
            // The process is in the goroutine's key when the prologue loaded it (and the
            // programs may run in several processes: else it holds 0).
            Builtin::Pid => match self.loaded.call.g().filter(|_| !self.one_process) {
                Some(g) => self.b.emit(load(Size::W, R0, R10, g + super::layout::K_TGID)),
                None => {
                    self.b.call(BPF_FUNC_get_current_pid_tgid, &[]);
                    self.b.emit(alu64_imm(AluOp::Rsh, R0, 32));
                }
            },
            Builtin::Tid => {
                self.b.call(BPF_FUNC_get_current_pid_tgid, &[]);
                self.b.emit(alu64_imm(AluOp::Lsh, R0, 32));
                self.b.emit(alu64_imm(AluOp::Rsh, R0, 32));
            }
            Builtin::Cpu => self.b.call(BPF_FUNC_get_smp_processor_id, &[]),
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
        self.read_scalar(&Place::Mem { addr: ptr, offset: 0 }, 1, false)?;
        self.b.bind(out);
        self.b.frame.release(mark);
        Ok(())
    }
}
