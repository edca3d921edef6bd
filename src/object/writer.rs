//! Writes the BPF ELF object as clang would for a BTF-less program with legacy maps: a
//! relocatable ELF64 little-endian for EM_BPF with a `license` section, a `maps`
//! section of `struct bpf_map_def` records (one global STT_OBJECT symbol each), one
//! executable section a program (a global STT_FUNC symbol each), an `R_BPF_64_64`
//! relocation against the map's symbol at every `ld_map_fd`, and an `R_BPF_64_32`
//! relocation against an undefined global symbol of the function's name at every kfunc
//! call (clang's form of a call of an `extern ... __ksym` function).

use crate::bpf::builder::Program;
use crate::bpf::insn::{encode_all, BPF_PSEUDO_MAP_FD, INSN_SIZE};
use crate::bpf::kfuncs::{kfunc_call, Kfunc};
use object::write::{Object, Relocation, Symbol, SymbolSection};
use object::{elf, Architecture, BinaryFormat, Endianness, SectionKind, SymbolFlags, SymbolKind, SymbolScope};
use std::collections::HashMap;
use thiserror::Error;

/// Size of one legacy map record: the five `u32` of `struct bpf_map_def` that every
/// loader reads (type, key_size, value_size, max_entries, map_flags).
pub const MAP_DEF_SIZE: usize = 20;

/// The license of gtrace's objects: its programs call GPL-only helpers.
pub const LICENSE: &str = "GPL";

/// Everything that goes into one object.
#[derive(Clone, Debug, Default)]
pub struct BpfObject {
    /// The program license; GPL-only helpers need a GPL-compatible one.
    pub license: String,
    pub maps: Vec<MapDef>,
    pub programs: Vec<ProgramCode>,
}

/// A legacy map definition, as `struct bpf_map_def`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MapDef {
    /// The map's symbol; relocations name it.
    pub name: String,
    /// `enum bpf_map_type` (see `plan::MapKind::bpf_type`).
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
}

/// `BPF_F_NO_PREALLOC`: a hash map's elements are allocated as keys arrive.
pub const BPF_F_NO_PREALLOC: u32 = 1;

impl From<&crate::plan::MapSpec> for MapDef {
    /// The definition of a map the plan describes. User maps, the `self` table and the
    /// tables of calls in flight are not preallocated: their size (`--map-size`) bounds
    /// them, and only the keys they hold take memory (a preallocated per-CPU hash of
    /// histograms would take its full size times the CPUs at once); except a user map
    /// the plan says is (`MapRole::User::preallocated`: its full size is small enough,
    /// and then no new key needs memory in a probe, and a free list serves it).
    fn from(m: &crate::plan::MapSpec) -> MapDef {
        use crate::plan::{MapKind, MapRole};
        let grows = matches!(m.kind, MapKind::Hash | MapKind::PercpuHash)
            && matches!(
                m.role,
                MapRole::User { preallocated: false, .. }
                    | MapRole::SelfVars
                    | MapRole::Goroutines
                    | MapRole::Frames
                    | MapRole::Carried
                    | MapRole::Exemplars { .. }
            );
        MapDef {
            name: m.object_name.clone(),
            map_type: m.kind.bpf_type(),
            key_size: m.key_size,
            value_size: m.value_size,
            max_entries: m.max_entries,
            map_flags: if grows { BPF_F_NO_PREALLOC } else { 0 },
        }
    }
}

/// One program and the section it goes in (`uprobe/p0`, `perf_event/t0`); the section
/// name tells the loader the program type.
#[derive(Clone, Debug)]
pub struct ProgramCode {
    /// The program's symbol, by which the runtime finds it.
    pub name: String,
    pub section: String,
    pub program: Program,
}

#[derive(Debug, Error)]
pub enum ObjectError {
    #[error("the license `{license}` contains a NUL byte")]
    BadLicense { license: String },
    #[error("a map or program has an empty name")]
    EmptyName,
    #[error("the symbol `{name}` is defined twice")]
    DuplicateSymbol { name: String },
    #[error("program `{program}` is in section `{section}`, which is not a program section")]
    BadSection { program: String, section: String },
    #[error("program `{program}` is empty")]
    EmptyProgram { program: String },
    #[error("program `{program}` refers to map `{map}`, which the object does not define")]
    UnknownMap { program: String, map: String },
    #[error("program `{program}`: the relocation at instruction {insn_index} is not at a map load")]
    BadRelocation { program: String, insn_index: usize },
    #[error("program `{program}`: the kfunc call at instruction {insn_index} is not a kfunc call instruction")]
    BadKfuncCall { program: String, insn_index: usize },
    #[error("writing the ELF object")]
    Write {
        #[source]
        source: object::write::Error,
    },
}

