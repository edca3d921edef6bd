//! A cache file's bytes: a fixed header (magic, format, lengths, a CRC-32 of the
//! description), a JSON description (the gtrace that wrote it, the binary it is for,
//! what it holds: the DWARF lookups, where functions were inlined, and where each DWARF
//! unit's bytes are with their CRC-32) and the raw blobs the description points into
//! (the DWARF units). Opening a file reads and checks the header and the description
//! only: a unit's bytes are read (and checked) when a question reaches the unit
//! (`FileUnits`), so a run pays only for the units it uses. A file is taken only if
//! every check of what it reads passes; anything else is a `Rejected` with its reason,
//! and the file is ignored (never partly trusted), as a plan of another format is
//! refused. A unit whose bytes fail their check is read from the binary instead, and
//! the file is written again (`gobin::StoredUnits`).

use crate::gobin::{crc32, BuildIds, DwarfSeed, InlinedSite, StoredUnits, UnitBytes};
use crate::object::MapDef;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// The first bytes of every cache file.
pub const MAGIC: &[u8; 16] = b"gtrace cache\n\0\0\0";
/// The version of this layout. A file of another is ignored.
pub const FORMAT: u32 = 4;
/// The gtrace that writes and reads caches, its version and its build (a hash of the
/// sources it was built from, build.rs): a file written by another is ignored, even by
/// another build of the same version.
pub const WRITER: &str = concat!("gtrace ", env!("CARGO_PKG_VERSION"), " build ", env!("GTRACE_BUILD_HASH"));

const HEADER: usize = 16 + 4 + 4 + 8 + 4;

/// The longest cache file read or written: the cache directory's bound. A longer one
/// (a sparse file can claim any length) is ignored, never read.
pub const LARGEST: u64 = super::BOUND;

/// What a cache file holds for one binary.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Entry {
    /// The DWARF units and lookups a run reached.
    pub dwarf: Option<DwarfSeed>,
    /// Where the functions a run's patterns named were inlined (`Target::find_inlined`),
    /// by pattern: finding it reads every inline tree of the binary.
    pub inlined: Vec<(String, Vec<InlinedSite>)>,
    /// `Target::code_crc` of the binary the inlined sites were found in (None without
    /// sites): build ids alone may name two builds.
    pub code_crc: Option<u32>,
    /// The large maps the last traces' objects had (`runtime::large_maps`), by a key of
    /// their script and options (`driver::cached::plan_key`), the newest first: made
    /// ahead by the next trace of the same script (`runtime::premake`), used only if
    /// its compiled object's are exactly these.
    pub maps: Vec<(u32, Vec<MapDef>)>,
    /// The binary's `Stamp` when `code_crc` and the DWARF's `info_crc` were its own: a
    /// run on a file of the same stamp takes them without reading the megabytes they
    /// sum (`driver::cached`). None: both are checked.
    pub stamp: Option<crate::input::Stamp>,
}

/// How many scripts' large maps a file keeps.
pub const MAPS_KEPT: usize = 8;

/// The binary a cache file is for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct For {
    pub gnu: Option<String>,
    pub go: Option<String>,
    /// The file's size in bytes. (Its DWARF is named by a CRC-32 of `.debug_info` in
    /// the DWARF part, `DwarfSeed::info_crc`, checked only when a run reads DWARF: a
    /// script without Go values never touches those megabytes.)
    pub size: u64,
}

impl For {
    pub fn new(ids: &BuildIds, size: u64) -> For {
        For { gnu: ids.gnu.clone(), go: ids.go.clone(), size }
    }
}

#[derive(Serialize, Deserialize)]
struct Description {
    writer: String,
    binary: For,
    dwarf: Option<DwarfPart>,
    inlined: Vec<(String, Vec<InlinedSite>)>,
    code_crc: Option<u32>,
    maps: Vec<(u32, Vec<MapDef>)>,
    #[serde(default)]
    stamp: Option<crate::input::Stamp>,
}

