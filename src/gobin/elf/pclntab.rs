//! Go's own function table, `.gopclntab` (the runtime's pcHeader, functab and _func
//! records), read without symbols or DWARF: every function's name, entry and end, whether
//! it is assembly, the inline tree that tells where other functions were inlined, and
//! (pcline.rs) the file and line of every frame at a pc.
//!
//! Three layouts since Go 1.16 (debug/gosym/pclntab.go, runtime/symtab.go):
//! - 1.16/1.17 (magic 0xfffffffa): functab entries and funcdata are absolute pointers;
//! - 1.18/1.19 (0xfffffff0): entries are 32-bit offsets from the start of .text, funcdata
//!   32-bit offsets from `moduledata.gofunc`; a `flag` byte marks assembly;
//! - 1.20+ (0xfffffff1): `_func` gains `startLine`, and the inline tree's records shrink
//!   from 20 to 16 bytes (no parent index: a call's parent is found at its `parentPc`).
//!
//! Older tables (0xfffffffb, Go 1.2 to 1.15) are recognised only to be refused.

use super::image::Image;

mod pcline;
pub use pcline::SourceFrame;

const MAGIC_116: u32 = 0xffff_fffa;
const MAGIC_118: u32 = 0xffff_fff0;
const MAGIC_120: u32 = 0xffff_fff1;
const MAGIC_12: u32 = 0xffff_fffb;

/// runtime's `_PCDATA_InlTreeIndex` and `_FUNCDATA_InlTree`.
const PCDATA_INL_TREE_INDEX: u32 = 2;
const FUNCDATA_INL_TREE: u32 = 3;
/// `abi.FuncFlagAsm` (Go 1.18+).
const FLAG_ASM: u8 = 1 << 2;
/// Longest function name read from the name table.
const NAME_MAX: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Format {
    Go116,
    Go118,
    Go120,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PclntabError {
    /// A Go 1.2–1.15 table.
    #[error("a table of Go 1.15 or older")]
    TooOld,
    #[error("it has neither a symbol table nor .gopclntab")]
    Missing,
    #[error("no table header at {addr:#x}")]
    NoHeader { addr: u64 },
    #[error("unknown magic {magic:#x}")]
    UnknownMagic { magic: u32 },
    #[error("its header is cut short")]
    ShortHeader,
    #[error("pointer size {size} in its header")]
    PointerSize { size: u8 },
    #[error("its header describes a table that cannot be")]
    ImplausibleHeader,
    #[error("its function table points outside the file")]
    FunctabOutside,
    #[error("no name for the function at {entry:#x}")]
    NoName { entry: u64 },
}

/// One function of the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FuncRecord {
    pub name: String,
    pub entry: u64,
    pub end: u64,
    /// Written in assembly (ABI0); only known from Go 1.18 on.
    pub asm: Option<bool>,
    /// Address of its `_func` record.
    record: u64,
}

/// The function name at offset `off` of the names table at `funcnametab`.
pub(crate) fn name_at<'d>(image: &Image<'d>, funcnametab: u64, off: i32) -> Option<&'d str> {
    image.c_string(funcnametab.checked_add_signed(i64::from(off))?, NAME_MAX)
}

/// One call of a function inlined into another: the code of its inlined body, and the
/// call site's instruction that the inline tree names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InlinedCall {
    /// The callee's name, as an offset in the table's function names (`name_at`): read
    /// only for the calls a probe asks about.
    pub callee: i32,
    /// The caller: its index in the `functions()` the call was read from.
    pub caller: usize,
    /// The caller's code: `[entry, end)`.
    pub caller_code: (u64, u64),
    /// The address ranges `[lo, hi)` whose code is this call's body (what was inlined into
    /// it in turn included), in address order.
    pub body: Vec<(u64, u64)>,
    /// The tree's `parentPc`: "an instruction whose source position is the call site"
    /// (runtime/symtabinl.go): the compiler's inline mark (a NOP before the body), or,
    /// when the compiler reused another instruction of the call's line as the mark, that
    /// instruction, which may sit on another path.
    pub parent_pc: Option<u64>,
}

/// A parsed table header, reading the rest on demand through an `Image`.
pub(crate) struct Pclntab<'d> {
    image: &'d Image<'d>,
    pub format: Format,
    quantum: u64,
    nfunc: u64,
    text_start: u64,
    funcnametab: u64,
    /// Each compilation unit's file indexes into `filetab` (u32 offsets).
    cutab: u64,
    /// File names, NUL-terminated.
    filetab: u64,
    pctab: u64,
    functab: u64,
}

