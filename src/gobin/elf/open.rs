//! Opening a Go executable: the ELF facts, the build info, the function table (named by
//! its section, or in a stripped binary searched for in the data sections by its header),
//! and the functions from the symbol table, or from that table when there is none.

use super::{arena, buildinfo, debugfile, file as elf, image, moduledata, names, pclntab};
use crate::gobin::dwarf::Inflating;
use crate::gobin::{go_minor, Abi, BuildIds, DebugSearch, DwarfState, Layout, Target, TargetError};
use crate::gotypes::Types;
use std::cell::{OnceCell, RefCell};
use std::path::Path;

impl Target {
    /// Reads and checks `path`: an ELF executable of an architecture gtrace reads, built
    /// by Go 1.17 or later. Its
    /// functions come from the symbol table, or from `.gopclntab` when it is stripped.
    pub fn open(path: &Path) -> Result<Target, TargetError> {
        Target::open_with(path, &DebugSearch::default())
    }

    /// `open`, with DWARF from a debug file when `debug` names one or finds one by the
    /// binary's build id.
    pub fn open_with(path: &Path, debug: &DebugSearch) -> Result<Target, TargetError> {
        Target::from_bytes(path, elf::read_file(path)?, debug)
    }

    /// `open_with`, with the binary's own `.debug_info` inflated on another thread while
    /// the rest is read (`dwarf::Inflating`) when `early` says so of its build ids and
    /// its size in bytes, read from the ELF headers before the symbol table (what only
    /// needs them, a cache file named by the build id, may start there too): a run that
    /// will read DWARF and has no cache file for this build. Not with a debug file given
    /// (`--debug-file`): its DWARF is the one read, and `early` is not asked.
    pub fn open_inflating(
        path: &Path,
        debug: &DebugSearch,
        early: &mut dyn FnMut(&BuildIds, u64) -> bool,
    ) -> Result<Target, TargetError> {
        let data = elf::read_file(path)?;
        let ids = debug.file.is_none().then(|| elf::read_build_ids(path, &data).ok()).flatten();
        let size = data.len() as u64;
        let inflating = ids.filter(|ids| early(ids, size)).and_then(|_| Inflating::start(path, &data));
        let target = Target::from_bytes(path, data, debug)?;
        if let (Some(inflating), None) = (inflating, &target.debug_file) {
            *target.dwarf.borrow_mut() = DwarfState::NotLoaded(None, Some(inflating));
        }
        Ok(target)
    }

    /// `open_with` on the bytes of `path` already read or mapped: the reader is the
    /// same either way.
    pub fn from_bytes(path: &Path, data: crate::input::Bytes, debug: &DebugSearch) -> Result<Target, TargetError> {
        let facts = elf::read(path, &data)?;
        // Only whether there is DWARF: it is decompressed and read on the first question
        // that needs it, never for a script that reads no Go value.
        let own_dwarf = elf::has_section(path, &data, ".debug_info")?;
        let debug_file = debugfile::find(path, &facts.build_ids, own_dwarf, debug)?;
        let has_dwarf = own_dwarf || debug_file.is_some();
        let mut target = Target {
            path: path.to_path_buf(),
            arch: facts.arch,
            data,
            functions: names::Functions::new(facts.functions),
            segments: facts.segments,
            relative: facts.relative,
            go_version: None,
            module_path: None,
            build_ids: facts.build_ids,
            has_dwarf,
            debug_file,
            from_pclntab: false,
            layout: Layout { text: facts.text, pclntab: facts.pclntab, rodata: facts.rodata, data: facts.data },
            all_data: facts.all_data,
            inlined: OnceCell::new(),
            inlined_found: RefCell::new(std::collections::BTreeMap::new()),
            code_crc: OnceCell::new(),
            dwarf: RefCell::new(DwarfState::NotLoaded(None, None)),
            types: RefCell::new(Types::default()),
            g_layout: OnceCell::new(),
            types_base: OnceCell::new(),
            records: OnceCell::new(),
            moduledata_of: RefCell::default(),
            sp_deltas: RefCell::new(std::collections::HashMap::new()),
            cfgs: RefCell::new(std::collections::HashMap::new()),
            gofunc: OnceCell::new(),
            type_data: OnceCell::new(),
            decoded: RefCell::new(std::collections::HashMap::new()),
        };
        target.read_build_info();
        if target.layout.pclntab.is_none() {
            target.layout.pclntab = target.search_pclntab();
        }
        if let Some(version) = target.go_version.as_deref() {
            if go_minor(version).is_some_and(|m| m < 17) {
                return Err(TargetError::TooOld { path: target.path.clone(), version: version.to_string() });
            }
        }
        target.mark_abis()?;
        // What opening read (the symbol table, its names, the function table's entries
        // for the ABI marks: 14 MB of Caddy) is copied out or done with: its pages leave
        // the RSS now, not once the probes are attached, and the compile reads again only
        // the few it needs.
        target.data.shed();
        Ok(target)
    }

