//! Whether a plan may run here: `gtrace run` loads programs into the kernel as root and
//! attaches them inside another process, so a plan from elsewhere (another host, a CI
//! artifact, a file anyone could have edited) is judged on this host, against this
//! binary, before anything loads. It is refused unless it is something gtrace itself
//! would have compiled for this binary:
//!
//! - `layout`: the plan's own consistency (names, functions, events, accounting) and
//!   every map's kind, sizes and entries within what the lowering makes for its role;
//! - `values`: what the output reads by the plan's word: printf formats that parse,
//!   the Go types whole values print by, each copied value's layout inside its record;
//! - `elf`: the object is exactly the ELF gtrace's writer makes for the plan's maps and
//!   programs (so aya-obj and the kernel only ever see what gtrace writes);
//! - `code`: each program calls only the helpers gtrace's lowering emits, and every map
//!   load is a relocation against a map of the plan;
//! - `sites`: each attach point is a site gtrace chooses in its function of this binary
//!   (the entry after the stack check, a RET, an inlined call's entry, a line start, the
//!   ELF entry point), at the file offset of its address, with the trap kind of the
//!   instruction there; and a PIE's link base as this binary's.
//!
//! It is pure (no privileges, no kernel): the target is read from its file.

mod code;
mod elf;
pub(crate) mod layout;
mod sites;
mod values;

pub use code::EMITTED_HELPERS;
pub use elf::programs;

use super::Bundle;
use crate::gobin::Target;

/// Why a plan is refused: each says what and where (the program and instruction, the
/// map, the probe with its function and offset).
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("the plan's object is not an ELF object gtrace wrote: {problem}")]
    NotAnObject { problem: String },
    #[error("the plan's object has no section `{section}` for program `{program}`")]
    MissingProgram { program: String, section: String },
    #[error("program `{program}`: {problem}")]
    Program { program: String, problem: String },
    #[error("program `{program}`, instruction {index}: {problem}")]
    Instruction { program: String, index: usize, problem: String },
    #[error("program `{program}`, instruction {index}: calls helper {helper} ({id}), which gtrace never emits")]
    Helper { program: String, index: usize, helper: String, id: i32 },
    #[error("the plan's object differs from what gtrace writes for its maps and programs, from byte {offset}{place}")]
    NotAsWritten { offset: usize, place: String },
    #[error("map `{map}`: {problem}")]
    Map { map: String, problem: String },
    #[error("probe `{program}` attaches to `{function}` at {address:#x} (file offset {file_offset:#x}): {problem}")]
    Site { program: String, function: String, address: u64, file_offset: u64, problem: String },
    #[error("event {index} of the plan: {problem}")]
    Event { index: usize, problem: String },
    #[error("the plan {problem}")]
    Plan { problem: String },
}

impl Refused {
    pub fn hint(&self) -> &'static str {
        match self {
            Refused::Site { .. } => {
                "a plan attaches only where gtrace would for this binary: compile it against this build (gtrace --emit plan -o FILE)"
            }
            _ => "`gtrace run` runs only what gtrace compiles: write the plan again with gtrace --emit plan -o FILE",
        }
    }
}

impl From<Refused> for crate::diag::Failure {
    fn from(e: Refused) -> crate::diag::Failure {
        let cause = format!("refusing the plan: {e}");
        crate::diag::Failure::System { cause, hint: Some(e.hint().to_string()) }
    }
}

/// Judges `bundle` against `target`, the binary it would attach to. Ok when every
/// program, map and attach point is one gtrace would have compiled for it.
pub fn validate(bundle: &Bundle, target: &Target) -> Result<(), Refused> {
    validate_object(bundle)?;
    sites::check(&bundle.plan, target)
}

/// What can be judged without the target: the plan's layout, its maps, the object and
/// its programs.
pub fn validate_object(bundle: &Bundle) -> Result<(), Refused> {
    let plan = &bundle.plan;
    layout::check(plan)?;
    values::check(plan)?;
    let programs = elf::read(&bundle.object, plan)?;
    for p in &programs {
        code::check(p)?;
    }
    Ok(())
}
