//! The whole contract between the compiler and the runtime: what the compiled object
//! needs to run (maps, probes and where they attach, event formats) and how to read back
//! and print what it produced. The object's bytes plus a `Plan` are all the runtime needs:
//! both are written together by `--emit plan` and read back by `gtrace run`.

use crate::gobin::BuildIds;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

mod accounting;
pub mod validate;

pub use accounting::*;

/// The version of the plan's format. A plan of another version is refused.
pub const PLAN_VERSION: u32 = 15;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Plan {
    /// `PLAN_VERSION` when written.
    pub version: u32,
    /// The Go executable the probes were compiled for (they attach by file offset).
    pub binary: Binary,
    /// Every BPF map in the object.
    pub maps: Vec<MapSpec>,
    /// Every BPF program in the object and where it attaches.
    pub probes: Vec<ProbeSpec>,
    /// Formats of the events programs send through the ring buffer, indexed by event id.
    pub events: Vec<EventSpec>,
    /// Names of probed functions; the low 32 bits of a uprobe's attach cookie index
    /// this table (see `COOKIE_SLOT_SHIFT` for the rest).
    pub functions: Vec<String>,
    /// The functions and sites the probes passed over (they cannot hold a uprobe), with
    /// why: said in one line when the trace starts.
    #[serde(default)]
    pub skipped: Vec<crate::check::skips::Skipped>,
    /// What the programs count about themselves (hits, losses) and how they can be
    /// governed (rate limits, generations for the budget).
    #[serde(default)]
    pub accounting: Accounting,
    /// The Go types of the whole values events carry (`ValueType::Go`), by `TypeId`.
    #[serde(default)]
    pub go_types: std::sync::Arc<crate::gotypes::Types>,
    /// `--cgroup`: the cgroup array (its object name) that every program attached to the
    /// target checks the current task against before anything else, returning at once
    /// for a task outside the cgroup; the runtime puts the cgroup's directory in it.
    /// Empty when the probes are not scoped to a cgroup.
    #[serde(default)]
    pub cgroup: String,
    /// Generic dictionaries by link-time address (`main..dict.Sum[int]`): what names the
    /// instantiation of a shape function whose `func` value carries its dictionary (see
    /// `Plan::function_name`). Only those of the probed generic code.
    #[serde(default)]
    pub dictionaries: BTreeMap<u64, String>,
    /// The types an interface in a printed value may hold, by the link-time address of
    /// their runtime descriptor: each one's Go name and the layout printing needs (in
    /// `go_types`; for a pointer type, of what it points at). Read from DWARF when the
    /// plan is compiled, so that a plan run on a stripped build prints what a direct
    /// trace does. Empty when no printed value holds an interface.
    #[serde(default)]
    pub dynamic_types: BTreeMap<u64, DynamicType>,
    /// How the kernel runs the instruction under each attach point (by its address):
    /// what a trap there costs (`--stats`, `--budget`). Recomputed and compared when a
    /// plan is validated.
    #[serde(default)]
    pub trap_kinds: BTreeMap<u64, crate::arch::trap::TrapKind>,
}

/// One type of `Plan::dynamic_types`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DynamicType {
    pub name: String,
    pub layout: Option<crate::gotypes::TypeId>,
}

impl Plan {
    /// The name a `func` value stands for: its low 32 bits index `functions`; the high
    /// 32, when not zero, are the link-time address of the dictionary a shape function
    /// was called with, which names the instantiation (`main.Sum[int]`). A dictionary
    /// that is not one of the function's is shown with the shape's name and its address.
    pub fn function_name(&self, raw: u64) -> String {
        let index = raw & 0xffff_ffff;
        let Some(f) = self.functions.get(index as usize) else { return format!("?{raw}") };
        let dict = raw >> 32;
        if dict == 0 {
            return f.clone();
        }
        match self.dictionaries.get(&dict).and_then(|d| crate::gobin::instantiation(f, d)) {
            Some(name) => name,
            None => format!("{f}(dictionary {dict:#x}?)"),
        }
    }

