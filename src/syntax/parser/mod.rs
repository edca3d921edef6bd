//! Text to `ast::Script`: a lexical pre-scan (`prescan`: unterminated strings, bracket
//! nesting), the pest grammar in grammar/gtrace.pest (its errors said in words: `errors`),
//! and the conversion of pest's tree into `ast`: items and statements here, expressions
//! with operator precedence in `expr`, numbers, durations and string escapes in
//! `literals`, checking what the grammar lets through loosely (keywords used as names,
//! bare symbols).
//!
//! Never panics and never recurses without a bound: bracket nesting is capped by the
//! pre-scan, operator chains are folded iteratively, and expression trees are capped in
//! depth, so later passes can recurse over the tree safely.

mod errors;
mod expr;
mod literals;
mod prescan;

use crate::diag::Diagnostic;
use crate::syntax::ast::*;
use errors::syntax_error;
use literals::Number;
use pest::iterators::Pair;
use pest::Parser as _;
use pest_derive::Parser;
use prescan::prescan;

#[derive(Parser)]
#[grammar = "../grammar/gtrace.pest"]
struct Grammar;

/// Deepest nesting of `(`, `[` and `{` in one file.
pub const MAX_NESTING: usize = 64;
/// Deepest expression tree (`a + b + ...` is one level per operator).
pub const MAX_EXPR_DEPTH: u32 = 256;
/// Longest `if ... else if ...` chain.
pub const MAX_ELSE_IF: usize = 128;

/// Parse one source file. `file` goes into every Span; `next_id` numbers ExprIds (shared
/// across files).
pub fn parse(text: &str, file: u32, next_id: &mut u32) -> Result<Script, Vec<Diagnostic>> {
    let scan = prescan(text, file).map_err(|d| vec![d])?;
    // Expected-token lists for error messages; a process-wide switch in pest.
    pest::set_error_detail(true);
    let mut pairs = match Grammar::parse(Rule::script, text) {
        Ok(pairs) => pairs,
        Err(e) => return Err(vec![syntax_error(&e, text, file, &scan)]),
    };
    let Some(root) = pairs.next() else {
        return Err(vec![Diagnostic::error(Span::new(file, 0, 0), "empty parse tree")]);
    };
    let mut cx = Cx { file, next_id, diags: Vec::new() };
    match cx.script(root) {
        Ok(script) if cx.diags.is_empty() => Ok(script),
        Ok(_) => Err(cx.diags),
        Err(fatal) => {
            cx.diags.push(fatal);
            Err(cx.diags)
        }
    }
}

pub(super) const KEYWORDS: &[&str] =
    &["on", "entry", "return", "begin", "end", "interval", "if", "else", "fn", "use", "self", "true", "false"];

/// An expression with the depth of its tree, so that depth is checked as trees are built.
pub(super) struct Built {
    pub(super) expr: Expr,
    pub(super) depth: u32,
}

/// Conversion state. Methods push recoverable errors into `diags` and carry on; an `Err`
/// is fatal (a tree too deep to build).
pub(super) struct Cx<'n> {
    file: u32,
    next_id: &'n mut u32,
    diags: Vec<Diagnostic>,
}

pub(super) type Fatal<T> = Result<T, Diagnostic>;