/// The ELF bytes of `obj`.
pub fn write(obj: &BpfObject) -> Result<Vec<u8>, ObjectError> {
    validate(obj)?;
    let mut out = Object::new(BinaryFormat::Elf, Architecture::Bpf, Endianness::Little);

    let license = out.add_section(Vec::new(), b"license".to_vec(), SectionKind::Data);
    let mut license_bytes = obj.license.clone().into_bytes();
    license_bytes.push(0);
    out.append_section_data(license, &license_bytes, 1);

    let mut map_symbols = HashMap::new();
    if !obj.maps.is_empty() {
        let maps = out.add_section(Vec::new(), b"maps".to_vec(), SectionKind::Data);
        for map in &obj.maps {
            let offset = out.append_section_data(maps, &map_def_bytes(map), 4);
            let symbol = out.add_symbol(global(&map.name, offset, MAP_DEF_SIZE, SymbolKind::Data, maps));
            map_symbols.insert(map.name.as_str(), symbol);
        }
    }

    let mut kfunc_symbols: HashMap<Kfunc, object::write::SymbolId> = HashMap::new();
    for code in &obj.programs {
        let section = out.add_section(Vec::new(), code.section.clone().into_bytes(), SectionKind::Text);
        let bytes = encode_all(&code.program.insns);
        out.append_section_data(section, &bytes, INSN_SIZE as u64);
        out.add_symbol(global(&code.name, 0, bytes.len(), SymbolKind::Text, section));
        for reloc in &code.program.relocations {
            let symbol = *map_symbols
                .get(reloc.map.as_str())
                .ok_or_else(|| ObjectError::UnknownMap { program: code.name.clone(), map: reloc.map.clone() })?;
            let relocation = Relocation {
                offset: (reloc.insn_index * INSN_SIZE) as u64,
                symbol,
                addend: 0,
                flags: object::RelocationFlags::Elf { r_type: elf::R_BPF_64_64 },
            };
            out.add_relocation(section, relocation).map_err(|source| ObjectError::Write { source })?;
        }
        for call in &code.program.kfunc_calls {
            let symbol =
                *kfunc_symbols.entry(call.kfunc).or_insert_with(|| out.add_symbol(extern_function(call.kfunc)));
            let relocation = Relocation {
                offset: (call.insn_index * INSN_SIZE) as u64,
                symbol,
                addend: 0,
                flags: object::RelocationFlags::Elf { r_type: elf::R_BPF_64_32 },
            };
            out.add_relocation(section, relocation).map_err(|source| ObjectError::Write { source })?;
        }
    }
    out.write().map_err(|source| ObjectError::Write { source })
}

/// The `struct bpf_map_def` record of a map, little-endian.
pub fn map_def_bytes(map: &MapDef) -> [u8; MAP_DEF_SIZE] {
    let mut out = [0u8; MAP_DEF_SIZE];
    let fields = [map.map_type, map.key_size, map.value_size, map.max_entries, map.map_flags];
    for (chunk, field) in out.chunks_exact_mut(4).zip(fields) {
        chunk.copy_from_slice(&field.to_le_bytes());
    }
    out
}

fn global(name: &str, offset: u64, size: usize, kind: SymbolKind, section: object::write::SectionId) -> Symbol {
    Symbol {
        name: name.as_bytes().to_vec(),
        value: offset,
        size: size as u64,
        kind,
        scope: SymbolScope::Dynamic,
        weak: false,
        section: SymbolSection::Section(section),
        flags: SymbolFlags::None,
    }
}

/// The undefined global symbol a kfunc's calls are relocated against (STT_NOTYPE, as
/// clang writes an extern function: loaders skip it, the runtime resolves it by name).
fn extern_function(kfunc: Kfunc) -> Symbol {
    Symbol {
        name: kfunc.name().as_bytes().to_vec(),
        value: 0,
        size: 0,
        kind: SymbolKind::Unknown,
        scope: SymbolScope::Dynamic,
        weak: false,
        section: SymbolSection::Undefined,
        flags: SymbolFlags::None,
    }
}

/// Sections the loader treats as something other than a program.
const RESERVED_SECTIONS: &[&str] =
    &["license", "version", "maps", ".maps", ".text", ".bss", ".data", ".rodata", ".BTF"];

fn validate(obj: &BpfObject) -> Result<(), ObjectError> {
    if obj.license.contains('\0') {
        return Err(ObjectError::BadLicense { license: obj.license.clone() });
    }
    let mut names = std::collections::HashSet::new();
    let all_names = obj.maps.iter().map(|m| &m.name).chain(obj.programs.iter().map(|p| &p.name));
    for name in all_names {
        if name.is_empty() {
            return Err(ObjectError::EmptyName);
        }
        if !names.insert(name.as_str()) {
            return Err(ObjectError::DuplicateSymbol { name: name.clone() });
        }
    }
    let mut sections = std::collections::HashSet::new();
    for code in &obj.programs {
        let reserved = RESERVED_SECTIONS.iter().any(|r| code.section.starts_with(r));
        if code.section.is_empty() || reserved || !sections.insert(code.section.as_str()) {
            return Err(ObjectError::BadSection { program: code.name.clone(), section: code.section.clone() });
        }
        if code.program.insns.is_empty() {
            return Err(ObjectError::EmptyProgram { program: code.name.clone() });
        }
        for reloc in &code.program.relocations {
            let insns = &code.program.insns;
            let at_map_load =
                insns.get(reloc.insn_index).is_some_and(|i| i.is_ld_imm64() && i.src == BPF_PSEUDO_MAP_FD)
                    && reloc.insn_index + 1 < insns.len();
            if !at_map_load {
                return Err(ObjectError::BadRelocation { program: code.name.clone(), insn_index: reloc.insn_index });
            }
        }
        for call in &code.program.kfunc_calls {
            if code.program.insns.get(call.insn_index) != Some(&kfunc_call()) {
                return Err(ObjectError::BadKfuncCall { program: code.name.clone(), insn_index: call.insn_index });
            }
        }
    }
    Ok(())
}
