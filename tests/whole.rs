//! Whole Go values end to end: structs with every kind of field (nested structs, slices,
//! arrays of arrays, pointers, interfaces holding an int, an error and nil, a channel, a
//! complex number, durations exported and not, bytes, a nil slice), a pointer to one, a
//! slice and an array of structs, a struct in registers, printed with %v, %+v and %#v
//! and compared byte for byte with what tests/go/whole's fmt printed for the same
//! values; and cut by --depth, --max-fields, --max-elems and --string-limit, compared
//! with the program's fmt output of the parts shown, `...` where the cut is. Needs root
//! (SKIP without it, unless CI=true).

mod support;

use support::{gtrace, privileged};

const SCRIPT: &str = r#"
on entry main.show {
    printf("gt v %v\n", c)
    printf("gt +v %+v\n", c)
    printf("gt #v %#v\n", c)
    printf("gt pv %v\n", p)
    printf("gt p+v %+v\n", p)
    printf("gt p#v %#v\n", p)
}
on entry main.points { printf("gt ps %v %+v %#v\n", ps, a, pp) }
on entry main.small { printf("gt small %v %+v %#v\n", p, p, p) }
on entry main.describe {
    printf("gt iface %d %v|%+v|%#v %v|%+v\n", i, v, v, v, err, err)
    if i == 1 { printf("gt iface#v %#v\n", err) }
}
"#;

fn whole() -> std::path::PathBuf {
    support::go_build("whole", &[])
}

/// Runs the program under gtrace with `script` and `flags`: its stdout.
fn run(script: &str, flags: &[&str]) -> String {
    let bin = whole();
    let mut args = flags.to_vec();
    args.extend(["-e", script, "-c", bin.to_str().unwrap()]);
    let r = gtrace(&args);
    assert_eq!(r.code, 0, "gtrace failed:\n{}\n{}", r.stdout, r.stderr);
    r.stdout
}

/// The one line starting with `prefix`, without it.
fn line<'a>(out: &'a str, prefix: &str) -> &'a str {
    let found: Vec<&str> = out.lines().filter_map(|l| l.strip_prefix(prefix)).collect();
    assert_eq!(found.len(), 1, "`{prefix}` lines in:\n{out}");
    found[0]
}

/// gtrace's line `gt KIND` equals the program's `go TRUTH`.
fn same(out: &str, kind: &str, truth: &str) {
    assert_eq!(line(out, &format!("gt {kind} ")), line(out, &format!("go {truth} ")), "gt {kind} vs go {truth}");
}

#[test]
fn whole_values_print_as_gos_fmt() {
    if !privileged("whole_values_print_as_gos_fmt") {
        return;
    }
    let out = run(SCRIPT, &[]);
    for kind in ["v", "+v", "#v", "pv", "p+v", "p#v", "ps", "small", "iface#v"] {
        same(&out, kind, kind);
    }
    // Interfaces: ints, a string, bools, nil, pointers to structs, a struct, errors, and
    // two types named `shape.Box` at run time (two packages named shape).
    let lines = |prefix: &str| {
        let mut v: Vec<&str> = out.lines().filter_map(|l| l.strip_prefix(prefix)).collect();
        v.sort_unstable();
        v
    };
    assert_eq!(lines("go iface ").len(), 12, "{out}");
    assert_eq!(lines("gt iface "), lines("go iface "));
}

#[test]
fn print_prints_a_whole_value_as_v() {
    if !privileged("print_prints_a_whole_value_as_v") {
        return;
    }
    let out = run("on entry main.show { print(c) } on entry main.small { print(p) }", &[]);
    let go_v = line(&out, "go v ");
    assert!(out.lines().any(|l| l == go_v), "print(c) is not %v:\n{out}");
    assert!(out.lines().any(|l| l == "{-1 2}"), "{out}");
}

#[test]
fn what_the_bounds_cut_prints_as_dots() {
    if !privileged("what_the_bounds_cut_prints_as_dots") {
        return;
    }
    let depth = run(r#"on entry main.show { printf("gt d1 %v\n", c); printf("gt d1#v %#v\n", c) }"#, &["--depth", "1"]);
    same(&depth, "d1", "d1");
    same(&depth, "d1#v", "d1#v");
    let fields = run(
        r#"on entry main.show { printf("gt cut %v\n", c); printf("gt cut#v %#v\n", c) }"#,
        &["--max-fields", "3", "--string-limit", "2"],
    );
    same(&fields, "cut", "cut");
    same(&fields, "cut#v", "cut#v");
    let elems = run(
        r#"on entry main.points { printf("gt elems %v %v\n", ps, a); printf("gt elems#v %#v\n", ps) }"#,
        &["--max-elems", "2"],
    );
    same(&elems, "elems", "elems");
    same(&elems, "elems#v", "elems#v");
}

/// A value larger than one event record (`*http.Request` at the default bounds) still
/// compiles: what does not fit is cut, printed as `...`, and said once when compiling.
#[test]
fn a_value_larger_than_a_record_is_cut_and_said() {
    if !privileged("a_value_larger_than_a_record_is_cut_and_said") {
        return;
    }
    let server = support::go_build("httpserver", &[]);
    let cmd = format!("{} 1", server.display());
    let r = gtrace(&["-e", r#"on entry "net/http.(*response).finishRequest" { print(w.req) }"#, "-c", &cmd]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stderr.matches("this value is cut to fit one event record").count(), 1, "{}", r.stderr);
    // One printed request per request the program made, each with its method first.
    let printed: Vec<&str> = r.stdout.lines().filter(|l| l.starts_with("&{")).collect();
    let requests = support::truth(&r.stdout, "requests");
    assert_eq!(printed.len() as i64, requests, "{}", r.stdout);
    assert!(printed.iter().all(|l| l.starts_with("&{GET ") || l.starts_with("&{POST ")), "{printed:?}");
    assert!(printed.iter().any(|l| l.contains(" ...")), "nothing was cut: {printed:?}");
}
