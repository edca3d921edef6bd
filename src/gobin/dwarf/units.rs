//! The compile units of `.debug_info`, each read only when a question reaches it: a
//! directory (where each unit is, its package) from one pass over the unit headers, then
//! a unit's header and abbreviations parsed on first use. A cache (src/cache) can give
//! the directory and the units an earlier run reached (`DwarfSeed`): then nothing is
//! decompressed unless a question reaches a unit it does not hold, and the section is
//! decompressed once for all of them. A seed's units may stay in the cache file
//! (`StoredUnits`), each read and checked only when a question reaches it; one that
//! fails its check is read from the binary, and the seed counts as outgrown (written
//! again).

use super::inflating::Inflating;
use super::{string, DwarfInfo, UnitSlot, R};
use crate::gobin::{elf, TargetError};
use gimli::{constants as dw, DebugInfoOffset, Reader, UnitOffset};
use std::cell::{Cell, OnceCell, RefCell};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

/// A unit's header and abbreviations, read on first use.
pub(super) struct Parsed {
    pub header: gimli::UnitHeader<R>,
    pub abbrevs: Arc<gimli::Abbreviations>,
    /// The unit's bytes, header included (what a cache keeps).
    bytes: R,
}

/// Where units are read from.
pub(super) struct Sections {
    /// The whole of `.debug_info`, decompressed once, when a unit outside the seed is
    /// needed (at load without a seed).
    info: OnceCell<R>,
    /// `.debug_info` as the file holds it (compressed), kept only when a seed is used.
    raw: Option<(object::CompressionFormat, RawInfo, u64)>,
    abbrev: gimli::DebugAbbrev<R>,
    abbrev_bytes: R,
    abbrev_cache: RefCell<HashMap<gimli::DebugAbbrevOffset, Arc<gimli::Abbreviations>>>,
    /// Units' bytes a seed brought, by unit index.
    seeded: HashMap<usize, R>,
    /// Units a seed holds elsewhere, read on first use, and which they are.
    stored: Option<(Arc<dyn StoredUnits>, HashSet<usize>)>,
    /// Whether a stored unit could not be read or failed its check.
    stored_failed: Cell<bool>,
}

/// A unit's bytes in a seed: a share of what they were read from (the inflated section,
/// a buffer a cache file's blob was read into), not a copy (20 MB after `-l '*'` on
/// Caddy, copied twice over by a first run's cache writing before).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitBytes(R);

impl UnitBytes {
    /// The bytes of `all`, shared.
    pub fn shared(all: Arc<[u8]>) -> UnitBytes {
        UnitBytes(R::new(all, gimli::LittleEndian))
    }
}

impl From<Vec<u8>> for UnitBytes {
    fn from(bytes: Vec<u8>) -> UnitBytes {
        UnitBytes::shared(Arc::from(bytes))
    }
}

impl std::ops::Deref for UnitBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.0.bytes()
    }
}

/// A seed's units kept outside memory (a cache file): read when a question reaches one;
/// its lookups too, read when the DWARF is loaded.
pub trait StoredUnits: std::fmt::Debug + Send + Sync {
    /// The units held, by index in the seed's `units`.
    fn held(&self) -> Vec<u32>;
    /// Unit `u`'s bytes, checked; None when they cannot be read or fail their check.
    fn read(&self, u: u32) -> Option<UnitBytes>;
    /// The lookups' answers it holds (beside the seed's `memo`), checked; None when they
    /// cannot be read or fail their check.
    fn memo(&self) -> Option<Vec<(String, Option<[u64; 2]>)>> {
        Some(Vec::new())
    }
}

