//! The target's memory as the loader maps it from the file, before it runs: bytes at
//! virtual addresses through the PT_LOAD segments, and pointer-sized words with their
//! `*_RELATIVE` dynamic relocations applied (a PIE may leave the word in the file
//! zero and put the value in the relocation's addend).

use super::Segment;
use std::collections::HashMap;

/// What the file says of the memory of a process running it, at the link-time addresses.
pub(crate) struct Image<'d> {
    pub data: &'d [u8],
    pub segments: &'d [Segment],
    /// Address of a relocated word → its value (the addend).
    pub relative: &'d HashMap<u64, u64>,
}

impl<'d> Image<'d> {
    /// The file offset of the byte at virtual address `addr`.
    pub fn file_offset(&self, addr: u64) -> Option<u64> {
        super::file_offset(self.segments, addr)
    }

    /// `len` bytes at `addr`, all from one segment's file bytes.
    pub fn bytes(&self, addr: u64, len: u64) -> Option<&'d [u8]> {
        let start = usize::try_from(self.file_offset(addr)?).ok()?;
        if len > 0 {
            let last = addr.checked_add(len - 1)?;
            if self.file_offset(last)? != start as u64 + len - 1 {
                return None;
            }
        }
        self.data.get(start..start.checked_add(usize::try_from(len).ok()?)?)
    }

    /// The bytes from `addr` to the end of its segment's file bytes.
    pub fn rest(&self, addr: u64) -> Option<&'d [u8]> {
        let s = self.segments.iter().find(|s| addr >= s.vaddr && addr - s.vaddr < s.filesz)?;
        let start = usize::try_from((addr - s.vaddr).checked_add(s.offset)?).ok()?;
        // A file cut short keeps what it has of the segment.
        let end = usize::try_from(s.offset.checked_add(s.filesz)?).ok()?.min(self.data.len());
        self.data.get(start..end)
    }

    /// The little-endian u64 at `addr`, relocated.
    pub fn u64(&self, addr: u64) -> Option<u64> {
        if let Some(v) = self.relative.get(&addr) {
            return Some(*v);
        }
        Some(u64::from_le_bytes(self.bytes(addr, 8)?.try_into().ok()?))
    }

    pub fn u32(&self, addr: u64) -> Option<u32> {
        Some(u32::from_le_bytes(self.bytes(addr, 4)?.try_into().ok()?))
    }

    pub fn u16(&self, addr: u64) -> Option<u16> {
        Some(u16::from_le_bytes(self.bytes(addr, 2)?.try_into().ok()?))
    }

    pub fn u8(&self, addr: u64) -> Option<u8> {
        Some(self.bytes(addr, 1)?[0])
    }

    /// The NUL-terminated string at `addr` (at most `max` bytes).
    pub fn c_string(&self, addr: u64, max: usize) -> Option<&'d str> {
        let start = usize::try_from(self.file_offset(addr)?).ok()?;
        let tail = self.data.get(start..)?;
        let tail = &tail[..tail.len().min(max)];
        let end = tail.iter().position(|b| *b == 0)?;
        std::str::from_utf8(&tail[..end]).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::{Image, Segment};
    use std::collections::HashMap;

    #[test]
    fn a_segment_cut_short_by_the_file_keeps_its_bytes_and_a_crafted_one_reads_nothing() {
        let data: Vec<u8> = (0..32).collect();
        let relative = HashMap::new();
        // The headers say 64 bytes from offset 16; the file holds 16 of them.
        let cut = [Segment { vaddr: 0x1000, filesz: 64, offset: 16 }];
        let image = Image { data: &data, segments: &cut, relative: &relative };
        assert_eq!(image.rest(0x1004), Some(&data[20..32]));
        assert_eq!(image.bytes(0x1000, 4), Some(&data[16..20]));
        // Offsets whose sums overflow: nothing, no panic.
        let crafted = [Segment { vaddr: 0, filesz: u64::MAX, offset: u64::MAX - 1 }];
        let image = Image { data: &data, segments: &crafted, relative: &relative };
        assert_eq!(image.rest(8), None);
        assert_eq!(image.bytes(8, 4), None);
        assert_eq!(image.file_offset(8), None);
    }
}