    /// How many uprobe sites the plan attaches to.
    pub fn uprobe_points(&self) -> usize {
        self.probes
            .iter()
            .map(|p| match &p.attach {
                ProbeAttach::Uprobe(points) => points.len(),
                _ => 0,
            })
            .sum()
    }
}

/// The executable a plan was compiled against: a binary given to the runtime must carry
/// the same build ids (or, where it has none, the same path), and the host must run its
/// architecture (the programs read its registers).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Binary {
    pub path: PathBuf,
    pub build_ids: BuildIds,
    #[serde(default)]
    pub arch: crate::arch::Arch,
    /// The main module's path from the build info (`example.com/app`): the exported
    /// traces' `service.name`. A fact of the build, carried so the trace reads it here.
    #[serde(default)]
    pub module: Option<String>,
    /// A PIE's link-time address of its file's first byte: the traced process's load
    /// bias is where it mapped that byte minus this. `None` for other executables.
    #[serde(default)]
    pub link_base: Option<u64>,
}

/// The kind of a BPF map, as the kernel names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MapKind {
    Hash,
    PercpuHash,
    LruHash,
    PercpuArray,
    Array,
    Ringbuf,
    /// `--cgroup`: the cgroup the probes are scoped to, as a directory fd.
    CgroupArray,
}

