//! Folded stacks: one line a stack, its frames from the root to the leaf separated by `;`,
//! a space, then its weight (`main.main;main.work;main.leaf 12`): what FlameGraph's
//! flamegraph.pl, inferno and speedscope read. `-f folded` prints them; `--flamegraph`
//! draws the same lines.
//!
//! Inlined functions are frames of their own, as in Go's profiles. A map's other keys
//! are frames at the root, `name=value`. Stacks that differ only in their addresses
//! (two calls from one function) are one line. A `;` inside a name (Go's generic shapes
//! may hold one) is written `:`, so that it cannot split a frame.

use super::stacks::{LabelValue, Location, Part, Profile};
use std::collections::BTreeMap;

/// The lines of one map of `profile`, weighed by its weight type, sorted; `root` is a
/// frame put below every stack (the map's name where several maps share the output).
/// Stacks of weight 0 or less are left out: a flame graph cannot draw them.
pub fn lines(profile: &Profile, part: &Part, root: Option<&str>) -> Vec<String> {
    let mut merged: BTreeMap<String, i64> = BTreeMap::new();
    for sample in &profile.samples {
        let weight = sample.values.get(part.weight).copied().unwrap_or(0);
        if weight <= 0 {
            continue;
        }
        let mut frames: Vec<String> = root.map(frame_text).into_iter().collect();
        frames.extend(sample.labels.iter().map(|l| {
            let value = match &l.value {
                LabelValue::Str(s) => s.clone(),
                LabelValue::Num { value, .. } => value.to_string(),
            };
            frame_text(&format!("{}={value}", l.key))
        }));
        for i in sample.stack.iter().rev() {
            push_location(&profile.locations[*i], &mut frames);
        }
        let total = merged.entry(frames.join(";")).or_default();
        *total = total.saturating_add(weight);
    }
    merged.into_iter().map(|(stack, n)| format!("{stack} {n}")).collect()
}

/// A location's frames, outermost first; its address where nothing is known of it.
fn push_location(location: &Location, frames: &mut Vec<String>) {
    if location.frames.is_empty() {
        frames.push(format!("{:#x}", location.address));
    }
    frames.extend(location.frames.iter().rev().map(|f| frame_text(&f.function)));
}

/// A frame's text without what would end it: `;` becomes `:`, line breaks spaces.
fn frame_text(name: &str) -> String {
    name.replace(';', ":").replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::stacks::{Frame, Label, Sample, SampleType};

    fn frame(function: &str) -> Frame {
        Frame { function: function.into(), file: None, line: 0, start_line: 0 }
    }

    fn profile() -> Profile {
        let loc = |address, names: &[&str]| Location { address, frames: names.iter().map(|n| frame(n)).collect() };
        let sample = |stack: Vec<usize>, n| Sample { stack, labels: Vec::new(), values: vec![n] };
        Profile {
            parts: vec![Part { map: "@".into(), types: 0..1, weight: 0, partial: None }],
            sample_types: vec![SampleType { name: "calls".into(), unit: "count" }],
            samples: vec![
                sample(vec![0, 2], 3),
                sample(vec![1, 3], 4),
                sample(vec![0, 4], 5),
                sample(vec![5, 2], 0),
                sample(vec![6], 1),
            ],
            locations: vec![
                loc(0x10, &["main.leaf"]),
                loc(0x14, &["main.inner", "main.leaf"]),
                loc(0x20, &["main.main"]),
                loc(0x24, &["main.main"]),
                loc(0x28, &["main.main"]),
                loc(0x30, &["main.zero"]),
                loc(0x99, &[]),
            ],
        }
    }

    #[test]
    fn root_first_with_inlined_frames_and_merged_by_name() {
        let p = profile();
        assert_eq!(
            lines(&p, &p.parts[0], None),
            ["0x99 1", "main.main;main.leaf 8", "main.main;main.leaf;main.inner 4"]
        );
    }

    #[test]
    fn labels_and_the_map_are_root_frames() {
        let mut p = profile();
        p.samples.truncate(1);
        p.samples[0].labels = vec![Label { key: "method".into(), value: LabelValue::Str("GET;x".into()) }];
        assert_eq!(lines(&p, &p.parts[0], Some("@calls")), ["@calls;method=GET:x;main.main;main.leaf 3"]);
    }
}
