//! Tests of `load`: helpers inlined, params substituted, libraries found and merged.

use super::*;
use crate::diag;
use crate::syntax::ast::*;
use std::collections::HashSet;
use std::path::Path;

fn root(text: &str, dir: Option<&Path>) -> Root {
    Root { name: "t.gt".into(), text: text.into(), dir: dir.map(Path::to_path_buf) }
}

fn load_with(text: &str, dir: Option<&Path>, opts: &Options) -> (Sources, Result<Script, Vec<Diagnostic>>) {
    let mut sources = Sources::default();
    let r = load_script(root(text, dir), opts, &mut sources);
    (sources, r)
}

/// The probes after loading, one line a statement, expressions as s-expressions.
fn ok(text: &str) -> String {
    ok_with(text, &[])
}

fn ok_with(text: &str, sets: &[&str]) -> String {
    let opts = Options { sets: sets.iter().map(|s| s.to_string()).collect(), ..Options::default() };
    match load_with(text, None, &opts) {
        (_, Ok(s)) => show(&s),
        (sources, Err(d)) => panic!("{}", diag::render(&sources, &d)),
    }
}

fn err(text: &str) -> String {
    err_with(text, &[], None)
}

fn err_with(text: &str, sets: &[&str], dir: Option<&Path>) -> String {
    let opts = Options { sets: sets.iter().map(|s| s.to_string()).collect(), ..Options::default() };
    match load_with(text, dir, &opts) {
        (_, Ok(s)) => panic!("expected an error, got:\n{}", show(&s)),
        (sources, Err(d)) => diag::render(&sources, &d),
    }
}

fn show(s: &Script) -> String {
    let mut out = String::new();
    for item in &s.items {
        let Item::Probe(p) = item else { panic!("only probes are left") };
        for st in &p.body.stmts {
            stmt(&mut out, st, 0);
        }
    }
    out
}

fn stmt(out: &mut String, s: &Stmt, depth: usize) {
    let pad = "  ".repeat(depth);
    match &s.kind {
        StmtKind::Let { name, value } => out.push_str(&format!("{pad}{} := {}\n", name.name, e(value))),
        StmtKind::AssignSelf { name, value } => out.push_str(&format!("{pad}self.{} = {}\n", name.name, e(value))),
        StmtKind::AssignMap { map, value } => out.push_str(&format!("{pad}{} = {}\n", m(map), e(value))),
        StmtKind::Expr(x) => out.push_str(&format!("{pad}{}\n", e(x))),
        StmtKind::If { cond, then, otherwise } => {
            out.push_str(&format!("{pad}if {}\n", e(cond)));
            then.stmts.iter().for_each(|t| stmt(out, t, depth + 1));
            match otherwise {
                Some(Else::Block(b)) => {
                    out.push_str(&format!("{pad}else\n"));
                    b.stmts.iter().for_each(|t| stmt(out, t, depth + 1));
                }
                Some(Else::If(s)) => {
                    out.push_str(&format!("{pad}else\n"));
                    stmt(out, s, depth + 1);
                }
                None => {}
            }
        }
    }
}

fn m(map: &MapRef) -> String {
    if map.keys.is_empty() {
        format!("@{}", map.name.name)
    } else {
        format!("@{}[{}]", map.name.name, map.keys.iter().map(e).collect::<Vec<_>>().join(", "))
    }
}

fn e(x: &Expr) -> String {
    match &x.kind {
        ExprKind::Int(v) => v.to_string(),
        ExprKind::Float(t) => t.clone(),
        ExprKind::Str(s) => format!("{s:?}"),
        ExprKind::Bool(b) => b.to_string(),
        ExprKind::Duration(ns) => format!("{ns}ns"),
        ExprKind::Name(n) => n.clone(),
        ExprKind::SelfVar(n) => format!("self.{n}"),
        ExprKind::Map(map) => m(map),
        ExprKind::Field { base, field } => format!("{}.{}", e(base), field.name),
        ExprKind::Index { base, index } => format!("{}[{}]", e(base), e(index)),
        ExprKind::Assert { base, ty } => format!("{}.({})", e(base), ty.name),
        ExprKind::Unary { op, operand } => format!("({op:?} {})", e(operand)),
        ExprKind::Binary { op, lhs, rhs } => format!("({} {} {})", op.symbol(), e(lhs), e(rhs)),
        ExprKind::Call { func, args, .. } => {
            format!("{}({})", func.name, args.iter().map(e).collect::<Vec<_>>().join(", "))
        }
    }
}

/// Every ExprId of a script, checked unique.
fn ids_unique(s: &Script) -> bool {
    let mut seen = HashSet::new();
    let mut unique = true;
    for item in &s.items {
        let Item::Probe(p) = item else { return false };
        p.body.walk_exprs(&mut |e| unique &= seen.insert(e.id));
    }
    unique
}

