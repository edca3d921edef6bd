//! The ELF container: checks that a file is a Go executable of an architecture gtrace
//! reads, lists the functions of
//! its symbol table, maps virtual addresses to file offsets through the PT_LOAD program
//! headers, and hands out (decompressed) section bytes.

use super::moduledata::Range;
use crate::arch::Arch;
use crate::gobin::{Abi, Function, TargetError};
use object::elf::{PT_LOAD, STT_FUNC};
use object::read::elf::{ElfFile64, ProgramHeader};
use object::{Architecture, Endianness, FileKind, Object, ObjectSection, ObjectSymbol, RelocationFlags, SectionKind};
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

/// One PT_LOAD segment: `filesz` bytes at file `offset` are mapped at `vaddr`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Segment {
    pub vaddr: u64,
    pub filesz: u64,
    pub offset: u64,
}

/// What `open` learns from the ELF headers and the symbol table.
pub(crate) struct ElfFacts {
    pub arch: Arch,
    /// Every text function of the symbol table, in the table's order; empty when the
    /// binary is stripped.
    pub functions: Vec<Function>,
    pub segments: Vec<Segment>,
    /// The `*_RELATIVE` dynamic relocations of a PIE: address → value.
    pub relative: HashMap<u64, u64>,
    /// Start of `.text`.
    pub text: u64,
    /// `.gopclntab` (`.data.rel.ro.gopclntab` in a Go 1.17 PIE).
    pub pclntab: Option<u64>,
    /// `.rodata`.
    pub rodata: Option<Range>,
    /// Writable data sections, where the runtime's moduledata lives.
    pub data: Vec<Range>,
    /// Every data section, read-only or not: where the function table may be when no
    /// section is named for it (an externally linked Go 1.17 PIE merges it).
    pub all_data: Vec<Range>,
    /// The binary's identity: the GNU build id note and Go's own build id.
    pub build_ids: BuildIds,
}

/// What identifies one build of a binary: the GNU build id (hex; present when the
/// program was linked with `-ldflags=-B gobuildid` or by an external linker) and Go's
/// build id (`.note.go.buildid`, written by every Go build).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BuildIds {
    pub gnu: Option<String>,
    pub go: Option<String>,
}

impl BuildIds {
    /// Whether `other` is the same build: every id both have agrees. None when they
    /// share no kind of id, so nothing can be said.
    pub fn same_build(&self, other: &BuildIds) -> Option<bool> {
        let agree = |a: &Option<String>, b: &Option<String>| match (a, b) {
            (Some(a), Some(b)) => Some(a == b),
            _ => None,
        };
        match (agree(&self.go, &other.go), agree(&self.gnu, &other.gnu)) {
            (None, None) => None,
            (a, b) => Some(a != Some(false) && b != Some(false)),
        }
    }
}

impl std::fmt::Display for BuildIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Go build id {}, GNU build id {}",
            self.go.as_deref().unwrap_or("none"),
            self.gnu.as_deref().unwrap_or("none")
        )
    }
}

/// The build ids of any ELF file (a debug file too), without the checks `read` makes of
/// an executable.
pub(crate) fn read_build_ids(path: &Path, data: &[u8]) -> Result<BuildIds, TargetError> {
    Ok(build_ids(&parse(path, data)?))
}

fn build_ids(elf: &Elf<'_>) -> BuildIds {
    let gnu = elf.build_id().ok().flatten().map(|id| id.iter().map(|b| format!("{b:02x}")).collect());
    let go = elf.section_by_name(".note.go.buildid").and_then(|s| s.data().ok()).and_then(go_build_id_note);
    BuildIds { gnu, go }
}

/// The description of a `Go` note of type 4 (namesz, descsz, type, name padded to 4,
/// then the description): Go's build id as text.
fn go_build_id_note(note: &[u8]) -> Option<String> {
    let word = |i: usize| Some(u32::from_le_bytes(note.get(i..i + 4)?.try_into().ok()?) as usize);
    let (namesz, descsz, kind) = (word(0)?, word(4)?, word(8)?);
    let name = note.get(12..12 + namesz)?;
    let name_end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
    if kind != 4 || &name[..name_end] != b"Go" {
        return None;
    }
    let desc_start = 12 + namesz.next_multiple_of(4);
    let desc = note.get(desc_start..desc_start.checked_add(descsz)?)?;
    String::from_utf8(desc.to_vec()).ok()
}

type Elf<'d> = ElfFile64<'d, Endianness>;

/// The bytes of an executable or a debug file, its kind, size and first bytes (ELF's
/// magic, or a script's `#!` for `parse` to name) checked before the rest is read: a
/// huge file that is no ELF costs four bytes, one larger than gtrace reads nothing.
/// The bytes are mapped, not copied (`crate::input::map_file`): only what is read costs.
pub(crate) fn read_file(path: &Path) -> Result<crate::input::Bytes, TargetError> {
    let head = crate::input::read_head(path, 4)?;
    if !head.starts_with(b"\x7fELF") && !head.starts_with(b"#!") {
        return Err(TargetError::NotElf { path: path.to_path_buf() });
    }
    Ok(crate::input::map_file(path, crate::input::MAX_BINARY)?)
}

