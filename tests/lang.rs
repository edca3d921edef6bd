//! The language's operations against Go's own (tests/go/lang) that need more than a
//! case (integer arithmetic and stored strings are in tests/cases/lang.cases): lhist
//! buckets of extreme values read from JSON, call stacks a probe stores and another reads
//! back, string keys of different lengths in one map. The typing
//! rules (Go's: one type per operation, untyped constants that must fit) are checked
//! with `--check`, which needs no privileges.

mod support;

use serde_json::Value;
use support::{check_against, privileged, Run};

fn lang() -> std::path::PathBuf {
    support::go_build("lang", &[])
}

fn trace(script: &str, json: bool) -> Run {
    let format: &[&str] = if json { &["-f", "json"] } else { &[] };
    support::trace_command(&[&["-e", script][..], format].concat(), &lang(), "")
}

/// The JSON object gtrace printed for map `name`.
fn map<'a>(objects: &'a [Value], name: &str) -> &'a Value {
    objects.iter().find(|o| o["type"] == "map" && o["name"] == name).unwrap_or_else(|| panic!("no {name}"))
}

fn json(out: &str) -> Vec<Value> {
    out.lines().filter(|l| l.starts_with('{')).map(|l| serde_json::from_str(l).expect("JSON")).collect()
}

/// `go KEY I=N` lines: N by bucket index I.
fn go_buckets(out: &str, key: &str) -> Vec<u64> {
    let mut v = Vec::new();
    for l in out.lines().filter_map(|l| l.strip_prefix(&format!("go {key} "))) {
        let (i, n) = l.split_once('=').expect("I=N");
        assert_eq!(i.parse::<usize>().unwrap(), v.len());
        v.push(n.parse().unwrap());
    }
    v
}

#[test]
fn lhist_over_all_of_int64_and_of_unsigned_values() {
    if !privileged("lhist_over_all_of_int64_and_of_unsigned_values") {
        return;
    }
    let r = trace(
        "on entry main.sample { @h = lhist(v, -9223372036854775807, 9223372036854775807, 4611686018427387904) }
         on entry main.sampleU { @u = lhist(v, 10, 100, 10) }",
        true,
    );
    let objects = json(&r.stdout);
    for (name, key, lo, step) in [("@h", "lhist", -i64::MAX, 1i64 << 62), ("@u", "ulhist", 10, 10)] {
        // The buckets printed (the empty ones are left out), by index.
        let buckets = map(&objects, name)["entries"][0]["value"].as_array().expect("buckets").clone();
        let want = go_buckets(&r.stdout, key);
        let mut got = vec![0; want.len()];
        for b in &buckets {
            let i = match (b["min"].as_i64(), b["max"].as_i64()) {
                (None, _) => 0,
                (_, None) => want.len() - 1,
                (Some(min), _) => ((i128::from(min) - i128::from(lo)) / i128::from(step)) as usize + 1,
            };
            got[i] = b["count"].as_u64().unwrap();
        }
        assert_eq!(got, want, "{name}: {buckets:?}");
    }
    // The bounds printed are the buckets' own, across all of int64.
    let h = map(&objects, "@h")["entries"][0]["value"].as_array().unwrap().clone();
    assert_eq!(h[3]["min"], 1);
    assert_eq!(h[3]["max"], (1u64 << 62) + 1);
}

#[test]
fn stored_stacks_are_read_back() {
    if !privileged("stored_stacks_are_read_back") {
        return;
    }
    let r = trace(
        "on entry main.middle { self.st = ustack; @st[goid] = ustack }
         on entry main.leaf { @fromself[self.st] = count(); @frommap[@st[goid]] = count() }",
        true,
    );
    assert!(r.stdout.contains("stacks viaA=3 viaB=5"), "{}", r.stdout);
    let objects = json(&r.stdout);
    for name in ["@fromself", "@frommap"] {
        let mut got: Vec<(String, u64)> = map(&objects, name)["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let frames: Vec<&str> =
                    e["keys"]["st"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
                // The stack stored at middle, not the one at leaf where it is read.
                assert!(frames[0].starts_with("main.middle+"), "{name}: {frames:?}");
                (frames[1].split('+').next().unwrap().to_string(), e["value"].as_u64().unwrap())
            })
            .collect();
        got.sort();
        assert_eq!(got, [("main.viaA".to_string(), 3), ("main.viaB".to_string(), 5)], "{name}");
    }
}

/// `--check` of `script` against the lang program: Ok(()) or the error text.
fn check(script: &str) -> Result<(), String> {
    let r = check_against(&["-e", script], &lang());
    if r.code == 0 {
        Ok(())
    } else {
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
        Err(r.stderr)
    }
}

fn refused(script: &str, says: &[&str]) {
    let err = check(script).expect_err(script);
    for s in says {
        assert!(err.contains(s), "{script}: no `{s}` in\n{err}");
    }
}