/// The seed without its blobs: where each unit's bytes are in the blob area (offset,
/// length, CRC-32), and its lookups (a JSON list, read only when DWARF is loaded: after
/// `-l '*'` it is megabytes a script without Go values need not parse).
#[derive(Serialize, Deserialize)]
struct DwarfPart {
    units: Vec<(u64, u64, String)>,
    abbrev: (u64, u64, u32),
    bodies: Vec<(u32, u64, u64, u32)>,
    memo: (u64, u64, u32),
    info_crc: u32,
}

/// Why a cache file was not used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Rejected {
    #[error("not a gtrace cache file ({len} bytes)")]
    NotACache { len: usize },
    #[error("cache format {found}; this gtrace reads format {FORMAT}")]
    Format { found: u32 },
    #[error("truncated: {len} bytes where the header says {expected}")]
    Truncated { len: usize, expected: u64 },
    #[error("its checksum does not match its contents")]
    Checksum,
    #[error("unreadable description: {problem}")]
    Description { problem: String },
    #[error("written by {writer}, not by {WRITER}")]
    Writer { writer: String },
    #[error("made for another binary")]
    OtherBinary,
    #[error("{problem}")]
    Inconsistent { problem: String },
    #[error("unreadable: {problem}")]
    Unreadable { problem: String },
    #[error("{len} bytes, more than a cache file holds ({LARGEST})")]
    TooLarge { len: u64 },
}

/// The bytes of a cache file for `binary` holding `entry`, as `writer` would write them
/// (units still stored in another file are read from it; one that cannot be is left
/// out, and a seed without `info_crc` is not written).
pub fn encode_as(writer: &str, binary: &For, entry: &Entry) -> Vec<u8> {
    let encoded = encode_parts(writer, binary, entry);
    let mut out = Vec::with_capacity(encoded.len() as usize);
    out.extend_from_slice(&encoded.head);
    encoded.units.iter().for_each(|u| out.extend_from_slice(u));
    out.extend_from_slice(&encoded.rest);
    out
}

/// A cache file's bytes in the parts written one after the other: the header with the
/// description, the units' bytes (the seed's own, shared: not copied into one buffer,
/// 20 MB after `-l '*'` on Caddy), and the rest of the blobs (the abbreviations and
/// the lookups).
pub struct Encoded {
    pub head: Vec<u8>,
    pub units: Vec<UnitBytes>,
    pub rest: Vec<u8>,
}

impl Encoded {
    /// The file's length.
    pub fn len(&self) -> u64 {
        (self.head.len() + self.units.iter().map(|u| u.len()).sum::<usize>() + self.rest.len()) as u64
    }

    /// Writes the parts to `out` in order.
    pub fn write_to(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        out.write_all(&self.head)?;
        for unit in &self.units {
            out.write_all(unit)?;
        }
        out.write_all(&self.rest)
    }
}

/// `encode_as` in parts (`Encoded`).
pub fn encode_parts(writer: &str, binary: &For, entry: &Entry) -> Encoded {
    encode_parts_in(writer, binary, entry, Vec::new())
}

/// `encode_parts`, the blobs after the units written into `rest` (emptied first). A
/// buffer the main thread allocated stays in glibc's main arena however another thread
/// grows and frees it, and `malloc_trim` returns it to the system; one a writer thread
/// allocated would be freed at the top of that thread's arena, which `malloc_trim` does
/// not shrink (6 MB more held while tracing after a first run on Caddy).
pub fn encode_parts_in(writer: &str, binary: &For, entry: &Entry, mut rest: Vec<u8>) -> Encoded {
    rest.clear();
    let mut units = Vec::new();
    let dwarf = entry.dwarf.as_ref().and_then(|seed| dwarf_part(seed, &mut units, &mut rest));
    let description = Description {
        writer: writer.to_string(),
        binary: binary.clone(),
        dwarf,
        inlined: entry.inlined.clone(),
        code_crc: entry.code_crc,
        maps: entry.maps.clone(),
        stamp: entry.stamp,
    };
    let json = serde_json::to_vec(&description).unwrap_or_default();
    let blobs = units.iter().map(|u| u.len() as u64).sum::<u64>() + rest.len() as u64;
    let mut head = header(json.len(), blobs, &json);
    head.extend_from_slice(&json);
    Encoded { head, units, rest }
}

