//! `gtrace kafka` end to end, on a real Kafka producer and consumer
//! (github.com/segmentio/kafka-go's Writer and Reader) and a real Kafka-protocol broker
//! (tests/go/kafkaprog: franz-go's kfake, an in-memory cluster that speaks Kafka's wire
//! protocol over TCP, run inside the program: Debian has no Kafka package and only the
//! Go module proxy, crates.io, PyPI and Debian are reachable here), all from the Go
//! module proxy, built with the oldest and the newest kafka-go the library names. The
//! program's own counts and kafka-go's WriterStats and ReaderStats must equal gtrace's
//! maps exactly, a batch the broker refuses on purpose included. Also on a stripped
//! build. Needs root, like every end-to-end test (SKIP said loudly without it, a
//! failure with CI=true).

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use support::jsonout::{entries, json};
use support::{privileged, Run};

fn kafkaprog(version: &str, flags: &[&str]) -> PathBuf {
    support::versioned("kafkaprog", version, flags, &[])
}

/// `gtrace kafka ARGS -c 'PROGRAM ROUNDS'`; must succeed.
fn trace(args: &[&str], program: &Path) -> Run {
    support::trace_command(&[&["kafka"], args].concat(), program, "3")
}

/// The program's own `key|TOPIC=N` lines, by key: TOPIC -> N.
fn truth(out: &str, key: &str) -> BTreeMap<String, u64> {
    let prefix = format!("{key}|");
    out.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|l| l.split_once('='))
        .map(|(t, n)| (t.to_string(), n.parse().unwrap_or_else(|_| panic!("not a number: {n}"))))
        .filter(|(_, n)| *n > 0)
        .collect()
}

fn numbers(objects: &[Value], name: &str, field: Option<&str>) -> BTreeMap<String, u64> {
    entries(objects, name)
        .into_iter()
        .map(|(k, v)| {
            let n = match field {
                Some(f) => v[f].as_u64(),
                None => v.as_u64(),
            };
            let n = n.unwrap_or_else(|| panic!("{name}[{k}]: {v}"));
            (k, n)
        })
        .collect()
}

/// Every value in a histogram: its buckets' counts, by topic.
fn hist_totals(objects: &[Value], name: &str) -> BTreeMap<String, u64> {
    entries(objects, name)
        .into_iter()
        .map(|(k, v)| (k, v.as_array().expect("buckets").iter().map(|b| b["count"].as_u64().expect("count")).sum()))
        .collect()
}

#[test]
fn kafka_counts_produce_and_consume_by_topic_on_the_oldest_and_newest_kafka_go() {
    if !privileged("kafka_counts_produce_and_consume_by_topic_on_the_oldest_and_newest_kafka_go") {
        return;
    }
    for version in support::KAFKA_VERSIONS {
        let r = trace(&["-f", "json"], &kafkaprog(version, &[]));
        let o = json(&r.stdout);
        let what = format!("{version}:\n{}\n{}", r.stdout, r.stderr);
        let produced = truth(&r.stdout, "produced");
        assert_eq!(produced.len(), 2, "two topics: {what}");
        assert_eq!(numbers(&o, "@kafka_produced", None), produced, "{what}");
        let refused = truth(&r.stdout, "produce_errors");
        assert!(!refused.is_empty(), "{what}");
        assert_eq!(numbers(&o, "@kafka_produce_errors", None), refused, "{what}");
        let batches = truth(&r.stdout, "batches");
        assert_eq!(numbers(&o, "@kafka_produce_batches", None), batches, "{what}");
        assert_eq!(numbers(&o, "@kafka_produce_bytes", Some("count")), batches, "{what}");
        assert_eq!(numbers(&o, "@kafka_produce_bytes", Some("sum")), truth(&r.stdout, "produced_bytes"), "{what}");
        assert_eq!(hist_totals(&o, "@kafka_produce_latency"), batches, "{what}");

        let consumed = truth(&r.stdout, "consumed");
        assert_eq!(consumed, truth(&r.stdout, "read"), "the program read every message fetched: {what}");
        assert_eq!(numbers(&o, "@kafka_consumed", None), consumed, "{what}");
        assert_eq!(numbers(&o, "@kafka_consumed_bytes", Some("count")), consumed, "{what}");
        assert_eq!(numbers(&o, "@kafka_consumed_bytes", Some("sum")), truth(&r.stdout, "consumed_bytes"), "{what}");
        assert_eq!(hist_totals(&o, "@kafka_fetch_latency"), truth(&r.stdout, "fetches"), "{what}");
        assert!(!r.stderr.contains("warning"), "{what}");
        assert!(!r.stderr.contains("refused"), "{what}");
    }
}

