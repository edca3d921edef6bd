//! Helpers and params substituted into the probes, before checking. A call of
//! `fn f(a) = EXPR` becomes EXPR with each parameter replaced by its argument; a
//! statement `g(x)` of `fn g(a) { ... }` becomes g's statements, its `:=` locals renamed
//! so they cannot meet the caller's. A param's name becomes its value. Every node made
//! gets a fresh ExprId; nodes keep the spans of the file they were written in, except
//! that an expanded call keeps the call's span at its top.
//!
//! A helper's body sees its parameters, the params, and the probe's own names (Go
//! parameters, results, builtins): names are substituted, not captured, so an argument
//! is never re-read in the helper's scope. Recursion is an error; so is a call with the
//! wrong number of arguments, and a block helper used as a value.

use super::merge::Program;
use super::params::Values;
use crate::diag::Diagnostic;
use crate::syntax::ast::*;
use crate::syntax::parser::MAX_EXPR_DEPTH;
use std::collections::HashMap;

/// Deepest chain of helpers calling helpers.
const MAX_HELPER_DEPTH: usize = 32;

/// What a name stands for where it is read.
#[derive(Clone)]
enum Bound {
    /// A parameter's argument or a param's value: copied in with fresh ids.
    Expr(Expr),
    /// A local, possibly renamed.
    Local(String),
}

type Env = HashMap<String, Bound>;

struct Inliner<'a> {
    fns: &'a HashMap<String, FnDef>,
    globals: Env,
    next_id: &'a mut u32,
    diags: Vec<Diagnostic>,
    /// The helpers being expanded, outermost first, with the call that expanded each.
    stack: Vec<(String, Span)>,
    /// Numbers the renamed locals of helpers.
    renamed: u32,
}

pub(super) fn inline(program: Program, values: &Values, next_id: &mut u32) -> Result<Script, Vec<Diagnostic>> {
    let globals: Env = values.iter().map(|(k, v)| (k.clone(), Bound::Expr(v.clone()))).collect();
    let mut cx = Inliner { fns: &program.fns, globals, next_id, diags: Vec::new(), stack: Vec::new(), renamed: 0 };
    let mut items = Vec::new();
    for probe in &program.probes {
        let mut env = cx.globals.clone();
        let body = cx.block(&probe.body, &mut env);
        items.push(Item::Probe(Probe { kind: probe.kind.clone(), body, span: probe.span }));
    }
    for item in &items {
        let Item::Probe(p) = item else { continue };
        check_depth(&p.body, &mut cx.diags);
    }
    if cx.diags.is_empty() {
        Ok(Script { items, params: Vec::new() })
    } else {
        Err(cx.diags)
    }
}

