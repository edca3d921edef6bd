//! What the syntax tests compare: a script's AST rendered compactly (one line per item
//! and statement, expressions as s-expressions), one expression's, its shape as JSON
//! without spans, and the rendered diagnostics of a script that must not parse.

use gtrace::diag::{self, Sources};
use gtrace::syntax::ast::*;
use gtrace::syntax::parse;

pub fn parse_ok(src: &str) -> Script {
    let mut id = 0;
    match parse(src, 0, &mut id) {
        Ok(s) => s,
        Err(d) => panic!("unexpected error:\n{}", err_text(src, &d)),
    }
}

fn err_text(src: &str, diags: &[diag::Diagnostic]) -> String {
    let mut sources = Sources::default();
    sources.add("t.gt", src);
    diag::render(&sources, diags)
}

/// The AST, compact: one line per item and statement, expressions as s-expressions.
pub fn ast(src: &str) -> String {
    let script = parse_ok(src);
    let mut out = String::new();
    for item in &script.items {
        match item {
            Item::Use(u) => out += &format!("use {:?}\n", u.name),
            Item::Fn(f) => {
                let params: Vec<&str> = f.params.iter().map(|p| p.name.as_str()).collect();
                out += &format!("fn {}({})", f.name.name, params.join(", "));
                match &f.body {
                    FnBody::Expr(e) => out += &format!(" = {}\n", expr(e)),
                    FnBody::Block(b) => {
                        out += "\n";
                        block(&mut out, b, 1);
                    }
                }
            }
            Item::Probe(p) => {
                let header = &src[p.span.start as usize..p.span.end as usize];
                let kind = match &p.kind {
                    ProbeKind::Entry(s) => format!("entry {}", syms(s)),
                    ProbeKind::Return(s) => format!("return {}", syms(s)),
                    ProbeKind::Panic(s) => format!("panic {}", syms(s)),
                    ProbeKind::Begin => "begin".into(),
                    ProbeKind::End => "end".into(),
                    ProbeKind::Interval { nanos, .. } => format!("interval {nanos}ns"),
                    ProbeKind::Line(l) => format!("line {:?} {}", l.file, l.line),
                };
                out += &format!("probe {kind}  [{header}]\n");
                block(&mut out, &p.body, 1);
            }
        }
    }
    for p in &script.params {
        out += &format!("param {} = {}\n", p.name.name, expr(&p.value));
    }
    out
}

fn syms(s: &[SymbolPattern]) -> String {
    let v: Vec<String> = s
        .iter()
        .map(|s| {
            let w = if s.is_wildcard() { " (wildcard)" } else { "" };
            if s.quoted {
                format!("{:?}{w}", s.text)
            } else {
                s.text.clone()
            }
        })
        .collect();
    v.join(", ")
}

fn block(out: &mut String, b: &Block, depth: usize) {
    for s in &b.stmts {
        stmt(out, s, depth);
    }
}

fn stmt(out: &mut String, s: &Stmt, depth: usize) {
    let pad = "  ".repeat(depth);
    match &s.kind {
        StmtKind::Let { name, value } => *out += &format!("{pad}{} := {}\n", name.name, expr(value)),
        StmtKind::AssignSelf { name, value } => *out += &format!("{pad}self.{} = {}\n", name.name, expr(value)),
        StmtKind::AssignMap { map, value } => *out += &format!("{pad}{} = {}\n", map_ref(map), expr(value)),
        StmtKind::Expr(e) => *out += &format!("{pad}{}\n", expr(e)),
        StmtKind::If { cond, then, otherwise } => {
            *out += &format!("{pad}if {}\n", expr(cond));
            block(out, then, depth + 1);
            match otherwise {
                None => {}
                Some(Else::Block(b)) => {
                    *out += &format!("{pad}else\n");
                    block(out, b, depth + 1);
                }
                Some(Else::If(s)) => {
                    *out += &format!("{pad}else ");
                    let mut inner = String::new();
                    stmt(&mut inner, s, depth);
                    *out += inner.trim_start();
                }
            }
        }
    }
}

fn map_ref(m: &MapRef) -> String {
    if m.keys.is_empty() {
        format!("@{}", m.name.name)
    } else {
        let k: Vec<String> = m
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| match m.key_name(i) {
                Some(n) => format!("{}: {}", n.name, expr(k)),
                None => expr(k),
            })
            .collect();
        format!("@{}[{}]", m.name.name, k.join(", "))
    }
}

fn expr(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Int(v) => v.to_string(),
        ExprKind::Float(t) => format!("float {t}"),
        ExprKind::Str(s) => format!("{s:?}"),
        ExprKind::Bool(b) => b.to_string(),
        ExprKind::Duration(ns) => format!("{ns}ns"),
        ExprKind::Name(n) => n.clone(),
        ExprKind::SelfVar(n) => format!("self.{n}"),
        ExprKind::Map(m) => map_ref(m),
        ExprKind::Field { base, field } => format!("(. {} {})", expr(base), field.name),
        ExprKind::Index { base, index } => format!("(idx {} {})", expr(base), expr(index)),
        ExprKind::Assert { base, ty } => format!("(assert {} {})", expr(base), ty.name),
        ExprKind::Unary { op, operand } => {
            let op = match op {
                UnOp::Neg => "neg",
                UnOp::Not => "!",
                UnOp::Deref => "deref",
            };
            format!("({op} {})", expr(operand))
        }
        ExprKind::Binary { op, lhs, rhs } => format!("({} {} {})", op.symbol(), expr(lhs), expr(rhs)),
        ExprKind::Call { func, args, .. } => {
            let a: Vec<String> = args.iter().map(expr).collect();
            format!("{}({})", func.name, a.join(", "))
        }
    }
}

/// One expression, through a `begin` probe.
pub fn ex(src: &str) -> String {
    let s = ast(&format!("on begin {{ {src} }}"));
    s.lines().nth(1).unwrap_or("").trim().to_string()
}

/// The rendered diagnostics of a script that must not parse.
pub fn err(src: &str) -> String {
    let mut id = 0;
    match parse(src, 0, &mut id) {
        Ok(s) => panic!("parsed but should not: {s:?}"),
        Err(d) => err_text(src, &d),
    }
}

/// The script as JSON without spans: to compare trees that differ only in layout.
pub fn shape(src: &str) -> serde_json::Value {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                m.remove("span");
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(parse_ok(src)).expect("AST serializes");
    strip(&mut v);
    v
}