impl<'d> Pclntab<'d> {
    /// The table at virtual address `addr`. Go 1.18+ entries are offsets from
    /// `runtime.text`, which the header holds (relocated through the image; an external
    /// linker may put C code before it in `.text`); `text_start`, the address of `.text`,
    /// is the fallback when the header's word is zero.
    pub fn parse(image: &'d Image<'d>, addr: u64, text_start: u64) -> Result<Pclntab<'d>, PclntabError> {
        let magic = image.u32(addr).ok_or(PclntabError::NoHeader { addr })?;
        let format = match magic {
            MAGIC_116 => Format::Go116,
            MAGIC_118 => Format::Go118,
            MAGIC_120 => Format::Go120,
            MAGIC_12 => return Err(PclntabError::TooOld),
            magic => return Err(PclntabError::UnknownMagic { magic }),
        };
        let header = image.bytes(addr, 8).ok_or(PclntabError::ShortHeader)?;
        if header[7] != 8 {
            return Err(PclntabError::PointerSize { size: header[7] });
        }
        let word = |i: u64| image.u64(addr + 8 + 8 * i).ok_or(PclntabError::ShortHeader);
        let (names, cutab, filetab, pctab, functab) = match format {
            Format::Go116 => (word(2)?, word(3)?, word(4)?, word(5)?, word(6)?),
            _ => (word(3)?, word(4)?, word(5)?, word(6)?, word(7)?),
        };
        let table = Pclntab {
            image,
            format,
            quantum: u64::from(header[6]),
            nfunc: word(0)?,
            text_start: match format {
                Format::Go116 => text_start,
                _ => Some(word(2)?).filter(|t| *t != 0).unwrap_or(text_start),
            },
            funcnametab: addr + names,
            cutab: addr + cutab,
            filetab: addr + filetab,
            pctab: addr + pctab,
            functab: addr + functab,
        };
        if table.quantum == 0 || table.nfunc > 1 << 24 {
            return Err(PclntabError::ImplausibleHeader);
        }
        Ok(table)
    }

    /// Uses `text` as the base of function entries (Go 1.18+): `moduledata.text`.
    pub fn set_text_start(&mut self, text: u64) {
        if self.format != Format::Go116 {
            self.text_start = text;
        }
    }

    /// The address of the function name table.
    pub fn funcnametab(&self) -> u64 {
        self.funcnametab
    }

    /// Entry address and `_func` address of functab slot `i` (slot `nfunc` holds the end
    /// of the last function).
    fn slot(&self, i: u64) -> Option<(u64, u64)> {
        match self.format {
            Format::Go116 => {
                let at = self.functab + 16 * i;
                Some((self.image.u64(at)?, self.functab + self.image.u64(at + 8)?))
            }
            _ => {
                let at = self.functab + 8 * i;
                Some((
                    self.text_start + u64::from(self.image.u32(at)?),
                    self.functab + u64::from(self.image.u32(at + 4)?),
                ))
            }
        }
    }

    /// Every function, in address order.
    pub fn functions(&self) -> Result<Vec<FuncRecord>, PclntabError> {
        let mut out = Vec::with_capacity(self.nfunc as usize);
        for i in 0..self.nfunc {
            out.push(self.function(i)?);
        }
        Ok(out)
    }

    /// Function `i` of the table (in address order): its name is read, nothing else's.
    pub fn function(&self, i: u64) -> Result<FuncRecord, PclntabError> {
        let (entry, record) = self.slot(i).ok_or(PclntabError::FunctabOutside)?;
        let next = self.slot(i + 1).ok_or(PclntabError::FunctabOutside)?;
        let name = self.func_name(record).ok_or(PclntabError::NoName { entry })?;
        let asm = match self.format {
            Format::Go116 => None,
            Format::Go118 => Some(self.image.u8(record + 37).unwrap_or(0) & FLAG_ASM != 0),
            Format::Go120 => Some(self.image.u8(record + 41).unwrap_or(0) & FLAG_ASM != 0),
        };
        Ok(FuncRecord { name: name.to_string(), entry, end: next.0.max(entry), asm, record })
    }

    /// Each function's entry and whether it is assembly (Go 1.18 and later record it),
    /// without reading its name: what a binary with a symbol table needs of the table
    /// at open.
    pub fn abi_marks(&self) -> Result<Vec<(u64, bool)>, PclntabError> {
        let at = match self.format {
            Format::Go116 => return Ok(Vec::new()),
            Format::Go118 => 37,
            Format::Go120 => 41,
        };
        let mut out = Vec::with_capacity(self.nfunc as usize);
        for i in 0..self.nfunc {
            let (entry, record) = self.slot(i).ok_or(PclntabError::FunctabOutside)?;
            out.push((entry, self.image.u8(record + at).unwrap_or(0) & FLAG_ASM != 0));
        }
        Ok(out)
    }

    fn func_name(&self, record: u64) -> Option<&'d str> {
        let at = if self.format == Format::Go116 { record + 8 } else { record + 4 };
        let off = self.image.u32(at)? as i32;
        self.name(off)
    }

    fn name(&self, off: i32) -> Option<&'d str> {
        name_at(self.image, self.funcnametab, off)
    }

    /// (npcdata, nfuncdata, address of pcdata[0]) of a `_func`.
    fn tables(&self, record: u64) -> Option<(u32, u8, u64)> {
        match self.format {
            Format::Go116 => Some((self.image.u32(record + 32)?, self.image.u8(record + 43)?, record + 44)),
            Format::Go118 => Some((self.image.u32(record + 28)?, self.image.u8(record + 39)?, record + 40)),
            Format::Go120 => Some((self.image.u32(record + 28)?, self.image.u8(record + 43)?, record + 44)),
        }
    }

    /// The address of funcdata `index` of the function whose record is `record`; `gofunc`
    /// is `moduledata.gofunc` (needed from Go 1.18 on).
    fn funcdata(&self, record: u64, index: u32, gofunc: Option<u64>) -> Option<u64> {
        let (npcdata, nfuncdata, pcdata) = self.tables(record)?;
        if index >= u32::from(nfuncdata) {
            return None;
        }
        let after = pcdata + 4 * u64::from(npcdata);
        match self.format {
            Format::Go116 => {
                let aligned = if after % 8 != 0 { after + 4 } else { after };
                self.image.u64(aligned + 8 * u64::from(index)).filter(|p| *p != 0)
            }
            _ => {
                let off = self.image.u32(after + 4 * u64::from(index))?;
                (off != u32::MAX).then_some(gofunc? + u64::from(off))
            }
        }
    }

    /// The function's SP deltas (the `pcsp` table) as `(from, to, bytes)` runs: how far
    /// SP is below its value at the function's entry while the pc is in `[from, to)`.
    pub fn sp_deltas(&self, f: &FuncRecord) -> Option<Vec<(u64, u64, i32)>> {
        let at = if self.format == Format::Go116 { f.record + 20 } else { f.record + 16 };
        let off = self.image.u32(at)?;
        if off == 0 {
            return None;
        }
        self.pc_values(self.pctab + u64::from(off), f.entry)
    }

    /// The function's source lines (the `pcln` table) as `(from, to, line)` runs: each
    /// instruction's line in the innermost body it belongs to (an inlined call's, or the
    /// function's own).
    pub fn lines(&self, f: &FuncRecord) -> Option<Vec<(u64, u64, i32)>> {
        // pcln follows pcsp and pcfile in the record.
        let at = if self.format == Format::Go116 { f.record + 28 } else { f.record + 24 };
        let off = self.image.u32(at)?;
        if off == 0 {
            return None;
        }
        self.pc_values(self.pctab + u64::from(off), f.entry)
    }

    /// The pc-value table `table` of a function as `(from, to, value)` runs.
    fn pcdata(&self, record: u64, entry: u64, table: u32) -> Option<Vec<(u64, u64, i32)>> {
        self.pc_values(self.pcdata_at(record, table)?, entry)
    }

    /// Where the pc-value table `table` of the function whose record is `record` is.
    fn pcdata_at(&self, record: u64, table: u32) -> Option<u64> {
        let (npcdata, _, pcdata) = self.tables(record)?;
        if table >= npcdata {
            return None;
        }
        let off = self.image.u32(pcdata + 4 * u64::from(table))?;
        (off != 0).then(|| self.pctab + u64::from(off))
    }

    /// Decodes the pc-value table at `at` (runtime.step): zig-zag value deltas and pc
    /// deltas in units of the instruction quantum.
    fn pc_values(&self, mut at: u64, entry: u64) -> Option<Vec<(u64, u64, i32)>> {
        let mut runs = Vec::new();
        let mut pc = entry;
        let mut value: i32 = -1;
        let mut first = true;
        loop {
            let (uv, n) = self.varint(at)?;
            if uv == 0 && !first {
                return Some(runs);
            }
            first = false;
            at += n;
            let delta = ((uv >> 1) as i32) ^ -((uv & 1) as i32);
            value = value.wrapping_add(delta);
            let (pcdelta, n) = self.varint(at)?;
            at += n;
            let next = pc.checked_add(u64::from(pcdelta) * self.quantum)?;
            runs.push((pc, next, value));
            pc = next;
            if runs.len() > 1 << 20 {
                return None;
            }
        }
    }

    fn varint(&self, at: u64) -> Option<(u32, u64)> {
        let mut v: u32 = 0;
        for i in 0..5u64 {
            let b = self.image.u8(at + i)?;
            v |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Some((v, i + 1));
            }
        }
        None
    }

    /// Whether `gofunc` is right: the first inline-tree record of (up to) 32 functions that
    /// have one names the start of a name (the byte before is the NUL ending the previous
    /// name) and a parent pc inside the function.
    pub fn gofunc_fits(&self, gofunc: u64) -> bool {
        let mut checked = 0;
        // Zeros also pass for name 0: most records must name something else.
        let mut named = 0;
        for i in 0..self.nfunc {
            let (Some((entry, record)), Some((next, _))) = (self.slot(i), self.slot(i + 1)) else { return false };
            let Some(tree) = self.funcdata(record, FUNCDATA_INL_TREE, Some(gofunc)) else { continue };
            let (name_at, parent_pc_at) =
                if self.format == Format::Go120 { (tree + 4, tree + 8) } else { (tree + 12, tree + 16) };
            let (Some(name), Some(parent_pc)) = (self.image.u32(name_at), self.image.u32(parent_pc_at)) else {
                return false;
            };
            // (Offset 0 is the first name of the table.)
            let starts_name = (name == 0 || self.image.u8(self.funcnametab + u64::from(name) - 1) == Some(0))
                && self.name(name as i32).is_some_and(|n| !n.is_empty());
            if !starts_name || u64::from(parent_pc) >= next.max(entry) - entry {
                return false;
            }
            checked += 1;
            named += usize::from(name != 0);
            if checked == 32 {
                break;
            }
        }
        checked > 0 && 2 * named >= checked
    }

    /// `(callee name offset, caller index)` for every inline-tree entry of every function
    /// up to the highest index its `PCDATA_InlTreeIndex` table holds: a superset of the
    /// calls `inlined_calls` reports (every entry with code has an index its runs or its
    /// descendants' runs name), read without decoding a body. Sorted, deduplicated.
    pub fn inline_callees(&self, gofunc: Option<u64>) -> Vec<(i32, u32)> {
        let record_size: u64 = if self.format == Format::Go120 { 16 } else { 20 };
        let name_field: u64 = if self.format == Format::Go120 { 4 } else { 12 };
        let mut out = Vec::new();
        for i in 0..self.nfunc {
            let Some((_, record)) = self.slot(i) else { break };
            let Some(tree) = self.funcdata(record, FUNCDATA_INL_TREE, gofunc) else { continue };
            let Some(highest) = self.pcdata_at(record, PCDATA_INL_TREE_INDEX).and_then(|at| self.highest_value(at))
            else {
                continue;
            };
            // A bound on a crafted index only: Go's inlining budget keeps real trees to
            // hundreds of entries, and a read past the image ends the walk.
            for node in 0..=u64::from(highest.unsigned_abs()).min(1 << 16) {
                let Some(name) = self.image.u32(tree + record_size * node + name_field) else { break };
                out.push((name as i32, i as u32));
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The highest value of the pc-value table at `at` (as `pc_values` decodes it), if
    /// any is 0 or more.
    fn highest_value(&self, at: u64) -> Option<i32> {
        let bytes = self.image.rest(at)?;
        let mut pos = 0;
        let mut varint = || {
            let mut v: u32 = 0;
            for shift in 0..5 {
                let b = *bytes.get(pos)?;
                pos += 1;
                v |= u32::from(b & 0x7f) << (7 * shift);
                if b & 0x80 == 0 {
                    return Some(v);
                }
            }
            None
        };
        let (mut value, mut highest, mut first): (i32, i32, bool) = (-1, -1, true);
        for _ in 0..=1 << 20 {
            let uv = varint()?;
            if uv == 0 && !first {
                break;
            }
            first = false;
            value = value.wrapping_add(((uv >> 1) as i32) ^ -((uv & 1) as i32));
            highest = highest.max(value);
            varint()?;
        }
        (highest >= 0).then_some(highest)
    }

    /// Every inlined call in function `f` that has code: which function, its body's
    /// address ranges and its `parentPc`. `gofunc` as in `funcdata`.
    pub fn inlined_calls(&self, f: &FuncRecord, caller: usize, gofunc: Option<u64>) -> Vec<InlinedCall> {
        let Some(tree) = self.funcdata(f.record, FUNCDATA_INL_TREE, gofunc) else { return Vec::new() };
        let Some(runs) = self.pcdata(f.record, f.entry, PCDATA_INL_TREE_INDEX) else { return Vec::new() };
        // The runs follow each other in address order: a binary search, not a scan per
        // node (which made a function with many inlined calls quadratic).
        let value_at = |pc: u64| {
            let i = runs.partition_point(|(lo, _, _)| *lo <= pc);
            i.checked_sub(1).map(|i| runs[i]).filter(|(_, hi, _)| pc < *hi).map_or(-1, |r| r.2)
        };
        let record_size: u64 = if self.format == Format::Go120 { 16 } else { 20 };
        // (name offset, parentPc, parent index) of inline tree entry `i`.
        let node = |i: i32| -> Option<(i32, u64, i32)> {
            let at = tree + record_size * u64::try_from(i).ok()?;
            let (name_at, parent_pc_at) =
                if self.format == Format::Go120 { (at + 4, at + 8) } else { (at + 12, at + 16) };
            let name = self.image.u32(name_at)? as i32;
            let parent_pc = f.entry.checked_add_signed(i64::from(self.image.u32(parent_pc_at)? as i32))?;
            Some((name, parent_pc, value_at(parent_pc)))
        };
        let mut bodies: std::collections::BTreeMap<i32, Vec<(u64, u64)>> = std::collections::BTreeMap::new();
        for (lo, hi, value) in &runs {
            if *value < 0 || lo >= hi {
                continue;
            }
            // This run belongs to entry `value` and to every inlined call enclosing it.
            let mut i = *value;
            for _ in 0..64 {
                bodies.entry(i).or_default().push((*lo, *hi));
                match node(i) {
                    Some((_, _, parent)) if parent >= 0 && parent != i => i = parent,
                    _ => break,
                }
            }
        }
        let mut out = Vec::new();
        for (i, mut body) in bodies {
            let Some((name_off, parent_pc, _)) = node(i) else { continue };
            if self.name(name_off).is_none() {
                continue;
            }
            body.sort_unstable();
            body.dedup_by(|next, prev| {
                let joins = next.0 <= prev.1;
                if joins {
                    prev.1 = prev.1.max(next.1);
                }
                joins
            });
            let parent_pc = (f.entry..f.end).contains(&parent_pc).then_some(parent_pc);
            out.push(InlinedCall { callee: name_off, caller, caller_code: (f.entry, f.end), body, parent_pc });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gobin::elf::Segment;
    use std::collections::HashMap;

    /// An image of `bytes` mapped at 0x1000.
    fn image<'d>(bytes: &'d [u8], segs: &'d [Segment], rel: &'d HashMap<u64, u64>) -> Image<'d> {
        Image { data: bytes, segments: segs, relative: rel }
    }

    fn seg(len: usize) -> [Segment; 1] {
        [Segment { vaddr: 0x1000, filesz: len as u64, offset: 0 }]
    }

    #[test]
    fn old_tables_are_refused_and_garbage_is_bad() {
        let rel = HashMap::new();
        let old = [0xfb, 0xff, 0xff, 0xff, 0, 0, 1, 8, 0, 0, 0, 0, 0, 0, 0, 0];
        let s = seg(old.len());
        assert_eq!(Pclntab::parse(&image(&old, &s, &rel), 0x1000, 0).err(), Some(PclntabError::TooOld));
        let junk = [0u8; 64];
        let s = seg(junk.len());
        assert!(matches!(
            Pclntab::parse(&image(&junk, &s, &rel), 0x1000, 0),
            Err(PclntabError::UnknownMagic { .. } | PclntabError::ImplausibleHeader)
        ));
    }

    #[test]
    fn pc_value_runs_decode_like_runtime_step() {
        // From -1: delta +1 (zig-zag 2) for 4 quanta, then delta -2 (zig-zag 3) for 2, then the end.
        let mut bytes = vec![0u8; 16];
        bytes.extend_from_slice(&[2, 4, 3, 2, 0]);
        let rel = HashMap::new();
        let s = seg(bytes.len());
        let img = image(&bytes, &s, &rel);
        let table = Pclntab {
            image: &img,
            format: Format::Go120,
            quantum: 1,
            nfunc: 0,
            text_start: 0,
            funcnametab: 0,
            cutab: 0,
            filetab: 0,
            pctab: 0x1000,
            functab: 0,
        };
        let runs = table.pc_values(0x1010, 0x400).unwrap();
        assert_eq!(runs, vec![(0x400, 0x404, 0), (0x404, 0x406, -2)]);
    }
}