/// `seed` without its blobs: its units' bytes go to `units` (shared), each one's blob
/// after the last; the abbreviations and lookups after them, into `rest`. None without
/// `info_crc`.
fn dwarf_part(seed: &DwarfSeed, units: &mut Vec<UnitBytes>, rest: &mut Vec<u8>) -> Option<DwarfPart> {
    let mut at = 0u64;
    let mut bodies: Vec<(u32, u64, u64, u32)> = Vec::new();
    let stored = seed.stored.iter().flat_map(|s| s.held().into_iter().filter_map(|u| Some((u, s.read(u)?))));
    for (u, b) in seed.bodies.iter().cloned().chain(stored) {
        bodies.push((u, at, b.len() as u64, crc32(&b)));
        at += b.len() as u64;
        units.push(b);
    }
    bodies.sort_by_key(|b| b.0);
    // The bytes `fill` adds to `rest`, as a blob (after the units).
    let mut blob = |fill: &mut dyn FnMut(&mut Vec<u8>)| {
        let start = rest.len();
        fill(rest);
        (at + start as u64, (rest.len() - start) as u64, crc32(&rest[start..]))
    };
    let abbrev = blob(&mut |v| v.extend_from_slice(&seed.abbrev));
    // The lookups as JSON, written straight into the blobs (megabytes after `-l '*'`).
    let stored = seed.stored.as_ref().and_then(|s| s.memo()).filter(|m| !m.is_empty());
    let memo = match stored {
        None => blob(&mut |v| serde_json::to_writer(v, &seed.memo).unwrap_or_default()),
        Some(more) => {
            let mut all: Vec<_> = seed.memo.iter().cloned().chain(more).collect();
            all.sort();
            blob(&mut |v| serde_json::to_writer(v, &all).unwrap_or_default())
        }
    };
    Some(DwarfPart { units: seed.units.clone(), abbrev, bodies, memo, info_crc: seed.info_crc? })
}

/// About how many bytes `encode_parts` writes after the units for `entry`: the
/// abbreviations and the lookups.
pub fn rest_size(entry: &Entry) -> usize {
    let Some(seed) = &entry.dwarf else { return 0 };
    let memo: usize = seed.memo.iter().map(|(k, _)| k.len() + 48).sum();
    seed.abbrev.len() + memo
}

/// `encode_as` by this gtrace.
pub fn encode(binary: &For, entry: &Entry) -> Vec<u8> {
    encode_as(WRITER, binary, entry)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or_default())
}

/// The entry in `file` if it is a whole cache file this gtrace wrote for `binary`: its
/// header and description read and checked now, its units' bytes when a question
/// reaches them (`FileUnits`).
pub fn decode(file: File, binary: &For) -> Result<Entry, Rejected> {
    let (d, blobs) = description(file, binary)?;
    let dwarf = d.dwarf.map(|part| dwarf_seed(part, blobs)).transpose()?;
    Ok(Entry { dwarf, inlined: d.inlined, code_crc: d.code_crc, maps: d.maps, stamp: d.stamp })
}

/// A cache file to write again with other inlined sites or maps and the same DWARF: the header
/// and description to write (`head`), and the blob area to copy after them as it is.
pub struct Resited {
    pub head: Vec<u8>,
    pub file: File,
    pub blobs_at: u64,
    pub blobs_len: u64,
}

/// `file`, a whole cache file this gtrace wrote for `binary`, with `inlined` as its
/// inlined sites (`code_crc` theirs, `stamp` the file's: `Entry`): its blobs (the DWARF units and lookups, megabytes after `-l '*'`) are
/// not read, only copied (`Resited`), and only if they fill its blob area exactly
/// (`covers`): a file holding anything else is written from the blobs it lists.
/// `info_crc`: the DWARF's CRC the run read (the one `stamp` vouches for). A file whose
/// DWARF is another (rewritten meanwhile by a gtrace on another build of the same ids
/// and size) is refused: the stamp would vouch for that build's DWARF.
pub fn with_sites(
    file: File,
    binary: &For,
    (inlined, code_crc): (&[(String, Vec<InlinedSite>)], Option<u32>),
    maps: &[(u32, Vec<MapDef>)],
    (stamp, info_crc): (Option<crate::input::Stamp>, Option<u32>),
) -> Result<Resited, Rejected> {
    let (mut d, blobs) = description(file, binary)?;
    if !covers(d.dwarf.as_ref(), blobs.len) {
        return Err(inconsistent("a blob area holding more than its blobs"));
    }
    if d.dwarf.as_ref().map(|p| p.info_crc) != info_crc {
        return Err(inconsistent("DWARF other than the run read"));
    }
    d.inlined = inlined.to_vec();
    d.code_crc = code_crc;
    d.maps = maps.to_vec();
    d.stamp = stamp;
    let json = serde_json::to_vec(&d).unwrap_or_default();
    let mut head = header(json.len(), blobs.len, &json);
    head.extend_from_slice(&json);
    Ok(Resited { head, file: blobs.file, blobs_at: blobs.at, blobs_len: blobs.len })
}

