//! The file itself, before any DWARF: the ELF container (`file`: architecture, symbol
//! table, segments, sections, build ids), the memory image the loader would map
//! (`image`), finding functions by the names a script gives (`symbols`), Go's function
//! table (`pclntab`), the functions in address order found by name (`names`) and the runtime's moduledata it needs (`moduledata`), source
//! positions from that table (`srcline`), the build info (`buildinfo`), the debug file
//! kept aside (`debugfile`), the functions' names as slices of one buffer (`arena`),
//! and `open`, which puts them together.

pub(crate) mod arena;
mod buildinfo;
pub(crate) mod debugfile;
mod file;
pub(crate) mod image;
pub(crate) mod moduledata;
pub(crate) mod names;
mod open;
pub(crate) mod pclntab;
mod srcline;
pub(crate) mod symbols;
pub(crate) mod waitreasons;

pub use file::BuildIds;
pub(crate) use file::{compressed_section, file_offset, section, section_range, Segment};
pub use pclntab::{PclntabError, SourceFrame};
