//! A cache file's bytes: a fixed header (magic, format, lengths, a CRC-32 of the rest),
//! a JSON description (the gtrace that wrote it, the binary it is for, what it holds:
//! the DWARF lookups, where functions were inlined) and the raw blobs the description
//! points into (the DWARF units). A file is taken
//! only if every check passes; anything else is a `Rejected` with its reason, and the
//! file is ignored (never partly trusted), as a plan of another format is refused.

use crate::gobin::{BuildIds, DwarfSeed, InlinedSite};
use serde::{Deserialize, Serialize};

/// The first bytes of every cache file.
pub const MAGIC: &[u8; 16] = b"gtrace cache\n\0\0\0";
/// The version of this layout. A file of another is ignored.
pub const FORMAT: u32 = 2;
/// The gtrace that writes and reads caches: a file written by another is ignored.
pub const WRITER: &str = concat!("gtrace ", env!("CARGO_PKG_VERSION"));

const HEADER: usize = 16 + 4 + 4 + 8 + 4;

/// What a cache file holds for one binary.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Entry {
    /// The DWARF units and lookups a run reached.
    pub dwarf: Option<DwarfSeed>,
    /// Where the functions a run's patterns named were inlined (`Target::find_inlined`),
    /// by pattern: finding it reads every inline tree of the binary.
    pub inlined: Vec<(String, Vec<InlinedSite>)>,
}

/// The binary a cache file is for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct For {
    pub gnu: Option<String>,
    pub go: Option<String>,
    /// The file's size in bytes.
    pub size: u64,
    /// A CRC-32 of `.debug_info` as the file holds it (what the cached units replace):
    /// a file changed in place under the same build id is another binary. None in a
    /// cache file that holds no DWARF (nothing in it comes from those bytes: computing
    /// it touched megabytes of the binary that a script without Go values never reads).
    pub dwarf: Option<u32>,
}

impl For {
    pub fn new(ids: &BuildIds, size: u64, dwarf: Option<u32>) -> For {
        For { gnu: ids.gnu.clone(), go: ids.go.clone(), size, dwarf }
    }
}

#[derive(Serialize, Deserialize)]
struct Description {
    writer: String,
    binary: For,
    dwarf: Option<DwarfPart>,
    inlined: Vec<(String, Vec<InlinedSite>)>,
}

/// The seed without its blobs: where each unit's bytes are in the blob area.
#[derive(Serialize, Deserialize)]
struct DwarfPart {
    units: Vec<(u64, u64, String)>,
    abbrev: (u64, u64),
    bodies: Vec<(u32, u64, u64)>,
    memo: Vec<(String, Option<[u64; 2]>)>,
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
}

pub fn crc(parts: &[&[u8]]) -> u32 {
    let mut c = flate2::Crc::new();
    for p in parts {
        c.update(p);
    }
    c.sum()
}