/// Parses `data` as an ELF64 little- or big-endian file; a script (`#!`) is `Script`, a
/// file cut short of what its headers describe is `Truncated`, any other content is
/// `NotElf`, and an ELF32 file is `WrongArch`.
fn parse<'d>(path: &Path, data: &'d [u8]) -> Result<Elf<'d>, TargetError> {
    if let Some(rest) = data.strip_prefix(b"#!") {
        let line = &rest[..rest.iter().position(|b| *b == b'\n').unwrap_or(rest.len()).min(200)];
        let interpreter = String::from_utf8_lossy(line).trim().to_string();
        return Err(TargetError::Script { path: path.to_path_buf(), interpreter });
    }
    if let Some(expected) = described_size(data).filter(|n| *n > data.len() as u64) {
        return Err(TargetError::Truncated { path: path.to_path_buf(), size: data.len() as u64, expected });
    }
    match FileKind::parse(data) {
        Ok(FileKind::Elf64) => {}
        Ok(FileKind::Elf32) => {
            let arch = object::File::parse(data)
                .map(|f| arch_name(f.architecture()))
                .unwrap_or_else(|_| "a 32-bit machine".to_string());
            return Err(TargetError::WrongArch { path: path.to_path_buf(), arch });
        }
        _ => return Err(TargetError::NotElf { path: path.to_path_buf() }),
    }
    ElfFile64::parse(data).map_err(|_| TargetError::NotElf { path: path.to_path_buf() })
}

/// How long an ELF64 little-endian file says it is: the end of its section headers, of
/// its program headers, of every segment's bytes and of every section's bytes in the file
/// (as far as the headers are there to read). None when `data` is not such a file; at
/// least 64 (the ELF header) when it starts like one.
fn described_size(data: &[u8]) -> Option<u64> {
    if !data.starts_with(b"\x7fELF\x02\x01") {
        return None;
    }
    let u16_at = |o: usize| data.get(o..o + 2).map(|b| u64::from(u16::from_le_bytes([b[0], b[1]])));
    let u64_at = |o: usize| data.get(o..o + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
    let mut end = 64u64;
    if let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38)) {
        end = end.max(phoff.saturating_add(phentsize.saturating_mul(phnum)));
        for i in 0..phnum {
            let Some(at) = phoff.checked_add(i * phentsize).and_then(|a| usize::try_from(a).ok()) else { break };
            // p_type, then p_offset at +8 and p_filesz at +32 (ELF64).
            let (Some(offset), Some(filesz)) = (u64_at(at + 8), u64_at(at + 32)) else { break };
            if u16_at(at) == Some(u64::from(PT_LOAD as u16)) {
                end = end.max(offset.saturating_add(filesz));
            }
        }
    }
    if let (Some(shoff), Some(shentsize), Some(shnum)) = (u64_at(0x28), u16_at(0x3a), u16_at(0x3c)) {
        end = end.max(shoff.saturating_add(shentsize.saturating_mul(shnum)));
        for i in 0..shnum {
            let Some(at) = shoff.checked_add(i * shentsize).and_then(|a| usize::try_from(a).ok()) else { break };
            // sh_type at +4 (SHT_NOBITS takes no bytes), sh_offset at +24, sh_size at +32.
            let (Some(kind), Some(offset), Some(size)) = (u16_at(at + 4), u64_at(at + 24), u64_at(at + 32)) else {
                break;
            };
            if kind != u64::from(object::elf::SHT_NOBITS as u16) {
                end = end.max(offset.saturating_add(size));
            }
        }
    }
    Some(end)
}

