//! gtrace's `-f json` output read back: its objects, and a map's entries at exit.

use serde_json::Value;
use std::collections::BTreeMap;

/// Every JSON object gtrace printed, a line each.
pub fn json(out: &str) -> Vec<Value> {
    out.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// Map `name`'s entries at exit: keys in the script's order joined by `|` -> value.
pub fn entries(objects: &[Value], name: &str) -> BTreeMap<String, Value> {
    let Some(map) = objects.iter().filter(|o| o["type"] == "map" && o["name"] == name).last() else {
        return BTreeMap::new();
    };
    let names: Vec<&str> = map["key_names"].as_array().expect("key_names").iter().filter_map(|n| n.as_str()).collect();
    map["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| (names.iter().map(|n| key_text(&e["keys"][*n])).collect::<Vec<_>>().join("|"), e["value"].clone()))
        .collect()
}

/// Map `name`'s entries at exit as counts (keys joined by `|` -> count).
pub fn counts(objects: &[Value], name: &str) -> BTreeMap<String, u64> {
    let as_count = |(k, v): (String, Value)| {
        let n = v.as_u64().unwrap_or_else(|| panic!("{name}[{k}]: not a count: {v}"));
        (k, n)
    };
    entries(objects, name).into_iter().map(as_count).collect()
}

/// The text of every printf record, in order.
pub fn printed(objects: &[Value]) -> Vec<String> {
    objects.iter().filter(|o| o["type"] == "printf").filter_map(|o| o["text"].as_str().map(String::from)).collect()
}

/// A key part as text: strings as they are, numbers in decimal.
pub fn key_text(v: &Value) -> String {
    v.as_str().map(String::from).unwrap_or_else(|| v.to_string())
}

/// The hits the `--stats` object says stopped short for a reason containing `why`, over
/// every probe (each probe's `skipped`: [why, count] pairs).
pub fn skipped(objects: &[Value], why: &str) -> u64 {
    let stats = objects.iter().filter(|o| o["type"] == "stats").last().expect("a --stats object");
    let probes = stats["probes"].as_array().expect("probes");
    let pairs = probes.iter().flat_map(|p| p["skipped"].as_array().cloned().unwrap_or_default());
    pairs
        .filter(|pair| pair[0].as_str().is_some_and(|w| w.contains(why)))
        .map(|pair| pair[1].as_u64().unwrap_or_else(|| panic!("not a count: {pair}")))
        .sum()
}