/// What a run learned of a binary's DWARF, to start the next run from (src/cache): the
/// unit directory, `.debug_abbrev`, the bytes of the units it reached and the answers of
/// lookups that walk many units.
#[derive(Clone, Debug, Default)]
pub struct DwarfSeed {
    /// Every unit: its offset, its length (header included), its package.
    pub units: Vec<(u64, u64, String)>,
    pub abbrev: Vec<u8>,
    /// The units reached: index in `units`, bytes.
    pub bodies: Vec<(u32, UnitBytes)>,
    /// More units reached, not read yet (their bytes are in a cache file).
    pub stored: Option<Arc<dyn StoredUnits>>,
    pub memo: Vec<(String, Option<[u64; 2]>)>,
    /// A CRC-32 of `.debug_info` as the file holds it (compressed) where the units come
    /// from: a seed for other bytes (a file changed in place under the same build id)
    /// is not used. None: not checked.
    pub info_crc: Option<u32>,
    /// `info_crc` is known to be the section's: the seed comes from a cache file written
    /// from this very file, unchanged since (`input::Stamp`); not computed again. Not
    /// part of what a seed holds (seeds compare without it).
    pub info_crc_known: bool,
}

/// Seeds are equal when they hold the same units, lookups and bytes; units still
/// `stored` compare by which they are (`read_stored` reads them).
impl PartialEq for DwarfSeed {
    fn eq(&self, o: &DwarfSeed) -> bool {
        let held = |s: &DwarfSeed| s.stored.as_ref().map(|s| s.held());
        (self.units == o.units && self.abbrev == o.abbrev && self.bodies == o.bodies)
            && (self.memo == o.memo && self.info_crc == o.info_crc && held(self) == held(o))
    }
}

impl DwarfSeed {
    /// The seed with every stored unit read into `bodies` and the stored lookups into
    /// `memo`; None when one cannot be read or fails its check.
    pub fn read_stored(&self) -> Option<DwarfSeed> {
        let mut seed = DwarfSeed { stored: None, ..self.clone() };
        if let Some(stored) = &self.stored {
            for u in stored.held() {
                seed.bodies.push((u, stored.read(u)?));
            }
            seed.bodies.sort_by_key(|(u, _)| *u);
            seed.memo.extend(stored.memo()?);
            seed.memo.sort();
        }
        Some(seed)
    }
}

/// A CRC-32 of `bytes` (what a seed's `info_crc` holds).
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut c = flate2::Crc::new();
    c.update(bytes);
    c.sum()
}

fn reader(bytes: &[u8]) -> R {
    R::new(Arc::from(bytes), gimli::LittleEndian)
}

impl DwarfInfo {
    /// Loads the DWARF of the ELF in `data`: `.debug_info` is decompressed and its unit
    /// headers listed (no unit is parsed further); with a `seed` that matches the
    /// section, nothing is decompressed. Without one, the section `inflating` has
    /// inflated on another thread, if it is this one. None when it has no `.debug_info`.
    pub(crate) fn load(
        path: &Path,
        data: &crate::input::Bytes,
        seed: Option<DwarfSeed>,
        inflating: Option<Inflating>,
    ) -> Result<Option<DwarfInfo>, TargetError> {
        let Some(compressed) = elf::compressed_section(path, data, ".debug_info")? else { return Ok(None) };
        let size = compressed.uncompressed_size;
        let debug_str = match elf::section(path, data, ".debug_str")? {
            Some(bytes) => reader(&bytes),
            None => reader(&[]),
        };
        let seed = seed.filter(|s| s.units.last().is_some_and(|(start, len, _)| start + len == size));
        // Computed only to check a seed (the megabytes of compressed DWARF are read for
        // it): without a cache, never; a cache's first run computes it when it writes.
        // A file unchanged since the cache's was written (`info_crc_known`) is not read.
        let info_crc = seed.as_ref().and_then(|s| {
            let known = s.info_crc.filter(|_| s.info_crc_known);
            s.info_crc.map(|_| known.unwrap_or_else(|| crc32(compressed.data)))
        });
        let seed = seed.filter(|s| s.info_crc.is_none_or(|c| Some(c) == info_crc));
        let mut info = DwarfInfo {
            path: path.to_path_buf(),
            debug_str: gimli::DebugStr::from(debug_str),
            sections: Sections {
                info: OnceCell::new(),
                raw: None,
                abbrev: gimli::DebugAbbrev::from(reader(&[])),
                abbrev_bytes: reader(&[]),
                abbrev_cache: RefCell::new(HashMap::new()),
                seeded: HashMap::new(),
                stored: None,
                stored_failed: Cell::new(false),
            },
            lists: None,
            lines: None,
            scopes_cache: HashMap::new(),
            units: Vec::new(),
            by_package: HashMap::new(),
            memo: super::memo::Memo::default(),
            type_ids: Default::default(),
            unsafe_pointer: None,
            seeded: seed.as_ref().map_or((0, 0), |s| (s.bodies.len() + stored_count(s), 0)),
            info_crc,
            everywhere: HashMap::new(),
        };
        match seed {
            Some(seed) => info.from_seed(seed, compressed, data),
            None => {
                let abbrev = elf::section(path, data, ".debug_abbrev")?.unwrap_or_default();
                info.set_abbrev(reader(&abbrev));
                // Inflated on another thread since the binary was opened, if it was.
                let bytes = match inflating.and_then(|i| i.take(data, compressed.data)) {
                    Some(inflated) => inflated.map_err(|problem| info.inflate_error(problem))?,
                    None => info.inflate(compressed)?,
                };
                let _ = info.sections.info.set(bytes);
                info.list_units()?;
            }
        }
        for (u, slot) in info.units.iter().enumerate() {
            info.by_package.entry(slot.name.clone()).or_default().push(u);
        }
        Ok(Some(info))
    }

