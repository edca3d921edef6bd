//! Strings as a traced program sends them, line breaks, terminal escapes, NUL and bytes
//! that are not UTF-8 included: `%q` prints what Go's own `%q` prints, and a map key is
//! escaped the same way (without the quotes), so it stays on its line. The program
//! (tests/go/e2e, mode `strings`) prints each string with `%q`: that is the truth.
//! Wherever text output prints a traced string (printf's `%s` and `%v`, a whole value,
//! an error's message, `print`, map keys and values) it has the same escapes, so no byte
//! the program sends can drive the terminal.
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
    assert_eq!(want.len() as i64, support::truth(&r.stdout, "calls"), "{}", r.stdout);
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

/// What text output prints for a string whose Go `%q` is `q`: the same escapes, without
/// the quotes, `"` as itself.
fn escaped(q: &str) -> String {
    q[1..q.len() - 1].replace("\\\"", "\"")
}

#[test]
fn traced_strings_cannot_drive_the_terminal() {
    if !support::privileged("traced_strings_cannot_drive_the_terminal") {
        return;
    }
    let bin = support::go_build("e2e", &[]);
    let script = r#"
        on entry main.label { printf("s=%s|%v|%-3s|\n", s, s, s); print(s); @k[s] = count(); @last[len(s)] = s }
        on entry main.tag { printf("t=%v\n", t); printf("t+=%+v\n", t) }
        on entry main.fail { printf("e=%s\n", err) }
    "#;
    let out = support::gtrace_command()
        .args(["-e", script, "-c", &format!("{} strings 2", bin.display())])
        .output()
        .expect("run gtrace");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // Not one control byte but the line breaks gtrace writes, and all of it UTF-8
    // without C1 controls (U+0080-U+009F, which some terminals obey too).
    let bad: Vec<(usize, u8)> =
        out.stdout.iter().copied().enumerate().filter(|(_, b)| (*b < 0x20 && *b != b'\n') || *b == 0x7f).collect();
    let stdout = String::from_utf8(out.stdout.clone()).expect("gtrace's output is UTF-8");
    assert!(bad.is_empty(), "raw control bytes {bad:x?} in:\n{stdout}");
    assert!(!stdout.chars().any(|c| ('\u{80}'..='\u{9f}').contains(&c)), "a C1 control in:\n{stdout}");

    let words: Vec<String> = go_quoted(&stdout).iter().map(|q| escaped(q)).collect();
    let calls = support::truth(&stdout, "calls");
    assert_eq!(calls, 2 * words.len() as i64, "{stdout}");
    assert!(words.len() >= 14, "{stdout}");
    let count = |line: &str| stdout.lines().filter(|l| *l == line).count();
    for (j, w) in words.iter().enumerate() {
        let pad = " ".repeat(3usize.saturating_sub(w.chars().count()));
        assert_eq!(count(&format!("s={w}|{w}|{w}{pad}|")), 2, "printf of {w} in:\n{stdout}");
        assert_eq!(count(w), 2, "print of {w} in:\n{stdout}");
        assert_eq!(count(&format!("t={{{w} {j}}}")), 2, "%v of a struct holding {w} in:\n{stdout}");
        assert_eq!(count(&format!("t+={{Name:{w} N:{j}}}")), 2, "%+v of a struct holding {w} in:\n{stdout}");
        assert_eq!(count(&format!("e={w}")), 2, "an error's message {w} in:\n{stdout}");
        assert_eq!(count(&format!("@k[{w}]: 2")), 1, "the key {w} in:\n{stdout}");
    }
    // A stored string: the last word of each length.
    for (j, w) in words.iter().enumerate() {
        let len = go_len(&stdout, j);
        if words.iter().enumerate().skip(j + 1).all(|(i, _)| go_len(&stdout, i) != len) {
            assert_eq!(count(&format!("@last[{len}]: {w}")), 1, "the value {w} in:\n{stdout}");
        }
    }
}

/// The byte length of the program's `j`th string, as its `%q` says (`\xNN` is one byte).
fn go_len(stdout: &str, j: usize) -> usize {
    let q = &go_quoted(stdout)[j];
    let s = q[1..q.len() - 1].as_bytes();
    let mut n = 0;
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'\\' {
            let (skip, bytes) = match s[i + 1] {
                b'x' => (4, 1),
                b'u' => {
                    let c = u32::from_str_radix(std::str::from_utf8(&s[i + 2..i + 6]).unwrap(), 16).unwrap();
                    (6, char::from_u32(c).unwrap().len_utf8())
                }
                _ => (2, 1),
            };
            i += skip;
            n += bytes;
        } else {
            i += 1;
            n += 1;
        }
    }
    n
}

#[test]
fn json_keeps_traced_strings_exact_and_escaped_by_json() {
    if !support::privileged("json_keeps_traced_strings_exact_and_escaped_by_json") {
        return;
    }
    let bin = support::go_build("e2e", &[]);
    let out = support::gtrace_command()
        .args(["-f", "json", "-e", r#"on entry main.label { printf("%s\n", s); @k[s] = count() }"#])
        .args(["-c", &format!("{} strings 1", bin.display())])
        .output()
        .expect("run gtrace");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let bad: Vec<u8> = out.stdout.iter().copied().filter(|b| (*b < 0x20 && *b != b'\n') || *b == 0x7f).collect();
    let stdout = String::from_utf8(out.stdout.clone()).expect("UTF-8");
    assert!(bad.is_empty(), "raw control bytes {bad:x?} in:\n{stdout}");
    let lines: Vec<serde_json::Value> =
        stdout.lines().filter(|l| l.starts_with('{')).map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let texts: Vec<&str> = lines.iter().filter(|j| j["type"] == "printf").filter_map(|j| j["text"].as_str()).collect();
    // The exact strings (JSON decodes its escapes back): the title sequence and the fake line.
    assert!(texts.contains(&"\u{1b}]0;owned\u{7}title\n"), "{texts:?}");
    assert!(texts.contains(&"x\r\nAttached 99 probes\n\n"), "{texts:?}");
    assert_eq!(texts.len() as i64, support::truth(&stdout, "calls"), "{stdout}");
    let map = lines.iter().find(|j| j["type"] == "map").expect("the map");
    let keys: Vec<&str> = map["entries"].as_array().unwrap().iter().filter_map(|e| e["keys"]["s"].as_str()).collect();
    assert!(keys.contains(&"\u{1b}[2J\u{1b}[Hclear"), "{map}");
}