/// Stripped (-s -w): one line says what cannot be read; produce batches and consumed
/// messages are counted under topic `?`.
#[test]
fn kafka_on_a_stripped_build_counts_batches_and_messages_and_says_what_it_cannot_read() {
    if !privileged("kafka_on_a_stripped_build_counts_batches_and_messages_and_says_what_it_cannot_read") {
        return;
    }
    let version = support::KAFKA_VERSIONS[support::KAFKA_VERSIONS.len() - 1];
    // No batch is slow enough to be printed, however loaded the host (kafka_slow's default
    // is 100ms): the one line printed is the DWARF's.
    let r = trace(&["-f", "json", "--set", "kafka_slow=60s"], &kafkaprog(version, &["-ldflags=-s -w"]));
    let o = json(&r.stdout);
    let said: Vec<&Value> = o.iter().filter(|v| v["type"] == "printf").collect();
    assert_eq!(said.len(), 1, "said once: {said:?}");
    assert!(said[0]["text"].as_str().is_some_and(|s| s.contains("no DWARF")), "{said:?}");
    let all = |key: &str| BTreeMap::from([("?".to_string(), truth(&r.stdout, key).values().sum::<u64>())]);
    assert_eq!(numbers(&o, "@kafka_produce_batches", None), all("batches"), "{}", r.stdout);
    assert_eq!(numbers(&o, "@kafka_consumed", None), all("consumed"), "{}", r.stdout);
    assert!(entries(&o, "@kafka_produced").is_empty(), "{}", r.stdout);
}

/// What an event costs, as the header says: a batch 3 hits (writeBatch's entry, two
/// PUSHes: the call's record and the probe keeping the batch's counts; its RET,
/// single-stepped), a consumed message 1, a fetch 2 (read and Batch.Close,
/// PUSHes), with --stats; no probe at goroutine exits.
#[test]
fn kafka_costs_what_its_header_says() {
    if !privileged("kafka_costs_what_its_header_says") {
        return;
    }
    let version = support::KAFKA_VERSIONS[support::KAFKA_VERSIONS.len() - 1];
    let r = trace(&["--stats"], &kafkaprog(version, &[]));
    let sum = |key: &str| truth(&r.stdout, key).values().sum::<u64>();
    let line = |probe: &str| -> &str {
        r.stderr.lines().find(|l| l.contains(probe)).unwrap_or_else(|| panic!("{probe}: {}", r.stderr))
    };
    let hits = |probe: &str| -> u64 { line(probe).split_whitespace().find_map(|w| w.parse().ok()).expect("hits") };
    assert!(!r.stderr.contains("goroutine exit"), "no self variable: {}", r.stderr);
    let write = "on return github.com/segmentio/kafka-go.(*partitionWriter).writeBatch ";
    assert_eq!(hits(write), sum("batches"));
    assert!(line(write).split_whitespace().any(|w| w == "step"), "a RET is single-stepped: {}", line(write));
    assert_eq!(hits("entry record of github.com/segment"), sum("batches"));
    let keep = "on entry github.com/segmentio/kafka-go.(*partitionWriter).writeBatch ";
    assert_eq!(hits(keep), sum("batches"));
    assert_eq!(hits("(*reader).sendMessage "), sum("consumed"));
    assert_eq!(hits("(*reader).read "), sum("fetches"));
    assert_eq!(hits("(*Batch).Close "), sum("fetches"));
    let entries =
        [keep, "entry record of github.com/segment", "(*reader).sendMessage ", "(*reader).read ", "(*Batch).Close "];
    for probe in entries {
        assert!(line(probe).split_whitespace().any(|w| w == "push"), "not a PUSH: {}", line(probe));
    }
    // Every other probe is the runtime's, for the frames of writeBatch's calls.
    let probes =
        r.stderr.lines().skip_while(|l| !l.starts_with("probe ")).skip(1).take_while(|l| !l.starts_with("target:"));
    for l in probes {
        let known = entries.iter().any(|p| l.contains(p)) || l.contains(write.trim_end()) || l.contains("(runtime.");
        assert!(known, "a probe the header does not name: {l}\n{}", r.stderr);
    }
}

/// `--check` of the library on every build the tests trace (no privileges needed), and
/// on a program without kafka-go: one error that says so and names what fits.
#[test]
fn kafka_checks_on_every_build_and_says_when_a_program_has_no_kafka_go() {
    for version in support::KAFKA_VERSIONS {
        for flags in [&[][..], &["-ldflags=-s -w"][..]] {
            let r = support::check_against(&["kafka"], &kafkaprog(version, flags));
            assert_eq!(r.code, 0, "{version} {flags:?}: {}", r.stderr);
            assert!(r.stderr.contains("kafka: ok,"), "{}", r.stderr);
            assert!(!r.stderr.contains("warning"), "{version} {flags:?}: {}", r.stderr);
        }
    }
    let web = support::go_build("httpserver", &[]);
    let r = support::check_against(&["kafka"], &web);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("has no Kafka Writer or Reader"), "{}", r.stderr);
    assert!(r.stderr.contains("`gtrace http`"), "{}", r.stderr);
}