    /// The units to look for a name of `package` in first: the package's own, then (for
    /// types) those named `runtime`, where Go's linker writes type DIEs.
    pub(super) fn first_units(&self, package: &str, types: bool) -> Vec<usize> {
        let mut first = self.by_package.get(package).cloned().unwrap_or_default();
        if types && package != "runtime" {
            first.extend(self.by_package.get("runtime").into_iter().flatten());
        }
        first
    }

    /// Every unit but `first`.
    pub(super) fn other_units(&self, first: &[usize]) -> Vec<usize> {
        (0..self.units.len()).filter(|u| !first.contains(u)).collect()
    }

    fn set_abbrev(&mut self, bytes: R) {
        self.sections.abbrev = gimli::DebugAbbrev::from(bytes.clone());
        self.sections.abbrev_bytes = bytes;
    }

    fn bad_section(&self, source: object::Error) -> TargetError {
        TargetError::Section { path: self.path.clone(), section: ".debug_info".into(), source }
    }

    /// The unit directory from the decompressed section: each header, and the name of
    /// its root DIE.
    fn list_units(&mut self) -> Result<(), TargetError> {
        let info = gimli::DebugInfo::from(self.sections.info.get().expect("decompressed").clone());
        let mut headers = info.units();
        while let Some(header) = headers.next().map_err(|e| self.bad(e))? {
            let start = DebugInfoOffset(header.offset().0);
            let len = header.length_including_self() as u64;
            self.units.push(UnitSlot {
                start,
                len,
                name: String::new(),
                parsed: OnceCell::new(),
                index: None,
                partial: None,
            });
        }
        self.units.sort_by_key(|u| u.start.0);
        for u in 0..self.units.len() {
            // Read for its name only: the unit counts as reached when a question parses it.
            let name = {
                let unit = &self.parse(u)?;
                let mut entries = unit.header.entries(&unit.abbrevs);
                let root = entries.next_dfs().map_err(|e| self.bad(e))?;
                match root.and_then(|r| r.attr_value(dw::DW_AT_name)) {
                    Some(value) => string(&self.debug_str, value).map_err(|e| self.bad(e))?.unwrap_or_default(),
                    None => String::new(),
                }
            };
            self.units[u].name = name;
        }
        Ok(())
    }

    /// Units from a seed whose directory ends where the section does: the section is
    /// kept compressed until a unit the seed lacks is needed.
    fn from_seed(&mut self, seed: DwarfSeed, raw: object::CompressedData<'_>, file: &crate::input::Bytes) {
        self.set_abbrev(reader(&seed.abbrev));
        self.sections.raw = Some((raw.format, RawInfo::new(raw.data, file), raw.uncompressed_size));
        self.units = (seed.units.into_iter())
            .map(|(start, len, name)| UnitSlot {
                start: DebugInfoOffset(start as usize),
                len,
                name,
                parsed: OnceCell::new(),
                index: None,
                partial: None,
            })
            .collect();
        for (u, bytes) in seed.bodies {
            self.sections.seeded.insert(u as usize, bytes.0);
        }
        self.memo.extend(seed.memo);
        if let Some(stored) = seed.stored {
            let held = stored.held().into_iter().map(|u| u as usize).filter(|u| *u < self.units.len()).collect();
            // Lookups that cannot be read are asked again (and the file written again).
            match stored.memo() {
                Some(memo) => self.memo.extend(memo),
                None => self.sections.stored_failed.set(true),
            }
            self.sections.stored = Some((stored, held));
        }
        self.seeded.1 = self.memo.len();
    }

