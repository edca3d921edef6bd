//! pprof profiles (`--pprof FILE`): a `stacks::Profile` as gzipped profile.proto, the
//! format `go tool pprof` reads, laid out as Go's runtime/pprof lays out its own: one
//! location per address with its source lines (inlined functions first, several lines
//! in one location), functions by name with their file and start line, labels by key
//! (numbers for integers), and one mapping for the binary's code with its build id and
//! its file offset, so that pprof can also symbolize it again from the binary.
//! Messages are prost's, generated from proto/profile.proto (build.rs).

use super::proto;
use super::stacks::{LabelValue, Profile};
use prost::Message;
use std::collections::HashMap;
use std::io::Write;

/// The traced binary, as the profile's mapping names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binary {
    pub path: String,
    /// The GNU build id in hex where the binary has one (what pprof compares with a
    /// binary's own), else Go's build id.
    pub build_id: String,
    /// Where its code is in the traced process: `[start, limit)`, mapped from this file
    /// offset. None when not known (a PIE traced with -b: each process has its own).
    pub text: Option<(u64, u64, u64)>,
}

/// What a profile says beside its samples.
pub struct Meta<'a> {
    pub binary: &'a Binary,
    /// Free text, shown by `go tool pprof -comments`: the script, the target, the maps.
    pub comments: Vec<String>,
    /// When it was written, in nanoseconds since the epoch.
    pub time_nanos: i64,
}

