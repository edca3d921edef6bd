//! Floats in memory end to end: float64 and float32 fields behind a pointer, slice
//! elements, an array on the stack, compared with float literals, used as map keys and
//! printed with %v, %e, %f, %g and their precisions, widths and flags; channels' len and
//! cap. tests/go/floats prints what Go's fmt prints for the same values in the same
//! shapes, so lines compare one to one. Needs root (SKIP without it, unless CI=true).

mod support;

use support::{gtrace, privileged, sorted_lines};

fn floats() -> std::path::PathBuf {
    support::go_build("floats", &[])
}

const SCRIPT: &str = r#"
on entry main.observe {
    printf("gt v %d %v %v %v\n", r.N, r.Temp, r.Ratio, r.Prev)
    printf("gt p %d %.3f %e %g %.2e %8.3f %+.1f %.3g %E %G %-9.2f| %09.3f\n", r.N, r.Temp, r.Temp, r.Ratio, r.Ratio, r.Temp, r.Temp, r.Temp, r.Temp, r.Ratio, r.Temp, r.Temp)
    printf("gt c %d %t %t %t %t %t %t %t %t %t %t %t %t\n", r.N,
        r.Temp < 1.5, r.Temp <= 0, r.Temp == 0, r.Temp != 0, r.Temp > -1e300, r.Temp >= 2.5,
        r.Ratio < 0.1, r.Ratio == 0.1, r.Temp == r.Temp, r.Temp < r.Prev, -r.Temp < 0, r.Temp > 1e9)
    @key[r.Temp] = count()
}
on entry main.series { printf("gt s %v %v %v %v %d\n", xs[0], xs[2], ys[0], ys[1], len(xs)) }
on entry main.pair { printf("gt a %v %v\n", a[0], a[1]) }
on entry main.queue { printf("gt ch %d %d %d %d\n", len(ch), cap(ch), len(done), cap(done)) }
"#;

#[test]
fn floats_print_compare_and_key_as_go() {
    if !privileged("floats_print_compare_and_key_as_go") {
        return;
    }
    let r = gtrace(&["-e", SCRIPT, "-c", floats().to_str().unwrap()]);
    assert_eq!(r.code, 0, "gtrace failed:\n{}\n{}", r.stdout, r.stderr);
    let n = support::truth(&r.stdout, "values") as usize;
    for kind in ["v", "p", "c"] {
        let go = sorted_lines(&r.stdout, &format!("go {kind} "));
        assert_eq!(go.len(), n, "{}", r.stdout);
        assert_eq!(sorted_lines(&r.stdout, &format!("gt {kind} ")), go, "{kind}:\n{}", r.stdout);
    }
    for kind in ["s", "a", "ch"] {
        let go = sorted_lines(&r.stdout, &format!("go {kind} "));
        assert_eq!(go.len(), 1, "{}", r.stdout);
        assert_eq!(sorted_lines(&r.stdout, &format!("gt {kind} ")), go, "{kind}:\n{}", r.stdout);
    }
    // Each float key counted as Go counts the values by their bits.
    let mut keys: Vec<String> =
        r.stdout.lines().filter_map(|l| l.strip_prefix("@key[")).map(|l| l.replacen("]: ", " ", 1)).collect();
    keys.sort();
    assert_eq!(keys, sorted_lines(&r.stdout, "go key "), "{}", r.stdout);
}

#[test]
fn floats_print_as_json_numbers_or_strings() {
    if !privileged("floats_print_as_json_numbers_or_strings") {
        return;
    }
    let script = r#"on entry main.observe { print(r.N, r.Temp) }"#;
    let r = gtrace(&["-f", "json", "-e", script, "-c", floats().to_str().unwrap()]);
    assert_eq!(r.code, 0, "gtrace failed:\n{}\n{}", r.stdout, r.stderr);
    let go: std::collections::HashMap<String, String> = r
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("go v "))
        .filter_map(|l| {
            let mut w = l.split(' ');
            Some((w.next()?.to_string(), w.next()?.to_string()))
        })
        .collect();
    let mut seen = 0;
    for l in r.stdout.lines().filter(|l| l.starts_with('{')) {
        let v: serde_json::Value = serde_json::from_str(l).expect("JSON");
        let n = v["values"][0].to_string();
        let f = &v["values"][1];
        let text = match f {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        // JSON numbers keep Go's digits (serde prints them back its own way, so compare
        // the values); NaN and the infinities are strings.
        let want = &go[&n];
        if f.is_number() {
            assert_eq!(f.as_f64().unwrap(), want.parse::<f64>().unwrap(), "{l}");
        } else {
            assert_eq!(&text, want, "{l}");
            assert!(["NaN", "+Inf", "-Inf"].contains(&text.as_str()), "{l}");
        }
        seen += 1;
    }
    assert_eq!(seen, go.len(), "{}", r.stdout);
}
