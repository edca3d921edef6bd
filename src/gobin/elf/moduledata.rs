//! Finding the runtime's `firstmoduledata` in a binary without symbols, for the one field
//! the function table needs from it since Go 1.18: `gofunc`, the base of every funcdata
//! offset (the inline trees among them).
//!
//! `moduledata` starts with a pointer to the pclntab header and the `funcnametab` slice,
//! which identifies it. Its later fields moved between releases (coverage counters in
//! 1.20, type and itab bounds later), so rather than a layout per version: `gofunc` is the
//! word after `rodata`, which holds the start address of `.rodata`.
//! (Checked against the `go:func.*` / `go.func.*` symbol by tests/target.)

use super::image::Image;

/// Offset of the first word after the fixed head (pcHeader, six slices and `ftab`,
/// findfunctab, minpc, maxpc, text, etext) that no release changed.
const VARIABLE_FIELDS: u64 = 192;
/// Offset of `text`.
const TEXT: u64 = 176;
/// How many words after that may hold `rodata`.
const SEARCH_WORDS: u64 = 24;

/// A range of virtual addresses.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Range {
    pub addr: u64,
    pub size: u64,
}

/// The address of `firstmoduledata`: `pclntab` is the table's address, `funcnametab` the
/// address of its name table, `data` the sections that may hold moduledata.
pub(crate) fn find(image: &Image, pclntab: u64, funcnametab: u64, data: &[Range]) -> Option<u64> {
    for section in data {
        let mut at = section.addr.next_multiple_of(8);
        while at + 16 <= section.addr + section.size {
            if image.u64(at) == Some(pclntab) && image.u64(at + 8) == Some(funcnametab) {
                return Some(at);
            }
            at += 8;
        }
    }
    None
}

/// `moduledata.text`: the address Go 1.18+ function entries are offsets from (an external
/// linker may leave the pclntab header's copy zero).
pub(crate) fn text(image: &Image, moduledata: u64) -> Option<u64> {
    image.u64(moduledata + TEXT).filter(|t| *t != 0)
}

/// Candidates for `moduledata.gofunc` in the moduledata at `moduledata`; `rodata` is the
/// `.rodata` section. Each candidate is a word that follows one holding an address
/// in `.rodata` below it (`rodata`, then `gofunc`); `types` may precede it with the same
/// value, and an external linker may put C data first, so the caller tries them, last
/// first, against the inline trees (`Pclntab::gofunc_fits`).
pub(crate) fn gofunc_candidates(image: &Image, moduledata: u64, rodata: Range) -> Vec<u64> {
    let mut found = Vec::new();
    for i in 0..SEARCH_WORDS {
        let at = moduledata + VARIABLE_FIELDS + 8 * i;
        let (Some(here), Some(next)) = (image.u64(at), image.u64(at + 8)) else { break };
        let in_rodata = here >= rodata.addr && here - rodata.addr < rodata.size;
        if in_rodata && next > here && image.bytes(next, 1).is_some() {
            found.push(next);
        }
    }
    found.reverse();
    found
}

/// `moduledata.types`, the base that runtime type offsets count from, for a binary
/// without the `runtime.types` symbol: the first pair of consecutive words in the
/// moduledata at `moduledata` that lie in `.rodata` (`types`, `etypes`; the words
/// before them point into data and bss) and hold a range longer than `largest`, the
/// largest typelink offset.
pub(crate) fn types_base(image: &Image, moduledata: u64, rodata: Range, largest: u64) -> Option<u64> {
    let inside = |a: u64| a >= rodata.addr && a - rodata.addr <= rodata.size;
    for i in 0..SEARCH_WORDS {
        let at = moduledata + VARIABLE_FIELDS + 8 * i;
        let (Some(types), Some(etypes)) = (image.u64(at), image.u64(at + 8)) else { break };
        if inside(types) && inside(etypes) && etypes > types && etypes - types > largest {
            return Some(types);
        }
    }
    None
}

/// Go 1.27 on: the type descriptors lie one after the other from `moduledata.types` for
/// `typedesclen` bytes (there is no typelink table), in the `.go.type` section
/// `go_type`. Found as the words `types` (the section's start), `typedesclen` and
/// `etypes` in a row in the moduledata at `moduledata`. Returns (types, end of the
/// descriptors).
pub(crate) fn type_descriptors(image: &Image, moduledata: u64, go_type: Range) -> Option<(u64, u64)> {
    for i in 0..SEARCH_WORDS {
        let at = moduledata + VARIABLE_FIELDS + 8 * i;
        let (Some(types), Some(len), Some(etypes)) = (image.u64(at), image.u64(at + 8), image.u64(at + 16)) else {
            break;
        };
        let end = go_type.addr + go_type.size;
        if types == go_type.addr && len > 0 && len <= go_type.size && etypes >= types + len && etypes <= end {
            return Some((types, types + len));
        }
    }
    None
}