/// The bytes of a cache file for `binary` holding `entry`, as `writer` would write them.
pub fn encode_as(writer: &str, binary: &For, entry: &Entry) -> Vec<u8> {
    let mut blobs = Vec::new();
    let mut blob = |bytes: &[u8]| {
        let at = blobs.len() as u64;
        blobs.extend_from_slice(bytes);
        (at, bytes.len() as u64)
    };
    let dwarf = entry.dwarf.as_ref().map(|seed| DwarfPart {
        units: seed.units.clone(),
        abbrev: blob(&seed.abbrev),
        bodies: seed.bodies.iter().map(|(u, b)| (*u, blob(b).0, b.len() as u64)).collect(),
        memo: seed.memo.clone(),
    });
    let description =
        Description { writer: writer.to_string(), binary: binary.clone(), dwarf, inlined: entry.inlined.clone() };
    let json = serde_json::to_vec(&description).unwrap_or_default();
    let mut out = Vec::with_capacity(HEADER + json.len() + blobs.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&(blobs.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc(&[&json, &blobs]).to_le_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(&blobs);
    out
}

/// `encode_as` by this gtrace.
pub fn encode(binary: &For, entry: &Entry) -> Vec<u8> {
    encode_as(WRITER, binary, entry)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or_default())
}

/// The entry in `bytes` if it is a whole cache file this gtrace wrote for the binary
/// `binary(true)` names when the file holds DWARF, `binary(false)` when it does not.
pub fn decode(bytes: &[u8], binary: &dyn Fn(bool) -> For) -> Result<Entry, Rejected> {
    if bytes.len() < HEADER || &bytes[..16] != MAGIC {
        return Err(Rejected::NotACache { len: bytes.len() });
    }
    let format = u32_at(bytes, 16);
    if format != FORMAT {
        return Err(Rejected::Format { found: format });
    }
    let json_len = u32_at(bytes, 20) as u64;
    let blobs_len = u64::from_le_bytes(bytes[24..32].try_into().unwrap_or_default());
    let expected = (HEADER as u64).saturating_add(json_len).saturating_add(blobs_len);
    if bytes.len() as u64 != expected {
        return Err(Rejected::Truncated { len: bytes.len(), expected });
    }
    let (json, blobs) = bytes[HEADER..].split_at(json_len as usize);
    if crc(&[json, blobs]) != u32_at(bytes, 32) {
        return Err(Rejected::Checksum);
    }
    let d: Description = serde_json::from_slice(json).map_err(|e| Rejected::Description { problem: e.to_string() })?;
    if d.writer != WRITER {
        return Err(Rejected::Writer { writer: d.writer });
    }
    let binary = binary(d.dwarf.is_some());
    if d.binary != binary || (binary.gnu.is_none() && binary.go.is_none()) {
        return Err(Rejected::OtherBinary);
    }
    let dwarf = d.dwarf.map(|part| dwarf_seed(part, blobs)).transpose()?;
    Ok(Entry { dwarf, inlined: d.inlined })
}

fn inconsistent(problem: &str) -> Rejected {
    Rejected::Inconsistent { problem: problem.to_string() }
}

/// The seed of `part`, its blobs cut from `blobs`, checked: units in order without
/// overlap, each body the length of its unit, every memoized offset inside the section.
fn dwarf_seed(part: DwarfPart, blobs: &[u8]) -> Result<DwarfSeed, Rejected> {
    let cut = |(at, len): (u64, u64)| -> Result<Vec<u8>, Rejected> {
        let end = at
            .checked_add(len)
            .filter(|e| *e <= blobs.len() as u64)
            .ok_or_else(|| inconsistent("a blob outside the file"))?;
        Ok(blobs[at as usize..end as usize].to_vec())
    };
    let mut end = 0u64;
    for (start, len, _) in &part.units {
        if *start < end || *len == 0 {
            return Err(inconsistent("DWARF units out of order or overlapping"));
        }
        end = start.checked_add(*len).ok_or_else(|| inconsistent("a DWARF unit past any section"))?;
    }
    let mut bodies = Vec::with_capacity(part.bodies.len());
    for (u, at, len) in part.bodies {
        let unit = part.units.get(u as usize).ok_or_else(|| inconsistent("a body of no unit"))?;
        if unit.1 != len {
            return Err(inconsistent("a DWARF unit's bytes of another length than the unit"));
        }
        bodies.push((u, cut((at, len))?));
    }
    // Every answer is a `.debug_info` offset, but a runtime type's key (`n NAME`).
    let outside = |(key, v): &(String, Option<[u64; 2]>)| !key.starts_with("n ") && v.is_some_and(|[at, _]| at >= end);
    if part.memo.iter().any(outside) {
        return Err(inconsistent("a lookup answered outside .debug_info"));
    }
    Ok(DwarfSeed { units: part.units, abbrev: cut(part.abbrev)?, bodies, memo: part.memo })
}
