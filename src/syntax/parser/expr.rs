//! Expressions from pest's tree: operator chains folded by Go's precedence without
//! recursion, operands and primaries, map references; tree depth capped as trees are built.

use super::literals::Number;
use super::{Built, Cx, Fatal, Rule, MAX_EXPR_DEPTH};
use crate::diag::Diagnostic;
use crate::syntax::ast::*;
use pest::iterators::Pair;

impl Cx<'_> {
    pub(super) fn node(&mut self, kind: ExprKind, span: Span) -> Expr {
        let id = ExprId(*self.next_id);
        *self.next_id = self.next_id.wrapping_add(1);
        Expr { id, kind, span }
    }

    /// A node over children of depth `below`; fatal when the tree gets too deep.
    pub(super) fn built(&mut self, kind: ExprKind, span: Span, below: u32) -> Fatal<Built> {
        let depth = below + 1;
        if depth > MAX_EXPR_DEPTH {
            return Err(Diagnostic::error(span, "expression too deeply nested")
                .label(format!("more than {MAX_EXPR_DEPTH} levels"))
                .hint("split it with `:=` variables"));
        }
        Ok(Built { expr: self.node(kind, span), depth })
    }

    /// `operand (op operand)*`, folded by precedence with an explicit stack.
    pub(super) fn expr(&mut self, p: Pair<Rule>) -> Fatal<Built> {
        let whole = self.span(&p);
        let mut operands: Vec<Built> = Vec::new();
        let mut ops: Vec<BinOp> = Vec::new();
        for q in p.into_inner() {
            if q.as_rule() == Rule::operand {
                operands.push(self.operand(q)?);
                continue;
            }
            let Some(op) = bin_op(q.as_rule()) else { continue };
            while let Some(&top) = ops.last() {
                if precedence(top) < precedence(op) {
                    break;
                }
                ops.pop();
                self.reduce(&mut operands, top)?;
            }
            ops.push(op);
        }
        while let Some(op) = ops.pop() {
            self.reduce(&mut operands, op)?;
        }
        operands.pop().ok_or_else(|| Diagnostic::error(whole, "empty expression"))
    }

    pub(super) fn reduce(&mut self, operands: &mut Vec<Built>, op: BinOp) -> Fatal<()> {
        let (Some(rhs), Some(lhs)) = (operands.pop(), operands.pop()) else {
            return Ok(());
        };
        let span = lhs.expr.span.to(rhs.expr.span);
        let below = lhs.depth.max(rhs.depth);
        let kind = ExprKind::Binary { op, lhs: Box::new(lhs.expr), rhs: Box::new(rhs.expr) };
        operands.push(self.built(kind, span, below)?);
        Ok(())
    }

    /// `prefix* primary postfix*`: postfixes bind tighter than prefixes, as in Go.
    pub(super) fn operand(&mut self, p: Pair<Rule>) -> Fatal<Built> {
        let whole = self.span(&p);
        let mut prefixes = Vec::new();
        let mut cur: Option<Built> = None;
        for q in p.into_inner() {
            let span = self.span(&q);
            match q.as_rule() {
                Rule::neg | Rule::not | Rule::deref if cur.is_none() => prefixes.push((q.as_rule(), span.start)),
                Rule::assert => {
                    let Some(base) = cur.take() else { continue };
                    let whole = base.expr.span.to(span);
                    let ty = match q.into_inner().next() {
                        Some(t) => Ident { name: t.as_str().to_string(), span: self.span(&t) },
                        None => Ident { name: String::new(), span },
                    };
                    cur = Some(self.built(ExprKind::Assert { base: Box::new(base.expr), ty }, whole, base.depth)?);
                }
                Rule::field | Rule::index => {
                    let Some(base) = cur.take() else { continue };
                    let whole = base.expr.span.to(span);
                    let below = base.depth;
                    let kind = if q.as_rule() == Rule::field {
                        let f = q.into_inner().next();
                        let field = match f {
                            Some(f) => Ident { name: f.as_str().to_string(), span: self.span(&f) },
                            None => Ident { name: String::new(), span },
                        };
                        ExprKind::Field { base: Box::new(base.expr), field }
                    } else {
                        let Some(i) = q.into_inner().next() else { continue };
                        let index = self.expr(i)?;
                        let below = below.max(index.depth);
                        cur = Some(self.built(
                            ExprKind::Index { base: Box::new(base.expr), index: Box::new(index.expr) },
                            whole,
                            below,
                        )?);
                        continue;
                    };
                    cur = Some(self.built(kind, whole, below)?);
                }
                _ => cur = Some(self.primary(q)?),
            }
        }
        let Some(mut cur) = cur else {
            return Err(Diagnostic::error(whole, "missing operand"));
        };
        while let Some((rule, start)) = prefixes.pop() {
            let op = match rule {
                Rule::neg => UnOp::Neg,
                Rule::not => UnOp::Not,
                _ => UnOp::Deref,
            };
            let span = Span { start, ..cur.expr.span };
            cur = self.built(ExprKind::Unary { op, operand: Box::new(cur.expr) }, span, cur.depth)?;
        }
        Ok(cur)
    }

    pub(super) fn primary(&mut self, p: Pair<Rule>) -> Fatal<Built> {
        let span = self.span(&p);
        let kind = match p.as_rule() {
            Rule::paren => {
                let Some(inner) = p.into_inner().next() else {
                    return self.built(ExprKind::Bool(false), span, 0);
                };
                // The parentheses belong to the expression's span.
                let mut b = self.expr(inner)?;
                b.expr.span = span;
                return Ok(b);
            }
            Rule::number => match self.number(p.as_str(), span) {
                Some(Number::Int(v)) => ExprKind::Int(v),
                Some(Number::Duration(ns)) => ExprKind::Duration(ns),
                Some(Number::Float(text)) => ExprKind::Float(text),
                None => ExprKind::Int(0),
            },
            Rule::string => ExprKind::Str(self.string(p)),
            Rule::kw_true => ExprKind::Bool(true),
            Rule::kw_false => ExprKind::Bool(false),
            Rule::self_var => {
                let name = self.field_name(&mut p.into_inner(), span);
                ExprKind::SelfVar(name.name)
            }
            Rule::map_ref => {
                let (map, depth) = self.map_ref(p)?;
                return self.built(ExprKind::Map(map), span, depth);
            }
            Rule::call => {
                let mut inner = p.into_inner();
                let func = match inner.next() {
                    Some(n) => Ident { name: n.as_str().to_string(), span: self.span(&n) },
                    None => Ident { name: String::new(), span },
                };
                let (mut args, mut names) = (Vec::new(), Vec::new());
                let mut named = None;
                let mut below = 0;
                for a in inner {
                    if a.as_rule() == Rule::key_name {
                        named = self.key_name(a);
                        continue;
                    }
                    let b = self.expr(a)?;
                    below = below.max(b.depth);
                    args.push(b.expr);
                    names.push(named.take());
                }
                return self.built(ExprKind::Call { func, args, names }, span, below);
            }
            _ => ExprKind::Name(p.as_str().to_string()),
        };
        self.built(kind, span, 0)
    }

    /// `@name[k, ...]`, and the depth of its deepest key.
    pub(super) fn map_ref(&mut self, p: Pair<Rule>) -> Fatal<(MapRef, u32)> {
        let span = self.span(&p);
        let mut name = Ident { name: String::new(), span };
        let (mut keys, mut names) = (Vec::new(), Vec::new());
        let mut below = 0;
        for q in p.into_inner() {
            match q.as_rule() {
                // The ident's span covers the `@`: that is what a user points at.
                Rule::map_name => name = Ident { name: q.as_str()[1..].to_string(), span: self.span(&q) },
                _ => {
                    let mut named = None;
                    for k in q.into_inner() {
                        if k.as_rule() == Rule::key_name {
                            named = self.key_name(k);
                            continue;
                        }
                        let b = self.expr(k)?;
                        below = below.max(b.depth);
                        keys.push(b.expr);
                        names.push(named.take());
                    }
                }
            }
        }
        Ok((MapRef { name, keys, names, span }, below))
    }

    /// `method:` before a map key: the name (checked as a label name by the checker).
    pub(super) fn key_name(&mut self, p: Pair<Rule>) -> Option<Ident> {
        let n = p.into_inner().next()?;
        Some(Ident { name: n.as_str().to_string(), span: self.span(&n) })
    }
}