/// A fresh folder under the system's temp dir, with `files` written into it.
fn folder(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gtrace-lib-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    for (f, text) in files {
        std::fs::write(dir.join(f), text).expect("write library");
    }
    dir
}

#[test]
fn expression_helper_is_substituted_by_its_argument() {
    assert_eq!(
        ok("fn slow(d) = d > 10ms\non return main.F { if slow(elapsed) { @n = count() } }"),
        "if (> elapsed 10000000ns)\n  @n = count()\n"
    );
}

#[test]
fn arguments_are_not_captured_by_the_helpers_names() {
    // `a` in the argument is the caller's `a`, even though the helper's parameter is `a` too
    // and the helper reads a probe name `b`.
    assert_eq!(
        ok("fn f(a, x) = a * x + b\non entry main.F { a := 3; print(f(a + 1, a)) }"),
        "a := 3\nprint((+ (* (+ a 1) a) b))\n"
    );
}

#[test]
fn block_helper_is_spliced_with_its_locals_renamed() {
    let out = ok(
        "fn report(x) {\n  y := x / 1000\n  printf(\"%d\\n\", y)\n}\non entry main.F { y := 1; report(n); print(y) }",
    );
    assert_eq!(out, "y := 1\ny·1 := (/ n 1000)\nprintf(\"%d\\n\", y·1)\nprint(y)\n");
}

#[test]
fn helpers_call_helpers_and_expression_helpers_work_as_statements() {
    assert_eq!(
        ok("fn ms(d) = d / 1000000\nfn note(d) = printf(\"%d\\n\", ms(d))\non return main.F { note(elapsed) }"),
        "printf(\"%d\\n\", (/ elapsed 1000000))\n"
    );
}

#[test]
fn recursion_is_an_error_naming_the_chain() {
    let out = err("fn f(a) = g(a)\nfn g(b) = f(b)\non entry main.F { print(f(1)) }");
    assert!(out.contains("error: `f` calls itself"), "{out}");
    assert!(out.contains("recursion: f → g → f"), "{out}");
    let out = err("fn f() { f() }\non entry main.F { f() }");
    assert!(out.contains("`f` calls itself"), "{out}");
}

#[test]
fn wrong_arity_points_at_the_call_and_the_definition() {
    let out = err("fn f(a, b) = a + b\non entry main.F { print(f(1)) }");
    assert!(out.contains("error: `f` takes 2 arguments, but 1 was given"), "{out}");
    assert!(out.contains("^^^^ wrong number of arguments"), "{out}");
    assert!(out.contains("defined here"), "{out}");
}

#[test]
fn a_block_helper_has_no_value() {
    let out = err("fn f(a) { print(a) }\non entry main.F { x := f(1) }");
    assert!(out.contains("`f` has a block body and gives no value"), "{out}");
}

#[test]
fn names_of_builtins_cannot_be_defined() {
    assert!(err("fn count() = 1\non entry main.F { }").contains("`count` is a builtin function"));
    assert!(err("param elapsed = 1\non entry main.F { }").contains("`elapsed` is a builtin name"));
}

