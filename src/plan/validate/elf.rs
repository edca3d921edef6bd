//! The plan's object read back with gtrace's own checks, before aya-obj or the kernel
//! sees it: each program of the plan is the section the plan names, of whole
//! instructions, with relocations only at map loads against map symbols and at kfunc
//! calls against the kfuncs gtrace calls; then the
//! object must be byte for byte what gtrace's writer makes of those programs and the
//! plan's maps. So no section, symbol, map definition, flag or header reaches the loader
//! that gtrace would not have written, whatever the file says.

use super::Refused;
use crate::bpf::builder::{Program, Relocation};
use crate::bpf::insn::{decode_all, INSN_SIZE};
use crate::bpf::kfuncs::{Kfunc, KfuncCall};
use crate::object::{self as writer, BpfObject, MapDef, ObjectError, ProgramCode, LICENSE};
use crate::plan::Plan;
use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget};

/// The programs of `object`, one per probe of `plan` in the object's order, once the
/// object is known to be what gtrace writes for them.
pub fn read(object: &[u8], plan: &Plan) -> Result<Vec<ProgramCode>, Refused> {
    let (file, programs) = parse(object, plan)?;
    let expected = BpfObject { license: LICENSE.into(), maps: plan.maps.iter().map(MapDef::from).collect(), programs };
    let written = writer::write(&expected).map_err(refusal)?;
    if let Some(offset) = written.iter().zip(object).position(|(a, b)| a != b) {
        return Err(Refused::NotAsWritten { offset, place: place(&file, offset) });
    }
    if written.len() != object.len() {
        let offset = written.len().min(object.len());
        return Err(Refused::NotAsWritten {
            offset,
            place: format!(" (it has {} bytes, not {})", object.len(), written.len()),
        });
    }
    Ok(expected.programs)
}

/// The programs of `plan` as `object` holds them (not yet compared with what gtrace
/// writes: see `read`).
pub fn programs(object: &[u8], plan: &Plan) -> Result<Vec<ProgramCode>, Refused> {
    parse(object, plan).map(|(_, programs)| programs)
}

fn parse<'o>(object: &'o [u8], plan: &Plan) -> Result<(object::File<'o>, Vec<ProgramCode>), Refused> {
    let file = object::File::parse(object).map_err(|e| Refused::NotAnObject { problem: e.to_string() })?;
    if file.format() != object::BinaryFormat::Elf || file.architecture() != object::Architecture::Bpf {
        let problem = format!("a {:?} file for {:?}, not an ELF object for BPF", file.format(), file.architecture());
        return Err(Refused::NotAnObject { problem });
    }
    let mut programs: Vec<(usize, ProgramCode)> =
        plan.probes.iter().map(|p| program(&file, &p.program, &p.section)).collect::<Result<_, _>>()?;
    // The writer writes them in the order of the object's sections.
    programs.sort_by_key(|(index, _)| *index);
    Ok((file, programs.into_iter().map(|(_, p)| p).collect()))
}

/// Program `name` as section `section` holds it (with the section's index): whole
/// instructions, relocations at instruction starts against symbols, of the one kind
/// gtrace writes.
fn program(file: &object::File<'_>, name: &str, section: &str) -> Result<(usize, ProgramCode), Refused> {
    let at = |problem: String| Refused::Program { program: name.to_string(), problem };
    let missing = || Refused::MissingProgram { program: name.to_string(), section: section.to_string() };
    let sec = file.section_by_name(section).ok_or_else(missing)?;
    let data = sec.data().map_err(|e| at(format!("section `{section}` cannot be read: {e}")))?;
    let insns = decode_all(data).ok_or_else(|| {
        at(format!("section `{section}` has {} bytes, not a whole number of instructions", data.len()))
    })?;
    let mut relocations = Vec::new();
    let mut kfunc_calls = Vec::new();
    for (offset, reloc) in sec.relocations() {
        let index = usize::try_from(offset).unwrap_or(usize::MAX) / INSN_SIZE;
        let bad = |problem: &str| Refused::Instruction { program: name.to_string(), index, problem: problem.into() };
        if offset % INSN_SIZE as u64 != 0 || index >= insns.len() {
            return Err(bad("a relocation not at an instruction of the program"));
        }
        let RelocationTarget::Symbol(symbol) = reloc.target() else {
            return Err(bad("a relocation against no symbol"));
        };
        let name = file.symbol_by_index(symbol).and_then(|s| s.name().map(str::to_string));
        let name = name.map_err(|_| bad("a relocation against a symbol that cannot be read"))?;
        match reloc.flags() {
            object::RelocationFlags::Elf { r_type: object::elf::R_BPF_64_64 } => {
                relocations.push(Relocation { insn_index: index, map: name })
            }
            object::RelocationFlags::Elf { r_type: object::elf::R_BPF_64_32 } => {
                let kfunc =
                    Kfunc::by_name(&name).ok_or_else(|| bad("a call of a kernel function gtrace never calls"))?;
                kfunc_calls.push(KfuncCall { insn_index: index, kfunc });
            }
            _ => return Err(bad("a relocation of another kind than a map load's or a kfunc call's")),
        }
    }
    let program = Program { insns, relocations, kfunc_calls, comments: Vec::new() };
    Ok((sec.index().0, ProgramCode { name: name.to_string(), section: section.to_string(), program }))
}

/// What the writer refused of the programs read back, said as a refusal of the plan.
fn refusal(e: ObjectError) -> Refused {
    match e {
        ObjectError::BadRelocation { program, insn_index } => Refused::Instruction {
            program,
            index: insn_index,
            problem: "a relocation that is not at a map load".into(),
        },
        ObjectError::BadKfuncCall { program, insn_index } => Refused::Instruction {
            program,
            index: insn_index,
            problem: "a kfunc relocation that is not at a kfunc call".into(),
        },
        ObjectError::UnknownMap { program, map } => {
            Refused::Program { program, problem: format!("loads map {map:?}, which is no map of the plan") }
        }
        ObjectError::EmptyProgram { program } => Refused::Program { program, problem: "is empty".into() },
        ObjectError::BadSection { program, section } => {
            Refused::Program { program, problem: format!("is in section `{section}`, which holds no program") }
        }
        other => Refused::NotAnObject { problem: other.to_string() },
    }
}

/// Where byte `offset` of the object is, for the message: the section that holds it.
fn place(file: &object::File<'_>, offset: usize) -> String {
    let offset = offset as u64;
    let holds = |s: &object::Section<'_, '_>| s.file_range().is_some_and(|(at, len)| (at..at + len).contains(&offset));
    match file.sections().find(holds) {
        Some(s) => format!(" (in section {:?})", s.name().unwrap_or("?")),
        None => " (in the ELF's headers or tables)".to_string(),
    }
}