fn bin_op(rule: Rule) -> Option<BinOp> {
    Some(match rule {
        Rule::or => BinOp::Or,
        Rule::and => BinOp::And,
        Rule::eq => BinOp::Eq,
        Rule::ne => BinOp::Ne,
        Rule::lt => BinOp::Lt,
        Rule::le => BinOp::Le,
        Rule::gt => BinOp::Gt,
        Rule::ge => BinOp::Ge,
        Rule::add => BinOp::Add,
        Rule::sub => BinOp::Sub,
        Rule::bor => BinOp::BitOr,
        Rule::bxor => BinOp::BitXor,
        Rule::mul => BinOp::Mul,
        Rule::div => BinOp::Div,
        Rule::rem => BinOp::Rem,
        Rule::shl => BinOp::Shl,
        Rule::shr => BinOp::Shr,
        Rule::band => BinOp::BitAnd,
        _ => return None,
    })
}

/// Go's binary precedence: higher binds tighter.
fn precedence(op: BinOp) -> u8 {
    use BinOp::*;
    match op {
        Or => 1,
        And => 2,
        Eq | Ne | Lt | Le | Gt | Ge => 3,
        Add | Sub | BitOr | BitXor => 4,
        Mul | Div | Rem | Shl | Shr | BitAnd => 5,
    }
}