impl Cx<'_> {
    /// The pair's span without trailing layout: pest gives a rule that ends in an optional
    /// or repeated part (`a ~ b*`) the whitespace and comments before the failed attempt.
    fn span(&self, p: &Pair<Rule>) -> Span {
        Span::new(self.file, p.as_span().start(), end_of(p))
    }

    fn script(&mut self, root: Pair<Rule>) -> Fatal<Script> {
        let mut items = Vec::new();
        let mut params = Vec::new();
        for p in root.into_inner() {
            match p.as_rule() {
                Rule::use_item => items.push(Item::Use(self.use_item(p))),
                Rule::param_item => params.push(self.param_item(p)?),
                Rule::fn_item => items.push(Item::Fn(self.fn_item(p)?)),
                Rule::probe => items.push(Item::Probe(self.probe(p)?)),
                _ => {}
            }
        }
        Ok(Script { items, params })
    }

    fn param_item(&mut self, p: Pair<Rule>) -> Fatal<Param> {
        let span = self.span(&p);
        let mut inner = p.into_inner();
        let name = match inner.find(|q| q.as_rule() == Rule::decl_name) {
            Some(n) => self.decl_name(n, "a parameter name"),
            None => Ident { name: String::new(), span },
        };
        let value = self.next_expr(&mut inner, span)?;
        Ok(Param { name, value, span })
    }

    fn use_item(&mut self, p: Pair<Rule>) -> Use {
        let span = self.span(&p);
        let name = p.into_inner().find(|q| q.as_rule() == Rule::string).map(|s| self.string(s)).unwrap_or_default();
        Use { name, span }
    }

    fn fn_item(&mut self, p: Pair<Rule>) -> Fatal<FnDef> {
        let mut name = None;
        let mut params = Vec::new();
        let mut span = self.span(&p);
        let mut body = None;
        for q in p.into_inner() {
            match q.as_rule() {
                Rule::fn_head => {
                    span = self.span(&q);
                    for r in q.into_inner().filter(|r| r.as_rule() == Rule::decl_name) {
                        if name.is_none() {
                            name = Some(self.decl_name(r, "a function name"));
                        } else {
                            params.push(self.decl_name(r, "a parameter name"));
                        }
                    }
                }
                Rule::expr => body = Some(FnBody::Expr(self.expr(q)?.expr)),
                Rule::brace_block => body = Some(FnBody::Block(self.block(q)?)),
                _ => {}
            }
        }
        let name = name.unwrap_or(Ident { name: String::new(), span });
        let body = body.unwrap_or(FnBody::Block(Block { stmts: Vec::new(), span }));
        Ok(FnDef { name, params, body, span })
    }

    /// A declared name; a keyword is reported here rather than as pest's "expected".
    fn decl_name(&mut self, p: Pair<Rule>, role: &str) -> Ident {
        let ident = Ident { name: p.as_str().to_string(), span: self.span(&p) };
        if KEYWORDS.contains(&ident.name.as_str()) {
            self.diags.push(
                Diagnostic::error(ident.span, format!("`{}` is a keyword", ident.name))
                    .label(format!("a keyword cannot be {role}"))
                    .hint(format!("rename it, e.g. `{}_`", ident.name)),
            );
        }
        ident
    }

    fn probe(&mut self, p: Pair<Rule>) -> Fatal<Probe> {
        let whole = self.span(&p);
        let mut kind = ProbeKind::Begin;
        let mut head_end = whole.end;
        let mut body = Block { stmts: Vec::new(), span: whole };
        for q in p.into_inner() {
            match q.as_rule() {
                Rule::kw_on => {}
                Rule::brace_block | Rule::angle_block => body = self.block(q)?,
                rule => {
                    head_end = self.span(&q).end;
                    kind = match rule {
                        Rule::head_begin => ProbeKind::Begin,
                        Rule::head_end => ProbeKind::End,
                        Rule::head_interval => self.interval(q),
                        Rule::head_return => ProbeKind::Return(self.symbols(q)),
                        Rule::head_line => self.line(q),
                        Rule::head_panic => ProbeKind::Panic(self.symbols(q)),
                        _ => ProbeKind::Entry(self.symbols(q)),
                    };
                }
            }
        }
        Ok(Probe { kind, body, span: Span { end: head_end, ..whole } })
    }

    /// `line "FILE:LINE"`: the file is everything before the last `:`.
    fn line(&mut self, head: Pair<Rule>) -> ProbeKind {
        let Some(q) = head.into_inner().find(|q| q.as_rule() == Rule::string) else {
            return ProbeKind::Line(LineSpec { file: String::new(), line: 0, span: Span::default() });
        };
        let span = self.span(&q);
        let text = self.string(q);
        let parsed = text.rsplit_once(':').and_then(|(file, line)| {
            let line: u32 = line.parse().ok().filter(|l| *l > 0)?;
            (!file.is_empty()).then(|| (file.to_string(), line))
        });
        let (file, line) = parsed.unwrap_or_else(|| {
            self.diags.push(
                Diagnostic::error(span, format!("`{text}` is not a source line"))
                    .label("expected \"FILE:LINE\"")
                    .hint("name a file (or the end of its path) and a line from 1 on: \"main.go:42\", \"server/handler.go:17\""),
            );
            (text.clone(), 0)
        });
        ProbeKind::Line(LineSpec { file, line, span })
    }

    fn interval(&mut self, head: Pair<Rule>) -> ProbeKind {
        let Some(n) = head.into_inner().find(|q| q.as_rule() == Rule::number) else {
            return ProbeKind::Interval { nanos: 0, span: Span::default() };
        };
        let span = self.span(&n);
        let nanos =
            match self.number(n.as_str(), span) {
                Some(Number::Duration(ns)) => ns,
                Some(Number::Float(_)) => {
                    self.diags.push(
                        Diagnostic::error(span, "an interval needs a unit")
                            .label("a number without a unit")
                            .hint("write a whole number of a unit, such as `1500ms`"),
                    );
                    0
                }
                Some(Number::Int(_)) => {
                    self.diags.push(
                        Diagnostic::error(span, "an interval needs a unit")
                            .label("a number without a unit")
                            .hint(format!("write a duration such as `{}s` or `{}ms`", n.as_str(), n.as_str())),
                    );
                    0
                }
                None => 0,
            };
        ProbeKind::Interval { nanos, span }
    }

    fn symbols(&mut self, head: Pair<Rule>) -> Vec<SymbolPattern> {
        let mut out = Vec::new();
        for q in head.into_inner() {
            let span = self.span(&q);
            match q.as_rule() {
                Rule::sym_quoted => {
                    let text = q.into_inner().next().map(|s| self.string(s)).unwrap_or_default();
                    if text.is_empty() {
                        self.diags.push(Diagnostic::error(span, "empty function name").label("nothing to probe"));
                    }
                    out.push(SymbolPattern { text, quoted: true, span });
                }
                Rule::sym_bare => {
                    let text = q.as_str().to_string();
                    if text.contains('*') {
                        self.diags.push(
                            Diagnostic::error(span, "a bare function name cannot hold `*`")
                                .label("wildcards need quotes")
                                .hint(format!("quote it: `on \"{}\" ...`", crate::diag::echoed(&text))),
                        );
                    } else if !text.contains('.') {
                        self.diags.push(
                            Diagnostic::error(span, format!("`{}` has no package", crate::diag::echoed(&text)))
                                .label("a function is named with its package")
                                .hint(format!("write `main.{}`, or quote a full name", crate::diag::echoed(&text))),
                        );
                    }
                    out.push(SymbolPattern { text, quoted: false, span });
                }
                _ => {}
            }
        }
        out
    }

    fn block(&mut self, p: Pair<Rule>) -> Fatal<Block> {
        let span = self.span(&p);
        let mut stmts = Vec::new();
        for q in p.into_inner() {
            if q.as_rule() != Rule::angle_close {
                stmts.push(self.stmt(q)?);
            }
        }
        Ok(Block { stmts, span })
    }

    fn stmt(&mut self, p: Pair<Rule>) -> Fatal<Stmt> {
        let span = self.span(&p);
        let rule = p.as_rule();
        if rule == Rule::if_stmt {
            return self.if_stmt(p);
        }
        let mut inner = p.into_inner();
        let kind = match rule {
            Rule::let_stmt => {
                let name = match inner.next() {
                    Some(n) => self.decl_name(n, "a variable name"),
                    None => Ident { name: String::new(), span },
                };
                StmtKind::Let { name, value: self.next_expr(&mut inner, span)? }
            }
            Rule::self_assign => {
                let name = self.field_name(&mut inner, span);
                StmtKind::AssignSelf { name, value: self.next_expr(&mut inner, span)? }
            }
            Rule::map_assign => {
                let map = match inner.next() {
                    Some(m) => self.map_ref(m)?.0,
                    None => MapRef::new(Ident { name: String::new(), span }, Vec::new(), span),
                };
                StmtKind::AssignMap { map, value: self.next_expr(&mut inner, span)? }
            }
            _ => StmtKind::Expr(self.next_expr(&mut inner, span)?),
        };
        Ok(Stmt { kind, span })
    }

    /// The name after `self.` (skipping the `self` keyword pair).
    fn field_name(&mut self, inner: &mut pest::iterators::Pairs<Rule>, span: Span) -> Ident {
        match inner.find(|q| q.as_rule() == Rule::field_name) {
            Some(f) => Ident { name: f.as_str().to_string(), span: self.span(&f) },
            None => Ident { name: String::new(), span },
        }
    }

    fn next_expr(&mut self, inner: &mut pest::iterators::Pairs<Rule>, span: Span) -> Fatal<Expr> {
        match inner.find(|q| q.as_rule() == Rule::expr) {
            Some(e) => Ok(self.expr(e)?.expr),
            None => Ok(self.node(ExprKind::Bool(false), span)),
        }
    }

    /// `if a {} else if b {} else {}`: flat in the grammar, nested here from the back.
    fn if_stmt(&mut self, p: Pair<Rule>) -> Fatal<Stmt> {
        let whole = self.span(&p);
        // (start of the `if`, condition, then-block) of the head and of every `else if`.
        let mut arms: Vec<(u32, Expr, Block)> = Vec::new();
        let mut otherwise: Option<Else> = None;
        let mut head_cond = None;
        for q in p.into_inner() {
            match q.as_rule() {
                Rule::expr => head_cond = Some(self.expr(q)?.expr),
                Rule::brace_block => {
                    let then = self.block(q)?;
                    if let Some(cond) = head_cond.take() {
                        arms.push((whole.start, cond, then));
                    }
                }
                Rule::else_if => {
                    if arms.len() > MAX_ELSE_IF {
                        return Err(Diagnostic::error(self.span(&q), "`else if` chain too long")
                            .label(format!("more than {MAX_ELSE_IF} arms"))
                            .hint("split the chain, or use a map"));
                    }
                    let mut start = whole.start;
                    let mut cond = None;
                    for r in q.into_inner() {
                        match r.as_rule() {
                            Rule::kw_if => start = r.as_span().start() as u32,
                            Rule::expr => cond = Some(self.expr(r)?.expr),
                            Rule::brace_block => {
                                let then = self.block(r)?;
                                if let Some(cond) = cond.take() {
                                    arms.push((start, cond, then));
                                }
                            }
                            _ => {}
                        }
                    }
                }
                Rule::else_clause => {
                    if let Some(b) = q.into_inner().find(|r| r.as_rule() == Rule::brace_block) {
                        otherwise = Some(Else::Block(self.block(b)?));
                    }
                }
                _ => {}
            }
        }
        while let Some((start, cond, then)) = arms.pop() {
            let stmt =
                Stmt { kind: StmtKind::If { cond, then, otherwise: otherwise.take() }, span: Span { start, ..whole } };
            if arms.is_empty() {
                return Ok(stmt);
            }
            otherwise = Some(Else::If(Box::new(stmt)));
        }
        Err(Diagnostic::error(whole, "malformed `if`"))
    }

    // ---- expressions ----
}

/// Where a pair really ends: for rules whose last element is another rule, where that
/// rule ends (the chain is short: it stops at the first rule ending in a token).
pub(super) fn end_of(p: &Pair<Rule>) -> usize {
    use Rule::*;
    let mut p = p.clone();
    loop {
        let ends_with_rule = matches!(
            p.as_rule(),
            expr | operand
                | field
                | map_ref
                | self_var
                | if_stmt
                | else_if
                | else_clause
                | let_stmt
                | self_assign
                | map_assign
                | expr_stmt
                | head_entry
                | head_return
                | head_panic
                | head_bare
                | head_interval
                | head_begin
                | head_end
                | fn_item
                | use_item
                | probe
                | sym_quoted
        );
        match p.clone().into_inner().last() {
            Some(last) if ends_with_rule => p = last,
            _ => return p.as_span().end(),
        }
    }
}