    /// Unit `u`'s header and abbreviations, parsed on first use from the seed's bytes
    /// or the decompressed section.
    pub(super) fn unit(&self, u: usize) -> Result<&Parsed, TargetError> {
        if let Some(p) = self.units[u].parsed.get() {
            return Ok(p);
        }
        let parsed = self.parse(u)?;
        Ok(self.units[u].parsed.get_or_init(|| parsed))
    }

    /// Unit `u`'s header and abbreviations, read now.
    fn parse(&self, u: usize) -> Result<Parsed, TargetError> {
        let slot = &self.units[u];
        let bytes = match self.sections.seeded.get(&u).cloned().or_else(|| self.read_stored(u)) {
            Some(b) => b,
            None => {
                let info = self.whole()?;
                let (start, end) = (slot.start.0, slot.start.0 + slot.len as usize);
                if end > info.len() {
                    return Err(self.bad_ref("unit outside .debug_info", slot.start));
                }
                info.range(start..end)
            }
        };
        let header = gimli::DebugInfo::from(bytes.clone()).units().next().map_err(|e| self.bad(e))?;
        let header = header.filter(|h| h.length_including_self() as u64 == slot.len);
        let header = header.ok_or_else(|| self.bad_ref("unit of another length than listed", slot.start))?;
        let abbrevs = self.abbreviations(header.debug_abbrev_offset())?;
        Ok(Parsed { header, abbrevs, bytes })
    }

    /// Unit `u` from where the seed stored it, if it holds it; one that cannot be read
    /// or fails its check is noted (the cache is written again) and read from the binary.
    fn read_stored(&self, u: usize) -> Option<R> {
        let (stored, held) = self.sections.stored.as_ref()?;
        if !held.contains(&u) {
            return None;
        }
        let bytes = stored.read(u as u32).filter(|b| b.len() as u64 == self.units[u].len);
        self.sections.stored_failed.set(self.sections.stored_failed.get() || bytes.is_none());
        Some(bytes?.0)
    }

    fn abbreviations(&self, at: gimli::DebugAbbrevOffset) -> Result<Arc<gimli::Abbreviations>, TargetError> {
        if let Some(a) = self.sections.abbrev_cache.borrow().get(&at) {
            return Ok(a.clone());
        }
        let a = Arc::new(self.sections.abbrev.abbreviations(at).map_err(|e| self.bad(e))?);
        self.sections.abbrev_cache.borrow_mut().insert(at, a.clone());
        Ok(a)
    }

    /// The whole decompressed `.debug_info`: at load, or now when a seed was used.
    fn whole(&self) -> Result<&R, TargetError> {
        if let Some(info) = self.sections.info.get() {
            return Ok(info);
        }
        let Some((format, raw, size)) = &self.sections.raw else {
            return Err(self.bad_ref("no .debug_info", DebugInfoOffset(0)));
        };
        let whole = object::CompressedData { format: *format, data: raw.bytes(), uncompressed_size: *size };
        let bytes = self.inflate(whole)?;
        Ok(self.sections.info.get_or_init(|| bytes))
    }

    /// `.debug_info` decompressed: zlib (what Go writes) by `inflate_zlib`, an error if
    /// it does not inflate to exactly its size; other formats through object.
    fn inflate(&self, compressed: object::CompressedData<'_>) -> Result<R, TargetError> {
        if compressed.format == object::CompressionFormat::Zlib {
            return inflate_zlib(compressed.data, compressed.uncompressed_size).map_err(|p| self.inflate_error(p));
        }
        let bytes = compressed.decompress().map_err(|source| self.bad_section(source))?;
        Ok(reader(&bytes))
    }