impl MapKind {
    /// `enum bpf_map_type` in linux/bpf.h.
    pub fn bpf_type(self) -> u32 {
        match self {
            MapKind::Hash => 1,
            MapKind::Array => 2,
            MapKind::PercpuHash => 5,
            MapKind::PercpuArray => 6,
            MapKind::LruHash => 9,
            MapKind::Ringbuf => 27,
            MapKind::CgroupArray => 8,
        }
    }
    pub fn is_percpu(self) -> bool {
        matches!(self, MapKind::PercpuHash | MapKind::PercpuArray)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MapSpec {
    /// The map's symbol in the object (`m0`, `events`, ...).
    pub object_name: String,
    pub kind: MapKind,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    /// What the map is for, and so how (and whether) it is printed.
    pub role: MapRole,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum MapRole {
    /// A user's map: `@name` (empty name for `@`), keyed by `keys`, printed at exit.
    /// `key_names` names each key (the labels of the export, the fields of -f json).
    /// A hash, or a (per-CPU) array for a map keyed by `func` alone: its u32 key is the
    /// index into `Plan::functions`, read back as the 8-byte `Func` key `keys` describes,
    /// and an element that is zero on every CPU is no entry.
    /// `preallocated`: a map whose every element (every value on every CPU, for a
    /// per-CPU one) the kernel allocates when it is created (no allocation in a probe,
    /// which may fail: `Refusal::NoMemory`, and costs more than a free list).
    User {
        name: String,
        keys: Vec<Field>,
        key_names: Vec<String>,
        value: MapValue,
        #[serde(default)]
        preallocated: bool,
    },
    /// Each goroutine's record of its timed calls in flight (for `elapsed` and `on
    /// panic`): an array indexed by a hash of its g pointer and process, and a hash map
    /// keyed by the two (lower/layout.rs `K_*`).
    Goroutines,
    /// Timed calls in flight deeper than a goroutine's record holds, keyed by (g, depth,
    /// process).
    Frames,
    /// Parameters carried from a call's entry to its return, keyed by (g, frame index,
    /// process).
    Carried,
    /// `self.NAME` variables, keyed by (g, variable, process).
    SelfVars,
    /// The ring buffer of print/printf/exit events.
    Events,
    /// Per-CPU scratch memory (zeroed values, event records under construction).
    Scratch,
    /// A PIE's load bias by process (tgid): what package variables' addresses need.
    LoadBias,
    /// The functions one `on panic` probe reports, however many: a hash whose keys are
    /// their indices into `Plan::functions` (u32; the value is 1 and unused). The
    /// runtime fills it when it loads the maps, before anything is attached.
    PanicFunctions { functions: Vec<u32> },
    /// The exemplars of the `hist()` user map `of` (its object name), keyed as it is: for
    /// each key, the last value a call with a span added, with that span's ids
    /// (`lower::layout::EXEMPLAR`: value, kernel time, trace id, span id).
    Exemplars { of: String },
    /// The slots of the private user map `of` (its object name, a hash then its spill):
    /// an array indexed by a hash of the key, each (key, value, keys spilled),
    /// `lower::slotted`.
    Slots { of: String },
    /// The AES T-tables `m[k]` hashes keys with (one entry: four tables of 256 u32,
    /// `lower::aeshash::t_tables`). The runtime fills it before anything is attached.
    AesTables,
}

impl MapRole {
    /// A user's map that prints at exit and is exported: every one but a private
    /// `@_name` (a library's or a script's scratch table, read back in probes only;
    /// `print(@_name)` still prints it).
    pub fn is_shown_user(&self) -> bool {
        matches!(self, MapRole::User { name, .. } if !name.starts_with('_'))
    }
}

/// How a user map's value is laid out and combined across CPUs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum MapValue {
    /// A value assigned with `=`: one of `ty`.
    Plain(ValueType),
    /// An aggregation; `of` is the type of the aggregated expression (durations print
    /// with units).
    Agg { agg: Agg, of: ValueType },
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Agg {
    /// value: u64 count
    Count,
    /// value: i64 sum
    Sum,
    /// value: [count, sum]
    Avg,
    /// value: [seen, min]
    Min,
    /// value: [seen, max]
    Max,
    /// value: [count, sum, min, max]
    Stats,
    /// value: `hist::BUCKETS` u64 buckets (hist.rs: [0] for x <= 0, then 16 a power of
    /// two); the i64 sum of the values (a histogram's `_sum` in the export); the least
    /// value as `x ^ i64::MAX` and the greatest as `x ^ i64::MIN`, both kept as the
    /// largest unsigned (so a zeroed value means none seen, and CPUs combine by max).
    Hist,
    /// value: `lhist_buckets(lo, hi, step)` u64 buckets: [0] below lo, then one per step,
    /// the last for >= hi; then the i64 sum of the values.
    Lhist { lo: i64, hi: i64, step: i64 },
}

/// How many `on interval` probes a script may have (each runs on one of gtrace's own
/// trigger functions).
pub const MAX_INTERVAL_PROBES: usize = 8;

/// Bytes of an interface's record (see `ValueType::Interface`).
pub const INTERFACE_RECORD: u32 = 24 + 8 + 64;

/// The most buckets an `lhist` may have, the one below `lo` and the one from `hi` up
/// included (each is a u64 per CPU in the map's value).
pub const LHIST_MAX_BUCKETS: u32 = 1000;

/// How many buckets `lhist(x, lo, hi, step)` has: one below `lo`, one per `step` from
/// `lo` (the last may be cut short by `hi`), one from `hi` up. Computed without overflow
/// (saturating at u32::MAX) for any bounds; the checker refuses `lo >= hi`, `step <= 0`
/// and more than LHIST_MAX_BUCKETS.
pub fn lhist_buckets(lo: i64, hi: i64, step: i64) -> u32 {
    let span = i128::from(hi) - i128::from(lo);
    let step = i128::from(step.max(1));
    let n = (span.max(0) + step - 1) / step + 2;
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl Agg {
    /// Size in bytes of one CPU's value.
    pub fn value_size(self) -> u32 {
        match self {
            Agg::Count | Agg::Sum => 8,
            Agg::Avg | Agg::Min | Agg::Max => 16,
            Agg::Stats => 32,
            Agg::Hist => 8 * (self.buckets() + 3),
            Agg::Lhist { .. } => 8 * (self.buckets() + 1),
        }
    }
    /// How many buckets a histogram has (0 for the other aggregations).
    pub fn buckets(self) -> u32 {
        match self {
            Agg::Hist => crate::hist::BUCKETS as u32,
            Agg::Lhist { lo, hi, step } => lhist_buckets(lo, hi, step),
            _ => 0,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Agg::Count => "count",
            Agg::Sum => "sum",
            Agg::Avg => "avg",
            Agg::Min => "min",
            Agg::Max => "max",
            Agg::Stats => "stats",
            Agg::Hist => "hist",
            Agg::Lhist { .. } => "lhist",
        }
    }
}

/// A value as it lies in a map key, a map value or an event record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ValueType {
    /// An integer of `size` bytes (1, 2, 4, 8).
    Int {
        size: u8,
        signed: bool,
    },
    Bool,
    /// An IEEE float of `size` bytes (4 or 8): its bits in a u64, printed as Go's %v
    /// prints a float32 or float64.
    Float {
        size: u8,
    },
    /// Nanoseconds, printed with a unit.
    Duration,
    /// A pointer, printed in hex.
    Pointer,
    /// A string of at most `max` bytes: a u32 length then the bytes.
    Str {
        max: u32,
    },
    /// An index into `Plan::functions` (u64): the probed function's name.
    Func,
    /// An interface: [type, data, first word at data, string at data (u64 length, 64
    /// bytes)]: its dynamic type's descriptor and data, and what the data points at, for
    /// printing simple values (`int(3)`, `*errors.errorString("...")`).
    Interface,
    /// `ustack`: `USTACK_DEPTH` program counters, innermost first, 0 after the last.
    Stack,
    /// A whole Go value, copied as `capture` lays it out (types in `Plan::go_types`).
    Go {
        capture: crate::capture::Capture,
    },
}

/// Frames `ustack` records.
pub const USTACK_DEPTH: u32 = 16;

impl ValueType {
    /// Bytes it takes in a record (8-aligned by the compiler).
    pub fn size(&self) -> u32 {
        match self {
            ValueType::Int { size, .. } => *size as u32,
            ValueType::Bool => 1,
            ValueType::Duration | ValueType::Pointer | ValueType::Func | ValueType::Float { .. } => 8,
            ValueType::Interface => INTERFACE_RECORD,
            ValueType::Stack => 8 * USTACK_DEPTH,
            ValueType::Str { max } => max.saturating_add(8),
            ValueType::Go { capture } => capture.size,
        }
    }
}

/// One field of a record at a byte offset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Field {
    pub offset: u32,
    pub ty: ValueType,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProbeSpec {
    /// The program's name in the object.
    pub program: String,
    /// The object's section that holds the program (`uprobe/<program>`).
    pub section: String,
    pub attach: ProbeAttach,
    /// The script's probe header, for messages (`on return main.F`).
    pub describe: String,
    /// Where instructions come from: (first instruction, `FILE:LINE: source line`), in
    /// order, so that a verifier rejection names the line of the script it failed on.
    pub source_lines: Vec<(usize, String)>,
    /// The maps the program uses (object names): a map that a detached program wrote
    /// holds partial data from then on, and every output says so.
    #[serde(default)]
    pub maps: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ProbeAttach {
    /// uprobes in the target binary, one per point.
    Uprobe(Vec<AttachPoint>),
    /// `on begin`: run once in gtrace itself before the target runs.
    Begin,
    /// `on end`: run once in gtrace itself at exit, before maps are printed.
    End,
    /// `on interval`: run every `nanos` (on one CPU).
    Interval { nanos: u64 },
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AttachPoint {
    /// The function, as in `Plan::functions[cookie & 0xffff_ffff]`.
    pub function: String,
    /// Virtual address of the instruction probed (for messages and --emit).
    pub address: u64,
    /// Offset of that instruction in the binary's file: what the uprobe attaches to.
    pub file_offset: u64,
    /// Passed to the program as its attach cookie: an index into `Plan::functions` in
    /// the low 32 bits, the site's hit counter above (`COOKIE_SLOT_SHIFT`); the runtime
    /// adds the link's generation (`COOKIE_GEN_SHIFT`).
    pub cookie: u64,
}

/// What one event record means. A record starts with a u64 event id; the fields follow.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EventSpec {
    pub kind: EventKind,
    pub fields: Vec<Field>,
    /// Total record size in bytes.
    pub size: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum EventKind {
    /// `printf(format, ...)`.
    Printf { format: String },
    /// `print(a, b, ...)`: the values separated by spaces; a value with a label prints as
    /// `label=value` (`print(args)`).
    Print { labels: Vec<Option<String>> },
    /// `print(@m)`: print a user map now (its `object_name`).
    PrintMap { map: String },
    /// `clear(@m)`: clear a map from user space (the kernel side cannot iterate).
    ClearMap { map: String },
    /// `exit()`.
    Exit,
    /// `span(...)`: the header (lower/spans.rs: times, ids, flags, function), then with
    /// `status` the function's `error` result or the panic's value (an interface), then
    /// one field per argument: `keys` names each attribute, `None` the span's name.
    /// `ended`: made by one probe, `span(start: t0)`, from that time to the probe's (the
    /// status, when given, is `error:`'s value); `kind`: OTLP's span kind.
    Span {
        keys: Vec<Option<String>>,
        status: bool,
        panic: bool,
        #[serde(default)]
        ended: bool,
        #[serde(default)]
        kind: SpanKind,
    },
}

/// A span's kind, as OTLP has them (`span(kind: "server")`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpanKind {
    #[default]
    Internal,
    Server,
    Client,
    Producer,
    Consumer,
}

impl SpanKind {
    pub const NAMES: [&'static str; 5] = ["internal", "server", "client", "producer", "consumer"];

    pub fn from_name(name: &str) -> Option<SpanKind> {
        use SpanKind::*;
        [Internal, Server, Client, Producer, Consumer].into_iter().find(|k| k.name() == name)
    }

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// What `--emit plan` writes and `gtrace run` reads: the plan and the object's bytes
/// (base64 in JSON), everything needed to trace on a host that has only the binary.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Bundle {
    pub plan: Plan,
    #[serde(with = "base64_bytes")]
    pub object: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("cannot read the plan {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    /// Not a regular file, or too large.
    #[error(transparent)]
    File(#[from] crate::input::InputError),
    #[error("{path} is not a gtrace plan: {source}")]
    Json { path: PathBuf, source: serde_json::Error },
    #[error("{path} is a plan of format {found}; this gtrace reads format {PLAN_VERSION}")]
    Version { path: PathBuf, found: u32 },
}

impl BundleError {
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            BundleError::Version { .. } => Some("compile the script again with this gtrace: --emit plan -o FILE"),
            BundleError::Json { .. } => Some("a plan is what `gtrace --emit plan -o FILE` writes"),
            BundleError::Io { .. } | BundleError::File(_) => None,
        }
    }
}

impl From<BundleError> for crate::diag::Failure {
    fn from(e: BundleError) -> crate::diag::Failure {
        crate::diag::Failure::system(&e, e.hint())
    }
}

impl Bundle {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Reads a bundle written by `to_json`, refusing other format versions.
    pub fn read(path: &std::path::Path) -> Result<Bundle, BundleError> {
        let bytes = crate::input::read_file(path, crate::input::MAX_TEXT.saturating_mul(16))?;
        let text = String::from_utf8(bytes).map_err(|e| BundleError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        })?;
        let bundle: Bundle =
            serde_json::from_str(&text).map_err(|source| BundleError::Json { path: path.to_path_buf(), source })?;
        if bundle.plan.version != PLAN_VERSION {
            return Err(BundleError::Version { path: path.to_path_buf(), found: bundle.plan.version });
        }
        Ok(bundle)
    }
}

/// Bytes as one base64 string (serde `with`).
mod base64_bytes {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}
