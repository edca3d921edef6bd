//! Statements of one probe body to eBPF instructions: locals, map and `self`
//! assignments, `if`, and the calls made as statements (`print`, `printf`, `span`,
//! `trace_context`, `clear`, `delete`, bare aggregations). Expressions: codegen.rs.

use super::codegen::Gen;
use super::ir::Arg;
use super::LowerError;
use crate::bpf::helpers::*;
use crate::bpf::insn::*;
use crate::check::maps::MapValueTy;
use crate::plan::EventKind;
use crate::syntax::ast::*;

impl Gen<'_> {
    pub fn block(&mut self, block: &Block) -> Result<(), LowerError> {
        for s in &block.stmts {
            self.stmt(s)?;
        }
        Ok(())
    }

    fn stmt(&mut self, s: &Stmt) -> Result<(), LowerError> {
        self.b.comment(self.sources.located_line(s.span));
        let mark = self.b.frame.mark();
        match &s.kind {
            StmtKind::Let { name, value } => {
                let size = self.facts.ty(value.id).record_size();
                let slot = match self.locals.get(&name.name) {
                    Some(s) => *s,
                    None => {
                        // Locals live for the whole program: allocated where temporaries
                        // of this statement would have started, and never released.
                        let slot = self.slot(size, name.span)?;
                        self.locals.insert(name.name.clone(), slot);
                        for i in 0..(size / 8) as i16 {
                            self.b.emit(store_imm(Size::DW, R10, slot + 8 * i, 0));
                        }
                        slot
                    }
                };
                self.value_to(value, R10, slot)?;
                return Ok(());
            }
            StmtKind::AssignSelf { name, value } => self.store_self(&name.name, value, s.span)?,
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
                // A condition known when checked (`defined(x)`): only its branch exists.
                match (self.facts.static_conds.get(&cond.id), otherwise) {
                    (Some(true), _) => self.block(then)?,
                    (Some(false), Some(Else::Block(b))) => self.block(b)?,
                    (Some(false), Some(Else::If(s))) => self.stmt(s)?,
                    (Some(false), None) => {}
                    (None, _) => self.if_stmt(cond, then, otherwise.as_ref())?,
                }
            }
        }
        self.b.frame.release(mark);
        Ok(())
    }

    fn if_stmt(&mut self, cond: &Expr, then: &Block, otherwise: Option<&Else>) -> Result<(), LowerError> {
        let other = self.b.new_label();
        let end = self.b.new_label();
        self.expr(cond)?;
        self.b.jmp_imm_to(JmpOp::Eq, R0, 0, other);
        self.block(then)?;
        self.b.ja_to(end);
        self.b.bind(other);
        match otherwise {
            Some(Else::Block(b)) => self.block(b)?,
            Some(Else::If(s)) => self.stmt(s)?,
            None => {}
        }
        self.b.bind(end);
        Ok(())
    }

    fn call_stmt(&mut self, e: &Expr) -> Result<(), LowerError> {
        let ExprKind::Call { func, args, .. } = &e.kind else {
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
                self.event(EventKind::Print { labels: Vec::new() }, args, e.span)
            }
            "printf" => {
                let ExprKind::Str(format) = &args[0].kind else {
                    return Err(LowerError::unsupported(e.span, "a printf format that is not a literal"));
                };
                self.event(EventKind::Printf { format: format.clone() }, &args[1..], e.span)
            }
            "exit" => self.event(EventKind::Exit, &[], e.span),
            "trace_context" => self.trace_context(&args[0], e.span),
            "span" => {
                let s = self.facts.spans.get(&e.id).cloned().unwrap_or_default();
                let fields: Vec<Expr> = s.fields.iter().filter_map(|&i| args.get(i).cloned()).collect();
                let arg = |i: Option<usize>| i.and_then(|i| args.get(i).cloned());
                self.spans.ended = arg(s.start).map(|start| super::codegen::Ended {
                    start,
                    error: arg(s.error),
                    parent: arg(s.parent),
                    parent_ctx: s.parent_ctx,
                });
                let kind = EventKind::Span { keys: s.keys, status: false, panic: false, ended: false, kind: s.kind };
                self.event(kind, &fields, e.span)
            }
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
                if let Some(s) = &um.slots {
                    return self.slotted_delete(&um, s, key, None, e.span);
                }
                self.b.call(BPF_FUNC_map_delete_elem, &[Arg::Map(&um.object_name), Arg::Stack(key)]);
                Ok(())
            }
            _ => Err(LowerError::unsupported(func.span, "this call")),
        }
    }
}
