//! The BPF ELF object: programs in `uprobe/NAME` sections, legacy `maps`, relocations.

mod writer;

pub use writer::{map_def_bytes, write, BpfObject, MapDef, ObjectError, ProgramCode, LICENSE, MAP_DEF_SIZE};
