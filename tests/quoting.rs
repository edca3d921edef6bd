//! Strings as a traced program sends them, line breaks, terminal escapes, NUL and bytes
//! that are not UTF-8 included: `%q` prints what Go's own `%q` prints, and a map key is
//! escaped the same way (without the quotes), so it stays on its line. The program
//! (tests/go/e2e, mode `strings`) prints each string with `%q`: that is the truth.
//!
//! Needs root (SKIP without it, a failure when CI=true).

mod support;

/// The program's own `%q` of each string, in order.
fn go_quoted(stdout: &str) -> Vec<String> {
    stdout.lines().filter_map(|l| l.strip_prefix("quoted=")).map(String::from).collect()
}

#[test]
fn printf_q_is_go_quoting() {
    if !support::privileged("printf_q_is_go_quoting") {
        return;
    }
    let bin = support::go_build("e2e", &[]);
    let r = support::gtrace(&[
        "-e",
        r#"on entry main.label { printf("%q\n", s) }"#,
        "-c",
        &format!("{} strings 1", bin.display()),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let want = go_quoted(&r.stdout);
    assert_eq!(want.len(), 10, "{}", r.stdout);
    let got: Vec<String> = r.stdout.lines().filter(|l| l.starts_with('"')).map(String::from).collect();
    assert_eq!(got, want);
}

#[test]
fn map_keys_are_escaped_on_their_line() {
    if !support::privileged("map_keys_are_escaped_on_their_line") {
        return;
    }
    let bin = support::go_build("e2e", &[]);
    let r = support::gtrace(&[
        "-e",
        "on entry main.label { @k[s] = count() }",
        "-c",
        &format!("{} strings 3", bin.display()),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // A key is the %q text without its quotes, `"` unescaped; each key on its own line.
    let mut want: Vec<String> =
        go_quoted(&r.stdout).iter().map(|q| format!("@k[{}]: 3", q[1..q.len() - 1].replace("\\\"", "\""))).collect();
    let mut got: Vec<String> = r.stdout.lines().filter(|l| l.starts_with("@k[")).map(String::from).collect();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    assert!(!r.stdout.contains('\u{1b}') && !r.stdout.contains('\0'), "raw control bytes in the output");
}