    /// Why `.debug_info` did not inflate, as an error.
    fn inflate_error(&self, problem: String) -> TargetError {
        TargetError::Inflate { path: self.path.clone(), section: ".debug_info", problem }
    }

    /// Whether the whole of `.debug_info` was decompressed (not when a seed held every
    /// unit reached).
    pub(crate) fn decompressed(&self) -> bool {
        self.sections.info.get().is_some()
    }

    /// The `.debug_info` offset of `off` in unit `u`.
    pub(super) fn at(&self, u: usize, off: UnitOffset) -> DebugInfoOffset {
        DebugInfoOffset(self.units[u].start.0 + off.0)
    }

    /// The unit holding `.debug_info` offset `at`, and the offset within it.
    pub(super) fn locate(&self, at: DebugInfoOffset) -> Option<(usize, UnitOffset)> {
        let u = self.units.partition_point(|s| s.start.0 <= at.0).checked_sub(1)?;
        let slot = &self.units[u];
        (at.0 < slot.start.0 + slot.len as usize).then(|| (u, UnitOffset(at.0 - slot.start.0)))
    }

    /// Whether this run reached a unit or answered a lookup that the seed did not
    /// hold (both only grow): whether `seed` has anything new to write.
    pub(crate) fn grew(&self) -> bool {
        let stored = |u: &usize| self.sections.stored.as_ref().is_some_and(|(_, held)| held.contains(u));
        let held =
            |u: &usize| self.units[*u].parsed.get().is_some() || self.sections.seeded.contains_key(u) || stored(u);
        let count = (0..self.units.len()).filter(held).count();
        count != self.seeded.0 || self.memo.len() != self.seeded.1 || self.sections.stored_failed.get()
    }

    /// Notes that what the seed brought was wrong (`grew`: the cache is written again).
    pub(super) fn seed_was_wrong(&self) {
        self.sections.stored_failed.set(true);
    }

    /// What this run learned, for the next (src/cache): the directory, every unit
    /// parsed so far (or brought by the seed; shares of their bytes, not copies) and
    /// every memoized lookup; its `info_crc` only if a seed's was checked at load
    /// (`Target::dwarf_learned` computes it else).
    pub(crate) fn seed(&self) -> DwarfSeed {
        let units = self.units.iter().map(|s| (s.start.0 as u64, s.len, s.name.clone())).collect();
        let bytes = |u: usize| -> Option<UnitBytes> {
            let r = match self.units[u].parsed.get() {
                Some(p) => p.bytes.clone(),
                None => self.sections.seeded.get(&u).cloned().or_else(|| self.read_stored(u))?,
            };
            Some(UnitBytes(r))
        };
        let bodies = (0..self.units.len()).filter_map(|u| Some((u as u32, bytes(u)?))).collect();
        let abbrev = self.sections.abbrev_bytes.to_slice().map(|b| b.into_owned()).unwrap_or_default();
        // In the order first asked (the order a cache brought them in, then this run's):
        // the same lookups make the same file, unsorted.
        let memo = self.memo.entries().to_vec();
        DwarfSeed { units, abbrev, bodies, stored: None, memo, info_crc: self.info_crc, info_crc_known: false }
    }
}

/// How many units `seed` holds in its store.
fn stored_count(seed: &DwarfSeed) -> usize {
    seed.stored.as_ref().map_or(0, |s| s.held().len())
}

/// The most a zlib section is taken to inflate to, in times its compressed size. Go's
/// DWARF inflates 2.4 times (a small program) to 3.2 (Caddy); a header that claims more
/// is damaged or forged, and is refused before anything is allocated for it (object's
/// `decompress` would zero-fill whatever it claims: 4 GiB of memory touched, 16 s).
const MOST_INFLATED: u64 = 32;

