//! The syntax stage: every construct of docs/language.md parsed into a compact rendering
//! of the AST (syntax/render.rs), and the rendered diagnostics of syntax errors (insta
//! snapshots).

#[path = "syntax/render.rs"]
mod render;

use gtrace::syntax::ast::*;
use gtrace::syntax::parse;
use insta::assert_snapshot;
use render::{ast, err, ex, parse_ok, shape};

// ---- constructs -------------------------------------------------------------------------

#[test]
fn items() {
    assert_snapshot!(ast(r#"
use "http"
fn slow(d) = d > 10ms
fn both(a, b) {
    x := a + b
    print(x)
}
on entry main.doWork { count() }
"#));
}

#[test]
fn probe_kinds() {
    assert_snapshot!(ast(r#"
on main.doWork { count() }
on entry main.doWork, pkg.F, main.T.Method { count() }
on return main.doWork { hist(elapsed) }
on begin { print("start") }
on end { print(@lat) }
on interval 1s { print(@m); clear(@m) }
on interval 1_500us { exit() }
on line "server/handler.go:42" { print(line) }
"#));
}

#[test]
fn quoted_symbols_and_wildcards() {
    assert_snapshot!(ast(r#"
on "net/http.(*conn).serve" { count() }
on entry "net/http.(*Client).*", "main.do*" { count() }
on return "example.com/x/pkg.(*T[...]).M", "pkg.Map[...].Get" { hist(elapsed) }
"#));
}

#[test]
fn statements() {
    assert_snapshot!(ast(r#"
on return main.F {
    x := ret + 1
    self.start = nsecs
    @m[pid, comm] = count()
    @total = sum(x)
    @ = count()
    @lat[func] = hist(elapsed)
    if x > 10 { print(x) } else if x > 5 { print("mid") } else { print("low") }
    if ok { exit() }
    printf("%d %s\n", x, comm)
    delete(@m[pid]); clear(@total)
}
"#));
}

#[test]
fn named_keys() {
    assert_snapshot!(ast(r#"
on return main.F {
    @http[method: self.m, path: req.URL.Path, code] = count()
    @m[
        a: 1,
        end: x > 2,
    ] = sum(x)
    delete(@http[method: "GET", path: "/", code: 200])
    @m2[x : y] = count()
}
"#));
}

#[test]
fn error_key_name_without_key() {
    assert_snapshot!(err("on begin { @m[method: ] = count() }"));
}

#[test]
fn separators_and_comments() {
    assert_snapshot!(ast("
# a comment
// another
on begin {   # after a brace

    a := 1;; b := 2   // trailing
    ;
    c := a +
        b
    print(a,
          b,)
}

on end { }
on end {}; on begin < >
"));
}

#[test]
fn else_on_next_line() {
    assert_eq!(
        ast("on begin { if a { x := 1 } else { x := 2 } }"),
        ast("on begin {\n if a {\n x := 1\n }\n else {\n x := 2\n }\n}")
    );
}

#[test]
fn angle_block_equals_brace_block() {
    let pairs = [
        ("on return main.doWork { hist(elapsed) }", "on return main.doWork < hist(elapsed) >"),
        ("on begin { @x = 1; print(@x) }", "on begin < @x = 1; print(@x) >"),
        ("on entry main.F { if n > 3 { count() } }", "on entry main.F < if n > 3 { count() } >"),
    ];
    for (brace, angle) in pairs {
        assert_eq!(shape(brace), shape(angle), "{brace}  vs  {angle}");
    }
}

#[test]
fn angle_block_comparisons() {
    // A `>` followed by an operand is a comparison; the last `>` closes the block.
    assert_snapshot!(ast("
on entry main.F < @big = n > 10 >
on entry main.F < x := a > b; print(x) >
on entry main.F < print(n) >
on entry main.G < count() >
"));
}

#[test]
fn precedence() {
    assert_eq!(ex("a || b && c"), "(|| a (&& b c))");
    assert_eq!(ex("a && b || c"), "(|| (&& a b) c)");
    assert_eq!(ex("a == b && c != d"), "(&& (== a b) (!= c d))");
    assert_eq!(ex("a + b * c"), "(+ a (* b c))");
    assert_eq!(ex("a * b + c"), "(+ (* a b) c)");
    assert_eq!(ex("a - b - c"), "(- (- a b) c)");
    assert_eq!(ex("a / b / c"), "(/ (/ a b) c)");
    assert_eq!(ex("a | b ^ c & d"), "(^ (| a b) (& c d))");
    assert_eq!(ex("a << 2 + 1"), "(+ (<< a 2) 1)");
    assert_eq!(ex("a >> b % c"), "(% (>> a b) c)");
    assert_eq!(ex("a < b == c >= d"), "(>= (== (< a b) c) d)");
    assert_eq!(ex("a + b < c * d"), "(< (+ a b) (* c d))");
    assert_eq!(ex("(a + b) * c"), "(* (+ a b) c)");
    assert_eq!(ex("-a * b"), "(* (neg a) b)");
    assert_eq!(ex("!a && b"), "(&& (! a) b)");
    assert_eq!(ex("!!a"), "(! (! a))");
    assert_eq!(ex("*p.x"), "(deref (. p x))");
    assert_eq!(ex("-x[1]"), "(neg (idx x 1))");
    assert_eq!(ex("a * *p"), "(* a (deref p))");
    assert_eq!(ex("a - -1"), "(- a (neg 1))");
    assert_eq!(ex("a != !b"), "(!= a (! b))");
    assert_eq!(ex("x > 10ms || y <= 0x10"), "(|| (> x 10000000ns) (<= y 16))");
}

#[test]
fn postfix_and_names() {
    assert_eq!(ex("req.URL.Path"), "(. (. req URL) Path)");
    assert_eq!(ex("xs[i].name"), "(. (idx xs i) name)");
    assert_eq!(ex("arg.n"), "(. arg n)");
    assert_eq!(ex("x.end"), "(. x end)");
    assert_eq!(ex("self.start"), "self.start");
    assert_eq!(ex("self.buf[0]"), "(idx self.buf 0)");
    assert_eq!(ex("arg3.(*net/http.Request).URL.Path"), "(. (. (assert arg3 *net/http.Request) URL) Path)");
    assert_eq!(ex("-p.(*main.Pair[int,string]).A"), "(neg (. (assert p *main.Pair[int,string]) A))");
    assert_eq!(ex("@m[k]"), "@m[k]");
    assert_eq!(ex("@m[a, b].f"), "(. @m[a, b] f)");
    assert_eq!(ex("@"), "@");
    assert_eq!(ex("len(s.items)"), "len((. s items))");
    assert_eq!(ex("elapsed + ret + args"), "(+ (+ elapsed ret) args)");
    assert_eq!(ex("hasPrefix(s, \"GET\")"), "hasPrefix(s, \"GET\")");
    assert_eq!(ex("f()"), "f()");
    assert_eq!(ex("πr"), "πr");
}

#[test]
fn literals() {
    assert_eq!(ex("123"), "123");
    assert_eq!(ex("1_000"), "1000");
    assert_eq!(ex("0x1f"), "31");
    assert_eq!(ex("0XFF_FF"), "65535");
    assert_eq!(ex("18446744073709551615"), "18446744073709551615");
    assert_eq!(ex("0xffffffffffffffff"), "18446744073709551615");
    assert_eq!(ex("true"), "true");
    assert_eq!(ex("false"), "false");
    assert_eq!(ex("250ns"), "250ns");
    assert_eq!(ex("5us"), "5000ns");
    assert_eq!(ex("5µs"), "5000ns");
    assert_eq!(ex("3ms"), "3000000ns");
    assert_eq!(ex("2s"), "2000000000ns");
    assert_eq!(ex("1m"), "60000000000ns");
    assert_eq!(ex("1h"), "3600000000000ns");
    assert_eq!(ex("1_500us"), "1500000ns");
    assert_eq!(ex("1.5"), "float 1.5");
    assert_eq!(ex("-2e-3"), "(neg float 2e-3)");
    assert_eq!(ex("1_000.5e+3"), "float 1000.5e+3");
    assert_eq!(ex("0x1e-1"), "(- 30 1)");
    assert_eq!(ex(r#""a\n\t\\\"\x41\u00e9""#), r#""a\n\t\\\"Aé""#);
    assert_eq!(ex(r##""# not a comment // nor this""##), r##""# not a comment // nor this""##);
    assert_eq!(ex(r#""""#), r#""""#);
}

#[test]
fn spans() {
    let src = "on return main.F { x := (a + b) * c }";
    let s = parse_ok(src);
    let Item::Probe(p) = &s.items[0] else { panic!("not a probe") };
    assert_eq!(&src[p.span.start as usize..p.span.end as usize], "on return main.F");
    assert_eq!(&src[p.body.span.start as usize..p.body.span.end as usize], "{ x := (a + b) * c }");
    let StmtKind::Let { name, value } = &p.body.stmts[0].kind else { panic!("not a let") };
    assert_eq!(&src[name.span.start as usize..name.span.end as usize], "x");
    assert_eq!(&src[value.span.start as usize..value.span.end as usize], "(a + b) * c");
    let ExprKind::Binary { lhs, .. } = &value.kind else { panic!("not binary") };
    assert_eq!(&src[lhs.span.start as usize..lhs.span.end as usize], "(a + b)");
    let stmt = &p.body.stmts[0].span;
    assert_eq!(&src[stmt.start as usize..stmt.end as usize], "x := (a + b) * c");
}

#[test]
fn else_if_spans_nest() {
    let src = "on begin { if a { } else if b { } else { } }";
    let s = parse_ok(src);
    let Item::Probe(p) = &s.items[0] else { panic!("not a probe") };
    let StmtKind::If { otherwise: Some(Else::If(inner)), .. } = &p.body.stmts[0].kind else { panic!("no else if") };
    assert_eq!(&src[inner.span.start as usize..inner.span.end as usize], "if b { } else { }");
}

#[test]
fn expr_ids_are_unique_and_shared_across_files() {
    let mut next = 0;
    let a = parse("on begin { x := a + b }", 0, &mut next).expect("parses");
    assert_eq!(next, 3);
    let b = parse("on begin { y := 1 }", 1, &mut next).expect("parses");
    assert_eq!(next, 4);
    let Item::Probe(p) = &b.items[0] else { panic!("not a probe") };
    let StmtKind::Let { value, .. } = &p.body.stmts[0].kind else { panic!("not a let") };
    assert_eq!(value.id, ExprId(3));
    assert_eq!(value.span.file, 1);
    let Item::Probe(p) = &a.items[0] else { panic!("not a probe") };
    assert_eq!(p.span.file, 0);
}

#[test]
fn empty_script() {
    assert_eq!(ast(""), "");
    assert_eq!(ast("\n\n# only a comment\n"), "");
}

// ---- syntax errors ----------------------------------------------------------------------

#[test]
fn error_missing_brace() {
    assert_snapshot!(err("on return main.F {\n    hist(elapsed)\n"));
}

#[test]
fn error_missing_brace_same_line() {
    assert_snapshot!(err("on begin { print(1)"));
}

#[test]
fn error_bad_token() {
    assert_snapshot!(err("on begin { x := 1 $ 2 }"));
}

#[test]
fn error_unterminated_string() {
    assert_snapshot!(err("on begin {\n    printf(\"%d\\n, x)\n}\n"));
}

#[test]
fn error_on_without_symbol() {
    assert_snapshot!(err("on { count() }"));
}

#[test]
fn error_integer_overflow() {
    assert_snapshot!(err("on begin { x := 18446744073709551616 }"));
}

#[test]
fn error_bare_symbol_with_star() {
    assert_snapshot!(err("on entry main.* { count() }"));
}

#[test]
fn error_stray_angle() {
    assert_snapshot!(err("on return main.F < hist(elapsed) > >"));
}

#[test]
fn error_keyword_as_variable() {
    assert_snapshot!(err("on begin { end := 5 }"));
}

#[test]
fn error_missing_angle_close() {
    assert_snapshot!(err("on return main.F < hist(elapsed)"));
}

#[test]
fn error_assign_without_colon() {
    assert_snapshot!(err("on begin { x = 1 }"));
}

#[test]
fn error_unqualified_symbol() {
    assert_snapshot!(err("on doWork { count() }"));
}

#[test]
fn error_missing_operand() {
    assert_snapshot!(err("on begin { x := 1 + }"));
}

#[test]
fn error_interval_without_unit() {
    assert_snapshot!(err("on interval 1000 { print(@m) }"));
}

#[test]
fn error_bad_duration_unit_and_fraction() {
    // Both are reported: conversion errors are collected.
    assert_snapshot!(err("on begin { a := 3sec; b := 1.5s }"));
}

#[test]
fn error_bad_escape() {
    assert_snapshot!(err(r#"on begin { print("a\qb") }"#));
}

#[test]
fn error_missing_paren() {
    assert_snapshot!(err("on begin { print(1, 2 }"));
}

#[test]
fn error_top_level_garbage() {
    assert_snapshot!(err("print(1)"));
}

#[test]
fn params() {
    assert_snapshot!(ast(r#"
param threshold = 50ms
param label = "x"
on entry main.F { param := 1; if n > threshold { print(param) } }
param limit =
    10
"#));
}

#[test]
fn error_param_needs_a_value_and_a_name() {
    assert!(err("param x").contains("expected `=`"), "{}", err("param x"));
    assert!(err("param if = 1").contains("`if` is a keyword"));
    assert!(err("param = 1").contains("expected a name"), "{}", err("param = 1"));
}

#[test]
fn error_keyword_param() {
    assert_snapshot!(err("fn f(a, if) = a"));
}

#[test]
fn expected_lists_are_words() {
    assert!(err("use http").contains("^^^^ expected a string\n"));
    let e = err("on begin { a. }");
    assert!(e.contains("^ expected a field name or a type assertion `(*T)`\n"), "{e}");
    assert!(err("on entry main.F, { }").contains("^ expected a function name or a string\n"));
    assert!(err("on begin { if x > 1 { } else }").contains("^ expected a block `{ ... }` or `if`\n"));
    assert!(err("fn f(a) =").contains("^ expected an expression\n"));
    assert!(err("on interval x {}").contains("^ expected a duration such as `1s`\n"));
}

// ---- robustness -------------------------------------------------------------------------

/// Fails (rather than panics) or parses; never takes the process down.
fn survives(src: &str) {
    let mut id = 0;
    let _ = parse(src, 0, &mut id);
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let parens = format!("on begin {{ x := {}1{} }}", "(".repeat(100_000), ")".repeat(100_000));
    assert!(err(&parens).contains("nested too deeply"));
    let braces = format!("on begin {}", "{ if a ".repeat(10_000));
    assert!(err(&braces).contains("nested too deeply"));
    let unary = format!("on begin {{ x := {}1 }}", "-".repeat(100_000));
    assert!(err(&unary).contains("too deeply"));
    let chain = format!("on begin {{ x := 1{} }}", " + 1".repeat(100_000));
    assert!(err(&chain).contains("too deeply"));
    let elses = format!("on begin {{ if a {{ }}{} }}", " else if a { }".repeat(10_000));
    assert!(err(&elses).contains("too long"));
    let fields = format!("on begin {{ x := a{} }}", ".b".repeat(100_000));
    assert!(err(&fields).contains("too deeply"));
}

#[test]
fn moderate_nesting_parses() {
    let parens = format!("on begin {{ x := {}1{} }}", "(".repeat(60), ")".repeat(60));
    assert_eq!(ex(&format!("x := {}1{}", "(".repeat(60), ")".repeat(60))), "x := 1");
    survives(&parens);
    let chain = format!("x := 1{}", " || 1".repeat(200));
    assert!(ex(&chain).starts_with("x := (|| (|| "));
}

#[test]
fn garbage_never_panics() {
    let samples = [
        "",
        "\0",
        "\u{feff}",
        "on",
        "on on on",
        "@",
        "@@",
        "on begin {",
        "}",
        ">",
        "<",
        "on begin <",
        "on begin < >>",
        "\"",
        "\"\\",
        "\"\\\n\"",
        "on begin { \"\\u{ffff\" }",
        "on begin { \"\\U0011ffff\" }",
        "on begin { \"\\x\" }",
        "on begin { 0x }",
        "on begin { 0x_1 }",
        "on begin { 1_ }",
        "on begin { 99999999999999999999h }",
        "on interval 0x10 { }",
        "on interval 1.5s {}",
        "fn",
        "fn (",
        "fn f(",
        "fn f() =",
        "use",
        "use x",
        "日本語 { }",
        "on 日本.語 { }",
        "on begin { 日本 := 1 }",
        "on \"\" { }",
        "on begin { a[ }",
        "on begin { a. }",
        "on begin { self }",
        "on begin { self. }",
        "on begin { if }",
        "on begin { if a { } else }",
        "on begin { else }",
        "\r\n\r\n",
        "on begin {\r\n x := 1\r\n}\r\n",
        "# comment only",
        "on begin { x := 1 } // c\n#",
        "on begin { ((((((((((( }",
        "on begin { ]]]]]]] }",
        "on begin { )()()( }",
        "on end.F { }",
        "on begin { x := \"\u{1F600}\" }",
        "on begin { \u{1F600} }",
        "on begin { a := 'c' }",
    ];
    for s in samples {
        survives(s);
    }
    // Deterministic pseudo-random text over the language's own alphabet.
    let alphabet: Vec<char> = "on begin end entry return interval if else fn use self true false { } < > ( ) [ ] @ . , ; : = ! - * + / % & | ^ \" \\ # 0x1_ 5ms main.F \n\té日".chars().collect();
    let mut seed: u64 = 0x9e3779b97f4a7c15;
    for _ in 0..3000 {
        let len = (seed % 60) as usize;
        let mut s = String::new();
        for _ in 0..len {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            s.push(alphabet[(seed % alphabet.len() as u64) as usize]);
        }
        survives(&s);
    }
}