    /// The functions' ABIs: from the function table when there are no symbols (the
    /// functions are then its records), else the symbols' functions marked from it.
    fn mark_abis(&mut self) -> Result<(), TargetError> {
        if self.functions.is_empty() {
            let records = self.func_records()?;
            self.from_pclntab = true;
            let mut functions = arena::Builder::with_capacity(records.len());
            for r in &records {
                let abi = match r.asm {
                    Some(true) => Abi::Abi0,
                    Some(false) => Abi::Internal,
                    None => Abi::Unknown,
                };
                functions.push(r.name.as_bytes(), r.entry, r.end - r.entry, abi);
            }
            self.functions = names::Functions::new(functions.finish());
        } else {
            // Symbols name functions; the table knows which are assembly (its names
            // are not read).
            let mut asm = self.abi_marks()?;
            asm.sort_unstable();
            for f in self.functions.all_mut() {
                if f.abi == Abi::Unknown {
                    f.abi = match asm.binary_search_by_key(&f.addr, |m| m.0) {
                        Ok(i) if asm[i].1 => Abi::Abi0,
                        Ok(_) => Abi::Internal,
                        Err(_) => Abi::Unknown,
                    };
                }
            }
        }
        Ok(())
    }

    pub(crate) fn image(&self) -> image::Image<'_> {
        image::Image { data: &self.data, segments: &self.segments, relative: &self.relative }
    }

    pub(crate) fn bad_pclntab(&self, source: pclntab::PclntabError) -> TargetError {
        TargetError::BadPclntab { path: self.path.clone(), source }
    }

    /// Every function of `.gopclntab`; an empty list when there is none (a Go binary
    /// whose table was removed still has its symbols).
    pub(crate) fn func_records(&self) -> Result<Vec<pclntab::FuncRecord>, TargetError> {
        let Some(addr) = self.layout.pclntab else {
            return if self.functions.is_empty() {
                Err(self.bad_pclntab(pclntab::PclntabError::Missing))
            } else {
                Ok(Vec::new())
            };
        };
        let image = self.image();
        let table = match self.pclntab(&image, addr) {
            Ok((t, _)) => t,
            Err(pclntab::PclntabError::TooOld) => {
                let version = self.go_version.clone().unwrap_or_else(|| "a Go older than 1.16".to_string());
                return Err(TargetError::TooOld { path: self.path.clone(), version });
            }
            Err(e) => return Err(self.bad_pclntab(e)),
        };
        table.functions().map_err(|e| self.bad_pclntab(e))
    }

    /// The function table in a binary that has no section named for it: the first
    /// 8-aligned Go 1.16+ header in a data section whose functions all read.
    pub(crate) fn search_pclntab(&self) -> Option<u64> {
        let image = self.image();
        for section in &self.all_data {
            let Some(bytes) = image.bytes(section.addr, section.size) else { continue };
            let first = section.addr.next_multiple_of(8) - section.addr;
            for off in (first as usize..bytes.len().saturating_sub(8)).step_by(8) {
                let head = &bytes[off..off + 8];
                let magic = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
                let known = matches!(magic, 0xffff_fffa | 0xffff_fff0 | 0xffff_fff1);
                if known && head[4..] == [0, 0, self.arch.pc_quantum(), 8] {
                    let addr = section.addr + off as u64;
                    if self.pclntab(&image, addr).is_ok_and(|(t, _)| t.functions().is_ok_and(|f| !f.is_empty())) {
                        return Some(addr);
                    }
                }
            }
        }
        None
    }

    /// Each function of `.gopclntab` by entry, and whether it is assembly (none before
    /// Go 1.18 records it); empty without a table.
    fn abi_marks(&self) -> Result<Vec<(u64, bool)>, TargetError> {
        let Some(addr) = self.layout.pclntab else { return Ok(Vec::new()) };
        let image = self.image();
        match self.pclntab(&image, addr) {
            Ok((table, _)) => table.abi_marks().map_err(|e| self.bad_pclntab(e)),
            Err(pclntab::PclntabError::TooOld) => {
                let version = self.go_version.clone().unwrap_or_else(|| "a Go older than 1.16".to_string());
                Err(TargetError::TooOld { path: self.path.clone(), version })
            }
            Err(e) => Err(self.bad_pclntab(e)),
        }
    }

    /// The function table at `addr` with the right base for its entries, and the address
    /// of the runtime's moduledata if found.
    pub(crate) fn pclntab<'i>(
        &self,
        image: &'i image::Image<'i>,
        addr: u64,
    ) -> Result<(pclntab::Pclntab<'i>, Option<u64>), pclntab::PclntabError> {
        let mut table = pclntab::Pclntab::parse(image, addr, self.layout.text)?;
        let known = self.moduledata_of.borrow().iter().find(|(a, _)| *a == addr).map(|(_, md)| *md);
        let md = known.unwrap_or_else(|| {
            let md = moduledata::find(image, addr, table.funcnametab(), &self.layout.data);
            self.moduledata_of.borrow_mut().push((addr, md));
            md
        });
        if let Some(text) = md.and_then(|md| moduledata::text(image, md)) {
            table.set_text_start(text);
        }
        Ok((table, md))
    }

    pub(crate) fn read_build_info(&mut self) {
        let Ok(Some(section)) = elf::section(&self.path, &self.data, ".go.buildinfo") else { return };
        let read = |addr: u64, len: usize| self.bytes_at(addr, len as u64).map(<[u8]>::to_vec);
        let version = buildinfo::go_version(&section, read);
        let module = buildinfo::module_path(&section, read);
        self.go_version = version;
        self.module_path = module;
    }
}