impl Inliner<'_> {
    fn id(&mut self) -> ExprId {
        let id = ExprId(*self.next_id);
        *self.next_id = self.next_id.wrapping_add(1);
        id
    }

    fn block(&mut self, b: &Block, env: &mut Env) -> Block {
        let mut stmts = Vec::new();
        for s in &b.stmts {
            self.stmt(s, env, &mut stmts);
        }
        Block { stmts, span: b.span }
    }

    /// A statement into `out`: a block helper's call becomes several.
    fn stmt(&mut self, s: &Stmt, env: &mut Env, out: &mut Vec<Stmt>) {
        let kind = match &s.kind {
            StmtKind::Let { name, value } => {
                let value = self.expr(value, env);
                let local = if self.stack.is_empty() {
                    name.name.clone()
                } else {
                    self.renamed += 1;
                    format!("{}·{}", name.name, self.renamed)
                };
                env.insert(name.name.clone(), Bound::Local(local.clone()));
                StmtKind::Let { name: Ident { name: local, span: name.span }, value }
            }
            StmtKind::AssignSelf { name, value } => {
                StmtKind::AssignSelf { name: name.clone(), value: self.expr(value, env) }
            }
            StmtKind::AssignMap { map, value } => {
                StmtKind::AssignMap { map: self.map_ref(map, env), value: self.expr(value, env) }
            }
            StmtKind::Expr(Expr { kind: ExprKind::Call { func, args, names }, span, .. })
                if matches!(self.fns.get(&func.name), Some(FnDef { body: FnBody::Block(_), .. })) =>
            {
                self.no_names(func, names);
                self.block_call(func, args, *span, env, out);
                return;
            }
            StmtKind::Expr(e) => StmtKind::Expr(self.expr(e, env)),
            StmtKind::If { cond, then, otherwise } => {
                let cond = self.expr(cond, env);
                let then = self.block(then, &mut env.clone());
                let otherwise = otherwise.as_ref().map(|o| match o {
                    Else::Block(b) => Else::Block(self.block(b, &mut env.clone())),
                    Else::If(s) => {
                        let mut inner = Vec::new();
                        self.stmt(s, &mut env.clone(), &mut inner);
                        match inner.pop() {
                            Some(one) if inner.is_empty() => Else::If(Box::new(one)),
                            _ => Else::Block(Block { stmts: inner, span: s.span }),
                        }
                    }
                });
                StmtKind::If { cond, then, otherwise }
            }
        };
        out.push(Stmt { kind, span: s.span });
    }

    fn map_ref(&mut self, m: &MapRef, env: &Env) -> MapRef {
        MapRef {
            name: m.name.clone(),
            keys: m.keys.iter().map(|k| self.expr(k, env)).collect(),
            names: m.names.clone(),
            span: m.span,
        }
    }

    fn expr(&mut self, e: &Expr, env: &Env) -> Expr {
        let kind = match &e.kind {
            ExprKind::Name(n) => match env.get(n) {
                Some(Bound::Expr(value)) => return self.copy(value),
                Some(Bound::Local(local)) => ExprKind::Name(local.clone()),
                None => ExprKind::Name(n.clone()),
            },
            ExprKind::Call { func, args, names } if self.fns.contains_key(&func.name) => {
                self.no_names(func, names);
                return self.expr_call(func, args, e.span, env);
            }
            ExprKind::Call { func, args, names } => ExprKind::Call {
                func: func.clone(),
                args: args.iter().map(|a| self.expr(a, env)).collect(),
                names: names.clone(),
            },
            ExprKind::Map(m) => ExprKind::Map(self.map_ref(m, env)),
            ExprKind::Field { base, field } => {
                ExprKind::Field { base: Box::new(self.expr(base, env)), field: field.clone() }
            }
            ExprKind::Index { base, index } => {
                ExprKind::Index { base: Box::new(self.expr(base, env)), index: Box::new(self.expr(index, env)) }
            }
            ExprKind::Assert { base, ty } => ExprKind::Assert { base: Box::new(self.expr(base, env)), ty: ty.clone() },
            ExprKind::Unary { op, operand } => ExprKind::Unary { op: *op, operand: Box::new(self.expr(operand, env)) },
            ExprKind::Binary { op, lhs, rhs } => {
                ExprKind::Binary { op: *op, lhs: Box::new(self.expr(lhs, env)), rhs: Box::new(self.expr(rhs, env)) }
            }
            other => other.clone(),
        };
        Expr { id: self.id(), kind, span: e.span }
    }

    /// A value already substituted, copied with fresh ids.
    fn copy(&mut self, e: &Expr) -> Expr {
        let mut c = e.clone();
        self.renumber(&mut c);
        c
    }

    fn renumber(&mut self, e: &mut Expr) {
        e.id = self.id();
        for c in e.children_mut() {
            self.renumber(c);
        }
    }

    /// The helper's environment for one call, or None (and an error) if the call is wrong.
    fn enter(&mut self, def: &FnDef, args: &[Expr], call: Span, env: &Env) -> Option<Env> {
        let name = &def.name.name;
        if let Some(pos) = self.stack.iter().position(|(n, _)| n == name) {
            let chain: Vec<&str> = self.stack[pos..].iter().map(|(n, _)| n.as_str()).chain([name.as_str()]).collect();
            self.diags.push(
                Diagnostic::error(call, format!("`{name}` calls itself"))
                    .label(if chain.len() > 2 {
                        format!("recursion: {}", chain.join(" → "))
                    } else {
                        "recursion".into()
                    })
                    .related(def.name.span, "helpers are inlined, so they cannot be recursive")
                    .hint("unroll it by hand, or use an `if` in one helper"),
            );
            return None;
        }
        if self.stack.len() >= MAX_HELPER_DEPTH {
            self.diags.push(
                Diagnostic::error(call, "helpers nested too deeply")
                    .label(format!("more than {MAX_HELPER_DEPTH} helpers calling helpers")),
            );
            return None;
        }
        if args.len() != def.params.len() {
            let takes = match def.params.len() {
                1 => "1 argument".to_string(),
                n => format!("{n} arguments"),
            };
            self.diags.push(
                Diagnostic::error(
                    call,
                    format!(
                        "`{name}` takes {takes}, but {} {} given",
                        args.len(),
                        if args.len() == 1 { "was" } else { "were" }
                    ),
                )
                .label("wrong number of arguments")
                .related(def.span, "defined here"),
            );
            return None;
        }
        let mut inner = self.globals.clone();
        for (p, a) in def.params.iter().zip(args) {
            inner.insert(p.name.clone(), Bound::Expr(self.expr(a, env)));
        }
        self.stack.push((name.clone(), call));
        Some(inner)
    }

    fn expr_call(&mut self, func: &Ident, args: &[Expr], span: Span, env: &Env) -> Expr {
        let Some(def) = self.fns.get(&func.name) else { return self.placeholder(span) };
        let FnBody::Expr(body) = &def.body else {
            self.diags.push(
                Diagnostic::error(span, format!("`{}` has a block body and gives no value", func.name))
                    .label("used as a value here")
                    .related(def.span, "defined with `{ ... }`")
                    .hint(format!(
                        "call it as a statement on its own line, or define it as `fn {}(...) = EXPR`",
                        func.name
                    )),
            );
            return self.placeholder(span);
        };
        let Some(inner) = self.enter(def, args, span, env) else { return self.placeholder(span) };
        let mut out = self.expr(body, &inner);
        self.stack.pop();
        out.span = span;
        out
    }

    /// A helper's arguments are positional: a named one is an error.
    fn no_names(&mut self, func: &Ident, names: &[Option<Ident>]) {
        if let Some(n) = names.iter().flatten().next() {
            self.diags.push(
                Diagnostic::error(n.span, format!("`{}` takes its arguments in order, without names", func.name))
                    .label("a named argument")
                    .hint("only span() names its arguments (its attributes)"),
            );
        }
    }

    fn block_call(&mut self, func: &Ident, args: &[Expr], span: Span, env: &Env, out: &mut Vec<Stmt>) {
        let Some(def) = self.fns.get(&func.name) else { return };
        let FnBody::Block(body) = &def.body else { return };
        let Some(mut inner) = self.enter(def, args, span, env) else { return };
        for s in &body.stmts {
            self.stmt(s, &mut inner, out);
        }
        self.stack.pop();
    }

    /// Stands in for a call that was reported as wrong.
    fn placeholder(&mut self, span: Span) -> Expr {
        Expr { id: self.id(), kind: ExprKind::Bool(false), span }
    }
}

/// After inlining, expressions must still be shallow enough for the passes that recurse.
fn check_depth(b: &Block, diags: &mut Vec<Diagnostic>) {
    b.walk_stmts(&mut |s| s.exprs().into_iter().for_each(|e| deep(e, diags)));
}

fn deep(e: &Expr, diags: &mut Vec<Diagnostic>) {
    if depth(e, 0) > 2 * MAX_EXPR_DEPTH {
        diags.push(
            Diagnostic::error(e.span, "expression too deeply nested once its helpers are inlined")
                .label(format!("more than {} levels", 2 * MAX_EXPR_DEPTH))
                .hint("split it with `:=` variables"),
        );
    }
}

/// The depth of an expression tree, giving up past the limit (so this stays bounded).
fn depth(e: &Expr, at: u32) -> u32 {
    if at > 2 * MAX_EXPR_DEPTH {
        return at;
    }
    let children = e.children();
    children.into_iter().map(|c| depth(c, at + 1)).max().unwrap_or(at + 1)
}
