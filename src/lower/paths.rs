//! A pointer path read once per program run: where a probe's body reads the same pointer
//! through target memory more than once (`w.req` in `w.req.Method`, `w.req.URL.Path`
//! and `@m[w.req]`), the first read keeps the pointer in a stack slot and every later
//! one takes it from there (a `bpf_probe_read_user` is most of what a field costs).
//!
//! The slot starts as a sentinel no user pointer can be (all ones), set before the body;
//! a read that finds the sentinel reads the target and fills the slot. So it is right
//! whichever branch reads the path first, or whether any does: a path read under two
//! different conditions is read once on a run that takes both, once on a run that takes
//! either, never on one that takes neither.
//!
//! Only paths whose value is fixed for the program's run are kept: fields and
//! reinterpreting assertions (`x.(*T)` of a word) from a parameter, result or package
//! variable (no index, no dereference of an expression, no interface's checked
//! assertion). The target's memory is read once instead of several times, so the parts
//! of one path agree with each other even while another thread writes them.

use super::codegen::Gen;
use super::LowerError;
use crate::bpf::insn::*;
use crate::check::Name;
use crate::gotypes::TypeKind;
use crate::syntax::ast::*;
use std::collections::HashMap;

/// The sentinel of a slot not yet filled: all ones (an `i32` immediate, sign-extended).
const UNREAD: i32 = -1;

impl Gen<'_> {
    /// Before lowering `body` (outside any temporary's scope): the pointer paths it
    /// reads more than once kept (`reuse_paths`), then its near fields read together
    /// (coalesce.rs), both chosen from one walk of the fields it reads.
    pub(super) fn prepare_reads(&mut self, body: &Block, span: Span) -> Result<(), LowerError> {
        let mut fields = Vec::new();
        self.fields_in_block(body, &mut fields);
        self.reuse_paths(&fields, span)?;
        self.coalesce_reads(&fields, span)
    }

    /// Finds the pointer paths that a body reads more than once (among `fields`, what
    /// `fields_in_block` found in it), gives each a slot and sets it to the sentinel.
    /// Call before lowering the body, outside any temporary's scope.
    pub(super) fn reuse_paths(&mut self, fields: &[&Expr], span: Span) -> Result<(), LowerError> {
        let uses: Vec<(String, ExprId)> =
            (fields.iter()).filter(|e| self.is_pointer(e)).filter_map(|e| Some((self.path_key(e)?, e.id))).collect();
        let mut count: HashMap<&str, usize> = HashMap::new();
        for (key, _) in &uses {
            *count.entry(key).or_default() += 1;
        }
        let mut slots: HashMap<String, i16> = HashMap::new();
        for (key, id) in &uses {
            if count[key.as_str()] < 2 {
                continue;
            }
            let slot = match slots.get(key) {
                Some(s) => *s,
                None => {
                    let s = self.slot(8, span)?;
                    self.b.emit(store_imm(Size::DW, R10, s, UNREAD));
                    slots.insert(key.clone(), s);
                    s
                }
            };
            self.paths.insert(*id, slot);
        }
        Ok(())
    }

    /// R0 = the pointer path `e`, from its slot when read before in this run, else read
    /// and kept. `read` reads it from the target.
    pub(super) fn reused_path(
        &mut self,
        e: &Expr,
        read: impl FnOnce(&mut Self, &Expr) -> Result<(), LowerError>,
    ) -> Result<(), LowerError> {
        let Some(slot) = self.paths.remove(&e.id) else { return read(self, e) };
        let have = self.b.new_label();
        self.b.emit(load(Size::DW, R0, R10, slot));
        self.b.jmp_imm_to(JmpOp::Ne, R0, UNREAD, have);
        let result = read(self, e);
        self.paths.insert(e.id, slot);
        result?;
        self.b.emit(store_reg(Size::DW, R10, slot, R0));
        self.b.bind(have);
        Ok(())
    }

    /// Every field `body` reads (`base.f`), on the branches lowering generates (see
    /// `stmt`), outside `defined(...)`: what reuse_paths and coalesce.rs choose from
    /// (`prepare_reads`).
    pub(super) fn fields_in_block<'b>(&self, block: &'b Block, out: &mut Vec<&'b Expr>) {
        for s in &block.stmts {
            self.fields_in_stmt(s, out);
        }
    }

    fn fields_in_stmt<'b>(&self, s: &'b Stmt, out: &mut Vec<&'b Expr>) {
        if let StmtKind::If { cond, then, otherwise } = &s.kind {
            match (self.facts.static_conds.get(&cond.id), otherwise) {
                (Some(true), _) => self.fields_in_block(then, out),
                (Some(false), Some(Else::Block(b))) => self.fields_in_block(b, out),
                (Some(false), Some(Else::If(s))) => self.fields_in_stmt(s, out),
                (Some(false), None) => {}
                (None, _) => {
                    self.fields_in_expr(cond, out);
                    self.fields_in_block(then, out);
                    match otherwise {
                        Some(Else::Block(b)) => self.fields_in_block(b, out),
                        Some(Else::If(s)) => self.fields_in_stmt(s, out),
                        None => {}
                    }
                }
            }
            return;
        }
        for e in s.exprs() {
            self.fields_in_expr(e, out);
        }
    }

    fn fields_in_expr<'b>(&self, e: &'b Expr, out: &mut Vec<&'b Expr>) {
        // `defined(x)` is answered when checking: nothing under it is read.
        if matches!(&e.kind, ExprKind::Call { func, .. } if func.name == "defined") {
            return;
        }
        if matches!(e.kind, ExprKind::Field { .. }) {
            out.push(e);
        }
        for c in e.children() {
            self.fields_in_expr(c, out);
        }
    }

    fn is_pointer(&self, e: &Expr) -> bool {
        self.go_type_of(e).is_some_and(|id| matches!(self.types.get(id).kind, TypeKind::Pointer { .. }))
    }

    /// A name for the path `e` that two expressions share exactly when they read the
    /// same memory in the same run; None for what this does not keep.
    pub(super) fn path_key(&self, e: &Expr) -> Option<String> {
        match (&e.kind, self.facts.names.get(&e.id)) {
            (_, Some(Name::GoValue { name, .. })) => Some(name.clone()),
            (_, Some(Name::Global { addr, .. })) => Some(format!("@{addr:#x}")),
            (_, Some(_)) => None,
            (ExprKind::Field { base, field }, None) => Some(format!("{}.{}", self.path_key(base)?, field.name)),
            (ExprKind::Assert { base, .. }, None) if !self.facts.dynamic_asserts.contains_key(&e.id) => {
                Some(format!("{}.({})", self.path_key(base)?, self.go_type_of(e)?.0))
            }
            _ => None,
        }
    }
}
