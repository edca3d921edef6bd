//! hist()'s percentiles against a Go program that knows its own (tests/go/pctl): the
//! values it passes to a parameter (each printed percentile within 5% of the exact one,
//! min and max exact, in text and in `-f json`), and the time its calls take (against the
//! program's own timing of each call, which includes a little more than gtrace's
//! entry-to-return: within 5% plus 100us).

mod support;

use support::{privileged, truth};

/// Runs `pctl MODE N` under gtrace with `script` and extra arguments.
fn trace(script: &str, mode: &str, n: u32, extra: &[&str]) -> support::Run {
    let args = [&["-e", script][..], extra].concat();
    support::trace_command(&args, &support::go_build("pctl", &[]), &format!("{mode} {n}"))
}

/// The percentile line under the histogram: `p50 X  p90 Y ...  max Z` as (name, text).
fn percentile_line(out: &str) -> Vec<(String, String)> {
    let line = out.lines().find(|l| l.starts_with("p50 ")).unwrap_or_else(|| panic!("no percentile line in:\n{out}"));
    line.split("  ")
        .map(|part| {
            let (name, value) = part.split_once(' ').expect("name value");
            (name.to_string(), value.to_string())
        })
        .collect()
}

/// A duration as text output prints it (`4.19ms`, `812us`, `2s`), in nanoseconds.
fn nanoseconds(text: &str) -> f64 {
    for (unit, scale) in [("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)] {
        if let Some(n) = text.strip_suffix(unit).and_then(|n| n.parse::<f64>().ok()) {
            return n * scale;
        }
    }
    panic!("not a duration: {text}")
}

/// The program's truth for each printed name.
const NAMES: [(&str, &str); 5] = [("p50", "p50"), ("p90", "p90"), ("p99", "p99"), ("p99.9", "p999"), ("max", "max")];

fn relative(got: f64, want: f64) -> f64 {
    (got - want).abs() / want
}

#[test]
fn percentiles_of_a_parameter_are_within_five_percent_of_the_programs() {
    if !privileged("percentiles_of_a_parameter_are_within_five_percent_of_the_programs") {
        return;
    }
    let r = trace("on entry main.sample { @v = hist(v) }", "values", 20_000, &[]);
    let line = percentile_line(&r.stdout);
    assert_eq!(line.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), NAMES.map(|(n, _)| n), "{}", r.stdout);
    for ((name, text), (_, key)) in line.iter().zip(NAMES) {
        let (got, want) = (text.parse::<f64>().expect("a number"), truth(&r.stdout, key) as f64);
        assert!(relative(got, want) <= 0.05, "{name}: gtrace {got}, the program {want}\n{}", r.stdout);
        if name == "max" {
            assert_eq!(got, want, "the max is exact");
        }
    }
    // The rows printed stay powers of two, and count every call.
    let rows: Vec<&str> = r.stdout.lines().filter(|l| l.starts_with('[') || l.starts_with('(')).collect();
    let total: i64 = rows
        .iter()
        .map(|l| l.split('|').next().unwrap().split_whitespace().last().unwrap().parse::<i64>().unwrap())
        .sum();
    assert_eq!(total, truth(&r.stdout, "n"), "{}", r.stdout);
    assert!(rows.iter().any(|l| l.starts_with("[4K, 8K)") || l.starts_with("[4096, 8192)")), "{}", r.stdout);

    // -f json: the same numbers as fields of the entry, min and max exact.
    let r = trace("on entry main.sample { @v = hist(v) }", "values", 20_000, &["-f", "json"]);
    let map = r
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|j| j["type"] == "map")
        .unwrap_or_else(|| panic!("no map in:\n{}", r.stdout));
    let entry = &map["entries"][0];
    let truth_line: String = r.stdout.lines().find(|l| l.starts_with("truth ")).expect("truth").to_string();
    for (name, key) in NAMES {
        let (got, want) =
            (entry[name].as_f64().unwrap_or_else(|| panic!("{name} in {entry}")), truth(&truth_line, key) as f64);
        assert!(relative(got, want) <= 0.05, "{name}: gtrace {got}, the program {want}\n{entry}");
    }
    assert_eq!(entry["min"].as_i64(), Some(truth(&truth_line, "min")), "{entry}");
    assert_eq!(entry["max"].as_i64(), Some(truth(&truth_line, "max")), "{entry}");
    assert_eq!(entry["count"].as_i64(), Some(truth(&truth_line, "n")), "{entry}");
}

#[test]
fn percentiles_of_elapsed_follow_the_programs_own_timing() {
    if !privileged("percentiles_of_elapsed_follow_the_programs_own_timing") {
        return;
    }
    let r = trace("on return main.work { @lat = hist(elapsed) }", "sleeps", 300, &[]);
    for ((name, text), (_, key)) in percentile_line(&r.stdout).iter().zip(NAMES) {
        let (got, want) = (nanoseconds(text), truth(&r.stdout, key) as f64);
        // gtrace times entry to return; the program times its call from outside, a few
        // microseconds more (time.Now, the call itself).
        assert!(
            (got - want).abs() <= 0.05 * want + 100_000.0,
            "{name}: gtrace {text}, the program {want}ns\n{}",
            r.stdout
        );
    }
}