#[test]
fn a_name_defined_twice_in_two_files_names_both() {
    let dir = folder("twice", &[("mylib.gt", "# mine\nfn slow(d) = d > 1ms\n")]);
    let out = err_with("use \"mylib\"\nparam slow = 5\non entry main.F { }", &[], Some(&dir));
    assert!(out.contains("error: `slow` is defined twice"), "{out}");
    assert!(out.contains("mylib.gt:2:4"), "the first definition, in the library: {out}");
    assert!(out.contains("t.gt:2:7"), "the second, in the script: {out}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn params_take_their_default_or_the_command_line() {
    let text = "param limit = 10ms\non return main.F { if elapsed > limit { @slow = count() } }";
    assert_eq!(ok(text), "if (> elapsed 10000000ns)\n  @slow = count()\n");
    assert_eq!(ok_with(text, &["limit=250us"]), "if (> elapsed 250000ns)\n  @slow = count()\n");
    // A local of the same name shadows a param after it is declared.
    assert_eq!(ok("param k = 2\non entry main.F { a := k; k := 5; print(k) }"), "a := 2\nk := 5\nprint(k)\n");
}

#[test]
fn otlp_is_a_param_true_with_otlp_unless_a_file_declares_it() {
    let text = "on entry main.F { if otlp { @n = count() } }";
    assert_eq!(ok(text), "if false\n  @n = count()\n");
    let opts = Options { otlp: true, ..Options::default() };
    let (_, got) = load_with(text, None, &opts);
    assert_eq!(show(&got.expect("loads")), "if true\n  @n = count()\n");
    assert_eq!(ok("param otlp = 3\non entry main.F { print(otlp) }"), "print(3)\n");
}

#[test]
fn set_errors_say_what_is_wrong() {
    let text = "param limit = 10ms\non return main.F { }";
    let out = err_with(text, &["limit=10"], None);
    assert!(out.contains("`limit` is a duration"), "{out}");
    assert!(out.contains("give a unit, e.g. `--set limit=10ms`"), "{out}");
    let out = err_with(text, &["limt=1ms"], None);
    assert!(out.contains("no param `limt`") && out.contains("did you mean `limit`?"), "{out}");
    assert!(err_with(text, &["limit"], None).contains("`--set` needs NAME=VALUE"));
    assert!(err_with(text, &["limit=3sec"], None).contains("unknown"), "{}", err_with(text, &["limit=3sec"], None));
    assert!(err("param x = 1 + 2\non entry main.F { }").contains("the default of `x` is not a literal"));
}

#[test]
fn use_looks_in_include_dirs_then_the_scripts_folder_then_the_stdlib() {
    let near = folder("near", &[("gc.gt", "on entry main.Near { @near = count() }\n")]);
    let inc = folder("inc", &[("gc.gt", "on entry main.Inc { @inc = count() }\n")]);
    let script = "use \"gc\"\non entry main.F { @mine = count() }";
    // -I first.
    let opts = Options { include: vec![inc.clone()], ..Options::default() };
    let (_, r) = load_with(script, Some(&near), &opts);
    assert_eq!(show(&r.expect("loads")), "@inc = count()\n@mine = count()\n");
    // Then the script's folder: a local gc.gt shadows the stdlib's.
    let (_, r) = load_with(script, Some(&near), &Options::default());
    assert_eq!(show(&r.expect("loads")), "@near = count()\n@mine = count()\n");
    // Then the stdlib.
    let (sources, r) = load_with(script, None, &Options::default());
    let s = r.expect("loads");
    assert!(show(&s).contains("@gc_cycles = count()"), "{}", show(&s));
    // A library's probes point into the library's own file.
    let Item::Probe(first) = &s.items[0] else { panic!() };
    assert_eq!(sources.name(first.span.file), "stdlib/gc.gt");
    assert!(ids_unique(&s));
    let _ = std::fs::remove_dir_all(near);
    let _ = std::fs::remove_dir_all(inc);
}

#[test]
fn each_library_is_read_once_even_in_a_cycle() {
    let dir = folder(
        "cycle",
        &[
            ("a.gt", "use \"b\"\non entry main.A { @a = count() }\n"),
            ("b.gt", "use \"a\"\nuse \"a.gt\"\non entry main.B { @b = count() }\n"),
        ],
    );
    let (_, r) = load_with("use \"a\"\nuse \"b\"\non entry main.F { @f = count() }", Some(&dir), &Options::default());
    assert_eq!(show(&r.expect("loads")), "@b = count()\n@a = count()\n@f = count()\n");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_unknown_library_says_where_it_looked() {
    let out = err("use \"gcc\"\non entry main.F { }");
    assert!(out.contains("error: no library `gcc`"), "{out}");
    assert!(out.contains("looked for gcc.gt in the stdlib"), "{out}");
    assert!(out.contains("the stdlib has `gc`"), "{out}");
}

#[test]
fn errors_in_a_library_point_into_it() {
    let dir = folder("broken", &[("broken.gt", "on entry main.F { x := }\n")]);
    let out = err_with("use \"broken\"", &[], Some(&dir));
    assert!(out.contains("broken.gt:1:"), "{out}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn every_stdlib_library_loads_and_is_documented() {
    for (name, text) in stdlib::LIBRARIES {
        let mut sources = Sources::default();
        let r = load_script(root_from_stdlib(name).expect("embedded"), &Options::default(), &mut sources);
        let s = r.unwrap_or_else(|d| panic!("{name}: {}", diag::render(&sources, &d)));
        assert!(!s.items.is_empty(), "{name} has probes");
        assert!(ids_unique(&s), "{name}");
        assert!(stdlib::summary(text).starts_with(&format!("{name}: ")), "{name} starts with `# {name}: what it does`");
    }
    assert!(stdlib::listing().lines().count() == stdlib::LIBRARIES.len());
}

#[test]
fn helpers_inlined_many_times_keep_ids_unique() {
    let mut sources = Sources::default();
    let text = "fn sq(x) = x * x\nfn q(x) = sq(sq(x))\non entry main.F { @a = sum(q(n)); @b = sum(q(n + 1)) }";
    let s = load_script(root(text, None), &Options::default(), &mut sources).expect("loads");
    assert!(ids_unique(&s));
    assert_eq!(show(&s), "@a = sum((* (* n n) (* n n)))\n@b = sum((* (* (+ n 1) (+ n 1)) (* (+ n 1) (+ n 1))))\n");
}