/// Zlib `data` inflated straight into the reader's buffer, which must be exactly `size`
/// bytes: no second copy of the section (object's `decompress` inflates into a `Vec`
/// that is then copied: a fifth of a first `gtrace http` on Caddy). By zlib-rs: Caddy's
/// 20 MB in 47 ms where flate2's miniz_oxide took 70. The buffer is
/// allocated zeroed, by pages the system has not touched (calloc), so a size the data
/// falls short of costs no memory it does not fill. A size past `MOST_INFLATED` times
/// the data's or 4 GiB, data that ends before `size`, runs past it or is not zlib:
/// Err, why.
pub(super) fn inflate_zlib(data: &[u8], size: u64) -> Result<R, String> {
    let most = (data.len() as u64).saturating_mul(MOST_INFLATED).min(1 << 32);
    if size > most {
        return Err(format!(
            "its header says {size} bytes, more than {} bytes of zlib data inflate to ({most} at most)",
            data.len()
        ));
    }
    let size = usize::try_from(size).map_err(|_| format!("{size} bytes do not fit in memory"))?;
    let mut out = crate::runtime::zeroed::zeroed(size);
    let mut z = zlib_rs::Inflate::new(true, 15);
    let buffer = Arc::get_mut(&mut out).expect("a new Arc is unique");
    let ended = z.decompress(data, buffer, zlib_rs::InflateFlush::Finish);
    let total = z.total_out();
    match ended {
        Err(e) => Err(format!("its zlib data is damaged: {}", z.error_message().unwrap_or(e.as_str()))),
        Ok(zlib_rs::Status::StreamEnd) if total == size as u64 => Ok(R::new(out, gimli::LittleEndian)),
        Ok(zlib_rs::Status::StreamEnd) => Err(format!("it inflates to {total} bytes, not the {size} its header says")),
        Ok(_) if total == size as u64 => Err(format!("it inflates past the {size} bytes its header says")),
        Ok(_) => Err(format!("its zlib data ends after {total} of the {size} bytes its header says")),
    }
}

#[cfg(test)]
mod tests {
    use super::inflate_zlib;
    use gimli::Reader;
    use std::io::Write;

    fn zlib(bytes: &[u8]) -> Vec<u8> {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(bytes).unwrap();
        z.finish().unwrap()
    }

    #[test]
    fn zlib_inflates_to_exactly_its_size_or_not_at_all() {
        // Four bits of noise a byte: it packs about two to one, as DWARF does (a few to one).
        let mut x = 1u32;
        let section: Vec<u8> = (0..400_000)
            .map(|_| {
                x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (x >> 28) as u8
            })
            .collect();
        let packed = zlib(&section);
        let inflated = inflate_zlib(&packed, section.len() as u64).expect("inflates");
        assert_eq!(inflated.to_slice().unwrap().as_ref(), section.as_slice());
        // Another size than the data's, a stream cut short, bytes that are not zlib:
        // an error, whose words say which.
        let why = |data: &[u8], size: u64| inflate_zlib(data, size).err().expect("an error");
        assert!(why(&packed, section.len() as u64 + 1).contains("inflates to"));
        assert!(why(&packed, section.len() as u64 - 1).contains("past"));
        assert!(why(&packed[..packed.len() / 2], section.len() as u64).contains("ends after"));
        assert!(why(&section[..1000], 4000).contains("damaged"));
        // A size the data cannot plausibly inflate to is refused, not allocated.
        assert!(why(&packed, u64::MAX).contains("at most"));
        assert!(why(&packed, packed.len() as u64 * 33).contains("at most"));
    }
}

/// The compressed `.debug_info` a seeded run may still inflate: where it lies in the
/// file's bytes (shared, not copied: 6 MB on Caddy, read only if inflated), or a copy
/// when it is not inside them.
enum RawInfo {
    InFile(crate::input::Bytes, std::ops::Range<usize>),
    Copied(Arc<[u8]>),
}

impl RawInfo {
    fn new(section: &[u8], file: &crate::input::Bytes) -> RawInfo {
        let start = (section.as_ptr() as usize).wrapping_sub(file.as_ptr() as usize);
        let range = start..start.saturating_add(section.len());
        match file.get(range.clone()) {
            Some(b) if b.as_ptr() == section.as_ptr() => RawInfo::InFile(file.clone(), range),
            _ => RawInfo::Copied(Arc::from(section)),
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            RawInfo::InFile(file, range) => &file[range.clone()],
            RawInfo::Copied(bytes) => bytes,
        }
    }
}
