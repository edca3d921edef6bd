//! Reads of the target's memory that fail are counted and said (src/lower/unread.rs):
//! tests/go/unread calls `main.inspect` with a pointer into a page mapped PROT_NONE
//! (which it never reads through), with a good pointer and with nil, and says how many
//! of each; `main.look` only ever gets the good pointer and nil. Needs root for tracing
//! (SKIP without it, unless CI=true: then it fails).

mod support;

use support::jsonout::{counts, json};
use support::{privileged, trace_attached, truth};

fn unread() -> std::path::PathBuf {
    support::go_build("unread", &[])
}

const SAID: &str = "reads of target memory failed in on entry";

#[test]
fn a_field_read_through_an_unmapped_pointer_is_counted_said_and_zero() {
    if !privileged("a_field_read_through_an_unmapped_pointer_is_counted_said_and_zero") {
        return;
    }
    let script = "on entry main.inspect { @x = sum(p.X); @n = count() }";
    let r = trace_attached(&["-e", script, "--stats", "-f", "json"], &unread(), "");
    let bad = truth(&r.stdout, "bad");
    // One read of p.X a call: each call through the unreadable page failed once, and
    // read zero; those through nil read zero and are not counted.
    let line = format!("{bad} {SAID} main.inspect (values printed as zero or empty)");
    assert!(r.stderr.contains(&line), "no `{line}` in:\n{}", r.stderr);
    let objects = json(&r.stdout);
    assert_eq!(counts(&objects, "@x")[""], truth(&r.stdout, "sumx") as u64, "{}", r.stdout);
    assert_eq!(counts(&objects, "@n")[""], truth(&r.stdout, "calls") as u64, "{}", r.stdout);
    let stats = objects.iter().find(|o| o["type"] == "stats").unwrap_or_else(|| panic!("no stats in {}", r.stdout));
    let probe = &stats["probes"][0];
    assert_eq!(probe["probe"], "on entry main.inspect");
    assert_eq!(probe["reads_failed"], bad, "{stats}");
    assert!(stats["lost"].as_str().is_some_and(|l| l.contains(&line)), "{stats}");
}

#[test]
fn a_string_read_through_an_unmapped_pointer_is_empty_and_counted() {
    if !privileged("a_string_read_through_an_unmapped_pointer_is_empty_and_counted") {
        return;
    }
    let script = "on entry main.inspect { @names[p.Name] = count() }";
    let r = trace_attached(&["-e", script, "--stats"], &unread(), "");
    let (bad, nil, good) = (truth(&r.stdout, "bad"), truth(&r.stdout, "nil"), truth(&r.stdout, "good"));
    // The string's header could not be read: its length is 0, so nothing more is read.
    let line = format!("{bad} {SAID} main.inspect (values printed as zero or empty)");
    // At exit, and again under the --stats table.
    assert_eq!(r.stderr.matches(&line).count(), 2, "`{line}` twice in:\n{}", r.stderr);
    assert_eq!(support::map_value(&r.stdout, "@names[]"), bad + nil, "{}", r.stdout);
    assert_eq!(support::map_value(&r.stdout, "@names[ok]"), good, "{}", r.stdout);
}

/// p.X and p.Name's header are read in one read (src/lower/coalesce.rs): when it fails,
/// each counts as its own read did, and each reads zero.
#[test]
fn near_fields_read_together_count_each_failed_read() {
    if !privileged("near_fields_read_together_count_each_failed_read") {
        return;
    }
    let script = "on entry main.inspect { @x = sum(p.X); @names[p.Name] = count() }";
    let r = trace_attached(&["-e", script, "--stats", "-f", "json"], &unread(), "");
    let (bad, nil, good) = (truth(&r.stdout, "bad"), truth(&r.stdout, "nil"), truth(&r.stdout, "good"));
    let objects = json(&r.stdout);
    assert_eq!(counts(&objects, "@x")[""], truth(&r.stdout, "sumx") as u64, "{}", r.stdout);
    let names = counts(&objects, "@names");
    assert_eq!(names["ok"], good as u64, "{}", r.stdout);
    assert_eq!(names[""], (bad + nil) as u64, "{}", r.stdout);
    let stats = objects.iter().find(|o| o["type"] == "stats").unwrap_or_else(|| panic!("no stats in {}", r.stdout));
    // Two fields a call through the unreadable page: two failed reads, as before.
    assert_eq!(stats["probes"][0]["reads_failed"], 2 * bad, "{stats}");
}

#[test]
fn reads_through_good_pointers_and_nil_say_nothing() {
    if !privileged("reads_through_good_pointers_and_nil_say_nothing") {
        return;
    }
    let script = "on entry main.look { @x = sum(p.X); @names[p.Name] = count() }";
    let r = trace_attached(&["-e", script, "--stats", "-f", "json"], &unread(), "");
    let objects = json(&r.stdout);
    assert_eq!(counts(&objects, "@x")[""], truth(&r.stdout, "sumx") as u64, "{}", r.stdout);
    let names = counts(&objects, "@names");
    assert_eq!(names["ok"], truth(&r.stdout, "good") as u64, "{}", r.stdout);
    assert_eq!(names[""], truth(&r.stdout, "nil") as u64, "{}", r.stdout);
    assert!(!r.stderr.contains("reads of target memory"), "{}", r.stderr);
    let stats = objects.iter().find(|o| o["type"] == "stats").unwrap_or_else(|| panic!("no stats in {}", r.stdout));
    assert_eq!(stats["probes"][0]["reads_failed"], 0, "{stats}");
}
