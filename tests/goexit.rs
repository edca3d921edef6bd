//! A goroutine that runtime.Goexit ends inside a traced call leaves no frame behind for
//! the goroutine the runtime gives its g next (tests/go/goexit, one P, so the dead g is
//! the next one taken): leaver(n) calls inner(2n) and then Goexit, never returning; the
//! next goroutine calls inner(2n+1) from deeper in its stack. Every inner(2n) span is the child of
//! leaver's (a frame in flight), every inner(2n+1) span starts a trace of its own; were
//! leaver's frame left on the g, those would be its children. Needs root (SKIP without
//! it, unless CI=true: then it fails).

mod support;

use serde_json::Value;
use support::processes::{truth_of, Gtrace};

#[test]
fn a_goroutine_given_the_g_of_one_goexit_ended_finds_no_frame_of_it() {
    let test = "a_goroutine_given_the_g_of_one_goexit_ended_finds_no_frame_of_it";
    if !support::privileged(test) {
        return;
    }
    let bin = support::go_build("goexit", &[]);
    let script = "on return main.inner { span(n: n) }\non return main.leaver { span() }";
    let mut g = Gtrace::start(&["-e", script, "-f", "json", "-c", bin.to_str().unwrap()]);
    assert_eq!(g.wait(), 0, "{}", g.err.text());
    let out = g.out.text();
    let rounds = truth_of(&out, "rounds");
    // The premise: every fresh goroutine had the dead one's g, as the program saw.
    assert_eq!(truth_of(&out, "reused"), rounds, "the runtime did not reuse the g: {out}");
    let spans: Vec<Value> =
        out.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|v| v["type"] == "span").collect();
    // leaver never returns: no span of its own.
    assert!(spans.iter().all(|s| s["name"] == "main.inner"), "{out}");
    assert_eq!(spans.len() as u64, 2 * rounds, "{out}");
    let n = |s: &Value| -> u64 {
        let attrs = s["attributes"].as_object().unwrap_or_else(|| panic!("no attributes: {s}"));
        attrs["n"].as_str().map(|t| t.parse().unwrap()).or(attrs["n"].as_u64()).unwrap_or_else(|| panic!("{s}"))
    };
    let (in_leaver, fresh): (Vec<&Value>, Vec<&Value>) = spans.iter().partition(|s| n(s) % 2 == 0);
    assert_eq!((in_leaver.len() as u64, fresh.len() as u64), (rounds, rounds), "{out}");
    for s in in_leaver {
        assert!(s["parent_span_id"].is_string(), "inner(2n) is leaver's child: {s}");
    }
    for s in fresh {
        assert!(s["parent_span_id"].is_null(), "inner(2n+1) on a reused g has no parent: {s}");
    }
}
