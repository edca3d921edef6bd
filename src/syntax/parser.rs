//! Text to `ast::Script`: a lexical pre-scan (unterminated strings, bracket nesting), the
//! pest grammar in grammar/gtrace.pest, and the conversion of pest's tree into `ast`,
//! which applies operator precedence and checks what the grammar lets through loosely
//! (numbers, durations, escapes, keywords used as names, bare symbols).
//!
//! Never panics and never recurses without a bound: bracket nesting is capped by the
//! pre-scan, operator chains are folded iteratively, and expression trees are capped in
//! depth, so later passes can recurse over the tree safely.

use crate::diag::Diagnostic;
use crate::syntax::ast::*;
use pest::error::{ErrorVariant, InputLocation};
use pest::iterators::Pair;
use pest::Parser as _;
use pest_derive::Parser;

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

// ---- pre-scan ---------------------------------------------------------------------------

/// What the pre-scan learnt: the brackets still open at the end of the file.
struct Scan {
    unclosed: Vec<(char, usize)>,
}

/// Finds unterminated strings and over-deep bracket nesting before pest sees the text.
/// It reads strings and comments exactly as the grammar does.
fn prescan(text: &str, file: u32) -> Result<Scan, Diagnostic> {
    let bytes = text.as_bytes();
    let mut stack: Vec<(char, usize)> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'#' => i = line_end(text, i),
            b'/' if bytes.get(i + 1) == Some(&b'/') => i = line_end(text, i),
            b'"' => {
                let start = i;
                i += 1;
                loop {
                    match bytes.get(i) {
                        None | Some(b'\n') | Some(b'\r') => {
                            let end = line_end(text, start);
                            return Err(Diagnostic::error(Span::new(file, start, end), "unterminated string")
                                .label("this string has no closing `\"`")
                                .hint("a string ends on the line it starts; write a line break as `\\n`"));
                        }
                        Some(b'\\') if matches!(bytes.get(i + 1), Some(b'\n') | Some(b'\r') | None) => i += 1,
                        Some(b'\\') => i += 2,
                        Some(b'"') => {
                            i += 1;
                            break;
                        }
                        Some(_) => i += 1,
                    }
                }
            }
            open @ (b'(' | b'[' | b'{') => {
                stack.push((open as char, i));
                if stack.len() > MAX_NESTING {
                    return Err(Diagnostic::error(Span::new(file, i, i + 1), "brackets nested too deeply")
                        .label(format!("more than {MAX_NESTING} levels of brackets"))
                        .hint("split the expression with `:=` variables"));
                }
                i += 1;
            }
            close @ (b')' | b']' | b'}') => {
                let open = match close {
                    b')' => '(',
                    b']' => '[',
                    _ => '{',
                };
                if stack.last().map(|(c, _)| *c) == Some(open) {
                    stack.pop();
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    Ok(Scan { unclosed: stack })
}

/// The byte offset of the end of the line holding `i` (before the newline).
fn line_end(text: &str, i: usize) -> usize {
    text.get(i..).and_then(|rest| rest.find(['\n', '\r'])).map(|n| i + n).unwrap_or(text.len())
}

// ---- syntax errors ----------------------------------------------------------------------

/// Turns pest's error into a diagnostic: the offending token underlined, and pest's
/// expected-token list said in words.
fn syntax_error(e: &pest::error::Error<Rule>, text: &str, file: u32, scan: &Scan) -> Diagnostic {
    let pos = match e.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((s, _)) => s,
    }
    .min(text.len());
    let (found, end) = found_token(text, pos);
    let span = Span::new(file, pos, end);
    let positives: Vec<Rule> = match &e.variant {
        ErrorVariant::ParsingError { positives, .. } => positives.clone(),
        ErrorVariant::CustomError { message } => {
            // pest's own guards: "stack limit reached", "call limit reached".
            return Diagnostic::error(span, "the script is nested too deeply to parse")
                .label(message.clone())
                .hint("split deep expressions with `:=` variables");
        }
    };
    let tokens: Vec<String> = e
        .parse_attempts()
        .map(|a| {
            a.expected_tokens()
                .into_iter()
                .map(|t| t.to_string())
                // Only literal tokens: not `BUILTIN_RULE` nor a range such as `0..9`.
                .filter(|t| t != "BUILTIN_RULE" && !(t.chars().count() == 4 && t.get(1..3) == Some("..")))
                .collect()
        })
        .unwrap_or_default();
    let expected = expected_words(&positives, &tokens);
    let mut d = Diagnostic::error(span, format!("unexpected {found}"));
    if !expected.is_empty() {
        d = d.label(format!("expected {}", join_or(&expected)));
    }
    let at_end = text[pos..].trim().is_empty() || found == "end of input";
    if at_end {
        if let Some((c, at)) = scan.unclosed.last() {
            let close = match c {
                '(' => ')',
                '[' => ']',
                _ => '}',
            };
            d = d.related(Span::new(file, *at, at + 1), format!("this `{c}` is never closed"));
            d = d.hint(format!("add the missing `{close}`"));
        }
    }
    if found == "`=`" && tokens.iter().any(|t| t == "==") {
        d = d.hint("declare a variable with `:=`; only `self.NAME` and `@MAP[...]` are assigned with `=`");
    }
    if positives.contains(&Rule::head_bare) {
        d = d.hint("a probe is `on entry main.F { ... }`, `on return main.F { ... }`, `on begin { ... }`, `on end { ... }` or `on interval 1s { ... }`");
    }
    if found == "`>`" && tokens.iter().any(|t| t == "on") {
        d = d.hint("this `>` closes nothing: the one-line block `< ... >` ended at an earlier `>`");
    }
    d
}

/// The token at `pos` as the user sees it, and where it ends.
fn found_token(text: &str, pos: usize) -> (String, usize) {
    let rest = &text[pos..];
    let Some(c) = rest.chars().next() else {
        return ("end of input".to_string(), pos);
    };
    if c == '\n' || c == '\r' {
        return ("new line".to_string(), pos);
    }
    if c.is_alphanumeric() || c == '_' {
        let n = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
        let word = &rest[..n];
        let what = if c.is_ascii_digit() { "number" } else { "" };
        let shown = if what.is_empty() { format!("`{word}`") } else { format!("{what} `{word}`") };
        return (shown, pos + n);
    }
    if c == '"' {
        let n = rest[1..].find('"').map(|n| n + 2).unwrap_or(rest.len());
        return ("string".to_string(), pos + n);
    }
    for op in [":=", "==", "!=", "<=", ">=", "&&", "||", "<<", ">>"] {
        if rest.starts_with(op) {
            return (format!("`{op}`"), pos + 2);
        }
    }
    (format!("`{c}`"), pos + c.len_utf8())
}

const OPERATORS: &[&str] =
    &["!=", "%", "&", "&&", "*", "+", "-", "/", "<", "<<", "<=", "==", ">", ">=", ">>", "^", "|", "||"];
const EXPR_START: &[&str] = &["!", "\"", "(", "*", "-", "@", "_", "false", "self", "true", "if"];
const LAYOUT: &[&str] = &["\t", " ", "#", "//", "\u{feff}"];
const NEWLINES: &[&str] = &["\n", "\r\n", "\r"];

/// pest's expected rules and tokens, grouped into the words a user thinks in.
fn expected_words(positives: &[Rule], tokens: &[String]) -> Vec<String> {
    let has = |t: &str| tokens.iter().any(|x| x == t);
    let is_infix = |r: &Rule| {
        use Rule::*;
        matches!(
            r,
            or | and | eq | ne | shl | shr | le | ge | lt | gt | add | sub | bor | bxor | mul | div | rem | band
        )
    };
    let top_level = has("on") && has("fn") && has("use");
    let statement = has("@") && has("if");
    let expression = has("@") && !statement;
    let operator = positives.iter().any(is_infix);
    let probe_head = positives.contains(&Rule::head_bare);

    let mut words: Vec<String> = Vec::new();
    let mut push = |w: String| {
        if !words.contains(&w) {
            words.push(w)
        }
    };
    // Closers and structural tokens first: they are usually what is missing.
    for t in ["}", ")", "]"] {
        if has(t) {
            push(format!("`{t}`"));
        }
    }
    if positives.contains(&Rule::angle_close) {
        push("`>`".to_string());
    }
    if top_level {
        for kw in ["`on`", "`fn`", "`use`", "`param`"] {
            push(kw.to_string());
        }
    }
    if probe_head {
        push("`entry`, `return`, `begin`, `end`, `interval` or a function name".to_string());
    }
    if statement {
        push("a statement".to_string());
    }
    if expression {
        push("an expression".to_string());
    }
    for r in positives {
        let w = match r {
            Rule::number => "a duration such as `1s`",
            Rule::decl_name if !statement => "a name",
            Rule::field_name => "a field name",
            Rule::string | Rule::sym_quoted => "a string",
            Rule::sym_bare => "a function name",
            Rule::brace_block if !has("<") => "a block `{ ... }`",
            _ => continue,
        };
        push(w.to_string());
    }
    for t in tokens {
        let t = t.as_str();
        let skip = LAYOUT.contains(&t)
            || NEWLINES.contains(&t)
            || (top_level && (t == ";" || t == "on" || t == "fn" || t == "use" || t == "param"))
            || (probe_head && matches!(t, "\"" | "*" | "entry" | "return" | "begin" | "end" | "interval"))
            || ((statement || expression) && (EXPR_START.contains(&t) || t == ";"))
            || (operator && (OPERATORS.contains(&t) || t == "." || t == "["))
            || matches!(t, "}" | ")" | "]")
            // The first character of something already named in words.
            || (t == "\"" && positives.iter().any(|r| matches!(r, Rule::string | Rule::sym_quoted)))
            || (matches!(t, "_" | "*")
                && positives.iter().any(|r| matches!(r, Rule::field_name | Rule::decl_name | Rule::sym_bare)))
            || (t == "{" && positives.contains(&Rule::brace_block) && !has("<"));
        if !skip {
            push(format!("`{t}`"));
        }
    }
    // A new line is worth mentioning where it ends something, not where one may be skipped.
    let newline = tokens.iter().any(|t| NEWLINES.contains(&t.as_str())) && has(";");
    if newline && !top_level && !statement && !expression {
        push("a new line".to_string());
    }
    if operator {
        push("an operator".to_string());
    }
    words
}

/// `a`, `a or b`, `a, b or c`.
fn join_or(words: &[String]) -> String {
    match words {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

// ---- parse tree to AST ------------------------------------------------------------------

const KEYWORDS: &[&str] =
    &["on", "entry", "return", "begin", "end", "interval", "if", "else", "fn", "use", "self", "true", "false"];

/// An expression with the depth of its tree, so that depth is checked as trees are built.
struct Built {
    expr: Expr,
    depth: u32,
}

/// Conversion state. Methods push recoverable errors into `diags` and carry on; an `Err`
/// is fatal (a tree too deep to build).
struct Cx<'n> {
    file: u32,
    next_id: &'n mut u32,
    diags: Vec<Diagnostic>,
}

type Fatal<T> = Result<T, Diagnostic>;

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
                        _ => ProbeKind::Entry(self.symbols(q)),
                    };
                }
            }
        }
        Ok(Probe { kind, body, span: Span { end: head_end, ..whole } })
    }

    fn interval(&mut self, head: Pair<Rule>) -> ProbeKind {
        let Some(n) = head.into_inner().find(|q| q.as_rule() == Rule::number) else {
            return ProbeKind::Interval { nanos: 0, span: Span::default() };
        };
        let span = self.span(&n);
        let nanos =
            match self.number(n.as_str(), span) {
                Some(Number::Duration(ns)) => ns,
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
                                .hint(format!("quote it: `on \"{text}\" ...`")),
                        );
                    } else if !text.contains('.') {
                        self.diags.push(
                            Diagnostic::error(span, format!("`{text}` has no package"))
                                .label("a function is named with its package")
                                .hint(format!("write `main.{text}`, or quote a full name")),
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

    fn node(&mut self, kind: ExprKind, span: Span) -> Expr {
        let id = ExprId(*self.next_id);
        *self.next_id = self.next_id.wrapping_add(1);
        Expr { id, kind, span }
    }

    /// A node over children of depth `below`; fatal when the tree gets too deep.
    fn built(&mut self, kind: ExprKind, span: Span, below: u32) -> Fatal<Built> {
        let depth = below + 1;
        if depth > MAX_EXPR_DEPTH {
            return Err(Diagnostic::error(span, "expression too deeply nested")
                .label(format!("more than {MAX_EXPR_DEPTH} levels"))
                .hint("split it with `:=` variables"));
        }
        Ok(Built { expr: self.node(kind, span), depth })
    }

    /// `operand (op operand)*`, folded by precedence with an explicit stack.
    fn expr(&mut self, p: Pair<Rule>) -> Fatal<Built> {
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

    fn reduce(&mut self, operands: &mut Vec<Built>, op: BinOp) -> Fatal<()> {
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
    fn operand(&mut self, p: Pair<Rule>) -> Fatal<Built> {
        let whole = self.span(&p);
        let mut prefixes = Vec::new();
        let mut cur: Option<Built> = None;
        for q in p.into_inner() {
            let span = self.span(&q);
            match q.as_rule() {
                Rule::neg | Rule::not | Rule::deref if cur.is_none() => prefixes.push((q.as_rule(), span.start)),
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

    fn primary(&mut self, p: Pair<Rule>) -> Fatal<Built> {
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
                let mut args = Vec::new();
                let mut below = 0;
                for a in inner {
                    let b = self.expr(a)?;
                    below = below.max(b.depth);
                    args.push(b.expr);
                }
                return self.built(ExprKind::Call { func, args }, span, below);
            }
            _ => ExprKind::Name(p.as_str().to_string()),
        };
        self.built(kind, span, 0)
    }

    /// `@name[k, ...]`, and the depth of its deepest key.
    fn map_ref(&mut self, p: Pair<Rule>) -> Fatal<(MapRef, u32)> {
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
    fn key_name(&mut self, p: Pair<Rule>) -> Option<Ident> {
        let n = p.into_inner().next()?;
        Some(Ident { name: n.as_str().to_string(), span: self.span(&n) })
    }

    // ---- literals ----

    /// Reads an integer or a duration; reports what is wrong with anything else.
    fn number(&mut self, text: &str, span: Span) -> Option<Number> {
        match read_number(text) {
            Ok(n) => Some(n),
            Err(e) => {
                let d = match e {
                    NumberError::Overflow => Diagnostic::error(span, "integer too large")
                        .label("does not fit in 64 bits")
                        .hint("the largest integer is 18446744073709551615 (0xffff_ffff_ffff_ffff)"),
                    NumberError::DurationOverflow => Diagnostic::error(span, "duration too long")
                        .label("more than 2^64 nanoseconds (about 584 years)"),
                    NumberError::Fraction => Diagnostic::error(span, "fractional numbers are not supported")
                        .label("not an integer")
                        .hint("use a smaller unit: `1500ms` rather than `1.5s`"),
                    NumberError::Underscore => Diagnostic::error(span, "misplaced `_` in a number")
                        .label("`_` may only stand between digits")
                        .hint("write `1_000`"),
                    NumberError::Octal => Diagnostic::error(span, "a number cannot start with `0`")
                        .label("Go would read this as octal")
                        .hint("write it in decimal, or in hex as `0x...`"),
                    NumberError::BadDigit => Diagnostic::error(span, format!("invalid number `{text}`"))
                        .label("not a number")
                        .hint("integers are `123`, `1_000` or `0x1f`"),
                    NumberError::Unit(unit) => Diagnostic::error(span, format!("unknown duration unit `{unit}`"))
                        .label("not a unit")
                        .hint("units are ns, us, ms, s, m and h"),
                };
                self.diags.push(d);
                None
            }
        }
    }

    /// Decodes a string literal's escapes; `p` is the `string` pair.
    fn string(&mut self, p: Pair<Rule>) -> String {
        let Some(body) = p.into_inner().next() else { return String::new() };
        let base = body.as_span().start();
        let raw = body.as_str();
        let mut out = String::with_capacity(raw.len());
        let mut chars = raw.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            let Some((_, e)) = chars.next() else { break };
            let simple = match e {
                'n' => Some('\n'),
                't' => Some('\t'),
                'r' => Some('\r'),
                '\\' => Some('\\'),
                '"' => Some('"'),
                '\'' => Some('\''),
                'a' => Some('\x07'),
                'b' => Some('\x08'),
                'f' => Some('\x0c'),
                'v' => Some('\x0b'),
                '0' => Some('\0'),
                _ => None,
            };
            if let Some(s) = simple {
                out.push(s);
                continue;
            }
            let digits = match e {
                'x' => 2,
                'u' => 4,
                'U' => 8,
                _ => 0,
            };
            let mut value: u32 = 0;
            let mut ok = digits > 0;
            let mut end = i + 1 + e.len_utf8();
            for _ in 0..digits {
                match chars.peek().and_then(|(_, d)| d.to_digit(16)) {
                    Some(d) => {
                        value = value * 16 + d;
                        end += 1;
                        chars.next();
                    }
                    None => ok = false,
                }
            }
            let span = Span::new(self.file, base + i, base + end);
            let decoded = if ok { char::from_u32(value) } else { None };
            match decoded {
                Some(ch) if e != 'x' || value < 0x80 => out.push(ch),
                Some(_) => self.diags.push(
                    Diagnostic::error(span, "byte escapes above `\\x7f` are not supported")
                        .label("not a character on its own")
                        .hint("write the character itself, or `\\u` and its code point"),
                ),
                None => self.diags.push(
                    Diagnostic::error(span, format!("invalid escape `{}`", &raw[i..end.min(raw.len())]))
                        .label("unknown escape")
                        .hint("escapes are \\n \\t \\r \\\\ \\\" \\xHH \\uHHHH"),
                ),
            }
        }
        out
    }
}

/// Where a pair really ends: for rules whose last element is another rule, where that
/// rule ends (the chain is short: it stops at the first rule ending in a token).
fn end_of(p: &Pair<Rule>) -> usize {
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

#[derive(Debug, PartialEq)]
enum Number {
    Int(u64),
    Duration(u64),
}

#[derive(Debug, PartialEq)]
enum NumberError {
    Overflow,
    DurationOverflow,
    Fraction,
    Underscore,
    Octal,
    BadDigit,
    Unit(String),
}

/// `123`, `1_000`, `0x1f`, or a duration `250ns`, `1_500us`, `3ms`, `2s`, `1m`, `1h`.
fn read_number(text: &str) -> Result<Number, NumberError> {
    if text.contains('.') {
        return Err(NumberError::Fraction);
    }
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        return digits(hex, 16).map(Number::Int);
    }
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '_')).unwrap_or(text.len());
    let (num, unit) = text.split_at(split);
    let value = digits(num, 10)?;
    if num.len() > 1 && num.starts_with('0') {
        return Err(NumberError::Octal);
    }
    let scale: u64 = match unit {
        "" => return Ok(Number::Int(value)),
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        other if other.starts_with('_') => return Err(NumberError::Underscore),
        other if other.chars().all(|c| c.is_ascii_alphanumeric()) && other.chars().any(|c| c.is_ascii_digit()) => {
            return Err(NumberError::BadDigit)
        }
        other => return Err(NumberError::Unit(other.to_string())),
    };
    value.checked_mul(scale).map(Number::Duration).ok_or(NumberError::DurationOverflow)
}

/// Digits in `radix` with `_` allowed only between digits.
fn digits(text: &str, radix: u32) -> Result<u64, NumberError> {
    if text.is_empty() {
        return Err(NumberError::BadDigit);
    }
    if text.starts_with('_') || text.ends_with('_') || text.contains("__") {
        return Err(NumberError::Underscore);
    }
    let mut value: u64 = 0;
    for c in text.chars().filter(|c| *c != '_') {
        let d = c.to_digit(radix).ok_or(NumberError::BadDigit)?;
        value = value.checked_mul(radix as u64).and_then(|v| v.checked_add(d as u64)).ok_or(NumberError::Overflow)?;
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(read_number("1_000"), Ok(Number::Int(1000)));
        assert_eq!(read_number("0x1f"), Ok(Number::Int(31)));
        assert_eq!(read_number("1_500us"), Ok(Number::Duration(1_500_000)));
        assert_eq!(read_number("1m"), Ok(Number::Duration(60_000_000_000)));
        assert_eq!(read_number("18446744073709551616"), Err(NumberError::Overflow));
        assert_eq!(read_number("1__0"), Err(NumberError::Underscore));
        assert_eq!(read_number("1.5s"), Err(NumberError::Fraction));
        assert_eq!(read_number("3sec"), Err(NumberError::Unit("sec".into())));
        assert_eq!(read_number("0755"), Err(NumberError::Octal));
        assert_eq!(read_number("0"), Ok(Number::Int(0)));
    }

    #[test]
    fn join_words() {
        let w = |v: &[&str]| join_or(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(w(&["a"]), "a");
        assert_eq!(w(&["a", "b", "c"]), "a, b or c");
    }
}
