//! `v.(*T)` of an interface value: the data word when the value's dynamic type is `*T`
//! (its type word, or its itab's type for an interface with methods, equals `*T`'s
//! runtime type descriptor, moved by a PIE's load bias), else nil, as Go's
//! `p, _ := v.(*T)` gives. Field reads through a nil pointer read zero.

use super::codegen::Gen;
use super::values::Place;
use super::LowerError;
use crate::bpf::insn::*;
use crate::gotypes::TypeKind;
use crate::syntax::ast::Expr;

/// Offset of the type in a runtime itab (`Inter`, then `Type`), Go 1.17 to 1.27.
const ITAB_TYPE: i64 = 8;

impl Gen<'_> {
    /// The place of `e`, `base.(*T)` with `base` an interface: a stack slot holding the
    /// data word or 0.
    pub(super) fn checked_assert_place(&mut self, e: &Expr, base: &Expr) -> Result<Place, LowerError> {
        let descriptor = self.facts.dynamic_asserts[&e.id];
        let empty = match self.go_type_of(base).map(|id| &self.types.get(id).kind) {
            Some(TypeKind::Interface { empty }) => *empty,
            _ => return Err(LowerError::unsupported(e.span, "asserting this value")),
        };
        let interface = self.place(base)?;
        let slot = self.slot(8, e.span)?;
        let (nil, end) = (self.b.new_label(), self.b.new_label());
        self.read_scalar(&interface, 8, false)?;
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, nil);
        if !empty {
            let itab = self.b.vreg();
            self.b.op(mov64_reg(R0, R0), itab, R0);
            self.read_user_scalar(itab, ITAB_TYPE, 8)?;
        }
        self.b.emit2(ld_imm64(R1, descriptor));
        if let Some(bias) = self.loaded.bias {
            self.b.emit(load(Size::DW, R2, R10, bias));
            self.b.emit(alu64_reg(AluOp::Add, R1, R2));
        }
        self.b.jmp_reg_to(JmpOp::Ne, R0, R1, nil);
        self.read_scalar(&interface.plus(8), 8, false)?;
        self.b.emit(store_reg(Size::DW, R10, slot, R0));
        self.b.ja_to(end);
        self.b.bind(nil);
        self.b.emit(store_imm(Size::DW, R10, slot, 0));
        self.b.bind(end);
        Ok(Place::Stack { slot, offset: 0 })
    }
}
