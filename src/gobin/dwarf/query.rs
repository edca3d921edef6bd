//! `Target`'s door to its DWARF: loaded on first use (from the binary or the debug file
//! kept aside), then asked for parameters; the arena of the Go types parsed so far.

use super::DwarfInfo;
use crate::gobin::{Param, Target, TargetError};
use crate::gotypes::{GoType, TypeId, TypeKind, Types};
use std::cell::Ref;
use std::path::Path;

/// The DWARF of the target, loaded on first use.
pub(crate) enum DwarfState {
    /// Not read yet; what a cache knows of it, if anything, and the section being
    /// inflated on another thread (`Target::open_inflating`), if it is.
    NotLoaded(Option<Box<super::DwarfSeed>>, Option<super::Inflating>),
    Absent,
    Loaded(Box<DwarfInfo>),
}

impl Target {
    /// Where the DWARF is: the debug file kept aside, or the binary itself.
    pub(crate) fn dwarf_source(&self) -> (&Path, &crate::input::Bytes) {
        match &self.debug_file {
            Some(d) => (&d.path, &d.data),
            None => (&self.path, &self.data),
        }
    }

    /// Whether a question has made the DWARF be read (a script that reads no Go value
    /// should not: see `check::binary`).
    pub fn dwarf_read(&self) -> bool {
        !matches!(*self.dwarf.borrow(), DwarfState::NotLoaded(..))
    }

    /// Starts the DWARF from what a cache kept (src/cache), before a question reads it:
    /// the units it holds are read from it, the rest from the binary.
    pub fn seed_dwarf(&self, seed: super::DwarfSeed) {
        if let DwarfState::NotLoaded(slot, _) = &mut *self.dwarf.borrow_mut() {
            *slot = Some(Box::new(seed));
        }
    }

    /// What the DWARF read so far would start the next run with (None when none was
    /// read): the units reached and the lookups answered, and the CRC-32 of the
    /// compressed `.debug_info` they are for (computed now if the load did not).
    pub fn dwarf_learned(&self) -> Option<super::DwarfSeed> {
        let mut seed = match &*self.dwarf.borrow() {
            DwarfState::Loaded(d) => d.seed(),
            _ => return None,
        };
        if seed.info_crc.is_none() {
            seed.info_crc = self.dwarf_bytes().map(super::crc32);
        }
        Some(seed)
    }

    /// Whether the DWARF read so far holds more than the cache seeded it with (false
    /// when none was read): what `dwarf_learned` would add to the cache.
    pub fn dwarf_grew(&self) -> bool {
        matches!(&*self.dwarf.borrow(), DwarfState::Loaded(d) if d.grew())
    }

    /// Whether `.debug_info` was decompressed whole: a question reached a unit no
    /// cache held (or there was no cache).
    pub fn dwarf_decompressed(&self) -> bool {
        matches!(&*self.dwarf.borrow(), DwarfState::Loaded(d) if d.decompressed())
    }

    /// `.debug_info` as the file DWARF comes from holds it (compressed or not); None
    /// without.
    pub fn dwarf_bytes(&self) -> Option<&[u8]> {
        let (path, data) = self.dwarf_source();
        Some(crate::gobin::elf::compressed_section(path, data, ".debug_info").ok()??.data)
    }

    /// Frees what only the compiler asks for, once the probes are attached: the DWARF
    /// read so far (its decompressed sections, units, indexes and lookups) and the
    /// control flow graphs and stack deltas of the functions probed, the inlined calls
    /// and `.gopclntab`'s records (read again if a stack is symbolized). What decoding
    /// and symbolizing read stays (the functions, the Go types parsed); a later question
    /// that needs DWARF reads it again.
    pub fn release_compiler_tables(&mut self) {
        *self.dwarf.borrow_mut() = DwarfState::NotLoaded(None, None);
        self.cfgs.borrow_mut().clear();
        self.sp_deltas.borrow_mut().clear();
        self.inlined.take();
        self.inlined_found.take();
        self.records.take();
        self.functions.release_lookups();
        // A mapped file's pages go too: the trace touches again only what it reads.
        self.data.shed();
        if let Some(d) = &self.debug_file {
            d.data.shed();
        }
    }

    /// The debug file DWARF is read from, when it is not the binary.
    pub fn debug_file(&self) -> Option<&Path> {
        self.debug_file.as_ref().map(|d| d.path.as_path())
    }

    /// Loads the DWARF on first use; None when the binary has none.
    pub(crate) fn dwarf_mut<'s>(
        state: &'s mut DwarfState,
        path: &Path,
        data: &crate::input::Bytes,
    ) -> Result<Option<&'s mut DwarfInfo>, TargetError> {
        if let DwarfState::NotLoaded(seed, inflating) = state {
            let (seed, inflating) = (seed.take().map(|s| *s), inflating.take());
            *state = match DwarfInfo::load(path, data, seed, inflating) {
                Ok(Some(d)) => DwarfState::Loaded(Box::new(d)),
                Ok(None) => DwarfState::Absent,
                Err(e) => {
                    *state = DwarfState::Absent;
                    return Err(e);
                }
            };
        }
        match state {
            DwarfState::Loaded(d) => Ok(Some(d)),
            _ => Ok(None),
        }
    }

    /// Parameters and results of `function` in DWARF order: the receiver first, then the
    /// arguments, then the results (`is_result`; unnamed ones are `~r0`, `~r1`, ...).
    /// A shape-instantiated generic function (`pkg.F[go.shape.int]`) starts with a
    /// hidden `.dict` parameter of type unsafe.Pointer: the dictionary Go passes first;
    /// pass it to `arch::abi` like any other, hide it from users.
    /// None without DWARF, or when DWARF does not describe the function (assembly).
    /// Parsed lazily: only the compile units and types a script touches.
    pub fn params(&self, function: &str) -> Result<Option<Vec<Param>>, TargetError> {
        let mut state = self.dwarf.borrow_mut();
        let Some(dwarf) = Self::dwarf_mut(&mut state, self.dwarf_source().0, self.dwarf_source().1)? else {
            return Ok(None);
        };
        dwarf.params(function, &mut self.types.borrow_mut())
    }

    /// A signed machine word: the type of positional `argN` without DWARF.
    pub fn word_type(&self) -> TypeId {
        let mut types = self.types.borrow_mut();
        let word = GoType { name: "word".into(), size: 8, kind: TypeKind::Int { signed: true } };
        match types.items.iter().position(|t| *t == word) {
            Some(i) => TypeId(i as u32),
            None => types.add(word),
        }
    }

    /// Every Go type parsed so far. Parsing more (`params`) while this is held panics:
    /// copy what you need, as the checker does into `Checked::types`.
    pub fn types(&self) -> Ref<'_, Types> {
        self.types.borrow()
    }
}
