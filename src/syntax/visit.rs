//! Walking the tree: each node's children in source order, so that a pass reaches the
//! nodes it cares about without matching every kind of node. The tree is a value; these
//! only lend out its parts.

use super::ast::*;

impl Expr {
    /// The expressions directly under this one.
    pub fn children(&self) -> Vec<&Expr> {
        match &self.kind {
            ExprKind::Map(m) => m.keys.iter().collect(),
            ExprKind::Field { base, .. } | ExprKind::Assert { base, .. } => vec![base],
            ExprKind::Index { base, index } => vec![base, index],
            ExprKind::Unary { operand, .. } => vec![operand],
            ExprKind::Binary { lhs, rhs, .. } => vec![lhs, rhs],
            ExprKind::Call { args, .. } => args.iter().collect(),
            ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Str(_)
            | ExprKind::Bool(_)
            | ExprKind::Duration(_)
            | ExprKind::Name(_)
            | ExprKind::SelfVar(_) => Vec::new(),
        }
    }

    /// The expressions directly under this one, to change in place.
    pub fn children_mut(&mut self) -> Vec<&mut Expr> {
        match &mut self.kind {
            ExprKind::Map(m) => m.keys.iter_mut().collect(),
            ExprKind::Field { base, .. } | ExprKind::Assert { base, .. } => vec![base],
            ExprKind::Index { base, index } => vec![base, index],
            ExprKind::Unary { operand, .. } => vec![operand],
            ExprKind::Binary { lhs, rhs, .. } => vec![lhs, rhs],
            ExprKind::Call { args, .. } => args.iter_mut().collect(),
            ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Str(_)
            | ExprKind::Bool(_)
            | ExprKind::Duration(_)
            | ExprKind::Name(_)
            | ExprKind::SelfVar(_) => Vec::new(),
        }
    }

    /// This expression and every one under it, parents before children.
    pub fn walk<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        f(self);
        for c in self.children() {
            c.walk(f);
        }
    }
}

impl Stmt {
    /// The expressions directly in this statement (map keys included), in source order.
    pub fn exprs(&self) -> Vec<&Expr> {
        match &self.kind {
            StmtKind::Let { value, .. } | StmtKind::AssignSelf { value, .. } => vec![value],
            StmtKind::AssignMap { map, value } => map.keys.iter().chain([value]).collect(),
            StmtKind::Expr(e) => vec![e],
            StmtKind::If { cond, .. } => vec![cond],
        }
    }
}

impl Block {
    /// Every statement of the block and of the blocks under it, in source order, each
    /// before the statements under it (an `else if` is a statement of its own).
    pub fn walk_stmts<'a>(&'a self, f: &mut dyn FnMut(&'a Stmt)) {
        for s in &self.stmts {
            s.walk_stmts(f);
        }
    }

    /// Every expression in the block and the blocks under it, in source order, each
    /// node before its children.
    pub fn walk_exprs<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        for s in &self.stmts {
            s.walk_exprs(f);
        }
    }
}

impl Stmt {
    /// This statement, then every statement under it, in source order.
    pub fn walk_stmts<'a>(&'a self, f: &mut dyn FnMut(&'a Stmt)) {
        f(self);
        if let StmtKind::If { then, otherwise, .. } = &self.kind {
            then.walk_stmts(f);
            match otherwise {
                Some(Else::Block(b)) => b.walk_stmts(f),
                Some(Else::If(s)) => s.walk_stmts(f),
                None => {}
            }
        }
    }

    /// Every expression in the statement and the blocks under it, in source order.
    pub fn walk_exprs<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        for e in self.exprs() {
            e.walk(f);
        }
        if let StmtKind::If { then, otherwise, .. } = &self.kind {
            then.walk_exprs(f);
            match otherwise {
                Some(Else::Block(b)) => b.walk_exprs(f),
                Some(Else::If(s)) => s.walk_exprs(f),
                None => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::syntax::ast::*;

    fn body(text: &str) -> Block {
        let script = crate::syntax::parse(text, 0, &mut 0).expect("parses");
        match script.items.into_iter().next() {
            Some(Item::Probe(p)) => p.body,
            _ => panic!("a probe"),
        }
    }

    #[test]
    fn statements_and_expressions_in_source_order_through_else_if_chains() {
        let b = body("on begin { x := 1; if a { y := 2 } else if b + c { z := 3 } else { w := f(4, 5) } }");
        let mut lets = Vec::new();
        b.walk_stmts(&mut |s| {
            if let StmtKind::Let { name, .. } = &s.kind {
                lets.push(name.name.clone());
            }
        });
        assert_eq!(lets, ["x", "y", "z", "w"]);
        let mut names = Vec::new();
        b.walk_exprs(&mut |e| match &e.kind {
            ExprKind::Name(n) => names.push(n.clone()),
            ExprKind::Int(v) => names.push(v.to_string()),
            _ => {}
        });
        assert_eq!(names, ["1", "a", "2", "b", "c", "3", "4", "5"]);
    }
}