/// The architecture as Go names it (GOARCH), so the message reads as the user built it.
fn arch_name(arch: Architecture) -> String {
    match arch {
        Architecture::Aarch64 => "arm64".to_string(),
        Architecture::Arm => "arm".to_string(),
        Architecture::I386 => "386".to_string(),
        Architecture::Riscv64 => "riscv64".to_string(),
        Architecture::PowerPc64 => "ppc64".to_string(),
        Architecture::S390x => "s390x".to_string(),
        Architecture::LoongArch64 => "loong64".to_string(),
        Architecture::Mips64 => "mips64".to_string(),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// Reads and checks the headers and the symbol table.
pub(crate) fn read(path: &Path, data: &[u8]) -> Result<ElfFacts, TargetError> {
    let elf = parse(path, data)?;
    let Some(arch) = Arch::from_elf(elf.architecture()) else {
        return Err(TargetError::WrongArch { path: path.to_path_buf(), arch: arch_name(elf.architecture()) });
    };
    let is_go =
        [".gopclntab", ".data.rel.ro.gopclntab", ".go.buildinfo"].iter().any(|n| elf.section_by_name(n).is_some());
    if !is_go {
        return Err(TargetError::NotGo { path: path.to_path_buf() });
    }
    let endian = elf.endian();
    let segments: Vec<Segment> = elf
        .elf_program_headers()
        .iter()
        .filter(|ph| ph.p_type(endian) == PT_LOAD)
        .map(|ph| Segment { vaddr: ph.p_vaddr(endian), filesz: ph.p_filesz(endian), offset: ph.p_offset(endian) })
        .collect();
    let mut functions = super::arena::Builder::with_capacity(elf.symbols().count());
    for sym in elf.symbols() {
        if sym.elf_symbol().st_type() != STT_FUNC {
            continue;
        }
        let in_text = sym
            .section_index()
            .and_then(|i| elf.section_by_index(i).ok())
            .is_some_and(|s| s.kind() == SectionKind::Text);
        if !in_text {
            continue;
        }
        // Checked as UTF-8 once, all together (`finish`).
        let Ok(name) = sym.name_bytes() else { continue };
        let abi = if name.ends_with(b".abi0") { Abi::Abi0 } else { Abi::Unknown };
        functions.push(name, sym.address(), sym.size(), abi);
    }
    let functions = functions.finish();
    let mut relative = HashMap::new();
    for (offset, reloc) in elf.dynamic_relocations().into_iter().flatten() {
        if reloc.flags() == (RelocationFlags::Elf { r_type: arch.relative_relocation() }) {
            relative.insert(offset, reloc.addend() as u64);
        }
    }
    let range = |s: &object::read::elf::ElfSection64<'_, '_, Endianness>| Range { addr: s.address(), size: s.size() };
    let text = elf.section_by_name(".text").map(|s| s.address()).unwrap_or(0);
    let pclntab = elf
        .section_by_name(".gopclntab")
        .or_else(|| elf.section_by_name(".data.rel.ro.gopclntab"))
        .map(|s| s.address());
    let rodata = elf.section_by_name(".rodata").map(|s| range(&s));
    // Wherever the linker put moduledata (.noptrdata, .go.module, .data.rel.ro, ...): a
    // writable section with contents.
    let data = elf.sections().filter(|s| s.kind() == SectionKind::Data).map(|s| range(&s)).collect();
    let all_data = elf
        .sections()
        .filter(|s| matches!(s.kind(), SectionKind::Data | SectionKind::ReadOnlyData))
        .map(|s| range(&s))
        .collect();
    let build_ids = build_ids(&elf);
    Ok(ElfFacts { arch, functions, segments, relative, text, pclntab, rodata, data, all_data, build_ids })
}

/// The file offset of virtual address `addr`, if a PT_LOAD segment maps it from the file.
pub(crate) fn file_offset(segments: &[Segment], addr: u64) -> Option<u64> {
    segments
        .iter()
        .find(|s| addr >= s.vaddr && addr - s.vaddr < s.filesz)
        .and_then(|s| (addr - s.vaddr).checked_add(s.offset))
}

/// Whether the file has section `name` (its header only: nothing is decompressed).
pub(crate) fn has_section(path: &Path, data: &[u8], name: &str) -> Result<bool, TargetError> {
    Ok(parse(path, data)?.section_by_name(name).is_some())
}

/// Where section `name` is loaded; None when the file has no such section.
pub(crate) fn section_range(path: &Path, data: &[u8], name: &str) -> Option<Range> {
    let elf = parse(path, data).ok()?;
    let s = elf.section_by_name(name)?;
    Some(Range { addr: s.address(), size: s.size() })
}

/// The contents of section `name`, decompressed (SHF_COMPRESSED or `.zdebug_*`); None
/// when the file has no such section.
pub(crate) fn section<'d>(path: &Path, data: &'d [u8], name: &str) -> Result<Option<Cow<'d, [u8]>>, TargetError> {
    let elf = parse(path, data)?;
    let Some(section) = elf.section_by_name(name) else { return Ok(None) };
    section.uncompressed_data().map(Some).map_err(|source| TargetError::Section {
        path: path.to_path_buf(),
        section: name.to_string(),
        source,
    })
}

/// Section `name` as the file holds it, with how it is compressed (decompressing it is
/// the caller's choice); None when the file has no such section.
pub(crate) fn compressed_section<'d>(
    path: &Path,
    data: &'d [u8],
    name: &str,
) -> Result<Option<object::CompressedData<'d>>, TargetError> {
    let elf = parse(path, data)?;
    let Some(section) = elf.section_by_name(name) else { return Ok(None) };
    section.compressed_data().map(Some).map_err(|source| TargetError::Section {
        path: path.to_path_buf(),
        section: name.to_string(),
        source,
    })
}
