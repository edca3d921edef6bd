//! Go values: refusals with their reasons, key names in JSON and plans. The values read
//! end to end (every shape the register ABI passes, compared with the truth
//! tests/go/values prints) are declarative cases in tests/cases/values.cases. Needs root
//! for tracing (SKIP without it, unless CI=true: then it fails).

mod support;

use support::{gtrace, privileged, truth, Run};

fn values() -> std::path::PathBuf {
    support::go_build("values", &[])
}

/// Runs the values program under gtrace with `script`.
fn trace(script: &str) -> Run {
    support::trace_command(&["-e", script], &values(), "")
}

// Refusals: no privileges needed.

fn check_err(script: &str) -> String {
    let r = gtrace(&["--check", "-e", script, "-b", values().to_str().unwrap()]);
    assert_ne!(r.code, 0, "expected an error for {script}");
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    r.stderr
}

#[test]
fn a_float_parameter_is_refused_with_the_reason() {
    let e = check_err("on entry main.fl { @s = sum(x) }");
    assert!(e.contains("it is passed in X0, a float register"), "{e}");
    assert_eq!(e.matches("error").count(), 1, "one error, not a cascade:\n{e}");
}

#[test]
fn an_unknown_field_gets_the_closest_name() {
    let e = check_err("on entry main.handle { @x[r.URL.Pth] = count() }");
    assert!(e.contains("no field `Pth` in main.URL") && e.contains("did you mean `Path`?"), "{e}");
}

#[test]
fn a_string_used_as_a_number_is_refused() {
    let e = check_err("on entry main.handle { @x = sum(r.Method) }");
    assert!(e.contains("sum() needs an integer or a duration, not a string"), "{e}");
}

#[test]
fn a_struct_is_not_a_map_key() {
    let e = check_err("on entry main.split { @x[p] = count() }");
    assert!(e.contains("main.Point cannot be a map key"), "{e}");
}

#[test]
fn named_keys_print_as_before_and_name_the_json_fields() {
    if !privileged("named_keys_print_as_before_and_name_the_json_fields") {
        return;
    }
    let script = "on entry main.handle { @req[verb: r.Method, r.URL.Host, r.Size % 2] = count() }";
    let text = trace(script).stdout;
    let r = gtrace(&["-e", script, "-f", "json", "-c", values().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let map: serde_json::Value = r
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|o| o["name"] == "@req")
        .unwrap_or_else(|| panic!("no @req in {}", r.stdout));
    // Named, after the expression's last name (snake case), and by position.
    assert_eq!(map["key_names"], serde_json::json!(["verb", "host", "key2"]));
    for host in ["a.example", "b.example", "c.example", "d.example"] {
        let (mut text_total, mut json_total) = (0, 0);
        for parity in [0, 1] {
            // Text output is as it was: the keys' values, without names.
            let line = format!("@req[GET, {host}, {parity}]: ");
            text_total += text.lines().find_map(|l| l.strip_prefix(&line)).map_or(0, |v| v.trim().parse().unwrap());
            let entry = map["entries"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["keys"] == serde_json::json!({"verb": "GET", "host": host, "key2": parity}));
            json_total += entry.map_or(0, |e| e["value"].as_i64().unwrap());
        }
        let want = truth(&text, &format!("host:{host}"));
        assert_eq!(text_total, want, "{text}");
        assert_eq!(json_total, want, "{}", r.stdout);
    }
}

/// The key names of each user map in the plan compiled for `script`.
fn planned_key_names(script: &str) -> Vec<(String, Vec<String>)> {
    let r = gtrace(&["--emit", "plan", "-e", script, "-b", values().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let bundle: gtrace::plan::Bundle = serde_json::from_str(&r.stdout).expect("a plan");
    let users = bundle.plan.maps.into_iter().filter_map(|m| match m.role {
        gtrace::plan::MapRole::User { name, key_names, .. } => Some((name, key_names)),
        _ => None,
    });
    users.collect()
}

#[test]
fn a_written_key_name_wins_over_a_derived_one_wherever_it_is_written() {
    let names = planned_key_names(
        "on entry main.handle { @x[r.Method, 1] = count(); hist(r.Size) } on entry main.greet { @x[verb: name, n] = count() }",
    );
    let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(names, vec![("".to_string(), owned(&["func"])), ("x".to_string(), owned(&["verb", "key1"]))]);
}