/// Whether the blobs `part` lists cover the blob area of `len` bytes exactly, one after
/// the other from its start to its end: nothing else (a hole) is copied with them.
fn covers(part: Option<&DwarfPart>, len: u64) -> bool {
    let mut spans: Vec<(u64, u64)> = match part {
        None => Vec::new(),
        Some(p) => {
            p.bodies.iter().map(|b| (b.1, b.2)).chain([(p.abbrev.0, p.abbrev.1), (p.memo.0, p.memo.1)]).collect()
        }
    };
    spans.sort_unstable();
    let mut end = 0u64;
    for (at, len) in spans {
        match at.checked_add(len) {
            Some(next) if at == end => end = next,
            _ => return false,
        }
    }
    end == len
}

/// The header of a file with a description `json` and `blobs` bytes of blobs.
fn header(json_len: usize, blobs: u64, json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + json_len);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    out.extend_from_slice(&(json_len as u32).to_le_bytes());
    out.extend_from_slice(&blobs.to_le_bytes());
    out.extend_from_slice(&crc32(json).to_le_bytes());
    out
}

/// The description of `file` and its blob area, if it is a whole cache file (by its
/// length) this gtrace wrote for `binary`, its description unchanged.
fn description(file: File, binary: &For) -> Result<(Description, Blobs), Rejected> {
    let unreadable = |e: std::io::Error| Rejected::Unreadable { problem: e.to_string() };
    let len = file.metadata().map_err(unreadable)?.len();
    if len > LARGEST {
        return Err(Rejected::TooLarge { len });
    }
    let mut header = [0u8; HEADER];
    if len < HEADER as u64 || file.read_exact_at(&mut header, 0).is_err() || &header[..16] != MAGIC {
        return Err(Rejected::NotACache { len: len as usize });
    }
    let format = u32_at(&header, 16);
    if format != FORMAT {
        return Err(Rejected::Format { found: format });
    }
    let json_len = u32_at(&header, 20) as u64;
    let blobs_len = u64::from_le_bytes(header[24..32].try_into().unwrap_or_default());
    let expected = (HEADER as u64).saturating_add(json_len).saturating_add(blobs_len);
    if len != expected {
        return Err(Rejected::Truncated { len: len as usize, expected });
    }
    let mut json = zeroed(json_len).ok_or(Rejected::TooLarge { len })?;
    file.read_exact_at(&mut json, HEADER as u64).map_err(unreadable)?;
    if crc32(&json) != u32_at(&header, 32) {
        return Err(Rejected::Checksum);
    }
    let d: Description = serde_json::from_slice(&json).map_err(|e| Rejected::Description { problem: e.to_string() })?;
    if d.writer != WRITER {
        return Err(Rejected::Writer { writer: d.writer });
    }
    if d.binary != *binary || (binary.gnu.is_none() && binary.go.is_none()) {
        return Err(Rejected::OtherBinary);
    }
    Ok((d, Blobs { file, at: HEADER as u64 + json_len, len: blobs_len }))
}

/// `len` zero bytes, None when they cannot be allocated (an error, not an abort).
fn zeroed(len: u64) -> Option<Vec<u8>> {
    let len = usize::try_from(len).ok()?;
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(len).ok()?;
    bytes.resize(len, 0);
    Some(bytes)
}

/// The blob area of an open cache file.
#[derive(Debug)]
struct Blobs {
    file: File,
    /// Where it starts in the file, and its length.
    at: u64,
    len: u64,
}

