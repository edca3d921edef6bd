//! `runtime.waitReasonStrings` (the names of the runtime's wait reasons: "chan receive",
//! "sync.Mutex.Lock", ...) in a binary without DWARF, so that the offcpu library names
//! the reasons of a stripped server too. Its first three entries have been the same from
//! Go 1.17 to 1.27 ("", "GC assist marking", "IO wait"; the order of the rest changed in
//! 1.26): the array is the place in `.data` where three Go string headers (pointer,
//! length) in a row point at those texts, followed by at least `MIN` more Go strings of
//! printable text (Go 1.17 has 40 entries). Its length is the symbol's size where the
//! symbol table has it, else as far as the entries are such strings: that may take in
//! the strings of an array that follows (harmless: the runtime never parks with a reason
//! past its own array, and the array's length only bounds an index).

use super::image::Image;
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

/// The entries every release starts with.
const FIRST: [&str; 3] = ["", "GC assist marking", "IO wait"];

/// Entries the array has at least.
const MIN: usize = 20;

/// Entries counted at most (Go 1.27 has 47).
const MAX: u64 = 256;

/// The link-time address of the array and its number of entries.
pub(crate) fn find(file: &object::File, image: &Image) -> Option<(u64, u64)> {
    let symbol = file
        .symbols()
        .find(|s| s.kind() == SymbolKind::Data && s.name() == Ok("runtime.waitReasonStrings") && s.size() >= 16);
    if let Some(s) = symbol {
        return Some((s.address(), s.size() / 16));
    }
    let data = file.section_by_name(".data")?;
    let (start, end) = (data.address(), data.address() + data.size());
    let entries =
        |addr: u64| (0..MAX).take_while(|i| addr + 16 * i + 16 <= end && text(image, addr + 16 * i).is_some()).count();
    let addr = (start..end.saturating_sub(16 * FIRST.len() as u64))
        .step_by(8)
        .find(|a| starts(image, *a) && entries(*a) >= MIN)?;
    Some((addr, entries(addr) as u64))
}

/// The Go string whose header is at `addr`, when it is printable text.
fn text<'d>(image: &Image<'d>, addr: u64) -> Option<&'d [u8]> {
    let (ptr, len) = (image.u64(addr)?, image.u64(addr + 8)?);
    if len == 0 {
        return Some(&[]);
    }
    let bytes = image.bytes(ptr, len.min(MAX))?;
    (len < MAX && bytes.iter().all(|b| (0x20..0x7f).contains(b))).then_some(bytes)
}

fn starts(image: &Image, addr: u64) -> bool {
    // The lengths first: cheap, and they rule out almost every address.
    FIRST.iter().enumerate().all(|(i, want)| image.u64(addr + 16 * i as u64 + 8) == Some(want.len() as u64))
        && FIRST.iter().enumerate().all(|(i, want)| text(image, addr + 16 * i as u64) == Some(want.as_bytes()))
}