/// The profile's string table: entry 0 is "".
struct Strings {
    list: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        Strings { list: vec![String::new()], index: HashMap::from([(String::new(), 0)]) }
    }

    fn id(&mut self, s: &str) -> i64 {
        if let Some(i) = self.index.get(s) {
            return *i;
        }
        let i = self.list.len() as i64;
        self.list.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// The profile as pprof's messages.
pub fn message(profile: &Profile, meta: &Meta<'_>) -> proto::Profile {
    let mut strings = Strings::new();
    let mut out = proto::Profile {
        sample_type: (profile.sample_types.iter())
            .map(|t| proto::ValueType { r#type: strings.id(&t.name), unit: strings.id(t.unit) })
            .collect(),
        time_nanos: meta.time_nanos,
        ..Default::default()
    };
    if let Some(last) = profile.parts.last() {
        out.default_sample_type = strings.id(&profile.sample_types[last.weight].name);
    }
    let in_text = |a: u64| meta.binary.text.is_some_and(|(start, limit, _)| (start..limit).contains(&a));
    let mut functions: HashMap<&str, u64> = HashMap::new();
    for (i, location) in profile.locations.iter().enumerate() {
        let mut lines = Vec::new();
        for f in &location.frames {
            let next = functions.len() as u64 + 1;
            let id = *functions.entry(&f.function).or_insert_with(|| {
                let name = strings.id(&f.function);
                out.function.push(proto::Function {
                    id: next,
                    name,
                    system_name: name,
                    filename: strings.id(f.file.as_deref().unwrap_or("")),
                    start_line: i64::from(f.start_line),
                });
                next
            });
            lines.push(proto::Line { function_id: id, line: i64::from(f.line) });
        }
        out.location.push(proto::Location {
            id: i as u64 + 1,
            mapping_id: u64::from(in_text(location.address)),
            address: location.address,
            line: lines,
            is_folded: false,
        });
    }
    out.mapping.push(mapping(profile, meta.binary, &mut strings));
    for s in &profile.samples {
        out.sample.push(proto::Sample {
            location_id: s.stack.iter().map(|i| *i as u64 + 1).collect(),
            value: s.values.clone(),
            label: (s.labels.iter())
                .map(|l| match &l.value {
                    LabelValue::Str(v) => {
                        proto::Label { key: strings.id(&l.key), str: strings.id(v), ..Default::default() }
                    }
                    LabelValue::Num { value, unit } => proto::Label {
                        key: strings.id(&l.key),
                        num: *value,
                        num_unit: strings.id(unit),
                        ..Default::default()
                    },
                })
                .collect(),
        });
    }
    out.comment = meta.comments.iter().map(|c| strings.id(c)).collect();
    out.string_table = strings.list;
    out
}

/// The binary's mapping: what is known of the locations in it says what pprof need not
/// look up again.
fn mapping(profile: &Profile, binary: &Binary, strings: &mut Strings) -> proto::Mapping {
    let (start, limit, offset) = binary.text.unwrap_or((0, 0, 0));
    let mine: Vec<_> =
        profile.locations.iter().filter(|l| binary.text.is_some() && (start..limit).contains(&l.address)).collect();
    let functions = !mine.is_empty() && mine.iter().all(|l| !l.frames.is_empty());
    let lines = functions && mine.iter().all(|l| l.frames.iter().all(|f| f.file.is_some()));
    proto::Mapping {
        id: 1,
        memory_start: start,
        memory_limit: limit,
        file_offset: offset,
        filename: strings.id(&binary.path),
        build_id: strings.id(&binary.build_id),
        has_functions: functions,
        has_filenames: lines,
        has_line_numbers: lines,
        has_inline_frames: lines,
    }
}

/// The profile as a file's bytes: the message, gzipped.
pub fn encode(profile: &Profile, meta: &Meta<'_>) -> std::io::Result<Vec<u8>> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&message(profile, meta).encode_to_vec())?;
    gz.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::stacks::{Frame, Label, Location, Part, Sample, SampleType};

    fn frame(function: &str, line: u32) -> Frame {
        Frame { function: function.into(), file: Some("/src/main.go".into()), line, start_line: 3 }
    }

    #[test]
    fn inlined_frames_share_a_location_and_labels_are_typed() {
        let profile = Profile {
            parts: vec![Part { map: "@".into(), types: 0..2, weight: 0, partial: None }],
            sample_types: vec![
                SampleType { name: "calls".into(), unit: "count" },
                SampleType { name: "wall".into(), unit: "nanoseconds" },
            ],
            samples: vec![Sample {
                stack: vec![0, 1],
                labels: vec![
                    Label { key: "method".into(), value: LabelValue::Str("GET".into()) },
                    Label { key: "took".into(), value: LabelValue::Num { value: 5, unit: "nanoseconds" } },
                ],
                values: vec![2, 900],
            }],
            locations: vec![
                Location { address: 0x1010, frames: vec![frame("main.helper", 7), frame("main.leaf", 12)] },
                Location { address: 0x9000, frames: Vec::new() },
            ],
        };
        let binary = Binary { path: "/bin/prog".into(), build_id: "abc".into(), text: Some((0x1000, 0x2000, 0)) };
        let meta = Meta { binary: &binary, comments: vec!["gtrace".into()], time_nanos: 1 };
        let bytes = encode(&profile, &meta).unwrap();
        let mut raw = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(bytes.as_slice()), &mut raw).unwrap();
        let p = proto::Profile::decode(raw.as_slice()).unwrap();
        let s = |i: i64| p.string_table[i as usize].as_str();
        assert_eq!(s(0), "");
        assert_eq!((s(p.sample_type[1].r#type), s(p.sample_type[1].unit)), ("wall", "nanoseconds"));
        assert_eq!(s(p.default_sample_type), "calls");
        let lines: Vec<(&str, i64)> =
            p.location[0].line.iter().map(|l| (s(p.function[l.function_id as usize - 1].name), l.line)).collect();
        assert_eq!(lines, [("main.helper", 7), ("main.leaf", 12)]);
        assert_eq!((p.location[0].mapping_id, p.location[1].mapping_id), (1, 0));
        assert_eq!(p.sample[0].location_id, [1, 2]);
        assert_eq!(
            (s(p.sample[0].label[0].str), p.sample[0].label[1].num, s(p.sample[0].label[1].num_unit)),
            ("GET", 5, "nanoseconds")
        );
        let m = &p.mapping[0];
        assert_eq!(
            (m.memory_start, m.memory_limit, s(m.filename), s(m.build_id)),
            (0x1000, 0x2000, "/bin/prog", "abc")
        );
        assert!(m.has_functions && m.has_line_numbers && m.has_inline_frames);
        assert_eq!(s(p.comment[0]), "gtrace");
    }
}