#[test]
fn operations_type_as_in_go() {
    // One type per operation; a hint says how to convert.
    refused("on entry main.mix { if a < b { print(1) } }", &["cannot apply to an int8 and a uint32", "int8(right)"]);
    refused("on entry main.mix { @x = sum(c + d) }", &["mismatched types"]);
    refused("on entry main.mix { if c == 1ms { print(1) } }", &["int64 and a duration"]);
    refused("on entry main.ptrs { if p == q { print(1) } }", &["*int64 with a *string"]);
    // Untyped constants take the other side's type, if they fit.
    refused("on entry main.mix { if a == 300 { print(1) } }", &["constant 300 overflows int8"]);
    refused("on entry main.mix { if b > -1 { print(1) } }", &["constant -1 overflows uint32"]);
    refused("on entry main.mix { @x = sum(c / (1 - 1)) }", &["division by zero"]);
    refused("on entry main.mix { @x = sum((2 - 1) / (1 - 1)) }", &["division by zero"]);
    refused("on entry main.mix { @x = sum(c << -1) }", &["negative shift count"]);
    refused("on entry main.mix { @x = sum(int8(300)) }", &["constant 300 overflows int8"]);
    refused(r#"on entry main.store { @x = sum(int64(s)) }"#, &["cannot convert a string to int64"]);
    for ok in [
        "on entry main.mix { if int64(a) < int64(b) { print(1) } }",
        "on entry main.mix { @x = sum(c << s); @y = sum(uint16(a)); @z = sum(a + 1) }",
        "on entry main.mix { if b > 3000000000 && c < -1 { print(1) } }",
        "on entry main.ptrs { if p == r || q == nil { print(1) } }",
        "on entry main.mix { @d = sum(duration(c) + 1ms); @k = sum(1 << 63) }",
    ] {
        check(ok).unwrap_or_else(|e| panic!("{ok}:\n{e}"));
    }
}

/// `take(@m[k])` gives the element's value and deletes it: a second take gives 0 and
/// the element is gone, at each of the program's calls of main.sample (as many as its
/// lhist buckets count). That two probes taking one element at once on two CPUs get it
/// once is the kernel's (a hash map's delete succeeds for one), not forced here. A map
/// of strings cannot be taken.
#[test]
fn take_gives_a_maps_value_once_and_deletes_it() {
    refused(
        "on entry main.sample { @s[1] = \"x\"; a := take(@s[1]) }",
        &["take takes one map element that holds a number"],
    );
    if !privileged("take_gives_a_maps_value_once_and_deletes_it") {
        return;
    }
    let r = trace(
        "on entry main.sample { @t[1] = v; a := take(@t[1]); b := take(@t[1])
             if a == v { @got = count() }; if b == 0 { @then0 = count() }; if @t[1] == 0 { @gone = count() } }",
        true,
    );
    let calls: u64 = go_buckets(&r.stdout, "lhist").iter().sum();
    assert!(calls > 0, "{}", r.stdout);
    let objects = json(&r.stdout);
    for name in ["@got", "@then0", "@gone"] {
        assert_eq!(map(&objects, name)["entries"][0]["value"].as_u64(), Some(calls), "{name}: {}", r.stdout);
    }
}

#[test]
fn lhist_bounds_are_checked() {
    refused(
        "on entry main.sample { @h = lhist(v, -9223372036854775807, 9223372036854775807, 1) }",
        &["more than 1000", "a step of 18483711496702958 or more"],
    );
    refused("on entry main.sample { @h = lhist(v, 0, 18446744073709551615, 1) }", &["larger than an int64"]);
    refused("on entry main.sample { @h = lhist(v, 10, 10, 1) }", &["lo < hi"]);
    check("on entry main.sample { @h = lhist(v, -9223372036854775807, 9223372036854775807, 18483711496702958) }")
        .unwrap();
}

/// String keys of one map may come from strings of different lengths: literals of
/// different lengths and Go strings share the map's keys (the longest of them), and a
/// string is the same key wherever it is written.
#[test]
fn string_keys_of_different_lengths_are_one_map() {
    if !privileged("string_keys_of_different_lengths_are_one_map") {
        return;
    }
    let r = trace(
        r#"on entry main.store {
               @k[s] = count()
               if len(s) == 4 { @k["beta"] = count() } else { @k["not four letters"] = count() }
           }"#,
        true,
    );
    // What main.store was given: the last string of every other `go recall` line.
    let stored: Vec<String> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("go recall "))
        .step_by(2)
        .map(|l| l.split_whitespace().last().unwrap().to_string())
        .collect();
    assert_eq!(stored.len(), 4);
    let mut want = std::collections::BTreeMap::new();
    for s in &stored {
        *want.entry(s.clone()).or_insert(0u64) += 1;
        let k = if s.len() == 4 { s.clone() } else { "not four letters".to_string() };
        *want.entry(k).or_insert(0) += 1;
    }
    let objects = json(&r.stdout);
    let got: std::collections::BTreeMap<String, u64> = map(&objects, "@k")["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["keys"]["s"].as_str().unwrap().to_string(), e["value"].as_u64().unwrap()))
        .collect();
    assert_eq!(got, want, "{}", r.stdout);
}