impl Blobs {
    /// The blob at `at` of `len` bytes whose CRC-32 is `sum`; None when it is outside
    /// the area, cannot be read or is not what was written.
    fn read(&self, (at, len, sum): (u64, u64, u32)) -> Option<Vec<u8>> {
        at.checked_add(len).filter(|end| *end <= self.len)?;
        let mut bytes = zeroed(len)?;
        self.file.read_exact_at(&mut bytes, self.at + at).ok()?;
        (crc32(&bytes) == sum).then_some(bytes)
    }

    /// `read` into a buffer of its own (zeroed pages the system has not touched, which
    /// the read fills), shared as a unit's bytes: not zero-filled, then copied.
    fn read_unit(&self, (at, len, sum): (u64, u64, u32)) -> Option<UnitBytes> {
        at.checked_add(len).filter(|end| *end <= self.len)?;
        let mut bytes = crate::runtime::zeroed::zeroed(usize::try_from(len).ok()?);
        let buffer = Arc::get_mut(&mut bytes)?;
        self.file.read_exact_at(buffer, self.at + at).ok()?;
        (crc32(buffer) == sum).then(|| UnitBytes::shared(bytes))
    }
}

/// The DWARF units of a cache file, read when a question reaches one, and its lookups.
#[derive(Debug)]
struct FileUnits {
    blobs: Blobs,
    bodies: HashMap<u32, (u64, u64, u32)>,
    memo: (u64, u64, u32),
    /// The end of the units (every lookup's answer is before it).
    end: u64,
}

impl StoredUnits for FileUnits {
    fn held(&self) -> Vec<u32> {
        let mut held: Vec<u32> = self.bodies.keys().copied().collect();
        held.sort_unstable();
        held
    }

    fn read(&self, u: u32) -> Option<UnitBytes> {
        self.blobs.read_unit(*self.bodies.get(&u)?)
    }

    /// The lookups, each answer inside `.debug_info` (but a runtime type's key, `n
    /// NAME`, which is not an offset).
    fn memo(&self) -> Option<Vec<(String, Option<[u64; 2]>)>> {
        let memo: Vec<(String, Option<[u64; 2]>)> = serde_json::from_slice(&self.blobs.read(self.memo)?).ok()?;
        let outside =
            |(key, v): &(String, Option<[u64; 2]>)| !key.starts_with("n ") && v.is_some_and(|[at, _]| at >= self.end);
        (!memo.iter().any(outside)).then_some(memo)
    }
}

fn inconsistent(problem: &str) -> Rejected {
    Rejected::Inconsistent { problem: problem.to_string() }
}

/// The seed of `part`, its units and lookups left in `blobs`, checked: units in order
/// without overlap, each body the length of its unit and inside the blob area;
/// `.debug_abbrev` (small) read and checked now.
fn dwarf_seed(part: DwarfPart, blobs: Blobs) -> Result<DwarfSeed, Rejected> {
    let mut end = 0u64;
    for (start, len, _) in &part.units {
        if *start < end || *len == 0 {
            return Err(inconsistent("DWARF units out of order or overlapping"));
        }
        end = start.checked_add(*len).ok_or_else(|| inconsistent("a DWARF unit past any section"))?;
    }
    let mut bodies = HashMap::with_capacity(part.bodies.len());
    for (u, at, len, sum) in part.bodies {
        let unit = part.units.get(u as usize).ok_or_else(|| inconsistent("a body of no unit"))?;
        if unit.1 != len {
            return Err(inconsistent("a DWARF unit's bytes of another length than the unit"));
        }
        if at.checked_add(len).is_none_or(|e| e > blobs.len) {
            return Err(inconsistent("a blob outside the file"));
        }
        bodies.insert(u, (at, len, sum));
    }
    let abbrev = blobs.read(part.abbrev).ok_or(Rejected::Checksum)?;
    let stored: Arc<dyn StoredUnits> = Arc::new(FileUnits { blobs, bodies, memo: part.memo, end });
    Ok(DwarfSeed {
        units: part.units,
        abbrev,
        bodies: Vec::new(),
        stored: Some(stored),
        memo: Vec::new(),
        info_crc: Some(part.info_crc),
        info_crc_known: false,
    })
}
